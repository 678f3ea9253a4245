//! Address arithmetic of the sanitizer's two reservations (docs/src/design/address-space.md).
//!
//! The user/shadow reservation is 1 TiB, aligned to 1 TiB. Its upper half
//! starts at the *real base* (`reserve + 2^39`); user allocations live in
//! the first [`REAL_CAPACITY`] bytes of it. The lower half holds the shadow:
//! one 8-byte cell per 4-byte word, so 256 GiB of user memory need all
//! 512 GiB of the lower half.
//!
//! The runtime-state reservation holds one region per device at a fixed
//! [`PER_DEVICE_STATE_STRIDE`] (its layout: the host's runtime-state
//! module).

use crate::abi::{COMPACT_SHADOW_BYTES_PER_WORD, WORD_BYTES};

/// Size and alignment of the user/shadow reservation (1 TiB).
pub const RESERVE_BYTES: u64 = 1 << 40;
/// Offset of the real (user) half inside the reservation.
pub const REAL_OFFSET: u64 = 1 << 39;
/// Bytes of user memory the shadow half can describe (256 GiB).
pub const REAL_CAPACITY: u64 = REAL_OFFSET / COMPACT_SHADOW_BYTES_PER_WORD * WORD_BYTES;
/// Stride (and alignment) of the per-device runtime-state regions (1 GiB).
pub const PER_DEVICE_STATE_STRIDE: u64 = 1 << 30;
/// Devices the runtime-state reservation has regions for.
pub const MAX_DEVICES: u64 = 32;

const _: () = assert!(REAL_CAPACITY == 256 << 30);

/// The reservation base an address in the reservation belongs to.
#[inline(always)]
pub const fn reserve_base_of(addr: u64) -> u64 {
    addr & !(RESERVE_BYTES - 1)
}

/// The real (user) base of a reservation.
#[inline(always)]
pub const fn real_base(reserve_base: u64) -> u64 {
    reserve_base + REAL_OFFSET
}

/// True when `addr` is user memory of the reservation at `reserve_base`.
#[inline(always)]
pub const fn is_managed(addr: u64, reserve_base: u64) -> bool {
    addr >= real_base(reserve_base) && addr - real_base(reserve_base) < REAL_CAPACITY
}

/// Index of the 4-byte word holding `addr`, counted from the real base.
#[inline(always)]
pub const fn word_index(addr: u64, reserve_base: u64) -> u64 {
    (addr - real_base(reserve_base)) / WORD_BYTES
}

/// Address of the shadow cell of the word holding `addr` (a managed address).
#[inline(always)]
pub const fn shadow_address(addr: u64) -> u64 {
    let reserve = reserve_base_of(addr);
    reserve + COMPACT_SHADOW_BYTES_PER_WORD * word_index(addr, reserve)
}

/// Shadow cells (words) an allocation of `size` bytes at `addr` touches.
#[inline]
pub const fn shadow_cells(addr: u64, size: u64) -> u64 {
    if size == 0 {
        return 0;
    }
    (addr + size - 1) / WORD_BYTES - addr / WORD_BYTES + 1
}

/// The shadow bytes of an allocation: `(first shadow address, length)`.
#[inline]
pub const fn shadow_range(addr: u64, size: u64) -> (u64, u64) {
    (
        shadow_address(addr),
        shadow_cells(addr, size) * COMPACT_SHADOW_BYTES_PER_WORD,
    )
}

/// Shadow bytes needed for an allocation of `size` bytes starting on a word
/// boundary (what the allocator maps next to the data).
#[inline]
pub const fn shadow_bytes_for(size: u64) -> u64 {
    size.div_ceil(WORD_BYTES) * COMPACT_SHADOW_BYTES_PER_WORD
}

/// Base of device `rank`'s runtime-state region.
#[inline(always)]
pub const fn device_globals(globals_base: u64, rank: u32) -> u64 {
    globals_base + rank as u64 * PER_DEVICE_STATE_STRIDE
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: u64 = 7 << 40;

    #[test]
    fn reserve_and_real_base() {
        assert_eq!(reserve_base_of(R), R);
        assert_eq!(reserve_base_of(R + RESERVE_BYTES - 1), R);
        assert_eq!(reserve_base_of(R + RESERVE_BYTES), R + RESERVE_BYTES);
        assert_eq!(real_base(R), R + (1 << 39));
        assert_eq!(reserve_base_of(real_base(R)), R);
    }

    #[test]
    fn managed_boundaries() {
        let real = real_base(R);
        assert!(!is_managed(real - 1, R));
        assert!(is_managed(real, R));
        assert!(is_managed(real + REAL_CAPACITY - 1, R));
        assert!(!is_managed(real + REAL_CAPACITY, R));
        assert!(!is_managed(R, R));
        assert!(!is_managed(0, R));
    }

    #[test]
    fn shadow_addresses() {
        let real = real_base(R);
        assert_eq!(shadow_address(real), R);
        assert_eq!(shadow_address(real + 3), R);
        assert_eq!(shadow_address(real + 4), R + 8);
        assert_eq!(shadow_address(real + 7), R + 8);
        // The last managed byte's cell is the last cell of the lower half.
        assert_eq!(
            shadow_address(real + REAL_CAPACITY - 1),
            R + REAL_OFFSET - 8
        );
        assert_eq!(word_index(real + 9, R), 2);
    }

    #[test]
    fn shadow_sizes() {
        assert_eq!(shadow_cells(0, 0), 0);
        assert_eq!(shadow_cells(0, 1), 1);
        assert_eq!(shadow_cells(0, 4), 1);
        assert_eq!(shadow_cells(0, 5), 2);
        assert_eq!(shadow_cells(3, 2), 2);
        assert_eq!(shadow_cells(4, 4), 1);
        assert_eq!(shadow_bytes_for(1), 8);
        assert_eq!(shadow_bytes_for(4), 8);
        assert_eq!(shadow_bytes_for(5), 16);
        assert_eq!(shadow_bytes_for(2 << 20), 4 << 20);
        let real = real_base(R);
        assert_eq!(shadow_range(real + 2, 4), (R, 16));
    }

    #[test]
    fn per_device_regions() {
        let g = 3 << 40;
        assert_eq!(device_globals(g, 0), g);
        assert_eq!(device_globals(g, 5), g + 5 * (1 << 30));
    }
}
