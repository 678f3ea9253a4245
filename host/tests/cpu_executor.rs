//! The CPU executor running the kernels of `vigil-kernels` (and a few of
//! its own) on host memory, checked against CPU references.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::Mutex;
use vigil::device::host_runtime::{AtomicAccess, SanitizerRuntime, ThreadContext};
use vigil::device::prelude::*;
use vigil::device::{AccessKind, Kernel};
use vigil::unstable::cpu::{
    checked_entry, plain_entry, CpuError, CpuExecutor, HostArgs, KernelEntry,
};
use vigil::{LaunchConfig, LaunchConfigError, ParamBuffer};
use vigil_kernels::{examples, tests as k};

/// Two workers, as on the CI machine, whatever this machine has.
fn executor() -> CpuExecutor {
    CpuExecutor::new(2).expect("start the CPU executor")
}

/// Launches `K`'s plain variant and panics on failure.
fn run<K: Kernel>(ex: &CpuExecutor, cfg: LaunchConfig, params: &ParamBuffer) {
    try_run(ex, cfg, plain_entry::<K>(), params, None).expect("launch succeeds");
}

fn try_run(
    ex: &CpuExecutor,
    cfg: LaunchConfig,
    entry: KernelEntry,
    params: &ParamBuffer,
    sanitizer: Option<&dyn SanitizerRuntime>,
) -> Result<vigil::unstable::cpu::LaunchStats, CpuError> {
    // SAFETY: every test packs the kernel's parameters in order from host
    // slices that it leaves alone until the launch returns.
    unsafe { ex.launch(&cfg, entry, params.as_bytes(), sanitizer) }
}

#[test]
fn axpy_with_a_size_that_is_not_a_multiple_of_the_block() {
    let ex = executor();
    let n = 1000;
    let x: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let mut y: Vec<f32> = (0..n).map(|i| 1.0 - i as f32).collect();
    let expect: Vec<f32> = x.iter().zip(&y).map(|(x, y)| 3.0 * x + y).collect();
    let mut p = ParamBuffer::new();
    p.push(3.0f32);
    p.push_host_slice(&x).push_host_slice_mut(&mut y);
    run::<examples::axpy>(&ex, LaunchConfig::for_num_elems(n, 128), &p);
    assert_eq!(y, expect);
}

/// Sums `x` with `reduce_sum` in `blocks` blocks of 1,024 threads, then
/// the partials with one block; checks both against the host.
fn reduce(ex: &CpuExecutor, x: &[f32], blocks: u32) {
    let block = examples::REDUCE_BLOCK;
    let mut partials = vec![f32::NAN; blocks as usize];
    let mut p = ParamBuffer::new();
    p.push_host_slice(x).push_host_slice_mut(&mut partials);
    run::<examples::reduce_sum>(ex, LaunchConfig::new(blocks, block), &p);
    // Integer-valued inputs: every order of summation is exact.
    let stride = (blocks * block) as usize;
    for (b, got) in partials.iter().enumerate() {
        let want: f32 = x
            .iter()
            .enumerate()
            .filter(|(i, _)| (i % stride) / block as usize == b)
            .map(|(_, v)| v)
            .sum();
        assert_eq!(*got, want, "partial of block {b}");
    }
    let mut total = [0.0f32];
    let mut p = ParamBuffer::new();
    p.push_host_slice(&partials).push_host_slice_mut(&mut total);
    run::<examples::reduce_sum>(ex, LaunchConfig::new(1, block), &p);
    assert_eq!(total[0], x.iter().sum::<f32>());
}

#[test]
fn reduce_sum_with_1024_thread_blocks() {
    let ex = executor();
    let x: Vec<f32> = (0..100_000).map(|i| (i % 7) as f32).collect();
    reduce(&ex, &x, 16);
    // Fewer elements than threads: most threads add nothing.
    let x: Vec<f32> = (0..1500).map(|i| (i % 3) as f32 + 1.0).collect();
    reduce(&ex, &x, 4);
}

/// A deterministic pseudo-random sequence (64-bit LCG, high bits).
fn lcg(n: usize, seed: u64) -> Vec<u32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) as u32
        })
        .collect()
}

#[test]
fn histogram_counts_with_atomics() {
    let ex = executor();
    let data = lcg(50_000, 7);
    let mut bins = vec![0u32; 37];
    let mut want = vec![0u32; 37];
    for d in &data {
        want[(d % 37) as usize] += 1;
    }
    let mut p = ParamBuffer::new();
    p.push_host_slice(&data).push_host_slice_mut(&mut bins);
    run::<examples::histogram>(&ex, LaunchConfig::new(8, 256), &p);
    assert_eq!(bins, want);
}

/// Integer types the `atomic_ops_*` kernels run on, with what the check needs.
trait AtomicInt: bytemuck::Pod + PartialEq + std::fmt::Debug + Ord {
    const BITS: usize;
    const MAX: Self;
    fn from_u64(v: u64) -> Self;
    fn all_ones() -> Self;
}

