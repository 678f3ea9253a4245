//! GPU tests of the shadow-memory allocator (`vigil::unstable::vmm`), run
//! by Vigil's harness on each GPU: reported as skipped when no GPU is
//! usable, a failure instead when `VIGIL_REQUIRE_GPU=1`.
//!
//! Data is written and read back through two `vigil-kernels` kernels
//! (`fill_pattern`, `copy_inc`), launched with `Stream::launch_packed` on the
//! allocator's raw addresses; the shadow is inspected with stream-ordered
//! copies. Tests take one lock so
//! the free-memory check sees no other test's allocations.

use std::sync::{Mutex, MutexGuard};
use vigil::unstable::sys;
use vigil::unstable::vmm::layout::{
    global_state_of, round_up, shadow_address, shadow_bytes_for, PER_DEVICE_STATE_STRIDE,
    REAL_CAPACITY, RESERVE_BYTES, THREAD_STATES_OFFSET,
};
use vigil::unstable::vmm::{Allocation, CachingPool, SanitizerConfig, Vmm, VmmError};
use vigil::{Context, LaunchConfig, Module, ParamBuffer, Stream};
use vigil_kernels::tests::{copy_inc, fill_pattern, pattern};
use vigil_shared::abi::{GlobalState, ThreadStateHeader};
use vigil_tests::KERNELS_PTX;

const MIB: u64 = 1 << 20;

/// Serialises the tests of this binary (free-memory accounting).
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

struct Gpu {
    ctx: Context,
    stream: Stream,
    vmm: Vmm,
    module: Module,
    _serial: MutexGuard<'static, ()>,
}

fn gpu(ctx: &Context) -> Gpu {
    let serial = serial();
    let ctx = ctx.clone();
    let stream = Stream::new(&ctx).expect("stream");
    let vmm = Vmm::new(&ctx, SanitizerConfig::default()).expect("Vmm::new");
    let module = Module::from_ptx(&ctx, KERNELS_PTX).expect("load the vigil-kernels PTX");
    Gpu {
        ctx,
        stream,
        vmm,
        module,
        _serial: serial,
    }
}

fn expected(i: u64, seed: u32) -> u32 {
    pattern(i as usize, seed)
}

fn launch_cfg(words: u64) -> LaunchConfig {
    let blocks = words.div_ceil(256).clamp(1, 8192) as u32;
    LaunchConfig::new(blocks, 256)
}

impl Gpu {
    /// `out[i] = expected(i, seed)` for `words` u32 words at `ptr`.
    fn fill(&self, stream: &Stream, ptr: u64, words: u64, seed: u32) {
        let k = self.module.kernel::<fill_pattern>().unwrap();
        let p = fill_params(ptr, words, seed, self.ctx.ordinal());
        // SAFETY: the kernel writes `words` u32 at `ptr`, inside a live
        // mapped allocation of at least that size.
        unsafe { stream.launch_packed(k.function(), launch_cfg(words), &p) }
            .expect("launch fill_pattern");
    }

    /// `dst[i] = src[i] + 1` for `words` words.
    fn copy_inc(&self, src: u64, dst: u64, words: u64) {
        let k = self.module.kernel::<copy_inc>().unwrap();
        let p = copy_params(src, dst, words, self.ctx.ordinal());
        // SAFETY: both ranges are live allocations of at least `words` words.
        unsafe {
            self.stream
                .launch_packed(k.function(), launch_cfg(words), &p)
        }
        .expect("launch copy_inc");
    }
}

fn fill_params(ptr: u64, words: u64, seed: u32, device: usize) -> ParamBuffer {
    let mut p = ParamBuffer::new();
    p.begin_arg(0);
    p.push_pointer(ptr, Some(device));
    p.push(words);
    p.begin_arg(1);
    p.push(seed);
    p
}

fn copy_params(src: u64, dst: u64, words: u64, device: usize) -> ParamBuffer {
    let mut p = ParamBuffer::new();
    p.begin_arg(0);
    p.push_pointer(src, Some(device));
    p.push(words);
    p.begin_arg(1);
    p.push_pointer(dst, Some(device));
    p.push(words);
    p
}

