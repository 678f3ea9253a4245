//! The claims of an SM's same-block regions at scale (`vigil_shared::regions`):
//! many CTAs on real threads claim a region and a share of the extension
//! regions, hold them, and give them back, on one masks word. Whatever
//! the interleaving, no region or extension region has two holders at
//! once, a CTA keeps a run no longer than its share, and once every CTA
//! has exited the word is empty again (nothing a CTA took is lost).
//! CTAs whose threads claim at first need (`claim_once`) claim once
//! each, or not at all when no thread needs the regions, and every thread
//! of a CTA holds what its one claim got.

mod race_model;

use race_model::Rng;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use vigil_shared::atomic::CoreAtomics;
use vigil_shared::gpu::{EXTENSIONS_PER_SM, REGIONS_PER_SM};
use vigil_shared::regions::{
    claim_once, claim_region, give_back, ClaimWord, ExtensionShare, UNCLAIMED,
};

/// One SM: its masks word and, per region and extension region, the CTA
/// holding it (0: none).
struct Sm {
    word: AtomicU64,
    regions: Vec<AtomicU32>,
    extensions: Vec<AtomicU32>,
}

impl Sm {
    /// An SM with every region free.
    fn free() -> Arc<Sm> {
        Arc::new(Sm {
            word: AtomicU64::new(0),
            regions: (0..REGIONS_PER_SM).map(|_| AtomicU32::new(0)).collect(),
            extensions: (0..EXTENSIONS_PER_SM).map(|_| AtomicU32::new(0)).collect(),
        })
    }
}

/// Takes `cell` for `cta`: it must be free.
fn hold(cell: &AtomicU32, cta: u32, what: &str) {
    let was = cell.swap(cta, Ordering::Relaxed);
    assert_eq!(was, 0, "{what} held by CTA {was} when CTA {cta} got it");
}

/// Gives `cell` back from `cta`.
fn free(cell: &AtomicU32, cta: u32) {
    assert_eq!(cell.swap(0, Ordering::Relaxed), cta);
}

