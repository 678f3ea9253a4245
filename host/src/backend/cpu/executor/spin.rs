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

use super::block::{BlockState, SpinSite, Spinner};
use crate::error::{CpuError, SpinningThread, StalledBlock};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use vigil_device::Dim3;

/// Quiet passes after which a block counts as stalled. Each pass lets
/// every spinning thread poll 32 times, so this is thousands of unchanged
/// reads per thread; cheap next to a launch, and far beyond a bounded wait.
pub(crate) const STALL_PASSES: u32 = 64;

/// Bytes of a polled location compared between passes (a larger read is
/// compared on its first bytes).
const MAX_COMPARED_BYTES: usize = 64;

/// One worker's stalled block, as published to the launch.
struct Stall {
    block: StalledBlock,
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
/// epoch and each stalled worker's check count.
pub(crate) struct Candidate {
    epoch: u64,
    checks: Vec<(u32, u64)>,
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
        self.lock().stalls.insert(smid, Stall { block, checks: 0 });
    }

    /// Worker `smid`'s block made progress again.
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
        let now: Vec<(u32, u64)> = s.stalls.iter().map(|(&w, st)| (w, st.checks)).collect();
        if let Some(c) = candidate {
            let same_workers = c.checks.iter().map(|p| p.0).eq(now.iter().map(|p| p.0));
            if c.epoch == s.epoch && same_workers {
                let rechecked = c.checks.iter().zip(&now).all(|(a, b)| b.1 >= a.1 + 2);
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
    /// A pass of the block had a progress event.
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
