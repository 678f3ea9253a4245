//! CPU tests of the shadow allocator's pure parts through the public API:
//! the buddy tree at the real half's geometry against the reference model,
//! and `VIGIL_*` configuration parsing. No GPU needed.

use std::collections::HashMap;
use vigil::unstable::buddy_allocator::model::ReferenceBuddy;
use vigil::unstable::buddy_allocator::{BuddyError, BuddyTree};
use vigil::unstable::vmm::layout::REAL_CAPACITY;
use vigil::unstable::vmm::{size_class, SanitizerConfig, MIN_BLOCK};

/// xorshift64*: deterministic pseudo-random numbers without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn real_half_geometry_matches_the_model_over_a_long_run() {
    let mut tree = BuddyTree::new(REAL_CAPACITY, MIN_BLOCK).unwrap();
    let mut model = ReferenceBuddy::new(REAL_CAPACITY, MIN_BLOCK).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut live = Vec::new();
    for step in 0..20_000 {
        if live.len() < 300 && rng.next() % 3 != 0 {
            // Mostly small, sometimes up to 64 GiB, rarely the whole half.
            let size = match rng.next() % 100 {
                0 => REAL_CAPACITY,
                1..=5 => 1 + rng.next() % (64 << 30),
                _ => 1 + rng.next() % (64 << 20),
            };
            let got = tree.alloc(size);
            assert_eq!(got, model.alloc(size), "step {step}: alloc {size}");
            if let Ok(b) = got {
                assert_eq!(b.offset % b.size, 0);
                live.push(b);
            }
        } else if !live.is_empty() {
            let b = live.swap_remove((rng.next() % live.len() as u64) as usize);
            assert_eq!(tree.free(b.offset), Ok(b));
            assert_eq!(model.free(b.offset), Ok(b));
            assert!(matches!(
                tree.free(b.offset),
                Err(BuddyError::NotAllocated { .. })
            ));
        }
        if step % 1000 == 0 {
            tree.check_invariants().unwrap();
            assert_eq!(tree.free_blocks(), model.free_blocks());
        }
    }
    for b in live {
        tree.free(b.offset).unwrap();
    }
    assert!(tree.is_fully_coalesced());
    assert_eq!(tree.largest_free(), REAL_CAPACITY);
}

#[test]
fn a_million_operations_stay_logarithmic() {
    let mut tree = BuddyTree::new(REAL_CAPACITY, MIN_BLOCK).unwrap();
    let mut rng = Rng(7);
    let t = std::time::Instant::now();
    let mut live = Vec::with_capacity(1024);
    for _ in 0..500_000 {
        let b = tree.alloc(1 + rng.next() % (32 << 20)).unwrap();
        live.push(b.offset);
        if live.len() == 1024 {
            for off in live.drain(..) {
                tree.free(off).unwrap();
            }
        }
    }
    for off in live {
        tree.free(off).unwrap();
    }
    assert!(tree.is_fully_coalesced());
    eprintln!("1,000,000 buddy operations over 256 GiB: {:?}", t.elapsed());
}

#[test]
fn size_classes_are_granularity_multiples() {
    assert_eq!(size_class(1, MIN_BLOCK), MIN_BLOCK);
    assert_eq!(size_class(1 << 30, MIN_BLOCK), 1 << 30);
}

#[test]
fn environment_configuration() {
    let env: HashMap<&str, &str> = [
        ("VIGIL_CLOCK_BUFFER_SIZE", "128"),
        ("VIGIL_SEED", "12345"),
        ("VIGIL_DEVICE_RANKS", "1,0"),
    ]
    .into_iter()
    .collect();
    let c = SanitizerConfig::builder()
        .env(|n| env.get(n).map(|v| v.to_string()))
        .build()
        .unwrap();
    assert_eq!((c.clock_buffer_size(), c.seed()), (128, 12345));
    assert_eq!(c.rank_of(0, 2), Some((1, 2)));
    let e = SanitizerConfig::builder()
        .env(|n| (n == "VIGIL_CLOCK_BUFFER_SIZE").then(|| "lots".to_owned()))
        .build()
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "VIGIL_CLOCK_BUFFER_SIZE=\"lots\" is invalid: expected an integer in 1..=4096 (decimal or 0x hex)"
    );
}
