//! The CPU sanitizer's hooks: each access, atomic and fence of a running
//! block through the race engine as its CTA, and the same-block layer
//! after it; a copy's or fill's ranges as the accesses of its one CTA.
//!
//! The same-block layer orders by the CTA's release epochs
//! ([`crate::backend::cpu::block_races`]): each access carries the CTA's
//! epoch; an acquiring atomic acquires the latest of the CTA's own
//! releases the engine found it read (a relaxed one observes it, for a
//! later acquire fence); an acquire whose releases the engine cannot name
//! (memory outside the arena, a bounded check, a sequentially consistent
//! fence, an mbarrier phase) acquires every access of the CTA so far; a
//! shared-memory atomic read (shared memory holds no release heads)
//! observes every release of the CTA so far.

use super::block::BlockAccess;
use super::cta::{linear, Cta, LaunchState};
use super::report::Current;
use super::{lock, CpuRaceSanitizer};
use crate::sanitizer::report::MemorySpace;
use std::panic::Location;
use std::sync::atomic::Ordering as MemOrder;
use std::sync::Arc;
use vigil_device::host_runtime::{
    AtomicAccess, CopyAccess, SanitizerRuntime, SharedAccess, ThreadContext,
};
use vigil_device::Dim3;
use vigil_shared::race::atomic::atomic;
use vigil_shared::race::line::{access_line, LineAccess, LineOutcome, LINE_BYTES};
use vigil_shared::race::sync::{acquire_everything, cta_exit, fence};
use vigil_shared::race::{access, RaceFound, SiteLanes, SiteWord};
use vigil_shared::{AccessKind, Ordering, Scope};

/// Bytes of a host-issued copy checked as one access: a racy copy gives
/// one report per chunk (de-duplicated into one), and the shadow of a
/// chunk after a race is still updated.
const TRANSFER_CHUNK: u64 = 64 << 10;

/// The `smid` a copy's or fill's accesses are reported with (it runs on
/// the host, not on a virtual SM).
const TRANSFER_SM: u32 = 0;

impl CpuRaceSanitizer {
    /// The word (from the real base) and byte in it of `addr`, when the
    /// arena holds it (memory outside it is not checked).
    #[inline(always)]
    fn word_of(&self, addr: u64) -> Option<(u64, u32)> {
        let base = self.shared.mem.arena.real_base();
        let off = addr.checked_sub(base)?;
        Some((off / 4, (off % 4) as u32))
    }

    /// The site word of an access by thread `thread` of `serial` at `loc`
    /// (which the location table keeps, to name it in reports).
    #[inline(always)]
    fn site(&self, serial: u32, thread: u32, loc: &'static Location<'static>) -> SiteWord {
        self.shared.locations.note(loc);
        let address = loc as *const Location<'static> as u64;
        SiteWord::new(serial, address, thread, SiteLanes::Single)
    }

    /// Counts an access whose check was bounded.
    #[inline(always)]
    fn count_bounded(&self, bounded: bool) {
        if bounded {
            self.bounded.fetch_add(1, MemOrder::Relaxed);
        }
    }

    /// Counts a `bounded` check and reports `race` by the access
    /// `current`; whether to halt (the caller does, once it let go of the
    /// block's state).
    #[inline(always)]
    fn found(&self, race: Option<RaceFound>, bounded: bool, current: &Current<'_>) -> bool {
        self.count_bounded(bounded);
        match race {
            Some(r) => {
                self.report_race(r, current);
                self.halt_on_error
            }
            None => false,
        }
    }

