//! Fuzzes `vigil::unstable::buddy_allocator::BuddyTree` against its reference model.
//!
//! Input: the first byte picks the capacity (1..=256 minimum blocks of
//! 4 KiB, so non-power-of-two ranges are covered); then every 3 bytes are
//! one operation: allocate (size from the next two bytes, up to 2x the
//! capacity so too-large requests happen), free a live block, or free an
//! arbitrary offset (interior, free space, past the end). After each
//! operation the tree must agree with the model exactly and pass its
//! invariant check; at the end, freeing everything must coalesce fully.
//!
//! ```text
//! cd host/fuzz && cargo +nightly fuzz run buddy
//! ```
#![no_main]

use libfuzzer_sys::fuzz_target;
use vigil::unstable::buddy_allocator::model::ReferenceBuddy;
use vigil::unstable::buddy_allocator::BuddyTree;

const MIN: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&first, ops)) = data.split_first() else { return };
    let cap = (first as u64 + 1) * MIN;
    let mut tree = BuddyTree::new(cap, MIN).unwrap();
    let mut model = ReferenceBuddy::new(cap, MIN).unwrap();
    let mut live = Vec::new();
    for op in ops.chunks_exact(3) {
        let v = u16::from_le_bytes([op[1], op[2]]) as u64;
        match op[0] % 4 {
            0 | 1 => {
                let size = v * (2 * cap) / u16::MAX as u64;
                let got = tree.alloc(size);
                assert_eq!(got, model.alloc(size));
                if let Ok(b) = got {
                    live.push(b);
                }
            }
            2 if !live.is_empty() => {
                let b = live.swap_remove(v as usize % live.len());
                assert_eq!(tree.free(b.offset), Ok(b));
                assert_eq!(model.free(b.offset), Ok(b));
            }
            _ => {
                let off = v * (cap + MIN) / u16::MAX as u64;
                let got = tree.free(off);
                assert_eq!(got, model.free(off));
                if let Ok(b) = got {
                    live.retain(|l| *l != b);
                }
            }
        }
        tree.check_invariants().unwrap();
        assert_eq!(tree.free_blocks(), model.free_blocks());
    }
    for b in live {
        assert_eq!(tree.free(b.offset), Ok(b));
    }
    assert!(tree.is_fully_coalesced());
});
