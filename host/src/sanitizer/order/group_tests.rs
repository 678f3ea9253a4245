//! A group of processes' ranks, each planning with its own
//! [`LaunchOrder::for_rank`], checked against what the group's
//! synchronisation says: serials and ring slots never collide, a
//! group barrier orders every rank's earlier work before the group
//! context's later launches, nothing else orders one rank's work
//! before another's, and nothing issued since the last barrier is ever
//! forgettable (another rank may still race with it). Then the race
//! engine itself on one memory shared by two ranks' plans, as a group of
//! processes shares its first rank's tables: a race between the ranks is
//! found only when no barrier orders them, with both sides named.

use super::*;
use proptest::prelude::*;
use vigil_shared::race::serial::lane_of;

/// Ring slots of the GPU's launch ring.
const SLOTS: u32 = 1 << 16;
/// The group's context on every rank; the other context never joins.
const GROUP: Owner = 0;
const OTHER: Owner = 1;

#[derive(Clone, Debug)]
enum Op {
    /// A launch of `count` CTAs on rank `rank`'s stream `stream`
    /// (streams 0 and 1: the group context's; 2: the other's).
    Launch {
        rank: usize,
        stream: u64,
        count: u32,
    },
    /// Rank `rank`'s host waits for one of its streams.
    Sync { rank: usize, stream: u64 },
    /// Rank `rank` drops a stream (a new one gets its id).
    Drop { rank: usize, stream: u64 },
    /// The group barrier.
    Barrier,
}

fn op(world: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (0..world, 0..3u64, 1..3000u32)
            .prop_map(|(rank, stream, count)| Op::Launch { rank, stream, count }),
        2 => (0..world, 0..3u64).prop_map(|(rank, stream)| Op::Sync { rank, stream }),
        1 => (0..world, 0..3u64).prop_map(|(rank, stream)| Op::Drop { rank, stream }),
        1 => Just(Op::Barrier),
    ]
}

fn owner_of(stream: u64) -> Owner {
    if stream < 2 {
        GROUP
    } else {
        OTHER
    }
}

/// A launch as the test remembers it.
struct Issued {
    rank: usize,
    owner: Owner,
    plan: PlannedLaunch,
    ring: u32,
    /// Group barriers before it.
    epoch: usize,
}

fn orders(l: &PlannedLaunch, s: Serial) -> bool {
    let bound = if lane_of(s) == lane_of(l.base) {
        l.base
    } else {
        l.bounds.0[lane_of(s)]
    };
    s < bound
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn ranks_never_collide_and_order_only_through_barriers(
        world in 2usize..=8,
        ops in proptest::collection::vec(op(8), 2000..4000),
    ) {
        let mut ranks: Vec<LaunchOrder> =
            (0..world).map(|r| LaunchOrder::for_rank(r, world)).collect();
        let mut issued: Vec<Issued> = Vec::new();
        let mut epoch = 0;
        for op in ops {
            match op {
                Op::Launch { rank, stream, count } => {
                    let rank = rank % world;
                    let o = &mut ranks[rank];
                    let owner = owner_of(stream);
                    let plan = match o.launch(StreamId(stream), owner, rank as u32, count, Work::Kernel) {
                        Ok(p) => p,
                        Err(OrderError::LanesExhausted) => {
                            // Dropped streams' lanes come back once waited for.
                            o.sync_owner(GROUP);
                            o.sync_owner(OTHER);
                            o.launch(StreamId(stream), owner, rank as u32, count, Work::Kernel).unwrap()
                        }
                        Err(e) => panic!("{e}"),
                    };
                    let ring = o.next_ring(SLOTS);
                    issued.push(Issued { rank, owner, plan, ring, epoch });
                }
                Op::Sync { rank, stream } => {
                    ranks[rank % world].sync_stream(owner_of(stream), StreamId(stream));
                }
                Op::Drop { rank, stream } => ranks[rank % world].drop_stream(StreamId(stream)),
                Op::Barrier => {
                    let mut all = LaneBounds::NONE;
                    for o in &mut ranks {
                        o.sync_owner(GROUP);
                        all.join(&o.host_clock(GROUP));
                    }
                    for o in &mut ranks {
                        o.group_barrier(GROUP, &all);
                    }
                    epoch += 1;
                }
            }
        }
        // Serials: disjoint ranges, each in a lane of its rank.
        let mut ranges: Vec<(Serial, Serial)> =
            issued.iter().map(|l| (l.plan.base, l.plan.base + l.plan.count)).collect();
        ranges.sort_unstable();
        for w in ranges.windows(2) {
            prop_assert!(w[0].1 <= w[1].0, "serials {:?} and {:?} overlap", w[0], w[1]);
        }
        let share = SLOTS as usize / world;
        let mut rings = std::collections::HashSet::new();
        for l in &issued {
            prop_assert_eq!(lane_of(l.plan.base) % world, l.rank);
            prop_assert_eq!(lane_of(l.plan.base + l.plan.count - 1), lane_of(l.plan.base));
            // Ring numbers: unique, never 0, in the rank's share.
            prop_assert!(l.ring != 0 && rings.insert(l.ring));
            prop_assert_eq!((l.ring % SLOTS) as usize / share, l.rank);
        }
        for (i, l) in issued.iter().enumerate() {
            for m in &issued[..i] {
                let first = m.plan.base;
                let last = m.plan.base + m.plan.count - 1;
                if m.rank != l.rank {
                    // Across ranks, only a barrier orders, and it
                    // orders everything the group's context did.
                    let barrier = m.epoch < l.epoch;
                    if barrier && m.owner == GROUP && l.owner == GROUP {
                        prop_assert!(orders(&l.plan, last), "a barrier between");
                    }
                    if !barrier {
                        prop_assert!(!orders(&l.plan, first), "no barrier between");
                    }
                }
                // Issued since the last barrier: another rank may
                // still race with it, so it is never forgotten.
                if m.epoch == l.epoch {
                    prop_assert!(first >= l.plan.global.0[lane_of(first)]);
                }
            }
        }
    }
}

