//! The engine's PTX build on a real GPU: thread-state setup, a race-free
//! and a racy stress kernel (every GPU thread of a block shares one
//! sanitizer thread, so the locks and CASes run under real contention),
//! and the slowdown against the same traffic without the engine. Vigil's
//! harness reports it as skipped without a GPU or without the PTX (built by `scripts/validate-ptx.sh` or
//! `cargo build -p vigil-shared-ptx-check --release --target
//! nvptx64-nvidia-cuda -Zbuild-std=core`), unless `VIGIL_REQUIRE_GPU=1`.

use std::time::Instant;

use vigil::{DeviceBuffer, KernelArgValue as Arg, LaunchConfig, Module, Stream};
use vigil_shared::abi::{
    thread_state_words, GlobalState, InflatedRecord, PoolHeader, RaceReport, ReportBufferHeader,
};
use vigil_shared::engine::sc_fence_words;
use vigil_shared_ptx_check::stress_mode;

fn find_ptx() -> Option<String> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let candidates = [
        std::env::var("VIGIL_PTX_CHECK_PTX").unwrap_or_default(),
        format!("{root}/target/vigil-ptx/nvptx64-nvidia-cuda/release/vigil_shared_ptx_check.ptx"),
        format!("{root}/target/nvptx64-nvidia-cuda/release/vigil_shared_ptx_check.ptx"),
        "vigil_shared_ptx_check.ptx".to_owned(),
    ];
    candidates
        .iter()
        .filter(|p| !p.is_empty())
        .find_map(|p| std::fs::read_to_string(p).ok())
}

const BLOCK: u32 = 256;
const ITERS: u32 = 1024;
/// One round for the atomic and racy modes: every GPU thread hits the same
/// few words there, and the engine serialises those (see the report).
const ATOMIC_ITERS: u32 = 1;

