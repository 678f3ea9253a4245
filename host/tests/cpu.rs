//! CPU-side tests of the host API: parameter packing and layout, argument
//! checks, PTX signature parsing and checking, launch-configuration
//! validation, error texts, and the no-GPU path. None needs a GPU.

use vigil::device::global::{GlobalPtr, GlobalSlice, GlobalSliceMut};
use vigil::device::Sanitizer;
use vigil::unstable::launch_abi::{check_params, check_signature, SlotOrigin};
use vigil::unstable::ptx::{parse_entries, PtxParam};
use vigil::{
    pack_args, pack_values, ArgProblem, DeviceId, DeviceLimits, Dim3, Error, Kernel, KernelArg,
    KernelArgValue, LaunchConfig, LaunchConfigError, ParamBuffer,
};
use vigil_shared::params::{ParamCursor, ParamDesc, PtxType};

mod common;
use common::*;

/// `fn mixed(a: u8, p: GlobalPtr<u32>, b: u16, c: f64, s: GlobalSlice<f32>, d: f32, e: i8, out: GlobalSliceMut<u64>)`
#[allow(non_camel_case_types)]
struct mixed {}
impl Kernel for mixed {
    const NAME: &'static str = "mixed";
    const PARAMS: &'static [ParamDesc] = &[
        desc("a", "u8", &[PtxType::B8]),
        desc("p", "GlobalPtr<u32>", PTR),
        desc("b", "u16", &[PtxType::B16]),
        desc("c", "f64", &[PtxType::F64]),
        desc("s", "GlobalSlice<f32>", SLICE),
        desc("d", "f32", &[PtxType::F32]),
        desc("e", "i8", &[PtxType::B8]),
        desc("out", "GlobalSliceMut<u64>", SLICE),
    ];
    type Params = (
        u8,
        GlobalPtr<u32>,
        u16,
        f64,
        GlobalSlice<f32>,
        f32,
        i8,
        GlobalSliceMut<u64>,
    );
    unsafe fn run_host<S: Sanitizer>(_: &[u8]) {}
}

/// A broken `Kernel` impl: `PARAMS` lists one parameter, `Params` two.
#[allow(non_camel_case_types)]
struct broken_arity {}
impl Kernel for broken_arity {
    const NAME: &'static str = "broken_arity";
    const PARAMS: &'static [ParamDesc] = &[desc("a", "u32", &[PtxType::B32])];
    type Params = (u32, u32);
    unsafe fn run_host<S: Sanitizer>(_: &[u8]) {}
}

/// Stands in for a device buffer on a machine without a GPU (the CPU
/// backend will have its own view types implementing `KernelArg`).
#[derive(Clone, Copy)]
struct FakeView {
    addr: u64,
    len: usize,
    device: usize,
}

// SAFETY: test only; the packed buffers are never launched.
unsafe impl<T, S> KernelArg<GlobalSlice<T, S>> for FakeView {
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        buf.push_pointer(self.addr, Some(self.device));
        buf.push(self.len as u64);
        Ok(())
    }
}
// SAFETY: as above.
unsafe impl<T, S> KernelArg<GlobalSliceMut<T, S>> for FakeView {
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        <Self as KernelArg<GlobalSlice<T, S>>>::pack(self, buf)
    }
}
// SAFETY: as above.
unsafe impl<T, S> KernelArg<GlobalPtr<T, S>> for FakeView {
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        if self.len == 0 {
            return Err(ArgProblem::EmptyForPointer);
        }
        buf.push_pointer(self.addr, Some(self.device));
        Ok(())
    }
}

/// A faulty argument type: claims to be a slice but packs only a pointer.
struct Faulty;
// SAFETY: test only; never launched.
unsafe impl<T, S> KernelArg<GlobalSliceMut<T, S>> for Faulty {
    fn pack(self, buf: &mut ParamBuffer) -> Result<(), ArgProblem> {
        buf.push_pointer(0x1000, None);
        Ok(())
    }
}

fn view(addr: u64, len: usize) -> FakeView {
    FakeView {
        addr,
        len,
        device: 0,
    }
}

