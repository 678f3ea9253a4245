//! Which clocks a sanitized GPU launch acquires
//! (docs/src/design/ordering.md), as host bookkeeping over device addresses.
//!
//! Each stream owns a [`StreamClocks`] block: a ring of three kernel exit
//! clocks (the device writes them) and a join list its next kernel
//! acquires at CTA entry (the host writes it, in stream order, before the
//! launch). Kernels on one stream are ordered through the ring. Everything
//! else is a *source*: the exit clock of another stream's latest kernel,
//! named by the address of its ring slot. An event records its stream's
//! sources; a wait adds the event's sources to the waiting stream's list;
//! a host synchronisation folds the synchronised work's sources into a
//! new *host clock* (their element-wise maximum with the previous one,
//! which the caller computes into a fresh block: that work is done, so its
//! clocks are final) and puts that one clock in every stream's list, and
//! in the list a stream not yet launched on starts with. So host synchronisations never fill a join
//! list, however many streams a process makes. A ring slot only grows
//! (each later kernel of its stream is ordered after the earlier ones),
//! and so does the host clock, so a source read later never orders less
//! than it did when it was taken.
//!
//! Host clocks are per context (*owner*): a context's host waits order
//! its own later launches only. Contexts sharing a device (parallel tests)
//! wait for the whole device in turn, and one device-wide host clock let
//! one context's wait order another's unsynchronised streams, hiding their
//! races.

use std::collections::HashMap;

use vigil_shared::abi::STREAM_RING_SLOTS;
use vigil_shared::gpu::{StreamClocks, MAX_JOINS};

use crate::types::{EventId, StreamId};

/// One clock to join: the exit clock of `stream`'s kernel in ring slot
/// `addr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Source {
    stream: StreamId,
    /// Device address of the clock (`num_threads` u32s).
    pub addr: u64,
}

/// The pseudo-stream of `owner`'s host clock (above every stream id, and
/// one per owner, so that merging two contexts' sources keeps both).
fn host_of(owner: u64) -> StreamId {
    StreamId(u64::MAX - owner)
}

/// True for a host clock's pseudo-stream ([`host_of`]).
fn is_host(stream: StreamId) -> bool {
    stream.0 > u64::MAX / 2
}

/// Merges `add` into `into`: one source per stream (the newest), and at
/// most [`MAX_JOINS`]. Past that the oldest is dropped, which loses an
/// ordering (a later access may be reported against work it is ordered
/// after); only event waits can get there (host synchronisations fold
/// into one source), from more than [`MAX_JOINS`] streams a stream waits
/// on without launching in between, and it is counted ([`ClockBook::dropped_joins`]).
fn merge(into: &mut Vec<Source>, add: &[Source]) -> usize {
    for s in add {
        into.retain(|o| o.stream != s.stream);
        into.push(*s);
    }
    let extra = into.len().saturating_sub(MAX_JOINS);
    into.drain(..extra);
    extra
}

#[derive(Debug)]
struct StreamBook {
    /// The context the stream belongs to.
    owner: u64,
    /// Device address of the stream's `StreamClocks` (0 until its first
    /// sanitized launch allocates them).
    base: u64,
    /// Device address of the owning context's report buffer, which
    /// every header written names.
    reports: u64,
    /// Kernels launched so far.
    kernels: u32,
    /// `kernels` when the host clock last folded this stream's clock.
    folded: u32,
    /// Sources the next kernel joins.
    pending: Vec<Source>,
    /// The join list the device copy holds now.
    written: Vec<u64>,
}

/// What a launch needs: its stream clocks, its kernel number and, when
/// the device copy must change, the join list header to write first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LaunchPlan {
    /// Device address of the stream's `StreamClocks`.
    pub stream_clocks: u64,
    /// The kernel's number on its stream (from 1).
    pub kernel: u32,
    /// The header to copy to `stream_clocks` before the launch.
    pub write: Option<StreamClocks>,
}

/// The clock bookkeeping of one device.
#[derive(Debug)]
pub(crate) struct ClockBook {
    num_threads: u32,
    streams: HashMap<StreamId, StreamBook>,
    events: HashMap<EventId, Vec<Source>>,
    /// What a stream's first kernel joins, per owner: the owner's host
    /// clock, once a host synchronisation gave it content.
    host: HashMap<u64, Vec<Source>>,
    /// Sources dropped from full join lists (see [`merge`]).
    dropped: u64,
}

