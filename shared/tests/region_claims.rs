//! The claims of an SM's same-block regions at scale (`vigil_shared::regions`):
//! many CTAs on real threads claim a region and a share of the extension
//! regions, hold them, and give them back, on one masks word. Whatever
//! the interleaving, no region or extension region has two holders at
//! once, a CTA keeps a run no longer than its share, and once every CTA
//! has exited the word is empty again (nothing a CTA took is lost).

mod race_model;

use race_model::Rng;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use vigil_shared::atomic::CoreAtomics;
use vigil_shared::gpu::{EXTENSIONS_PER_SM, REGIONS_PER_SM};
use vigil_shared::regions::{claim_region, give_back, ExtensionShare};

/// One SM: its masks word and, per region and extension region, the CTA
/// holding it (0: none).
struct Sm {
    word: AtomicU64,
    regions: Vec<AtomicU32>,
    extensions: Vec<AtomicU32>,
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
    let sm = Arc::new(Sm {
        word: AtomicU64::new(0),
        regions: (0..REGIONS_PER_SM).map(|_| AtomicU32::new(0)).collect(),
        extensions: (0..EXTENSIONS_PER_SM).map(|_| AtomicU32::new(0)).collect(),
    });
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
