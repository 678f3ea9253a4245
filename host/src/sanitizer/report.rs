//! Race reports as the host hands them to the user (docs/src/design/reports.md):
//! [`RaceReport`] (one race or engine error, decoded: kernel, allocation and
//! offset, both accesses with their source locations) and [`RaceReports`]
//! (a de-duplicated collection, printed readably, and carried by
//! [`Error::Races`](crate::Error::Races)).
//!
//! Every type here is data: `Serialize` and `Deserialize` (serde) in the
//! report file's JSON format, which [`report_json`](super::report_json)
//! versions and documents.
//!
//! The kind and access vocabulary is `vigil-shared`'s ([`ReportKind`],
//! [`AccessKind`], [`Scope`]), the same the engine records on both backends.

use super::barrier::DivergentBarrier;
use super::report_json::names;
use crate::types::Dim3;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use vigil_shared::abi::ReportKind;
use vigil_shared::{AccessKind, Scope};

/// A source location (`file:line:column`, from `#[track_caller]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SourceLocation {
    /// The file, as the compiler names it.
    pub file: String,
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1.
    pub column: u32,
}

impl SourceLocation {
    /// The location of a `#[track_caller]` caller.
    pub fn from_std(loc: &std::panic::Location<'_>) -> SourceLocation {
        SourceLocation {
            file: loc.file().to_owned(),
            line: loc.line(),
            column: loc.column(),
        }
    }
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// The allocation a racing address falls in.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RaceAllocation {
    /// First byte of the allocation (a buffer's `device_ptr`).
    pub base: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Offset of the racing address from `base`, in bytes.
    pub offset: u64,
    /// Where the host code allocated it (the caller of
    /// [`DeviceBuffer::alloc`](crate::DeviceBuffer::alloc) and its
    /// siblings), when the buffer was still live at the collection; `None`
    /// for shared memory and for memory allocated otherwise.
    pub site: Option<SourceLocation>,
}

/// The memory a race is in (`"global"` or `"shared"` in JSON).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemorySpace {
    /// Global (device) memory: the allocation is a buffer.
    Global,
    /// A block's shared memory: the race is between threads of one block,
    /// and the allocation is the shared array (a `shared_array!`'s
    /// storage, or the launch's dynamic shared memory) of that block.
    Shared,
}

impl MemorySpace {
    /// `"global"` or `"shared"`.
    pub fn name(self) -> &'static str {
        match self {
            MemorySpace::Global => "global",
            MemorySpace::Shared => "shared",
        }
    }
}

/// The access that detected the race (the later one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceAccess {
    /// What the access did.
    #[serde(with = "names::access")]
    pub access: AccessKind,
    /// Its scope (meaningful for atomics).
    #[serde(with = "names::scope")]
    pub scope: Scope,
    /// Device rank of the thread.
    pub device: u32,
    /// (Virtual) SM the block ran on.
    pub smid: u32,
    /// `blockIdx`.
    #[serde(with = "names::dim3")]
    pub block: Dim3,
    /// `threadIdx`.
    #[serde(with = "names::dim3")]
    pub thread: Dim3,
    /// Where in the kernel source (or, for a host-issued access, in the
    /// host code that issued it), when known.
    pub location: Option<SourceLocation>,
    /// For a shared-memory access, where the shared view it went through
    /// was allocated (its `shared_array!` or `dynamic_shared_array!`, or
    /// the `SharedStack::push` of a tile), when known: two tiles over the
    /// same bytes name their own pushes.
    pub shared_view: Option<SourceLocation>,
    /// The access is a host-issued copy or fill (the report's `kernel`
    /// names it, e.g. `memset on stream #2`), not a kernel thread: block,
    /// thread and SM do not apply.
    pub host_issued: bool,
}