/// Runs without a GPU: the test kernels' PTX parses and accepts the
/// arguments the tests pack.
#[vigil::test(cpu, plain)]
fn test_kernels_accept_their_packed_arguments(_: &Context) {
    let entries =
        vigil::unstable::ptx::parse_entries(KERNELS_PTX).expect("parse the vigil-kernels PTX");
    for (name, buf) in [
        ("fill_pattern", fill_params(1 << 40, 8, 1, 0)),
        ("copy_inc", copy_params(4, 8, 2, 0)),
    ] {
        let e = entries.iter().find(|e| e.name == name).expect(name);
        vigil::unstable::launch_abi::check_params(name, &buf, &e.params, &[], Some(0)).expect(name);
    }
}

/// Copies `n` u32 words from device address `ptr` (ordered on `stream`).
fn read_u32(stream: &Stream, ptr: u64, n: u64) -> Vec<u32> {
    let mut v = vec![0u32; n as usize];
    stream.context().bind().unwrap();
    // SAFETY: `v` is writable for `4n` bytes; the device range is mapped.
    let r = unsafe {
        sys::cuMemcpyDtoHAsync_v2(v.as_mut_ptr().cast(), ptr, 4 * n as usize, stream.raw())
    };
    assert_eq!(
        r,
        sys::CUresult::CUDA_SUCCESS,
        "cuMemcpyDtoHAsync at {ptr:#x}"
    );
    stream.synchronize().unwrap();
    v
}

/// Copies bytes to device address `ptr` (ordered on `stream`).
fn write_bytes(stream: &Stream, ptr: u64, bytes: &[u8]) {
    stream.context().bind().unwrap();
    // SAFETY: `bytes` is readable for its length; the device range is mapped.
    let r =
        unsafe { sys::cuMemcpyHtoDAsync_v2(ptr, bytes.as_ptr().cast(), bytes.len(), stream.raw()) };
    assert_eq!(
        r,
        sys::CUresult::CUDA_SUCCESS,
        "cuMemcpyHtoDAsync at {ptr:#x}"
    );
    stream.synchronize().unwrap();
}

/// Sets `n` u32 words at `ptr` to `value` on `stream` (asynchronous).
fn memset_u32(stream: &Stream, ptr: u64, value: u32, n: u64) {
    stream.context().bind().unwrap();
    // SAFETY: the device range of `4n` bytes is mapped and writable.
    let r = unsafe { sys::cuMemsetD32Async(ptr, value, n as usize, stream.raw()) };
    assert_eq!(
        r,
        sys::CUresult::CUDA_SUCCESS,
        "cuMemsetD32Async at {ptr:#x}"
    );
}

/// Asserts the first `bytes` of the shadow of `a` are zero (all of them up
/// to 16 MiB, else the first and last 8 MiB).
fn assert_shadow_zero_for(stream: &Stream, a: &Allocation, bytes: u64) {
    let chunks: Vec<(u64, u64)> = if bytes <= 16 * MIB {
        vec![(a.shadow_ptr, bytes / 4)]
    } else {
        let w = 8 * MIB / 4;
        vec![(a.shadow_ptr, w), (a.shadow_ptr + bytes - 8 * MIB, w)]
    };
    for (ptr, n) in chunks {
        let v = read_u32(stream, ptr, n);
        if let Some(i) = v.iter().position(|&x| x != 0) {
            panic!(
                "shadow of {:#x} not zero: word {i} at {ptr:#x} is {:#x}",
                a.ptr, v[i]
            );
        }
    }
}

/// A fresh allocation's whole shadow is zero.
fn assert_shadow_zero(stream: &Stream, a: &Allocation) {
    assert_shadow_zero_for(stream, a, a.shadow_bytes);
}

/// A reused block's shadow is zero for the bytes its new owner asked for.
fn assert_reused_shadow_zero(stream: &Stream, a: &Allocation) {
    assert_shadow_zero_for(stream, a, shadow_bytes_for(a.size));
}

