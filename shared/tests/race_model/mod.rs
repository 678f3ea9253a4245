//! A reference model of the race engine's world and a harness that runs
//! the same program through the engine over host memory.
//!
//! The model: launches of CTAs on streams, ordered by stream order,
//! events and host waits; every CTA is one thread with a full vector
//! clock over serials; every access to every byte is kept. A program is a
//! list of steps in one interleaving; the engine runs them in the same
//! order. The harness plays the host's part: it hands out serials from
//! one lane per stream and computes each launch's lane bounds.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU32, AtomicU64};

use vigil_shared::atomic::CoreAtomics;
use vigil_shared::race::atomic::{atomic, atomic_locked, AtomicOp, AtomicOpKind};
use vigil_shared::race::cta::{CtaView, LaneDevices};
use vigil_shared::race::desc::{CellTag, SiteLanes, SiteWord};
use vigil_shared::race::knowledge::Arena;
use vigil_shared::race::line::{access_line, LineAccess, LineOutcome};
use vigil_shared::race::memory::{launch_record, RaceMemory, SliceMemory, U64Of};
use vigil_shared::race::record::Pool;
use vigil_shared::race::serial::{lane_start, HostOrder, LaneBounds, Serial, LANES};
use vigil_shared::race::sync::{fence, CtaSync, SYNC_WORDS};
use vigil_shared::race::word::access_word;
use vigil_shared::race::{access, RaceFound};
use vigil_shared::{Ordering, Scope};

/// One step of a program.
#[derive(Clone, Debug)]
pub enum Step {
    /// Launch `ctas` CTAs on `stream` (on the stream's device); the launch reads
    /// words `ro_words` only through read-only views and never writes them.
    Launch {
        stream: usize,
        ctas: u32,
        ro_words: u64,
    },
    /// Record an event on `stream` into event slot `event`.
    Record { stream: usize, event: usize },
    /// `stream` waits for event slot `event`.
    Wait { stream: usize, event: usize },
    /// The host waits for `stream`.
    SyncStream { stream: usize },
    /// The host waits for everything.
    SyncAll,
    /// A plain access by CTA `cta` of launch `launch`.
    Plain {
        launch: usize,
        cta: u32,
        addr: u64,
        size: u32,
        write: bool,
    },
    /// A warp's whole-line access.
    Line {
        launch: usize,
        cta: u32,
        line: u64,
        write: bool,
    },
    /// An atomic.
    Atomic {
        launch: usize,
        cta: u32,
        addr: u64,
        size: u32,
        kind: AtomicOpKind,
        ordering: Ordering,
        failure: Ordering,
        scope: Scope,
        succeeds: bool,
    },
    /// A fence.
    Fence {
        launch: usize,
        cta: u32,
        ordering: Ordering,
        scope: Scope,
    },
}

const INF: u32 = u32::MAX;

#[derive(Clone, Debug)]
struct Acc {
    serial: Serial,
    epoch: u32,
    write: bool,
    atomic: bool,
    scope: Scope,
    range: (u64, u32),
}

/// A vector clock: whole launches (every CTA at every epoch) and single
/// serials up to an epoch.
#[derive(Clone, Debug, Default)]
struct Clock {
    launches: BTreeSet<usize>,
    serials: BTreeMap<Serial, u32>,
}

#[derive(Clone, Debug, Default)]
struct WordSync {
    heads: Vec<(Serial, Scope, Clock)>,
    last_atomic: Option<(Serial, Scope, (u64, u32))>,
}

#[derive(Clone, Debug)]
struct Launch {
    stream: usize,
    device: u32,
    base: Serial,
    ctas: u32,
    /// Launches ordered before it.
    before: BTreeSet<usize>,
    /// The host's set when it was issued.
    global: BTreeSet<usize>,
    ro_words: u64,
}

#[derive(Clone, Debug, Default)]
struct Cta {
    vc: Clock,
    epoch: u32,
    fence_clock: [Option<Clock>; 3],
    observed: [Clock; 2],
}

fn join(dst: &mut Clock, src: &Clock) {
    dst.launches.extend(src.launches.iter().copied());
    for (k, v) in &src.serials {
        let e = dst.serials.entry(*k).or_insert(0);
        *e = (*e).max(*v);
    }
}

/// The exact model.
pub struct Model {
    launches: Vec<Launch>,
    streams: Vec<BTreeSet<usize>>,
    events: Vec<BTreeSet<usize>>,
    host: BTreeSet<usize>,
    ctas: BTreeMap<Serial, Cta>,
    history: Vec<Vec<Acc>>,
    sync: Vec<WordSync>,
    sc: Vec<(Serial, Scope, u32, Clock)>,
    bases: BTreeMap<Serial, usize>,
    initial: BTreeMap<usize, Clock>,
    finals: BTreeMap<usize, Clock>,
    next_serial: Vec<Serial>,
    devices: Vec<u32>,
}

