//! Which clocks a sanitized GPU launch acquires (design 3.2), as host
//! bookkeeping over device addresses.
//!
//! Each stream owns a [`StreamClocks`] block: a ring of three kernel exit
//! clocks (the device writes them) and a join list its next kernel
//! acquires at CTA entry (the host writes it, in stream order, before the
//! launch). Kernels on one stream are ordered through the ring. Everything
//! else is a *source*: the exit clock of another stream's latest kernel,
//! named by the address of its ring slot. An event records its stream's
//! sources; a wait adds the event's sources to the waiting stream's list;
//! a host synchronisation adds the synchronised work's sources to every
//! stream's list, and to the list a stream not yet launched on starts
//! with. A ring slot only grows (each later kernel of its stream is
//! ordered after the earlier ones), so a source read later never orders
//! less than it did when it was taken.

use std::collections::HashMap;

use vigil_shared::abi::STREAM_RING_SLOTS;
use vigil_shared::gpu::{StreamClocks, MAX_JOINS};

use crate::types::{EventId, StreamId};

/// One clock to join: the exit clock of `stream`'s kernel in ring slot
/// `addr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Source {
    stream: StreamId,
    addr: u64,
}

/// Merges `add` into `into`: one source per stream (the newest), and at
/// most [`MAX_JOINS`] (the oldest dropped: it can only miss orderings
/// the dropped stream's later kernels would have carried).
fn merge(into: &mut Vec<Source>, add: &[Source]) {
    for s in add {
        into.retain(|o| o.stream != s.stream);
        into.push(*s);
    }
    if into.len() > MAX_JOINS {
        let extra = into.len() - MAX_JOINS;
        into.drain(..extra);
    }
}

#[derive(Debug)]
struct StreamBook {
    /// Device address of the stream's `StreamClocks` (0 until its first
    /// sanitized launch allocates them).
    base: u64,
    /// Kernels launched so far.
    kernels: u32,
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
    /// What a stream's first kernel joins: the host synchronisations so far.
    host: Vec<Source>,
}

impl ClockBook {
    /// Bookkeeping for clocks of `num_threads` entries.
    pub fn new(num_threads: u32) -> ClockBook {
        ClockBook {
            num_threads,
            streams: HashMap::new(),
            events: HashMap::new(),
            host: Vec::new(),
        }
    }

    /// True once `stream` has its device clocks.
    pub fn has_stream(&self, stream: StreamId) -> bool {
        self.streams.get(&stream).is_some_and(|s| s.base != 0)
    }

    /// `stream`'s book, made on first mention (a wait or a record may come
    /// before its first launch): it starts with the host synchronisations.
    fn book(&mut self, stream: StreamId) -> &mut StreamBook {
        let host = &self.host;
        self.streams.entry(stream).or_insert_with(|| StreamBook {
            base: 0,
            kernels: 0,
            pending: host.clone(),
            written: Vec::new(),
        })
    }

    /// Gives `stream` its zeroed `StreamClocks` at `base`.
    pub fn add_stream(&mut self, stream: StreamId, base: u64) {
        self.book(stream).base = base;
    }

