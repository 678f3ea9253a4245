//! Race reports as the host hands them to the user (docs/src/design/reports.md):
//! [`RaceReport`] (one race or engine error, decoded: kernel, allocation and
//! offset, both accesses with their source locations) and [`RaceReports`]
//! (a de-duplicated collection, printed readably or written as JSON, and
//! carried by [`Error::Races`](crate::Error::Races)).
//!
//! The kind and access vocabulary is `vigil-shared`'s ([`ReportKind`],
//! [`AccessKind`], [`Scope`]), the same the engine records on both backends.

use super::barrier::DivergentBarrier;
use crate::types::Dim3;
use std::fmt::{self, Write as _};
use vigil_shared::abi::ReportKind;
use vigil_shared::{AccessKind, Scope};

/// A source location (`file:line:column`, from `#[track_caller]`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RaceAllocation {
    /// First byte of the allocation (a buffer's `device_ptr`).
    pub base: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Offset of the racing address from `base`, in bytes.
    pub offset: u64,
}

/// The memory a race is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaceAccess {
    /// What the access did.
    pub access: AccessKind,
    /// Its scope (meaningful for atomics).
    pub scope: Scope,
    /// Device rank of the thread.
    pub device: u32,
    /// (Virtual) SM the block ran on.
    pub smid: u32,
    /// `blockIdx`.
    pub block: Dim3,
    /// `threadIdx`.
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriorAccess {
    /// What the access did.
    pub access: AccessKind,
    /// Its scope (meaningful for atomics).
    pub scope: Scope,
    /// Sanitizer thread (on a GPU, one per resident CTA slot of an SM; on
    /// the CPU backend, a clock slot a block held).
    pub tid: u32,
    /// Device rank of that thread.
    pub device: u32,
    /// SM of that thread, when its id says it (a GPU); `None` on the CPU
    /// backend, where a clock slot is not tied to a virtual SM.
    pub smid: Option<u32>,
    /// The thread's epoch at the access (for a race inside a block
    /// ([`MemorySpace::Shared`], or two threads of one block in global
    /// memory), the barrier interval: barriers its thread had arrived at).
    pub epoch: u32,
    /// `blockIdx`, when known.
    pub block: Option<Dim3>,
    /// `threadIdx`, when known.
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
    /// race inside a block): `tid` is then the block's clock slot and
    /// `epoch` its barrier interval.
    pub same_block: bool,
}

/// One race (or engine error) found by the sanitizer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaceReport {
    /// What kind of race (or, for [`ReportKind::is_error`] kinds, which
    /// engine limit was hit).
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

fn access_name(a: AccessKind) -> &'static str {
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

/// The de-duplication key of a report: same kind and location pair.
type DedupKey = (ReportKind, Option<SourceLocation>, Option<SourceLocation>);

fn key_of(r: &RaceReport) -> DedupKey {
    (r.kind, r.current.location.clone(), r.prior.location.clone())
}