impl Model {
    /// A model of `streams` streams (stream `s` on device `devices[s]`)
    /// over `bytes` bytes.
    pub fn new(streams: usize, bytes: usize, devices: &[u32]) -> Self {
        Model {
            bases: BTreeMap::new(),
            initial: BTreeMap::new(),
            finals: BTreeMap::new(),
            devices: devices.to_vec(),
            launches: Vec::new(),
            streams: vec![BTreeSet::new(); streams],
            events: vec![BTreeSet::new(); 8],
            host: BTreeSet::new(),
            ctas: BTreeMap::new(),
            history: vec![Vec::new(); bytes],
            sync: vec![WordSync::default(); bytes / 4],
            sc: Vec::new(),
            next_serial: (0..streams).map(|s| lane_start(s + 1)).collect(),
        }
    }

    fn device_of(&self, s: Serial) -> u32 {
        self.launch_of(s).map_or(0, |l| self.launches[l].device)
    }

    fn launch_of(&self, s: Serial) -> Option<usize> {
        let (_, &l) = self.bases.range(..=s).next_back()?;
        (s < self.launches[l].base + self.launches[l].ctas).then_some(l)
    }

    fn includes(&self, scope: Scope, owner: Serial, other: Serial) -> bool {
        match scope {
            Scope::Block => owner == other,
            Scope::Device => self.device_of(owner) == self.device_of(other),
            Scope::System => true,
        }
    }

    fn morally_strong(&self, a: Serial, sa: Scope, b: Serial, sb: Scope) -> bool {
        a == b || (self.includes(sa, a, b) && self.includes(sb, b, a))
    }

    /// The clock a launch's CTAs start with: the launches ordered before
    /// it, and (host order is transitive through what the earlier
    /// launches' CTAs acquired: they finished before this launch began)
    /// everything those CTAs knew when they ended.
    fn initial_clock(&mut self, launch: usize) -> Clock {
        if let Some(c) = self.initial.get(&launch) {
            return c.clone();
        }
        let before: Vec<usize> = self.launches[launch].before.iter().copied().collect();
        let mut vc = Clock {
            launches: self.launches[launch].before.clone(),
            serials: BTreeMap::new(),
        };
        for b in before {
            let fin = self.final_clock(b);
            join(&mut vc, &fin);
        }
        self.initial.insert(launch, vc.clone());
        vc
    }

    /// What a finished launch's CTAs knew, joined.
    fn final_clock(&mut self, launch: usize) -> Clock {
        if let Some(c) = self.finals.get(&launch) {
            return c.clone();
        }
        let l = &self.launches[launch];
        let mut fin = Clock::default();
        for (_, c) in self.ctas.range(l.base..l.base + l.ctas) {
            join(&mut fin, &c.vc);
        }
        self.finals.insert(launch, fin.clone());
        fin
    }

    fn cta(&mut self, launch: usize, cta: u32) -> Serial {
        let s = self.launches[launch].base + cta;
        if !self.ctas.contains_key(&s) {
            let mut vc = self.initial_clock(launch);
            vc.serials.insert(s, 1);
            self.ctas.insert(
                s,
                Cta {
                    vc,
                    epoch: 1,
                    ..Cta::default()
                },
            );
        }
        s
    }

    fn ordered(&self, me: Serial, a: &Acc) -> bool {
        let vc = &self.ctas[&me].vc;
        self.launch_of(a.serial)
            .is_some_and(|l| vc.launches.contains(&l))
            || vc.serials.get(&a.serial).is_some_and(|e| *e >= a.epoch)
    }

    /// Checks and records an access; returns the serials it races with.
    fn access(
        &mut self,
        me: Serial,
        addr: u64,
        size: u32,
        write: bool,
        atomic: bool,
        scope: Scope,
    ) -> Vec<Serial> {
        let mut racing = Vec::new();
        let epoch = self.ctas[&me].epoch;
        for b in addr..addr + u64::from(size) {
            for a in &self.history[b as usize] {
                let compatible = a.atomic
                    && atomic
                    && a.range == (addr, size)
                    && self.morally_strong(a.serial, a.scope, me, scope);
                if (a.write || write) && !compatible && !self.ordered(me, a) {
                    racing.push(a.serial);
                }
            }
        }
        for b in addr..addr + u64::from(size) {
            self.history[b as usize].push(Acc {
                serial: me,
                epoch,
                write,
                atomic,
                scope,
                range: (addr, size),
            });
        }
        racing
    }