#[vigil::test(gpu, plain)]
fn sizes_round_trip_through_kernels_with_zeroed_shadow(ctx: &Context) {
    let g = gpu(ctx);
    let first = g.vmm.alloc(&g.stream, 1).expect("alloc 1 byte");
    let gran = first.mapped_bytes;
    eprintln!(
        "allocation granularity {gran} bytes; reservation at {:#x}",
        g.vmm.reserve_base()
    );
    g.vmm.free(first.ptr, &g.stream).unwrap();
    assert!(gran.is_power_of_two() && gran >= 64 * 1024);
    for size in [1, gran - 1, gran, gran + 1, 1 << 30] {
        let a = g
            .vmm
            .alloc(&g.stream, size)
            .unwrap_or_else(|e| panic!("alloc {size}: {e}"));
        let b = g.vmm.alloc(&g.stream, size).unwrap();
        for x in [&a, &b] {
            assert_eq!(x.size, size);
            assert_eq!(x.mapped_bytes, round_up(size, gran));
            assert_eq!(x.ptr % gran, 0);
            assert!(
                x.ptr >= g.vmm.real_base()
                    && x.ptr + x.mapped_bytes <= g.vmm.real_base() + REAL_CAPACITY
            );
            assert_eq!(x.shadow_ptr, shadow_address(x.ptr));
            assert_eq!(x.shadow_bytes, 2 * x.mapped_bytes);
            assert_eq!(g.vmm.lookup(x.ptr + size - 1), Some(*x));
        }
        assert!(
            a.ptr + a.mapped_bytes <= b.ptr || b.ptr + b.mapped_bytes <= a.ptr,
            "overlap"
        );
        g.stream.synchronize().unwrap();
        assert_shadow_zero(&g.stream, &a);
        assert_shadow_zero(&g.stream, &b);
        let words = size.div_ceil(4);
        let seed = size as u32 ^ 0x5a5a_0001;
        g.fill(&g.stream, a.ptr, words, seed);
        g.copy_inc(a.ptr, b.ptr, words);
        let got = read_u32(&g.stream, b.ptr, words);
        for (i, &w) in got.iter().enumerate() {
            assert_eq!(
                w,
                expected(i as u64, seed).wrapping_add(1),
                "size {size}: word {i}"
            );
        }
        g.vmm.free(a.ptr, &g.stream).unwrap();
        g.vmm.free(b.ptr, &g.stream).unwrap();
    }
    // A byte-exact host round trip on a 1-byte allocation.
    let a = g.vmm.alloc(&g.stream, 1).unwrap();
    write_bytes(&g.stream, a.ptr, &[0xa7, 1, 2, 3]);
    assert_eq!(
        read_u32(&g.stream, a.ptr, 1)[0],
        u32::from_le_bytes([0xa7, 1, 2, 3])
    );
    g.vmm.free(a.ptr, &g.stream).unwrap();
    assert_eq!(g.vmm.live_allocations(), 0);
    assert_eq!(g.vmm.reserved_bytes(), 0, "every block coalesced back");
}

#[vigil::test(gpu, plain)]
fn runtime_state_is_written_at_the_rank_stride(ctx: &Context) {
    let g = gpu(ctx);
    let a = g.vmm.alloc(&g.stream, 4096).unwrap();
    assert_eq!(
        g.vmm.reserve_base() % RESERVE_BYTES,
        0,
        "reservation aligned to 1 TiB"
    );
    let gs = g.vmm.global_state(g.ctx.ordinal()).unwrap();
    let base = g.vmm.runtime_state_ptr(g.ctx.ordinal()).unwrap();
    assert_eq!(base % PER_DEVICE_STATE_STRIDE, 0);
    assert_eq!(
        base,
        g.vmm.globals_base() + g.ctx.ordinal() as u64 * PER_DEVICE_STATE_STRIDE
    );
    assert_eq!(gs.reserve_base, g.vmm.reserve_base());
    assert_eq!(gs.globals_base, g.vmm.globals_base());
    // With the GPU sanitizer, `num_sms` counts sanitizer threads per
    // device: each SM has the same number of CTA slots (at least one).
    let slots = gs.num_sms / g.ctx.sm_count();
    assert_eq!(gs.num_sms, slots * g.ctx.sm_count(), "whole slots per SM");
    assert!(
        (1..=vigil_shared::gpu::MAX_SLOTS_PER_SM).contains(&slots),
        "{slots} slots per SM"
    );
    assert_eq!(gs.num_threads, gs.num_sms * gs.num_devices);
    assert_eq!(
        gs.clock_buffer_size,
        SanitizerConfig::default().clock_buffer_size()
    );
    assert_eq!(gs.rng_seed, SanitizerConfig::default().seed());
    let raw = read_u32(&g.stream, base, 16);
    let on_device: GlobalState = bytemuck::pod_read_unaligned(bytemuck::cast_slice(&raw));
    assert_eq!(on_device, gs);
    let sm = gs.num_sms - 1;
    let ts = base + THREAD_STATES_OFFSET + sm as u64 * gs.thread_state_bytes as u64;
    assert_eq!(global_state_of(ts), base, "pointer-mask trick");
    let header = read_u32(
        &g.stream,
        ts,
        ThreadStateHeader::WORDS as u64 + gs.num_threads as u64,
    );
    let tid = g.ctx.ordinal() as u32 * gs.num_sms + sm;
    assert_eq!(header[ThreadStateHeader::TID_WORD], tid);
    assert_eq!(
        header[ThreadStateHeader::WORDS + tid as usize],
        1,
        "own epoch starts at 1"
    );
    let pool_header = read_u32(&g.stream, gs.pool_base, 4);
    assert_eq!(pool_header[1], gs.pool_capacity);
    g.vmm
        .set_report_buffer(g.ctx.ordinal(), 0xdead_0000, 7)
        .unwrap();
    let raw = read_u32(&g.stream, base, 16);
    let on_device: GlobalState = bytemuck::pod_read_unaligned(bytemuck::cast_slice(&raw));
    assert_eq!(
        (on_device.report_buffer, on_device.report_capacity),
        (0xdead_0000, 7)
    );
    g.vmm.free(a.ptr, &g.stream).unwrap();
}

