//! [`GpuSanitizer`]: the [`Sanitizer`] of sanitized PTX entries.
//!
//! Every hook finds its sanitizer thread in the CTA's shared state, skips
//! addresses outside the managed half at once (local, shared, foreign
//! memory: never dereferenced), runs the engine, and on a race pushes a
//! record with the earlier access's side entry. The lanes of a warp that
//! make one site's accesses together cooperate ([`super::warp`]): a run
//! of plain accesses tiling a line is noted once (and, covering the whole
//! line, checked once against the line's summary: [`vigil_shared::line`]),
//! and an atomic several lanes make on one word is checked once. The
//! commonest of these, a whole warp's coalesced load or store of whole
//! lines, is recognised inline at the site and takes the lean hook
//! ([`check_line`]), which skips the grouping.

use core::panic::Location;

use vigil_shared::abi::{AccessSite, RaceReport, ReportKind};
use vigil_shared::block_line::LineStep;
use vigil_shared::engine::{Engine, Outcome};
use vigil_shared::gpu::{GpuReportRecord, GpuRuntime, SideEntry, HOST_SITE_TAG};
use vigil_shared::line::{LineOutcome, LINE_BYTES};
use vigil_shared::{AccessKind, Ordering, Scope};

use super::block_table::BlockTable;
use super::cta::{lane, CtaState};
use super::device_atomics::EngineAtomics;
use super::memory::RuntimeMemory;

/// The engine's memory in the hooks: the runtime's, on device-scoped
/// atomics.
type HookMemory<'r> = RuntimeMemory<'r, EngineAtomics>;
use super::report::{Reporter, WordRun};
use super::warp::{atomic_keys, plain_key, Group};
use crate::arch::ptx as arch;
use crate::sanitizer::{AtomicAccess, Sanitizer};

/// The GPU race sanitizer: the type sanitized entry points run their body
/// with (`name::<GpuSanitizer>`). Zero-sized; its state is the CTA's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuSanitizer;

#[inline(always)]
pub(super) fn linear_block() -> u32 {
    let (b, g) = (arch::block_idx(), arch::grid_dim());
    (b.z * g.y + b.y) * g.x + b.x
}

/// Words `first..=last` of an access of `size` bytes at managed `addr`.
#[inline(always)]
fn checked_words(mem: &HookMemory<'_>, addr: u64, size: u32) -> (u64, u64) {
    (
        mem.word_of(addr),
        mem.word_of(addr + u64::from(size.max(1)) - 1),
    )
}

/// The site the engine is given: an all-zero constant, so that no
/// `AccessSite` is built in local memory on every access. A report (the
/// cold path) fills in the real one ([`Hook::site`]).
const SITE_AT_REPORT: AccessSite = AccessSite {
    file_ptr: 0,
    file_len: 0,
    line: 0,
    col: 0,
    view_site: 0,
    kernel_id: 0,
    block: 0,
    thread: 0,
    prior_view_site: 0,
};

/// One hook's context: the CTA's sanitizer thread, the calling thread and
/// this access's site.
struct Hook {
    cta: CtaState,
    /// What side entries and warp groups name the site by: a kernel
    /// access's `Location` address, or a host-issued copy's tag
    /// (`HOST_SITE_TAG | index`).
    location: u64,
    /// A host-issued copy's line and column (a kernel access's are in its
    /// `Location`, read only for a report).
    host_at: (u32, u32),
    /// Linear block index.
    block: u32,
    /// Linear thread index in the block.
    thread: u32,
}

impl Hook {
    /// An access named `location` (see [`Hook::location`]).
    #[inline(always)]
    fn new(location: u64, host_at: (u32, u32)) -> Hook {
        Hook {
            cta: CtaState::current(),
            location,
            host_at,
            block: linear_block(),
            thread: lane().0,
        }
    }

