//! Giving a freed buffer's pool records back.
//!
//! A word keeps its record for as long as its memory lives (records never
//! shrink back into a cell), and a line's reader set is a record too.
//! When the memory is freed nothing can reach them any more, but zeroing
//! the shadow alone would leave them handed out: a long-lived sanitizer
//! (a test binary running hundreds of sanitized kernels in one process)
//! would fill its pool and lose precision. [`reclaim_line`] is the free
//! path's step before the memory is reused: every record a line's cells
//! name goes back, and every cell reads as untouched. It assumes what a
//! free means: no access to the line is in flight or will come.
//! Allocations are whole lines (both backends align them to at least 128
//! bytes), so a free never cuts a line.

use core::sync::atomic::Ordering as MemOrder;

use super::desc::{CellTag, LineRead, ReadKind};
use super::line::{reads_owner, LINE_WORDS};
use super::memory::RaceMemory;
use crate::atomic::AtomicU64Ops;

/// Gives back the records of the line starting at word `word0` and
/// clears its cells. Returns the records given back (chains count once).
pub fn reclaim_line<M: RaceMemory + ?Sized>(mem: &M, word0: u64) -> u32 {
    let pool = mem.pool();
    let mut freed = 0;
    let Some(c0) = mem.cell(word0) else {
        return 0;
    };
    let mut give_back = |index: u32, owner: u64| {
        if let Some(rec) = pool.record(index) {
            if rec.lock(owner) {
                rec.kill();
                pool.free(rec);
                freed += 1;
            }
        }
    };
    let v0 = c0.load(MemOrder::Acquire);
    if CellTag::of(v0) == CellTag::Line {
        if let Some(c1) = mem.cell(word0 + 1) {
            let r = LineRead(c1.load(MemOrder::Acquire));
            if r.kind() == ReadKind::Set {
                give_back(r.payload(), reads_owner(word0));
            }
        }
    } else {
        for k in 0..LINE_WORDS {
            if let Some(c) = mem.cell(word0 + k) {
                let v = c.load(MemOrder::Acquire);
                if CellTag::of(v) == CellTag::Record {
                    give_back(v as u32, word0 + k);
                }
            }
        }
    }
    for k in (0..LINE_WORDS).rev() {
        if let Some(c) = mem.cell(word0 + k) {
            c.store(0, MemOrder::Relaxed);
        }
    }
    freed
}