/// The earlier access the race is with. The engine keeps less about it:
/// its sanitizer thread and epoch always, the rest where it is known.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorAccess {
    /// What the access did.
    #[serde(with = "names::access")]
    pub access: AccessKind,
    /// Its scope (meaningful for atomics).
    #[serde(with = "names::scope")]
    pub scope: Scope,
    /// Sanitizer thread (on a GPU, one per resident CTA slot of an SM; on
    /// the CPU backend, the block's serial).
    pub tid: u32,
    /// Device rank of that thread.
    pub device: u32,
    /// SM of that thread, when its id says it (a GPU); `None` on the CPU
    /// backend, where a serial names a block, not where it ran.
    pub smid: Option<u32>,
    /// The thread's epoch at the access (for a race inside a block
    /// ([`MemorySpace::Shared`], or two threads of one block in global
    /// memory), the barrier interval: barriers its thread had arrived at).
    pub epoch: u32,
    /// `blockIdx`, when known.
    #[serde(with = "names::optional_dim3")]
    pub block: Option<Dim3>,
    /// `threadIdx`, when known.
    #[serde(with = "names::optional_dim3")]
    pub thread: Option<Dim3>,
    /// The kernel that made it (or the host-issued copy or fill), when
    /// known.
    pub kernel: Option<String>,
    /// Where in the kernel source (or the host code), when known.
    pub location: Option<SourceLocation>,
    /// For a shared-memory access, where the shared view it went through
    /// was allocated, when known (see [`RaceAccess::shared_view`]).
    pub shared_view: Option<SourceLocation>,
    /// The access is known to be a host-issued copy or fill (named by
    /// `kernel`), not a kernel thread.
    pub host_issued: bool,
    /// The access is another thread's of the current access's own block (a
    /// race inside a block): `tid` is then the block's sanitizer thread
    /// and `epoch` its barrier interval.
    pub same_block: bool,
}

/// One race (or engine error) found by the sanitizer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaceReport {
    /// What kind of race (or, for [`ReportKind::is_error`] kinds, which
    /// engine limit was hit).
    #[serde(with = "names::kind")]
    pub kind: ReportKind,
    /// Address of the current access.
    pub address: u64,
    /// Bytes of the current access.
    pub size: u32,
    /// The allocation the address falls in, when known (for shared
    /// memory, the shared array).
    pub allocation: Option<RaceAllocation>,
    /// Global or shared memory.
    pub space: MemorySpace,
    /// The kernel (PTX entry name) of the current access.
    pub kernel: String,
    /// The current access.
    pub current: RaceAccess,
    /// The earlier access.
    pub prior: PriorAccess,
}

/// A readable name of a report kind.
pub fn kind_name(kind: ReportKind) -> &'static str {
    match kind {
        ReportKind::ReadAfterWrite => "read-after-write race",
        ReportKind::WriteAfterRead => "write-after-read race",
        ReportKind::WriteAfterWrite => "write-after-write race",
        ReportKind::AtomicNonAtomic => "atomic/non-atomic race",
        ReportKind::ScopeMismatch => "atomic scope race",
        ReportKind::AtomicSizeMismatch => "mixed-size atomic race",
        ReportKind::EpochOverflow => "sanitizer error: epoch overflow",
        ReportKind::ClockBufferExhausted => "sanitizer error: clock buffer exhausted",
        ReportKind::ShadowPoolExhausted => "sanitizer error: shadow record pool exhausted",
        ReportKind::ReleaseSlotsExhausted => "sanitizer error: release slots exhausted",
    }
}

/// A readable name of an access kind (`read`, `atomic write`, ...).
pub(crate) fn access_name(a: AccessKind) -> &'static str {
    match a {
        AccessKind::Read => "read",
        AccessKind::Write => "write",
        AccessKind::AtomicRead => "atomic read",
        AccessKind::AtomicWrite => "atomic write",
        AccessKind::AtomicRmw => "atomic read-modify-write",
    }
}

fn scope_suffix(a: AccessKind, s: Scope) -> String {
    if a.is_atomic() {
        format!(" (.{})", s.ptx())
    } else {
        String::new()
    }
}

struct Coord(Dim3);

impl fmt::Display for Coord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {}, {})", self.0.x, self.0.y, self.0.z)
    }
}

