//! Kernels on a shared stack (`vigil_kernels::shared_stack`), on every
//! backend under Vigil's harness: a GEMM and a row softmax in one kernel
//! whose phases' tiles reuse one region of dynamic shared memory, against
//! a host reference, plain and sanitized; the same kernel with an
//! unsynced reuse, reported as a race between the old tile's access and
//! the new tile's with both tiles' push sites; the launch giving a stack
//! its capacity, or an error when the device cannot; a property test of
//! the stack's placement against a model; misuses on the CPU backend.

use std::collections::BTreeSet;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use vigil::unstable::cpu::{CpuError, CpuExecutor};
use vigil::{
    Context, DeviceBuffer, Error, Kernel, LaunchConfig, LaunchConfigError, MemorySpace, Module,
    RaceReports, Stream,
};
use vigil_kernels::shared_stack::{self as k, BK, BN};
use vigil_tests::programs::gemm_softmax::{layout_line, GemmInputs};
use vigil_tests::{Rng, KERNELS_PTX};

mod common;

const SOURCE: &str = include_str!("../kernels/src/shared_stack.rs");

/// The line of the kernels' source that carries `// @marker`.
fn line(marker: &str) -> u32 {
    common::marker_line(SOURCE, "shared_stack.rs", marker)
}

fn setup(ctx: &Context) -> (Stream, Module) {
    let stream = Stream::new(ctx).expect("stream");
    let module = Module::from_ptx(ctx, KERNELS_PTX).expect("load vigil-kernels PTX");
    (stream, module)
}

/// The shape each backend runs: blocks (of `BM` rows) and `k`.
fn gemm_shape(ctx: &Context) -> (usize, usize) {
    match (ctx.is_cpu(), ctx.is_sanitized()) {
        (true, _) => (2, 2 * BK),
        (false, true) => (ctx.sm_count() as usize, 2 * BK),
        (false, false) => (ctx.sm_count() as usize, 4 * BK),
    }
}

/// The parameters of both GEMM kernels.
type GemmParams = <k::gemm_softmax as Kernel>::Params;

/// Launches `K` on fresh inputs of `blocks` blocks and depth `k`.
fn launch_gemm<K>(ctx: &Context, blocks: usize, k: usize, seed: u64) -> (Stream, GemmInputs)
where
    K: Kernel<Params = GemmParams>,
{
    let (stream, module) = setup(ctx);
    let kernel = module.kernel::<K>().unwrap();
    let mut inputs = GemmInputs::new(&stream, blocks, k, seed).unwrap();
    let config = inputs.config();
    stream
        .launch(
            &kernel,
            config,
            (&inputs.da, &inputs.db, &mut inputs.out, k as u32),
        )
        .unwrap();
    (stream, inputs)
}

/// Checks the output against the host reference and says so.
fn check_gemm(stream: &Stream, inputs: &GemmInputs) {
    let worst = inputs.check(stream).unwrap();
    println!(
        "gemm_softmax: {} x {} x {BN} matches the host reference (worst relative error {worst:.2e})",
        inputs.m, inputs.k
    );
}

#[vigil::test(cpu, plain)]
fn the_stack_needs_the_larger_phase_and_a_static_layout_the_sum(_: &Context) {
    assert_eq!(k::GEMM_SOFTMAX_STACK, 192 * 1024);
    assert_eq!(k::GEMM_SOFTMAX_STATIC, 321 * 1024);
    // Past what an H100 or H200 gives a block (227 KiB with opt-in), the
    // CPU backend's limit: only reuse makes the kernel launchable.
    let limit = CpuExecutor::LIMITS.max_shared_mem_per_block_optin as usize;
    assert!((k::GEMM_SOFTMAX_STACK..k::GEMM_SOFTMAX_STATIC).contains(&limit));
    assert_eq!(
        <k::gemm_softmax as Kernel>::DYNAMIC_SHARED_BYTES,
        k::GEMM_SOFTMAX_STACK
    );
    assert_eq!(
        <k::stack_phases as Kernel>::DYNAMIC_SHARED_BYTES,
        k::PHASES_STACK
    );
    assert_eq!(
        <k::stack_phases_hand_placed as Kernel>::DYNAMIC_SHARED_BYTES,
        0
    );
    println!("gemm_softmax: {}", layout_line(limit as u32));
}