/// A de-duplicated collection of reports: the first report of each
/// (kind, current location, earlier location) is kept, later ones are
/// counted in [`RaceReports::duplicates`]; reports the runtime could not
/// record (a full buffer) are counted in [`RaceReports::dropped`].
///
/// Beside the races it carries what else a collection found: divergent
/// barriers of a sanitized GPU context ([`RaceReports::divergent_barriers`];
/// the CPU backend fails the launch with them instead), and accesses the
/// GPU's same-block check could not follow ([`RaceReports::unchecked_words`])
/// and shared arrays it could not check ([`RaceReports::unchecked_arrays`]),
/// and accesses whose word's history the shadow had to cut
/// ([`RaceReports::history_lost`]): lost detection, never a race.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaceReports {
    reports: Vec<RaceReport>,
    duplicates: u64,
    dropped: u64,
    divergent: Vec<DivergentBarrier>,
    unchecked_words: u64,
    unchecked_arrays: u64,
    history_lost: u64,
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
            self.duplicates += 1;
            false
        } else {
            self.reports.push(report);
            true
        }
    }

    /// Adds `n` to the count of reports the runtime had to drop.
    pub fn add_dropped(&mut self, n: u64) {
        self.dropped = self.dropped.saturating_add(n);
    }

    /// Adds a divergent barrier (a GPU block's).
    pub fn push_divergent_barrier(&mut self, d: DivergentBarrier) {
        self.divergent.push(d);
    }

    /// Adds `n` to the count of same-block global accesses left unchecked.
    pub fn add_unchecked_words(&mut self, n: u64) {
        self.unchecked_words = self.unchecked_words.saturating_add(n);
    }

    /// Adds `n` to the count of shared arrays left unchecked.
    pub fn add_unchecked_arrays(&mut self, n: u64) {
        self.unchecked_arrays = self.unchecked_arrays.saturating_add(n);
    }

    /// Adds `n` to the count of accesses whose word's history was cut.
    pub fn add_history_lost(&mut self, n: u64) {
        self.history_lost = self.history_lost.saturating_add(n);
    }

    /// Moves every report of `other` in (de-duplicating) and adds its counts.
    pub fn merge(&mut self, other: RaceReports) {
        self.duplicates += other.duplicates;
        self.add_dropped(other.dropped);
        self.add_unchecked_words(other.unchecked_words);
        self.add_unchecked_arrays(other.unchecked_arrays);
        self.add_history_lost(other.history_lost);
        self.divergent.extend(other.divergent);
        for r in other.reports {
            self.push(r);
        }
    }

    /// The distinct reports, in the order they were first seen.
    pub fn reports(&self) -> &[RaceReport] {
        &self.reports
    }

    /// An iterator over the distinct reports.
    pub fn iter(&self) -> std::slice::Iter<'_, RaceReport> {
        self.reports.iter()
    }

    /// Number of distinct reports.
    pub fn len(&self) -> usize {
        self.reports.len()
    }

    /// True when there is no report, no divergent barrier and nothing was
    /// dropped (unchecked accesses are no finding: see
    /// [`RaceReports::unchecked_words`]).
    pub fn is_empty(&self) -> bool {
        self.reports.is_empty() && self.dropped == 0 && self.divergent.is_empty()
    }

    /// The divergent barriers a sanitized GPU context found (one per
    /// block): threads of a block that reached different `sync_threads`
    /// calls, or returned instead. A synchronisation returns the first as
    /// [`Error::DivergentBarrier`](crate::Error::DivergentBarrier).
    pub fn divergent_barriers(&self) -> &[DivergentBarrier] {
        &self.divergent
    }

    /// Word accesses the GPU's same-block check of global memory skipped
    /// because its per-slot table was full (races between threads of one
    /// block on those words can be missed; none is invented).
    pub fn unchecked_words(&self) -> u64 {
        self.unchecked_words
    }

    /// Shared arrays (and dynamic shared views) a sanitized GPU kernel
    /// declared that no shadow covered (past the window shadow's 1 GiB
    /// cap), once per array and block: their accesses went unchecked (the
    /// CPU backend checks them).
    pub fn unchecked_arrays(&self) -> u64 {
        self.unchecked_arrays
    }

    /// Accesses whose word's history the race engine had to cut since the
    /// last collection: an older access evicted (a GPU word keeps at most 8
    /// unordered ones), release heads merged, or, with the shadow's record
    /// pool full (`VIGIL_SHADOW_POOL_RECORDS`), a word kept with only its
    /// newest write and read. Races with the accesses dropped can be
    /// missed; none is invented. Counted per device up to 65,536 of each
    /// kind per collection (`vigil_shared::abi::PoolHeader::COUNT_CAP`): a
    /// kernel whose every block reads the same words (a GEMM's tiles)
    /// reaches it at once.
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
        self.history_lost
    }

    /// True when this collection's detection was bounded: accesses or
    /// arrays left unchecked, or history lost (see
    /// [`RaceReports::unchecked_words`], [`RaceReports::unchecked_arrays`]
    /// and [`RaceReports::history_lost`]). Not a finding: races can have
    /// been missed, none was invented.
    pub fn detection_bounded(&self) -> bool {
        self.unchecked_words > 0 || self.unchecked_arrays > 0 || self.history_lost > 0
    }

    /// One clause per way this collection's detection was bounded, for
    /// the text forms.
    pub(crate) fn detection_limits(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.unchecked_words > 0 {
            out.push(format!(
                "{} word access(es) went unchecked against their block's other threads \
                 (the same-block table was full: races there can be missed, none is invented)",
                self.unchecked_words
            ));
        }
        if self.unchecked_arrays > 0 {
            out.push(format!(
                "{} shared array(s) (per block) past the GPU's shadow went unchecked",
                self.unchecked_arrays
            ));
        }
        if self.history_lost > 0 {
            out.push(format!(
                "{} access(es) lost part of their word's history (older accesses evicted, \
                 or the shadow's record pool full, each counted up to 65,536: races with \
                 them can be missed, none is invented; VIGIL_SHADOW_POOL_RECORDS sets the pool)",
                self.history_lost
            ));
        }
        out
    }

    /// Reports that repeated a kept one's kind and locations.
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// Reports the runtime could not record (report buffer full).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The collection as one JSON object:
    /// `{"reports": [...], "duplicates": n, "dropped": n}`.
    pub fn to_json(&self) -> String {
        let mut s = String::from("{\"reports\":[");
        for (i, r) in self.reports.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            r.write_json(&mut s);
        }
        s.push_str("],\"divergent_barriers\":[");
        for (i, d) in self.divergent.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str("{\"block\":");
            let b = d.block;
            let _ = write!(s, "[{},{},{}],\"barrier\":", b.x, b.y, b.z);
            json_str(&mut s, &d.barrier);
            s.push_str(",\"detail\":");
            json_str(&mut s, &d.detail);
            s.push('}');
        }
        let _ = write!(
            s,
            "],\"duplicates\":{},\"dropped\":{},\"unchecked_words\":{},\"unchecked_arrays\":{},\"history_lost\":{}}}",
            self.duplicates,
            self.dropped,
            self.unchecked_words,
            self.unchecked_arrays,
            self.history_lost
        );
        s
    }

    /// Appends [`RaceReports::to_json`] and a newline to the file at
    /// `path` (created if missing): one line per call, so a file written
    /// over a run is JSON Lines.
    pub fn append_json(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write as _;
        let mut line = self.to_json();
        line.push('\n');
        // One write call per line: appends from several contexts or
        // processes do not interleave within a line.
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?
            .write_all(line.as_bytes())
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
        self.reports.iter()
    }
}

