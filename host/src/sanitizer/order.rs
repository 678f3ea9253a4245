//! What the host knows about ordering between launches, kept as the race
//! engine needs it: serials handed out by lane, and lane bounds for each
//! launch.
//!
//! Every stream rents one lane of serials and takes its launches' serials
//! from it in issue order, so "everything a stream, an event or the host
//! has waited for" is a bound per lane (a vector clock over lanes,
//! [`LaneBounds`]). A launch's bounds are its stream's clock joined with
//! its context's host clock; its own lane's bound is its base. A copy or
//! fill is a launch of one serial.
//!
//! [`PlannedLaunch::global`] is what every launch still running and every
//! launch yet to come orders: the engine forgets accesses below it. It is
//! the lane-wise minimum of every context's host clock (every later
//! launch joins its context's) and the bounds of every launch not yet
//! known to have ended (the host waited for it).
//!
//! A lane is rented again once no stream holds it and the host clock of
//! every context covers what it handed out, or once the context whose
//! streams used it is gone (its buffers, and so the accesses of those
//! serials, went with it); its serials go on from where they stopped, so
//! records of its older serials stay ordered for all.
//!
//! A group of processes shares one engine memory (docs/src/design/groups.md),
//! so its ranks must never hand out the same serial or launch-ring slot:
//! rank `r` of `w` rents only lanes `k` with `k % w == r`
//! ([`LaunchOrder::for_rank`], [`LaunchOrder::join_processes`]) and numbers
//! its launches in the ring's `r`-th share of slots ([`ring_ref`]). What
//! orders one rank's work after another's is the group's barrier: every
//! rank joins every rank's host clock ([`LaunchOrder::group_barrier`]),
//! and what a launch may forget is capped by what the last barrier ordered
//! before every rank's later work (another rank's running launches are not
//! known here).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, OnceLock};

use vigil_shared::race::serial::{lane_end, lane_of, lane_start, LaneBounds, Serial, LANES};
use vigil_shared::race::LaneDevices;

use crate::types::{EventId, StreamId};

/// The process's launch order of the GPU sanitizer: one serial space for
/// every sanitized CUDA context and device of the process (a group of
/// devices shares memory, and a race's earlier access may be any of
/// theirs). A CPU sanitizer (or CPU group) keeps a [`LaunchOrder`] of its
/// own: its memory is its own, so other contexts' work neither delays
/// its renewals nor what it may forget.
pub fn launch_order() -> &'static Mutex<LaunchOrder> {
    static ORDER: OnceLock<Mutex<LaunchOrder>> = OnceLock::new();
    ORDER.get_or_init(|| Mutex::new(LaunchOrder::new()))
}

/// Who owns a host clock: a context (its waits order only its own later
/// launches).
pub type Owner = u64;

/// A launch as planned: its serials and what the host ordered before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedLaunch {
    /// First serial.
    pub base: Serial,
    /// Serials it owns.
    pub count: u32,
    /// What the host ordered before it.
    pub bounds: LaneBounds,
    /// What every launch running or to come orders (see the module docs).
    pub global: LaneBounds,
}

/// Why a launch could not be planned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderError {
    /// Every lane is held by a stream, or still has serials some running
    /// launch may not be ordered after.
    LanesExhausted,
    /// A launch of more CTAs than a lane has serials.
    TooManyCtas(u64),
    /// A process joins a group of processes after it planned sanitized
    /// work of its own (its serials may be another rank's).
    Started,
}

impl fmt::Display for OrderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OrderError::LanesExhausted => write!(
                f,
                "the race sanitizer ran out of serial lanes: more than {} streams have work \
                 the host has not waited for (synchronize some, or drop unused streams)",
                LANES - 1
            ),
            OrderError::TooManyCtas(n) => write!(
                f,
                "a sanitized launch of {n} blocks is larger than the sanitizer can name ({} at most)",
                lane_end(1) - lane_start(1)
            ),
            OrderError::Started => write!(
                f,
                "the race sanitizer of this process already planned sanitized work: a process \
                 joins its group before its first sanitized launch or allocation"
            ),
        }
    }
}