#[test]
fn a_process_joins_its_group_before_planning_anything() {
    let mut o = LaunchOrder::new();
    o.join_processes(1, 4).unwrap();
    o.join_processes(1, 4).unwrap();
    let l = o.launch(StreamId(1), 1, 1, 8, Work::Kernel).unwrap();
    assert_eq!(lane_of(l.base) % 4, 1);
    assert_eq!(o.join_processes(2, 4), Err(OrderError::Started));
    assert!(OrderError::Started.to_string().contains("before its first"));
    let mut fresh = LaunchOrder::new();
    fresh.next_ring(SLOTS);
    assert_eq!(fresh.join_processes(0, 2), Err(OrderError::Started));
}

#[test]
fn ring_numbers_of_a_process_alone_are_consecutive_slots() {
    let refs: Vec<u32> = (0..5).map(|n| ring_ref(n, 0, 1, SLOTS)).collect();
    assert_eq!(refs, [SLOTS, SLOTS + 1, SLOTS + 2, SLOTS + 3, SLOTS + 4]);
    // A slot comes back to its rank only after its share went round.
    let (share, w) = (SLOTS / 4, 4);
    assert_eq!(ring_ref(0, 3, w, SLOTS) % SLOTS, 3 * share);
    assert_eq!(ring_ref(u64::from(share), 3, w, SLOTS) % SLOTS, 3 * share);
    assert_ne!(
        ring_ref(u64::from(share), 3, w, SLOTS),
        ring_ref(0, 3, w, SLOTS)
    );
}

/// Two processes' worth of planning over one engine memory: each rank
/// plans its launches with its own order (its lanes, its ring slots) and
/// writes their records into the one ring, as the GPU sanitizers of a
/// group of processes do in the first rank's region.
mod shared_engine {
    use super::*;
    use std::sync::atomic::{AtomicU32, AtomicU64};
    use vigil_shared::abi::ReportKind;
    use vigil_shared::atomic::CoreAtomics;
    use vigil_shared::race::desc::{SiteLanes, SiteWord};
    use vigil_shared::race::knowledge::{Arena, SnapRef};
    use vigil_shared::race::memory::{launch_record, SliceMemory, MAX_SC_DEVICES};
    use vigil_shared::race::record::Pool;
    use vigil_shared::race::sync::{CtaSync, SC_WORDS, SYNC_WORDS};
    use vigil_shared::race::{access, CtaView, HostOrder, LaneDevices, RaceFound};

    /// Ring slots (a small ring: every rank's share is reused often).
    const RING: u32 = 64;

    fn zeroed64(n: usize) -> Vec<AtomicU64> {
        (0..n).map(|_| AtomicU64::new(0)).collect()
    }
    fn zeroed32(n: usize) -> Vec<AtomicU32> {
        (0..n).map(|_| AtomicU32::new(0)).collect()
    }