    fn bump(&mut self, s: Serial) {
        let c = self.ctas.get_mut(&s).unwrap();
        c.epoch += 1;
        c.vc.serials.insert(s, c.epoch);
    }

    fn snapshot(&self, s: Serial) -> Clock {
        self.ctas[&s].vc.clone()
    }

    fn add_head(&mut self, w: usize, s: Serial, scope: Scope, clock: Clock) {
        self.sync[w].heads.push((s, scope, clock));
    }

    /// Runs one step; for accesses returns the racing earlier serials.
    pub fn step(&mut self, step: &Step) -> Option<Vec<Serial>> {
        match *step {
            Step::Launch {
                stream,
                ctas,
                ro_words,
                ..
            } => {
                let device = self.devices[stream];
                let before: BTreeSet<usize> =
                    self.streams[stream].union(&self.host).copied().collect();
                let id = self.launches.len();
                let base = self.next_serial[stream];
                self.next_serial[stream] += ctas;
                self.bases.insert(base, id);
                self.launches.push(Launch {
                    stream,
                    device,
                    base,
                    ctas,
                    before: before.clone(),
                    global: self.host.clone(),
                    ro_words,
                });
                let mut after = before;
                after.insert(id);
                self.streams[stream] = after;
                None
            }
            Step::Record { stream, event } => {
                self.events[event] = self.streams[stream].clone();
                None
            }
            Step::Wait { stream, event } => {
                let ev = self.events[event].clone();
                self.streams[stream].extend(ev);
                None
            }
            Step::SyncStream { stream } => {
                let s = self.streams[stream].clone();
                self.host.extend(s);
                None
            }
            Step::SyncAll => {
                self.host.extend(0..self.launches.len());
                None
            }
            Step::Plain {
                launch,
                cta,
                addr,
                size,
                write,
            } => {
                let me = self.cta(launch, cta);
                let r = self.access(me, addr, size, write, false, Scope::Block);
                if write {
                    for w in addr / 4..=(addr + u64::from(size) - 1) / 4 {
                        self.sync[w as usize] = WordSync::default();
                    }
                }
                Some(r)
            }
            Step::Line {
                launch,
                cta,
                line,
                write,
            } => self.step(&Step::Plain {
                launch,
                cta,
                addr: line * 128,
                size: 128,
                write,
            }),
            Step::Atomic {
                launch,
                cta,
                addr,
                size,
                kind,
                ordering,
                failure,
                scope,
                succeeds,
            } => {
                let me = self.cta(launch, cta);
                let (reads, writes, rmw, ord) = match kind {
                    AtomicOpKind::Load => (true, false, false, ordering),
                    AtomicOpKind::Store => (false, true, false, ordering),
                    AtomicOpKind::Rmw => (true, true, true, ordering),
                    AtomicOpKind::CompareExchange if succeeds => (true, true, true, ordering),
                    AtomicOpKind::CompareExchange => (true, false, false, failure),
                };
                let words: Vec<usize> = (addr / 4..=(addr + u64::from(size) - 1) / 4)
                    .map(|w| w as usize)
                    .collect();
                let chain: Vec<bool> = words
                    .iter()
                    .map(|&w| {
                        matches!(self.sync[w].last_atomic, Some((t, s, r))
                            if r == (addr, size) && self.morally_strong(t, s, me, scope))
                    })
                    .collect();
                if reads {
                    let mut acquired = Clock::default();
                    let mut seen = [Clock::default(), Clock::default()];
                    for (i, &w) in words.iter().enumerate() {
                        if !chain[i] {
                            continue;
                        }
                        for (hs, hsc, snap) in &self.sync[w].heads {
                            if !self.includes(*hsc, *hs, me) {
                                continue;
                            }
                            let other = usize::from(self.device_of(*hs) != self.device_of(me));
                            join(&mut seen[other], snap);
                            if ord.acquires() && self.includes(scope, me, *hs) {
                                join(&mut acquired, snap);
                            }
                        }
                    }
                    let c = self.ctas.get_mut(&me).unwrap();
                    for (o, s) in c.observed.iter_mut().zip(&seen) {
                        join(o, s);
                    }
                    join(&mut c.vc, &acquired);
                }
                let r = self.access(me, addr, size, writes, true, scope);
                if writes {
                    let own = ord.releases().then(|| self.snapshot(me));
                    let fences = self.ctas[&me].fence_clock.clone();
                    for (i, &w) in words.iter().enumerate() {
                        if !(rmw && chain[i]) {
                            self.sync[w].heads.clear();
                        }
                        for (level, s) in [Scope::Block, Scope::Device, Scope::System]
                            .into_iter()
                            .enumerate()
                        {
                            if let Some(c) = fences[level].clone() {
                                self.add_head(w, me, s, c);
                            }
                        }
                        if let Some(c) = &own {
                            self.add_head(w, me, scope, c.clone());
                        }
                        self.sync[w].last_atomic = Some((me, scope, (addr, size)));
                    }
                    if own.is_some() {
                        self.bump(me);
                    }
                }
                Some(r)
            }
            Step::Fence {
                launch,
                cta,
                ordering,
                scope,
            } => {
                let me = self.cta(launch, cta);
                if ordering.acquires() && scope != Scope::Block {
                    let [same, other] = self.ctas[&me].observed.clone();
                    let c = self.ctas.get_mut(&me).unwrap();
                    join(&mut c.vc, &same);
                    if scope == Scope::System {
                        join(&mut c.vc, &other);
                    }
                }
                if ordering == Ordering::SeqCst {
                    let mut acquired = Clock::default();
                    for (t, s, _, snap) in &self.sc {
                        if self.morally_strong(*t, *s, me, scope) {
                            join(&mut acquired, snap);
                        }
                    }
                    join(&mut self.ctas.get_mut(&me).unwrap().vc, &acquired);
                    let c = self.snapshot(me);
                    self.sc.push((me, scope, 0, c));
                }
                if ordering.releases() {
                    let c = self.snapshot(me);
                    for slot in self
                        .ctas
                        .get_mut(&me)
                        .unwrap()
                        .fence_clock
                        .iter_mut()
                        .take(scope as usize + 1)
                    {
                        *slot = Some(c.clone());
                    }
                    self.bump(me);
                }
                None
            }
        }
    }
}

