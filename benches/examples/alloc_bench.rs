//! Allocation latency, side by side in one run: plain `cuMemAlloc`/`cuMemFree`,
//! stream-ordered `cuMemAllocAsync`/`cuMemFreeAsync`, the uncached shadow
//! allocator (`Vmm`) and the caching pool (`CachingPool`), for 1 MiB and
//! 256 MiB, with what one cached cycle is made of. Prints the cached/plain
//! ratio for 1 MiB (target: <= 2x). The benchmark suite (`vigil-bench`)
//! reports the same 1 MiB figures.
//!
//! ```text
//! cargo run --release -p vigil-bench --example alloc_bench
//! ```
//!
//! Without a GPU it prints why and exits 0; with `VIGIL_REQUIRE_GPU=1` it
//! fails instead.

use vigil_bench::alloc::{AllocFigures, Allocators, MIB};

fn main() -> Result<(), vigil::ErrorReport> {
    let Some(ctx) = vigil::unstable::testing::require_gpu() else {
        return Ok(());
    };
    let a = Allocators::new(&ctx)?;
    println!(
        "device {}: {} ({} SMs)",
        ctx.ordinal(),
        ctx.name(),
        ctx.sm_count()
    );
    println!(
        "{:>9}  {:>15}  {:>20}  {:>14}  {:>14}",
        "size", "cuMemAlloc+Free", "cuMemAllocAsync+Free", "vmm uncached", "vmm cached"
    );
    let mut small: Option<AllocFigures> = None;
    for (size, iters) in [(MIB, 5000), (256 * MIB, 1000)] {
        let f = a.measure(size, iters)?;
        println!(
            "{:>6} MiB  {:>12.2} us  {:>17.2} us  {:>11.2} us  {:>11.2} us",
            size / MIB,
            f.plain_us,
            f.stream_ordered_us,
            f.vmm_us,
            f.cached_us
        );
        small.get_or_insert(f);
    }
    let lazy_small = a.lazy_cached_us(MIB, 5000)?;
    let lazy_large = a.lazy_cached_us(256 * MIB, 5000)?;
    let (reset, memset, record) = a.cycle_parts_us(5000)?;
    let (hits, misses) = a.pool_hits_misses();
    println!(
        "vmm cached, lazy reset, no sanitized launch between reuses: {lazy_small:.2} us (1 MiB), {lazy_large:.2} us (256 MiB)"
    );
    println!(
        "1 MiB cached cycle parts: shadow reset {reset:.2} us (cuMemsetD32Async of the same 2 MiB: {memset:.2} us), event record {record:.2} us"
    );
    println!("pool: {hits} hits, {misses} misses");
    if let Some(f) = small {
        let (vs_plain, vs_async) = (f.cached_us / f.plain_us, f.cached_us / f.stream_ordered_us);
        println!(
            "1 MiB cached/plain: {vs_plain:.2}x vs cuMemAlloc+cuMemFree, {vs_async:.2}x vs cuMemAllocAsync+cuMemFreeAsync (target <= 2x): {}",
            if vs_plain.min(vs_async) <= 2.0 { "met" } else { "NOT met" }
        );
    }
    Ok(())
}