impl std::error::Error for OrderError {}

#[derive(Clone, Copy, Debug, Default)]
struct Lane {
    /// The next serial it hands out (0: never used).
    next: Serial,
    /// Held by a stream.
    held: bool,
    /// The context of the stream that rented it last.
    owner: Owner,
    /// That context is gone.
    retired: bool,
}

#[derive(Clone, Debug)]
struct StreamState {
    owner: Owner,
    lane: Option<usize>,
    clock: LaneBounds,
    /// When the stream's last work was a kernel, the bound of its own lane
    /// a programmatic dependent launched next has until its blocks wait
    /// for it: that kernel's own.
    dependable: Option<Serial>,
}

/// What a launch is, for the order of the work after it on its stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Work {
    /// A kernel that starts once the work before it on its stream has
    /// finished.
    Kernel,
    /// A kernel launched with programmatic stream serialisation: it may
    /// start while the kernel before it on its stream still runs, and is
    /// ordered after that kernel where its blocks wait for it
    /// (`grid_dependency::wait()`). Until then its own lane's bound
    /// ([`PlannedLaunch::bounds`]) is that kernel's.
    DependentKernel,
    /// A host-issued copy or fill.
    Transfer,
}

impl Work {
    /// A kernel, launched with programmatic stream serialisation when
    /// `programmatic`.
    pub fn kernel(programmatic: bool) -> Work {
        if programmatic {
            Work::DependentKernel
        } else {
            Work::Kernel
        }
    }
}

/// The host's record of launch ordering for one process (or one group of
/// devices that share memory).
#[derive(Debug)]
pub struct LaunchOrder {
    lanes: [Lane; LANES],
    devices: LaneDevices,
    streams: HashMap<StreamId, StreamState>,
    events: HashMap<EventId, LaneBounds>,
    hosts: HashMap<Owner, LaneBounds>,
    /// Launches not yet known to have ended: their bounds, lane, end.
    pending: Vec<(LaneBounds, usize, Serial)>,
    /// Everything some host has waited for (contexts gone included): work
    /// below it has ended.
    ended: LaneBounds,
    /// Per owner, the clocks of its streams gone (a wait for all of the
    /// owner's work waits for theirs too).
    dropped: HashMap<Owner, LaneBounds>,
    /// Lanes this process may rent (several processes of a group split
    /// the lanes between them).
    lane_filter: (usize, usize),
    /// What every launch planned since the last renewal is ordered after:
    /// all the work handed out before it, which had ended (see
    /// [`LaunchOrder::renew`]).
    floor: LaneBounds,
    /// Renewals so far.
    renewals: u64,
    /// Launch-ring numbers handed out so far ([`LaunchOrder::next_ring`]).
    rings: u64,
    /// In a group of processes: what the last group barrier ordered
    /// before every rank's later work (what a launch may forget is capped
    /// by it: another rank's launches still running are not known here).
    group: Option<LaneBounds>,
}

impl Default for LaunchOrder {
    fn default() -> Self {
        Self::new()
    }
}

impl LaunchOrder {
    /// Nothing launched yet; every lane may be rented.
    pub fn new() -> Self {
        Self::for_rank(0, 1)
    }

    /// The planner of rank `rank` of `world` processes sharing one engine
    /// memory: it rents only lanes `k` with `k % world == rank`, takes
    /// launch-ring slots of the ring's `rank`-th share only
    /// ([`ring_ref`]), never renews, and forgets nothing another rank may
    /// still race with ([`LaunchOrder::group_barrier`]).
    pub fn for_rank(rank: usize, world: usize) -> Self {
        let world = world.max(1);
        LaunchOrder {
            lanes: [Lane::default(); LANES],
            devices: LaneDevices::default(),
            streams: HashMap::new(),
            events: HashMap::new(),
            hosts: HashMap::new(),
            pending: Vec::new(),
            ended: LaneBounds::NONE,
            dropped: HashMap::new(),
            lane_filter: (rank % world, world),
            floor: LaneBounds::NONE,
            renewals: 0,
            rings: 0,
            group: (world > 1).then_some(LaneBounds::NONE),
        }
    }

