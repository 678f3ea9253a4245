//! Livelock detection: a launch whose every running thread spins on memory
//! that no thread changes ends with [`CpuError::Livelock`] instead of
//! running forever.
//!
//! Per block ([`BlockSpin`], on its worker): a scheduler pass is *quiet*
//! when it had no progress event ([`BlockState::events`]: no thread
//! started, returned, reached or left a barrier or collective, or began
//! spinning somewhere new) and the bytes at every spinning thread's polled
//! location equal those after the previous pass. After [`STALL_PASSES`]
//! quiet passes the block is published as stalled, with each spinning
//! thread's polled address and the kernel source location of its read
//! (passed down by the load or atomic's `#[track_caller]`, so it is known
//! in release builds without debug information too).
//!
//! Per launch ([`SpinWatch`], in the job): the launch is stuck when every
//! worker that has not finished with the launch runs a stalled block (so
//! no worker is free to start another block), and every one of them has
//! re-checked its polled bytes twice since that was first seen, with no
//! block leaving the stalled state meanwhile. Re-checking matters: a
//! spinning thread may still store (to a location another thread polls),
//! and a worker descheduled by the OS must not be trusted on old values.
//! A block leaves the stalled state when it progresses *and* when it ends
//! (its last thread returned after the flag came, or it failed): a finished
//! block that stayed published let a worker descheduled for milliseconds
//! between reading its polled bytes and checking in end a chained scan
//! whose flag had been stored meanwhile. Each publication has its own
//! identity, so a worker's next stalled block never counts as a re-check of
//! the one before.

use super::block::{BlockState, SpinSite, Spinner};
use crate::error::{CpuError, SpinningThread, StalledBlock};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use vigil_device::Dim3;

/// Quiet passes after which a block counts as stalled. Each pass lets
/// every spinning thread poll at least 32 times (up to 1,024 while it
/// polls alone), so this is thousands of unchanged reads per thread; cheap
/// next to a launch, and far beyond a bounded wait.
pub(crate) const STALL_PASSES: u32 = 64;

/// Bytes of a polled location compared between passes (a larger read is
/// compared on its first bytes).
const MAX_COMPARED_BYTES: usize = 64;

/// One worker's stalled block, as published to the launch.
struct Stall {
    block: StalledBlock,
    /// Which publication this is (unique within the launch).
    id: u64,
    /// Quiet passes since it was published.
    checks: u64,
}

#[derive(Default)]
struct WatchState {
    /// Workers that have not finished with the launch.
    active: usize,
    /// Stalled blocks by worker (virtual SM).
    stalls: BTreeMap<u32, Stall>,
    /// Bumped whenever a block leaves the stalled state.
    epoch: u64,
    /// Publications so far (the next one's identity).
    published: u64,
}

/// The launch-wide half of the detector, shared by the job's workers.
#[derive(Default)]
pub(crate) struct SpinWatch {
    state: Mutex<WatchState>,
    /// Memory the launch polls may be written by another device's kernel
    /// (a symmetric group): stalled blocks are never proof of a livelock,
    /// and only the launch timeout ends a wait that never finishes.
    peer_writers: bool,
}

/// What a worker saw when every active worker was first stalled: the
/// epoch and each stalled worker's publication and check count.
pub(crate) struct Candidate {
    epoch: u64,
    checks: Vec<CheckCount>,
}

/// A stalled worker's publication and its checks so far.
#[derive(Clone, Copy, PartialEq, Eq)]
struct CheckCount {
    smid: u32,
    id: u64,
    checks: u64,
}