macro_rules! atomic_int {
    ($($t:ty),*) => {$(
        impl AtomicInt for $t {
            const BITS: usize = <$t>::BITS as usize;
            const MAX: Self = <$t>::MAX;
            fn from_u64(v: u64) -> Self { v as $t }
            fn all_ones() -> Self { !0 }
        }
    )*};
}
atomic_int!(u32, i32, u64, i64);

/// Runs integer kernel `K` for every ordering and scope selector and checks
/// every slot against what `threads` threads must leave behind.
fn check_atomic_ints<K: Kernel, T: AtomicInt>(ex: &CpuExecutor) {
    let (grid, block) = (3u32, 50u32);
    let threads = (grid * block) as u64;
    let bits = |f: &dyn Fn(u64) -> bool| {
        (0..T::BITS as u64)
            .filter(|&b| f(b))
            .fold(0u64, |m, b| m | (1 << b))
    };
    let ones_up_to = bits(&|b| b < threads);
    // Bit b is toggled once per thread with tid % BITS == b.
    let xor = bits(&|b| (0..threads).filter(|t| t % T::BITS as u64 == b).count() % 2 == 1);
    for order in 0..4u32 {
        for scope in 0..3u32 {
            let mut slots: Vec<T> = vec![T::from_u64(0); 9 + threads as usize];
            slots[1] = T::from_u64(threads);
            slots[2] = T::MAX;
            slots[7] = T::all_ones();
            let mut p = ParamBuffer::new();
            p.push_host_slice_mut(&mut slots);
            p.push(order);
            p.push(scope);
            run::<K>(ex, LaunchConfig::new(grid, block), &p);
            let what = format!("{} order {order} scope {scope}", K::NAME);
            assert_eq!(slots[0], T::from_u64(threads), "add: {what}");
            assert_eq!(slots[1], T::from_u64(0), "sub: {what}");
            assert_eq!(slots[2], T::from_u64(0), "min: {what}");
            assert_eq!(slots[3], T::from_u64(threads - 1), "max: {what}");
            assert_eq!(slots[5], T::from_u64(threads), "cas loop: {what}");
            assert_eq!(slots[6], T::from_u64(ones_up_to), "or: {what}");
            // Every bit a thread owns is cleared from all ones.
            assert_eq!(slots[7], T::from_u64(!ones_up_to), "and: {what}");
            assert_eq!(slots[8], T::from_u64(xor), "xor: {what}");
            // The exchanges form one chain: the values seen plus the final
            // one are exactly 0 (the initial value) and every tid + 1.
            let mut seen: Vec<T> = slots[9..].to_vec();
            seen.push(slots[4]);
            seen.sort();
            let want: Vec<T> = (0..=threads).map(T::from_u64).collect();
            assert_eq!(seen, want, "exchange chain: {what}");
        }
    }
}

#[test]
fn atomic_ops_integers_every_ordering_and_scope() {
    let ex = executor();
    check_atomic_ints::<k::atomic_ops_u32, u32>(&ex);
    check_atomic_ints::<k::atomic_ops_i32, i32>(&ex);
    check_atomic_ints::<k::atomic_ops_u64, u64>(&ex);
    check_atomic_ints::<k::atomic_ops_i64, i64>(&ex);
}

/// Runs float kernel `K` for every ordering and scope selector.
fn check_atomic_floats<K: Kernel, T>(ex: &CpuExecutor, from: fn(f64) -> T, to: fn(T) -> f64)
where
    T: bytemuck::Pod,
{
    let (grid, block) = (4u32, 40u32);
    let threads = f64::from(grid * block);
    for order in 0..4u32 {
        for scope in 0..3u32 {
            let mut slots = vec![from(0.0); 4];
            let mut p = ParamBuffer::new();
            p.push_host_slice_mut(&mut slots);
            p.push(order);
            p.push(scope);
            run::<K>(ex, LaunchConfig::new(grid, block), &p);
            let what = format!("{} order {order} scope {scope}", K::NAME);
            let got: Vec<f64> = slots.iter().map(|&v| to(v)).collect();
            assert_eq!(got[0], 1.5 * threads, "add: {what}");
            assert_eq!(got[1], -0.5 * threads, "sub: {what}");
            assert_eq!(got[2], threads, "cas loop: {what}");
            assert!(
                got[3] >= 0.0 && got[3] < threads && got[3].fract() == 0.0,
                "exchange: {what}"
            );
        }
    }
}

#[test]
fn atomic_ops_floats_every_ordering_and_scope() {
    let ex = executor();
    check_atomic_floats::<k::atomic_ops_f32, f32>(&ex, |v| v as f32, f64::from);
    check_atomic_floats::<k::atomic_ops_f64, f64>(&ex, |v| v, |v| v);
}