/// The GEMM's tiles popped with a barrier, sanitized: the output matches
/// the host and the sanitizer finds nothing (the harness fails the test on
/// a race).
#[vigil::test]
fn gemm_softmax_matches_the_host(ctx: &Context) {
    let (blocks, kd) = gemm_shape(ctx);
    let (stream, inputs) = launch_gemm::<k::gemm_softmax>(ctx, blocks, kd, 7);
    check_gemm(&stream, &inputs);
    println!(
        "gemm_softmax: {}",
        layout_line(ctx.max_shared_mem_per_block_optin())
    );
}

/// The same, plain (no sanitizer).
#[vigil::test(plain)]
fn gemm_softmax_plain_matches_the_host(ctx: &Context) {
    let (blocks, kd) = gemm_shape(ctx);
    let (stream, inputs) = launch_gemm::<k::gemm_softmax>(ctx, blocks, kd, 8);
    check_gemm(&stream, &inputs);
}

/// Checks that every report of `gemm_softmax_unsynced` is the reuse race:
/// a read of the GEMM's `a` or `b` tile against a write of the softmax's
/// output tile over the same bytes, each access naming its own tile's
/// push; returns the GEMM tiles' read lines seen.
fn reuse_races(reports: &RaceReports) -> BTreeSet<u32> {
    let (read_a, read_b, write_c) = (line("read-a"), line("read-b"), line("write-c"));
    let push_of = |access: u32| match access {
        l if l == read_a => line("push-a"),
        l if l == read_b => line("push-b"),
        l if l == write_c => line("push-c"),
        other => panic!("an access at line {other} in:\n{reports}"),
    };
    assert!(!reports.is_empty(), "the unsynced reuse was not reported");
    assert_eq!(reports.dropped(), 0);
    let mut reads = BTreeSet::new();
    for r in reports.iter() {
        assert_eq!(r.space, MemorySpace::Shared, "{r}");
        assert!(r.prior.same_block, "{r}");
        let current = r.current.location.as_ref().expect("current location");
        let prior = r.prior.location.as_ref().expect("prior location");
        let (read, write) = if current.line == write_c {
            (prior.line, current.line)
        } else {
            (current.line, prior.line)
        };
        assert_eq!(write, write_c, "{r}");
        assert!(read == read_a || read == read_b, "{r}");
        for (access, view) in [
            (current, &r.current.shared_view),
            (prior, &r.prior.shared_view),
        ] {
            let view = view
                .as_ref()
                .unwrap_or_else(|| panic!("no tile named for {access} in\n{r}"));
            assert!(view.file.ends_with("shared_stack.rs"), "{r}");
            assert_eq!(view.line, push_of(access.line), "{r}");
        }
        let text = r.to_string();
        assert_eq!(
            text.matches("through the shared view allocated at").count(),
            2,
            "{text}"
        );
        reads.insert(read);
    }
    reads
}

/// The GEMM's tiles popped without a barrier: threads that finished the
/// last GEMM step write the output tile over bytes other threads still
/// read. Reported, naming the GEMM tile's read, the output tile's write
/// (`file:line:column` of both) and each tile's push. On the GPU the
/// sanitizer's window shadow covers the first 60-odd KiB of a block's
/// shared memory (ARCHITECTURE.md), where the output tile lies over the
/// `a` tile; the CPU backend sees the reuse of `b`'s bytes too.
#[vigil::test]
fn an_unsynced_reuse_is_reported_with_both_tiles(ctx: &Context) {
    let blocks = if ctx.is_cpu() { 1 } else { 8 };
    launch_gemm::<k::gemm_softmax_unsynced>(ctx, blocks, BK, 9);
    let reports = match ctx.synchronize() {
        Err(Error::Races(r)) => r,
        other => panic!("expected the reuse race, got {other:?}"),
    };
    println!("{reports}");
    let reads = reuse_races(&reports);
    if ctx.is_cpu() {
        assert_eq!(
            reads,
            BTreeSet::from([line("read-a"), line("read-b")]),
            "{reports}"
        );
    }
}

