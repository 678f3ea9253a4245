//! The launch ABI (how a launch's arguments reach a kernel; the record
//! layouts host and device share are `vigil_shared::abi`'s), one place
//! for both backends: the aligned parameter
//! buffer ([`params`]), PTX `.entry` signatures ([`ptx`]) and the checks of
//! one against the other ([`check`]). A GPU launch hands the buffer to
//! `cuLaunchKernel`; the CPU backend decodes the same bytes with the same
//! `ParamCursor`. The typed argument tuple that fills the buffer from the
//! front end's handles is the front end's (`api/args.rs`).

pub(crate) mod check;
pub(crate) mod params;
pub mod ptx;
pub mod ptx_cut;