    /// The block-level check of a global access inside the arena (memory
    /// outside it is not checked, as for the engine), made in the block's
    /// release epoch `release_epoch`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn check_global_in_block(
        &self,
        t: &ThreadContext<'_>,
        addr: usize,
        size: usize,
        kind: AccessKind,
        scope: Scope,
        loc: &'static Location<'static>,
        release_epoch: u16,
    ) {
        if self.word_of(addr as u64).is_none() {
            return;
        }
        let a = BlockAccess {
            addr: addr as u64,
            size: size as u64,
            kind,
            scope,
            space: MemorySpace::Global,
            array: None,
            view: None,
            release_epoch,
        };
        self.check_in_block(t, a, loc);
    }

    /// An acquire by a thread of the block on `smid` whose releases the
    /// engine cannot name: every access of the block so far is ordered
    /// before the block's later ones, and the block's next accesses start
    /// a new epoch.
    fn acquire_everything_in(&self, smid: u32) {
        let epoch = self.ctas.with(smid, |cta| {
            let mut view = cta.view(self.rank);
            acquire_everything(&mut view, &cta.sync())
        });
        if let Some(e) = epoch {
            self.block.acquired(smid, e);
        }
    }

    /// The engine's check of a plain global access by thread `t` (against
    /// other CTAs); halts if configured to and it raced. The CTA's
    /// release epoch at the access, or `None` when the engine does not
    /// follow the memory.
    fn check_in_engine(
        &self,
        t: &ThreadContext<'_>,
        addr: usize,
        size: usize,
        kind: AccessKind,
        loc: &'static Location<'static>,
    ) -> Option<u16> {
        let (word, offset) = self.word_of(addr as u64)?;
        let (halt, epoch) = self.ctas.with(t.smid, |cta| {
            let view = cta.view(self.rank);
            let thread = t.linear_thread_index();
            let site = self.site(cta.serial, thread, loc);
            let mut bounded = false;
            let mem = &self.shared.mem;
            let race = access(
                mem,
                &view,
                word,
                offset,
                size as u32,
                kind.writes(),
                false,
                site,
                &mut bounded,
            );
            let current = Current::of_thread(cta, t, loc, kind, Scope::Block, size);
            (self.found(race, bounded, &current), view.epoch)
        })?;
        if halt {
            self.halt();
        }
        Some(epoch)
    }

    /// A copy's access as the block-level check sees it (made by thread
    /// `t`'s block now): `None` for global memory the engine does not
    /// follow, or outside a block.
    fn copy_block_access(&self, t: &ThreadContext<'_>, access: CopyAccess) -> Option<BlockAccess> {
        let epoch = self.ctas.with(t.smid, |cta| cta.sync().epoch())?;
        match access {
            CopyAccess::Global { addr, size, kind } => {
                self.word_of(addr as u64)?;
                Some(BlockAccess {
                    addr: addr as u64,
                    size: size as u64,
                    kind,
                    scope: Scope::Block,
                    space: MemorySpace::Global,
                    array: None,
                    view: None,
                    release_epoch: epoch,
                })
            }
            CopyAccess::Shared(shared) => Some(BlockAccess::shared(shared, epoch)),
        }
    }

    /// Checks a copy's or fill's device ranges as the accesses of the one
    /// CTA of `launch`, made at `caller`.
    pub(super) fn check_transfer(
        &self,
        launch: LaunchState,
        reads: Option<(u64, u64)>,
        writes: Option<(u64, u64)>,
        caller: &'static Location<'static>,
    ) {
        let cta = Cta::new(Arc::new(launch), 0);
        let site = self.site(cta.serial, 0, caller);
        let ranges = reads.map(|r| (r, false)).into_iter();
        for ((addr, bytes), write) in ranges.chain(writes.map(|w| (w, true))) {
            let end = addr.saturating_add(bytes);
            let mut at = addr;
            while at < end {
                let to = (at + TRANSFER_CHUNK).min(end);
                if let Some(r) = self.check_range(&cta, at, to - at, write, site) {
                    let kind = if write {
                        AccessKind::Write
                    } else {
                        AccessKind::Read
                    };
                    let current = Current {
                        cta: &cta,
                        thread: 0,
                        smid: TRANSFER_SM,
                        loc: caller,
                        access: kind,
                        scope: Scope::Block,
                        size: (to - at) as u32,
                    };
                    self.report_race(r, &current);
                }
                at = to;
            }
        }
        // A transfer acquires nothing: its end logs nothing.
    }

    /// Checks and records `bytes` bytes at `addr` by `cta`: whole lines
    /// through their headers, partial ones word by word. Returns the first
    /// race.
    fn check_range(
        &self,
        cta: &Cta,
        addr: u64,
        bytes: u64,
        write: bool,
        site: SiteWord,
    ) -> Option<RaceFound> {
        let mem = &self.shared.mem;
        let (word, _) = self.word_of(addr)?;
        let view = cta.view(self.rank);
        let mut bounded = false;
        let words = |lo: u64, hi: u64, bounded: &mut bool| {
            let (w, off) = self.word_of(lo)?;
            access(
                mem,
                &view,
                w,
                off,
                (hi - lo) as u32,
                write,
                false,
                site,
                bounded,
            )
        };
        let end = addr + bytes;
        let (first_line, last_line) = (
            addr.next_multiple_of(LINE_BYTES),
            end / LINE_BYTES * LINE_BYTES,
        );
        let mut race = None;
        if first_line >= last_line {
            race = words(addr, end, &mut bounded);
        } else {
            if addr < first_line {
                race = words(addr, first_line, &mut bounded);
            }
            let line_word = |at: u64| word + (at - addr) / 4;
            for at in (first_line..last_line).step_by(LINE_BYTES as usize) {
                let acc = LineAccess {
                    write,
                    read_only: false,
                    site,
                };
                let r = match access_line(mem, &view, line_word(at), acc, &mut bounded) {
                    LineOutcome::Clean => None,
                    LineOutcome::Raced(r) => Some(r),
                    LineOutcome::Split => words(at, at + LINE_BYTES, &mut bounded),
                    LineOutcome::RacedSplit(r) => {
                        // The words' reports are this race again.
                        let _ = words(at, at + LINE_BYTES, &mut bounded);
                        Some(r)
                    }
                };
                race = race.or(r);
            }
            if last_line < end {
                let r = words(last_line, end, &mut bounded);
                race = race.or(r);
            }
        }
        self.count_bounded(bounded);
        race
    }
}