    /// Makes this (the process's) order rank `rank` of `world` processes
    /// sharing one engine memory, as [`LaunchOrder::for_rank`]; refused
    /// ([`OrderError::Started`]) once it handed out a serial or a ring
    /// number as another rank or alone. Joining the same group again is
    /// a no-op.
    pub fn join_processes(&mut self, rank: usize, world: usize) -> Result<(), OrderError> {
        let world = world.max(1);
        if self.lane_filter == (rank % world, world) {
            return Ok(());
        }
        if self.rings > 0 || self.lanes.iter().any(|l| l.next != 0) {
            return Err(OrderError::Started);
        }
        self.lane_filter = (rank % world, world);
        self.group = (world > 1).then_some(LaneBounds::NONE);
        Ok(())
    }

    /// The launch-ring number ([`ring_ref`]) of the next launch this
    /// order plans, for a ring of `slots` slots.
    pub fn next_ring(&mut self, slots: u32) -> u32 {
        let (rank, world) = self.lane_filter;
        let r = ring_ref(self.rings, rank as u32, world as u32, slots);
        self.rings += 1;
        r
    }

    /// A barrier of the whole group of processes: every rank's host
    /// waited for its work before it and published its host clock, and
    /// `all` joins those clocks. Context `owner`'s later launches are
    /// ordered after it, and it is what every rank's later launches
    /// follow, so what it covers may be forgotten.
    pub fn group_barrier(&mut self, owner: Owner, all: &LaneBounds) {
        self.join_host(owner, all);
        if let Some(floor) = &mut self.group {
            floor.join(all);
        }
    }

    /// Every serial handed out so far, per lane (its next one).
    fn handed_out(&self) -> LaneBounds {
        let mut all = LaneBounds::NONE;
        for (k, lane) in self.lanes.iter().enumerate() {
            if lane.next != 0 {
                all.0[k] = lane.next;
            }
        }
        all
    }

    /// When every launch handed out so far has ended (some host waited
    /// for it), orders all of them before every launch still to come, of
    /// every context (they ended before those are issued; a context that
    /// never waited for them may then miss a race with them, never
    /// report a false one), and returns the number of this renewal. The
    /// engine's memory may then be emptied of what it knew of those
    /// launches (its snapshot arena, exit log and SC-fence accumulators,
    /// `vigil_shared::race::knowledge::Arena::renew`): everything they
    /// name is ordered by host order from now on. A caller keeps the
    /// number of the renewal it last applied: memory untouched since the
    /// latest one may be emptied later too, while nothing was handed out
    /// since. `None` while some work may still run (or for a process of
    /// a group of processes, whose other members' work this order does
    /// not know).
    pub fn renew(&mut self) -> Option<u64> {
        if self.lane_filter.1 > 1 {
            return None;
        }
        let all = self.handed_out();
        if !all.covered_by(&self.ended) {
            return None;
        }
        if all != self.floor {
            self.floor = all;
            self.renewals += 1;
            self.pending.clear();
        }
        Some(self.renewals)
    }

    /// Which device each lane's serials run on.
    pub fn devices(&self) -> &LaneDevices {
        &self.devices
    }

    fn stream(&mut self, stream: StreamId, owner: Owner) -> &mut StreamState {
        self.streams.entry(stream).or_insert_with(|| StreamState {
            owner,
            lane: None,
            clock: LaneBounds::NONE,
            dependable: None,
        })
    }