    /// The engine's tables (one set for the group) and each rank's order.
    struct Group {
        shadow: Vec<AtomicU64>,
        pool: Vec<AtomicU64>,
        arena: Vec<AtomicU32>,
        exits: Vec<AtomicU32>,
        sites: Vec<AtomicU64>,
        ring: Vec<AtomicU32>,
        sc: Vec<AtomicU32>,
        ranks: Vec<LaunchOrder>,
    }

    /// One access's launch, as planned by its rank.
    struct Planned {
        rank: u32,
        plan: PlannedLaunch,
        ring: u32,
    }

    impl Group {
        fn new(world: usize) -> Group {
            let pool = zeroed64(16 * 65);
            Pool::<CoreAtomics>::init(&pool);
            let arena = zeroed32(1 << 16);
            Arena::<CoreAtomics>::init(&arena, 1);
            let exits = zeroed32(4 + 2 * 1024);
            Arena::<CoreAtomics>::init_exits(&exits);
            Group {
                shadow: zeroed64(64),
                pool,
                arena,
                exits,
                sites: zeroed64(2 * 1024),
                ring: zeroed32(launch_record::WORDS * RING as usize),
                sc: zeroed32(MAX_SC_DEVICES * 2 * SC_WORDS),
                ranks: (0..world)
                    .map(|r| LaunchOrder::for_rank(r, world))
                    .collect(),
            }
        }

        fn mem(&self) -> SliceMemory<'_, CoreAtomics> {
            SliceMemory {
                shadow: &self.shadow,
                pool: &self.pool,
                arena: &self.arena,
                exits: &self.exits,
                sites: &self.sites,
                launches: &self.ring,
                sc: &self.sc,
            }
        }

        /// The lane-to-device table every rank writes its lanes into.
        fn devices(&self) -> LaneDevices {
            let mut all = LaneDevices::default();
            for o in &self.ranks {
                for (a, d) in all.0.iter_mut().zip(o.devices().0) {
                    *a = (*a).max(d);
                }
            }
            all
        }

        /// Plans a one-CTA launch on rank `rank`'s group stream and writes
        /// its record into its ring slot.
        fn launch(&mut self, rank: u32) -> Planned {
            self.launch_on(rank, GROUP, StreamId(1))
        }

        /// Plans a one-CTA launch of context `owner` on its `stream` of
        /// rank `rank` and writes its record into its ring slot.
        fn launch_on(&mut self, rank: u32, owner: Owner, stream: StreamId) -> Planned {
            let o = &mut self.ranks[rank as usize];
            let plan = o.launch(stream, owner, rank, 1, Work::Kernel).unwrap();
            let ring = o.next_ring(RING);
            let at = (ring % RING) as usize * launch_record::WORDS;
            let rec = &self.ring[at..at + launch_record::WORDS];
            for w in rec {
                w.store(0, std::sync::atomic::Ordering::Relaxed);
            }
            let set = |i: usize, v: u32| rec[i].store(v, std::sync::atomic::Ordering::Relaxed);
            set(launch_record::BASE, plan.base);
            set(launch_record::COUNT, plan.count);
            set(launch_record::DEVICE, rank);
            for k in 0..LANES {
                set(launch_record::BOUNDS + k, plan.bounds.0[k]);
                set(launch_record::GLOBAL + k, plan.global.0[k]);
            }
            set(launch_record::TAG, ring);
            Planned { rank, plan, ring }
        }

        /// The CTA of `l` accesses word `word` (a write or a read) at
        /// source line `line`.
        fn access(&self, l: &Planned, word: u64, write: bool, line: u64) -> Option<RaceFound> {
            let words = zeroed32(SYNC_WORDS);
            let sync = CtaSync::<CoreAtomics>::new(&words);
            sync.init();
            let devices = self.devices();
            let view = CtaView {
                serial: l.plan.base,
                epoch: sync.epoch(),
                device: l.rank,
                host: HostOrder::new(l.plan.base, l.plan.count, &l.plan.bounds),
                global: &l.plan.global,
                devices: &devices,
                known: SnapRef::NONE,
                launch: l.ring,
                own: Default::default(),
            };
            let site = SiteWord::new(l.plan.base, line << 3, 0, SiteLanes::Single);
            let mut bounded = false;
            access(
                &self.mem(),
                &view,
                word,
                0,
                4,
                write,
                false,
                site,
                &mut bounded,
            )
        }