#[vigil::test(gpu, plain)]
fn pool_reuses_blocks_per_stream_and_resets_their_shadow(ctx: &Context) {
    let g = gpu(ctx);
    let pool = CachingPool::new(g.vmm.clone());
    let (s1, s2, s3) = (
        &g.stream,
        Stream::new(&g.ctx).unwrap(),
        Stream::new(&g.ctx).unwrap(),
    );
    let a = pool.alloc(s1, MIB).unwrap();
    assert_eq!(a.size, MIB);
    memset_u32(s1, a.shadow_ptr, 0xabab_abab, a.shadow_bytes / 4);
    pool.free(a.ptr, s1).unwrap();
    // Same stream: reused at once, shadow zeroed on it.
    let b = pool.alloc(s1, MIB).unwrap();
    assert_eq!(b.ptr, a.ptr);
    assert_eq!(pool.stats().hits, 1);
    assert_reused_shadow_zero(s1, &b);
    // Another stream, after the free's event completed: reused.
    memset_u32(s1, b.shadow_ptr, 0xcdcd_cdcd, b.shadow_bytes / 4);
    pool.free(b.ptr, s1).unwrap();
    s1.synchronize().unwrap();
    // (2 MiB: the same class, so the whole shadow is reset this time.)
    let c = pool.alloc(&s2, 2 * MIB).unwrap();
    assert_eq!(c.ptr, a.ptr);
    assert_reused_shadow_zero(&s2, &c);
    // Another stream while the freeing stream is still busy: not reused.
    let busy = g.vmm.alloc(&s2, 1 << 30).unwrap();
    for _ in 0..32 {
        memset_u32(&s2, busy.ptr, 7, busy.mapped_bytes / 4);
    }
    pool.free(c.ptr, &s2).unwrap();
    let d = pool.alloc(&s3, MIB).unwrap();
    assert_ne!(
        d.ptr, c.ptr,
        "a block whose free has not completed on its stream was reused elsewhere"
    );
    s2.synchronize().unwrap();
    pool.free(d.ptr, &s3).unwrap();
    g.vmm.free(busy.ptr, &s2).unwrap();
    // Other size classes do not mix.
    let e = pool.alloc(s1, 3 * MIB).unwrap();
    assert!(e.ptr != a.ptr && e.ptr != d.ptr);
    pool.free(e.ptr, s1).unwrap();
    s1.synchronize().unwrap();
    // A device-wide free (a buffer's Drop) is reusable on any stream.
    let big = Stream::new(&g.ctx).unwrap();
    let f = pool.alloc(&big, 3 * MIB).unwrap();
    assert_eq!(f.ptr, e.ptr, "freed on s1, whose event has completed");
    memset_u32(&big, f.shadow_ptr, 1, f.shadow_bytes / 4);
    pool.free_idle(f.ptr).unwrap();
    let h = pool.alloc(&s3, 3 * MIB).unwrap();
    assert_eq!(h.ptr, f.ptr);
    assert_reused_shadow_zero(&s3, &h);
    pool.free(h.ptr, &s3).unwrap();
    let st = pool.stats();
    assert_eq!(st.live_blocks, 0);
    assert_eq!(st.cached_blocks, 3);
    // Vmm::free_idle waits for the device itself.
    let v = g.vmm.alloc(s1, MIB).unwrap();
    g.vmm.free_idle(v.ptr).unwrap();
    assert!(matches!(
        pool.free(v.ptr, s1),
        Err(VmmError::DoubleFree { .. })
    ));
    pool.empty_cache().unwrap();
    assert_eq!(pool.stats().cached_blocks, 0);
    // Lazy reset: skipped only while no sanitized launch was noted.
    let lazy = CachingPool::new(g.vmm.clone());
    g.vmm.set_lazy_shadow_reset(true);
    let x = lazy.alloc(s1, MIB).unwrap();
    lazy.free(x.ptr, s1).unwrap();
    let y = lazy.alloc(s1, MIB).unwrap();
    assert_eq!((y.ptr, lazy.stats().resets_skipped), (x.ptr, 1));
    memset_u32(s1, y.shadow_ptr, 5, y.shadow_bytes / 4);
    g.vmm.note_sanitized_launch();
    lazy.free(y.ptr, s1).unwrap();
    let z = lazy.alloc(s1, MIB).unwrap();
    assert_eq!((z.ptr, lazy.stats().resets_skipped), (x.ptr, 1));
    assert_reused_shadow_zero(s1, &z);
    lazy.free(z.ptr, s1).unwrap();
    g.vmm.set_lazy_shadow_reset(false);
    drop(lazy);
    assert_eq!(g.vmm.live_allocations(), 0);
}

