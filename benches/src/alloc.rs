//! Allocation latency, side by side in one run: plain `cuMemAlloc`/
//! `cuMemFree`, stream-ordered `cuMemAllocAsync`/`cuMemFreeAsync`, the
//! uncached shadow allocator (`Vmm`: create, map, zero shadow / sync, unmap,
//! release) and the caching pool (`CachingPool`: reuse, zero shadow,
//! record event). The suite reports the 1 MiB figures; the `alloc_bench`
//! example prints them all, with what one cached cycle is made of.

use crate::error::{driver, Result};
use crate::timing::host_us;
use vigil::unstable::sys;
use vigil::unstable::vmm::{CachingPool, SanitizerConfig, Vmm};
use vigil::{Context, Event, Stream};

/// One MiB.
pub const MIB: u64 = 1 << 20;

/// Microseconds per allocate-and-free cycle of one size, by allocator.
#[derive(Clone, Copy, Debug)]
pub struct AllocFigures {
    /// Bytes per allocation.
    pub size: u64,
    /// `cuMemAlloc` + `cuMemFree`.
    pub plain_us: f64,
    /// `cuMemAllocAsync` + `cuMemFreeAsync`.
    pub stream_ordered_us: f64,
    /// The shadow allocator without its cache.
    pub vmm_us: f64,
    /// The caching pool (what a sanitized context allocates from).
    pub cached_us: f64,
}

/// The allocators under test, on one GPU context.
pub struct Allocators {
    ctx: Context,
    stream: Stream,
    vmm: Vmm,
    pool: CachingPool,
}

impl Allocators {
    /// A shadow allocator (`VIGIL_*` settings from the environment) and a
    /// caching pool over it, on `ctx`.
    pub fn new(ctx: &Context) -> Result<Allocators> {
        let stream = Stream::new(ctx)?;
        let config = SanitizerConfig::from_env().map_err(vigil::Error::from)?;
        let vmm = Vmm::new(ctx, config).map_err(vigil::Error::from)?;
        let pool = CachingPool::new(vmm.clone());
        Ok(Allocators {
            ctx: ctx.clone(),
            stream,
            vmm,
            pool,
        })
    }

    fn sync(&self) -> Result<()> {
        Ok(self.stream.synchronize()?)
    }

    /// Times each allocator at `size` bytes over `iters` cycles (the
    /// uncached shadow allocator over `iters / 10`: it maps and unmaps).
    pub fn measure(&self, size: u64, iters: usize) -> Result<AllocFigures> {
        self.ctx.bind()?;
        let per_batch = (iters / 10).max(1);
        let plain_us = host_us(
            10,
            per_batch,
            || {
                let mut p: sys::CUdeviceptr = 0;
                // SAFETY: `p` is a valid out-pointer; the context is current.
                driver("cuMemAlloc", unsafe {
                    sys::cuMemAlloc_v2(&mut p, size as usize)
                })?;
                // SAFETY: `p` was just allocated and is freed once.
                driver("cuMemFree", unsafe { sys::cuMemFree_v2(p) })
            },
            || self.sync(),
        )?;
        let stream_ordered_us = host_us(
            10,
            per_batch,
            || {
                let mut p: sys::CUdeviceptr = 0;
                // SAFETY: `p` is a valid out-pointer; the stream is live.
                driver("cuMemAllocAsync", unsafe {
                    sys::cuMemAllocAsync(&mut p, size as usize, self.stream.raw())
                })?;
                // SAFETY: `p` was allocated on this stream and is freed once.
                driver("cuMemFreeAsync", unsafe {
                    sys::cuMemFreeAsync(p, self.stream.raw())
                })
            },
            || self.sync(),
        )?;
        let vmm_us = host_us(
            5,
            (per_batch / 10).max(1),
            || {
                let a = self
                    .vmm
                    .alloc(&self.stream, size)
                    .map_err(vigil::Error::from)?;
                Ok(self
                    .vmm
                    .free(a.ptr, &self.stream)
                    .map_err(vigil::Error::from)?)
            },
            || self.sync(),
        )?;
        let cached_us = self.cached_cycle_us(size, iters)?;
        Ok(AllocFigures {
            size,
            plain_us,
            stream_ordered_us,
            vmm_us,
            cached_us,
        })
    }

    fn cached_cycle_us(&self, size: u64, iters: usize) -> Result<f64> {
        host_us(
            10,
            (iters / 10).max(1),
            || {
                let a = self
                    .pool
                    .alloc(&self.stream, size)
                    .map_err(vigil::Error::from)?;
                Ok(self
                    .pool
                    .free(a.ptr, &self.stream)
                    .map_err(vigil::Error::from)?)
            },
            || self.sync(),
        )
    }

    /// A cached cycle with the lazy shadow reset on and no sanitized launch
    /// between reuses (so the reset is skipped), in microseconds.
    pub fn lazy_cached_us(&self, size: u64, iters: usize) -> Result<f64> {
        self.vmm.set_lazy_shadow_reset(true);
        let us = self.cached_cycle_us(size, iters);
        self.vmm.set_lazy_shadow_reset(false);
        us
    }

    /// What one 1 MiB cached cycle is made of: the shadow reset, a
    /// `cuMemsetD32Async` of the same bytes, and the event recorded at the
    /// free, each in microseconds.
    pub fn cycle_parts_us(&self, iters: usize) -> Result<(f64, f64, f64)> {
        let per_batch = (iters / 10).max(1);
        let shadow = self
            .vmm
            .alloc(&self.stream, MIB)
            .map_err(vigil::Error::from)?;
        let reset = host_us(
            10,
            per_batch,
            || {
                Ok(self
                    .vmm
                    .reset_shadow(&shadow, &self.stream)
                    .map_err(vigil::Error::from)?)
            },
            || self.sync(),
        )?;
        let memset = host_us(
            10,
            per_batch,
            || {
                // SAFETY: the shadow range is mapped; 2 MiB is a multiple of 4.
                driver("cuMemsetD32Async", unsafe {
                    sys::cuMemsetD32Async(
                        shadow.shadow_ptr,
                        0,
                        (2 * MIB / 4) as usize,
                        self.stream.raw(),
                    )
                })
            },
            || self.sync(),
        )?;
        let event = Event::new_untimed(&self.ctx)?;
        let record = host_us(
            10,
            per_batch,
            || Ok(event.record(&self.stream)?),
            || self.sync(),
        )?;
        self.vmm
            .free(shadow.ptr, &self.stream)
            .map_err(vigil::Error::from)?;
        Ok((reset, memset, record))
    }

    /// The pool's hit and miss counts so far.
    pub fn pool_hits_misses(&self) -> (u64, u64) {
        let s = self.pool.stats();
        (s.hits, s.misses)
    }
}

impl Drop for Allocators {
    fn drop(&mut self) {
        // Cached blocks go back to the driver; nothing to report on failure.
        let _ = self.pool.empty_cache();
    }
}
