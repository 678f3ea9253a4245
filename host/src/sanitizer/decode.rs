//! The one decoder from the engine's raw records
//! ([`vigil_shared::abi::RaceReport`]) to the host's [`RaceReport`]s, for
//! both backends.
//!
//! A raw record holds numbers only: sanitizer thread ids, linear block and
//! thread indices, a launch id, and the addresses of `#[track_caller]`
//! locations in the memory the kernel ran in. A backend supplies what the
//! numbers mean through a [`ReportResolver`]: the CPU sanitizer reads its
//! host memory and launch history; the GPU sanitizer reads the
//! `core::panic::Location`s and file names back from the module's device
//! memory and splits thread ids into device, SM and slot. The earlier
//! access's block, thread and location come from the backend's side table
//! as a [`PriorSite`]; they are trusted only when it names the thread the
//! engine recorded. A record whose access word carries a
//! [`BlockSpace`] is a race between two threads of one block (the GPU's
//! block-race runtime): its space, the shared array, and the other thread
//! of the same block come from the record itself.

use super::report::{
    MemorySpace, PriorAccess, RaceAccess, RaceAllocation, RaceReport, RaceReports, SourceLocation,
};
use crate::types::Dim3;
use vigil_shared::abi::{RaceReport as RawReport, ReportKind};
use vigil_shared::block::{unpack_array, BlockSpace};

/// What a backend's side table knew about the earlier access of a race.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PriorSite {
    /// Address of the access's `core::panic::Location`, in the memory the
    /// resolver reads (0: unknown).
    pub location: u64,
    /// The sanitizer thread that made the entry.
    pub tid: u32,
    /// Linear block index in its grid.
    pub block: u32,
    /// Linear thread index in its block.
    pub thread: u32,
    /// Launch id (as [`ReportResolver::launch`] takes it).
    pub launch: u32,
    /// The SM the access ran on, when the side table keeps it (the CPU
    /// backend's virtual SM); `None` leaves it to [`ReportResolver::place`].
    pub sm: Option<u32>,
}

/// What a launch was: its kernel's name and shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchShape {
    /// The kernel's PTX entry name, or what else ran (`host-to-device copy
    /// on stream #2`).
    pub kernel: String,
    /// Blocks in the grid.
    pub grid: Dim3,
    /// Threads per block.
    pub block: Dim3,
    /// A host-issued copy or fill (checked as a one-thread launch), not a
    /// kernel.
    pub host_issued: bool,
}

/// Where a sanitizer thread runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadPlace {
    /// Device rank.
    pub device: u32,
    /// The SM (a virtual SM on the CPU backend), when the thread id says it.
    pub sm: Option<u32>,
}

/// What a backend tells the decoder about the numbers in its records.
/// The CPU sanitizer implements it over host memory; the GPU sanitizer
/// over the module's device memory and its thread-id layout.
pub trait ReportResolver {
    /// The source location whose `core::panic::Location` is at `location`
    /// (a [`PriorSite::location`]); `None` when it cannot be read.
    fn location(&self, location: u64) -> Option<SourceLocation>;

    /// The `len`-byte UTF-8 file name at `ptr` (an
    /// [`AccessSite`](vigil_shared::abi::AccessSite)'s `file_ptr`).
    fn file_name(&self, ptr: u64, len: u32) -> Option<String>;

    /// The launch with id `launch` (an `AccessSite::kernel_id` or a
    /// [`PriorSite::launch`]), if still known.
    fn launch(&self, launch: u32) -> Option<LaunchShape>;

    /// Where sanitizer thread `tid` runs.
    fn place(&self, tid: u32) -> ThreadPlace;

    /// The allocation `address` falls in.
    fn allocation(&self, address: u64) -> Option<(u64, u64)>;
}

/// An engine-packed access (kind in bits 0..8, scope in 8..16): the one
/// definition, shared with the GPU runtime.
pub use vigil_shared::gpu::unpack_access;