    fn host(&self, owner: Owner) -> LaneBounds {
        self.hosts.get(&owner).copied().unwrap_or(LaneBounds::NONE)
    }

    /// A lane free to rent with room for `count` serials for a stream of
    /// `owner`: one never used, one no stream holds whose work has all
    /// ended (some host waited for it), or one whose context is gone (its
    /// buffers went with it). The renter's host clock then
    /// covers that work, since its launches take the lane's next serials
    /// and its own lane's bound is always its base: memory those launches
    /// share with the old work was freed and its shadow cleared in
    /// between, or the owner waited for it.
    fn rent(&mut self, owner: Owner, count: u32) -> Option<usize> {
        let (rank, world) = self.lane_filter;
        for k in 1..LANES {
            if k % world != rank {
                continue;
            }
            let lane = self.lanes[k];
            let next = if lane.next == 0 {
                lane_start(k)
            } else {
                lane.next
            };
            let room = lane_end(k) - next;
            let done = lane.retired || lane.next == 0 || self.ended.0[k] >= lane.next;
            if !lane.held && room >= count && done {
                self.lanes[k] = Lane {
                    next,
                    held: true,
                    owner,
                    retired: false,
                };
                let host = self.hosts.entry(owner).or_insert(LaneBounds::NONE);
                host.0[k] = host.0[k].max(next);
                return Some(k);
            }
        }
        None
    }

    /// Plans a launch of `count` serials of `work` on `stream` of context
    /// `owner` on device `device`. Its bounds' own lane is its base, but
    /// for a dependent kernel right after a kernel on the same lane, whose
    /// blocks are ordered after that kernel only once they wait for it:
    /// there it is that kernel's bound (or what the host waited for, if
    /// more).
    pub fn launch(
        &mut self,
        stream: StreamId,
        owner: Owner,
        device: u32,
        count: u32,
        work: Work,
    ) -> Result<PlannedLaunch, OrderError> {
        if u64::from(count) > u64::from(lane_end(1) - lane_start(1)) {
            return Err(OrderError::TooManyCtas(u64::from(count)));
        }
        let count = count.max(1);
        let current = self.stream(stream, owner).lane;
        let lane = match current {
            Some(k) if lane_end(k) - self.lanes[k].next >= count => k,
            _ => {
                let k = self.rent(owner, count).ok_or(OrderError::LanesExhausted)?;
                if let Some(old) = current {
                    self.lanes[old].held = false;
                }
                self.devices.0[k] = device as u8;
                self.streams
                    .get_mut(&stream)
                    .expect("stream entry made above")
                    .lane = Some(k);
                k
            }
        };
        let host = self.host(owner);
        let base = self.lanes[lane].next;
        self.lanes[lane].next = base + count;
        let state = self
            .streams
            .get_mut(&stream)
            .expect("stream entry made above");
        let mut bounds = state.clock;
        bounds.join(&host);
        bounds.join(&self.floor);
        bounds.0[lane] = base;
        state.clock = bounds;
        state.clock.0[lane] = base + count;
        if work == Work::DependentKernel {
            if let Some(d) = state.dependable.filter(|&d| lane_of(d) == lane) {
                let waited = host.0[lane].max(self.floor.0[lane]);
                bounds.0[lane] = d.max(waited).min(base);
            }
        }
        state.dependable = (work != Work::Transfer).then_some(bounds.0[lane]);
        self.pending.push((bounds, lane, base + count));
        let mut global = self.global();
        global.join(&self.floor);
        if let Some(floor) = &self.group {
            for (g, f) in global.0.iter_mut().zip(floor.0.iter()) {
                *g = (*g).min(*f);
            }
        }
        Ok(PlannedLaunch {
            base,
            count,
            bounds,
            global,
        })
    }