fn zeroed64(n: usize) -> Vec<AtomicU64> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}
fn zeroed32(n: usize) -> Vec<AtomicU32> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

/// The engine over host memory, driven like the host drives it.
pub struct Harness {
    shadow: Vec<AtomicU64>,
    pool: Vec<AtomicU64>,
    arena: Vec<AtomicU32>,
    exits: Vec<AtomicU32>,
    sites: Vec<AtomicU64>,
    launch_table: Vec<AtomicU32>,
    sc: Vec<AtomicU32>,
    devices: LaneDevices,
    streams: Vec<LaneBounds>,
    events: Vec<LaneBounds>,
    host: LaneBounds,
    next_serial: Vec<Serial>,
    launches: Vec<(Serial, u32, u32, LaneBounds, LaneBounds, u64)>,
    /// Per launch issued: the host's clock then, its stream, its end.
    issued: Vec<(LaneBounds, usize, Serial)>,
    exited: BTreeSet<usize>,
    syncs: BTreeMap<Serial, Vec<AtomicU32>>,
    /// Whether a check could not be decided or history was dropped.
    pub bounded: bool,
    /// Whether every atomic locks its records (no shared path).
    pub locked_only: bool,
    /// Atomics that ran their operation holding their record shared.
    pub shared_hits: usize,
    /// What the last atomic step read of its own CTA's releases.
    pub own: vigil_shared::race::OwnReleases,
}

/// What the engine said of one access.
#[derive(Debug)]
pub struct Verdict {
    pub race: Option<RaceFound>,
    pub bounded: bool,
}

impl Harness {
    pub fn new(
        streams: usize,
        bytes: usize,
        pool_records: usize,
        devices_of_streams: &[u32],
    ) -> Self {
        let pool = zeroed64(16 * (pool_records + 1));
        Pool::<CoreAtomics>::init(&pool);
        let arena = zeroed32(1 << 20);
        Arena::<CoreAtomics>::init(&arena, 1);
        let exits = zeroed32(4 + 2 * 65536);
        Arena::<CoreAtomics>::init_exits(&exits);
        let mut devices = LaneDevices::default();
        for (s, d) in devices_of_streams.iter().enumerate() {
            devices.0[s + 1] = *d as u8;
        }
        Harness {
            shadow: zeroed64(bytes / 4),
            pool,
            arena,
            exits,
            sites: zeroed64(2 * 4096),
            launch_table: zeroed32(launch_record::WORDS * 128),
            sc: zeroed32(2 * 2 * 4),
            devices,
            streams: vec![LaneBounds::NONE; streams],
            events: vec![LaneBounds::NONE; 8],
            host: LaneBounds::NONE,
            next_serial: (0..streams).map(|s| lane_start(s + 1)).collect(),
            launches: Vec::new(),
            issued: Vec::new(),
            exited: BTreeSet::new(),
            syncs: BTreeMap::new(),
            bounded: false,
            locked_only: false,
            shared_hits: 0,
            own: Default::default(),
        }
    }

