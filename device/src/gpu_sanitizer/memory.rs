//! The engine's memory on the GPU: [`EngineMemory`] over the device
//! addresses a [`GpuRuntime`] and its [`GlobalState`] name. Pure address
//! arithmetic (no intrinsics), so the host build tests it over ordinary
//! memory.

use core::marker::PhantomData;
use core::sync::atomic::{AtomicU32, AtomicU64};

use vigil_shared::abi::{thread_state_words, GlobalState, InflatedRecord, PoolHeader};
use vigil_shared::address::{is_managed, real_base, thread_state_address, REAL_CAPACITY};
use vigil_shared::atomic::AtomicFamily;
use vigil_shared::engine::{EngineConfig, EngineMemory};
use vigil_shared::gpu::GpuRuntime;

use super::device_atomics::DeviceAtomics;

/// A device's sanitizer memory, read from its [`GpuRuntime`], whose words
/// the engine accesses with the atomics `F` (`core`'s by default; the
/// hooks use [`EngineAtomics`](super::device_atomics::EngineAtomics)).
pub struct RuntimeMemory<'r, F = GpuAtomics> {
    runtime: &'r GpuRuntime,
    globals: &'r GlobalState,
    threads_per_device: u32,
    state_words: usize,
    atomics: PhantomData<F>,
}

/// An atomic family whose words are plain `u32`s and `u64`s in memory, so
/// that the runtime's device memory can be viewed as them.
///
/// # Safety
/// `U32` and `U64` must have the size and alignment of `u32` and `u64`
/// and access their value only atomically.
pub unsafe trait WordAtomics: AtomicFamily {}

// SAFETY: `core`'s atomics have their integer's size and alignment (on
// nvptx64 and the 64-bit hosts the crate builds for).
unsafe impl WordAtomics for GpuAtomics {}
// SAFETY: `DeviceU32`/`DeviceU64` are transparent `u32`/8-aligned `u64`
// cells accessed only through atomics (checked at compile time there).
unsafe impl WordAtomics for DeviceAtomics {}

impl<'r, F: WordAtomics> RuntimeMemory<'r, F> {
    /// The memory a runtime describes.
    ///
    /// # Safety
    /// `runtime` and every address in it (and in its `GlobalState`) must
    /// be valid device memory laid out as `vigil_shared::gpu` says, for `'r`.
    #[inline(always)]
    pub unsafe fn new(runtime: &'r GpuRuntime) -> Self {
        // SAFETY: the caller guarantees `globals` is a live GlobalState.
        let globals = unsafe { &*(runtime.globals as *const GlobalState) };
        RuntimeMemory {
            runtime,
            globals,
            threads_per_device: globals.num_sms,
            state_words: thread_state_words(globals.num_threads, globals.clock_buffer_size),
            atomics: PhantomData,
        }
    }

    /// The runtime.
    #[inline(always)]
    pub fn runtime(&self) -> &'r GpuRuntime {
        self.runtime
    }

    /// The engine's constants. Each slot is one sanitizer thread, so the
    /// host writes `num_sms * slots` as the `GlobalState`'s `num_sms`
    /// (sanitizer threads per device, what the engine splits tids by).
    #[inline(always)]
    pub fn config(&self) -> EngineConfig {
        EngineConfig::from_globals(self.globals)
    }

    /// True for an address of the reservation's user half: every other
    /// address (local, shared, another allocator's) is skipped.
    #[inline(always)]
    pub fn manages(&self, addr: u64) -> bool {
        is_managed(addr, self.globals.reserve_base)
    }

    /// Word index of a managed address (from the real base).
    #[inline(always)]
    pub fn word_of(&self, addr: u64) -> u64 {
        (addr - real_base(self.globals.reserve_base)) / 4
    }

    /// `len` atomics of type `A` at device address `addr`.
    ///
    /// # Safety
    /// As [`RuntimeMemory::new`]: the range is live runtime memory.
    #[inline(always)]
    unsafe fn words<A>(&self, addr: u64, len: usize) -> &'r [A] {
        // SAFETY: forwarded from the caller; atomics may alias freely.
        unsafe { core::slice::from_raw_parts(addr as *const A, len) }
    }
}

/// The engine's atomics on the GPU: `core`'s, with spin loops that back
/// off (`nanosleep`) so that a contended word's lock holder gets through.
#[derive(Clone, Copy, Debug, Default)]
pub struct GpuAtomics;