    /// The lane-wise minimum of every host clock and every pending
    /// launch's bounds.
    fn global(&mut self) -> LaneBounds {
        let hosts = &self.hosts;
        let ended = |lane: usize, end: Serial| hosts.values().any(|h| h.0[lane] >= end);
        self.pending.retain(|p| !ended(p.1, p.2));
        let mut g = self.hosts.values().fold(None::<LaneBounds>, |acc, h| {
            Some(match acc {
                None => *h,
                Some(mut a) => {
                    for (x, y) in a.0.iter_mut().zip(h.0.iter()) {
                        *x = (*x).min(*y);
                    }
                    a
                }
            })
        });
        for p in &self.pending {
            let mut a = g.unwrap_or(p.0);
            for (x, y) in a.0.iter_mut().zip(p.0 .0.iter()) {
                *x = (*x).min(*y);
            }
            g = Some(a);
        }
        g.unwrap_or(LaneBounds::NONE)
    }

    /// An event recorded on `stream`: it captures the stream's clock.
    pub fn record(&mut self, event: EventId, stream: StreamId) {
        let clock = self
            .streams
            .get(&stream)
            .map_or(LaneBounds::NONE, |s| s.clock);
        self.events.insert(event, clock);
    }

    /// `stream` waits for `event`: its later launches are ordered after
    /// what the event captured.
    pub fn wait(&mut self, stream: StreamId, event: EventId, owner: Owner) {
        let ev = self.events.get(&event).copied().unwrap_or(LaneBounds::NONE);
        let state = self.stream(stream, owner);
        state.clock.join(&ev);
        // A dependent launched next waits for the event like any launch.
        state.dependable = None;
    }

    /// Context `owner`'s host waited for `stream`.
    pub fn sync_stream(&mut self, owner: Owner, stream: StreamId) {
        let clock = self
            .streams
            .get(&stream)
            .map_or(LaneBounds::NONE, |s| s.clock);
        self.host_waited(owner, &clock);
    }

    fn host_waited(&mut self, owner: Owner, clock: &LaneBounds) {
        self.hosts
            .entry(owner)
            .or_insert(LaneBounds::NONE)
            .join(clock);
        self.ended.join(clock);
    }

    /// Context `owner`'s host waited for `event`.
    pub fn sync_event(&mut self, owner: Owner, event: EventId) {
        let clock = self.events.get(&event).copied().unwrap_or(LaneBounds::NONE);
        self.host_waited(owner, &clock);
    }

    /// Context `owner`'s host waited for all of its streams.
    pub fn sync_owner(&mut self, owner: Owner) {
        let mut all = self.host(owner);
        if let Some(d) = self.dropped.get(&owner) {
            all.join(d);
        }
        for s in self.streams.values().filter(|s| s.owner == owner) {
            all.join(&s.clock);
        }
        self.host_waited(owner, &all);
    }

    /// Context `owner` learns what `from`'s host has waited for (a group's
    /// barrier, a wait that covers another context's work).
    pub fn join_host(&mut self, owner: Owner, from: &LaneBounds) {
        self.hosts
            .entry(owner)
            .or_insert(LaneBounds::NONE)
            .join(from);
    }

    /// What context `owner`'s host has waited for.
    pub fn host_clock(&self, owner: Owner) -> LaneBounds {
        self.host(owner)
    }

    /// `stream` is gone: its lane can be rented again once its work is
    /// waited for.
    pub fn drop_stream(&mut self, stream: StreamId) {
        if let Some(s) = self.streams.remove(&stream) {
            if let Some(k) = s.lane {
                self.lanes[k].held = false;
            }
            self.dropped
                .entry(s.owner)
                .or_insert(LaneBounds::NONE)
                .join(&s.clock);
        }
    }

