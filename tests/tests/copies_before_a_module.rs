//! Copies and fills issued before any module is loaded are checked too.
//! On a GPU the range-access entry that checks them comes with the first
//! kernel module loaded on the device: checks planned before it wait, and
//! run, in order, when it arrives. Its own test binary, so that on the GPU
//! nothing in the process has loaded a module before the case does.

mod common;

use common::MakeContext;
use vigil::{DeviceBuffer, Error, LaunchConfig, Module, RaceReports, ReportKind, Stream};
use vigil_kernels::races::write_one;
use vigil_tests::KERNELS_PTX;

/// Two memsets on stream a before the first module: the first is followed
/// by a host synchronisation, the second is not. After the module loads,
/// a kernel on stream b writes each buffer: only the second write races
/// (with the second memset, named at its line).
fn memsets_before_the_first_module(make: MakeContext) {
    let Some(ctx) = make(1) else {
        return;
    };
    let (a, b) = (Stream::new(&ctx).unwrap(), Stream::new(&ctx).unwrap());
    let mut synced = DeviceBuffer::<u32>::alloc(&a, 1).unwrap();
    let mut unsynced = DeviceBuffer::<u32>::alloc(&a, 1).unwrap();
    synced.fill_zero(&a).unwrap();
    a.synchronize().expect("no race yet");
    let line = line!() + 1;
    unsynced.fill_zero(&a).unwrap();
    let module = Module::from_ptx(&ctx, KERNELS_PTX).expect("kernels module");
    let write = module.kernel::<write_one>().unwrap();
    for data in [&mut synced, &mut unsynced] {
        b.launch(&write, LaunchConfig::new(1, 1), (data, 1u32))
            .unwrap();
    }
    let races = match ctx.synchronize() {
        Ok(()) => RaceReports::new(),
        Err(Error::Races(r)) => r,
        Err(e) => panic!("synchronize failed: {e}"),
    };
    println!("{}: {races}", ctx.device());
    assert_eq!(races.len(), 1, "one race expected:\n{races}");
    let r = &races.reports()[0];
    assert_eq!(r.kind, ReportKind::WriteAfterWrite, "{r}");
    assert_eq!(r.address, unsynced.device_ptr(), "{r}");
    assert_eq!(r.kernel, "write_one", "{r}");
    let memset = format!("memset on stream #{}", a.id().0);
    assert_eq!(r.prior.kernel.as_deref(), Some(memset.as_str()), "{r}");
    assert!(r.prior.host_issued, "{r}");
    let at = r.prior.location.as_ref().expect("the memset's location");
    assert!(at.file.ends_with("copies_before_a_module.rs"), "{r}");
    assert_eq!(at.line, line, "{r}");
    assert_eq!(synced.to_vec(&a).unwrap(), [1]);
}

#[test]
fn cpu_memsets_before_the_first_module() {
    memsets_before_the_first_module(common::cpu_context);
}

#[test]
fn gpu_memsets_before_the_first_module() {
    memsets_before_the_first_module(common::gpu_context);
}
