//! One block's shared state on a worker: the barrier and warp-collective
//! bookkeeping and the block's shared memory. It implements
//! [`BlockRuntime`] for the block's threads, which all run as coroutines on
//! the worker's OS thread, so plain `Cell`s suffice: no two of them ever
//! run at once. One `BlockState` per worker, reused block after block.
//!
//! It also keeps what the livelock detector ([`super::spin`]) reads: a
//! count of progress events (a thread starts, returns, arrives at or
//! leaves a barrier or collective, or starts spinning somewhere new) and
//! where each spinning thread polls.

use crate::sanitizer::barrier::thread_list;
use corosensei::Yielder;
use std::alloc::Layout;
use std::any::TypeId;
use std::cell::{Cell, RefCell};
use std::panic::Location;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, Ordering};
use vigil_device::host_runtime::{AsyncCopies, BlockRuntime, SanitizerRuntime, WarpOp};

/// Where a GPU thread of the running block stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ThreadState {
    /// Its coroutine has not been created yet.
    NotStarted,
    /// It can run (it was just released from a barrier or a collective).
    Ready,
    /// It is running (or was the last to run and has not blocked).
    Running,
    /// It waits at `sync_threads`.
    AtBarrier,
    /// It waits in a warp collective.
    AtWarp,
    /// It kept polling one address and stepped aside: it runs again after
    /// the other runnable threads of the block have had their turn.
    Yielded,
    /// It returned.
    Done,
}

/// One GPU thread's slot: its state and its part in a warp collective.
struct ThreadSlot {
    state: Cell<ThreadState>,
    /// The value it contributes to the pending collective.
    value: Cell<u64>,
    /// The collective's mask, as this thread gave it.
    mask: Cell<u32>,
    /// What the collective computes for this thread.
    op: Cell<WarpOp>,
    /// The collective's result for this thread, set when it is released.
    result: Cell<u64>,
    /// The address this thread read last, and how many times in a row.
    poll_addr: Cell<usize>,
    poll_count: Cell<u32>,
    /// Reads of one address in a row after which it steps aside: from
    /// [`SPIN_POLLS`], doubled (up to [`MAX_SPIN_POLLS`]) each time
    /// stepping aside ran no other thread.
    spin_polls: Cell<u32>,
    /// Where it spun when it last stepped aside.
    spin_site: Cell<Option<SpinSite>>,
    /// The `sync_threads` call it waits at (or waited at last).
    barrier_at: Cell<Option<&'static Location<'static>>>,
    /// The barrier round in which it returned.
    exit_round: Cell<u32>,
}

impl ThreadSlot {
    fn new() -> Self {
        ThreadSlot {
            state: Cell::new(ThreadState::NotStarted),
            value: Cell::new(0),
            mask: Cell::new(0),
            op: Cell::new(WarpOp::Ballot),
            result: Cell::new(0),
            poll_addr: Cell::new(0),
            poll_count: Cell::new(0),
            spin_polls: Cell::new(SPIN_POLLS),
            spin_site: Cell::new(None),
            barrier_at: Cell::new(None),
            exit_round: Cell::new(0),
        }
    }
}

/// One warp's collective in progress.
#[derive(Default)]
struct WarpSlot {
    /// Lanes waiting in a collective (they have contributed).
    waiting: Cell<u32>,
    /// The union of the waiting lanes' masks.
    need: Cell<u32>,
    /// True while every waiting lane gave the same mask (then `need` is
    /// that mask), as conforming code does.
    uniform: Cell<bool>,
    /// Lanes that exist and have not returned.
    live: Cell<u32>,
}

/// The type of the coroutines' yielder: nothing goes in or out; why a
/// thread suspended is in its [`ThreadState`].
pub(crate) type ThreadYielder = Yielder<(), ()>;