impl ClockBook {
    /// Bookkeeping for clocks of `num_threads` entries.
    pub fn new(num_threads: u32) -> ClockBook {
        ClockBook {
            num_threads,
            streams: HashMap::new(),
            events: HashMap::new(),
            host: HashMap::new(),
            dropped: 0,
        }
    }

    /// Sources dropped from full join lists so far.
    pub fn dropped_joins(&self) -> u64 {
        self.dropped
    }

    /// True once `stream` has its device clocks.
    pub fn has_stream(&self, stream: StreamId) -> bool {
        self.streams.get(&stream).is_some_and(|s| s.base != 0)
    }

    /// `owner`'s host sources.
    fn host(&self, owner: u64) -> Vec<Source> {
        self.host.get(&owner).cloned().unwrap_or_default()
    }

    /// `owner` is gone: its host sources go (its streams' books stay, as
    /// their clocks may still be read by kernels in flight).
    pub fn forget_owner(&mut self, owner: u64) {
        self.host.remove(&owner);
    }

    /// `stream`'s book, made on first mention (a wait or a record may come
    /// before its first launch): it starts with `owner`'s host
    /// synchronisations.
    fn book(&mut self, stream: StreamId, owner: u64) -> &mut StreamBook {
        let host = &self.host;
        self.streams.entry(stream).or_insert_with(|| StreamBook {
            owner,
            base: 0,
            reports: 0,
            kernels: 0,
            folded: 0,
            pending: host.get(&owner).cloned().unwrap_or_default(),
            written: Vec::new(),
        })
    }

    /// Gives `owner`'s `stream` its `StreamClocks` at `base`, which hold
    /// [`ClockBook::first_header`] (`reports`: the owner's report buffer).
    pub fn add_stream(&mut self, stream: StreamId, owner: u64, base: u64, reports: u64) {
        let s = self.book(stream, owner);
        s.base = base;
        s.reports = reports;
    }

    /// What a stream's clocks hold before its first launch: no joins, the
    /// report buffer at `reports`.
    pub fn first_header(reports: u64) -> StreamClocks {
        StreamClocks {
            join_count: 0,
            reserved: 0,
            reports,
            joins: [0; MAX_JOINS],
        }
    }

    /// The sources a point at the current end of `owner`'s `stream`
    /// carries.
    fn sources(&self, stream: StreamId, owner: u64) -> Vec<Source> {
        let Some(s) = self.streams.get(&stream) else {
            return self.host(owner);
        };
        let mut out = s.pending.clone();
        if s.kernels > 0 {
            let slot = s.kernels % STREAM_RING_SLOTS;
            let addr = StreamClocks::ring_slot(s.base, self.num_threads, slot);
            merge(&mut out, &[Source { stream, addr }]);
        }
        out
    }

    /// A kernel launched on `stream` (added with [`ClockBook::add_stream`]).
    pub fn launch(&mut self, stream: StreamId) -> Option<LaunchPlan> {
        let s = self.streams.get_mut(&stream).filter(|s| s.base != 0)?;
        s.kernels += 1;
        let joins: Vec<u64> = s.pending.drain(..).map(|j| j.addr).collect();
        let write = (joins != s.written).then(|| {
            let mut h = Self::first_header(s.reports);
            h.join_count = joins.len() as u32;
            h.joins[..joins.len()].copy_from_slice(&joins);
            h
        });
        s.written = joins;
        Some(LaunchPlan {
            stream_clocks: s.base,
            kernel: s.kernels,
            write,
        })
    }

    /// `event` recorded at the current end of `owner`'s `stream`.
    pub fn record(&mut self, event: EventId, stream: StreamId, owner: u64) {
        let sources = self.sources(stream, owner);
        self.events.insert(event, sources);
    }

    /// `owner`'s `stream`'s later work waits for `event`.
    pub fn wait(&mut self, stream: StreamId, event: EventId, owner: u64) {
        let sources = self.events.get(&event).cloned().unwrap_or_default();
        self.dropped += merge(&mut self.book(stream, owner).pending, &sources) as u64;
    }

    /// The clocks the host waited for (their kernels are done) that the
    /// host clock must fold: `sources` less the host clock itself.
    fn to_fold(sources: Vec<Source>) -> Vec<Source> {
        sources.into_iter().filter(|s| !is_host(s.stream)).collect()
    }

    /// `owner`'s host waited for `sources`, but some of their kernels
    /// have not run yet (transfer checks queued until a module brings their
    /// entry): instead of folding them, every later launch of `owner` joins
    /// their ring slots (read when it runs, by when the queued checks have
    /// run).
    pub fn keep_sources(&mut self, owner: u64, sources: &[Source]) {
        self.dropped += merge(self.host.entry(owner).or_default(), sources) as u64;
        for s in self.streams.values_mut().filter(|s| s.owner == owner) {
            self.dropped += merge(&mut s.pending, sources) as u64;
        }
    }

