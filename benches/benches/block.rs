//! Same-block table benchmarks, no GPU needed: the records a block keeps
//! of its threads' global accesses (`vigil_shared::block`,
//! `vigil_shared::block_line`), per word accessed, for the pattern of a
//! streaming kernel: each warp writes whole lines and reads them back.
//! Word by word (a record update per lane, as before line entries) and
//! through line entries (one per warp and line).
//!
//! ```text
//! cargo bench -p vigil-bench --bench block
//! ```

use std::sync::atomic::{AtomicU64, Ordering};

use divan::counter::ItemsCount;
use divan::Bencher;
use vigil_shared::block::{BlockRecord, LaneSync, WordRecords};
use vigil_shared::block_line::{LineRecords, LineRun, LineStep, LINE_WORDS};
use vigil_shared::AccessKind;

fn main() {
    divan::main();
}

/// Lines one interval touches (a 1,024-thread block's 32 warps, 8 lines
/// each).
const LINES: usize = 256;

/// Thread `t`'s plain access record.
fn record(t: u32) -> BlockRecord {
    BlockRecord::new(t, false, 0xf, 0, 1, 0x1000)
}

/// Each warp writes its lines and reads them back, lane by lane: 32
/// word-record updates a line and access.
#[divan::bench]
fn warp_lines_word_by_word(bencher: Bencher) {
    let words: Vec<[AtomicU64; 3]> = (0..LINES * LINE_WORDS as usize)
        .map(|_| Default::default())
        .collect();
    let lanes = |_| LaneSync::default();
    bencher
        .counter(ItemsCount::new(2 * words.len()))
        .bench_local(|| {
            for (i, [write, first, second]) in words.iter().enumerate() {
                let r = WordRecords {
                    write,
                    first,
                    second,
                };
                r.clear();
                let (line, lane) = (i / LINE_WORDS as usize, i % LINE_WORDS as usize);
                let me = record(((line % 32) * 32 + lane) as u32);
                for kind in [AccessKind::Write, AccessKind::Read] {
                    r.access(
                        me,
                        kind,
                        || {},
                        lanes,
                        |_| false,
                        |_, _, _| panic!("no race here"),
                    );
                }
            }
        });
}

/// The same through line entries: the warp's leader records each access
/// of a line once.
#[divan::bench]
fn warp_lines_through_line_entries(bencher: Bencher) {
    let lines: Vec<[AtomicU64; 3]> = (0..LINES).map(|_| Default::default()).collect();
    bencher
        .counter(ItemsCount::new(2 * LINES * LINE_WORDS as usize))
        .bench_local(|| {
            for (l, [mode, write, first]) in lines.iter().enumerate() {
                for w in [mode, write, first] {
                    w.store(0, Ordering::Relaxed);
                }
                let line = LineRecords { mode, write, first };
                let thread = (l % 32) as u32 * 32;
                for write in [true, false] {
                    let run = LineRun {
                        record: record(thread),
                        per: 1,
                        write,
                    };
                    let step = line.run_access(run, || {});
                    assert_eq!(step, LineStep::Recorded);
                }
            }
        });
}