impl fmt::Display for RaceReports {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vigil: {} data race report(s)", self.reports.len())?;
        if self.duplicates > 0 {
            write!(f, " ({} duplicate(s) not shown)", self.duplicates)?;
        }
        if self.dropped > 0 {
            write!(
                f,
                "; {} more could not be recorded (report buffer full)",
                self.dropped
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

/// Appends `s` as a JSON string literal.
fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_dim(out: &mut String, d: Option<Dim3>) {
    match d {
        Some(d) => {
            let _ = write!(out, "[{},{},{}]", d.x, d.y, d.z);
        }
        None => out.push_str("null"),
    }
}

fn json_loc(out: &mut String, l: &Option<SourceLocation>) {
    match l {
        Some(l) => {
            out.push_str("{\"file\":");
            json_str(out, &l.file);
            let _ = write!(out, ",\"line\":{},\"column\":{}}}", l.line, l.column);
        }
        None => out.push_str("null"),
    }
}

impl RaceReport {
    /// The report as one JSON object (field names as in the struct; kinds
    /// and accesses as their readable names, addresses as numbers).
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        self.write_json(&mut s);
        s
    }

    fn write_json(&self, s: &mut String) {
        s.push_str("{\"kind\":");
        json_str(s, kind_name(self.kind));
        let _ = write!(
            s,
            ",\"address\":{},\"size\":{},\"allocation\":",
            self.address, self.size
        );
        match &self.allocation {
            Some(a) => {
                let _ = write!(
                    s,
                    "{{\"base\":{},\"size\":{},\"offset\":{}}}",
                    a.base, a.size, a.offset
                );
            }
            None => s.push_str("null"),
        }
        s.push_str(",\"space\":");
        json_str(s, self.space.name());
        s.push_str(",\"kernel\":");
        json_str(s, &self.kernel);
        let c = &self.current;
        s.push_str(",\"current\":{\"access\":");
        json_str(s, access_name(c.access));
        s.push_str(",\"scope\":");
        json_str(s, c.scope.ptx());
        let _ = write!(s, ",\"device\":{},\"smid\":{},\"block\":", c.device, c.smid);
        json_dim(s, Some(c.block));
        s.push_str(",\"thread\":");
        json_dim(s, Some(c.thread));
        s.push_str(",\"location\":");
        json_loc(s, &c.location);
        s.push_str(",\"shared_view\":");
        json_loc(s, &c.shared_view);
        let _ = write!(s, ",\"host_issued\":{}", c.host_issued);
        let p = &self.prior;
        s.push_str("},\"prior\":{\"access\":");
        json_str(s, access_name(p.access));
        s.push_str(",\"scope\":");
        json_str(s, p.scope.ptx());
        let _ = write!(s, ",\"tid\":{},\"device\":{},\"smid\":", p.tid, p.device);
        match p.smid {
            Some(sm) => {
                let _ = write!(s, "{sm}");
            }
            None => s.push_str("null"),
        }
        let _ = write!(s, ",\"epoch\":{},\"block\":", p.epoch);
        json_dim(s, p.block);
        s.push_str(",\"thread\":");
        json_dim(s, p.thread);
        s.push_str(",\"kernel\":");
        match &p.kernel {
            Some(k) => json_str(s, k),
            None => s.push_str("null"),
        }
        s.push_str(",\"location\":");
        json_loc(s, &p.location);
        s.push_str(",\"shared_view\":");
        json_loc(s, &p.shared_view);
        let _ = write!(
            s,
            ",\"host_issued\":{},\"same_block\":{}}}}}",
            p.host_issued, p.same_block
        );
    }
}