#[vigil::test(gpu, plain)]
fn ten_thousand_cycles_return_free_memory(ctx: &Context) {
    let g = gpu(ctx);
    let pool = CachingPool::new(g.vmm.clone());
    // Warm up: runtime state, driver-internal pools.
    for _ in 0..10 {
        let a = g.vmm.alloc(&g.stream, MIB).unwrap();
        g.vmm.free(a.ptr, &g.stream).unwrap();
        let p = pool.alloc(&g.stream, MIB).unwrap();
        pool.free(p.ptr, &g.stream).unwrap();
    }
    pool.empty_cache().unwrap();
    g.ctx.synchronize().unwrap();
    let (free0, total) = g.ctx.memory_info().unwrap();
    let sizes = [1, 2 * MIB, 3 * MIB, 5 * MIB, 64 * MIB];
    let t = std::time::Instant::now();
    for i in 0..10_000 {
        let a = g.vmm.alloc(&g.stream, sizes[i % sizes.len()]).unwrap();
        g.vmm.free(a.ptr, &g.stream).unwrap();
    }
    let uncached = t.elapsed();
    let t = std::time::Instant::now();
    for i in 0..10_000 {
        let a = pool.alloc(&g.stream, sizes[i % sizes.len()]).unwrap();
        pool.free(a.ptr, &g.stream).unwrap();
    }
    let cached = t.elapsed();
    pool.empty_cache().unwrap();
    g.ctx.synchronize().unwrap();
    let (free1, _) = g.ctx.memory_info().unwrap();
    eprintln!(
        "10,000 cycles: uncached {:?} ({:.1} us each), cached {:?} ({:.1} us each); free {free0} -> {free1} of {total}",
        uncached,
        uncached.as_secs_f64() * 1e6 / 1e4,
        cached,
        cached.as_secs_f64() * 1e6 / 1e4
    );
    assert_eq!(
        free1, free0,
        "device free memory did not return to its starting value"
    );
    assert_eq!(g.vmm.live_allocations(), 0);
    assert_eq!(g.vmm.reserved_bytes(), 0);
}

