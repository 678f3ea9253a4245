//! The GPU runtime's CTA entry and exit skip the `O(num_threads)` clock
//! work for every CTA but the first of a launch in each slot
//! (`ThreadClocks::enter_launch`, `ring_current`, `publish_cta_exit_part`,
//! `finish_cta_exit`), and a CTA goes on in its slot's epoch when only
//! the same launch's exits published it (`ThreadClocks::continue_exit_epoch`).
//! This pins that shortcut to the full protocol (join the launch's inputs
//! at every entry, publish the whole clock and start an epoch at every
//! exit): over random launches, slots, acquires and snapshots, every
//! CTA's clock after its entry and every launch's ring slot are equal but
//! for the slot's own epoch, which is never one an observer running
//! beside the CTA could hold (an earlier launch's ring, a snapshot), and
//! grows by at most one per launch and per release.

use core::sync::atomic::{AtomicU32, Ordering};

use proptest::prelude::*;
use vigil_shared::abi::{thread_state_words, STREAM_RING_SLOTS};
use vigil_shared::atomic::CoreAtomics;
use vigil_shared::clock::ThreadClocks;
use vigil_shared::gpu::{
    finish_cta_exit, join_clock_part, publish_clock_part, publish_cta_exit_part,
};

/// Sanitizer threads: the slots (`0..SLOTS`) and ids of other devices'
/// threads that only reach the clocks through joins.
const THREADS: u32 = 12;
const SLOTS: u32 = 5;
const BUFFER: u32 = 2;
const LANES: u32 = 3;

/// One CTA: its slot, the entries it acquires during its body, and
/// whether it publishes a snapshot (a release) on the way.
#[derive(Clone, Debug)]
struct Cta {
    slot: u32,
    acquires: Vec<(u32, u32)>,
    release: bool,
}

#[derive(Clone, Debug)]
struct Launch {
    /// An event the launch waits on (the stream's join list), if any.
    join: Option<Vec<u32>>,
    ctas: Vec<Cta>,
}

fn launch() -> impl Strategy<Value = Launch> {
    let cta = (
        0..SLOTS,
        prop::collection::vec((0..THREADS, 1..40u32), 0..3),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(slot, acquires, release)| Cta {
            slot,
            acquires,
            release,
        });
    (
        prop::option::weighted(0.3, prop::collection::vec(0..50u32, THREADS as usize)),
        prop::collection::vec(cta, 1..24),
    )
        .prop_map(|(join, ctas)| Launch { join, ctas })
}

/// A device's thread states and stream ring, run by one protocol.
struct Device {
    states: Vec<AtomicU32>,
    ring: Vec<AtomicU32>,
    words: usize,
}

impl Device {
    fn new() -> Device {
        let words = thread_state_words(THREADS, BUFFER);
        let zeros = |n| (0..n).map(|_| AtomicU32::new(0)).collect::<Vec<_>>();
        Device {
            states: zeros(words * SLOTS as usize),
            ring: zeros((STREAM_RING_SLOTS * THREADS) as usize),
            words,
        }
    }