impl fmt::Display for RaceReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on {} byte(s) at {:#x}",
            kind_name(self.kind),
            self.size,
            self.address
        )?;
        if let Some(a) = &self.allocation {
            let what = match self.space {
                MemorySpace::Global => "allocation",
                MemorySpace::Shared => "shared array",
            };
            write!(
                f,
                " (offset {} of the {}-byte {what} at {:#x})",
                a.offset, a.size, a.base
            )?;
        } else if self.space == MemorySpace::Shared {
            write!(f, " (shared memory)")?;
        }
        let c = &self.current;
        if c.host_issued {
            writeln!(f, " in a {}", self.kernel)?;
            write!(
                f,
                "  this access: {} by the host-issued {} on device {}",
                access_name(c.access),
                self.kernel,
                c.device
            )?;
        } else {
            writeln!(f, " in kernel `{}`", self.kernel)?;
            write!(
                f,
                "  this access: {}{} by block {} thread {} on device {} SM {}",
                access_name(c.access),
                scope_suffix(c.access, c.scope),
                Coord(c.block),
                Coord(c.thread),
                c.device,
                c.smid
            )?;
        }
        if let Some(l) = &c.location {
            write!(f, " at {l}")?;
        }
        write_view(f, &c.shared_view)?;
        writeln!(f)?;
        let p = &self.prior;
        if p.same_block {
            write!(
                f,
                "  earlier:     {}{} by thread {} of the same block, after {} barrier(s)",
                access_name(p.access),
                scope_suffix(p.access, p.scope),
                p.thread
                    .map_or_else(|| "?".to_owned(), |t| Coord(t).to_string()),
                p.epoch,
            )?;
            if let Some(l) = &p.location {
                write!(f, " at {l}")?;
            }
            return write_view(f, &p.shared_view);
        }
        write!(
            f,
            "  earlier:     {}{} by sanitizer thread {} (device {}",
            access_name(p.access),
            scope_suffix(p.access, p.scope),
            p.tid,
            p.device,
        )?;
        if let Some(sm) = p.smid {
            write!(f, " SM {sm}")?;
        }
        write!(f, ", epoch {})", p.epoch)?;
        match &p.kernel {
            Some(k) if p.host_issued => write!(f, ", the host-issued {k}")?,
            k => {
                if let Some(b) = p.block {
                    write!(f, ", block {}", Coord(b))?;
                }
                if let Some(t) = p.thread {
                    write!(f, " thread {}", Coord(t))?;
                }
                if let Some(k) = k {
                    write!(f, " in kernel `{k}`")?;
                }
            }
        }
        if let Some(l) = &p.location {
            write!(f, " at {l}")?;
        }
        Ok(())
    }
}

/// The text naming the shared view an access went through, if known.
fn write_view(f: &mut fmt::Formatter<'_>, view: &Option<SourceLocation>) -> fmt::Result {
    match view {
        Some(v) => write!(f, ", through the shared view allocated at {v}"),
        None => Ok(()),
    }
}

