//! The launch-time half of the ABI check: packed arguments against a PTX
//! parameter list (count, each scalar's type, each buffer's device). Pure;
//! both backends' launches run it before any driver call or executor step.

use crate::error::{ArgProblem, Error, Result};
use crate::launch_abi::params::{ParamBuffer, SlotOrigin};
use crate::launch_abi::ptx::PtxParam;
use crate::types::DeviceId;
use vigil_shared::params::ParamDesc;

/// Checks packed arguments against a PTX parameter list. `names` (the
/// kernel's Rust parameters, when known) improves the messages; `device`
/// is the launch's CUDA ordinal, when known. Pure.
pub fn check_params(
    kernel: &str,
    buf: &ParamBuffer,
    ptx: &[PtxParam],
    names: &[ParamDesc],
    device: Option<usize>,
) -> Result<()> {
    check_params_on(kernel, buf, ptx, names, device.map(DeviceId::Cuda))
}

/// [`check_params`] for a launch on any device (e.g. [`DeviceId::Cpu`]).
pub fn check_params_on(
    kernel: &str,
    buf: &ParamBuffer,
    ptx: &[PtxParam],
    names: &[ParamDesc],
    device: Option<DeviceId>,
) -> Result<()> {
    let slots = buf.slots();
    if slots.len() != ptx.len() {
        return Err(Error::ArgumentCount {
            kernel: kernel.to_owned(),
            what: "PTX scalar",
            given: slots.len(),
            expected: ptx.len(),
        });
    }
    for (ptx_index, (slot, decl)) in slots.iter().zip(ptx).enumerate() {
        let problem = if !decl.accepts(slot.ty) {
            ArgProblem::PtxType {
                given: slot.ty,
                ptx_index,
                ptx_name: decl.name.clone(),
                ptx_decl: decl.decl.clone(),
            }
        } else {
            match (slot.device, device) {
                (Some(found), Some(expected)) if found != expected => {
                    ArgProblem::WrongDevice { expected, found }
                }
                _ => continue,
            }
        };
        let (index, name, rust_type) = match slot.origin {
            SlotOrigin::Arg(i) => match names.get(i) {
                Some(d) => (i, d.name.to_owned(), d.rust_type.to_owned()),
                None => (i, "?".to_owned(), slot.ty.name().to_owned()),
            },
            SlotOrigin::Hidden(i) => (i, format!("hidden #{i}"), slot.ty.name().to_owned()),
        };
        return Err(Error::Argument {
            kernel: kernel.to_owned(),
            index,
            name,
            rust_type,
            problem: Box::new(problem),
        });
    }
    Ok(())
}

/// Checks a Rust parameter list (plus hidden parameters) against a PTX
/// entry's `.param` list. Pure: no GPU needed.
pub fn check_signature(
    kernel: &str,
    params: &[ParamDesc],
    hidden: &[ParamDesc],
    ptx: &[PtxParam],
) -> Result<()> {
    let expected: usize = params.iter().chain(hidden).map(|p| p.parts.len()).sum();
    if expected != ptx.len() {
        return Err(Error::SignatureCount {
            kernel: kernel.to_owned(),
            expected,
            found: ptx.len(),
        });
    }
    let scalars = params
        .iter()
        .chain(hidden)
        .enumerate()
        .flat_map(|(index, p)| p.parts.iter().map(move |&t| (index, p, t)));
    for (ptx_index, ((index, p, t), decl)) in scalars.zip(ptx).enumerate() {
        if !decl.accepts(t) {
            return Err(Error::SignatureType {
                kernel: kernel.to_owned(),
                index,
                name: p.name,
                rust_type: p.rust_type,
                expected: t,
                ptx_index,
                ptx: Box::new(decl.clone()),
            });
        }
    }
    Ok(())
}