    /// The caller folded `folded` (from a `sync_*` of `owner`) with
    /// `owner`'s host clock into a new one at `addr`: every later launch of
    /// `owner` joins it. A new block each time, never the old one
    /// rewritten: a kernel launched before the wait but running after it
    /// still reads the host clock it was launched with, so it is not
    /// ordered after what it is not.
    pub fn adopt_host_clock(&mut self, owner: u64, addr: u64, folded: &[Source]) {
        let host = Source {
            stream: host_of(owner),
            addr,
        };
        // Kept sources not folded this time stay (see `keep_sources`).
        let own = self.host.entry(owner).or_default();
        own.retain(|p| !is_host(p.stream) && !folded.contains(p));
        own.push(host);
        for s in self.streams.values_mut().filter(|s| s.owner == owner) {
            s.pending.retain(|p| !folded.contains(p));
            merge(&mut s.pending, &[host]);
        }
        // An event's sources are joined only by work issued after this
        // wait, which the host clock orders after them anyway.
        for e in self.events.values_mut() {
            if e.iter().any(|p| folded.contains(p)) {
                e.retain(|p| !folded.contains(p));
                merge(e, &[host]);
            }
        }
    }

    /// The sources at the end of `owner`'s `stream` the host clock does
    /// not hold yet (its latest kernel's, when one ran since the last
    /// fold).
    fn unfolded(&mut self, stream: StreamId, owner: u64) -> Vec<Source> {
        let sources = self.sources(stream, owner);
        match self.streams.get_mut(&stream) {
            Some(s) => {
                let ring_done = s.kernels == s.folded;
                s.folded = s.kernels;
                let ring = (s.kernels > 0).then(|| {
                    StreamClocks::ring_slot(s.base, self.num_threads, s.kernels % STREAM_RING_SLOTS)
                });
                sources
                    .into_iter()
                    .filter(|p| !(ring_done && Some(p.addr) == ring && p.stream == stream))
                    .collect()
            }
            None => sources,
        }
    }

    /// `owner`'s host waited for everything on `stream`; returns the
    /// clocks to fold into a new host clock (see
    /// [`ClockBook::adopt_host_clock`]).
    #[must_use]
    pub fn sync_stream(&mut self, stream: StreamId, owner: u64) -> Vec<Source> {
        Self::to_fold(self.unfolded(stream, owner))
    }

    /// The host waited for `event`; returns the clocks to fold.
    #[must_use]
    pub fn sync_event(&mut self, event: EventId) -> Vec<Source> {
        Self::to_fold(self.events.get(&event).cloned().unwrap_or_default())
    }

    /// `owner`'s host waited for the whole device; returns the clocks of
    /// `owner`'s streams to fold (one per stream that ran a kernel since
    /// the last fold). Other contexts' streams are not `owner`'s to order
    /// after: its program never synchronised with them.
    #[must_use]
    pub fn sync_all(&mut self, owner: u64) -> Vec<Source> {
        let mut all = Vec::new();
        let ids: Vec<StreamId> = (self.streams.iter())
            .filter(|(_, s)| s.owner == owner)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            for p in self.unfolded(id, owner) {
                if !all.contains(&p) {
                    all.push(p);
                }
            }
        }
        Self::to_fold(all)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: u32 = 4;
    const A: StreamId = StreamId(1);
    const B: StreamId = StreamId(2);
    const E: EventId = EventId(9);

    const HOST_CLOCK: u64 = 0xf000;
    const REPORTS: u64 = 0xe000;
    /// The context that owns the streams.
    const O: u64 = 1;

    fn book() -> ClockBook {
        let mut b = ClockBook::new(N);
        b.add_stream(A, O, 0x1000, REPORTS);
        b.add_stream(B, O, 0x9000, REPORTS);
        b
    }

    fn joins(p: &LaunchPlan) -> Option<Vec<u64>> {
        p.write.map(|h| {
            assert_eq!(h.reports, REPORTS, "every header names the report buffer");
            h.joins[..h.join_count as usize].to_vec()
        })
    }

    fn slot(base: u64, k: u32) -> u64 {
        StreamClocks::ring_slot(base, N, k % STREAM_RING_SLOTS)
    }