impl RaceReport {
    /// The report as one JSON object, as a report file's `reports` hold
    /// it (field names as in the struct; kinds and accesses as their
    /// readable names, addresses as numbers).
    pub fn to_json(&self) -> String {
        // Plain data with string keys: serialising it cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The de-duplication key of a report: same kind and location pair.
type DedupKey = (ReportKind, Option<SourceLocation>, Option<SourceLocation>);

fn key_of(r: &RaceReport) -> DedupKey {
    (r.kind, r.current.location.clone(), r.prior.location.clone())
}

/// A de-duplicated collection of reports: the first report of each
/// (kind, current location, earlier location) is kept, later ones are
/// counted in [`RaceReports::duplicates`]; reports the runtime could not
/// record (a full buffer) are counted in [`RaceReports::dropped`], and
/// those a suppressions file matched in [`RaceReports::suppressed`].
///
/// Beside the races it carries what else a collection found: divergent
/// barriers of a sanitized GPU context ([`RaceReports::divergent_barriers`];
/// the CPU backend fails the launch with them instead), and accesses the
/// GPU's same-block check could not follow ([`RaceReports::unchecked_words`])
/// and shared arrays it could not check ([`RaceReports::unchecked_arrays`]),
/// and accesses whose word's history the shadow had to cut
/// ([`RaceReports::history_lost`]): lost detection, never a race.
///
/// A collection a context hands to the program ([`Context::take_reports`](crate::Context::take_reports),
/// or inside [`Error::Races`](crate::Error::Races)) that is dropped
/// before anything read its races (its text, its reports, its length or
/// its JSON: an ignored `synchronize()` error) is printed on stderr when
/// the process exits.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct RaceReports {
    reports: Vec<RaceReport>,
    /// Rare, so a boxed slice: a collection (and so an `Error`) stays
    /// small enough to return by value.
    #[serde(rename = "divergent_barriers")]
    divergent: Box<[DivergentBarrier]>,
    #[serde(flatten)]
    counts: ReportCounts,
    /// Set on a collection handed to the program; shared by its clones.
    #[serde(skip)]
    read: Option<Arc<ReadMark>>,
}

/// How far a sanitizer's detection was bounded: the counts of
/// [`RaceReports::unchecked_words`], [`RaceReports::unchecked_arrays`] and
/// [`RaceReports::history_lost`], of one collection
/// ([`RaceReports::bounds`]) or summed over every collection of a context
/// ([`Context::detection_bounds`](crate::Context::detection_bounds)).
/// Lost detection, never a race: all zero when every access was checked
/// against everything it could race with.
///
/// ```
/// let b = vigil::DetectionBounds::default();
/// assert!(!b.any());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DetectionBounds {
    /// Word accesses left unchecked against their block's other threads.
    pub unchecked_words: u64,
    /// Shared arrays (per block) left unchecked.
    pub unchecked_arrays: u64,
    /// Accesses that lost part of their word's history.
    pub history_lost: u64,
}

impl DetectionBounds {
    /// True when any count is not zero.
    pub fn any(&self) -> bool {
        *self != DetectionBounds::default()
    }

    /// The counts of `self` and `other` summed (saturating).
    pub fn plus(self, other: DetectionBounds) -> DetectionBounds {
        DetectionBounds {
            unchecked_words: self.unchecked_words.saturating_add(other.unchecked_words),
            unchecked_arrays: self.unchecked_arrays.saturating_add(other.unchecked_arrays),
            history_lost: self.history_lost.saturating_add(other.history_lost),
        }
    }
}

/// What a collection counts besides its reports (the report file writes
/// them as they are).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ReportCounts {
    duplicates: u64,
    dropped: u64,
    suppressed: u64,
    unchecked_words: u64,
    unchecked_arrays: u64,
    history_lost: u64,
}

/// Whether the program has read a collection handed to it (see
/// [`RaceReports`]).
#[derive(Debug, Default)]
pub(crate) struct ReadMark(AtomicBool);

impl ReadMark {
    /// True once any copy of the collection was read.
    pub(crate) fn is_read(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

impl PartialEq for RaceReports {
    /// Equal findings and counts (whether the program read them aside;
    /// comparing reads both).
    fn eq(&self, other: &Self) -> bool {
        self.mark_read();
        other.mark_read();
        (&self.reports, &self.divergent, &self.counts)
            == (&other.reports, &other.divergent, &other.counts)
    }
}

impl Eq for RaceReports {}

impl fmt::Debug for RaceReports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.mark_read();
        f.debug_struct("RaceReports")
            .field("reports", &self.reports)
            .field("divergent_barriers", &self.divergent)
            .field("duplicates", &self.counts.duplicates)
            .field("dropped", &self.counts.dropped)
            .field("suppressed", &self.counts.suppressed)
            .field("unchecked_words", &self.counts.unchecked_words)
            .field("unchecked_arrays", &self.counts.unchecked_arrays)
            .field("history_lost", &self.counts.history_lost)
            .finish()
    }
}

impl Drop for RaceReports {
    fn drop(&mut self) {
        let Some(mark) = self.read.take() else {
            return;
        };
        if !mark.is_read() && self.has_findings() {
            super::exit::note_unread(mark, std::mem::take(self));
        }
    }
}

impl RaceReports {
    /// An empty collection.
    pub fn new() -> RaceReports {
        RaceReports::default()
    }