#[test]
fn shared_reverse_through_static_and_dynamic_shared_memory() {
    let ex = executor();
    for (blocks, n) in [(64u32, 256u32), (9, 100), (2, 1024)] {
        let len = (blocks * n) as usize;
        let x = lcg(len, u64::from(n));
        let (mut y, mut z) = (vec![0u32; len], vec![0u32; len]);
        let mut p = ParamBuffer::new();
        p.push_host_slice(&x)
            .push_host_slice_mut(&mut y)
            .push_host_slice_mut(&mut z);
        let cfg = LaunchConfig::new(blocks, n).with_shared_mem(n * 4);
        run::<k::shared_reverse>(&ex, cfg, &p);
        let n = n as usize;
        let want: Vec<u32> = (0..len).map(|i| x[i / n * n + n - 1 - i % n]).collect();
        assert_eq!(y, want, "static shared, {blocks} x {n}");
        assert_eq!(z, want, "dynamic shared, {blocks} x {n}");
    }
}

/// Reads its block's static and dynamic shared memory before writing it:
/// both must read zero in every block, however many ran before on the
/// same worker.
#[kernel]
fn shared_starts_zeroed(out: GlobalSliceMut<u32>) {
    let tile = shared_array!(u32; 128);
    let (dynamic, len) = dynamic_shared::<u32>();
    let t = thread_idx().x as usize;
    let mut seen = tile.load(t);
    if t < len {
        // SAFETY: `t < len` elements of the block's dynamic shared memory.
        seen |= unsafe { dynamic.add(t).read_volatile() };
    }
    sync_threads();
    tile.store(t, 0xdead_beef);
    if t < len {
        // SAFETY: as above.
        unsafe { dynamic.add(t).write_volatile(0xfeed) };
    }
    out.store(global_index_x(), seen);
}

#[test]
fn shared_memory_is_zeroed_per_block() {
    let ex = executor();
    let mut out = vec![1u32; 200 * 128];
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut out);
    run::<shared_starts_zeroed>(&ex, LaunchConfig::new(200, 128).with_shared_mem(256), &p);
    assert!(out.iter().all(|&v| v == 0));
}

#[test]
fn warp_ops_give_cuda_results_per_lane() {
    let ex = executor();
    let (blocks, threads) = (3u32, 64u32);
    let mut out = vec![u32::MAX; (blocks * threads * 8) as usize];
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut out);
    run::<k::warp_ops>(&ex, LaunchConfig::new(blocks, threads), &p);
    for (tid, got) in out.chunks(8).enumerate() {
        let l = (tid % 32) as u32;
        let want = [
            if l < 31 { l + 1 } else { l }, // shfl_down by 1: own value past lane 31
            if l > 0 { l - 1 } else { l },  // shfl_up by 1: own value below lane 0
            l ^ 1,                          // shfl_xor 1
            100,                            // broadcast of lane 0's lane + 100
            0xaaaa_aaaa,                    // ballot of odd lanes
            1,                              // any(lane == 5)
            1,                              // all(lane < 32)
            0,                              // 64-bit shfl_xor 2: both halves from lane ^ 2
        ];
        assert_eq!(got, want, "thread {tid}");
    }
}

#[test]
fn warp_votes_count_only_present_lanes_of_a_partial_warp() {
    let ex = executor();
    // 48 threads: warp 1 has lanes 0..16 only.
    let mut out = vec![u32::MAX; 48 * 8];
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut out);
    run::<k::warp_ops>(&ex, LaunchConfig::new(1, 48), &p);
    for (tid, got) in out.chunks(8).enumerate().skip(32) {
        let l = (tid % 32) as u32;
        assert_eq!(got[2], l ^ 1, "shfl_xor, thread {tid}");
        assert_eq!(got[3], 100, "broadcast, thread {tid}");
        assert_eq!(got[4], 0x0000_aaaa, "ballot, thread {tid}");
        assert_eq!(got[5], 1, "any, thread {tid}");
        assert_eq!(got[6], 1, "all, thread {tid}");
        assert_eq!(got[7], 0, "64-bit shfl_xor, thread {tid}");
    }
}

/// Even and odd lanes run separate collectives at the same time, each
/// with its own mask: the even lanes read lane 0, the odd ones lane 1.
#[kernel]
fn interleaved_masks(out: GlobalSliceMut<u32>) {
    let lane = warp::lane_id();
    let mask = if lane % 2 == 0 {
        0x5555_5555
    } else {
        0xaaaa_aaaa
    };
    let v = warp::shfl(mask, lane * 10 + 7, lane % 2);
    let b = warp::ballot(mask, lane % 4 < 2);
    let i = global_index_x();
    out.store(2 * i, v);
    out.store(2 * i + 1, b);
}