    #[test]
    fn kernels_on_one_stream_count_up_and_join_nothing_else() {
        let mut b = book();
        let p1 = b.launch(A).unwrap();
        let p2 = b.launch(A).unwrap();
        assert_eq!((p1.kernel, p2.kernel), (1, 2));
        assert_eq!(p1.write, None, "the zeroed join list is already right");
        assert_eq!(p2.write, None);
        assert_eq!(b.launch(B).unwrap().kernel, 1);
    }

    #[test]
    fn an_event_carries_the_recording_streams_clock_once() {
        let mut b = book();
        b.launch(A).unwrap();
        b.record(E, A, O);
        b.launch(A).unwrap(); // after the record: not carried
        b.wait(B, E, O);
        let p = b.launch(B).unwrap();
        assert_eq!(joins(&p), Some(vec![slot(0x1000, 1)]));
        // The next kernel on B is ordered through B's ring: the list is cleared.
        let q = b.launch(B).unwrap();
        assert_eq!(joins(&q), Some(vec![]));
        assert_eq!(b.launch(B).unwrap().write, None);
    }

    #[test]
    fn events_are_transitive_through_a_stream_without_kernels() {
        let mut b = book();
        let c = StreamId(3);
        b.add_stream(c, O, 0x5000, REPORTS);
        b.launch(A).unwrap();
        b.record(E, A, O);
        b.wait(B, E, O);
        b.record(EventId(10), B, O);
        b.wait(c, EventId(10), O);
        assert_eq!(joins(&b.launch(c).unwrap()), Some(vec![slot(0x1000, 1)]));
    }

    /// What a host wait folds, as addresses, sorted; adopts a new host
    /// clock at `next` for it (when there is anything to fold).
    fn fold(b: &mut ClockBook, sources: Vec<Source>, next: u64) -> Vec<u64> {
        let mut addrs: Vec<u64> = sources.iter().map(|s| s.addr).collect();
        addrs.sort();
        if !sources.is_empty() {
            b.adopt_host_clock(O, next, &sources);
        }
        addrs
    }

    #[test]
    fn host_sync_orders_every_stream_even_new_ones() {
        let mut b = book();
        b.launch(A).unwrap();
        b.launch(A).unwrap();
        let f = b.sync_stream(A, O);
        assert_eq!(fold(&mut b, f, HOST_CLOCK), vec![slot(0x1000, 2)]);
        assert_eq!(joins(&b.launch(B).unwrap()), Some(vec![HOST_CLOCK]));
        b.add_stream(StreamId(7), O, 0x7000, REPORTS);
        assert_eq!(
            joins(&b.launch(StreamId(7)).unwrap()),
            Some(vec![HOST_CLOCK])
        );
        // A synchronisation of everything folds each stream's newest exit
        // clock that the host clock does not hold yet (A's third kernel,
        // B's and 7's first) into a new host clock, which every later
        // launch joins instead of the old one.
        b.launch(A).unwrap();
        let f = b.sync_all(O);
        assert_eq!(
            fold(&mut b, f, HOST_CLOCK + 0x100),
            vec![slot(0x1000, 3), slot(0x7000, 1), slot(0x9000, 1)]
        );
        assert_eq!(joins(&b.launch(B).unwrap()), Some(vec![HOST_CLOCK + 0x100]));
        assert_eq!(joins(&b.launch(A).unwrap()), Some(vec![HOST_CLOCK + 0x100]));
        // Nothing ran since on 7: a second sync folds only A and B.
        let f = b.sync_all(O);
        assert_eq!(
            fold(&mut b, f, HOST_CLOCK + 0x200),
            vec![slot(0x1000, 4), slot(0x9000, 2)]
        );
        assert!(b.sync_all(O).is_empty(), "nothing new to fold");
    }

    #[test]
    fn a_wait_before_the_streams_first_launch_is_kept() {
        let mut b = ClockBook::new(N);
        b.add_stream(A, O, 0x1000, REPORTS);
        b.launch(A).unwrap();
        b.record(E, A, O);
        b.wait(B, E, O);
        assert!(!b.has_stream(B));
        b.add_stream(B, O, 0x9000, REPORTS);
        assert_eq!(joins(&b.launch(B).unwrap()), Some(vec![slot(0x1000, 1)]));
    }