    /// This access's site, for its report: a kernel access's from its
    /// `Location`, a host-issued copy's tag as its file (the host resolves
    /// it to the call site).
    #[inline(always)]
    fn site(&self) -> AccessSite {
        let (file_ptr, file_len, (line, col)) = if self.location & HOST_SITE_TAG != 0 {
            (self.location, 0, self.host_at)
        } else {
            // SAFETY: a kernel access's location is the address of its
            // `#[track_caller]` `Location` (`location_of`), static data.
            let loc = unsafe { &*(self.location as *const Location<'static>) };
            let file = loc.file();
            (
                file.as_ptr() as u64,
                file.len() as u32,
                (loc.line(), loc.column()),
            )
        };
        AccessSite {
            file_ptr,
            file_len,
            line,
            col,
            kernel_id: self.cta.launch,
            block: self.block,
            thread: self.thread,
            ..SITE_AT_REPORT
        }
    }

    /// Notes this access in the side table, before the engine makes it
    /// visible in the shadow: a later access that races with it finds its
    /// entry at once (noted after, a racing thread on another SM could
    /// look before the note lands and lose the earlier half).
    #[inline(always)]
    fn note(&self, engine: &Engine<'_, HookMemory<'_>>, words: (u64, u64), wrote: bool) {
        let entry = self.side_entry(engine.next_access_epoch(self.cta.tid));
        let before = |t, e| self.ordered_after(engine, t, e);
        self.reporter().note(words.0, words.1, wrote, entry, before);
    }

    /// Notes a warp's run of accesses as one entry (the leader's part), as
    /// made in `epoch`.
    #[inline(always)]
    fn note_run(
        &self,
        engine: &Engine<'_, HookMemory<'_>>,
        run: &WordRun,
        wrote: bool,
        epoch: u32,
    ) {
        let before = |t, e| self.ordered_after(engine, t, e);
        self.reporter()
            .note_run(run, wrote, self.side_entry(epoch), before);
    }

    /// Whether thread `t`'s accesses in epoch `e` happen before this CTA's
    /// (its clock's entry for `t` covers `e`): their side entries can go.
    #[inline(always)]
    fn ordered_after(&self, engine: &Engine<'_, HookMemory<'_>>, t: u32, e: u32) -> bool {
        engine.clock_entry(self.cta.tid, t) >= e
    }

    /// A warp's whole-line access `run` by `group`'s lanes (`words`: the
    /// leader's): the leader notes the run and checks the line's summary
    /// for every lane. True when the line is split and each lane must
    /// check its own words; the run is then noted before any lane's
    /// shadow update.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn whole_line(
        &self,
        engine: &Engine<'_, HookMemory<'_>>,
        group: &Group,
        run: &WordRun,
        words: (u64, u64),
        addr: u64,
        size: u32,
        write: bool,
    ) -> bool {
        let mut summarised = false;
        if group.is_leader() {
            let site = &SITE_AT_REPORT;
            let note = |epoch| self.note_run(engine, run, write, epoch);
            let tid = self.cta.tid;
            if let LineOutcome::Done(out) =
                engine.access_line_noted(tid, addr, size, write, site, note)
            {
                self.finish(out, words);
                summarised = true;
            }
        }
        let per_word = !group.leader_says(summarised);
        if per_word {
            group.sync();
        }
        per_word
    }

    #[inline(always)]
    fn reporter(&self) -> Reporter<'static> {
        self.cta.reporter()
    }

    /// This access's side entry in `epoch` (the note fills in the word).
    #[inline(always)]
    fn side_entry(&self, epoch: u32) -> SideEntry {
        SideEntry {
            location: self.location,
            word: 0,
            tid: self.cta.tid,
            epoch,
            block: self.block,
            thread: self.thread,
            launch: self.cta.launch,
        }
    }

    /// Reports a race or error, with the earlier access if still known.
    #[inline(always)]
    fn finish(&self, out: Outcome, words: (u64, u64)) {
        if let Outcome::Race(r) | Outcome::Error(r) = out {
            report(self.location, self.host_at, r, words);
        }
    }
}

/// The cold half of [`Hook::finish`]. It makes its own `Hook` (the CTA's
/// state and the thread's place are read again) from what names the
/// site, so that the hot path need not keep them in registers across the
/// engine.
#[cold]
#[inline(never)]
fn report(location: u64, host_at: (u32, u32), mut r: RaceReport, words: (u64, u64)) {
    let hook = Hook::new(location, host_at);
    let rt = hook.cta.runtime();
    let reporter = hook.cta.reporter();
    r.site = hook.site();
    let error = ReportKind::from_u32(r.kind).is_some_and(|k| k.is_error());
    let prior = if error || reporter.full() {
        SideEntry::default()
    } else {
        reporter.prior_of(&r, words.0, words.1)
    };
    reporter.push(&GpuReportRecord { report: r, prior });
    // A host-issued copy is not a kernel thread to stop.
    if rt.flags & GpuRuntime::HALT_ON_RACE != 0 && hook.location & HOST_SITE_TAG == 0 {
        arch::trap();
    }
}