/// The running block's state on one worker.
pub(crate) struct BlockState {
    threads: Vec<ThreadSlot>,
    warps: Vec<WarpSlot>,
    /// Threads in the block.
    count: Cell<u32>,
    /// Threads that have not returned.
    live: Cell<u32>,
    /// Threads waiting at the barrier.
    at_barrier: Cell<u32>,
    /// The linear index of the thread the scheduler resumed last.
    current: Cell<u32>,
    /// Resumptions so far (a thread that steps aside tells from it whether
    /// another thread ran before it was resumed).
    resumptions: Cell<u64>,
    /// The running coroutine's yielder: set by each coroutine when it
    /// starts and again whenever it is resumed, so it always belongs to the
    /// coroutine that is running.
    yielder: Cell<*const ThreadYielder>,
    shared: SharedMemory,
    /// The block's asynchronous copies in flight.
    copies: AsyncCopies,
    /// Progress events so far (see the module documentation).
    events: Cell<u64>,
    /// The launch's abort flag: once set, a thread that polls steps aside
    /// at once so that the worker can abandon the block.
    abort: Cell<*const AtomicBool>,
    /// Barriers released so far in the block.
    round: Cell<u32>,
    /// The call the first waiting thread of this round waits at, whether
    /// a later one waits at another, and threads returned in this round:
    /// the release checks these before it looks at any thread.
    barrier_site: Cell<Option<&'static Location<'static>>>,
    sites_differ: Cell<bool>,
    returned_in_round: Cell<u32>,
    /// The launch's sanitizer runtime, told about warp collectives (see
    /// [`SanitizerRuntime::warp_joined`]), and the worker's virtual SM.
    sanitizer: Cell<Option<&'static dyn SanitizerRuntime>>,
    smid: Cell<u32>,
}

/// Why a barrier cannot be released: threads diverged at it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DivergentBarrier {
    /// The `sync_threads` call the first waiting thread waits at.
    pub(crate) barrier: &'static Location<'static>,
    /// Which threads wait there, and where the others are.
    pub(crate) detail: String,
}

/// Where a thread polls: the read's address, size and kernel source
/// location (the `#[track_caller]` location of the load or atomic, so it
/// is known in every build, with or without debug information).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SpinSite {
    /// The address it polls.
    pub(crate) addr: usize,
    /// The size of each read.
    pub(crate) bytes: usize,
    /// The kernel's source location of the read.
    pub(crate) location: &'static Location<'static>,
}

/// A thread of the block that stepped aside while spinning.
pub(crate) struct Spinner {
    /// Linear thread index in the block.
    pub(crate) thread: u32,
    /// Where it polls.
    pub(crate) site: SpinSite,
}

/// Reads of one address in a row after which a thread counts as spinning
/// and steps aside for the rest of its block.
const SPIN_POLLS: u32 = 32;

/// The most reads of one address in a row before a thread steps aside,
/// reached when stepping aside keeps running no other thread (the rest of
/// the block waits or is done): a thread that polls alone, or works on
/// one word (a loop of atomics on a counter), then pays for a scheduler
/// pass once per this many reads, and the livelock detector still sees
/// every pass.
const MAX_SPIN_POLLS: u32 = 1024;

/// The most threads a block can have (and so the most slots needed).
pub(crate) const MAX_THREADS: usize = 1024;

impl BlockState {
    /// State for blocks of up to [`MAX_THREADS`] threads.
    pub(crate) fn new() -> Self {
        BlockState {
            threads: (0..MAX_THREADS).map(|_| ThreadSlot::new()).collect(),
            warps: (0..MAX_THREADS / 32).map(|_| WarpSlot::default()).collect(),
            count: Cell::new(0),
            live: Cell::new(0),
            at_barrier: Cell::new(0),
            current: Cell::new(0),
            resumptions: Cell::new(0),
            yielder: Cell::new(std::ptr::null()),
            shared: SharedMemory::default(),
            copies: AsyncCopies::default(),
            events: Cell::new(0),
            abort: Cell::new(std::ptr::null()),
            round: Cell::new(0),
            barrier_site: Cell::new(None),
            sites_differ: Cell::new(false),
            returned_in_round: Cell::new(0),
            sanitizer: Cell::new(None),
            smid: Cell::new(0),
        }
    }

    /// Prepares for a new block of `count` threads with `dynamic_bytes` of
    /// zeroed dynamic shared memory; static shared arrays are zeroed again
    /// on their first request.
    ///
    /// A thread that polls while `abort` is set steps aside at once; the
    /// flag and `sanitizer` must outlive the block (the worker calls
    /// `end_block` before the launch that owns them ends). `smid` is the
    /// worker's virtual SM, for the sanitizer.
    pub(crate) fn begin_block(
        &self,
        count: u32,
        dynamic_bytes: usize,
        abort: &AtomicBool,
        smid: u32,
        sanitizer: Option<&dyn SanitizerRuntime>,
    ) {
        assert!(count as usize <= MAX_THREADS && count > 0);
        self.count.set(count);
        self.live.set(count);
        self.at_barrier.set(0);
        self.abort.set(abort);
        self.round.set(0);
        self.sites_differ.set(false);
        self.returned_in_round.set(0);
        self.smid.set(smid);
        // SAFETY: the launch's sanitizer outlives the block (caller), and
        // `end_block` forgets it before the block's borrows end.
        self.sanitizer.set(sanitizer.map(|s| unsafe {
            std::mem::transmute::<&dyn SanitizerRuntime, &'static dyn SanitizerRuntime>(s)
        }));
        for t in &self.threads[..count as usize] {
            t.state.set(ThreadState::NotStarted);
            t.poll_count.set(0);
            t.spin_polls.set(SPIN_POLLS);
            t.spin_site.set(None);
            t.barrier_at.set(None);
        }
        for (w, warp) in self.warps.iter().enumerate() {
            let lanes = count.saturating_sub(32 * w as u32).min(32);
            warp.live.set(lane_bits(lanes));
            warp.waiting.set(0);
            warp.need.set(0);
            warp.uniform.set(true);
        }
        self.shared.begin_block(dynamic_bytes);
        self.copies.begin_block();
    }