    /// Context `owner` is gone: its host clock no longer bounds what may
    /// be forgotten, and the lanes its streams used may be rented again
    /// (their launches no longer hold back what may be forgotten either:
    /// a straggler of a context gone may then miss races, never invent
    /// one).
    pub fn drop_owner(&mut self, owner: Owner) {
        self.hosts.remove(&owner);
        self.dropped.remove(&owner);
        self.streams.retain(|_, s| s.owner != owner);
        for lane in self
            .lanes
            .iter_mut()
            .filter(|l| l.next != 0 && l.owner == owner)
        {
            lane.held = false;
            lane.retired = true;
        }
        let lanes = &self.lanes;
        self.pending.retain(|p| !lanes[p.1].retired);
    }
}

/// The launch-ring number of the `n`-th launch (from 0) planned by rank
/// `rank` of `world` processes sharing one ring of `slots` slots (a power
/// of two): never 0 (no launch), in slot `r % slots` of the rank's own
/// share (`slots / world` slots from `rank * (slots / world)`), and
/// distinct from every number the rank handed out in the last
/// `(slots / world) * (2^32 / slots - 1)` launches. A slot is reused by its
/// own rank only, after `slots / world` launches, as by a process alone.
pub fn ring_ref(n: u64, rank: u32, world: u32, slots: u32) -> u32 {
    let world = u64::from(world.clamp(1, slots.max(1)));
    let slots = u64::from(slots.max(1));
    let share = slots / world;
    let turns = (1u64 << 32) / slots - 1;
    let turn = (n / share) % turns + 1;
    let slot = u64::from(rank) % world * share + n % share;
    (turn * slots + slot) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dependent kernel right after a kernel of its stream is not
    /// ordered after that kernel until it waits; after a transfer, an
    /// event wait or a host wait for that kernel it is.
    #[test]
    fn a_dependent_kernel_is_bound_by_the_kernel_before_it() {
        let mut o = LaunchOrder::new();
        let a = StreamId(1);
        let k1 = o.launch(a, 1, 0, 4, Work::Kernel).unwrap();
        let k2 = o.launch(a, 1, 0, 2, Work::DependentKernel).unwrap();
        assert_eq!(k2.bounds.0[lane_of(k2.base)], k1.base);
        // A dependent of a dependent is bound by the first kernel.
        let k3 = o.launch(a, 1, 0, 2, Work::DependentKernel).unwrap();
        assert_eq!(k3.bounds.0[lane_of(k3.base)], k1.base);
        let k4 = o.launch(a, 1, 0, 2, Work::Kernel).unwrap();
        assert_eq!(k4.bounds.0[lane_of(k4.base)], k4.base);
        o.launch(a, 1, 0, 1, Work::Transfer).unwrap();
        let k5 = o.launch(a, 1, 0, 2, Work::DependentKernel).unwrap();
        assert_eq!(k5.bounds.0[lane_of(k5.base)], k5.base);
        let k6 = o.launch(a, 1, 0, 2, Work::Kernel).unwrap();
        o.sync_stream(1, a);
        let k7 = o.launch(a, 1, 0, 2, Work::DependentKernel).unwrap();
        assert_eq!(k7.bounds.0[lane_of(k7.base)], k7.base);
        assert!(k6.base < k7.base);
        let e = EventId(9);
        o.record(e, a);
        o.wait(a, e, 1);
        let k8 = o.launch(a, 1, 0, 2, Work::DependentKernel).unwrap();
        assert_eq!(k8.bounds.0[lane_of(k8.base)], k8.base);
    }

    #[test]
    fn one_stream_orders_its_launches_and_two_do_not() {
        let mut o = LaunchOrder::new();
        let (a, b) = (StreamId(1), StreamId(2));
        let l1 = o.launch(a, 7, 0, 4, Work::Kernel).unwrap();
        let l2 = o.launch(a, 7, 0, 2, Work::Kernel).unwrap();
        let l3 = o.launch(b, 7, 0, 1, Work::Kernel).unwrap();
        let host = |l: &PlannedLaunch, s: Serial| s < l.bounds.0[lane_of(s)];
        assert!(host(&l2, l1.base + 3) && !host(&l2, l2.base));
        assert!(!host(&l3, l1.base) && !host(&l3, l2.base));
        assert_eq!(l2.base, l1.base + 4);
        assert_ne!(lane_of(l3.base), lane_of(l1.base));
    }

    #[test]
    fn events_and_host_waits_carry_order_to_other_streams() {
        let mut o = LaunchOrder::new();
        let (a, b, c) = (StreamId(1), StreamId(2), StreamId(3));
        let l1 = o.launch(a, 1, 0, 8, Work::Kernel).unwrap();
        o.record(EventId(9), a);
        o.wait(b, EventId(9), 1);
        let l2 = o.launch(b, 1, 0, 1, Work::Kernel).unwrap();
        assert!(l1.base + 7 < l2.bounds.0[lane_of(l1.base)]);
        let l3 = o.launch(a, 1, 0, 1, Work::Kernel).unwrap();
        o.sync_stream(1, a);
        let l4 = o.launch(c, 1, 0, 1, Work::Kernel).unwrap();
        assert!(l3.base < l4.bounds.0[lane_of(l3.base)]);
        // Another context's wait orders nothing of this one.
        o.sync_owner(2);
        let l5 = o.launch(StreamId(4), 2, 0, 1, Work::Kernel).unwrap();
        assert!(l2.base >= l5.bounds.0[lane_of(l2.base)]);
    }

    #[test]
    fn nothing_is_forgotten_while_a_launch_it_may_race_with_runs() {
        let mut o = LaunchOrder::new();
        let (a, b) = (StreamId(1), StreamId(2));
        let old = o.launch(b, 1, 0, 1, Work::Kernel).unwrap();
        let l1 = o.launch(a, 1, 0, 1, Work::Kernel).unwrap();
        o.sync_stream(1, a);
        let l2 = o.launch(a, 1, 0, 1, Work::Kernel).unwrap();
        // `old` may still run and is not ordered after l1: l1 is not forgotten.
        assert!(l1.base >= l2.global.0[lane_of(l1.base)]);
        o.sync_stream(1, b);
        // `l2` may still run, unordered with `old`: `old` stays, while
        // `l1`, before `l2` and waited for, may go.
        let l3 = o.launch(a, 1, 0, 1, Work::Kernel).unwrap();
        assert!(l1.base < l3.global.0[lane_of(l1.base)]);
        assert!(old.base >= l3.global.0[lane_of(old.base)]);
        o.sync_stream(1, a);
        let l4 = o.launch(a, 1, 0, 1, Work::Kernel).unwrap();
        assert!(l1.base < l4.global.0[lane_of(l1.base)]);
        assert!(old.base < l4.global.0[lane_of(old.base)]);
        assert!(l3.base < l4.global.0[lane_of(l3.base)]);
    }

    #[test]
    fn lanes_are_rented_again_once_waited_for() {
        let mut o = LaunchOrder::new();
        for i in 0..200u64 {
            let s = StreamId(100 + i);
            o.launch(s, 1, 0, 3, Work::Kernel).unwrap();
            o.sync_stream(1, s);
            o.drop_stream(s);
        }
        let mut held = Vec::new();
        for i in 0..(LANES as u64 - 1) {
            let s = StreamId(1000 + i);
            o.launch(s, 1, 0, 1, Work::Kernel).unwrap();
            held.push(s);
        }
        assert_eq!(
            o.launch(StreamId(5000), 1, 0, 1, Work::Kernel),
            Err(OrderError::LanesExhausted)
        );
        assert!(OrderError::LanesExhausted.to_string().contains("streams"));
        // Contexts come and go (a test suite): lanes whose work some host
        // waited for go to the new contexts' streams.
        for s in held {
            o.drop_stream(s);
        }
        o.sync_owner(1);
        o.drop_owner(1);
        for i in 0..500u64 {
            let (s, owner) = (StreamId(10_000 + i), 100 + i);
            let l = o.launch(s, owner, 0, 2, Work::Kernel).unwrap();
            // The renter is ordered after the lane's earlier work.
            assert!(
                l.base - 1 < l.bounds.0[lane_of(l.base)] || l.base == lane_start(lane_of(l.base))
            );
            o.sync_owner(owner);
            o.drop_stream(s);
            o.drop_owner(owner);
        }
    }

    #[test]
    fn a_renewal_orders_all_ended_work_before_every_later_launch() {
        let mut o = LaunchOrder::new();
        let (a, b) = (StreamId(1), StreamId(2));
        let l1 = o.launch(a, 1, 0, 4, Work::Kernel).unwrap();
        let l2 = o.launch(b, 2, 0, 3, Work::Kernel).unwrap();
        // `l2` may still run: nothing is renewed.
        o.sync_owner(1);
        assert_eq!(o.renew(), None);
        o.sync_owner(2);
        let first = o.renew().expect("everything handed out has ended");
        assert_eq!(o.renew(), Some(first), "nothing new: the same renewal");
        // A context that waited for none of it is ordered after all of it,
        // and every later launch may forget it.
        let l3 = o.launch(StreamId(3), 3, 0, 1, Work::Kernel).unwrap();
        for s in [l1.base + 3, l2.base + 2] {
            assert!(s < l3.bounds.0[lane_of(s)] && s < l3.global.0[lane_of(s)]);
        }
        assert!(l3.base >= l3.bounds.0[lane_of(l3.base)]);
        // `l3` runs: no renewal until some host waits for it.
        assert_eq!(o.renew(), None);
        o.sync_stream(3, StreamId(3));
        assert_eq!(o.renew(), Some(first + 1));
        // A process of a group never renews (its peers' work is not here).
        let mut g = LaunchOrder::for_rank(0, 2);
        g.launch(a, 1, 0, 1, Work::Kernel).unwrap();
        g.sync_owner(1);
        assert_eq!(g.renew(), None);
    }

    #[test]
    fn a_wait_for_a_whole_context_covers_its_dropped_streams() {
        let mut o = LaunchOrder::new();
        let l1 = o.launch(StreamId(1), 1, 0, 3, Work::Kernel).unwrap();
        o.drop_stream(StreamId(1));
        o.sync_owner(1);
        let l2 = o.launch(StreamId(2), 1, 0, 1, Work::Kernel).unwrap();
        assert!(l1.base + 2 < l2.bounds.0[lane_of(l1.base)]);
        // Another context's wait does not.
        o.sync_owner(2);
        let l3 = o.launch(StreamId(3), 2, 0, 1, Work::Kernel).unwrap();
        assert!(l1.base >= l3.bounds.0[lane_of(l1.base)]);
    }

    #[test]
    fn lanes_of_a_context_gone_are_rented_again() {
        let mut o = LaunchOrder::new();
        // Contexts, one after the other, each with streams it never waits
        // for, while another context that waited once stays alive.
        o.launch(StreamId(1), 1, 0, 1, Work::Kernel).unwrap();
        o.sync_owner(1);
        let mut last = None;
        for ctx in 2..300u64 {
            for i in 0..2 {
                let s = StreamId(ctx * 10 + i);
                last = Some(o.launch(s, ctx, 0, 5, Work::Kernel).unwrap());
                o.drop_stream(s);
            }
            o.drop_owner(ctx);
        }
        // A lane rented again goes on from where it stopped: its older
        // serials stay ordered before the new stream's launches.
        let l = last.unwrap();
        assert!(l.base > lane_start(lane_of(l.base)) + 5);
        assert!(lane_start(lane_of(l.base)) < l.bounds.0[lane_of(l.base)]);
        // Nothing of a context gone holds back what may be forgotten.
        o.launch(StreamId(7), 1, 0, 1, Work::Kernel).unwrap();
        assert!(o.pending.len() <= 2, "{} launches pending", o.pending.len());
    }
}

#[cfg(test)]
mod group_tests;