/// The unsynced kernel in a plain context: it runs (the race is the
/// sanitizer's to find, not a fault).
#[vigil::test(plain)]
fn an_unsynced_reuse_runs_plain(ctx: &Context) {
    if ctx.is_sanitized() {
        vigil::testing::skip("VIGIL_SANITIZE turned the sanitizer on for a plain test");
    }
    launch_gemm::<k::gemm_softmax_unsynced>(ctx, 1, BK, 10);
    ctx.synchronize().unwrap();
}

/// `stack_phases` and its hand-placed twin compute `out[t] = -(x[t] + t)`;
/// the stack's launch needs no shared-memory size, the hand-placed one is
/// given it.
#[vigil::test]
fn a_stack_computes_what_hand_placed_views_compute(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let xs = Rng::new(3).f32s(256);
    let x = DeviceBuffer::from_slice(&stream, &xs).unwrap();
    let want: Vec<f32> = xs
        .iter()
        .enumerate()
        .map(|(t, v)| -(v + t as f32))
        .collect();
    let one_block = LaunchConfig::new(1, k::PHASES_THREADS);
    let mut out = DeviceBuffer::<f32>::alloc_zeroed(&stream, 256).unwrap();
    let stack = module.kernel::<k::stack_phases>().unwrap();
    stream.launch(&stack, one_block, (&x, &mut out)).unwrap();
    assert_eq!(out.to_vec(&stream).unwrap(), want);
    let mut out = DeviceBuffer::<f32>::alloc_zeroed(&stream, 256).unwrap();
    let hand = module.kernel::<k::stack_phases_hand_placed>().unwrap();
    let sized = one_block.with_shared_mem(k::PHASES_STACK as u32);
    stream.launch(&hand, sized, (&x, &mut out)).unwrap();
    assert_eq!(out.to_vec(&stream).unwrap(), want);
}

/// A stack no device can hold (240 KiB) fails at launch, before the kernel
/// runs, with the typed error naming the stack, the static shared memory
/// of the entry that would run and the device's limit.
#[vigil::test]
fn a_stack_the_device_cannot_hold_is_a_launch_error(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let kernel = module.kernel::<k::stack_too_big>().unwrap();
    let mut out = DeviceBuffer::<f32>::alloc_zeroed(&stream, 1).unwrap();
    let e = stream
        .launch(&kernel, LaunchConfig::new(1, 32), (&mut out,))
        .expect_err("a 240 KiB stack");
    match &e {
        Error::LaunchConfig {
            kernel,
            problem:
                LaunchConfigError::SharedStackTooLarge {
                    stack_bytes, limit, ..
                },
        } => {
            assert!(kernel.starts_with("stack_too_big"), "{e}");
            assert_eq!(*stack_bytes, k::TOO_BIG_STACK as u64);
            assert_eq!(*limit, ctx.max_shared_mem_per_block_optin());
        }
        other => panic!("expected SharedStackTooLarge, got {other:?}"),
    }
    assert!(
        e.to_string().contains("shared stack of 245760 bytes"),
        "{e}"
    );
    // Nothing ran: the buffer is as it was.
    assert_eq!(out.to_vec(&stream).unwrap(), [0.0]);
}