/// The coordinate of linear index `i` in `extent`, x fastest.
pub fn unlinear(i: u64, extent: Dim3) -> Dim3 {
    let (x, y) = (u64::from(extent.x.max(1)), u64::from(extent.y.max(1)));
    Dim3::new((i % x) as u32, (i / x % y) as u32, (i / (x * y)) as u32)
}

/// The name given to a launch the resolver no longer knows.
const UNKNOWN_KERNEL: &str = "<unknown kernel>";

/// Decodes one raw record (`prior`: the side table's entry for the earlier
/// access, if it had one). `None` for a record of an unknown kind (a
/// corrupted or newer record): the caller counts it as dropped.
pub fn decode_report(
    raw: &RawReport,
    prior: Option<&PriorSite>,
    resolver: &dyn ReportResolver,
) -> Option<RaceReport> {
    let kind = raw.report_kind()?;
    let (access, scope) = unpack_access(raw.access);
    let site = &raw.site;
    let launch = resolver.launch(site.kernel_id);
    let (grid, block, host_issued) = launch
        .as_ref()
        .map_or((Dim3::new(1, 1, 1), Dim3::new(1, 1, 1), false), |l| {
            (l.grid, l.block, l.host_issued)
        });
    let here = resolver.place(raw.tid);
    let current = RaceAccess {
        access,
        scope,
        device: here.device,
        smid: here.sm.unwrap_or(raw.sm),
        block: unlinear(u64::from(site.block), grid),
        thread: unlinear(u64::from(site.thread), block),
        location: (site.file_ptr != 0)
            .then(|| resolver.file_name(site.file_ptr, site.file_len))
            .flatten()
            .map(|file| SourceLocation {
                file,
                line: site.line,
                column: site.col,
            }),
        shared_view: None,
        host_issued,
    };
    let in_block = BlockSpace::of(raw.access);
    let allocation = match in_block {
        // A shared array: its size and the offset travel in the record.
        Some(BlockSpace::Shared) => {
            unpack_array(raw.detail).map(|(size, offset)| (raw.address - offset, size))
        }
        _ => resolver.allocation(raw.address),
    };
    let near = prior.map_or(0, |p| p.location);
    let mut prior = decode_prior(raw, kind, prior, resolver);
    prior.same_block = in_block.is_some();
    let mut current = current;
    if in_block == Some(BlockSpace::Shared) {
        current.shared_view = view_site(site.view_site, near, resolver);
        prior.shared_view = view_site(site.prior_view_site, near, resolver);
    }
    Some(RaceReport {
        kind,
        address: raw.address,
        size: raw.size,
        allocation: allocation.map(|(base, size)| RaceAllocation {
            base,
            size,
            offset: raw.address - base,
            site: None,
        }),
        space: match in_block {
            Some(BlockSpace::Shared) => MemorySpace::Shared,
            _ => MemorySpace::Global,
        },
        kernel: launch.map_or_else(|| UNKNOWN_KERNEL.to_owned(), |l| l.kernel),
        current,
        prior,
    })
}

/// Decodes a report buffer's records into de-duplicated [`RaceReports`]:
/// `claimed` is how many records the runtime tried to write (a buffer
/// header's count, which may exceed the records it held); claims that
/// were not written, and records of unknown kinds, count as dropped.
pub fn decode_all<'r>(
    records: impl IntoIterator<Item = (&'r RawReport, Option<&'r PriorSite>)>,
    claimed: u64,
    resolver: &dyn ReportResolver,
) -> RaceReports {
    let mut out = RaceReports::new();
    let mut seen = 0u64;
    for (raw, prior) in records {
        seen += 1;
        match decode_report(raw, prior, resolver) {
            Some(r) => {
                out.push(r);
            }
            None => out.add_dropped(1),
        }
    }
    out.add_dropped(claimed.saturating_sub(seen));
    out
}