    fn clocks(&self, tid: u32) -> ThreadClocks<'_, CoreAtomics> {
        let at = tid as usize * self.words;
        ThreadClocks::new(&self.states[at..at + self.words], THREADS, BUFFER)
    }

    fn ring_slot(&self, kernel: u32) -> &[AtomicU32] {
        let at = ((kernel % STREAM_RING_SLOTS) * THREADS) as usize;
        &self.ring[at..at + THREADS as usize]
    }

    /// Runs `cta` as kernel `kernel` (launch id `kernel` too) of the
    /// stream; `memo` picks the shortcut. Returns the clock after entry.
    fn run(&self, kernel: u32, join: Option<&[AtomicU32]>, cta: &Cta, memo: bool) -> Vec<u32> {
        let tid = cta.slot;
        let clocks = self.clocks(tid);
        // The GPU entry's steps (`gpu_sanitizer::cta::enter`).
        let needs_join = clocks.enter_claimed_cta(tid, kernel);
        if needs_join || !memo {
            for lane in 0..LANES {
                if kernel > 0 {
                    join_clock_part(&clocks, tid, self.ring_slot(kernel - 1), lane, LANES);
                }
                if let Some(src) = join {
                    join_clock_part(&clocks, tid, src, lane, LANES);
                }
            }
        }
        let entered = (0..THREADS).map(|j| clocks.get(j)).collect();
        clocks.lock_exclusive_fresh(tid).unwrap();
        for &(j, v) in &cta.acquires {
            if j != tid {
                clocks.join_entry(j, v);
            }
        }
        if cta.release {
            clocks.publish();
        }
        clocks.unlock_exclusive();
        let ring = self.ring_slot(kernel);
        if memo {
            let current = clocks.ring_current();
            for lane in 0..LANES {
                publish_cta_exit_part(&clocks, ring, lane, LANES, current);
            }
            clocks.lock_exclusive();
            finish_cta_exit(&clocks, tid, ring, current);
        } else {
            for lane in 0..LANES {
                publish_clock_part(&clocks, ring, lane, LANES);
            }
            clocks.lock_exclusive();
            clocks.mark_published();
        }
        clocks.unlock_exclusive();
        entered
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_entry_and_exit_shortcut_is_the_full_protocol_but_for_own_epochs(
        launches in prop::collection::vec(launch(), 1..8),
    ) {
        let (full, memo) = (Device::new(), Device::new());
        // Per slot: the highest own epoch an observer that may run beside
        // a later CTA holds (an earlier launch's ring, a snapshot), the
        // launches it ran in and the snapshots it published.
        let mut observed = [0u32; SLOTS as usize];
        let (mut ran_in, mut releases) = ([0u32; SLOTS as usize], [0u32; SLOTS as usize]);
        for (kernel, l) in launches.iter().enumerate() {
            let kernel = kernel as u32;
            let join: Option<Vec<AtomicU32>> =
                l.join.as_ref().map(|v| v.iter().map(|&x| AtomicU32::new(x)).collect());
            // The host clears a ring slot before its launch reuses it.
            for d in [&full, &memo] {
                for w in d.ring_slot(kernel) {
                    w.store(0, Ordering::Relaxed);
                }
            }
            let mut last = [0u32; SLOTS as usize];
            for (i, cta) in l.ctas.iter().enumerate() {
                let s = cta.slot as usize;
                let a = full.run(kernel, join.as_deref(), cta, false);
                let b = memo.run(kernel, join.as_deref(), cta, true);
                for j in 0..THREADS as usize {
                    if j >= SLOTS as usize {
                        prop_assert_eq!(a[j], b[j], "entry {} after entry, kernel {} CTA {}", j, kernel, i);
                    } else {
                        prop_assert!(b[j] <= a[j], "entry {} after entry, kernel {} CTA {}", j, kernel, i);
                    }
                }
                prop_assert!(b[s] > observed[s], "kernel {} CTA {}: epoch {} is one an observer holds ({})", kernel, i, b[s], observed[s]);
                if last[s] == 0 {
                    ran_in[s] += 1;
                }
                last[s] = b[s];
                if cta.release {
                    releases[s] += 1;
                    observed[s] = observed[s].max(b[s]);
                }
            }
            let ring = |d: &Device| {
                d.ring_slot(kernel).iter().map(|w| w.load(Ordering::Relaxed)).collect::<Vec<_>>()
            };
            let (ring_full, ring_memo) = (ring(&full), ring(&memo));
            for j in 0..THREADS as usize {
                if j >= SLOTS as usize {
                    prop_assert_eq!(ring_full[j], ring_memo[j], "ring entry {} of kernel {}", j, kernel);
                    continue;
                }
                // The next launch is ordered after every access the slot
                // made in this one.
                prop_assert!(ring_memo[j] >= last[j], "ring entry {} of kernel {}: {} below the slot's last epoch {}", j, kernel, ring_memo[j], last[j]);
                prop_assert!(ring_memo[j] <= ring_full[j], "ring entry {} of kernel {}", j, kernel);
                // What the slot published there (other entries of a ring
                // may also come from the generator's made-up acquires).
                observed[j] = observed[j].max(last[j]);
            }
        }
        for s in 0..SLOTS as usize {
            let epoch = memo.clocks(s as u32).get(s as u32);
            prop_assert!(
                epoch <= ran_in[s] + releases[s],
                "slot {}: epoch {} after {} launches and {} releases", s, epoch, ran_in[s], releases[s]
            );
        }
    }
}

/// A slot's epoch grows by one per launch, not per CTA (a grid of many
/// small CTAs otherwise passes the `2^15` epochs compact cells hold in a
/// few dozen launches), and a release still starts one.
#[test]
fn a_launchs_ctas_in_one_slot_share_an_epoch_until_a_release() {
    let d = Device::new();
    let cta = |release| Cta {
        slot: 0,
        acquires: Vec::new(),
        release,
    };
    let epoch = |d: &Device, kernel| d.run(kernel, None, &cta(false), true)[0];
    let first = epoch(&d, 1);
    for _ in 0..1_000 {
        assert_eq!(
            epoch(&d, 1),
            first,
            "the launch's later CTAs go on in its epoch"
        );
    }
    assert_eq!(epoch(&d, 2), first + 1, "the next launch starts one");
    d.run(2, None, &cta(true), true);
    assert_eq!(epoch(&d, 2), first + 2, "a CTA after a release starts one");
    assert_eq!(epoch(&d, 2), first + 2);
}