// ---------------------------------------------------------------------------
// ParamBuffer layout.

#[test]
fn mixed_scalars_and_pointers_are_aligned_in_order() {
    let mut b = ParamBuffer::new();
    assert_eq!(b.push(7u8), 0);
    assert_eq!(b.push_pointer(0xdead_beef_0000, None), 8);
    assert_eq!(b.push(0x1234u16), 16);
    assert_eq!(b.push(2.5f64), 24);
    assert_eq!(b.push_pointer(0x1000, Some(1)), 32);
    assert_eq!(b.push(100u64), 40);
    assert_eq!(b.push(1.5f32), 48);
    assert_eq!(b.push(-3i8), 52);
    assert_eq!(b.push(9u32), 56);
    assert_eq!(b.len(), 60);
    assert_eq!(b.as_bytes().len(), 60);
    assert_eq!(
        b.as_bytes().as_ptr() as usize % 8,
        0,
        "storage is 8-byte aligned"
    );

    let bytes = b.as_bytes();
    assert_eq!(bytes[0], 7);
    assert_eq!(&bytes[1..8], &[0; 7], "padding is zero");
    assert_eq!(
        u64::from_ne_bytes(bytes[8..16].try_into().unwrap()),
        0xdead_beef_0000
    );
    assert_eq!(
        u16::from_ne_bytes(bytes[16..18].try_into().unwrap()),
        0x1234
    );
    assert_eq!(f64::from_ne_bytes(bytes[24..32].try_into().unwrap()), 2.5);
    assert_eq!(f32::from_ne_bytes(bytes[48..52].try_into().unwrap()), 1.5);
    assert_eq!(bytes[52] as i8, -3);
    assert_eq!(b.read::<u64>(4), Some(0x1000));
    assert_eq!(b.read::<u32>(8), Some(9));
    assert_eq!(b.read::<u32>(0), None, "wrong size reads nothing");

    let tys: Vec<PtxType> = b.slots().iter().map(|s| s.ty).collect();
    use PtxType::*;
    assert_eq!(tys, [B8, Ptr, B16, F64, Ptr, B64, F32, B8, B32]);
    assert_eq!(b.slots()[4].device, Some(DeviceId::Cuda(1)));
    assert_eq!(b.slots()[1].device, None);
}

#[test]
fn kernel_params_point_into_the_buffer_at_each_offset() {
    let mut b = ParamBuffer::new();
    b.push(1u8);
    b.push_pointer(0xabc0, None);
    b.push(3u16);
    b.push(4.0f64);
    let base = b.as_bytes().as_ptr() as usize;
    let params = b.kernel_params();
    let got: Vec<usize> = params
        .as_slice()
        .iter()
        .map(|p| *p as usize - base)
        .collect();
    assert_eq!(got, [0, 8, 16, 24]);
    // Reading through the pointers gives the values (what the driver does).
    // SAFETY: each pointer points into `b`, which is alive and unchanged,
    // at an offset aligned for the value's type.
    unsafe {
        assert_eq!(*(params.as_slice()[0] as *const u8), 1);
        assert_eq!(*(params.as_slice()[1] as *const u64), 0xabc0);
        assert_eq!(*(params.as_slice()[2] as *const u16), 3);
        assert_eq!(*(params.as_slice()[3] as *const f64), 4.0);
    }
}

#[test]
fn empty_buffer_hands_the_driver_a_null_array() {
    let b = ParamBuffer::new();
    assert!(b.is_empty());
    assert_eq!(b.len(), 0);
    assert!(b.kernel_params().as_mut_ptr().is_null());
}