impl SanitizerRuntime for CpuRaceSanitizer {
    fn block_start(&self, smid: u32, block_idx: Dim3) {
        let launch = lock(&self.current).clone().unwrap_or_else(|| {
            panic!(
                "vigil: a block ran under the CPU race sanitizer outside a launch it was told of \
                 (call CpuRaceSanitizer::begin_launch before the executor's launch)"
            )
        });
        let block = linear(block_idx, launch.shape.grid) as u32;
        self.ctas.start(smid, Cta::new(launch, block));
        self.block.block_start(smid);
    }

    fn block_end(&self, smid: u32, _block_idx: Dim3) {
        if let Some(cta) = self.ctas.end(smid) {
            cta_exit(&self.shared.mem, &cta.view(self.rank), &cta.sync());
        }
    }

    fn access(
        &self,
        t: &ThreadContext<'_>,
        addr: usize,
        size: usize,
        kind: AccessKind,
        loc: &'static Location<'static>,
    ) {
        if let Some(epoch) = self.check_in_engine(t, addr, size, kind, loc) {
            self.check_global_in_block(t, addr, size, kind, Scope::Block, loc, epoch);
        }
    }

    fn atomic(
        &self,
        t: &ThreadContext<'_>,
        a: AtomicAccess,
        loc: &'static Location<'static>,
        op: &mut dyn FnMut() -> bool,
    ) {
        let mut performed = false;
        // The CTA's epoch before the atomic (its own, if it releases), what
        // the engine found it read of the CTA's own releases, and whether
        // its check was bounded.
        let mut seen = None;
        let halt = self.word_of(a.addr as u64).and_then(|(word, offset)| {
            self.ctas.with(t.smid, |cta| {
                let mut view = cta.view(self.rank);
                let epoch = view.epoch;
                let sync = cta.sync();
                let thread = t.linear_thread_index();
                let site = self.site(cta.serial, thread, loc);
                let mut bounded = false;
                let ((), race) = atomic(
                    &self.shared.mem,
                    &mut view,
                    &sync,
                    cta.launch.lane_ref,
                    word,
                    offset,
                    a.size as u32,
                    a.engine_op(),
                    site,
                    &mut bounded,
                    || {
                        performed = true;
                        ((), op())
                    },
                );
                seen = Some((epoch, view.own, bounded));
                let current = Current::of_thread(cta, t, loc, a.kind, a.scope, a.size);
                self.found(race, bounded, &current)
            })
        });
        if !performed {
            op();
        }
        if halt == Some(true) {
            self.halt();
        }
        let acquires = a.ordering.acquires();
        match seen {
            Some((epoch, own, bounded)) => {
                self.check_global_in_block(t, a.addr, a.size, a.kind, a.scope, loc, epoch);
                if acquires {
                    self.block.acquired(t.smid, own.acquired);
                }
                self.block.observed(t.smid, own.observed);
                if acquires && bounded {
                    self.acquire_everything_in(t.smid);
                }
            }
            // Memory the engine does not follow: which releases it read
            // is unknown.
            None if acquires => self.acquire_everything_in(t.smid),
            None => {}
        }
    }

