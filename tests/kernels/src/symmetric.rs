//! Symmetric-memory kernels: every rank of a group runs the same kernel
//! with a `Peers` argument (`tests/tests/symmetric_scenarios.rs`). In the
//! hand-offs one rank writes and another reads; the other ranks do
//! nothing. The accesses the suite's verdicts name end in `// @name`
//! markers.

use crate::races::scope;
use vigil_device::prelude::*;
use vigil_device::timer::global_timer;

/// Rank `writer` writes `data` of rank `reader` (one element per thread);
/// rank `reader` reads its own `data` into `out`, with no synchronisation
/// between them.
#[kernel]
pub fn peer_put_get(data: Peers<u32>, out: GlobalSliceMut<u32>, writer: u32, reader: u32) {
    let i = thread_idx().x as usize;
    if data.rank() == writer {
        data.peer(reader).store(i, i as u32 + 1); // @peer_put
    } else if data.rank() == reader {
        out.store(i, data.local().load(i)); // @peer_get
    }
}

/// The same hand-off through a flag: rank `writer` writes rank `reader`'s
/// `data`, then thread 0 sets rank `reader`'s `flag` with a store of
/// scope code `sc` (1 device, 2 system), a release store when `ordered`
/// is not 0; rank `reader`'s thread 0 waits for it with a load of the same
/// scope (acquire when `ordered`), then every thread reads `data` into
/// `out`. With `ordered` 0 the flag is relaxed: the reader reads after
/// the writer wrote, yet nothing orders the two (the racy flag).
#[kernel]
pub fn peer_flag_handoff<S: Sanitizer>(
    data: Peers<u32, S>,
    flag: Peers<u32, S>,
    out: GlobalSliceMut<u32, S>,
    sc: u32,
    ordered: u32,
    writer: u32,
    reader: u32,
) {
    let (set, wait) = match ordered {
        0 => (Ordering::Relaxed, Ordering::Relaxed),
        _ => (Ordering::Release, Ordering::Acquire),
    };
    let i = thread_idx().x as usize;
    if data.rank() == writer {
        data.peer(reader).store(i, i as u32 + 1); // @handoff_put
        sync_threads();
        if i == 0 {
            let f = flag.peer(reader).at(0);
            f.atomic_store(1, set, scope(sc)); // @flag_set
        }
    } else if data.rank() == reader {
        if i == 0 {
            let f = flag.local().at(0);
            while f.atomic_load(wait, scope(sc)) == 0 {} // @flag_wait
        }
        sync_threads();
        out.store(i, data.local().load(i)); // @handoff_get
    }
}

/// Every rank writes its rank into slot `rank` of the next rank's `data`,
/// passes the group barrier (`flags`, generation 1), then copies its own
/// `data` (slots written by the previous rank) into `out`.
#[kernel]
pub fn barrier_exchange<S: Sanitizer>(
    data: Peers<u32, S>,
    flags: Peers<u32, S>,
    out: GlobalSliceMut<u32, S>,
) {
    let i = thread_idx().x as usize;
    let (rank, world) = (data.rank(), data.world());
    if i == 0 {
        data.peer((rank + 1) % world)
            .store(rank as usize, rank + 100);
    }
    sync_threads();
    if i == 0 {
        group_barrier(&flags, 1);
    }
    sync_threads();
    if i < data.len() {
        out.store(i, data.local().load(i));
    }
}

/// A ring all-reduce (sum) of every rank's `data`, in place, pulling from
/// the previous rank: `world - 1` reduce-scatter steps (rank `r` adds the
/// previous rank's chunk `r - s - 1` into its own), then `world - 1`
/// all-gather steps (rank `r` copies the previous rank's finished chunk
/// `r - s`). `data.len()` is `world` chunks, each cut into one slice per
/// block: block `b` of every rank works on slice `b` of each chunk only,
/// so after each step it passes a group barrier with the blocks `b` of the
/// other ranks alone (flags `b * world ..`, `flags.len()` at least
/// `blocks * world`), generations `first_generation + 1` to
/// `first_generation + 2 * (world - 1)`: a later launch over the same
/// flags passes `first_generation` past the last one's.
#[kernel]
pub fn ring_all_reduce<S: Sanitizer>(
    data: Peers<u32, S>,
    flags: Peers<u32, S>,
    first_generation: u32,
) {
    ring_steps(&data, &flags, first_generation, |_, _| {});
}

/// Stamps [`ring_all_reduce_timed`](fn@ring_all_reduce_timed) writes per
/// step and block: the step's start, the end of its data loop, the end of
/// its group barrier.
pub const RING_STAMPS_PER_STEP: usize = 3;

/// [`ring_all_reduce`](fn@ring_all_reduce) with thread 0 of each block
/// stamping the global timer (`vigil_device::timer`) at each step's
/// start, after its data loop and after its group barrier: block `b`'s
/// stamps of step `k` are at `stamps[(b * steps + k) * 3 ..][..3]`, `steps`
/// being `2 * (world - 1)`, so that `stamps.len()` is at least `blocks *
/// steps * 3`. Where a slow launch's time goes, step by step.
#[kernel]
pub fn ring_all_reduce_timed<S: Sanitizer>(
    data: Peers<u32, S>,
    flags: Peers<u32, S>,
    first_generation: u32,
    stamps: GlobalSliceMut<u64, S>,
) {
    let steps = 2 * (data.world() as usize - 1);
    let first = block_idx().x as usize * steps * RING_STAMPS_PER_STEP;
    ring_steps(&data, &flags, first_generation, |step, point| {
        if thread_idx().x == 0 {
            stamps.store(first + step * RING_STAMPS_PER_STEP + point, global_timer());
        }
    });
}

/// The ring's steps (see [`ring_all_reduce`](fn@ring_all_reduce)), calling
/// `mark(step, point)` at each step's start (point 0), after its data
/// loop (1) and after its barrier (2).
#[inline(always)]
fn ring_steps<S: Sanitizer>(
    data: &Peers<u32, S>,
    flags: &Peers<u32, S>,
    first_generation: u32,
    mut mark: impl FnMut(usize, usize),
) {
    let t = thread_idx().x as usize;
    let threads = block_dim().x as usize;
    let (b, blocks) = (block_idx().x as usize, grid_dim().x as usize);
    let (rank, world) = (data.rank(), data.world());
    let chunk = data.len() / world as usize;
    let slice = chunk.div_ceil(blocks);
    let (from, to) = ((b * slice).min(chunk), ((b + 1) * slice).min(chunk));
    let prev = data.peer((rank + world - 1) % world);
    let mine = data.local();
    let mut generation = first_generation;
    let mut step = 0;
    for phase in 0..2 {
        for s in 0..world - 1 {
            mark(step, 0);
            // Reduce-scatter works on chunk r - s - 1, all-gather on r - s.
            let c = ((rank + 2 * world - s - 1 + phase) % world) as usize;
            let mut i = c * chunk + from + t;
            while i < c * chunk + to {
                let v = prev.load(i);
                if phase == 0 {
                    mine.store(i, mine.load(i).wrapping_add(v));
                } else {
                    mine.store(i, v);
                }
                i += threads;
            }
            generation += 1;
            sync_threads();
            mark(step, 1);
            if t == 0 {
                group_barrier_at(flags, b * world as usize, generation);
            }
            sync_threads();
            mark(step, 2);
            step += 1;
        }
    }
}