    /// Adds a report unless one with the same kind and locations is
    /// already there (then it only counts as a duplicate). Returns whether
    /// it was kept.
    pub fn push(&mut self, report: RaceReport) -> bool {
        let key = key_of(&report);
        if self.reports.iter().any(|r| key_of(r) == key) {
            self.counts.duplicates += 1;
            false
        } else {
            self.reports.push(report);
            true
        }
    }

    /// Adds `n` to the count of reports the runtime had to drop.
    pub fn add_dropped(&mut self, n: u64) {
        self.counts.dropped = self.counts.dropped.saturating_add(n);
    }

    /// Adds a divergent barrier (a GPU block's).
    pub fn push_divergent_barrier(&mut self, d: DivergentBarrier) {
        self.add_divergent(std::iter::once(d));
    }

    fn add_divergent(&mut self, more: impl IntoIterator<Item = DivergentBarrier>) {
        let mut all = std::mem::take(&mut self.divergent).into_vec();
        all.extend(more);
        self.divergent = all.into_boxed_slice();
    }

    /// Adds `n` to the count of same-block global accesses left unchecked.
    pub fn add_unchecked_words(&mut self, n: u64) {
        self.counts.unchecked_words = self.counts.unchecked_words.saturating_add(n);
    }

    /// Adds `n` to the count of shared arrays left unchecked.
    pub fn add_unchecked_arrays(&mut self, n: u64) {
        self.counts.unchecked_arrays = self.counts.unchecked_arrays.saturating_add(n);
    }

    /// Adds `n` to the count of accesses whose word's history was cut.
    pub fn add_history_lost(&mut self, n: u64) {
        self.counts.history_lost = self.counts.history_lost.saturating_add(n);
    }

    /// Moves every report of `other` in (de-duplicating) and adds its
    /// counts. Whether the program read `other` carries over: its unread
    /// races are this collection's from now on.
    pub fn merge(&mut self, mut other: RaceReports) {
        match (&self.read, other.read.take()) {
            (_, None) => {}
            (None, Some(mark)) => self.read = Some(mark),
            // Both handed out: the program reads `other` through this one.
            (Some(_), Some(mark)) => mark.0.store(true, Ordering::Relaxed),
        }
        self.counts.duplicates += other.counts.duplicates;
        self.counts.suppressed += other.counts.suppressed;
        self.add_dropped(other.counts.dropped);
        self.add_unchecked_words(other.counts.unchecked_words);
        self.add_unchecked_arrays(other.counts.unchecked_arrays);
        self.add_history_lost(other.counts.history_lost);
        self.add_divergent(std::mem::take(&mut other.divergent));
        for r in std::mem::take(&mut other.reports) {
            self.push(r);
        }
    }

    /// The distinct reports, in the order they were first seen.
    pub fn reports(&self) -> &[RaceReport] {
        self.mark_read();
        &self.reports
    }