/// Thread `thread`'s generator, seeded from `VIGIL_SEED` (default 1).
fn rng(thread: u64) -> Rng {
    let seed: u64 = std::env::var("VIGIL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    Rng((seed ^ 0x9E37_79B9_7F4A_7C15).wrapping_mul(thread + 1) | 1)
}

#[test]
fn ctas_claiming_an_sms_regions_never_share_one_and_give_all_back() {
    // More CTAs than regions, so that claims wait for free regions, and
    // shares of every size, so that they overlap and retry.
    const CTAS: u64 = 48;
    const ROUNDS: u32 = 200;
    let sm = Sm::free();
    let threads: Vec<_> = (0..CTAS)
        .map(|t| {
            let sm = sm.clone();
            std::thread::spawn(move || {
                let mut rng = rng(t);
                for round in 0..ROUNDS {
                    let cta = (t as u32 + 1) | (round + 1) << 8;
                    let guess = rng.below_high(u64::from(REGIONS_PER_SM)) as u32;
                    // Every share size, whole-mask divisors or not.
                    let share = ExtensionShare::of(guess, rng.below_high(33) as u32);
                    let usable = rng.below_high(8) != 0;
                    let (region, before) = claim_region::<CoreAtomics>(&sm.word, guess, share);
                    let (first, count) = if share.mask == 0 {
                        (0, 0)
                    } else {
                        share.keep::<CoreAtomics>(&sm.word, before, usable)
                    };
                    assert!(
                        count <= share.wanted,
                        "kept {count} of a share of {}",
                        share.wanted
                    );
                    assert!(
                        usable || count == 0,
                        "kept extensions on an SM without them"
                    );
                    hold(&sm.regions[region as usize], cta, "region");
                    for e in first..first + count {
                        hold(&sm.extensions[e as usize], cta, "extension region");
                    }
                    std::thread::yield_now();
                    free(&sm.regions[region as usize], cta);
                    for e in first..first + count {
                        free(&sm.extensions[e as usize], cta);
                    }
                    give_back::<CoreAtomics>(
                        &sm.word,
                        region,
                        first,
                        count,
                        rng.below_high(2) == 0,
                    );
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        sm.word.load(Ordering::Relaxed),
        0,
        "a claimed region was never given back"
    );
}

/// A CTA's word of the regions it holds, on real atomics.
struct CtaWord(AtomicU32);

impl ClaimWord for CtaWord {
    fn load_acquire(&self) -> u32 {
        self.0.load(Ordering::Acquire)
    }
    fn cas_relaxed(&self, current: u32, new: u32) -> bool {
        self.0
            .compare_exchange(current, new, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }
    fn store_release(&self, value: u32) {
        self.0.store(value, Ordering::Release)
    }
    fn wait(&self) {
        std::thread::yield_now()
    }
}

/// A CTA of `THREADS` threads on one SM, round after round: its word,
/// the claims its threads made this round, how many of them came to
/// claim, what each of them holds (`u32::MAX`: it needed nothing), and
/// the barrier of its entry and exit.
struct Cta {
    word: CtaWord,
    claims: AtomicU32,
    arrived: AtomicU32,
    seen: Vec<AtomicU32>,
    barrier: Barrier,
}

#[test]
fn threads_of_ctas_claim_at_first_need_once_per_cta() {
    // More CTAs than regions, so that some claims wait for a CTA's exit.
    const CTAS: u64 = 40;
    const THREADS: usize = 3;
    const ROUNDS: u32 = 60;
    let sm = Sm::free();
    let mut threads = Vec::new();
    for c in 0..CTAS {
        let cta = Arc::new(Cta {
            word: CtaWord(AtomicU32::new(UNCLAIMED)),
            claims: AtomicU32::new(0),
            arrived: AtomicU32::new(0),
            seen: (0..THREADS).map(|_| AtomicU32::new(u32::MAX)).collect(),
            barrier: Barrier::new(THREADS),
        });
        for t in 0..THREADS {
            let (sm, cta) = (sm.clone(), cta.clone());
            threads.push(std::thread::spawn(move || {
                // One generator per CTA, drawn alike by its threads: each
                // knows which of them need the regions this round.
                let mut rng = rng(c);
                for round in 0..ROUNDS {
                    let name = (c as u32 + 1) | (round + 1) << 8;
                    // The guess and share are the CTA's (its entry's),
                    // the same for whichever thread claims.
                    let guess = (c as u32 + round) % REGIONS_PER_SM;
                    let share = ExtensionShare::of(guess, (c as u32 + round) % 5);
                    let needs = rng.below_high(1 << THREADS) as u32;
                    // Entry: the word is unclaimed.
                    cta.barrier.wait();
                    if needs & 1 << t != 0 {
                        cta.arrived.fetch_add(1, Ordering::Relaxed);
                        let held = claim_once(&cta.word, || {
                            cta.claims.fetch_add(1, Ordering::Relaxed);
                            // The CTA's other threads that need the
                            // regions come while it claims.
                            while cta.arrived.load(Ordering::Relaxed) < needs.count_ones() {
                                std::thread::yield_now();
                            }
                            for _ in 0..4 {
                                std::thread::yield_now();
                            }
                            let (region, before) =
                                claim_region::<CoreAtomics>(&sm.word, guess, share);
                            let (first, count) = if share.mask == 0 {
                                (0, 0)
                            } else {
                                share.keep::<CoreAtomics>(&sm.word, before, true)
                            };
                            hold(&sm.regions[region as usize], name, "region");
                            for e in first..first + count {
                                hold(&sm.extensions[e as usize], name, "extension region");
                            }
                            region | first << 8 | count << 16
                        });
                        let region = held & 0xff;
                        assert_eq!(
                            sm.regions[region as usize].load(Ordering::Relaxed),
                            name,
                            "a thread holds a region its CTA's claim did not get"
                        );
                        cta.seen[t].store(held, Ordering::Relaxed);
                    }
                    // Exit: the first thread gives back what was claimed.
                    cta.barrier.wait();
                    if t == 0 {
                        let seen: Vec<u32> = cta
                            .seen
                            .iter()
                            .map(|s| s.swap(u32::MAX, Ordering::Relaxed))
                            .filter(|&s| s != u32::MAX)
                            .collect();
                        let claims = cta.claims.swap(0, Ordering::Relaxed);
                        cta.arrived.store(0, Ordering::Relaxed);
                        assert_eq!(
                            claims,
                            u32::from(!seen.is_empty()),
                            "a CTA claims once if a thread needs its regions, else never"
                        );
                        assert!(
                            seen.windows(2).all(|w| w[0] == w[1]),
                            "threads of one CTA hold different regions: {seen:?}"
                        );
                        if let Some(&held) = seen.first() {
                            let (region, first, count) =
                                (held & 0xff, (held >> 8) & 0xff, held >> 16);
                            free(&sm.regions[region as usize], name);
                            for e in first..first + count {
                                free(&sm.extensions[e as usize], name);
                            }
                            give_back::<CoreAtomics>(&sm.word, region, first, count, true);
                        }
                        cta.word.0.store(UNCLAIMED, Ordering::Relaxed);
                    }
                }
            }));
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(
        sm.word.load(Ordering::Relaxed),
        0,
        "a claimed region was never given back"
    );
}
