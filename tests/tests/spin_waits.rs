//! Spin-waits as CUDA programs write them finish on every backend, plain
//! and sanitized: a thread waiting for a flag that a thread of another
//! warp of its block, or of another block, sets, polling by exchange, add
//! of 0, compare-exchange, volatile load (global or block-shared), or
//! relaxed load then fence. The CPU backend lets a block's other threads
//! run whenever a thread keeps polling, with the sanitizer on or off; a
//! spin on a flag nobody sets ends there with the livelock error, plain
//! and sanitized, naming the kernel line that polls.

use std::time::Duration;
use vigil::unstable::cpu::CpuError;
use vigil::{Context, DeviceBuffer, Error, LaunchConfig, Module, Stream};
use vigil_kernels::spin_waits::{shared_volatile_handoff, spin_handoff, NOBODY, PATTERNS, PAYLOAD};
use vigil_tests::KERNELS_PTX;

/// The device of `ctx` with its sanitizer setting, and on the CPU two
/// workers (two blocks that wait for each other must run at once, as on
/// a GPU they must be co-resident) and a launch timeout, so that a spin
/// the backend failed to end fails the test instead of hanging it.
fn context_like(ctx: &Context) -> vigil::Result<Context> {
    if !ctx.is_cpu() {
        return Ok(ctx.clone());
    }
    Context::builder()
        .cpu()
        .sanitize(ctx.is_sanitized())
        .cpu_workers(2)
        .launch_timeout(Some(Duration::from_secs(60)))
        .build()
}

/// Where the setter of [`spin_handoff`] runs relative to the waiter
/// (thread 0 of block 0).
#[derive(Clone, Copy, Debug)]
enum Setter {
    /// Thread 32: the second warp of the waiter's block, which the CPU
    /// backend starts only after the first warp has begun to spin.
    OtherWarp,
    /// Thread 0 of block 1.
    OtherBlock,
}

/// Every pattern of [`spin_handoff`] with the setter at `setter`: each
/// launch ends, and the waiter read the payload.
fn every_pattern_finishes(ctx: &Context, setter: Setter) -> vigil::Result<()> {
    let ctx = &context_like(ctx)?;
    let stream = Stream::new(ctx)?;
    let k = Module::from_ptx(ctx, KERNELS_PTX)?.kernel::<spin_handoff>()?;
    let (config, index) = match setter {
        Setter::OtherWarp => (LaunchConfig::new(1, 64), 32),
        Setter::OtherBlock => (LaunchConfig::new(2, 32), 32),
    };
    for (pattern, name) in PATTERNS {
        let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
        let mut flag = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
        let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
        stream.launch(&k, config, (&mut data, &mut flag, &mut out, pattern, index))?;
        ctx.synchronize()?;
        assert_eq!(
            out.to_vec(&stream)?,
            [PAYLOAD],
            "{name}, setter in the {setter:?}"
        );
    }
    Ok(())
}

#[vigil::test]
fn spins_on_another_warp_of_the_block_finish(ctx: &Context) -> vigil::Result<()> {
    every_pattern_finishes(ctx, Setter::OtherWarp)
}

#[vigil::test(plain)]
fn spins_on_another_warp_of_the_block_finish_plain(ctx: &Context) -> vigil::Result<()> {
    every_pattern_finishes(ctx, Setter::OtherWarp)
}

#[vigil::test]
fn spins_on_another_block_finish(ctx: &Context) -> vigil::Result<()> {
    every_pattern_finishes(ctx, Setter::OtherBlock)
}

#[vigil::test(plain)]
fn spins_on_another_block_finish_plain(ctx: &Context) -> vigil::Result<()> {
    every_pattern_finishes(ctx, Setter::OtherBlock)
}