#[test]
fn warp_collectives_with_interleaved_masks() {
    let ex = executor();
    let mut out = vec![0u32; 2 * 64];
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut out);
    run::<interleaved_masks>(&ex, LaunchConfig::new(1, 64), &p);
    for (i, got) in out.chunks(2).enumerate() {
        let lane = i % 32;
        // Lanes with lane % 4 < 2 vote true: 0, 1, 4, 5, ...
        let (want_v, want_b) = if lane % 2 == 0 {
            (7, 0x1111_1111)
        } else {
            (17, 0x2222_2222)
        };
        assert_eq!(got, [want_v, want_b], "thread {i}");
    }
}

/// Runs `index_map` on a launch shape and checks that every thread ran
/// once with the right coordinates.
fn check_index_map(ex: &CpuExecutor, grid: (u32, u32, u32), block: (u32, u32, u32)) {
    let cfg = LaunchConfig::new(grid, block);
    let total = cfg.total_threads() as usize;
    let mut out = vec![0u32; total];
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut out);
    run::<k::index_map>(ex, cfg, &p);
    let bad = (0..total).find(|&i| out[i] != i as u32 + 1);
    assert_eq!(bad, None, "grid {grid:?} block {block:?}");
}

#[test]
fn index_map_covers_every_launch_shape() {
    let ex = executor();
    check_index_map(&ex, (1, 1, 1), (1, 1, 1));
    check_index_map(&ex, (3, 2, 2), (5, 3, 2));
    check_index_map(&ex, (7, 3, 2), (33, 1, 1));
    check_index_map(&ex, (4, 5, 3), (10, 3, 3));
    check_index_map(&ex, (2, 1, 1), (1024, 1, 1));
    check_index_map(&ex, (1, 1, 1), (8, 8, 16));
    check_index_map(&ex, (70_000, 1, 1), (32, 1, 1));
}

#[test]
fn block_ids_past_65535() {
    let ex = executor();
    let (blocks, threads) = (66_000u32, 4u32);
    let mut out = vec![u32::MAX; (blocks * threads) as usize];
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut out);
    run::<k::block_ids>(&ex, LaunchConfig::new(blocks, threads), &p);
    let bad = (0..out.len()).find(|&i| out[i] != (i / threads as usize) as u32);
    assert_eq!(bad, None);
}

/// `y = a * x + y` with plain checked indices, `x` indexed with `y`'s
/// bounds: a launch where `x` is the shorter panics. (The executor runs
/// what it is given, unproven: `examples::axpy` would trust the launch
/// to have made `x` as long as `y`.)
#[kernel]
fn indexed_axpy(a: f32, x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
    let i = global_index_x();
    if i < y.len() {
        y.store(i, a * x.load(i) + y.load(i));
    }
}

#[test]
fn kernel_panic_is_a_typed_error_with_the_location() {
    let ex = executor();
    // `x` shorter than `y`: thread 10 of block 0 is the first to read past it.
    let x = vec![1.0f32; 10];
    let mut y = vec![0.0f32; 100];
    let mut p = ParamBuffer::new();
    p.push(2.0f32);
    p.push_host_slice(&x).push_host_slice_mut(&mut y);
    let err = try_run(
        &ex,
        LaunchConfig::new(4, 32),
        plain_entry::<indexed_axpy>(),
        &p,
        None,
    )
    .unwrap_err();
    let CpuError::KernelPanic {
        block,
        thread,
        message,
        location,
    } = &err
    else {
        panic!("expected a kernel panic, got {err}");
    };
    assert_eq!((block.x, thread.x), (0, 10), "{err}");
    assert_eq!(message, "global index 10 out of bounds (len 10)");
    let location = location.as_deref().expect("the hook saw the location");
    assert!(location.contains("cpu_executor.rs"), "{location}");
    assert!(err.to_string().contains(location), "{err}");
}

/// Thread `bad` indexes out of bounds while the threads before it wait at
/// the barrier; every other thread writes 1 after it.
#[kernel]
fn panic_while_others_wait(out: GlobalSliceMut<u32>, bad: u32) {
    let t = thread_idx().x;
    let i = if t == bad { out.len() } else { t as usize };
    let v = out.load(i);
    sync_threads();
    out.store(i, v + 1);
}

#[test]
fn a_panic_releases_the_threads_waiting_at_a_barrier() {
    let ex = executor();
    let mut out = vec![0u32; 1024];
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut out);
    p.push(700u32);
    let err = try_run(
        &ex,
        LaunchConfig::new(1, 1024),
        plain_entry::<panic_while_others_wait>(),
        &p,
        None,
    )
    .unwrap_err();
    match &err {
        CpuError::KernelPanic {
            thread, location, ..
        } => {
            assert_eq!(thread.x, 700);
            assert!(location.as_deref().unwrap().contains("cpu_executor.rs"));
        }
        other => panic!("expected a kernel panic, got {other}"),
    }
    assert!(
        out.iter().all(|&v| v == 0),
        "no thread got past the barrier"
    );
    // The executor is still usable, and stacks are reused.
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut out);
    p.push(u32::MAX);
    run::<panic_while_others_wait>(&ex, LaunchConfig::new(1, 1024), &p);
    assert!(out.iter().all(|&v| v == 1));
}