    /// An iterator over the distinct reports.
    pub fn iter(&self) -> std::slice::Iter<'_, RaceReport> {
        self.reports().iter()
    }

    /// Number of distinct reports.
    pub fn len(&self) -> usize {
        self.reports().len()
    }

    /// True when there is no report, no divergent barrier and nothing was
    /// dropped (unchecked accesses are no finding: see
    /// [`RaceReports::unchecked_words`]; suppressed reports neither).
    pub fn is_empty(&self) -> bool {
        self.mark_read();
        !self.has_findings()
    }

    /// The divergent barriers a sanitized GPU context found (one per
    /// block): threads of a block that reached different `sync_threads`
    /// calls, or returned instead. A synchronisation returns the first as
    /// [`Error::DivergentBarrier`](crate::Error::DivergentBarrier).
    pub fn divergent_barriers(&self) -> &[DivergentBarrier] {
        self.mark_read();
        &self.divergent
    }

    /// Reports a suppressions file (`VIGIL_SUPPRESSIONS`,
    /// [`ContextBuilder::suppressions`](crate::ContextBuilder::suppressions))
    /// matched: left out of this collection, counted here, in the report
    /// file, and in the process's summary on stderr at exit.
    pub fn suppressed(&self) -> u64 {
        self.counts.suppressed
    }

    /// Word accesses the GPU's same-block check of global memory skipped
    /// because its per-slot table was full (races between threads of one
    /// block on those words can be missed; none is invented).
    pub fn unchecked_words(&self) -> u64 {
        self.counts.unchecked_words
    }

    /// Shared arrays (and dynamic shared views) a sanitized GPU kernel
    /// declared that no shadow covered (past the window shadow's 1 GiB
    /// cap), once per array and block: their accesses went unchecked (the
    /// CPU backend checks them).
    pub fn unchecked_arrays(&self) -> u64 {
        self.counts.unchecked_arrays
    }

    /// Times since the last collection the race engine kept less than
    /// the whole history of a word or of a CTA's knowledge: the shadow's
    /// record pool full (`VIGIL_SHADOW_POOL_RECORDS`: a word then goes
    /// unrecorded for that access, its releases joining the lost
    /// releases), the snapshot arena full or a snapshot coarsened, a head
    /// widened to the system scope, an exit log overwritten. Races with
    /// what was cut can be missed; none is invented.
    ///
    /// ```no_run
    /// # fn main() -> vigil::Result<()> {
    /// let ctx = vigil::Context::builder().sanitize(true).build()?;
    /// // ... launches, then a synchronisation ...
    /// let reports = ctx.take_reports();
    /// if reports.history_lost() > 0 {
    ///     eprintln!("the sanitizer's history was bounded: {reports}");
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn history_lost(&self) -> u64 {
        self.counts.history_lost
    }

    /// How this collection's detection was bounded (all zero when it was
    /// not).
    pub fn bounds(&self) -> DetectionBounds {
        DetectionBounds {
            unchecked_words: self.counts.unchecked_words,
            unchecked_arrays: self.counts.unchecked_arrays,
            history_lost: self.counts.history_lost,
        }
    }

    /// True when this collection's detection was bounded: accesses or
    /// arrays left unchecked, or history lost (see
    /// [`RaceReports::unchecked_words`], [`RaceReports::unchecked_arrays`]
    /// and [`RaceReports::history_lost`]). Not a finding: races can have
    /// been missed, none was invented.
    pub fn detection_bounded(&self) -> bool {
        self.bounds().any()
    }

    /// One clause per way this collection's detection was bounded, for
    /// the text forms.
    pub(crate) fn detection_limits(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.counts.unchecked_words > 0 {
            out.push(format!(
                "{} word access(es) went unchecked against their block's other threads \
                 (the same-block table was full: races there can be missed, none is invented)",
                self.counts.unchecked_words
            ));
        }
        if self.counts.unchecked_arrays > 0 {
            out.push(format!(
                "{} shared array(s) (per block) past the GPU's shadow went unchecked",
                self.counts.unchecked_arrays
            ));
        }
        if self.counts.history_lost > 0 {
            out.push(format!(
                "{} access(es) lost part of their word's history (older accesses evicted, \
                 or the shadow's record pool full, each counted up to 65,536: races with \
                 them can be missed, none is invented; VIGIL_SHADOW_POOL_RECORDS sets the pool)",
                self.counts.history_lost
            ));
        }
        out
    }

    /// Reports that repeated a kept one's kind and locations.
    pub fn duplicates(&self) -> u64 {
        self.counts.duplicates
    }

    /// Reports the runtime could not record (report buffer full).
    pub fn dropped(&self) -> u64 {
        self.counts.dropped
    }

    /// The file form of the collection: one JSON object, the report
    /// file's line (a [`ReportDocument`](crate::ReportDocument); the guide's
    /// *Sanitizer controls* chapter documents the format and its version),
    /// as a context that collected it writes it.
    pub fn to_json(&self) -> String {
        self.mark_read();
        super::report_json::document_json(self, true)
    }

    /// The collection as a SARIF 2.1.0 log (what a `.sarif` report file
    /// holds: a result per race, at the access that found it, with the
    /// earlier access as its related location).
    pub fn to_sarif(&self) -> String {
        self.mark_read();
        super::sarif::to_sarif(self)
    }

    /// A collection back from one line of a JSON report file (or from
    /// [`RaceReports::to_json`]); an error when the line is no report
    /// document, or one of a format version this crate does not read.
    ///
    /// ```
    /// let empty = vigil::RaceReports::new();
    /// let back = vigil::RaceReports::from_json(&empty.to_json()).unwrap();
    /// assert_eq!(back, empty);
    /// ```
    pub fn from_json(line: &str) -> Result<RaceReports, super::report_json::ReportReadError> {
        super::report_json::ReportDocument::from_json(line).map(|d| d.reports)
    }

    /// The counts besides the reports.
    pub(crate) fn counts(&self) -> &ReportCounts {
        &self.counts
    }

    /// The reports without counting as the program's read of them.
    pub(crate) fn entries(&self) -> &[RaceReport] {
        &self.reports
    }

    /// The reports, to complete (allocation sites) before they are handed out.
    pub(crate) fn entries_mut(&mut self) -> &mut [RaceReport] {
        &mut self.reports
    }

    /// A race, an engine error, a divergent barrier or a dropped record:
    /// [`RaceReports::is_empty`] without counting as the program's read.
    pub(crate) fn has_findings(&self) -> bool {
        !self.reports.is_empty() || self.counts.dropped > 0 || !self.divergent.is_empty()
    }

    /// The divergent barriers, without counting as the program's read.
    pub(crate) fn divergent_entries(&self) -> &[DivergentBarrier] {
        &self.divergent
    }

    /// Races counted as reported in the process (kept reports and those
    /// the runtime could not record).
    pub(crate) fn race_count(&self) -> u64 {
        self.reports.len() as u64 + self.counts.dropped
    }

    /// Takes the reports `suppressed` returns `true` for out of the
    /// collection, counted in [`RaceReports::suppressed`].
    pub(crate) fn suppress(&mut self, mut suppressed: impl FnMut(&RaceReport) -> bool) {
        let before = self.reports.len();
        self.reports.retain(|r| !suppressed(r));
        self.counts.suppressed += (before - self.reports.len()) as u64;
    }

    /// Hands the collection to the program: dropped unread from now on,
    /// it is printed at exit.
    pub(crate) fn hand_out(&mut self) {
        if self.has_findings() {
            self.read = Some(Arc::default());
        }
    }

    /// A copy of the findings and counts, not handed to the program.
    pub(crate) fn detached(&self) -> RaceReports {
        let mut copy = self.clone();
        copy.read = None;
        copy
    }

    /// The mark of a collection handed out.
    #[cfg(test)]
    pub(crate) fn read_mark(&self) -> Option<Arc<ReadMark>> {
        self.read.clone()
    }

    /// Notes that the program read the collection.
    fn mark_read(&self) {
        if let Some(mark) = &self.read {
            mark.0.store(true, Ordering::Relaxed);
        }
    }
}

impl FromIterator<RaceReport> for RaceReports {
    fn from_iter<I: IntoIterator<Item = RaceReport>>(iter: I) -> RaceReports {
        let mut r = RaceReports::new();
        iter.into_iter().for_each(|x| {
            r.push(x);
        });
        r
    }
}

impl<'a> IntoIterator for &'a RaceReports {
    type Item = &'a RaceReport;
    type IntoIter = std::slice::Iter<'a, RaceReport>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Display for RaceReports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.mark_read();
        write!(f, "vigil: {} data race report(s)", self.reports.len())?;
        if self.counts.duplicates > 0 {
            write!(f, " ({} duplicate(s) not shown)", self.counts.duplicates)?;
        }
        if self.counts.dropped > 0 {
            write!(
                f,
                "; {} more could not be recorded (report buffer full)",
                self.counts.dropped
            )?;
        }
        for limit in self.detection_limits() {
            write!(f, "; {limit}")?;
        }
        for (i, r) in self.reports.iter().enumerate() {
            write!(f, "\n[{}] {r}", i + 1)?;
        }
        for d in &self.divergent {
            write!(f, "\n{d}")?;
        }
        Ok(())
    }
}