/// The shortcut is taken: after the first CTA of a launch in a slot,
/// entries skip the join and exits publish the own entry alone.
#[test]
fn later_ctas_of_a_launch_skip_the_clock_work() {
    let d = Device::new();
    let clocks = d.clocks(0);
    clocks.init(0);
    assert!(clocks.enter_launch(7), "the first CTA of launch 7 joins");
    assert!(!clocks.ring_current());
    finish_cta_exit(&clocks, 0, d.ring_slot(7), false);
    assert!(!clocks.enter_launch(7), "the next one does not");
    assert!(clocks.ring_current(), "and publishes its own entry alone");
    clocks.join_entry(3, 9);
    assert!(!clocks.ring_current(), "until it acquires something new");
    assert!(clocks.enter_launch(8), "a new launch joins again");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A CTA entry forgets every pending clock entry (a relaxed read of a
    /// release in one CTA is never acquired by a fence of the next), though
    /// it clears them only when something was put there.
    #[test]
    fn an_entry_forgets_every_pending_read(
        rounds in prop::collection::vec(
            prop::collection::vec((0..2usize, 0..THREADS, 1..60u32), 0..6),
            1..6,
        ),
    ) {
        use vigil_shared::clock::PendingLevel;
        let d = Device::new();
        let tid = 1;
        let clocks = d.clocks(tid);
        clocks.init(tid);
        for pending in &rounds {
            clocks.lock_exclusive();
            clocks.reset_fence_state();
            let before: Vec<u32> = (0..THREADS).map(|j| clocks.get(j)).collect();
            for level in [PendingLevel::Device, PendingLevel::System] {
                clocks.acquire_pending(level);
            }
            let after: Vec<u32> = (0..THREADS).map(|j| clocks.get(j)).collect();
            prop_assert_eq!(before, after, "an acquire fence right after entry joins nothing");
            for &(level, j, v) in pending {
                let level = [PendingLevel::Device, PendingLevel::System][level];
                clocks.join_pending(level, j, v);
            }
            clocks.unlock_exclusive();
        }
    }
}

/// A thread state's words with random flags, launch memo, fence tokens,
/// pending entries and own epoch (at times the last one, at times 0), at
/// times another thread's (a slot's state never used as `tid`'s),
/// unlocked.
fn thread_state(tid: u32) -> impl Strategy<Value = Vec<u32>> {
    use vigil_shared::abi::ThreadStateHeader as H;
    use vigil_shared::clock::MAX_EPOCH;
    let words = thread_state_words(THREADS, BUFFER);
    (
        prop::collection::vec(any::<u32>(), words),
        0..32u32,
        prop_oneof![Just(7u32), Just(8), any::<u32>()],
        prop_oneof![8 => 1..100u32, 1 => Just(0), 1 => Just(MAX_EPOCH), 1 => Just(MAX_EPOCH - 1)],
        prop_oneof![8 => Just(tid), 1 => any::<u32>()],
    )
        .prop_map(move |(mut w, flags, joined, epoch, owner)| {
            w[H::LOCK_WORD] = 0;
            w[H::TID_WORD] = owner;
            w[H::DIRTY_WORD] = flags;
            w[H::JOINED_LAUNCH_WORD] = joined;
            w[H::WORDS + tid as usize] = epoch;
            w
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// `enter_claimed_cta` (one read of the owner, the flags, the epoch
    /// and the launch memo, no lock: the GPU entry's) leaves every word of
    /// a thread state as the entry's steps do one after another (a state
    /// not yet `tid`'s initialised first, under the write lock), and
    /// answers whether to join as they do.
    #[test]
    fn a_cta_entry_in_one_step_is_its_steps_in_turn(
        state in thread_state(2),
        launch in prop_oneof![Just(6u32), Just(7), any::<u32>()],
    ) {
        let tid = 2;
        let (steps, one) = (Device::new(), Device::new());
        for d in [&steps, &one] {
            let at = tid as usize * d.words;
            for (w, v) in d.states[at..at + d.words].iter().zip(&state) {
                w.store(*v, Ordering::Relaxed);
            }
        }
        let a = steps.clocks(tid);
        if a.tid() != tid || a.get(tid) == 0 {
            a.init(tid);
        }
        a.lock_exclusive();
        if !a.continue_exit_epoch(launch) {
            a.unlock_exclusive();
            if a.lock_exclusive_fresh(tid).is_err() {
                a.lock_exclusive();
            }
        }
        a.reset_fence_state();
        let join_steps = a.enter_launch(launch);
        a.unlock_exclusive();
        let join_one = one.clocks(tid).enter_claimed_cta(tid, launch);
        prop_assert_eq!(join_steps, join_one);
        let words = |d: &Device| d.states.iter().map(|w| w.load(Ordering::Relaxed)).collect::<Vec<_>>();
        prop_assert_eq!(words(&steps), words(&one));
    }
}