/// The allocation site of a shared view whose `Location` address has the
/// low 32 bits `low` (0: unknown), given the address `near` of the
/// earlier access's `Location` in the same module.
fn view_site(low: u32, near: u64, resolver: &dyn ReportResolver) -> Option<SourceLocation> {
    if low == 0 || near == 0 {
        return None;
    }
    resolver.location(vigil_shared::block::near_address(low, near))
}

/// The earlier access: the engine's thread and epoch, and what the side
/// table adds (the location always when it has one; block, thread and
/// kernel only when the entry was made by the recorded thread).
fn decode_prior(
    raw: &RawReport,
    kind: ReportKind,
    site: Option<&PriorSite>,
    resolver: &dyn ReportResolver,
) -> PriorAccess {
    let (access, scope) = unpack_access(raw.prior_access);
    let place = resolver.place(raw.prior_tid);
    let mut prior = PriorAccess {
        access,
        scope,
        tid: raw.prior_tid,
        device: place.device,
        smid: place.sm,
        epoch: raw.prior_epoch,
        block: None,
        thread: None,
        kernel: None,
        location: None,
        shared_view: None,
        host_issued: false,
        same_block: false,
    };
    let Some(site) = site.filter(|_| !kind.is_error()) else {
        return prior;
    };
    if site.location != 0 {
        prior.location = resolver.location(site.location);
    }
    if site.tid == raw.prior_tid {
        if let Some(l) = resolver.launch(site.launch) {
            // A host-issued transfer runs on no SM, whatever the entry or
            // the thread id (a GPU range check's CTA) says.
            prior.smid = match l.host_issued {
                true => None,
                false => site.sm.or(prior.smid),
            };
            prior.block = Some(unlinear(u64::from(site.block), l.grid));
            prior.thread = Some(unlinear(u64::from(site.thread), l.block));
            prior.kernel = Some(l.kernel);
            prior.host_issued = l.host_issued;
        }
    }
    prior
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_shared::abi::AccessSite;
    use vigil_shared::{AccessKind, Scope};

    /// A resolver over a table: locations and files by small ids, two
    /// launches, 4 slots per SM.
    struct Table;

    impl ReportResolver for Table {
        fn location(&self, location: u64) -> Option<SourceLocation> {
            let line = match location {
                7 => 3,
                0x100 => 1,
                0x200 => 2,
                _ => return None,
            };
            Some(SourceLocation {
                file: "k.rs".into(),
                line,
                column: 9,
            })
        }
        fn file_name(&self, ptr: u64, len: u32) -> Option<String> {
            (ptr == 1).then(|| "k.rs"[..len as usize].to_owned())
        }
        fn launch(&self, launch: u32) -> Option<LaunchShape> {
            let shape = |k: &str| LaunchShape {
                kernel: k.into(),
                grid: Dim3::new(4, 2, 1),
                block: Dim3::new(32, 2, 1),
                host_issued: k == "memset on stream #1",
            };
            match launch {
                1 => Some(shape("first")),
                2 => Some(shape("second")),
                3 => Some(shape("memset on stream #1")),
                _ => None,
            }
        }
        fn place(&self, tid: u32) -> ThreadPlace {
            ThreadPlace {
                device: tid / 400,
                sm: Some(tid % 400 / 4),
            }
        }
        fn allocation(&self, address: u64) -> Option<(u64, u64)> {
            (0x1000..0x2000)
                .contains(&address)
                .then_some((0x1000, 0x1000))
        }
    }

    fn raw(kind: ReportKind) -> RawReport {
        RawReport {
            kind: kind as u32,
            size: 4,
            address: 0x1010,
            site: AccessSite {
                file_ptr: 1,
                file_len: 4,
                line: 5,
                col: 6,
                kernel_id: 2,
                block: 5,
                thread: 33,
                ..AccessSite::default()
            },
            tid: 405,
            sm: 999,
            access: RawReport::pack_access(AccessKind::Read, Scope::Block),
            prior_tid: 8,
            prior_epoch: 3,
            prior_access: RawReport::pack_access(AccessKind::AtomicWrite, Scope::Device),
            ..RawReport::default()
        }
    }

    #[test]
    fn both_accesses_decode_through_the_resolver() {
        let site = PriorSite {
            location: 7,
            tid: 8,
            block: 7,
            thread: 1,
            launch: 1,
            sm: Some(5),
        };
        let r = decode_report(&raw(ReportKind::AtomicNonAtomic), Some(&site), &Table).unwrap();
        assert_eq!(r.kind, ReportKind::AtomicNonAtomic);
        assert_eq!(r.kernel, "second");
        assert_eq!(
            r.allocation,
            Some(RaceAllocation {
                base: 0x1000,
                size: 0x1000,
                offset: 0x10,
                site: None,
            })
        );
        let c = &r.current;
        assert_eq!((c.access, c.device, c.smid), (AccessKind::Read, 1, 1));
        assert_eq!(
            (c.block, c.thread),
            (Dim3::new(1, 1, 0), Dim3::new(1, 1, 0))
        );
        assert_eq!(c.location.as_ref().unwrap().to_string(), "k.rs:5:6");
        let p = &r.prior;
        assert_eq!(
            (p.access, p.scope),
            (AccessKind::AtomicWrite, Scope::Device)
        );
        // The side entry's SM wins over the thread id's.
        assert_eq!((p.tid, p.device, p.smid, p.epoch), (8, 0, Some(5), 3));
        assert_eq!(p.block, Some(Dim3::new(3, 1, 0)));
        assert_eq!(p.thread, Some(Dim3::new(1, 0, 0)));
        assert_eq!(p.kernel.as_deref(), Some("first"));
        assert_eq!(p.location.as_ref().unwrap().to_string(), "k.rs:3:9");
    }

    /// A GPU record of a race inside a block: shared space, the array and
    /// offset from the record (not the allocator), the other thread of the
    /// same block, and each access's shared view.
    #[test]
    fn a_race_inside_a_block_names_the_shared_array() {
        let mut r = raw(ReportKind::WriteAfterRead);
        r.address = 0x7000_0048;
        r.access = BlockSpace::Shared.mark(r.access);
        r.detail = vigil_shared::block::pack_array(256, 8);
        r.prior_tid = r.tid;
        r.site.view_site = 0x100;
        r.site.prior_view_site = 0x200;
        let site = PriorSite {
            location: 7,
            tid: r.tid,
            block: 5,
            thread: 2,
            launch: 2,
            sm: None,
        };
        let d = decode_report(&r, Some(&site), &Table).unwrap();
        assert_eq!(d.space, MemorySpace::Shared);
        assert_eq!(
            d.allocation,
            Some(RaceAllocation {
                base: 0x7000_0040,
                size: 256,
                offset: 8,
                site: None,
            })
        );
        assert!(d.prior.same_block);
        assert_eq!(d.prior.thread, Some(Dim3::new(2, 0, 0)));
        assert_eq!(d.prior.block, Some(d.current.block));
        assert!(d.to_string().contains("of the same block"), "{d}");
        let view = |v: &Option<SourceLocation>| v.as_ref().map(|l| l.line);
        assert_eq!(
            (view(&d.current.shared_view), view(&d.prior.shared_view)),
            (Some(1), Some(2))
        );
        let text = d.to_string();
        for site in ["k.rs:1:9", "k.rs:2:9"] {
            let named = format!("through the shared view allocated at {site}");
            assert!(text.contains(&named), "{text}");
        }
        // An unknown view names none.
        r.site.prior_view_site = 0;
        let d = decode_report(&r, Some(&site), &Table).unwrap();
        assert_eq!(view(&d.prior.shared_view), None);
        // Between blocks, as before.
        let g = decode_report(&raw(ReportKind::WriteAfterRead), Some(&site), &Table).unwrap();
        assert_eq!((g.space, g.prior.same_block), (MemorySpace::Global, false));
        assert_eq!(g.current.shared_view, None);
    }

    #[test]
    fn host_issued_accesses_are_named_by_their_transfer() {
        let site = PriorSite {
            location: 7,
            tid: 8,
            launch: 3,
            ..PriorSite::default()
        };
        let mut x = raw(ReportKind::ReadAfterWrite);
        let r = decode_report(&x, Some(&site), &Table).unwrap();
        assert!(r.prior.host_issued && !r.current.host_issued);
        let text = r.to_string();
        assert!(
            text.contains(", the host-issued memset on stream #1 at k.rs:3:9"),
            "{text}"
        );
        assert!(text.contains("in kernel `second`"), "{text}");
        x.site.kernel_id = 3;
        let r = decode_report(&x, None, &Table).unwrap();
        assert!(r.current.host_issued);
        let text = r.to_string();
        assert!(text.contains(" in a memset on stream #1\n"), "{text}");
        assert!(
            text.contains(
                "this access: read by the host-issued memset on stream #1 on device 1 at k.rs:5:6"
            ),
            "{text}"
        );
        assert!(r.to_json().contains("\"host_issued\":true"));
    }

    #[test]
    fn a_side_entry_of_another_thread_gives_only_its_location() {
        let site = PriorSite {
            location: 7,
            tid: 9,
            launch: 1,
            ..PriorSite::default()
        };
        let r = decode_report(&raw(ReportKind::ReadAfterWrite), Some(&site), &Table).unwrap();
        assert!(r.prior.location.is_some());
        assert_eq!(
            (r.prior.block, r.prior.thread, r.prior.kernel),
            (None, None, None)
        );
        let r = decode_report(&raw(ReportKind::ReadAfterWrite), None, &Table).unwrap();
        assert_eq!(r.prior.location, None);
    }

    #[test]
    fn unknown_launches_files_and_kinds_degrade_without_guessing() {
        let mut x = raw(ReportKind::WriteAfterWrite);
        x.site.kernel_id = 77;
        x.site.file_ptr = 0;
        let r = decode_report(&x, None, &Table).unwrap();
        assert_eq!(r.kernel, UNKNOWN_KERNEL);
        assert_eq!(r.current.location, None);
        x.kind = 1234;
        assert_eq!(decode_report(&x, None, &Table), None);
    }

    #[test]
    fn engine_errors_ignore_the_side_table() {
        let site = PriorSite {
            location: 7,
            tid: 8,
            launch: 1,
            ..PriorSite::default()
        };
        let r = decode_report(&raw(ReportKind::ShadowPoolExhausted), Some(&site), &Table).unwrap();
        assert_eq!(r.prior.location, None);
        assert!(r.kind.is_error());
    }

    #[test]
    fn a_buffer_decodes_into_deduplicated_reports_with_drops_counted() {
        let site = PriorSite {
            location: 7,
            tid: 8,
            launch: 1,
            ..PriorSite::default()
        };
        let mut bad = raw(ReportKind::ReadAfterWrite);
        bad.kind = 99;
        let (a, b) = (
            raw(ReportKind::ReadAfterWrite),
            raw(ReportKind::WriteAfterRead),
        );
        let records = [
            (&a, Some(&site)),
            (&a, Some(&site)),
            (&b, None),
            (&bad, None),
        ];
        // 6 claims, 4 records written: 2 never written, 1 unreadable.
        let out = decode_all(records, 6, &Table);
        assert_eq!((out.len(), out.duplicates(), out.dropped()), (2, 1, 3));
        assert_eq!(out.reports()[1].kind, ReportKind::WriteAfterRead);
    }

    #[test]
    fn unlinear_inverts_x_fastest_order() {
        let e = Dim3::new(3, 4, 5);
        let mut i = 0;
        for z in 0..5 {
            for y in 0..4 {
                for x in 0..3 {
                    assert_eq!(unlinear(i, e), Dim3::new(x, y, z));
                    i += 1;
                }
            }
        }
    }
}