    /// Forgets the launch's abort flag and sanitizer (the block is over).
    pub(crate) fn end_block(&self) {
        self.abort.set(std::ptr::null());
        self.sanitizer.set(None);
    }

    /// Whether the launch was aborted.
    fn aborted(&self) -> bool {
        let abort = self.abort.get();
        // SAFETY: set in `begin_block` from a flag that outlives the block
        // and cleared in `end_block`; null outside a block.
        !abort.is_null() && unsafe { &*abort }.load(Ordering::Relaxed)
    }

    /// Progress events so far.
    pub(crate) fn events(&self) -> u64 {
        self.events.get()
    }

    /// Counts a progress event.
    pub(crate) fn progress(&self) {
        self.events.set(self.events.get() + 1);
    }

    /// The threads that stepped aside while spinning (before
    /// [`BlockState::wake_yielded`] makes them runnable again).
    pub(crate) fn spinners(&self) -> Vec<Spinner> {
        let count = self.count.get() as usize;
        (0..count)
            .filter(|&t| self.threads[t].state.get() == ThreadState::Yielded)
            .filter_map(|t| {
                Some(Spinner {
                    thread: t as u32,
                    site: self.threads[t].spin_site.get()?,
                })
            })
            .collect()
    }

    /// The state of thread `t`.
    pub(crate) fn state(&self, t: u32) -> ThreadState {
        self.threads[t as usize].state.get()
    }

    /// Marks thread `t` as the one about to be resumed.
    pub(crate) fn set_running(&self, t: u32) {
        self.current.set(t);
        self.resumptions.set(self.resumptions.get() + 1);
        self.threads[t as usize].state.set(ThreadState::Running);
    }

    /// Called by a coroutine whenever it gains control (start and after
    /// each suspension), so that suspending reaches its own yielder.
    pub(crate) fn set_yielder(&self, y: *const ThreadYielder) {
        self.yielder.set(y);
    }

    /// Threads that have not returned.
    pub(crate) fn live(&self) -> u32 {
        self.live.get()
    }

    /// Records that thread `t` returned; its warp's pending collective may
    /// now be complete (CUDA's collectives count only non-exited lanes).
    pub(crate) fn thread_exited(&self, t: u32) {
        self.threads[t as usize].state.set(ThreadState::Done);
        self.threads[t as usize].exit_round.set(self.round.get());
        self.returned_in_round.set(self.returned_in_round.get() + 1);
        self.live.set(self.live.get() - 1);
        self.progress();
        let warp = &self.warps[t as usize / 32];
        warp.live.set(warp.live.get() & !(1 << (t % 32)));
        self.try_release_warp(t / 32);
    }

    /// Releases the barrier if every live thread waits at it. Returns
    /// whether it did, or why it must not: the waiting threads wait at
    /// different `sync_threads` calls, or some threads of the block
    /// returned since the last barrier without reaching this one (CUDA
    /// requires every thread of the block to reach the same barrier).
    pub(crate) fn try_release_barrier(&self) -> Result<bool, DivergentBarrier> {
        let waiting = self.at_barrier.get();
        if waiting == 0 || waiting != self.live.get() {
            return Ok(false);
        }
        self.check_barrier()?;
        for t in &self.threads[..self.count.get() as usize] {
            if t.state.get() == ThreadState::AtBarrier {
                t.state.set(ThreadState::Ready);
            }
        }
        self.at_barrier.set(0);
        self.round.set(self.round.get() + 1);
        self.sites_differ.set(false);
        self.returned_in_round.set(0);
        self.progress();
        Ok(true)
    }

