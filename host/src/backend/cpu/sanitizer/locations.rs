//! Source locations back from the shadow's site words.
//!
//! A site word keeps bits 3 to 22 of its access's `Location` address
//! ([`SiteWord`](vigil_shared::race::SiteWord)). On the CPU every
//! `Location` a sanitized access names is a `&'static Location` of this
//! process, and the sanitizer sees each one when it builds the access's
//! site word: [`Locations::note`] keeps it by those bits, and
//! [`Locations::get`] gives it back. Two `Location`s with the same bits
//! (8 MiB apart) mark their entry as ambiguous, which then resolves to
//! nothing: a report says "unknown" rather than name a wrong line.

use super::arena::{ArenaError, Zeroed};
use std::panic::Location;
use std::sync::atomic::{AtomicUsize, Ordering as MemOrder};
use vigil_shared::race::desc::LOCATION_BITS;

/// An entry two `Location`s share (a `Location` is 8-aligned: never this).
const AMBIGUOUS: usize = 1;

/// The `Location`s seen, by their site-word bits.
pub(super) struct Locations {
    slots: Zeroed<AtomicUsize>,
}

impl Locations {
    /// An empty table (8 MiB of address space, committed as used).
    pub(super) fn new() -> Result<Self, ArenaError> {
        Ok(Locations {
            slots: Zeroed::new(1 << LOCATION_BITS)?,
        })
    }

    /// The entry of a `Location` address.
    #[inline(always)]
    fn slot(&self, address: usize) -> &AtomicUsize {
        &self.slots[(address >> 3) & ((1 << LOCATION_BITS) - 1)]
    }

    /// Keeps `loc` by its bits (before a site word naming it can be read).
    #[inline(always)]
    pub(super) fn note(&self, loc: &'static Location<'static>) {
        let address = loc as *const Location<'static> as usize;
        let slot = self.slot(address);
        let seen = slot.load(MemOrder::Acquire);
        if seen != address {
            self.note_slow(slot, seen, address);
        }
    }

    #[cold]
    fn note_slow(&self, slot: &AtomicUsize, seen: usize, address: usize) {
        let seen = match seen {
            0 => match slot.compare_exchange(0, address, MemOrder::AcqRel, MemOrder::Acquire) {
                Ok(_) => return,
                Err(now) => now,
            },
            other => other,
        };
        if seen != address && seen != AMBIGUOUS {
            slot.store(AMBIGUOUS, MemOrder::Release);
        }
    }

    /// The `Location` noted under `bits` (a site word's location bits), if
    /// exactly one was.
    pub(super) fn get(&self, bits: u32) -> Option<&'static Location<'static>> {
        let address = self.slots.get(bits as usize)?.load(MemOrder::Acquire);
        if address == 0 || address == AMBIGUOUS {
            return None;
        }
        // SAFETY: only `note` stores addresses here, each that of a
        // `&'static Location<'static>`.
        Some(unsafe { &*(address as *const Location<'static>) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_shared::race::desc::{SiteLanes, SiteWord};

    #[test]
    fn a_site_words_bits_give_back_its_location_or_nothing() {
        let t = Locations::new().unwrap();
        let here: &'static Location<'static> = Location::caller();
        let site = SiteWord::new(7, here as *const _ as u64, 3, SiteLanes::Single);
        assert!(t.get(site.location_bits()).is_none());
        t.note(here);
        t.note(here);
        assert!(std::ptr::eq(t.get(site.location_bits()).unwrap(), here));
        // Another location with the same bits: neither is named any more.
        let slot = t.slot(here as *const _ as usize);
        slot.store(0, MemOrder::Relaxed);
        t.note_slow(slot, 0, 8 << LOCATION_BITS);
        t.note(here);
        assert!(t.get(site.location_bits()).is_none());
        t.note(here);
        assert!(t.get(site.location_bits()).is_none());
    }
}
