//! [`CachingPool`]: a caching allocator above [`Vmm`], stream-aware like
//! PyTorch's.
//!
//! Creating and mapping physical memory costs tens to hundreds of
//! microseconds, so freed blocks are kept, per device and [`size_class`],
//! and handed out again:
//!
//! - on the stream that freed them at once (stream order already puts the
//!   new user after the old one);
//! - on another stream only once an event recorded on the freeing stream at
//!   the free has completed (checked without blocking; a block whose event
//!   is pending is skipped, never waited for);
//! - with the shadow of the requested bytes zeroed on the new stream first,
//!   so the sanitizer never sees the previous owner's accesses there. With
//!   [`Vmm::set_lazy_shadow_reset`] on, the reset is skipped when no
//!   sanitized launch was noted ([`Vmm::note_sanitized_launch`]) since the
//!   block's shadow was last zeroed (nothing can have written it).
//!
//! When the device runs out of memory, the pool empties its cache and
//! retries once. [`CachingPool::empty_cache`] returns every cached block to
//! the driver.

use super::super::{AsCudaStream, CudaEvent, CudaStream};
use super::layout::{round_up, shadow_bytes_for};
use super::{check_size, lock, Allocation, DeviceAllocator, Vmm, VmmError, VmmResult};
use std::collections::HashMap;
use std::sync::Mutex;

/// Cached blocks whose events are polled per request, at most (the rest of
/// a long list is left for later requests or `empty_cache`).
const MAX_EVENT_POLLS: usize = 8;

/// The size class of a request of `size` bytes on a device with
/// allocation granularity `granularity` (a power of two): the size rounded
/// to the granularity, and above four granules to a quarter of its power of
/// two, so a cached block wastes at most 25% and reuse finds equal classes.
pub fn size_class(size: u64, granularity: u64) -> u64 {
    let g = round_up(size.max(1), granularity);
    if g <= 4 * granularity {
        return g;
    }
    let step = (1u64 << (63 - g.leading_zeros())) / 4;
    round_up(g, step.max(granularity))
}

/// Counters of a [`CachingPool`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Requests served from the cache.
    pub hits: u64,
    /// Requests that went to the VMM layer.
    pub misses: u64,
    /// Blocks handed out and not yet freed.
    pub live_blocks: u64,
    /// Blocks in the cache.
    pub cached_blocks: u64,
    /// Mapped bytes in the cache.
    pub cached_bytes: u64,
    /// Times the cache was emptied (explicitly or on out-of-memory).
    pub empties: u64,
    /// Reuses whose shadow reset was skipped (lazy reset on, no sanitized
    /// launch since the block's shadow was zeroed).
    pub resets_skipped: u64,
}

struct Cached {
    alloc: Allocation,
    /// The freeing stream ([`IDLE`] after a device-wide wait).
    stream: usize,
    /// Recorded on `stream` at the free; `None` after a device-wide wait.
    event: Option<CudaEvent>,
    clean: Clean,
}

/// The stream key of blocks freed after a device-wide wait (no real
/// stream handle is 0: the legacy default stream is never used here).
const IDLE: usize = 0;

struct Live {
    alloc: Allocation,
    class: u64,
    clean: Clean,
}

/// The shadow of a block was zeroed when the VMM's sanitized-launch epoch
/// was `epoch`, for its first `bytes` bytes.
#[derive(Clone, Copy, Debug)]
struct Clean {
    epoch: u64,
    bytes: u64,
}

#[derive(Default)]
struct PoolState {
    cached: HashMap<(usize, u64), Vec<Cached>>,
    live: HashMap<u64, Live>,
    spare_events: HashMap<usize, Vec<CudaEvent>>,
    stats: PoolStats,
}

/// The caching pool. Thread-safe; see the module documentation.
pub struct CachingPool {
    vmm: Vmm,
    state: Mutex<PoolState>,
}

impl std::fmt::Debug for CachingPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachingPool")
            .field("stats", &self.stats())
            .finish()
    }
}

fn stream_key(stream: &CudaStream) -> usize {
    stream.raw() as usize
}

impl CachingPool {
    /// A pool over `vmm`. With caching off in the configuration
    /// ([`super::SanitizerConfig::caching`]) every call goes straight through.
    pub fn new(vmm: Vmm) -> CachingPool {
        CachingPool {
            vmm,
            state: Mutex::new(PoolState::default()),
        }
    }

    /// The allocator below.
    pub fn vmm(&self) -> &Vmm {
        &self.vmm
    }

    /// The counters.
    pub fn stats(&self) -> PoolStats {
        lock(&self.state).stats
    }