    /// Host synchronisations of any number of streams never fill a join
    /// list: they all fold into the host clock.
    #[test]
    fn many_synchronised_streams_leave_one_host_source() {
        let mut b = ClockBook::new(N);
        for i in 0..4 * MAX_JOINS as u64 {
            let s = StreamId(100 + i);
            b.add_stream(s, O, 0x10_0000 * (i + 1), REPORTS);
            b.launch(s).unwrap();
            let f = b.sync_all(O);
            assert_eq!(f.len(), 1, "only the new stream's kernel to fold");
            fold(&mut b, f, HOST_CLOCK + i);
        }
        let last = HOST_CLOCK + 4 * MAX_JOINS as u64 - 1;
        b.add_stream(A, O, 0x1000, REPORTS);
        b.launch(A).unwrap();
        b.record(E, A, O);
        b.wait(B, E, O);
        b.add_stream(B, O, 0x9000, REPORTS);
        let mut j = joins(&b.launch(B).unwrap()).unwrap();
        j.sort();
        assert_eq!(j, vec![slot(0x1000, 1), last]);
        assert_eq!(b.dropped_joins(), 0);
    }

    /// Sources kept unfolded (their kernels queued) reach later launches
    /// as ring slots, beside the host clock.
    #[test]
    fn kept_sources_are_joined_as_ring_slots() {
        let mut b = book();
        b.launch(A).unwrap();
        let f = b.sync_stream(A, O);
        fold(&mut b, f, HOST_CLOCK);
        b.launch(A).unwrap();
        let kept = b.sync_stream(A, O);
        b.keep_sources(O, &kept);
        let mut j = joins(&b.launch(B).unwrap()).unwrap();
        j.sort();
        assert_eq!(j, vec![slot(0x1000, 2), HOST_CLOCK]);
    }

    /// An event list past `MAX_JOINS` drops its oldest source, counted.
    #[test]
    fn a_full_event_join_list_is_counted() {
        let mut b = ClockBook::new(N);
        b.add_stream(B, O, 0x9000, REPORTS);
        for i in 0..MAX_JOINS as u64 + 3 {
            let s = StreamId(100 + i);
            b.add_stream(s, O, 0x10_0000 * (i + 1), REPORTS);
            b.launch(s).unwrap();
            b.record(EventId(1000 + i), s, O);
            b.wait(B, EventId(1000 + i), O);
        }
        assert_eq!(joins(&b.launch(B).unwrap()).unwrap().len(), MAX_JOINS);
        assert_eq!(b.dropped_joins(), 3);
    }

    /// Two contexts on one device (parallel tests): one's whole-device
    /// wait folds its own streams only, and orders its own later launches
    /// only; the other's unsynchronised streams stay unordered, and its
    /// first launches join nothing of the first's host clock. An event of
    /// one context waited on by the other still orders (and keeps the
    /// waiter's own host clock).
    #[test]
    fn a_contexts_host_waits_order_only_its_own_launches() {
        const P: u64 = 2;
        let (c, d) = (StreamId(3), StreamId(4));
        let mut b = book();
        b.add_stream(c, P, 0x5000, REPORTS + 0x100);
        b.launch(A).unwrap();
        b.launch(c).unwrap();
        let f = b.sync_all(O);
        assert_eq!(fold(&mut b, f, HOST_CLOCK), vec![slot(0x1000, 1)]);
        // P's other stream, new: it starts with none of O's host clock.
        b.add_stream(d, P, 0x7000, REPORTS + 0x100);
        assert_eq!(b.launch(d).unwrap().write, None);
        assert_eq!(joins(&b.launch(B).unwrap()), Some(vec![HOST_CLOCK]));
        // P's own wait folds P's streams into P's host clock.
        let f = b.sync_all(P);
        let mut want = vec![slot(0x5000, 1), slot(0x7000, 1)];
        want.sort();
        let mut got: Vec<u64> = f.iter().map(|s| s.addr).collect();
        got.sort();
        assert_eq!(got, want);
        b.adopt_host_clock(P, HOST_CLOCK + 0x100, &f);
        let later = b.launch(c).unwrap().write.expect("P's host clock");
        assert_eq!(
            later.joins[..later.join_count as usize],
            [HOST_CLOCK + 0x100]
        );
        assert_eq!(later.reports, REPORTS + 0x100);
        // O records, P waits: P's stream joins O's stream's kernel (which
        // joined O's host clock) and keeps P's own host clock.
        b.launch(A).unwrap();
        b.record(E, A, O);
        b.wait(d, E, P);
        let w = b.launch(d).unwrap().write.expect("the event's sources");
        let mut j = w.joins[..w.join_count as usize].to_vec();
        j.sort();
        assert_eq!(j, vec![slot(0x1000, 2), HOST_CLOCK + 0x100]);
    }

    #[test]
    fn unrelated_streams_join_nothing() {
        let mut b = book();
        b.launch(A).unwrap();
        b.record(E, A, O);
        assert_eq!(b.launch(B).unwrap().write, None);
    }
}
