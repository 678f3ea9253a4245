//! Allocation latency, side by side in one run: plain `cuMemAlloc`/`cuMemFree`,
//! stream-ordered `cuMemAllocAsync`/`cuMemFreeAsync`, the uncached shadow
//! allocator (`Vmm`: create, map, zero shadow / sync, unmap, release) and the
//! caching pool (`CachingPool`: reuse, zero shadow, record event), for 1 MiB
//! and 256 MiB. Prints the cached/plain ratio for 1 MiB (target: <= 2x).
//!
//! ```text
//! cargo run --release -p vigil --example alloc_bench
//! ```
//!
//! Without a GPU it prints why and exits 0; with `VIGIL_REQUIRE_GPU=1` it
//! fails instead.

use std::time::Instant;
use vigil::unstable::sys;
use vigil::unstable::vmm::{CachingPool, Vmm, VmmConfig};
use vigil::{Context, Stream};

const MIB: u64 = 1 << 20;

fn check(call: &str, r: sys::CUresult) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "{call} failed");
}

/// Mean microseconds per iteration of `f` over `iters` (after `iters / 10 + 1`
/// warm-up iterations), including `finish` (a final synchronisation) once.
fn time_us(iters: u32, mut f: impl FnMut(), finish: impl Fn()) -> f64 {
    for _ in 0..iters / 10 + 1 {
        f();
    }
    finish();
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    finish();
    t.elapsed().as_secs_f64() * 1e6 / iters as f64
}

fn plain(ctx: &Context, size: u64, iters: u32) -> f64 {
    ctx.bind().unwrap();
    time_us(
        iters,
        || {
            let mut p: sys::CUdeviceptr = 0;
            // SAFETY: `p` is a valid out-pointer; the context is current.
            check("cuMemAlloc", unsafe {
                sys::cuMemAlloc_v2(&mut p, size as usize)
            });
            // SAFETY: `p` was just allocated and is freed once.
            check("cuMemFree", unsafe { sys::cuMemFree_v2(p) });
        },
        || ctx.synchronize().unwrap(),
    )
}

fn stream_ordered(ctx: &Context, stream: &Stream, size: u64, iters: u32) -> f64 {
    ctx.bind().unwrap();
    time_us(
        iters,
        || {
            let mut p: sys::CUdeviceptr = 0;
            // SAFETY: `p` is a valid out-pointer; the stream is live.
            check("cuMemAllocAsync", unsafe {
                sys::cuMemAllocAsync(&mut p, size as usize, stream.raw())
            });
            // SAFETY: `p` was allocated on this stream and is freed once.
            check("cuMemFreeAsync", unsafe {
                sys::cuMemFreeAsync(p, stream.raw())
            });
        },
        || stream.synchronize().unwrap(),
    )
}

fn main() {
    let Some(ctx) = vigil::unstable::testing::require_gpu() else {
        return;
    };
    let stream = Stream::new(&ctx).expect("stream");
    let vmm = Vmm::new(&ctx, VmmConfig::from_env().expect("VIGIL_* configuration")).expect("Vmm");
    let pool = CachingPool::new(vmm.clone());
    println!(
        "device {}: {} ({} SMs)",
        ctx.ordinal(),
        ctx.name(),
        ctx.sm_count()
    );
    println!(
        "{:>9}  {:>14}  {:>18}  {:>14}  {:>14}",
        "size", "cuMemAlloc+Free", "cuMemAllocAsync+Free", "vmm uncached", "vmm cached"
    );
    let mut ratio = (0.0, 0.0);
    let mut async_1mib = f64::NAN;
    for (size, n_plain, n_vmm, n_pool) in [(MIB, 2000, 300, 5000), (256 * MIB, 200, 50, 1000)] {
        let p = plain(&ctx, size, n_plain);
        let a = stream_ordered(&ctx, &stream, size, n_plain);
        let u = time_us(
            n_vmm,
            || {
                let x = vmm.alloc(&stream, size).unwrap();
                vmm.free(x.ptr, &stream).unwrap();
            },
            || stream.synchronize().unwrap(),
        );
        let c = time_us(
            n_pool,
            || {
                let x = pool.alloc(&stream, size).unwrap();
                pool.free(x.ptr, &stream).unwrap();
            },
            || stream.synchronize().unwrap(),
        );
        println!(
            "{:>6} MiB  {p:>12.2} us  {a:>17.2} us  {u:>11.2} us  {c:>11.2} us",
            size / MIB
        );
        if size == MIB {
            ratio = (c / p, c / a);
            async_1mib = a;
        }
    }
    // Lazy shadow reset (the sanitized launch path notes every launch): with
    // no sanitized launch between reuses the reset is skipped.
    vmm.set_lazy_shadow_reset(true);
    let lazy: Vec<f64> = [MIB, 256 * MIB]
        .iter()
        .map(|&size| {
            time_us(
                5000,
                || {
                    let x = pool.alloc(&stream, size).unwrap();
                    pool.free(x.ptr, &stream).unwrap();
                },
                || stream.synchronize().unwrap(),
            )
        })
        .collect();
    vmm.set_lazy_shadow_reset(false);
    println!(
        "vmm cached, lazy reset, no sanitized launch between reuses: {:.2} us (1 MiB), {:.2} us (256 MiB); 1 MiB {:.2}x vs cuMemAllocAsync+cuMemFreeAsync",
        lazy[0],
        lazy[1],
        lazy[0] / async_1mib
    );
    // What one cached cycle is made of, for 1 MiB: the shadow reset (a
    // 2 MiB cuMemsetD8Async) and the event recorded at the free.
    let shadow = vmm.alloc(&stream, MIB).expect("alloc");
    let memset = time_us(
        5000,
        || vmm.reset_shadow(&shadow, &stream).unwrap(),
        || stream.synchronize().unwrap(),
    );
    let d32 = time_us(
        5000,
        || {
            // SAFETY: the shadow range is mapped; 2 MiB is a multiple of 4.
            check("cuMemsetD32Async", unsafe {
                sys::cuMemsetD32Async(shadow.shadow_ptr, 0, (2 * MIB / 4) as usize, stream.raw())
            })
        },
        || stream.synchronize().unwrap(),
    );
    let event = vigil::Event::new_untimed(&ctx).expect("event");
    let record = time_us(
        5000,
        || event.record(&stream).unwrap(),
        || stream.synchronize().unwrap(),
    );
    vmm.free(shadow.ptr, &stream).expect("free");
    println!(
        "1 MiB cached cycle parts: shadow reset {memset:.2} us (cuMemsetD32Async of the same 2 MiB: {d32:.2} us), event record {record:.2} us"
    );
    let stats = pool.stats();
    println!("pool: {} hits, {} misses", stats.hits, stats.misses);
    println!(
        "1 MiB cached/plain: {:.2}x vs cuMemAlloc+cuMemFree, {:.2}x vs cuMemAllocAsync+cuMemFreeAsync (target <= 2x): {}",
        ratio.0,
        ratio.1,
        if ratio.0.min(ratio.1) <= 2.0 { "met" } else { "NOT met" }
    );
    pool.empty_cache().expect("empty_cache");
}