    /// Allocates `size` bytes for work on `stream`, from the cache when a
    /// block of the same class may be reused on `stream`, else from the VMM
    /// layer. The returned allocation's `size` is `size`; `mapped_bytes` is
    /// the class.
    pub fn alloc(&self, stream: &impl AsCudaStream, size: u64) -> VmmResult<Allocation> {
        let stream = stream.cuda_stream()?;
        check_size(size)?;
        let ctx = stream.device();
        let ordinal = ctx.ordinal();
        let dev = self.vmm.device(ctx)?;
        let class = size_class(size, dev.granularity);
        let caching = self.vmm.caching();
        if caching {
            if let Some((mut alloc, clean)) = self.take_cached(ordinal, class, stream) {
                alloc.size = size;
                let needed = shadow_bytes_for(size).min(alloc.shadow_bytes);
                let still_clean = self.vmm.lazy_shadow_reset()
                    && clean.epoch == self.vmm.shadow_epoch()
                    && clean.bytes >= needed;
                let clean = if still_clean {
                    clean
                } else {
                    let epoch = self.vmm.shadow_epoch();
                    if let Err(e) = self.vmm.reset_shadow(&alloc, stream) {
                        // Not handed out: give it back to the driver.
                        let _ = self.vmm.free(alloc.ptr, stream);
                        return Err(e);
                    }
                    Clean {
                        epoch,
                        bytes: needed,
                    }
                };
                let mut st = lock(&self.state);
                st.stats.hits += 1;
                st.stats.resets_skipped += still_clean as u64;
                st.stats.live_blocks += 1;
                st.live.insert(
                    alloc.ptr,
                    Live {
                        alloc,
                        class,
                        clean,
                    },
                );
                return Ok(alloc);
            }
        }
        let epoch = self.vmm.shadow_epoch();
        let mut alloc = match self.vmm.alloc(stream, class) {
            Err(e) if caching && e.is_out_of_memory() => {
                self.empty_cache()?;
                self.vmm.alloc(stream, class)?
            }
            r => r?,
        };
        alloc.size = size;
        let mut st = lock(&self.state);
        st.stats.misses += 1;
        st.stats.live_blocks += 1;
        let clean = Clean {
            epoch,
            bytes: alloc.shadow_bytes,
        };
        st.live.insert(
            alloc.ptr,
            Live {
                alloc,
                class,
                clean,
            },
        );
        Ok(alloc)
    }

    fn take_cached(
        &self,
        ordinal: usize,
        class: u64,
        stream: &CudaStream,
    ) -> Option<(Allocation, Clean)> {
        let mut st = lock(&self.state);
        let list = st.cached.get_mut(&(ordinal, class))?;
        let key = stream_key(stream);
        let pos = list.iter().rposition(|c| c.stream == key).or_else(|| {
            list.iter()
                .rev()
                .take(MAX_EVENT_POLLS)
                .position(|c| {
                    c.event
                        .as_ref()
                        .is_none_or(|e| e.is_complete().unwrap_or(false))
                })
                .map(|i| list.len() - 1 - i)
        })?;
        let c = list.swap_remove(pos);
        st.stats.cached_blocks -= 1;
        st.stats.cached_bytes -= c.alloc.mapped_bytes;
        if let Some(e) = c.event {
            st.spare_events.entry(ordinal).or_default().push(e);
        }
        Some((c.alloc, c.clean))
    }

    /// Returns the block at `ptr` to the cache; `stream` is the last stream
    /// that used it (an event recorded there guards reuse elsewhere).
    /// Double frees, interior and foreign pointers are typed errors.
    pub fn free(&self, ptr: u64, stream: &impl AsCudaStream) -> VmmResult<()> {
        let stream = stream.cuda_stream()?;
        let mut st = lock(&self.state);
        let live = Self::take_live(&mut st, ptr).map_err(|()| self.classify(&st, ptr))?;
        if !self.vmm.caching() {
            drop(st);
            return self.vmm.free(ptr, stream);
        }
        let ordinal = live.alloc.device;
        let spare = st.spare_events.get_mut(&ordinal).and_then(Vec::pop);
        let event = spare.map_or_else(|| CudaEvent::new(stream.device(), false), Ok);
        match event.and_then(|e| e.record(stream).map(|()| e)) {
            Ok(e) => {
                Self::cache(&mut st, live, stream_key(stream), Some(e));
                Ok(())
            }
            Err(e) => {
                Self::restore_live(&mut st, live);
                Err(e.into())
            }
        }
    }