/// The side-table and grouping name of a kernel access site.
#[inline(always)]
fn location_of(loc: &'static Location<'static>) -> u64 {
    loc as *const Location<'static> as u64
}

#[inline(always)]
fn check_access(addr: u64, size: u32, write: bool, loc: &'static Location<'static>) {
    let location = location_of(loc);
    if warp_line(addr, size, write, location) {
        // `size` is the site's constant: one arm is left.
        match size {
            4 => check_line::<4>(addr, write, location),
            8 => check_line::<8>(addr, write, location),
            _ => check_line::<16>(addr, write, location),
        }
    } else {
        check_plain(addr, size, write, location, (0, 0));
    }
}

/// The lean hook's test, inlined at every plain access site: the whole
/// warp makes this site's accesses of 4, 8 or 16 bytes together, lane `i`
/// at `base + i * size` from a line's first byte (a coalesced load or
/// store of `f32`s, `f64`s or `float4`s: one, two or four whole lines). A
/// handful of instructions; any other access takes the general hook
/// ([`check_plain`]).
#[inline(always)]
fn warp_line(addr: u64, size: u32, write: bool, location: u64) -> bool {
    const WARP: u32 = u32::MAX;
    if !matches!(size, 4 | 8 | 16) || arch::active_mask() != WARP {
        return false;
    }
    let base = addr.wrapping_sub(u64::from(arch::lane_id() * size));
    // A `Location` is 8-aligned: its low bit can carry the kind. Lanes of
    // two sites the compiler merged into one instruction differ here.
    let site = arch::match_any_u64(WARP, location | u64::from(write));
    let start = arch::match_any_u64(WARP, base);
    // `base` is the same on every lane: so is the alignment test.
    site & start == WARP && base % LINE_BYTES == 0
}