#[test]
fn hidden_arguments_follow_the_user_arguments() {
    let x = view(0x7000_0000, 16);
    let mut y = view(0x7100_0000, 16);
    y.device = 0;
    let mut b = pack_args::<axpy, _>((2.0f32, x, y)).unwrap();
    let user = b.slots().len();
    let user_len = b.len();
    let h0 = b.append_hidden_pointer(0x4000_0000_0000, Some(0));
    let h1 = b.append_hidden(5u32);
    let h2 = b.append_hidden(6u64);
    assert_eq!(user_len, 40);
    assert_eq!((h0, h1, h2), (40, 48, 56));
    assert_eq!(b.hidden_count(), 3);
    let origins: Vec<SlotOrigin> = b.slots()[user..].iter().map(|s| s.origin).collect();
    assert_eq!(
        origins,
        [
            SlotOrigin::Hidden(0),
            SlotOrigin::Hidden(1),
            SlotOrigin::Hidden(2)
        ]
    );
    assert_eq!(b.read::<u64>(user), Some(0x4000_0000_0000));
    assert_eq!(b.read::<u32>(user + 1), Some(5));
    // Hidden arguments are checked against the PTX like user arguments.
    let entries = parse_entries(AXPY_PTX).unwrap();
    let err = check_params("axpy", &b, &entries[0].params, axpy::PARAMS, Some(0)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ArgumentCount {
                given: 8,
                expected: 5,
                ..
            }
        ),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// Typed packing.

#[test]
fn pack_args_matches_the_shared_cursor_layout() {
    let p = view(0x1_0000, 1);
    let s = view(0x2_0000, 10);
    let out = view(0x3_0000, 10);
    let b = pack_args::<mixed, _>((1u8, p, 2u16, 3.0f64, s, 4.0f32, -5i8, out)).unwrap();
    let mut c = ParamCursor::new();
    let expect: Vec<(usize, PtxType)> = mixed::PARAMS
        .iter()
        .flat_map(|d| d.parts.iter())
        .map(|&t| (c.next(t), t))
        .collect();
    let got: Vec<(usize, PtxType)> = b.slots().iter().map(|s| (s.offset, s.ty)).collect();
    assert_eq!(got, expect);
    assert_eq!(b.len(), c.len());
    assert_eq!(b.len(), vigil_shared::params::packed_size(mixed::PARAMS));
    let origins: Vec<usize> = b
        .slots()
        .iter()
        .map(|s| match s.origin {
            SlotOrigin::Arg(i) => i,
            SlotOrigin::Hidden(_) => usize::MAX,
        })
        .collect();
    assert_eq!(origins, [0, 1, 2, 3, 4, 4, 5, 6, 7, 7]);
    assert_eq!(b.read::<u64>(1), Some(0x1_0000));
    assert_eq!(
        b.read::<u64>(5),
        Some(10),
        "slice length follows its pointer"
    );
    assert_eq!(b.read::<f32>(6), Some(4.0));
}

#[test]
fn float_literals_infer_from_the_kernel_signature() {
    // `2.0` becomes an f32 because the kernel's first parameter is f32.
    let b = pack_args::<axpy, _>((2.0, view(8, 4), view(16, 4))).unwrap();
    assert_eq!(b.read::<f32>(0), Some(2.0));
}

#[test]
fn empty_buffer_for_a_pointer_parameter_is_a_typed_error() {
    let args = (
        1u8,
        view(0x1000, 0),
        2u16,
        3.0f64,
        view(0, 0),
        4.0f32,
        0i8,
        view(0, 0),
    );
    let err = pack_args::<mixed, _>(args).unwrap_err();
    match &err {
        Error::Argument {
            kernel,
            index,
            name,
            rust_type,
            problem,
        } => {
            assert_eq!((kernel.as_str(), *index, name.as_str()), ("mixed", 1, "p"));
            assert_eq!(rust_type, "GlobalPtr<u32>");
            assert_eq!(**problem, ArgProblem::EmptyForPointer);
        }
        e => panic!("unexpected {e:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("kernel `mixed`"), "{text}");
    assert!(text.contains("argument 1 `p: GlobalPtr<u32>`"), "{text}");
    assert!(text.contains("at least one element"), "{text}");
}

#[test]
fn an_argument_that_packs_the_wrong_scalars_is_caught() {
    let err = pack_args::<axpy, _>((1.0f32, view(0, 0), Faulty)).unwrap_err();
    match &err {
        Error::Argument {
            index: 2,
            name,
            problem,
            ..
        } => {
            assert_eq!(name, "y");
            assert_eq!(
                **problem,
                ArgProblem::Abi {
                    expected: SLICE.to_vec(),
                    got: vec![PtxType::Ptr]
                }
            );
        }
        e => panic!("unexpected {e:?}"),
    }
    assert!(err.to_string().contains("packs [.u64 (pointer)]"), "{err}");
}

#[test]
fn kernel_impl_with_inconsistent_arity_is_an_error() {
    let err = pack_args::<broken_arity, _>((1u32, 2u32)).unwrap_err();
    assert!(
        matches!(
            err,
            Error::ArgumentCount {
                given: 2,
                expected: 1,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("2 argument(s) given but the kernel takes 1"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// PTX signature parsing.

#[test]
fn parses_llvm_generated_axpy() {
    let e = parse_entries(AXPY_PTX).unwrap();
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].name, "axpy");
    let p = &e[0].params;
    let tys: Vec<Option<PtxType>> = p.iter().map(|p| p.ty).collect();
    use PtxType::*;
    assert_eq!(tys, [Some(F32), Some(Ptr), Some(B64), Some(Ptr), Some(B64)]);
    assert_eq!(p[1].name, "axpy_param_1");
    assert_eq!(p[1].decl, ".u64 .ptr .align 1");
    assert_eq!(p[2].decl, ".u64");
}

#[test]
fn parses_several_entries_ignoring_comments_funcs_and_strings() {
    let ptx = r#"
.version 8.0
.target sm_90
.address_size 64
.file 1 "/src//kernels/.entry fake(.param .u32 x).rs"
/* .visible .entry commented_out(.param .u32 a) */
// .visible .entry also_commented(.param .u32 a)
.func (.param .b32 func_retval0) helper(.param .b32 helper_param_0);
.extern .shared .align 16 .b8 __vigil_dynamic_smem[];
.visible .entry no_params()
{
    ret;
}
.entry bare
{
    ret;
}
.weak .entry many(
    .param .u8 many_param_0, // trailing comment
    .param .s16 many_param_1,
    .param .b32 many_param_2,
    .param .s64 many_param_3,
    .param .f64 many_param_4,
    .param .align 8 .b8 many_param_5[16],
    .param .f16 many_param_6,
    .param .u64 .ptr .global .align 4 many_param_7
)
{
    ret;
}
"#;
    let e = parse_entries(ptx).unwrap();
    let names: Vec<&str> = e.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["no_params", "bare", "many"]);
    assert!(e[0].params.is_empty() && e[1].params.is_empty());
    let tys: Vec<Option<PtxType>> = e[2].params.iter().map(|p| p.ty).collect();
    use PtxType::*;
    assert_eq!(
        tys,
        [
            Some(B8),
            Some(B16),
            Some(B32),
            Some(B64),
            Some(F64),
            None,
            None,
            Some(Ptr)
        ]
    );
    assert_eq!(e[2].params[5].name, "many_param_5");
    assert_eq!(e[2].params[5].decl, ".align 8 .b8");
}

#[test]
fn malformed_signatures_are_errors_not_panics() {
    for bad in [
        ".visible .entry k(\n.param .u32 k_param_0\n",
        ".visible .entry (\n)",
        ".visible .entry k(.u32 k_param_0)",
        ".visible .entry k(.param k_param_0 .u32 x)",
    ] {
        let err = parse_entries(bad).unwrap_err();
        assert!(matches!(err, Error::PtxText { .. }), "{bad:?}: {err:?}");
        assert!(err.to_string().starts_with("malformed PTX"), "{err}");
    }
    // Arbitrary bytes never panic.
    for junk in [
        "",
        ".entry",
        ".entry\t",
        "((((",
        ".entry x(,,,)",
        "\u{0}.entry é(",
    ] {
        let _ = parse_entries(junk);
    }
}

// ---------------------------------------------------------------------------
// Signature checks (Rust declaration vs PTX).

fn axpy_params() -> Vec<PtxParam> {
    parse_entries(AXPY_PTX).unwrap().remove(0).params
}

#[test]
fn matching_signature_passes() {
    check_signature("axpy", axpy::PARAMS, &[], &axpy_params()).unwrap();
}

#[test]
fn stale_ptx_type_mismatch_names_kernel_and_parameter() {
    let err = check_signature("axpy", axpy_stale::PARAMS, &[], &axpy_params()).unwrap_err();
    match &err {
        Error::SignatureType {
            kernel,
            index,
            name,
            expected,
            ptx_index,
            ptx,
            ..
        } => {
            assert_eq!((kernel.as_str(), *index, *name), ("axpy", 0, "n"));
            assert_eq!(*expected, PtxType::B32);
            assert_eq!((*ptx_index, ptx.name.as_str()), (0, "axpy_param_0"));
        }
        e => panic!("unexpected {e:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("kernel `axpy`"), "{text}");
    assert!(text.contains("parameter 0 `n: u32`"), "{text}");
    assert!(text.contains("`axpy_param_0` is declared `.f32`"), "{text}");
}

#[test]
fn stale_ptx_count_mismatch() {
    let mut ptx = axpy_params();
    ptx.pop();
    let err = check_signature("axpy", axpy::PARAMS, &[], &ptx).unwrap_err();
    assert!(
        matches!(
            err,
            Error::SignatureCount {
                expected: 5,
                found: 4,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("stale or mismatched PTX"), "{err}");
}

#[test]
fn hidden_parameters_are_part_of_the_signature() {
    const HIDDEN: &[ParamDesc] = &[desc("__vigil_state", "u64", &[PtxType::B64])];
    let mut ptx = axpy_params();
    let err = check_signature("axpy__vigil", axpy::PARAMS, HIDDEN, &ptx).unwrap_err();
    assert!(
        matches!(
            err,
            Error::SignatureCount {
                expected: 6,
                found: 5,
                ..
            }
        ),
        "{err:?}"
    );
    ptx.push(PtxParam {
        name: "axpy__vigil_param_5".into(),
        ty: Some(PtxType::Ptr),
        decl: ".u64 .ptr".into(),
    });
    check_signature("axpy__vigil", axpy::PARAMS, HIDDEN, &ptx).unwrap();
    ptx[5].ty = Some(PtxType::B32);
    let err = check_signature("axpy__vigil", axpy::PARAMS, HIDDEN, &ptx).unwrap_err();
    assert!(
        matches!(
            err,
            Error::SignatureType {
                index: 3,
                name: "__vigil_state",
                ..
            }
        ),
        "{err:?}"
    );
}

// ---------------------------------------------------------------------------
// Runtime argument checks (untyped path) against PTX.

#[test]
fn untyped_values_are_checked_against_the_ptx() {
    let ptx = axpy_params();
    // Right shape: f32, then two slices (built here from raw scalars,
    // since slices of device memory need a GPU).
    let ok = [
        KernelArgValue::F32(2.0),
        KernelArgValue::U64(0x1000),
        KernelArgValue::U64(4),
        KernelArgValue::U64(0x2000),
        KernelArgValue::U64(4),
    ];
    let b = pack_values("axpy", &ok).unwrap();
    check_params("axpy", &b, &ptx, &[], Some(0)).unwrap();

    // A u32 where the PTX wants .f32.
    let mut bad = ok;
    bad[0] = KernelArgValue::U32(2);
    let b = pack_values("axpy", &bad).unwrap();
    let err = check_params("axpy", &b, &ptx, &[], Some(0)).unwrap_err();
    match &err {
        Error::Argument {
            index: 0, problem, ..
        } => {
            assert!(matches!(
                **problem,
                ArgProblem::PtxType {
                    given: PtxType::B32,
                    ptx_index: 0,
                    ..
                }
            ));
        }
        e => panic!("unexpected {e:?}"),
    }
    assert!(
        err.to_string()
            .contains("`axpy_param_0` is declared `.f32`"),
        "{err}"
    );

    // An f32 where the PTX wants a u64 length (an f64 would pass: PTX
    // `.u64` and `.b64` both parse as B64, which accepts f64 bits).
    let mut bad = ok;
    bad[2] = KernelArgValue::F32(4.0);
    let b = pack_values("axpy", &bad).unwrap();
    assert!(check_params("axpy", &b, &ptx, &[], Some(0)).is_err());

    // Too few.
    let b = pack_values("axpy", &ok[..3]).unwrap();
    let err = check_params("axpy", &b, &ptx, &[], Some(0)).unwrap_err();
    assert!(matches!(
        err,
        Error::ArgumentCount {
            given: 3,
            expected: 5,
            what: "PTX scalar",
            ..
        }
    ));
}

#[test]
fn buffers_of_another_device_are_rejected_before_launch() {
    let x = FakeView {
        addr: 0x1000,
        len: 4,
        device: 1,
    };
    let b = pack_args::<axpy, _>((1.0f32, x, view(0x2000, 4))).unwrap();
    let err = check_params("axpy", &b, &axpy_params(), axpy::PARAMS, Some(0)).unwrap_err();
    match &err {
        Error::Argument {
            index: 1,
            name,
            problem,
            ..
        } => {
            assert_eq!(name, "x");
            assert_eq!(
                **problem,
                ArgProblem::WrongDevice {
                    expected: DeviceId::Cuda(0),
                    found: DeviceId::Cuda(1)
                }
            );
        }
        e => panic!("unexpected {e:?}"),
    }
    assert!(
        err.to_string()
            .contains("buffer is on device 1, the launch is on device 0"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------
// Launch configurations.

fn check(c: LaunchConfig) -> Result<(), LaunchConfigError> {
    c.validate(&DeviceLimits::CUDA_BASELINE)
}

#[test]
fn valid_configs_pass() {
    check(LaunchConfig::new(1u32, 1u32)).unwrap();
    check(LaunchConfig::new(i32::MAX as u32, 1024u32)).unwrap();
    check(LaunchConfig::new(
        (70_000u32, 65_535, 65_535),
        (32u32, 32, 1),
    ))
    .unwrap();
    check(LaunchConfig::new(1u32, (4u32, 4, 64))).unwrap();
    check(LaunchConfig::new(1u32, 256u32).with_shared_mem(48 * 1024)).unwrap();
}

#[test]
fn zero_dimensions_are_rejected() {
    let e = check(LaunchConfig::new(0u32, 256u32)).unwrap_err();
    assert_eq!(e, LaunchConfigError::ZeroDim { which: "grid.x" });
    let e = check(LaunchConfig::new(4u32, (32u32, 0, 1))).unwrap_err();
    assert_eq!(e, LaunchConfigError::ZeroDim { which: "block.y" });
}

#[test]
fn too_large_dimensions_are_rejected() {
    let e = check(LaunchConfig::new(1u32, 1025u32)).unwrap_err();
    assert_eq!(
        e,
        LaunchConfigError::BlockTooLarge {
            threads: 1025,
            limit: 1024,
            per_kernel: false
        }
    );
    let e = check(LaunchConfig::new(1u32, (64u32, 32, 1))).unwrap_err();
    assert!(matches!(
        e,
        LaunchConfigError::BlockTooLarge { threads: 2048, .. }
    ));
    let e = check(LaunchConfig::new(1u32, (1u32, 1, 65))).unwrap_err();
    assert_eq!(
        e,
        LaunchConfigError::DimTooLarge {
            which: "block.z",
            value: 65,
            limit: 64
        }
    );
    let e = check(LaunchConfig::new((1u32, 65_536, 1), 32u32)).unwrap_err();
    assert_eq!(
        e,
        LaunchConfigError::DimTooLarge {
            which: "grid.y",
            value: 65_536,
            limit: 65_535
        }
    );
    let e = check(LaunchConfig::new((1u32, 1, 65_536), 32u32)).unwrap_err();
    assert_eq!(
        e,
        LaunchConfigError::DimTooLarge {
            which: "grid.z",
            value: 65_536,
            limit: 65_535
        }
    );
    let e = check(LaunchConfig::new(u32::MAX, 32u32)).unwrap_err();
    assert!(matches!(
        e,
        LaunchConfigError::DimTooLarge {
            which: "grid.x",
            ..
        }
    ));
}

#[test]
fn shared_memory_limits_are_checked() {
    let e = check(LaunchConfig::new(1u32, 32u32).with_shared_mem(48 * 1024 + 1)).unwrap_err();
    assert!(matches!(
        e,
        LaunchConfigError::SharedMemTooLarge {
            requested: 49153,
            ..
        }
    ));
    let h100 = DeviceLimits {
        max_shared_mem_per_block_optin: 227 * 1024,
        ..DeviceLimits::CUDA_BASELINE
    };
    let c = LaunchConfig::new(1u32, 32u32).with_shared_mem(200 * 1024);
    c.validate(&h100).unwrap();
    // The kernel's static shared memory counts too.
    let e = c.validate_for(&h100, 1024, 40 * 1024).unwrap_err();
    assert_eq!(
        e,
        LaunchConfigError::SharedMemTooLarge {
            requested: 200 * 1024,
            static_bytes: 40 * 1024,
            limit: 227 * 1024
        }
    );
}

#[test]
fn per_kernel_thread_limit_is_checked() {
    let c = LaunchConfig::new(1u32, 1024u32);
    let e = c
        .validate_for(&DeviceLimits::CUDA_BASELINE, 512, 0)
        .unwrap_err();
    assert_eq!(
        e,
        LaunchConfigError::BlockTooLarge {
            threads: 1024,
            limit: 512,
            per_kernel: true
        }
    );
    assert!(
        e.to_string().contains("for this kernel (register use)"),
        "{e}"
    );
}

#[test]
fn config_helpers() {
    let c = LaunchConfig::for_num_elems(1000, 256);
    assert_eq!(
        (c.grid, c.block),
        (Dim3::new(4, 1, 1), Dim3::new(256, 1, 1))
    );
    assert_eq!(LaunchConfig::for_num_elems(1024, 256).grid.x, 4);
    assert_eq!(LaunchConfig::for_num_elems(1, 256).grid.x, 1);
    assert_eq!(
        LaunchConfig::for_num_elems(0, 256).grid.x,
        1,
        "n = 0 still launches one block"
    );
    assert_eq!(LaunchConfig::for_num_elems(1 << 26, 256).grid.x, 1 << 18);
    // Grids past the device's x limit saturate and fail validation (no panic).
    let huge = LaunchConfig::for_num_elems(usize::MAX, 1);
    assert_eq!(huge.grid.x, u32::MAX);
    assert!(check(huge).is_err());
    // Block 0 does not divide by zero; validation reports it.
    let e = check(LaunchConfig::for_num_elems(10, 0)).unwrap_err();
    assert_eq!(e, LaunchConfigError::ZeroDim { which: "block.x" });
    let g = LaunchConfig::for_grid_stride(1 << 26, 256, 132 * 4);
    assert_eq!(g.grid.x, 528);
    assert_eq!(LaunchConfig::for_grid_stride(100, 256, 528).grid.x, 1);
    assert_eq!(Dim3::from((2u32, 3u32)), Dim3::new(2, 3, 1));
    assert_eq!(Dim3::from([2u32, 3, 4]).volume(), 24);
    assert_eq!(
        LaunchConfig::new((2u32, 2, 2), (8u32, 8, 1)).total_threads(),
        512
    );
}

#[test]
fn launch_config_error_text_names_the_kernel() {
    let e = Error::LaunchConfig {
        kernel: "axpy".into(),
        problem: LaunchConfigError::DimTooLarge {
            which: "grid.y",
            value: 70_000,
            limit: 65_535,
        },
    };
    assert_eq!(
        e.to_string(),
        "kernel `axpy`: invalid launch configuration: grid.y = 70000 exceeds the device limit 65535"
    );
}

// ---------------------------------------------------------------------------
// Error texts.

#[test]
fn driver_error_texts() {
    let e = Error::Driver {
        call: "cuMemAlloc_v2",
        name: "CUDA_ERROR_OUT_OF_MEMORY".into(),
        code: 2,
    };
    assert_eq!(
        e.to_string(),
        "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2)"
    );
    assert_eq!(e.driver_code(), Some(2));
    let e = Error::PtxLoad {
        name: "CUDA_ERROR_INVALID_PTX".into(),
        code: 218,
        log: "ptxas fatal".into(),
    };
    assert!(
        e.to_string()
            .contains("CUDA_ERROR_INVALID_PTX (218); JIT log:\nptxas fatal"),
        "{e}"
    );
    let e = Error::KernelNotFound {
        kernel: "axpi".into(),
        available: vec!["axpy".into(), "reduce_sum".into()],
    };
    assert_eq!(
        e.to_string(),
        "kernel `axpi` not found in the PTX module (entry points: axpy, reduce_sum)"
    );
    let e = Error::OutOfBounds {
        start: 5,
        end: 12,
        len: 10,
    };
    assert_eq!(
        e.to_string(),
        "range 5..12 out of bounds for a device slice of length 10"
    );
    let e = Error::LengthMismatch {
        op: "copy_from_host",
        dst: 4,
        src: 5,
    };
    assert!(
        e.to_string()
            .contains("destination has 4 element(s), source has 5"),
        "{e}"
    );
    let e = Error::Launch {
        kernel: "axpy".into(),
        name: "CUDA_ERROR_INVALID_VALUE".into(),
        code: 1,
    };
    assert_eq!(
        e.to_string(),
        "launching kernel `axpy` failed: CUDA_ERROR_INVALID_VALUE (1)"
    );
}

// ---------------------------------------------------------------------------
// The no-GPU path (this test also passes on a GPU machine).

#[test]
fn no_gpu_is_an_error_not_a_panic() {
    let result = std::panic::catch_unwind(vigil::Context::default_device);
    let ctx = result.expect("Context::new must never panic");
    match ctx {
        Ok(ctx) => {
            // A GPU machine: the context works and reports its device.
            assert!(!ctx.name().is_empty());
            assert!(ctx.sm_count() > 0);
            assert!(vigil::gpu_available().is_ok());
            let e = vigil::Context::new(10_000).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::InvalidDevice {
                        ordinal: 10_000,
                        ..
                    }
                ),
                "{e}"
            );
        }
        Err(e) => {
            assert!(e.is_no_gpu(), "expected DriverNotFound/NoDevice, got {e:?}");
            let again = vigil::gpu_available().unwrap_err();
            assert_eq!(again, e, "the outcome is cached and stable");
            assert!(vigil::device_count().is_err());
            assert!(vigil::Context::new(3).is_err());
            if let Error::DriverNotFound { searched } = &e {
                assert!(searched.contains("libcuda.so"), "{searched}");
                assert!(
                    e.to_string().starts_with("CUDA driver library not found"),
                    "{e}"
                );
            }
            if !vigil::unstable::testing::gpu_required() {
                assert!(vigil::unstable::testing::require_gpu().is_none());
            }
        }
    }
}

#[test]
fn handles_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<vigil::Context>();
    check::<vigil::Stream>();
    check::<vigil::Event>();
    check::<vigil::Module>();
    check::<vigil::Function>();
    check::<vigil::KernelFn<axpy>>();
    check::<vigil::DeviceBuffer<f32>>();
    check::<vigil::DeviceSlice<'static, f32>>();
    check::<vigil::DeviceSliceMut<'static, f32>>();
    check::<ParamBuffer>();
    check::<Error>();
    // Small enough to return by value everywhere (and to wrap).
    assert!(
        std::mem::size_of::<Error>() <= 96,
        "{}",
        std::mem::size_of::<Error>()
    );
}

/// The sanitizer's settings' old names still compile, for one release, and
/// name the same types.
#[test]
#[allow(deprecated)]
fn the_old_settings_names_are_the_new_types() {
    let builder: vigil::VmmConfigBuilder = vigil::VmmConfig::builder();
    let old: vigil::VmmConfig = builder.seed(7).build().unwrap();
    let new: vigil::SanitizerConfig = vigil::SanitizerConfig::builder().seed(7).build().unwrap();
    assert_eq!(old, new);
    let ctx = vigil::Context::builder().cpu().vmm_config(old);
    assert_eq!(
        format!("{ctx:?}"),
        format!(
            "{:?}",
            vigil::Context::builder().cpu().sanitizer_config(new)
        )
    );
}