/// Lanes 0..16 wait at the barrier while lanes 16..32 shuffle with a full
/// mask: neither can finish.
#[kernel]
fn barrier_against_warp(out: GlobalSliceMut<u32>) {
    let lane = warp::lane_id();
    if lane < 16 {
        sync_threads(); // @deadlock-barrier
    } else {
        out.store(lane as usize, warp::shfl(warp::FULL_MASK, lane, 0));
    }
}

#[test]
fn a_deadlock_is_reported_not_hung() {
    let ex = executor();
    let mut out = vec![0u32; 32];
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut out);
    let err = try_run(
        &ex,
        LaunchConfig::new(2, 32),
        plain_entry::<barrier_against_warp>(),
        &p,
        None,
    )
    .unwrap_err();
    assert!(matches!(err, CpuError::Deadlock { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("16 of 32 live thread(s) wait at sync_threads"));
    // The barrier's location and the threads that never reach it.
    let line = include_str!("cpu_executor.rs")
        .lines()
        .position(|l| l.ends_with("// @deadlock-barrier"))
        .expect("marker")
        + 1;
    let at = format!("thread(s) 0..=15 wait at host/tests/cpu_executor.rs:{line}:");
    assert!(text.contains(&at), "{text} does not say {at}");
    assert!(
        text.contains("thread(s) 16..=31 never reach that barrier"),
        "{text}"
    );
}

#[test]
fn invalid_configurations_are_typed_errors() {
    let ex = executor();
    let p = ParamBuffer::new();
    let entry = plain_entry::<k::block_ids>();
    let cases = [
        LaunchConfig::new(0, 32),
        LaunchConfig::new(1, (32, 0, 1)),
        LaunchConfig::new(1, 1025),
        LaunchConfig::new(1, (32, 32, 2)),
        LaunchConfig::new((1, 65_536), 32),
        LaunchConfig::new(1, (1, 1, 65)),
        LaunchConfig::new(1, 32).with_shared_mem(228 * 1024),
    ];
    for cfg in cases {
        match try_run(&ex, cfg, entry, &p, None) {
            Err(CpuError::Config(
                LaunchConfigError::ZeroDim { .. }
                | LaunchConfigError::DimTooLarge { .. }
                | LaunchConfigError::BlockTooLarge { .. }
                | LaunchConfigError::SharedMemTooLarge { .. },
            )) => {}
            other => panic!("{cfg:?}: expected a configuration error, got {other:?}"),
        }
    }
}

/// Counts what the checked variant reports and checks the block hooks:
/// every block starts and ends once, on a virtual SM no other live block
/// holds.
#[derive(Default)]
struct Recorder {
    sms: usize,
    /// The source file every checked access must come from.
    file: &'static str,
    active: Vec<AtomicBool>,
    reads: AtomicU64,
    writes: AtomicU64,
    atomics: AtomicU64,
    blocks: AtomicU64,
    threads_seen: Mutex<HashMap<(u32, u32), u64>>,
}

impl Recorder {
    fn new(sms: u32, file: &'static str) -> Self {
        Recorder {
            sms: sms as usize,
            file,
            active: (0..sms).map(|_| AtomicBool::new(false)).collect(),
            ..Recorder::default()
        }
    }
}

impl SanitizerRuntime for Recorder {
    fn block_start(&self, smid: u32, _block: vigil::device::Dim3) {
        assert!((smid as usize) < self.sms);
        let was = self.active[smid as usize].swap(true, AtomicOrdering::SeqCst);
        assert!(!was, "two live blocks on SM {smid}");
        self.blocks.fetch_add(1, AtomicOrdering::Relaxed);
    }
    fn block_end(&self, smid: u32, _block: vigil::device::Dim3) {
        self.active[smid as usize].store(false, AtomicOrdering::SeqCst);
    }
    fn access(
        &self,
        t: &ThreadContext<'_>,
        _addr: usize,
        size: usize,
        kind: AccessKind,
        loc: &'static std::panic::Location<'static>,
    ) {
        assert_eq!(size, 4);
        assert!(loc.file().ends_with(self.file), "{loc}");
        let counter = match kind {
            AccessKind::Read => &self.reads,
            _ => &self.writes,
        };
        counter.fetch_add(1, AtomicOrdering::Relaxed);
        *self
            .threads_seen
            .lock()
            .unwrap()
            .entry((t.block_idx.x, t.thread_idx.x))
            .or_default() += 1;
    }
    fn atomic(
        &self,
        _t: &ThreadContext<'_>,
        _access: AtomicAccess,
        _loc: &'static std::panic::Location<'static>,
        op: &mut dyn FnMut() -> bool,
    ) {
        self.atomics.fetch_add(1, AtomicOrdering::Relaxed);
        op();
    }
    fn fence(
        &self,
        _t: &ThreadContext<'_>,
        _o: vigil::device::Ordering,
        _s: vigil::device::Scope,
        _loc: &'static std::panic::Location<'static>,
    ) {
    }
}

#[test]
fn checked_variant_reaches_the_sanitizer_runtime() {
    let ex = executor();
    let rec = Recorder::new(ex.num_virtual_sms(), "examples.rs");
    let n = 1000;
    let x = vec![1.0f32; n];
    let mut y = vec![2.0f32; n];
    let mut p = ParamBuffer::new();
    p.push(1.0f32);
    p.push_host_slice(&x).push_host_slice_mut(&mut y);
    let cfg = LaunchConfig::for_num_elems(n, 64);
    let stats = try_run(&ex, cfg, checked_entry::<examples::axpy>(), &p, Some(&rec)).unwrap();
    assert!(y.iter().all(|&v| v == 3.0));
    assert_eq!(rec.reads.load(AtomicOrdering::Relaxed), 2 * n as u64);
    assert_eq!(rec.writes.load(AtomicOrdering::Relaxed), n as u64);
    assert_eq!(rec.blocks.load(AtomicOrdering::Relaxed), stats.blocks);
    let seen = rec.threads_seen.lock().unwrap();
    assert_eq!(seen.len(), n);
    assert!(seen
        .iter()
        .all(|(&(b, t), &c)| c == 3 && b * 64 + t < n as u32));
    drop(seen);

    // Atomics go through the runtime's `atomic`, which performs them.
    let data = lcg(3000, 1);
    let mut bins = vec![0u32; 10];
    let mut p = ParamBuffer::new();
    p.push_host_slice(&data).push_host_slice_mut(&mut bins);
    let entry = checked_entry::<examples::histogram>();
    try_run(&ex, LaunchConfig::new(4, 128), entry, &p, Some(&rec)).unwrap();
    assert_eq!(rec.atomics.load(AtomicOrdering::Relaxed), 3000);
    assert_eq!(bins.iter().sum::<u32>(), 3000);
}

#[test]
fn many_workers_map_blocks_to_distinct_virtual_sms() {
    let ex = CpuExecutor::new(5).unwrap();
    assert_eq!(ex.num_virtual_sms(), 5);
    let rec = Recorder::new(5, "examples.rs");
    let n = 64 * 50;
    let x = vec![1.0f32; n];
    let mut y = vec![0.0f32; n];
    let mut p = ParamBuffer::new();
    p.push(1.0f32);
    p.push_host_slice(&x).push_host_slice_mut(&mut y);
    let cfg = LaunchConfig::for_num_elems(n, 64);
    try_run(&ex, cfg, checked_entry::<examples::axpy>(), &p, Some(&rec)).unwrap();
    assert_eq!(rec.blocks.load(AtomicOrdering::Relaxed), 50);
    assert!(y.iter().all(|&v| v == 1.0));
}

#[test]
fn launches_from_several_host_threads_are_serialised_and_correct() {
    let ex = executor();
    std::thread::scope(|scope| {
        for seed in 0..4u64 {
            let ex = &ex;
            scope.spawn(move || {
                for round in 0..5 {
                    let data = lcg(20_000, seed * 100 + round);
                    let mut bins = vec![0u32; 16];
                    let mut p = ParamBuffer::new();
                    p.push_host_slice(&data).push_host_slice_mut(&mut bins);
                    run::<examples::histogram>(ex, LaunchConfig::new(6, 128), &p);
                    let mut want = vec![0u32; 16];
                    for d in &data {
                        want[(d % 16) as usize] += 1;
                    }
                    assert_eq!(bins, want, "thread {seed} round {round}");
                }
            });
        }
    });
}

/// The first thread of the block spins until the last one (in another
/// warp, not started yet when the spin begins) publishes a value; with
/// `plain`, the flag is polled with plain loads, else with acquire loads.
#[kernel]
fn spin_on_a_later_thread(data: GlobalSliceMut<u32>, plain: u32) {
    let t = thread_idx().x;
    let flag = data.at(1);
    if t == 0 {
        if plain != 0 {
            while data.load(1) == 0 {}
        } else {
            while flag.atomic_load(Ordering::Acquire, Scope::Block) == 0 {}
        }
        data.store(2, data.load(0) + 1);
    } else if t == block_dim().x - 1 {
        data.store(0, 41);
        flag.atomic_store(1, Ordering::Release, Scope::Block);
    }
}

/// Every thread takes a block-wide spin lock, bumps a plain counter while
/// holding it across a barrier-free critical section that yields (it polls
/// the counter), and releases it.
#[kernel]
fn spin_lock_counter<S: Sanitizer>(lock: GlobalSliceMut<u32, S>, counter: GlobalSliceMut<u32, S>) {
    while lock
        .at(0)
        .atomic_compare_exchange(0, 1, Ordering::Acquire, Scope::Block)
        .is_err()
    {}
    // Read the counter more times than the spin threshold: the holder
    // steps aside while the others spin on the lock.
    let mut v = 0;
    for _ in 0..40 {
        v = counter.load(0);
    }
    counter.store(0, v + 1);
    lock.at(0).atomic_store(0, Ordering::Release, Scope::Block);
}

#[test]
fn spin_waits_on_threads_of_the_same_block_finish() {
    let ex = executor();
    for plain in [0u32, 1] {
        let mut data = vec![0u32; 3];
        let mut p = ParamBuffer::new();
        p.push_host_slice_mut(&mut data);
        p.push(plain);
        run::<spin_on_a_later_thread>(&ex, LaunchConfig::new(2, 256), &p);
        assert_eq!(data, [41, 1, 42], "plain polling: {plain}");
    }
    let rec = Recorder::new(ex.num_virtual_sms(), "cpu_executor.rs");
    for entry in [
        plain_entry::<spin_lock_counter>(),
        checked_entry::<spin_lock_counter>(),
    ] {
        let (mut lock, mut counter) = (vec![0u32; 1], vec![0u32; 1]);
        let mut p = ParamBuffer::new();
        p.push_host_slice_mut(&mut lock)
            .push_host_slice_mut(&mut counter);
        try_run(&ex, LaunchConfig::new(1, 128), entry, &p, Some(&rec)).unwrap();
        assert_eq!((lock[0], counter[0]), (0, 128));
    }
}

/// Thread 0 of each block waits for a flag that no thread sets (with plain
/// loads when `plain`, else acquire loads); with `barrier`, the block's other
/// threads wait at `sync_threads` meanwhile, else they return.
#[kernel]
fn wait_for_a_flag_nobody_sets(flag: GlobalSliceMut<u32>, plain: u32, barrier: u32) {
    if thread_idx().x == 0 {
        if plain != 0 {
            while flag.load(0) == 0 {}
        } else {
            while flag.at(0).atomic_load(Ordering::Acquire, Scope::Device) == 0 {}
        }
    }
    if barrier != 0 {
        sync_threads();
    }
}

/// Thread 0 counts up in `data[1]` until `data[0]` is set (it polls only
/// `data[0]`); thread 32 polls the count until it reaches `target`, then
/// sets `data[0]`. Both only spin, but the count changes all the while.
#[kernel]
fn spin_while_another_spinner_counts(data: GlobalSliceMut<u32>, target: u32) {
    let t = thread_idx().x;
    if t == 0 {
        let mut i = 0;
        while data.at(0).atomic_load(Ordering::Acquire, Scope::Block) == 0 {
            i += 1;
            data.at(1).atomic_store(i, Ordering::Relaxed, Scope::Block);
        }
    } else if t == 32 {
        while data.at(1).atomic_load(Ordering::Relaxed, Scope::Block) < target {}
        data.at(0).atomic_store(1, Ordering::Release, Scope::Block);
    }
}

/// Thread 0 polls two flags in turn, neither ever set: it never reads one
/// address twice in a row, so only a time limit ends it.
#[kernel]
fn poll_two_flags_forever(flags: GlobalSliceMut<u32>) {
    if thread_idx().x == 0 {
        while flags.load(0) == 0 && flags.load(1) == 0 {}
    }
}

fn livelock_of(err: CpuError) -> (Vec<vigil::unstable::cpu::StalledBlock>, u64) {
    match err {
        CpuError::Livelock { blocks, unstarted } => (blocks, unstarted),
        other => panic!("expected a livelock, got: {other}"),
    }
}

#[test]
fn a_launch_whose_threads_all_spin_on_unchanging_memory_fails_with_their_locations() {
    let ex = executor();
    let rec = Recorder::new(ex.num_virtual_sms(), "cpu_executor.rs");
    let entries = [
        ("plain", plain_entry::<wait_for_a_flag_nobody_sets>()),
        ("checked", checked_entry::<wait_for_a_flag_nobody_sets>()),
    ];
    for (variant, entry) in entries {
        for plain in [0u32, 1] {
            let mut flag = vec![0u32; 1];
            let mut p = ParamBuffer::new();
            p.push_host_slice_mut(&mut flag);
            p.push(plain);
            p.push(0u32);
            let addr = flag.as_ptr() as u64;
            let sanitizer = (variant == "checked").then_some(&rec as &dyn SanitizerRuntime);
            // Four blocks on two workers: two spin, two never start.
            let err = try_run(&ex, LaunchConfig::new(4, 64), entry, &p, sanitizer).unwrap_err();
            let msg = err.to_string();
            let (blocks, unstarted) = livelock_of(err);
            assert_eq!((blocks.len(), unstarted), (2, 2), "{variant}: {msg}");
            for b in &blocks {
                assert_eq!(b.spinning.len(), 1, "{msg}");
                let t = &b.spinning[0];
                assert_eq!(
                    (t.thread, t.address, t.bytes),
                    (Dim3::new(0, 0, 0), addr, 4)
                );
                let loc = t.location.as_str();
                assert!(loc.contains("cpu_executor.rs:"), "{variant}/{plain}: {msg}");
                assert!(b.waiting.is_none(), "{msg}");
            }
            assert!(msg.contains("cpu_executor.rs:") && msg.contains("2 block(s) not started"));
        }
    }
}

#[test]
fn a_livelock_names_the_threads_waiting_at_a_barrier_too() {
    let ex = executor();
    let mut flag = vec![0u32; 1];
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut flag);
    p.push(1u32);
    p.push(1u32);
    let entry = plain_entry::<wait_for_a_flag_nobody_sets>();
    let err = try_run(&ex, LaunchConfig::new(1, 96), entry, &p, None).unwrap_err();
    let msg = err.to_string();
    let (blocks, unstarted) = livelock_of(err);
    assert_eq!((blocks.len(), unstarted), (1, 0));
    let waiting = blocks[0].waiting.as_deref().unwrap_or_default();
    assert!(
        waiting.contains("95 of 96 live thread(s) wait at sync_threads"),
        "{msg}"
    );
}