    /// The threads waiting at the barrier, grouped by the call they wait
    /// at (first arrival's call first).
    fn barrier_sites(&self) -> Vec<(&'static Location<'static>, Vec<u32>)> {
        let mut sites: Vec<(&'static Location<'static>, Vec<u32>)> = Vec::new();
        for (i, t) in self.threads[..self.count.get() as usize].iter().enumerate() {
            if t.state.get() != ThreadState::AtBarrier {
                continue;
            }
            let Some(at) = t.barrier_at.get() else {
                continue;
            };
            match sites.iter_mut().find(|(l, _)| *l == at) {
                Some((_, ts)) => ts.push(i as u32),
                None => sites.push((at, vec![i as u32])),
            }
        }
        sites
    }

    /// Checks that every waiting thread waits at one call and that no
    /// thread returned in this barrier round.
    fn check_barrier(&self) -> Result<(), DivergentBarrier> {
        if !self.sites_differ.get() && self.returned_in_round.get() == 0 {
            return Ok(());
        }
        let sites = self.barrier_sites();
        let returned: Vec<u32> = (0..self.count.get())
            .filter(|&t| {
                let s = &self.threads[t as usize];
                s.state.get() == ThreadState::Done && s.exit_round.get() == self.round.get()
            })
            .collect();
        if sites.len() <= 1 && returned.is_empty() {
            return Ok(());
        }
        let Some((barrier, here)) = sites.first() else {
            return Ok(());
        };
        let mut parts = vec![format!("thread(s) {} wait here", thread_list(here))];
        for (at, ts) in &sites[1..] {
            parts.push(format!(
                "thread(s) {} wait at the sync_threads at {at} instead",
                thread_list(ts)
            ));
        }
        if !returned.is_empty() {
            parts.push(format!(
                "thread(s) {} returned without reaching it",
                thread_list(&returned)
            ));
        }
        Err(DivergentBarrier {
            barrier,
            detail: parts.join("; "),
        })
    }

    /// Makes the threads that stepped aside runnable again. Returns
    /// whether there were any.
    pub(crate) fn wake_yielded(&self) -> bool {
        let mut any = false;
        for t in &self.threads[..self.count.get() as usize] {
            if t.state.get() == ThreadState::Yielded {
                t.state.set(ThreadState::Ready);
                any = true;
            }
        }
        any
    }

    /// Says which threads wait where, for a deadlock report: the barrier
    /// call(s) waited at, the live threads missing from the barrier, and
    /// the warp collectives waiting for lanes.
    pub(crate) fn describe_waits(&self) -> String {
        let mut parts = vec![format!(
            "{} of {} live thread(s) wait at sync_threads",
            self.at_barrier.get(),
            self.live.get()
        )];
        for (at, ts) in self.barrier_sites() {
            parts.push(format!("thread(s) {} wait at {at}", thread_list(&ts)));
        }
        if self.at_barrier.get() != 0 {
            let missing: Vec<u32> = (0..self.count.get())
                .filter(|&t| {
                    !matches!(
                        self.threads[t as usize].state.get(),
                        ThreadState::AtBarrier | ThreadState::Done
                    )
                })
                .collect();
            if !missing.is_empty() {
                parts.push(format!(
                    "thread(s) {} never reach that barrier",
                    thread_list(&missing)
                ));
            }
        }
        for (w, warp) in self.warps.iter().enumerate() {
            let (waiting, need) = (warp.waiting.get(), warp.need.get());
            if waiting != 0 {
                parts.push(format!(
                    "warp {w}: lanes {waiting:#010x} wait in a warp collective whose mask \
                     {need:#010x} also names live lanes {:#010x} that never joined",
                    need & warp.live.get() & !waiting
                ));
            }
        }
        parts.join("; ")
    }

    /// Suspends the running coroutine until the scheduler resumes it.
    fn suspend(&self) {
        let y = self.yielder.get();
        debug_assert!(!y.is_null(), "a block thread suspended outside a coroutine");
        // SAFETY: `yielder` is the running coroutine's own yielder (each
        // coroutine sets it when it starts and after every resumption, and
        // only one runs at a time); it lives on that coroutine's stack,
        // which is the stack we are on.
        unsafe { (*y).suspend(()) };
        self.yielder.set(y);
    }