    fn fence(
        &self,
        t: &ThreadContext<'_>,
        ordering: Ordering,
        scope: Scope,
        _loc: &'static Location<'static>,
    ) {
        let everything = self.ctas.with(t.smid, |cta| {
            let mut view = cta.view(self.rank);
            let sync = cta.sync();
            fence(&self.shared.mem, &mut view, &sync, ordering, scope);
            // A sequentially consistent fence orders through other CTAs'
            // fences, whose releases it does not name.
            (ordering == Ordering::SeqCst).then(|| acquire_everything(&mut view, &sync))
        });
        match everything {
            Some(Some(e)) => self.block.acquired(t.smid, e),
            Some(None) if ordering.acquires() => self.block.acquire_observed(t.smid),
            _ => {}
        }
    }

    fn shared_access(
        &self,
        t: &ThreadContext<'_>,
        access: SharedAccess,
        loc: &'static Location<'static>,
    ) {
        let Some((epoch, saturated)) = self.ctas.with(t.smid, |cta| {
            let sync = cta.sync();
            (sync.epoch(), sync.saturated() != 0)
        }) else {
            return;
        };
        self.check_in_block(t, BlockAccess::shared(access, epoch), loc);
        if matches!(access.kind, AccessKind::AtomicRead | AccessKind::AtomicRmw) {
            // Shared memory holds no release heads: an atomic read of it
            // may have read a value stored after any release of the CTA
            // so far, so it observes them all (the epochs before the
            // current one, or the current one once it saturated). That
            // can hide a race, never invent one: only a release orders
            // what came before it, and every release ends an epoch.
            let closed = if saturated {
                epoch
            } else {
                epoch.saturating_sub(1)
            };
            self.block.observed(t.smid, closed);
        }
    }

    fn copy_issued(
        &self,
        t: &ThreadContext<'_>,
        copy: u32,
        access: CopyAccess,
        loc: &'static Location<'static>,
    ) {
        // Other CTAs meet the copy where it completes; the issuing thread's
        // own block meets it in flight from now on.
        if let Some(a) = self.copy_block_access(t, access) {
            let thread = t.linear_thread_index();
            let conflicts =
                self.block
                    .copy_issued(t.smid, thread, copy, a.addr, a.size, a.made(loc));
            if !conflicts.is_empty() {
                self.report_in_block(t, &a, loc, &conflicts);
            }
        }
    }

    fn copy_completed(
        &self,
        waiter: &ThreadContext<'_>,
        issuer: &ThreadContext<'_>,
        copy: u32,
        access: CopyAccess,
        loc: &'static Location<'static>,
    ) {
        // Against other CTAs, the copy is an access of its block made
        // now (its block's later releases order it, earlier ones do not).
        if let CopyAccess::Global { addr, size, kind } = access {
            self.check_in_engine(issuer, addr, size, kind, loc);
        }
        if let Some(a) = self.copy_block_access(waiter, access) {
            let thread = waiter.linear_thread_index();
            self.block
                .copy_completed(waiter.smid, thread, copy, a.addr, a.size, a.release_epoch);
        }
    }

    fn grid_dependency_waited(&self, t: &ThreadContext<'_>) {
        self.ctas.with(t.smid, |cta| cta.waited_for_prerequisites());
    }

    fn acquire_everything(&self, t: &ThreadContext<'_>) {
        self.acquire_everything_in(t.smid);
    }

    fn barrier(&self, t: &ThreadContext<'_>, _loc: &'static Location<'static>) {
        self.block.barrier(t.smid, t.linear_thread_index());
    }

    fn warp_joined(&self, smid: u32, warp: u32, lanes: u32, contributed: u32) {
        self.block.warp_joined(smid, warp, lanes, contributed);
    }
}