    /// The sources a point at the current end of `stream` carries.
    fn sources(&self, stream: StreamId) -> Vec<Source> {
        let Some(s) = self.streams.get(&stream) else {
            return self.host.clone();
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
            let mut h = StreamClocks {
                join_count: joins.len() as u32,
                reserved: 0,
                joins: [0; MAX_JOINS],
            };
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

    /// `event` recorded at the current end of `stream`.
    pub fn record(&mut self, event: EventId, stream: StreamId) {
        let sources = self.sources(stream);
        self.events.insert(event, sources);
    }

    /// `stream`'s later work waits for `event`.
    pub fn wait(&mut self, stream: StreamId, event: EventId) {
        let sources = self.events.get(&event).cloned().unwrap_or_default();
        merge(&mut self.book(stream).pending, &sources);
    }

    /// The host waited for `sources`: all later work is ordered after it.
    fn host_waited(&mut self, sources: &[Source]) {
        merge(&mut self.host, sources);
        for s in self.streams.values_mut() {
            merge(&mut s.pending, sources);
        }
    }

    /// The host waited for everything on `stream`.
    pub fn sync_stream(&mut self, stream: StreamId) {
        let sources = self.sources(stream);
        self.host_waited(&sources);
    }

    /// The host waited for `event`.
    pub fn sync_event(&mut self, event: EventId) {
        let sources = self.events.get(&event).cloned().unwrap_or_default();
        self.host_waited(&sources);
    }

    /// The host waited for every stream.
    pub fn sync_all(&mut self) {
        let mut all = Vec::new();
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        for id in ids {
            merge(&mut all, &self.sources(id));
        }
        self.host_waited(&all);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const N: u32 = 4;
    const A: StreamId = StreamId(1);
    const B: StreamId = StreamId(2);
    const E: EventId = EventId(9);

    fn book() -> ClockBook {
        let mut b = ClockBook::new(N);
        b.add_stream(A, 0x1000);
        b.add_stream(B, 0x9000);
        b
    }

    fn joins(p: &LaunchPlan) -> Option<Vec<u64>> {
        p.write.map(|h| h.joins[..h.join_count as usize].to_vec())
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
        b.record(E, A);
        b.launch(A).unwrap(); // after the record: not carried
        b.wait(B, E);
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
        b.add_stream(c, 0x5000);
        b.launch(A).unwrap();
        b.record(E, A);
        b.wait(B, E);
        b.record(EventId(10), B);
        b.wait(c, EventId(10));
        assert_eq!(joins(&b.launch(c).unwrap()), Some(vec![slot(0x1000, 1)]));
    }

    #[test]
    fn host_sync_orders_every_stream_even_new_ones() {
        let mut b = book();
        b.launch(A).unwrap();
        b.launch(A).unwrap();
        b.sync_stream(A);
        assert_eq!(joins(&b.launch(B).unwrap()), Some(vec![slot(0x1000, 2)]));
        b.add_stream(StreamId(7), 0x7000);
        assert_eq!(
            joins(&b.launch(StreamId(7)).unwrap()),
            Some(vec![slot(0x1000, 2)])
        );
        // A synchronisation of everything keeps one source per stream.
        b.launch(A).unwrap();
        b.sync_all();
        let p = b.launch(B).unwrap();
        let mut got = joins(&p).unwrap();
        got.sort();
        assert_eq!(got, vec![slot(0x1000, 3), slot(0x7000, 1), slot(0x9000, 1)]);
    }

    #[test]
    fn a_wait_before_the_streams_first_launch_is_kept() {
        let mut b = ClockBook::new(N);
        b.add_stream(A, 0x1000);
        b.launch(A).unwrap();
        b.record(E, A);
        b.wait(B, E);
        assert!(!b.has_stream(B));
        b.add_stream(B, 0x9000);
        assert_eq!(joins(&b.launch(B).unwrap()), Some(vec![slot(0x1000, 1)]));
    }

    /// After many synchronisations of many streams the list is full; the
    /// event's source, the newest, is still in it.
    #[test]
    fn a_full_join_list_keeps_the_newest_source() {
        let mut b = ClockBook::new(N);
        for i in 0..2 * MAX_JOINS as u64 {
            b.add_stream(StreamId(100 + i), 0x10_0000 * (i + 1));
            b.launch(StreamId(100 + i)).unwrap();
            b.sync_all();
        }
        b.add_stream(A, 0x1000);
        b.launch(A).unwrap();
        b.record(E, A);
        b.wait(B, E);
        b.add_stream(B, 0x9000);
        let j = joins(&b.launch(B).unwrap()).unwrap();
        assert_eq!(j.len(), MAX_JOINS);
        assert!(j.contains(&slot(0x1000, 1)));
    }

    #[test]
    fn unrelated_streams_join_nothing() {
        let mut b = book();
        b.launch(A).unwrap();
        b.record(E, A);
        assert_eq!(b.launch(B).unwrap().write, None);
    }
}