/// The lean hook: a whole warp's accesses of `size` bytes tiling whole
/// lines in lane order ([`warp_line`]). The lanes of each line are one
/// whole-line access of the CTA's sanitizer thread: their leader notes the
/// run and checks the line's summary, and the same-block half records it
/// in the line's entry. The per-word paths, a split line's, are out of
/// line, so that this one keeps few registers. One copy per access size
/// (4, 8, 16 bytes), so that the lanes' layout is constant in each.
#[inline(never)]
fn check_line<const SIZE: u32>(addr: u64, write: bool, location: u64) {
    let size = SIZE;
    let per = size / 4;
    let group = Group::line_lanes(32 / per);
    let mut per_word = false;
    {
        let hook = Hook::new(location, (0, 0));
        // SAFETY: the CTA's runtime is live for the launch.
        let mem = unsafe { HookMemory::new(hook.cta.runtime()) };
        if mem.manages(addr) {
            let engine = Engine::new(&mem, mem.config());
            let words = checked_words(&mem, addr, size);
            let run = WordRun {
                first: words.0,
                thread: hook.thread,
                lanes: 32 / per,
                words_per_lane: per,
            };
            per_word = hook.whole_line(&engine, &group, &run, words, addr, size, write);
        }
    }
    // SAFETY: a kernel access's location is the address of its
    // `#[track_caller]` `Location` (`location_of`), static data.
    let loc = unsafe { &*(location as *const Location<'static>) };
    check_block(addr, size, write, loc, group, per);
    if per_word {
        check_words(addr, size, write, location);
    }
}

/// Each lane's words through the engine, the run already noted: the
/// per-word half of [`check_line`] for a split line.
#[inline(never)]
fn check_words(addr: u64, size: u32, write: bool, location: u64) {
    let hook = Hook::new(location, (0, 0));
    // SAFETY: the CTA's runtime is live for the launch.
    let mem = unsafe { HookMemory::new(hook.cta.runtime()) };
    let engine = Engine::new(&mem, mem.config());
    let out = engine.access(hook.cta.tid, addr, size, write, &SITE_AT_REPORT);
    hook.finish(out, checked_words(&mem, addr, size));
}

/// A plain access of `size` bytes at `addr` by a host-issued copy or fill
/// (the range-access entry): its file and side entries carry `site`, a tag
/// the host resolves to the call site (no `Location` in device memory).
#[inline(always)]
pub(super) fn check_host_access(addr: u64, size: u32, write: bool, site: u64, at: (u32, u32)) {
    check_plain(addr, size, write, site, at);
}

/// A plain access through the engine, noted in the side table as made at
/// `location` (`host_at`: see [`Hook::host_at`]), then, for a kernel's
/// access, against the other threads of its block.
#[inline(never)]
fn check_plain(addr: u64, size: u32, write: bool, location: u64, host_at: (u32, u32)) {
    let hook = Hook::new(location, host_at);
    // SAFETY: the CTA's runtime is live for the launch.
    let mem = unsafe { HookMemory::new(hook.cta.runtime()) };
    let line_run = if mem.manages(addr) {
        check_engine(&hook, &mem, addr, size, write)
    } else {
        None
    };
    if location & HOST_SITE_TAG == 0 {
        // SAFETY: a kernel access's location is the address of its
        // `#[track_caller]` `Location` (`location_of`), static data.
        let loc = unsafe { &*(location as *const Location<'static>) };
        match line_run {
            Some((group, per)) => check_block(addr, size, write, loc, group, per),
            None => {
                super::block_table::global_access(addr as usize, size as usize, kind_of(write), loc)
            }
        }
    }
}

#[inline(always)]
fn kind_of(write: bool) -> AccessKind {
    if write {
        AccessKind::Write
    } else {
        AccessKind::Read
    }
}

/// The engine's half of [`check_plain`], for a managed address. Returns
/// the lanes' group and words per lane when they made one whole-line
/// access together.
#[inline(always)]
fn check_engine(
    hook: &Hook,
    mem: &HookMemory<'_>,
    addr: u64,
    size: u32,
    write: bool,
) -> Option<(Group, u32)> {
    let engine = Engine::new(mem, mem.config());
    let words = checked_words(mem, addr, size);
    // The lanes making this site's accesses of one line together note
    // them as one run; each lane still checks its own words (in parallel,
    // with coalesced shadow updates).
    let group = Group::of([hook.location, plain_key(addr, size, words, write)]);
    let leader_first = group.leader_first_word(words);
    let mut line_run = None;
    let checks = if group.same_words(words, leader_first) {
        // The leader's check stands for every lane's (a race is reported
        // at the leader, a lane that made the access).
        if group.is_leader() {
            hook.note(&engine, words, write);
        }
        group.is_leader()
    } else {
        match group.run(words, hook.thread, leader_first) {
            Some(run) if run.whole_line() => {
                line_run = Some((group, run.words_per_lane));
                // One access of the whole line: only a split line is
                // checked word by word.
                hook.whole_line(&engine, &group, &run, words, addr, size, write)
            }
            Some(run) => {
                if group.is_leader() {
                    hook.note_run(&engine, &run, write, engine.next_access_epoch(hook.cta.tid));
                }
                // The run is noted before any lane's shadow update.
                group.sync();
                true
            }
            None => {
                hook.note(&engine, words, write);
                true
            }
        }
    };
    // One call of the engine: its access path is compiled into this
    // function once.
    if checks {
        let out = engine.access(hook.cta.tid, addr, size, write, &SITE_AT_REPORT);
        hook.finish(out, words);
    }
    line_run
}

/// The same-block half of a warp's whole-line access (`group`'s lanes,
/// `per` words a lane): recorded by its leader in the line's entry when
/// its lanes agree on everything but the thread; otherwise each lane's
/// words are checked one by one. Inlined: a call of its own cost
/// `check_line` more than its registers (copy 21.0 -> 20.4 ms sanitized
/// on an H100 when inlined, `sanitizer_cost`).
#[inline(always)]
fn check_block(
    addr: u64,
    size: u32,
    write: bool,
    loc: &'static Location<'static>,
    group: Group,
    per: u32,
) {
    let kind = kind_of(write);
    let table = BlockTable::current(addr as usize, kind, size as usize, loc);
    let fields = table.as_ref().and_then(BlockTable::run_fields);
    let (count, interval) = fields.unwrap_or_default();
    if group.all(fields.is_some()) && group.agree(count) && group.agree(interval) {
        let mut recorded = false;
        if group.is_leader() {
            if let Some(t) = &table {
                recorded = t.line_run(addr as usize, per) == LineStep::Recorded;
            }
        }
        if group.leader_says(recorded) {
            return;
        }
    }
    if table.is_some() {
        super::block_table::global_access(addr as usize, size as usize, kind, loc);
    }
}

/// An atomic through the engine; `perform` does the real operation (with
/// the word's shadow locked) and says whether it wrote.
#[inline(never)]
fn check_atomic(
    access: AtomicAccess,
    loc: &'static Location<'static>,
    perform: &mut dyn FnMut() -> bool,
) {
    let hook = Hook::new(location_of(loc), (0, 0));
    // SAFETY: the CTA's runtime is live for the launch.
    let mem = unsafe { HookMemory::new(hook.cta.runtime()) };
    let addr = access.addr as u64;
    if !mem.manages(addr) {
        perform();
        return;
    }
    // The lanes making this site's atomic on one word together are one
    // thread's atomics at one moment: the lowest lane checks them as one
    // access, and the others perform theirs while it holds the word's
    // shadow (so the shadow still sees them in memory order).
    let [word, op] = atomic_keys(&access);
    let group = Group::of([location_of(loc), word, op]);
    if !group.is_leader() {
        group.sync();
        group.any(perform());
        return;
    }
    let engine = Engine::new(&mem, mem.config());
    let words = checked_words(&mem, addr, access.size as u32);
    // What the operation does if it succeeds; a compare-exchange that
    // fails only reads, and is noted as a read once that is known.
    let writes = access.kind.writes();
    hook.note(&engine, words, writes);
    let mut wrote = false;
    let out = engine.atomic(
        hook.cta.tid,
        addr,
        access.size as u32,
        access.engine_op(),
        &SITE_AT_REPORT,
        || {
            // One lane's write makes the group's access a write (the
            // others' failed compare-exchanges are its reads).
            if group.alone() {
                wrote = perform();
            } else {
                group.sync();
                wrote = group.any(perform());
            }
            wrote
        },
    );
    if writes && !wrote {
        hook.note(&engine, words, false);
    }
    hook.finish(out, words);
}

#[inline(never)]
fn check_fence(ordering: Ordering, scope: Scope) {
    let cta = CtaState::current();
    // SAFETY: the CTA's runtime is live for the launch.
    let mem = unsafe { HookMemory::new(cta.runtime()) };
    Engine::new(&mem, mem.config()).fence(cta.tid, ordering, scope);
}

impl Sanitizer for GpuSanitizer {
    const ENABLED: bool = true;

    #[inline(always)]
    fn access(addr: usize, size: usize, kind: AccessKind, loc: &'static Location<'static>) {
        check_access(addr as u64, size as u32, kind.writes(), loc);
    }

    #[inline(always)]
    fn atomic<R>(
        access: AtomicAccess,
        loc: &'static Location<'static>,
        op: impl FnOnce() -> (R, bool),
    ) -> R {
        let mut op = Some(op);
        let mut result = None;
        // One non-generic engine call for every atomic in the module: the
        // operation goes in behind `dyn`, so the engine's atomic path is
        // compiled once, not once per call site.
        check_atomic(access, loc, &mut || {
            let (r, wrote) = op.take().map(|f| f()).unzip();
            result = r;
            wrote.unwrap_or(false)
        });
        match (result, op) {
            (Some(r), _) => r,
            // The engine runs the operation on every path; if it ever did
            // not, run it here rather than lose it.
            (None, Some(f)) => f().0,
            (None, None) => arch::trap(),
        }
    }

    #[inline(always)]
    fn fence(ordering: Ordering, scope: Scope, _loc: &'static Location<'static>) {
        check_fence(ordering, scope);
    }

    #[inline(always)]
    fn shared_access(access: crate::sanitizer::SharedAccess, loc: &'static Location<'static>) {
        super::block::shared_access(access, loc)
    }

    #[inline(always)]
    fn barrier(loc: &'static Location<'static>) {
        super::block::barrier(loc)
    }

    #[inline(always)]
    fn warp_sync(mask: u32) {
        super::block::warp_sync(mask)
    }

    #[inline(always)]
    fn block_global_access(
        addr: usize,
        size: usize,
        kind: AccessKind,
        loc: &'static Location<'static>,
    ) {
        super::block_table::global_access(addr, size, kind, loc)
    }

    #[inline(always)]
    fn block_acquire() {
        super::block::acquire()
    }

    #[inline(always)]
    fn shared_unchecked(_array_bytes: usize) {
        super::block::shared_unchecked()
    }
}