/// [`shared_volatile_handoff`]: thread 0 polls a shared flag that thread
/// 32 sets; the launch ends and thread 0 read the payload.
fn shared_volatile_flag_finishes(ctx: &Context) -> vigil::Result<()> {
    let ctx = &context_like(ctx)?;
    let stream = Stream::new(ctx)?;
    let k = Module::from_ptx(ctx, KERNELS_PTX)?.kernel::<shared_volatile_handoff>()?;
    let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    stream.launch(&k, LaunchConfig::new(1, 64), (&mut data, &mut out, 32u32))?;
    ctx.synchronize()?;
    assert_eq!(out.to_vec(&stream)?, [PAYLOAD]);
    Ok(())
}

#[vigil::test]
fn a_volatile_shared_flag_set_by_another_warp_ends_the_wait(ctx: &Context) -> vigil::Result<()> {
    shared_volatile_flag_finishes(ctx)
}

#[vigil::test(plain)]
fn a_volatile_shared_flag_set_by_another_warp_ends_the_wait_plain(
    ctx: &Context,
) -> vigil::Result<()> {
    shared_volatile_flag_finishes(ctx)
}

/// The launch failed with a livelock whose one spinning thread polls
/// `flag` (4 bytes) at a line of `file`.
fn assert_livelock_on(
    what: &str,
    launched: vigil::Result<()>,
    flag: u64,
    file: &str,
) -> vigil::Result<()> {
    match launched {
        Err(Error::Cpu(CpuError::Livelock { blocks, .. })) => {
            let spinning: Vec<_> = blocks.iter().flat_map(|b| &b.spinning).collect();
            assert_eq!(spinning.len(), 1, "{what}: {spinning:?}");
            let t = spinning[0];
            assert_eq!((t.address, t.bytes), (flag, 4), "{what}");
            assert!(t.location.contains(file), "{what}: {}", t.location);
            Ok(())
        }
        Err(e) => Err(e),
        Ok(()) => panic!("{what}: a spin on a flag nobody sets ended"),
    }
}

/// Every pattern of [`spin_handoff`] with nobody setting the flag, and
/// the shared volatile flag nobody sets: each launch fails with a
/// livelock naming the polled flag and the kernel line that polls it.
fn a_spin_nobody_ends_is_a_livelock(ctx: &Context) -> vigil::Result<()> {
    let ctx = &context_like(ctx)?;
    let stream = Stream::new(ctx)?;
    let module = Module::from_ptx(ctx, KERNELS_PTX)?;
    let k = module.kernel::<spin_handoff>()?;
    for (pattern, name) in PATTERNS {
        let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
        let mut flag = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
        let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
        let launched = stream.launch(
            &k,
            LaunchConfig::new(2, 64),
            (&mut data, &mut flag, &mut out, pattern, NOBODY),
        );
        assert_livelock_on(name, launched, flag.device_ptr(), "spin_waits.rs")?;
    }
    let shared = module.kernel::<shared_volatile_handoff>()?;
    let mut data = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1)?;
    let launched = stream.launch(
        &shared,
        LaunchConfig::new(1, 64),
        (&mut data, &mut out, 0u32),
    );
    match launched {
        Err(Error::Cpu(CpuError::Livelock { blocks, .. })) => {
            let t = &blocks[0].spinning[0];
            assert_eq!(t.bytes, 4);
            assert!(t.location.contains("spin_waits.rs"), "{}", t.location);
        }
        other => panic!("shared volatile flag: expected a livelock, got {other:?}"),
    }
    Ok(())
}

#[vigil::test(cpu)]
fn a_spin_on_a_flag_nobody_sets_is_a_livelock(ctx: &Context) -> vigil::Result<()> {
    a_spin_nobody_ends_is_a_livelock(ctx)
}

#[vigil::test(cpu, plain)]
fn a_spin_on_a_flag_nobody_sets_is_a_livelock_plain(ctx: &Context) -> vigil::Result<()> {
    a_spin_nobody_ends_is_a_livelock(ctx)
}

vigil::test_main!();