#[test]
fn spinning_threads_whose_polled_memory_changes_are_no_livelock() {
    let ex = executor();
    // Far more passes than the detector's threshold before thread 32 is
    // satisfied: only the changing count tells this from a livelock.
    let mut data = vec![0u32; 2];
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut data);
    p.push(20_000u32);
    run::<spin_while_another_spinner_counts>(&ex, LaunchConfig::new(1, 64), &p);
    assert_eq!(data[0], 1);
    assert!(data[1] >= 20_000);
}

#[test]
fn a_launch_timeout_stops_a_thread_that_never_yields() {
    let ex = executor();
    let mut flags = vec![0u32; 2];
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut flags);
    let limit = std::time::Duration::from_millis(200);
    let start = std::time::Instant::now();
    let entry = plain_entry::<poll_two_flags_forever>();
    // SAFETY: the parameters are the kernel's, from a live host slice.
    let err = unsafe {
        ex.launch_with_timeout(
            &LaunchConfig::new(3, 32),
            entry,
            p.as_bytes(),
            None,
            Some(limit),
        )
    }
    .unwrap_err();
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
    match &err {
        CpuError::Timeout {
            limit: l, total, ..
        } => assert_eq!((*l, *total), (limit, 3)),
        other => panic!("expected a timeout, got: {other}"),
    }
    assert!(err.to_string().contains("VIGIL_LAUNCH_TIMEOUT"), "{err}");
    // The executor is usable afterwards.
    let mut data = vec![0u32; 3];
    let mut p = ParamBuffer::new();
    p.push_host_slice_mut(&mut data);
    p.push(0u32);
    run::<spin_on_a_later_thread>(&ex, LaunchConfig::new(1, 64), &p);
    assert_eq!(data, [41, 1, 42]);
}