impl AtomicFamily for GpuAtomics {
    type U32 = AtomicU32;
    type U64 = AtomicU64;
    #[inline(always)]
    fn fence(order: core::sync::atomic::Ordering) {
        core::sync::atomic::fence(order)
    }
    #[inline(always)]
    fn spin() {
        crate::arch::imp::backoff()
    }
}

impl<F: WordAtomics> EngineMemory for RuntimeMemory<'_, F> {
    type Atomics = F;

    #[inline(always)]
    fn thread_state(&self, tid: u32) -> &[F::U32] {
        let g = self.globals;
        let tpd = self.threads_per_device.max(1);
        let addr = thread_state_address(
            g.globals_base,
            tid / tpd,
            tid % tpd,
            g.num_threads,
            g.clock_buffer_size,
        );
        // SAFETY: every device region holds `threads_per_device` states
        // (the host sized it so; `new`'s contract).
        unsafe { self.words(addr, self.state_words) }
    }

    #[inline(always)]
    fn shadow_cell(&self, word: u64) -> Option<&F::U64> {
        if word >= REAL_CAPACITY / 4 {
            return None;
        }
        let addr = self.globals.reserve_base + 8 * word;
        // SAFETY: the shadow of a managed word is mapped whenever the word
        // is (the allocator maps both together); a word that is not
        // mapped faults in the kernel's own access as well.
        Some(unsafe { &*(addr as *const F::U64) })
    }

    #[inline(always)]
    fn pool(&self) -> &[F::U32] {
        let words = PoolHeader::WORDS + self.globals.pool_capacity as usize * InflatedRecord::WORDS;
        // SAFETY: the pool holds a header and `pool_capacity` records.
        unsafe { self.words(self.globals.pool_base, words) }
    }

    /// Empty: the GPU runtime pushes its own records (with the side
    /// table's earlier access), see [`super::report`].
    #[inline(always)]
    fn reports(&self) -> &[F::U32] {
        &[]
    }

    #[inline(always)]
    fn sc_fence_clocks(&self) -> &[F::U32] {
        let rt = self.runtime;
        if rt.sc_fences == 0 {
            return &[];
        }
        // SAFETY: `sc_fence_words` words at `sc_fences` (runtime contract).
        unsafe { self.words(rt.sc_fences, rt.sc_fence_words as usize) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_shared::abi::thread_state_bytes;
    use vigil_shared::address::{PER_DEVICE_STATE_STRIDE, THREAD_STATES_OFFSET};

    /// The thread state of every slot lies inside its device's region, one
    /// after the other, and the engine sees `sms * slots` threads a device.
    #[test]
    fn slot_thread_states_tile_the_device_regions() {
        let (sms, slots, devices, cb) = (3u32, 4u32, 2u32, 2u32);
        let n = sms * slots * devices;
        let g = GlobalState {
            globals_base: 1 << 40,
            reserve_base: 4 << 40,
            num_sms: sms * slots,
            num_devices: devices,
            num_threads: n,
            clock_buffer_size: cb,
            ..GlobalState::default()
        };
        let rt = GpuRuntime {
            globals: &g as *const GlobalState as u64,
            slots_per_sm: slots,
            ..GpuRuntime::default()
        };
        // SAFETY: only addresses are computed, nothing is dereferenced.
        let mem = unsafe { RuntimeMemory::<GpuAtomics>::new(&rt) };
        assert_eq!(mem.config().num_sms, sms * slots);
        assert_eq!(mem.config().num_threads, n);
        let bytes = thread_state_bytes(n, cb);
        for tid in 0..n {
            let s = mem.thread_state(tid);
            let addr = s.as_ptr() as u64;
            let dev = u64::from(tid / (sms * slots));
            let local = u64::from(tid % (sms * slots));
            assert_eq!(
                addr,
                (1 << 40) + dev * PER_DEVICE_STATE_STRIDE + THREAD_STATES_OFFSET + local * bytes
            );
            assert_eq!(s.len(), thread_state_words(n, cb));
        }
        let real = real_base(4 << 40);
        assert!(mem.manages(real) && !mem.manages(real - 1) && !mem.manages(0));
        assert_eq!(mem.word_of(real + 9), 2);
        assert!(mem.shadow_cell(REAL_CAPACITY / 4).is_none());
        assert_eq!(
            mem.shadow_cell(5).map(|c| c as *const AtomicU64 as u64),
            Some((4 << 40) + 40)
        );
    }
}