#[vigil::test(gpu, plain)]
fn engine_ptx_runs_on_the_gpu(ctx: &vigil::Context) {
    let Some(ptx) = find_ptx() else {
        assert!(
            !vigil::testing::gpu_required(),
            "VIGIL_REQUIRE_GPU=1 but vigil_shared_ptx_check.ptx was not found"
        );
        vigil::testing::skip("vigil_shared_ptx_check.ptx not built");
    };
    let stream = Stream::new(ctx).unwrap();
    let module = Module::from_ptx(ctx, &ptx).unwrap();
    let init = module.function("vigil_engine_init").unwrap();
    let stress = module.function("vigil_engine_stress").unwrap();
    let blocks = ctx.sm_count();
    let (n, cb) = (blocks, 4u32);
    let total = blocks * BLOCK;

    let ts_words = thread_state_words(n, cb);
    let pool_records = 4096usize;
    let report_capacity = 256usize;
    let g = GlobalState {
        num_sms: n,
        num_devices: 1,
        num_threads: n,
        clock_buffer_size: cb,
        rng_seed: 7,
        report_capacity: report_capacity as u32,
        pool_capacity: pool_records as u32,
        ..GlobalState::default()
    };
    let fresh = |mode: u32, iters: u32| {
        let globals =
            DeviceBuffer::<u32>::from_slice(&stream, bytemuck::cast_slice(bytemuck::bytes_of(&g)))
                .unwrap();
        let ts = DeviceBuffer::<u32>::alloc_zeroed(&stream, ts_words * n as usize).unwrap();
        let words = (total * iters) as usize + 1;
        let shadow = DeviceBuffer::<u64>::alloc_zeroed(&stream, words).unwrap();
        let mut pool_init = vec![0u32; PoolHeader::WORDS + pool_records * InflatedRecord::WORDS];
        pool_init[1] = pool_records as u32;
        let pool = DeviceBuffer::<u32>::from_slice(&stream, &pool_init).unwrap();
        let mut rep_init =
            vec![0u32; ReportBufferHeader::WORDS + report_capacity * RaceReport::WORDS];
        rep_init[1] = report_capacity as u32;
        let reports = DeviceBuffer::<u32>::from_slice(&stream, &rep_init).unwrap();
        let sc = DeviceBuffer::<u32>::alloc_zeroed(&stream, sc_fence_words(1, n)).unwrap();
        let raw: [u64; 10] = [
            globals.device_ptr(),
            ts.device_ptr(),
            shadow.device_ptr(),
            shadow.len() as u64,
            pool.device_ptr(),
            pool.len() as u64,
            reports.device_ptr(),
            reports.len() as u64,
            sc.device_ptr(),
            sc.len() as u64,
        ];
        let mem = DeviceBuffer::<u64>::from_slice(&stream, &raw).unwrap();
        let data = DeviceBuffer::<u32>::alloc_zeroed(&stream, words).unwrap();
        let mut out = DeviceBuffer::<u32>::alloc_zeroed(&stream, total as usize).unwrap();
        // SAFETY: `ts` holds `n` thread states for `n` threads and `cb` snapshots.
        unsafe {
            stream
                .launch_dynamic(
                    &init,
                    LaunchConfig::new(n, 32),
                    &[Arg::ptr(&ts), Arg::U32(n), Arg::U32(cb)],
                )
                .unwrap();
        }
        // Warm-up launch (module load, first-launch costs) doing no rounds.
        // SAFETY: as below, with no rounds.
        unsafe {
            stream
                .launch_dynamic(
                    &stress,
                    LaunchConfig::new(blocks, BLOCK),
                    &[
                        Arg::ptr(&mem),
                        Arg::U32(mode),
                        Arg::U32(0),
                        Arg::ptr(&data),
                        Arg::ptr_mut(&mut out),
                    ],
                )
                .unwrap();
        }
        stream.synchronize().unwrap();
        let start = Instant::now();
        // SAFETY: every buffer `mem` points to outlives the launch and has
        // the length recorded there; `data` holds total + 1 words, `out` total.
        unsafe {
            stream
                .launch_dynamic(
                    &stress,
                    LaunchConfig::new(blocks, BLOCK),
                    &[
                        Arg::ptr(&mem),
                        Arg::U32(mode),
                        Arg::U32(iters),
                        Arg::ptr(&data),
                        Arg::ptr_mut(&mut out),
                    ],
                )
                .unwrap();
        }
        stream.synchronize().unwrap();
        let secs = start.elapsed().as_secs_f64();
        let bits = out.to_vec(&stream).unwrap();
        let data = data.to_vec(&stream).unwrap();
        let reports = reports.to_vec(&stream).unwrap();
        let pool = pool.to_vec(&stream).unwrap();
        (secs, bits, data[words - 1], reports[0], pool[0], pool[2])
    };

    let (base_stream, ..) = fresh(stress_mode::PLAIN_STREAM, ITERS);
    let (secs, bits, _, races, records, _) = fresh(stress_mode::STREAM, ITERS);
    println!(
        "gpu stream: {blocks} blocks x {BLOCK} threads x {ITERS} iters of a read and a write: {:.3} ms with the engine, {:.3} ms without ({:.1}x); reports {races}, records {records}",
        secs * 1e3,
        base_stream * 1e3,
        secs / base_stream
    );
    assert_eq!(races, 0, "false positive on the GPU (stream)");
    assert!(
        bits.iter().all(|b| *b == 0),
        "a GPU thread saw a race or an engine error (stream)"
    );
    let gpu_scope = stress_mode::STREAM | stress_mode::GPU_SCOPE;
    let (secs, bits, _, races, ..) = fresh(gpu_scope, ITERS);
    println!(
        "gpu stream, engine on .gpu-scope atomics: {:.3} ms ({:.1}x); reports {races}",
        secs * 1e3,
        secs / base_stream
    );
    assert_eq!(races, 0, "false positive on the GPU (stream, .gpu)");
    assert!(bits.iter().all(|b| *b == 0), "race or error (stream, .gpu)");

    let (base_atomic, _, base_counter, ..) = fresh(stress_mode::PLAIN_ATOMIC, ATOMIC_ITERS);
    assert_eq!(base_counter, total * ATOMIC_ITERS);
    let (secs, bits, counter, races, records, evictions) = fresh(stress_mode::ATOMIC, ATOMIC_ITERS);
    println!(
        "gpu atomics: {} relaxed device-scope adds on one word: {:.3} ms with the engine, {:.3} ms without ({:.1}x); reports {races}, records {records}, evictions {evictions}",
        total * ATOMIC_ITERS,
        secs * 1e3,
        base_atomic * 1e3,
        secs / base_atomic
    );
    assert_eq!(
        counter,
        total * ATOMIC_ITERS,
        "an atomic done under the engine's cell lock was lost"
    );
    assert_eq!(races, 0, "false positive on the GPU (atomics)");
    assert!(
        bits.iter().all(|b| *b == 0),
        "a GPU thread saw a race or an engine error (atomics)"
    );
    let gpu_scope = stress_mode::ATOMIC | stress_mode::GPU_SCOPE;
    let (secs, bits, counter, races, ..) = fresh(gpu_scope, ATOMIC_ITERS);
    println!(
        "gpu atomics, engine on .gpu-scope atomics: {:.3} ms ({:.1}x); reports {races}",
        secs * 1e3,
        secs / base_atomic
    );
    assert_eq!(counter, total * ATOMIC_ITERS, "atomic lost (.gpu)");
    assert_eq!(races, 0, "false positive on the GPU (atomics, .gpu)");
    assert!(
        bits.iter().all(|b| *b == 0),
        "race or error (atomics, .gpu)"
    );

    let (_, bits, _, races, records, _) = fresh(stress_mode::RACY, ATOMIC_ITERS);
    println!(
        "gpu racy: reports {races}, records {records}, racing threads {}",
        bits.iter().filter(|b| **b & 1 != 0).count()
    );
    assert!(races > 0, "the racy kernel reported nothing");
    assert!(
        bits.iter().all(|b| *b & 2 == 0),
        "engine error on the GPU (racy)"
    );
}

vigil::test_main!();