/// Block 0 waits for a flag that block 1 sets after `work` steps of its
/// own (reads and writes of changing addresses: work, not a spin).
#[kernel]
fn wait_for_a_slow_block(data: GlobalSliceMut<u32>, work: u32) {
    if thread_idx().x != 0 {
        return;
    }
    if block_idx().x == 0 {
        while data.at(0).atomic_load(Ordering::Acquire, Scope::Device) == 0 {}
    } else {
        let mut acc = 0u32;
        for i in 0..work {
            let slot = 1 + (i % 64) as usize;
            acc = acc.wrapping_add(data.load(slot));
            data.store(slot, acc | 1);
        }
        data.at(0).atomic_store(1, Ordering::Release, Scope::Device);
    }
}

#[test]
fn a_block_spinning_on_another_that_works_is_no_livelock_unless_it_cannot_start() {
    let params = |data: &mut Vec<u32>| {
        let mut p = ParamBuffer::new();
        p.push_host_slice_mut(data);
        p.push(1_000_000u32);
        p
    };
    // Two workers: block 0 stalls long before block 1 is done, but block
    // 1's worker is busy working, so the launch is not stuck.
    let mut data = vec![0u32; 65];
    run::<wait_for_a_slow_block>(&executor(), LaunchConfig::new(2, 32), &params(&mut data));
    assert_eq!(data[0], 1);
    // One worker: block 1 can never start while block 0 spins (on a GPU
    // the two blocks would need to be co-resident).
    let one = CpuExecutor::new(1).unwrap();
    let mut data = vec![0u32; 65];
    let entry = plain_entry::<wait_for_a_slow_block>();
    let err = try_run(
        &one,
        LaunchConfig::new(2, 32),
        entry,
        &params(&mut data),
        None,
    )
    .unwrap_err();
    let msg = err.to_string();
    let (blocks, unstarted) = livelock_of(err);
    assert_eq!((blocks.len(), unstarted), (1, 1), "{msg}");
    assert!(msg.contains("1 block(s) not started"), "{msg}");
}