#[vigil::test(gpu, plain)]
fn allocation_from_several_host_threads(ctx: &Context) {
    let g = gpu(ctx);
    let pool = CachingPool::new(g.vmm.clone());
    std::thread::scope(|s| {
        for t in 0..8u32 {
            let (g, pool) = (&g, &pool);
            s.spawn(move || {
                let stream = Stream::new(&g.ctx).unwrap();
                let mut live: Vec<(Allocation, u32, bool)> = Vec::new();
                for i in 0..200u32 {
                    let size = MIB * (1 + ((t * 7 + i * 13) % 9) as u64) + (i as u64 % 3);
                    let use_pool = i % 2 == 0;
                    let a = if use_pool {
                        pool.alloc(&stream, size)
                    } else {
                        g.vmm.alloc(&stream, size)
                    }
                    .unwrap_or_else(|e| panic!("thread {t} alloc {i}: {e}"));
                    let tag = t << 16 | i;
                    memset_u32(&stream, a.ptr, tag, a.size / 4);
                    live.push((a, tag, use_pool));
                    if live.len() > 4 {
                        let (a, tag, use_pool) = live.remove(0);
                        let words = a.size / 4;
                        let first = read_u32(&stream, a.ptr, 1)[0];
                        let last = read_u32(&stream, a.ptr + 4 * (words - 1), 1)[0];
                        assert_eq!(
                            (first, last),
                            (tag, tag),
                            "thread {t}: block {:#x} was overwritten",
                            a.ptr
                        );
                        if use_pool {
                            pool.free(a.ptr, &stream)
                        } else {
                            g.vmm.free(a.ptr, &stream)
                        }
                        .unwrap();
                    }
                }
                for (a, _, use_pool) in live {
                    if use_pool {
                        pool.free(a.ptr, &stream)
                    } else {
                        g.vmm.free(a.ptr, &stream)
                    }
                    .unwrap();
                }
                stream.synchronize().unwrap();
            });
        }
    });
    assert_eq!(pool.stats().live_blocks, 0);
    pool.empty_cache().unwrap();
    assert_eq!(g.vmm.live_allocations(), 0);
}

#[vigil::test(gpu, plain)]
fn export_import_round_trip_in_one_process(ctx: &Context) {
    let g = gpu(ctx);
    let a = g.vmm.alloc(&g.stream, 3 * MIB).unwrap();
    let words = a.size / 4;
    g.fill(&g.stream, a.ptr, words, 42);
    memset_u32(&g.stream, a.shadow_ptr, 0x1234_5678, 16);
    g.stream.synchronize().unwrap();
    let exported = g.vmm.export(a.ptr).expect("export");
    assert_eq!(
        (exported.mapped_bytes, exported.shadow_bytes),
        (a.mapped_bytes, a.shadow_bytes)
    );
    // A second allocator (its own reservation) maps the same memory.
    let other = Vmm::new(&g.ctx, SanitizerConfig::default()).unwrap();
    let b = other.import(&g.ctx, &exported).expect("import");
    assert_ne!(b.ptr, a.ptr);
    let got = read_u32(&g.stream, b.ptr, words);
    assert!(
        got.iter()
            .enumerate()
            .all(|(i, &w)| w == expected(i as u64, 42)),
        "imported data differs"
    );
    assert_eq!(
        read_u32(&g.stream, b.shadow_ptr, 16),
        vec![0x1234_5678; 16],
        "imported shadow differs"
    );
    // Writes through the import are visible through the original.
    g.fill(&g.stream, b.ptr, words, 7);
    let got = read_u32(&g.stream, a.ptr, words);
    assert!(
        got.iter()
            .enumerate()
            .all(|(i, &w)| w == expected(i as u64, 7)),
        "write through import not visible"
    );
    other.free(b.ptr, &g.stream).unwrap();
    assert_eq!(
        read_u32(&g.stream, a.ptr, 1)[0],
        expected(0, 7),
        "freeing the import must not unmap the original"
    );
    // Runtime state: exported from one allocator, mapped at its rank in a fresh one.
    let rt = g
        .vmm
        .export_runtime_state(g.ctx.ordinal())
        .expect("export runtime state");
    let third = Vmm::new(&g.ctx, SanitizerConfig::default()).unwrap();
    let imported = third
        .import_runtime_state(&g.ctx, &rt)
        .expect("import runtime state");
    let at = third.runtime_state_of_rank(rt.rank).unwrap();
    assert_eq!(at % PER_DEVICE_STATE_STRIDE, 0);
    let raw = read_u32(&g.stream, at, 16);
    let seen: GlobalState = bytemuck::pod_read_unaligned(bytemuck::cast_slice(&raw));
    assert_eq!(seen, g.vmm.global_state(g.ctx.ordinal()).unwrap());
    assert_eq!(imported, seen, "the import returns what the owner wrote");
    assert!(matches!(
        third.import_runtime_state(&g.ctx, &rt),
        Err(VmmError::RuntimeStateExists { .. })
    ));
    assert!(matches!(
        third.set_config(SanitizerConfig::default()),
        Err(VmmError::ConfigFrozen { .. })
    ));
    g.vmm.free(a.ptr, &g.stream).unwrap();
}