    /// Returns the block at `ptr` to the cache after waiting for its whole
    /// device, so any stream may reuse it at once (for owners that do not
    /// know the last stream, like a buffer's `Drop`).
    pub fn free_idle(&self, ptr: u64) -> VmmResult<()> {
        let live = {
            let mut st = lock(&self.state);
            Self::take_live(&mut st, ptr).map_err(|()| self.classify(&st, ptr))?
        };
        if !self.vmm.caching() {
            return self.vmm.free_idle(ptr);
        }
        let r = self.vmm.sync_device(live.alloc.device);
        let mut st = lock(&self.state);
        match r {
            Ok(()) => Self::cache(&mut st, live, IDLE, None),
            Err(_) => Self::restore_live(&mut st, live),
        }
        r
    }

    fn take_live(st: &mut PoolState, ptr: u64) -> Result<Live, ()> {
        let live = st.live.remove(&ptr).ok_or(())?;
        st.stats.live_blocks -= 1;
        Ok(live)
    }

    fn restore_live(st: &mut PoolState, live: Live) {
        st.stats.live_blocks += 1;
        st.live.insert(live.alloc.ptr, live);
    }

    fn cache(st: &mut PoolState, live: Live, stream: usize, event: Option<CudaEvent>) {
        st.stats.cached_blocks += 1;
        st.stats.cached_bytes += live.alloc.mapped_bytes;
        let key = (live.alloc.device, live.class);
        st.cached.entry(key).or_default().push(Cached {
            alloc: live.alloc,
            stream,
            event,
            clean: live.clean,
        });
    }

    fn classify(&self, st: &PoolState, ptr: u64) -> VmmError {
        if st.cached.values().flatten().any(|c| c.alloc.ptr == ptr) {
            return VmmError::DoubleFree { ptr };
        }
        if let Some(l) = st
            .live
            .values()
            .find(|l| ptr > l.alloc.ptr && ptr < l.alloc.ptr + l.alloc.mapped_bytes)
        {
            return VmmError::InteriorPointer {
                ptr,
                base: l.alloc.ptr,
                size: l.alloc.size,
            };
        }
        // Not a block of this pool: the VMM layer says what it is (a block
        // freed from the pool to the driver is a double free there too).
        match self.vmm.check_live(ptr) {
            Ok(()) => VmmError::NotFromPool { ptr },
            Err(e) => e,
        }
    }

    /// Waits for every cached block's event and returns the blocks to the
    /// driver (unmap, release, coalesce). Returns the first error; blocks
    /// that failed stay out of the tree.
    pub fn empty_cache(&self) -> VmmResult<()> {
        let blocks: Vec<Cached> = {
            let mut st = lock(&self.state);
            st.stats.empties += 1;
            st.stats.cached_blocks = 0;
            st.stats.cached_bytes = 0;
            st.spare_events.clear();
            st.cached.drain().flat_map(|(_, v)| v).collect()
        };
        let mut first = Ok(());
        for c in blocks {
            let r = c
                .event
                .as_ref()
                .map_or(Ok(()), CudaEvent::synchronize)
                .map_err(VmmError::from)
                .and_then(|()| self.vmm.take_record(c.alloc.ptr))
                .and_then(|rec| self.vmm.release_record(rec));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl DeviceAllocator for CachingPool {
    fn allocate(&self, stream: &CudaStream, size: u64) -> VmmResult<Allocation> {
        self.alloc(stream, size)
    }
    fn deallocate(&self, ptr: u64, stream: &CudaStream) -> VmmResult<()> {
        self.free(ptr, stream)
    }
    fn deallocate_idle(&self, ptr: u64) -> VmmResult<()> {
        self.free_idle(ptr)
    }
}

impl Drop for CachingPool {
    fn drop(&mut self) {
        if let Err(e) = self.empty_cache() {
            eprintln!("vigil: emptying the allocation cache: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::size_class;

    #[test]
    fn size_classes() {
        let g = 2 << 20;
        assert_eq!(size_class(1, g), g);
        assert_eq!(size_class(1 << 20, g), g);
        assert_eq!(size_class(g, g), g);
        assert_eq!(size_class(g + 1, g), 2 * g);
        assert_eq!(size_class(4 * g, g), 4 * g);
        assert_eq!(size_class(4 * g + 1, g), 5 * g);
        assert_eq!(size_class(256 << 20, g), 256 << 20);
        assert_eq!(size_class((256 << 20) + 1, g), 320 << 20);
        for s in [
            1u64,
            3 << 20,
            9 << 20,
            100 << 20,
            1 << 30,
            (1 << 30) + 12345,
        ] {
            let c = size_class(s, g);
            assert!(c >= s && c.is_multiple_of(g), "{s} -> {c}");
            assert!(
                c - s < g || (c - s) * 4 <= c,
                "{s} -> {c} wastes more than 25%"
            );
            assert_eq!(size_class(c, g), c, "classes are fixed points");
        }
    }
}