    /// Completes warp `w`'s pending collective for every waiting lane whose
    /// mask's live lanes have all contributed.
    fn try_release_warp(&self, w: u32) {
        let warp = &self.warps[w as usize];
        let (waiting, live) = (warp.waiting.get(), warp.live.get());
        if waiting == 0 {
            return;
        }
        if warp.need.get() & live & !waiting == 0 {
            // The usual case: every waiting lane is satisfied.
            self.release_lanes(w, waiting);
            return;
        }
        if warp.uniform.get() {
            // One mask, not complete yet: nobody is satisfied.
            return;
        }
        // Lanes with different masks wait together: release those whose
        // own mask is complete.
        let base = w as usize * 32;
        let satisfied = bits(waiting)
            .filter(|&l| self.threads[base + l].mask.get() & live & !waiting == 0)
            .fold(0u32, |s, l| s | (1 << l));
        if satisfied != 0 {
            self.release_lanes(w, satisfied);
        }
    }

    /// Computes each of `lanes`' results from the waiting lanes'
    /// contributions and marks them ready.
    fn release_lanes(&self, w: u32, lanes: u32) {
        let warp = &self.warps[w as usize];
        let base = w as usize * 32;
        let contributed = warp.waiting.get();
        let mut values = [0u64; 32];
        for l in bits(contributed) {
            values[l] = self.threads[base + l].value.get();
        }
        for l in bits(lanes) {
            let t = &self.threads[base + l];
            let r =
                t.op.get()
                    .result(l as u32, t.mask.get(), contributed, &values);
            t.result.set(r);
            t.state.set(ThreadState::Ready);
        }
        if let Some(s) = self.sanitizer.get() {
            s.warp_joined(self.smid.get(), w, lanes, contributed);
        }
        let still = contributed & !lanes;
        warp.waiting.set(still);
        let mut masks = bits(still).map(|l| self.threads[base + l].mask.get());
        let first = masks.next().unwrap_or(0);
        let (need, uniform) = masks.fold((first, true), |(n, u), m| (n | m, u && m == first));
        warp.need.set(need);
        warp.uniform.set(uniform);
    }
}

impl BlockRuntime for BlockState {
    fn sync_threads(&self, loc: &'static Location<'static>) {
        let t = self.current.get();
        self.threads[t as usize].barrier_at.set(Some(loc));
        if self.at_barrier.get() == 0 {
            self.barrier_site.set(Some(loc));
        } else if self.barrier_site.get() != Some(loc) {
            self.sites_differ.set(true);
        }
        self.threads[t as usize].state.set(ThreadState::AtBarrier);
        self.at_barrier.set(self.at_barrier.get() + 1);
        self.progress();
        self.suspend();
    }

    fn static_shared(&self, key: TypeId, bytes: usize, align: usize) -> *mut u8 {
        self.shared.static_array(key, bytes, align)
    }

    fn dynamic_shared(&self) -> (*mut u8, usize) {
        self.shared.dynamic()
    }

    fn async_copies(&self) -> Option<&AsyncCopies> {
        Some(&self.copies)
    }

    fn poll_hint(&self, addr: usize, bytes: usize, location: &'static Location<'static>) {
        let slot = &self.threads[self.current.get() as usize];
        if self.aborted() {
            // The launch is over: hand control back for good.
            slot.state.set(ThreadState::Yielded);
            self.suspend();
            return;
        }
        if slot.poll_addr.get() != addr {
            slot.poll_addr.set(addr);
            slot.poll_count.set(1);
            slot.spin_polls.set(SPIN_POLLS);
            return;
        }
        let polls = slot.poll_count.get() + 1;
        if polls < slot.spin_polls.get() {
            slot.poll_count.set(polls);
            return;
        }
        // Spinning: let the block's other threads run (one of them may be
        // the one that sets the flag).
        slot.poll_count.set(0);
        let site = SpinSite {
            addr,
            bytes,
            location,
        };
        if slot.spin_site.replace(Some(site)) != Some(site) {
            self.progress();
        }
        slot.state.set(ThreadState::Yielded);
        let resumptions = self.resumptions.get();
        self.suspend();
        // Stepping aside ran no other thread (they wait, or are done): do
        // it less often while that lasts, so that a thread polling alone
        // costs little.
        let alone = self.resumptions.get() == resumptions + 1;
        slot.spin_polls.set(if alone {
            (slot.spin_polls.get() * 2).min(MAX_SPIN_POLLS)
        } else {
            SPIN_POLLS
        });
    }