#[vigil::test(gpu, plain)]
fn bad_input_is_a_typed_error(ctx: &Context) {
    let g = gpu(ctx);
    let (vmm, s) = (&g.vmm, &g.stream);
    // Configuration can change before the first allocation, not after.
    vmm.set_config(SanitizerConfig::builder().seed(9).build().unwrap())
        .unwrap();
    assert!(matches!(vmm.alloc(s, 0), Err(VmmError::ZeroSize)));
    assert!(matches!(
        vmm.alloc(s, REAL_CAPACITY + 1),
        Err(VmmError::TooLarge { .. })
    ));
    let a = vmm.alloc(s, 100).unwrap();
    assert!(matches!(
        vmm.set_config(SanitizerConfig::default()),
        Err(VmmError::ConfigFrozen { .. })
    ));
    assert!(matches!(
        vmm.free(0x1000, s),
        Err(VmmError::ForeignPointer { ptr: 0x1000, .. })
    ));
    match vmm.free(a.ptr + 4, s) {
        Err(VmmError::InteriorPointer { base, size, .. }) => assert_eq!((base, size), (a.ptr, 100)),
        r => panic!("interior free: {r:?}"),
    }
    let never = vmm.real_base() + (100 << 30);
    assert!(matches!(
        vmm.free(never, s),
        Err(VmmError::NotAllocated { .. })
    ));
    vmm.free(a.ptr, s).unwrap();
    assert!(matches!(
        vmm.free(a.ptr, s),
        Err(VmmError::DoubleFree { .. })
    ));
    assert!(matches!(
        vmm.export(a.ptr),
        Err(VmmError::DoubleFree { .. })
    ));
    for e in [
        vmm.free(a.ptr, s).unwrap_err(),
        vmm.free(0x1000, s).unwrap_err(),
    ] {
        eprintln!("  typed error: {e}");
    }
    // The same through the pool.
    let pool = CachingPool::new(vmm.clone());
    assert!(matches!(pool.alloc(s, 0), Err(VmmError::ZeroSize)));
    let p = pool.alloc(s, 10).unwrap();
    assert!(matches!(
        pool.free(p.ptr + 8, s),
        Err(VmmError::InteriorPointer { .. })
    ));
    assert!(matches!(
        pool.free(0x1000, s),
        Err(VmmError::ForeignPointer { .. })
    ));
    pool.free(p.ptr, s).unwrap();
    assert!(matches!(
        pool.free(p.ptr, s),
        Err(VmmError::DoubleFree { .. })
    ));
    drop(pool);
    // A device outside the configured topology.
    let outside = Vmm::new(
        &g.ctx,
        SanitizerConfig::builder()
            .device_ranks(vec![g.ctx.ordinal() + 1])
            .build()
            .unwrap(),
    )
    .unwrap();
    assert!(matches!(
        outside.alloc(s, 1),
        Err(VmmError::NotInTopology { .. })
    ));
    // Runtime state too large for the 1 GiB stride: 32 ranks of this GPU's SMs.
    let huge = SanitizerConfig::builder()
        .device_ranks((0..32).collect())
        .clock_buffer_size(4096)
        .build()
        .unwrap();
    let big = Vmm::new(&g.ctx, huge).unwrap();
    match big.alloc(s, 1) {
        Err(e @ VmmError::RuntimeStateTooLarge { .. }) => eprintln!("  typed error: {e}"),
        r => panic!("expected RuntimeStateTooLarge, got {r:?}"),
    }
    assert_eq!(vmm.live_allocations(), 0);
}

vigil::test_main!();