    fn mem(&self) -> SliceMemory<'_, CoreAtomics> {
        SliceMemory {
            shadow: &self.shadow,
            pool: &self.pool,
            arena: &self.arena,
            exits: &self.exits,
            sites: &self.sites,
            launches: &self.launch_table,
            sc: &self.sc,
        }
    }

    /// A site word naming step `i` of the program, up to
    /// [`SITE_CLASSES`] (steps share sites, as the accesses of one kernel
    /// line made by many CTAs do, so that record entries merge).
    pub fn site(serial: Serial, step: usize) -> SiteWord {
        SiteWord::new(
            serial,
            ((step % SITE_CLASSES) as u64) << 3,
            0,
            SiteLanes::Single,
        )
    }

    fn with_cta<T>(
        &mut self,
        launch: usize,
        cta: u32,
        f: impl FnOnce(
            &SliceMemory<'_, CoreAtomics>,
            &mut CtaView<'_>,
            &CtaSync<'_, CoreAtomics>,
            u32,
            u64,
        ) -> T,
    ) -> T {
        let (base, count, _stream, bounds, global, ro) = self.launches[launch];
        let serial = base + cta;
        let words = self.syncs.entry(serial).or_insert_with(|| {
            let w = zeroed32(SYNC_WORDS);
            CtaSync::<CoreAtomics>::new(&w).init();
            w
        });
        // SAFETY-free trick: move the words out while the memory is borrowed.
        let words = std::mem::take(words);
        let sync = CtaSync::<CoreAtomics>::new(&words);
        let out = {
            let mem = self.mem();
            let mut view = CtaView {
                serial,
                epoch: sync.epoch(),
                device: self.devices.of(serial),
                host: HostOrder::new(base, count, &bounds),
                global: &global,
                devices: &self.devices,
                known: sync.known(),
                launch: launch as u32 + 1,
                own: Default::default(),
            };
            f(&mem, &mut view, &sync, launch as u32 + 1, ro)
        };
        self.syncs.insert(serial, words);
        out
    }

    /// Ends every CTA (that ran) of the launches `bounds` order, once.
    fn exit_before(&mut self, bounds: &LaneBounds) {
        let ended: Vec<(usize, Serial)> = self
            .launches
            .iter()
            .enumerate()
            .filter(|(l, (base, count, ..))| {
                !self.exited.contains(l)
                    && base + count <= bounds.0[vigil_shared::race::serial::lane_of(*base)]
            })
            .map(|(l, (base, ..))| (l, *base))
            .collect();
        for (l, base) in ended {
            self.exited.insert(l);
            let serials: Vec<Serial> = self
                .syncs
                .range(base..base + self.launches[l].1)
                .map(|(s, _)| *s)
                .collect();
            for s in serials {
                self.with_cta(l, s - base, |mem, view, sync, _, _| {
                    vigil_shared::race::sync::cta_exit(mem, view, sync);
                });
            }
        }
    }

    /// Runs one step; for accesses returns the engine's verdict.
    pub fn step(&mut self, i: usize, step: &Step) -> Option<Verdict> {
        let mut bounded = false;
        let race = match *step {
            Step::Launch {
                stream,
                ctas,
                ro_words,
                ..
            } => {
                // The launches this one follows have ended: their CTAs exit.
                self.exit_before(&self.streams[stream].clone());
                let base = self.next_serial[stream];
                self.next_serial[stream] += ctas;
                let mut bounds = self.streams[stream];
                bounds.join(&self.host);
                bounds.0[stream + 1] = base;
                let id = self.launches.len();
                // What may be forgotten: what the host had ordered when the
                // oldest launch the host has not waited for was issued.
                self.issued.push((self.host, stream, base + ctas));
                let global = self
                    .issued
                    .iter()
                    .find(|(_, s, end)| !(self.host.0[s + 1] >= *end))
                    .map_or(self.host, |(h, _, _)| *h);
                // The launch's record, in a ring of 128 (older launches'
                // records are overwritten: heads naming them lose them).
                let r = id as u32 + 1;
                let slots = self.launch_table.len() / launch_record::WORDS;
                let rec = &self.launch_table[(r as usize % slots) * launch_record::WORDS..]
                    [..launch_record::WORDS];
                let relaxed = std::sync::atomic::Ordering::Relaxed;
                for w in rec.iter() {
                    w.store(0, relaxed);
                }
                rec[launch_record::BASE].store(base, relaxed);
                rec[launch_record::COUNT].store(ctas, relaxed);
                for k in 0..LANES {
                    rec[launch_record::BOUNDS + k].store(bounds.0[k], relaxed);
                    rec[launch_record::GLOBAL + k].store(global.0[k], relaxed);
                }
                rec[launch_record::TAG].store(r, std::sync::atomic::Ordering::Release);
                self.launches
                    .push((base, ctas, stream as u32, bounds, global, ro_words));
                self.streams[stream] = bounds;
                self.streams[stream].0[stream + 1] = base + ctas;
                return None;
            }
            Step::Record { stream, event } => {
                self.events[event] = self.streams[stream];
                return None;
            }
            Step::Wait { stream, event } => {
                let ev = self.events[event];
                self.streams[stream].join(&ev);
                return None;
            }
            Step::SyncStream { stream } => {
                let s = self.streams[stream];
                self.exit_before(&s);
                self.host.join(&s);
                return None;
            }
            Step::SyncAll => {
                for s in 0..self.streams.len() {
                    let b = self.streams[s];
                    self.exit_before(&b);
                    self.host.join(&b);
                }
                return None;
            }
            Step::Plain {
                launch,
                cta,
                addr,
                size,
                write,
            } => self.with_cta(launch, cta, |mem, view, _, _, ro| {
                let read_only = !write && addr / 4 < ro;
                access(
                    mem,
                    view,
                    addr / 4,
                    (addr % 4) as u32,
                    size,
                    write,
                    read_only,
                    Self::site(view.serial, i),
                    &mut bounded,
                )
            }),
            Step::Line {
                launch,
                cta,
                line,
                write,
            } => self.with_cta(launch, cta, |mem, view, _, _, ro| {
                let word0 = line * 32;
                let read_only = !write && word0 < ro;
                let site = Self::site(view.serial, i);
                let acc = LineAccess {
                    write,
                    read_only,
                    site,
                };
                match access_line(mem, view, word0, acc, &mut bounded) {
                    LineOutcome::Clean => None,
                    LineOutcome::Raced(r) => Some(r),
                    outcome => {
                        let mut race = match outcome {
                            LineOutcome::RacedSplit(r) => Some(r),
                            _ => None,
                        };
                        let first = race.is_none();
                        for k in 0..32 {
                            let me = vigil_shared::race::AccessDesc::plain(
                                view.serial,
                                view.epoch,
                                write,
                                0xf,
                            );
                            let me = if read_only {
                                vigil_shared::race::AccessDesc(
                                    me.0 | vigil_shared::race::entries::LAUNCH,
                                )
                            } else {
                                me
                            };
                            let r = access_word(
                                mem,
                                view,
                                word0 + k,
                                me,
                                Scope::Block,
                                site,
                                &mut bounded,
                            );
                            if first && race.is_none() {
                                race = r;
                            }
                        }
                        race
                    }
                }
            }),
            Step::Atomic {
                launch,
                cta,
                addr,
                size,
                kind,
                ordering,
                failure,
                scope,
                succeeds,
            } => {
                let locked_only = self.locked_only;
                let (race, shared, own) =
                    self.with_cta(launch, cta, |mem, view, sync, lanes, _| {
                        let op = AtomicOp {
                            kind,
                            ordering,
                            failure_ordering: failure,
                            scope,
                        };
                        let site = Self::site(view.serial, i);
                        let (first, offset) = (addr / 4, (addr % 4) as u32);
                        let perform = || {
                            // Whether it runs holding its record shared.
                            let shared = mem.cell(first).is_some_and(|c| {
                                let c = c.load(std::sync::atomic::Ordering::Relaxed);
                                CellTag::of(c) == CellTag::Record
                                    && mem.pool().record(c as u32).is_some_and(|r| r.is_shared())
                            });
                            (shared, kind != AtomicOpKind::CompareExchange || succeeds)
                        };
                        let b = &mut bounded;
                        let (shared, race) = if locked_only {
                            atomic_locked(
                                mem, view, sync, lanes, first, offset, size, op, site, b, perform,
                            )
                        } else {
                            atomic(
                                mem, view, sync, lanes, first, offset, size, op, site, b, perform,
                            )
                        };
                        (race, shared, view.own)
                    });
                self.shared_hits += usize::from(shared);
                self.own = own;
                race
            }
            Step::Fence {
                launch,
                cta,
                ordering,
                scope,
            } => {
                self.with_cta(launch, cta, |mem, view, sync, _, _| {
                    fence(mem, view, sync, ordering, scope)
                });
                return None;
            }
        };
        self.bounded |= bounded;
        Some(Verdict { race, bounded })
    }

    /// Runs `adds` relaxed device-scope adds to byte `addr` from each of
    /// `threads` (CTAs of launch `launch`; a CTA named several times runs
    /// as several threads sharing its synchronisation state), all at once
    /// on real threads. Returns how many adds ran (each bumps one real
    /// counter); none may report a race.
    pub fn concurrent_adds(&mut self, launch: usize, threads: &[u32], adds: u32, addr: u64) -> u64 {
        let (base, count, _, bounds, global, _) = self.launches[launch];
        for &c in threads {
            self.syncs.entry(base + c).or_insert_with(|| {
                let w = zeroed32(SYNC_WORDS);
                CtaSync::<CoreAtomics>::new(&w).init();
                w
            });
        }
        let ran = AtomicU64::new(0);
        let (mem, syncs, devices) = (self.mem(), &self.syncs, &self.devices);
        let op = AtomicOp {
            kind: AtomicOpKind::Rmw,
            ordering: Ordering::Relaxed,
            failure_ordering: Ordering::Relaxed,
            scope: Scope::Device,
        };
        std::thread::scope(|s| {
            for &c in threads {
                let (mem, ran, serial) = (&mem, &ran, base + c);
                s.spawn(move || {
                    let sync = CtaSync::<CoreAtomics>::new(&syncs[&serial]);
                    let site = Self::site(serial, 0);
                    for _ in 0..adds {
                        let mut view = CtaView {
                            serial,
                            epoch: sync.epoch(),
                            device: devices.of(serial),
                            host: HostOrder::new(base, count, &bounds),
                            global: &global,
                            devices,
                            known: sync.known(),
                            launch: launch as u32 + 1,
                            own: Default::default(),
                        };
                        let mut bounded = false;
                        let lanes = launch as u32 + 1;
                        let ((), race) = atomic(
                            mem,
                            &mut view,
                            &sync,
                            lanes,
                            addr / 4,
                            0,
                            4,
                            op,
                            site,
                            &mut bounded,
                            || {
                                ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                ((), true)
                            },
                        );
                        assert!(race.is_none() && !bounded);
                    }
                });
            }
        });
        ran.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Arena merges that found no room.
    pub fn arena_lost(&self) -> u32 {
        self.arena[3].load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Gives back the records of lines `lines` and clears them (a free);
    /// returns the records given back.
    pub fn reclaim(&self, lines: std::ops::Range<u64>) -> u32 {
        let mem = self.mem();
        lines
            .map(|l| vigil_shared::race::reclaim::reclaim_line(&mem, l * 32))
            .sum()
    }

    /// Allocations that found the pool full.
    pub fn pool_exhausted(&self) -> u64 {
        Pool::<CoreAtomics>::new(&self.pool).exhausted()
    }

    /// How CTA `cta` of `launch` sees serial `s` (host order, acquired
    /// epoch, forgotten), for debugging.
    pub fn sees(&mut self, launch: usize, cta: u32, s: Serial) -> (bool, u32, bool, u32) {
        self.with_cta(launch, cta, |mem, view, _, _, _| {
            (
                view.host.orders(s),
                vigil_shared::race::RaceMemory::arena(mem).epoch_of(view.known, s),
                vigil_shared::race::line::forgotten(view, s),
                view.known.0,
            )
        })
    }

    /// The slots of record `i` and its chain, for debugging.
    pub fn record_slots(&self, i: u32) -> Vec<(u64, u64)> {
        let pool = Pool::<CoreAtomics>::new(&self.pool);
        let mut out = Vec::new();
        let mut cur = pool.record(i);
        while let Some(r) = cur {
            for s in 0..7 {
                out.push(r.slot(s));
            }
            cur = pool.record(r.next());
        }
        out
    }

    /// The shadow, for tests that look at cells.
    pub fn shadow(&self) -> &[U64Of<SliceMemory<'static, CoreAtomics>>] {
        &self.shadow
    }
}

/// Distinct sites the harness gives steps.
pub const SITE_CLASSES: usize = 3;

/// Runs `steps` through both, asserting the engine's verdicts agree with
/// the model's: a race reported only where the model has one, naming a
/// serial that really races and the step that made it; a race the model
/// has reported unless the engine counted a bounded check or lost
/// history before. Returns how many accesses raced.
pub fn compare(streams: usize, bytes: usize, devices: &[u32], steps: &[Step]) -> usize {
    compare_with_pool(1 << 14, streams, bytes, devices, steps)
}

/// [`compare`] with a record pool of `pool_records` records.
pub fn compare_with_pool(
    pool_records: usize,
    streams: usize,
    bytes: usize,
    devices: &[u32],
    steps: &[Step],
) -> usize {
    let mut model = Model::new(streams, bytes, devices);
    let mut engine = Harness::new(streams, bytes, pool_records, devices);
    let mut judge = Judge::default();
    for (i, step) in steps.iter().enumerate() {
        let expected = model.step(step);
        let got = engine.step(i, step);
        judge.check(i, step, &model, &engine, expected, got.as_ref());
    }
    judge.raced
}

/// Checks an engine's verdicts against the model's, step by step.
#[derive(Default)]
struct Judge {
    raced: usize,
    /// The steps that touched each (serial, word).
    made: BTreeMap<(Serial, u64), BTreeSet<usize>>,
}

impl Judge {
    /// A race reported only where the model has one, naming a serial that
    /// really races and the step that made it; a race the model has
    /// reported unless the engine counted a bounded check or lost history
    /// before.
    fn check(
        &mut self,
        i: usize,
        step: &Step,
        model: &Model,
        engine: &Harness,
        expected: Option<Vec<Serial>>,
        got: Option<&Verdict>,
    ) {
        if let (Some(expected), Some(got)) = (expected, got) {
            if let Some(r) = &got.race {
                assert!(
                    expected.contains(&r.prior.serial()),
                    "step {i} {step:?}: engine reports serial {} ({:?}), model races with {expected:?}",
                    r.prior.serial(),
                    r.kind
                );
                if r.prior_site.0 != 0 {
                    let at = r.prior_site.location_bits() as usize;
                    assert!(
                        self.made.get(&(r.prior.serial(), r.word))
                            .is_some_and(|s| s.iter().any(|k| k % SITE_CLASSES == at)),
                        "step {i} {step:?}: the earlier site names steps {at} mod {SITE_CLASSES}, none of which touched word {} by serial {}",
                        r.word,
                        r.prior.serial()
                    );
                }
                self.raced += 1;
            } else if !expected.is_empty() {
                assert!(
                    engine.bounded || engine.arena_lost() > 0,
                    "step {i} {step:?}: model races with {expected:?}, engine reports nothing and counted nothing"
                );
            }
        }
        // Note which words this step touched by which serial.
        if let Some((serial, lo, hi)) = touched(model, step) {
            for w in lo..=hi {
                self.made.entry((serial, w)).or_default().insert(i);
            }
        }
    }
}

/// Runs `steps` through the model and through the engine twice, atomics
/// taking the shared path where they qualify and always locking: the
/// first engine agrees with the model ([`compare`]'s rules), and both
/// agree step by step on whether an access races, unless the one that
/// found nothing counted its check as bounded or lost knowledge. Returns how many accesses raced and how many atomics took
/// the shared path.
/// With `with_model` off the model is not run (it keeps every access: a
/// word hammered by thousands of CTAs makes it quadratic) and the
/// locked path's verdicts are the reference.
pub fn compare_shared_path(
    streams: usize,
    bytes: usize,
    devices: &[u32],
    steps: &[Step],
    with_model: bool,
) -> (usize, usize) {
    let mut model = Model::new(streams, bytes, devices);
    let mut shared = Harness::new(streams, bytes, 1 << 14, devices);
    let mut locked = Harness::new(streams, bytes, 1 << 14, devices);
    locked.locked_only = true;
    let mut judge = Judge::default();
    let mut raced = 0;
    for (i, step) in steps.iter().enumerate() {
        let expected = if with_model { model.step(step) } else { None };
        let a = shared.step(i, step);
        let b = locked.step(i, step);
        raced += usize::from(a.as_ref().is_some_and(|v| v.race.is_some()));
        if let (Some(a), Some(b)) = (&a, &b) {
            // The two may differ only where the one that found nothing
            // could not decide, or had learnt too much (its arena lost
            // knowledge: counted): the shared path widens entries sparse
            // where the locked path adds exact ones, and the two paths
            // fill their arenas differently.
            let agree = a.race.is_some() == b.race.is_some()
                || (a.race.is_none() && (a.bounded || shared.arena_lost() > 0))
                || (b.race.is_none() && (b.bounded || locked.arena_lost() > 0));
            assert!(
                agree,
                "step {i} {step:?}: the shared path's verdict {a:?} differs from the locked path's {b:?} (model: {expected:?})"
            );
        }
        if with_model {
            judge.check(i, step, &model, &shared, expected, a.as_ref());
        }
    }
    assert_eq!(locked.shared_hits, 0);
    (raced, shared.shared_hits)
}

fn touched(model: &Model, step: &Step) -> Option<(Serial, u64, u64)> {
    let (launch, cta, addr, size) = match *step {
        Step::Plain {
            launch,
            cta,
            addr,
            size,
            ..
        } => (launch, cta, addr, size),
        Step::Line {
            launch, cta, line, ..
        } => (launch, cta, line * 128, 128),
        Step::Atomic {
            launch,
            cta,
            addr,
            size,
            ..
        } => (launch, cta, addr, size),
        _ => return None,
    };
    let s = model.launches[launch].base + cta;
    Some((s, addr / 4, (addr + u64::from(size) - 1) / 4))
}

/// A small xorshift generator for random programs.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// [`below`](Self::below) from the high bits (independent of the
    /// draw before, whose low bits the next draw's follow).
    pub fn below_high(&mut self, n: u64) -> u64 {
        (self.next() >> 33) % n.max(1)
    }
    pub fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.below(v.len() as u64) as usize]
    }
}