    fn warp_collective(&self, lane: u32, mask: u32, value: u64, op: WarpOp) -> u64 {
        let t = self.current.get();
        debug_assert_eq!(lane, t % 32);
        let slot = &self.threads[t as usize];
        slot.value.set(value);
        slot.mask.set(mask);
        slot.op.set(op);
        slot.state.set(ThreadState::AtWarp);
        let warp = &self.warps[t as usize / 32];
        let waiting = warp.waiting.get();
        if waiting == 0 {
            warp.need.set(mask);
            warp.uniform.set(true);
        } else {
            warp.uniform
                .set(warp.uniform.get() && warp.need.get() == mask);
            warp.need.set(warp.need.get() | mask);
        }
        warp.waiting.set(waiting | (1 << lane));
        self.progress();
        self.try_release_warp(t / 32);
        // The lane that completes the collective goes on without a switch;
        // the others wait until the scheduler resumes them.
        if slot.state.get() == ThreadState::AtWarp {
            self.suspend();
        } else {
            slot.state.set(ThreadState::Running);
        }
        slot.result.get()
    }
}

/// The low `n` bits set.
fn lane_bits(n: u32) -> u32 {
    if n >= 32 {
        u32::MAX
    } else {
        (1u32 << n) - 1
    }
}

/// The indices of the set bits of `m`, lowest first.
fn bits(m: u32) -> impl Iterator<Item = usize> {
    (0..32).filter(move |&l| m & (1 << l) != 0)
}

/// A zeroed heap allocation with a chosen alignment.
struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl AlignedBuf {
    /// `bytes` zeroed bytes aligned to `align` (at least one byte is
    /// allocated so that the pointer is always a real allocation).
    fn zeroed(bytes: usize, align: usize) -> Self {
        let layout = Layout::from_size_align(bytes.max(1), align.max(16))
            .expect("shared memory size and alignment fit a Layout");
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, layout }
    }

    /// Zeroes the first `bytes` bytes.
    fn zero(&self, bytes: usize) {
        assert!(bytes <= self.layout.size());
        // SAFETY: in bounds of the allocation (checked above); no reference
        // into it exists while the block's threads are not running.
        unsafe { self.ptr.as_ptr().write_bytes(0, bytes) };
    }

    fn size(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// One `shared_array!` expansion's storage on this worker.
struct StaticArray {
    key: TypeId,
    buf: AlignedBuf,
    bytes: usize,
    /// The block generation in which it was last zeroed.
    generation: u64,
}

/// A worker's shared memory: static arrays (allocated on first use, kept
/// for later blocks and launches, zeroed again on each block's first
/// request) and the launch's dynamic shared memory (zeroed per block).
/// Each worker has its own, so blocks running at the same time never share.
#[derive(Default)]
struct SharedMemory {
    statics: RefCell<Vec<StaticArray>>,
    generation: Cell<u64>,
    dynamic: RefCell<Option<AlignedBuf>>,
    dynamic_bytes: Cell<usize>,
}

/// Alignment of dynamic shared memory (CUDA guarantees at least 16).
const DYNAMIC_ALIGN: usize = 128;

impl SharedMemory {
    fn begin_block(&self, dynamic_bytes: usize) {
        self.generation.set(self.generation.get() + 1);
        let mut dynamic = self.dynamic.borrow_mut();
        match &*dynamic {
            Some(buf) if buf.size() >= dynamic_bytes => buf.zero(dynamic_bytes),
            _ => *dynamic = Some(AlignedBuf::zeroed(dynamic_bytes, DYNAMIC_ALIGN)),
        }
        self.dynamic_bytes.set(dynamic_bytes);
    }

    fn dynamic(&self) -> (*mut u8, usize) {
        let dynamic = self.dynamic.borrow();
        let buf = dynamic
            .as_ref()
            .expect("begin_block allocates dynamic shared memory");
        (buf.ptr.as_ptr(), self.dynamic_bytes.get())
    }

    fn static_array(&self, key: TypeId, bytes: usize, align: usize) -> *mut u8 {
        let generation = self.generation.get();
        let mut statics = self.statics.borrow_mut();
        if let Some(a) = statics.iter_mut().find(|a| a.key == key) {
            assert!(
                a.bytes == bytes && a.buf.layout.align() >= align,
                "vigil: one shared_array! expansion asked for two sizes"
            );
            if a.generation != generation {
                a.buf.zero(bytes);
                a.generation = generation;
            }
            return a.buf.ptr.as_ptr();
        }
        let buf = AlignedBuf::zeroed(bytes, align);
        let ptr = buf.ptr.as_ptr();
        statics.push(StaticArray {
            key,
            buf,
            bytes,
            generation,
        });
        ptr
    }
}