        /// The group barrier: every rank's host waited for its work,
        /// published its host clock, and joined every rank's.
        fn barrier(&mut self) {
            let mut all = LaneBounds::NONE;
            for o in &mut self.ranks {
                o.sync_owner(GROUP);
                all.join(&o.host_clock(GROUP));
            }
            for o in &mut self.ranks {
                o.group_barrier(GROUP, &all);
            }
        }
    }

    /// Asserts `race` is `kind` against `prior`'s access at `line`, named
    /// by its serial, its rank and its source line.
    fn names(group: &Group, race: Option<RaceFound>, kind: ReportKind, prior: &Planned, line: u64) {
        let race = race.expect("a race between the ranks");
        assert_eq!(race.kind, kind);
        assert_eq!(race.prior.serial(), prior.plan.base);
        assert_eq!(group.devices().of(race.prior.serial()), prior.rank);
        assert!(race.prior_site.belongs_to(prior.plan.base));
        assert_eq!(u64::from(race.prior_site.location_bits()), line);
    }

    #[test]
    fn a_race_between_ranks_is_found_only_when_no_barrier_orders_them() {
        for world in [2usize, 3, 8] {
            let mut g = Group::new(world);
            let last = world as u32 - 1;
            // Unordered: rank 0 writes, the last rank reads.
            let write = g.launch(0);
            assert_eq!(g.access(&write, 1, true, 10), None);
            let read = g.launch(last);
            let race = g.access(&read, 1, false, 11);
            names(&g, race, ReportKind::ReadAfterWrite, &write, 10);
            // A group barrier between the write and the read.
            let write = g.launch(0);
            assert_eq!(g.access(&write, 2, true, 20), None);
            g.barrier();
            let read = g.launch(last);
            assert_eq!(g.access(&read, 2, false, 21), None);
            // And the other way round, after the barrier: the last rank
            // writes, rank 0 reads, unordered again.
            let write = g.launch(last);
            assert_eq!(g.access(&write, 3, true, 30), None);
            let read = g.launch(0);
            let race = g.access(&read, 3, false, 31);
            names(&g, race, ReportKind::ReadAfterWrite, &write, 30);
            // Many launches later, every rank's ring share reused many
            // times: a barrier still orders, its absence still races.
            for i in 0..(4 * RING as u64) {
                let rank = (i % world as u64) as u32;
                let w = g.launch(rank);
                assert_eq!(g.access(&w, 8 + i % 32, true, 40), None);
                g.barrier();
            }
            let write = g.launch(0);
            assert_eq!(g.access(&write, 4, true, 50), None);
            let read = g.launch(last);
            let race = g.access(&read, 4, true, 51);
            names(&g, race, ReportKind::WriteAfterWrite, &write, 50);
        }
    }

    /// Contexts one after the other in one process (a test binary's
    /// tests), on the one set of tables the process keeps: the first
    /// context's work, waited for, then the context gone and the tables
    /// renewed as a collection does; the next context's launches take
    /// new ring numbers whose records are theirs, are ordered after the
    /// first context's work, and race among themselves only where its
    /// own streams are unordered.
    #[test]
    fn a_later_context_starts_on_the_tables_the_first_one_left() {
        const FIRST: Owner = 10;
        const NEXT: Owner = 11;
        let mut g = Group::new(1);
        let mut rings = Vec::new();
        for i in 0..(2 * RING as u64) {
            let l = g.launch_on(0, FIRST, StreamId(100 + i % 2));
            assert_eq!(g.access(&l, i % 8, true, 60), None);
            rings.push(l.ring);
            g.ranks[0].sync_owner(FIRST);
        }
        g.ranks[0].drop_stream(StreamId(100));
        g.ranks[0].drop_stream(StreamId(101));
        g.ranks[0].drop_owner(FIRST);
        assert!(g.ranks[0].renew().is_some(), "everything was waited for");
        Arena::<CoreAtomics>::renew(&g.arena, &g.exits, &g.sc);

        // The first context's words, left in the shadow: ordered before
        // the next context's launches, never a race.
        let read = g.launch_on(0, NEXT, StreamId(200));
        assert!(!rings.contains(&read.ring), "a new ring number");
        let rec = launch_record::get::<CoreAtomics>(&g.ring, read.ring).expect("its record");
        let load = |i: usize| rec[i].load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            (load(launch_record::BASE), load(launch_record::COUNT)),
            (read.plan.base, 1)
        );
        for word in 0..8 {
            assert_eq!(g.access(&read, word, false, 61), None, "word {word}");
        }
        // Its own streams, unordered: a race, named by the next
        // context's launch.
        let write = g.launch_on(0, NEXT, StreamId(201));
        assert_eq!(g.access(&write, 20, true, 62), None);
        let other = g.launch_on(0, NEXT, StreamId(202));
        let race = g.access(&other, 20, false, 63);
        names(&g, race, ReportKind::ReadAfterWrite, &write, 62);
    }
}
