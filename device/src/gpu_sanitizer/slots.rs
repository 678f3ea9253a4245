//! Per-SM sanitizer slots: a CTA claims one at entry and gives it back at
//! exit, so no two live CTAs share a thread state (docs/src/design/engine.md). Pure
//! atomics on an [`SmSlots`](vigil_shared::gpu::SmSlots) pair of words,
//! so the host build tests it with real threads.

use core::sync::atomic::{AtomicU32, Ordering};

/// An SM's slot words: `[busy mask, claim counter]`.
pub struct SmSlotWords<'a> {
    busy: &'a AtomicU32,
    next: &'a AtomicU32,
}

impl<'a> SmSlotWords<'a> {
    /// The slots of SM `smid` in a table of `SmSlots` words.
    #[inline(always)]
    pub fn of(table: &'a [AtomicU32], smid: u32) -> Self {
        let at = smid as usize * vigil_shared::gpu::SmSlots::WORDS;
        SmSlotWords {
            busy: &table[at],
            next: &table[at + 1],
        }
    }

    /// Claims a free slot of `slots`, starting round-robin after the last
    /// claim so that CTAs following each other on the SM take different
    /// thread states while slots last. A miss's atomic returns the busy
    /// mask, so the next try is a slot free in it (the first after the
    /// missed one), not the next one blindly. Waits while all are held
    /// (only when more CTAs are resident than the id space gives slots):
    /// a live CTA always frees its slot at exit.
    #[inline(always)]
    pub fn claim(&self, slots: u32, spin: impl Fn()) -> u32 {
        let slots = slots.clamp(1, vigil_shared::gpu::MAX_SLOTS_PER_SM);
        let all = u32::MAX >> (32 - slots);
        let mut s = self.next.fetch_add(1, Ordering::Relaxed) % slots;
        loop {
            let bit = 1u32 << s;
            // Acquire: what the slot's previous CTA wrote to the thread
            // state (released at its exit) is visible to this one.
            let held = self.busy.fetch_or(bit, Ordering::Acquire);
            if held & bit == 0 {
                return s;
            }
            let free = !held & all;
            let after = free & (u32::MAX << s);
            s = match (after, free) {
                (0, 0) => {
                    spin();
                    (s + 1) % slots
                }
                (0, _) => free.trailing_zeros(),
                _ => after.trailing_zeros(),
            };
        }
    }

    /// Gives slot `slot` back (after the CTA published its clock).
    #[inline(always)]
    pub fn release(&self, slot: u32) {
        self.busy.fetch_and(!(1u32 << slot), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    #[test]
    fn consecutive_claims_rotate_and_live_claims_are_distinct() {
        let table: Vec<AtomicU32> = (0..4).map(|_| AtomicU32::new(0)).collect();
        let sm = SmSlotWords::of(&table, 1);
        let a = sm.claim(3, || {});
        sm.release(a);
        let b = sm.claim(3, || {});
        assert_ne!(a, b, "a CTA following another takes the next slot");
        let c = sm.claim(3, || {});
        let d = sm.claim(3, || {});
        let mut live = [b, c, d];
        live.sort();
        assert_eq!(live, [0, 1, 2]);
        assert_eq!(table[0].load(Ordering::Relaxed), 0, "SM 0 untouched");
    }

    /// A claim whose round-robin slot is held takes a slot the busy mask
    /// shows free: the first after it, else the first from slot 0.
    #[test]
    fn a_missed_claim_takes_a_free_slot_the_mask_shows() {
        let table: Vec<AtomicU32> = (0..2).map(|_| AtomicU32::new(0)).collect();
        let sm = SmSlotWords::of(&table, 0);
        table[0].store(0b0110, Ordering::Relaxed);
        table[1].store(1, Ordering::Relaxed);
        assert_eq!(
            sm.claim(4, || {}),
            3,
            "slot 1 held: the next free one after it"
        );
        table[0].store(0b1010, Ordering::Relaxed);
        table[1].store(3, Ordering::Relaxed);
        assert_eq!(
            sm.claim(4, || {}),
            0,
            "slot 3 held, none after it: wrap to 0"
        );
        assert_eq!(table[0].load(Ordering::Relaxed), 0b1011);
    }

    /// Threads claiming and releasing concurrently never hold one slot twice.
    #[test]
    fn concurrent_claims_never_share_a_slot() {
        let table: Vec<AtomicU32> = (0..2).map(|_| AtomicU32::new(0)).collect();
        let held: Vec<AtomicBool> = (0..3).map(|_| AtomicBool::new(false)).collect();
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    let sm = SmSlotWords::of(&table, 0);
                    for _ in 0..2000 {
                        let slot = sm.claim(3, std::thread::yield_now);
                        assert!(!held[slot as usize].swap(true, Ordering::SeqCst));
                        held[slot as usize].store(false, Ordering::SeqCst);
                        sm.release(slot);
                    }
                });
            }
        });
        assert_eq!(table[0].load(Ordering::Relaxed), 0);
    }
}