/// A script of pushes and pops, checked against a model of the stack:
/// each push's offset is the sum of the tiles below it, and each popped
/// tile still holds what was written into it (no live tiles overlap).
#[vigil::test(cpu, plain)]
fn pushes_and_pops_place_tiles_as_a_stack_model_does(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let kernel = module.kernel::<k::stack_script>().unwrap();
    // Intents: 0-3 push a class, 4 pop; those that would overflow the
    // stack or its depth, or pop an empty one, are left out.
    let script = proptest::collection::vec(0u32..5, 1..40).prop_map(|intents| {
        let (mut ops, mut sizes) = (Vec::new(), Vec::<usize>::new());
        for op in intents {
            if op == 4 {
                if sizes.pop().is_some() {
                    ops.push(op);
                }
            } else {
                let used: usize = sizes.iter().sum();
                let size = k::SCRIPT_TILES[op as usize];
                if sizes.len() < k::SCRIPT_DEPTH && used + size <= k::SCRIPT_STACK {
                    sizes.push(size);
                    ops.push(op);
                }
            }
        }
        ops.extend(std::iter::repeat_n(4, sizes.len()));
        ops
    });
    let mut runner = TestRunner::new(Config {
        cases: 48,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&script, |ops| {
            let d_ops = DeviceBuffer::from_slice(&stream, &ops).unwrap();
            let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, ops.len()).unwrap();
            stream
                .launch(&kernel, LaunchConfig::new(1, 1), (&d_ops, &mut out))
                .unwrap();
            let got = out.to_vec(&stream).unwrap();
            let mut sizes = Vec::<usize>::new();
            for (i, &op) in ops.iter().enumerate() {
                let want = if op == 4 {
                    sizes.pop();
                    1
                } else {
                    let offset: usize = sizes.iter().sum();
                    sizes.push(k::SCRIPT_TILES[op as usize]);
                    offset as u32
                };
                prop_assert_eq!(got[i], want, "op {} of {:?}: {:?}", i, ops, got);
            }
            Ok(())
        })
        .unwrap();
}

/// The panic message of a CPU launch that failed with a kernel panic.
fn kernel_panic(outcome: vigil::Result<()>) -> (String, Option<String>) {
    match outcome {
        Err(Error::Cpu(CpuError::KernelPanic {
            message, location, ..
        })) => (message, location),
        other => panic!("expected a kernel panic, got {other:?}"),
    }
}

/// Popping a tile that is not the top, or pushing past the capacity,
/// panics at the offending call (on a GPU the kernel traps).
#[vigil::test(cpu, plain)]
fn misuses_panic_where_they_happen(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let kernel = module.kernel::<k::stack_misuse>().unwrap();
    for (mode, marker, says) in [
        (0u32, "pop-out-of-order", "not its top"),
        (1, "push-past-capacity", "shared stack overflow"),
    ] {
        let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1).unwrap();
        let outcome = stream.launch(&kernel, LaunchConfig::new(1, 1), (&mut out, mode));
        let (message, location) = kernel_panic(outcome);
        assert!(message.contains(says), "{message}");
        let location = location.expect("the panic's location");
        assert!(
            location.contains(&format!("shared_stack.rs:{}:", line(marker))),
            "{location}"
        );
    }
}

/// A launch that gives a stack less dynamic shared memory than its
/// capacity (an untyped launch) panics when the stack is made, on the CPU
/// backend, instead of handing out tiles past the launch's memory.
#[vigil::test(cpu, plain)]
fn an_untyped_launch_without_the_stack_s_memory_panics(ctx: &Context) {
    let (stream, module) = setup(ctx);
    let kernel = module.kernel::<k::stack_misuse>().unwrap();
    let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, 1).unwrap();
    let args = [
        vigil::KernelArgValue::slice_mut(&mut out),
        vigil::KernelArgValue::U32(2),
    ];
    // SAFETY: the arguments are the kernel's (an output slice and a mode).
    let outcome = unsafe {
        stream.launch_dynamic(
            kernel.function(),
            LaunchConfig::new(1, 1).with_shared_mem(1024),
            &args,
        )
    };
    let (message, _) = kernel_panic(outcome);
    assert!(
        message.contains("shared stack of 2048 bytes, but the launch gave 1024"),
        "{message}"
    );
}

vigil::test_main!();