impl SpinWatch {
    /// A watch for a launch whose polled memory other devices may write
    /// (`peer_writers`), or only its own threads.
    pub(crate) fn new(peer_writers: bool) -> Self {
        SpinWatch {
            peer_writers,
            ..SpinWatch::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, WatchState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The launch starts on `workers` workers (before any of them runs).
    pub(crate) fn begin(&self, workers: usize) {
        *self.lock() = WatchState {
            active: workers,
            ..WatchState::default()
        };
    }

    /// A worker has finished with the launch (no block left to claim).
    pub(crate) fn leave(&self) {
        let mut s = self.lock();
        s.active = s.active.saturating_sub(1);
    }

    /// Worker `smid`'s block is stalled.
    fn publish(&self, smid: u32, block: StalledBlock) {
        let mut s = self.lock();
        let id = s.published;
        s.published += 1;
        s.stalls.insert(
            smid,
            Stall {
                block,
                id,
                checks: 0,
            },
        );
    }

    /// Worker `smid`'s block made progress again, or ended.
    fn withdraw(&self, smid: u32) {
        let mut s = self.lock();
        if s.stalls.remove(&smid).is_some() {
            s.epoch += 1;
        }
    }

    /// Worker `smid`'s stalled block had one more quiet pass. Returns the
    /// stalled blocks when the launch is stuck (see the module docs).
    fn check(&self, smid: u32, candidate: &mut Option<Candidate>) -> Option<Vec<StalledBlock>> {
        let mut s = self.lock();
        if let Some(stall) = s.stalls.get_mut(&smid) {
            stall.checks += 1;
        }
        if self.peer_writers || s.stalls.len() < s.active {
            *candidate = None;
            return None;
        }
        let now: Vec<CheckCount> = s
            .stalls
            .iter()
            .map(|(&smid, st)| CheckCount {
                smid,
                id: st.id,
                checks: st.checks,
            })
            .collect();
        if let Some(c) = candidate {
            let same_stalls = c
                .checks
                .iter()
                .map(|p| (p.smid, p.id))
                .eq(now.iter().map(|p| (p.smid, p.id)));
            if c.epoch == s.epoch && same_stalls {
                let rechecked = c
                    .checks
                    .iter()
                    .zip(&now)
                    .all(|(a, b)| b.checks >= a.checks + 2);
                if rechecked {
                    let mut blocks: Vec<StalledBlock> =
                        s.stalls.values().map(|st| st.block.clone()).collect();
                    blocks.sort_by_key(|b| (b.block.z, b.block.y, b.block.x));
                    return Some(blocks);
                }
                return None;
            }
        }
        *candidate = Some(Candidate {
            epoch: s.epoch,
            checks: now,
        });
        None
    }
}

/// The per-block half of the detector, kept by the worker running it.
#[derive(Default)]
pub(crate) struct BlockSpin {
    /// The spinning threads' sites and polled bytes after the last pass.
    sites: Vec<(u32, SpinSite)>,
    values: Vec<u8>,
    quiet: u32,
    published: bool,
    candidate: Option<Candidate>,
}

impl BlockSpin {
    /// A pass of the block had a progress event, or the block ended (its
    /// threads returned, it failed, or it was abandoned): either way it is
    /// no longer stalled.
    pub(crate) fn progress(&mut self, watch: &SpinWatch, smid: u32) {
        if self.published {
            watch.withdraw(smid);
        }
        *self = BlockSpin::default();
    }

    /// A pass of the block had no progress event; `spinners` are the
    /// threads that stepped aside. Returns the stalled blocks when the
    /// whole launch is stuck.
    pub(crate) fn quiet_pass(
        &mut self,
        block: &BlockState,
        spinners: &[Spinner],
        watch: &SpinWatch,
        smid: u32,
        describe: impl FnOnce(&[Spinner], &BlockState) -> StalledBlock,
    ) -> Option<Vec<StalledBlock>> {
        let sites: Vec<(u32, SpinSite)> = spinners.iter().map(|s| (s.thread, s.site)).collect();
        let mut values = Vec::new();
        for s in spinners {
            read_polled(s.site.addr, s.site.bytes, &mut values);
        }
        if sites != self.sites || values != self.values {
            self.progress(watch, smid);
            self.sites = sites;
            self.values = values;
            return None;
        }
        self.quiet += 1;
        if self.quiet < STALL_PASSES {
            return None;
        }
        if !self.published {
            watch.publish(smid, describe(spinners, block));
            self.published = true;
        }
        watch.check(smid, &mut self.candidate)
    }
}

/// Appends the bytes at a polled location, read as the executor's other
/// accesses are: relaxed atomics, so a concurrent store is no data race.
fn read_polled(addr: usize, bytes: usize, out: &mut Vec<u8>) {
    for i in 0..bytes.min(MAX_COMPARED_BYTES) {
        let p = std::ptr::with_exposed_provenance_mut::<u8>(addr + i);
        // SAFETY: a running thread of this launch is polling `bytes` bytes
        // at `addr` (it steps aside inside that read), so the range is
        // valid memory for the whole launch; every byte is read atomically.
        out.push(unsafe { AtomicU8::from_ptr(p) }.load(Ordering::Relaxed));
    }
}

/// The spinning threads of a stalled block, with the source location of
/// each one's read.
pub(crate) fn stalled_block(
    block_idx: Dim3,
    spinners: &[Spinner],
    thread_index: impl Fn(u32) -> Dim3,
    waiting: Option<String>,
) -> StalledBlock {
    StalledBlock {
        block: block_idx,
        spinning: spinners
            .iter()
            .map(|s| SpinningThread {
                thread: thread_index(s.thread),
                address: s.site.addr as u64,
                bytes: s.site.bytes,
                location: s.site.location.to_string(),
            })
            .collect(),
        waiting,
    }
}

/// The error for a stuck launch.
pub(crate) fn livelock(blocks: Vec<StalledBlock>, unstarted: u64) -> CpuError {
    CpuError::Livelock { blocks, unstarted }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stalled(x: u32) -> StalledBlock {
        StalledBlock {
            block: Dim3 { x, y: 0, z: 0 },
            spinning: Vec::new(),
            waiting: None,
        }
    }

    /// A launch's watch (its polled memory written by no other device) on
    /// `workers` workers.
    fn watch(workers: usize) -> SpinWatch {
        let w = SpinWatch::new(false);
        w.begin(workers);
        w
    }

    /// Worker `smid` checks in `n` times; the last answer.
    fn checks(
        w: &SpinWatch,
        smid: u32,
        c: &mut Option<Candidate>,
        n: u32,
    ) -> Option<Vec<StalledBlock>> {
        (0..n).map(|_| w.check(smid, c)).last().flatten()
    }

    #[test]
    fn stuck_once_every_worker_rechecked_twice() {
        let w = watch(2);
        let (mut c0, mut c1) = (None, None);
        w.publish(0, stalled(4));
        assert!(
            checks(&w, 0, &mut c0, 5).is_none(),
            "one of two workers stalled"
        );
        w.publish(1, stalled(5));
        assert!(
            w.check(1, &mut c1).is_none(),
            "first seen: a candidate only"
        );
        assert!(
            checks(&w, 1, &mut c1, 2).is_none(),
            "worker 0 has not re-checked"
        );
        assert!(
            checks(&w, 0, &mut c0, 2).is_none(),
            "worker 0's own first sight"
        );
        let stuck = w.check(1, &mut c1).expect("both re-checked twice");
        let blocks: Vec<u32> = stuck.iter().map(|b| b.block.x).collect();
        assert_eq!(blocks, [4, 5]);
    }

    #[test]
    fn a_block_that_leaves_the_stalled_state_restarts_the_count() {
        let w = watch(2);
        let (mut c0, mut c1) = (None, None);
        w.publish(0, stalled(4));
        w.publish(1, stalled(5));
        assert!(w.check(1, &mut c1).is_none());
        // Block 4 gets its flag and returns: it leaves the stalled state.
        w.withdraw(0);
        w.publish(0, stalled(6));
        assert!(checks(&w, 0, &mut c0, 3).is_none());
        assert!(
            w.check(1, &mut c1).is_none(),
            "worker 1's candidate predates the exit"
        );
        assert!(checks(&w, 0, &mut c0, 2).is_none());
        assert!(
            w.check(1, &mut c1).is_none(),
            "worker 1 has re-checked once"
        );
        assert!(w.check(1, &mut c1).is_some(), "both re-checked twice since");
    }

    #[test]
    fn a_workers_next_stalled_block_is_not_a_recheck_of_its_last() {
        // Worker 1 is descheduled while worker 0's block, stalled when
        // worker 1 last looked, ends and a new one stalls with more checks
        // than the old had: worker 1's candidate must not count them.
        let w = watch(2);
        let (mut c0, mut c1) = (None, None);
        w.publish(0, stalled(4));
        assert!(checks(&w, 0, &mut c0, 10).is_none());
        w.publish(1, stalled(5));
        assert!(w.check(1, &mut c1).is_none());
        // No withdrawal in between: only the publication's identity tells.
        w.publish(0, stalled(6));
        assert!(checks(&w, 0, &mut c0, 20).is_none());
        assert!(
            checks(&w, 1, &mut c1, 2).is_none(),
            "block 6's checks are not re-checks of block 4"
        );
        // Worker 0 saw blocks 6 and 5 stalled before worker 1's last two
        // looks: now both have been re-checked twice since.
        assert!(w.check(0, &mut c0).is_some());
    }

    #[test]
    fn a_finished_worker_leaves_the_count() {
        let w = watch(2);
        let mut c1 = None;
        w.publish(1, stalled(5));
        assert!(checks(&w, 1, &mut c1, 5).is_none(), "worker 0 still runs");
        w.leave();
        assert!(checks(&w, 1, &mut c1, 2).is_none());
        assert!(
            w.check(1, &mut c1).is_some(),
            "the one active worker is stuck"
        );
    }

    #[test]
    fn peer_writers_are_never_stuck() {
        let w = SpinWatch::new(true);
        w.begin(1);
        let mut c = None;
        w.publish(0, stalled(0));
        assert!(checks(&w, 0, &mut c, 100).is_none());
    }
}
