//! The xorshift generator the unit tests' random sequences come from
//! (64-bit, shifts 13, 7, 17): deterministic, so a failing case repeats.

/// A 64-bit xorshift generator.
pub(crate) struct XorShift(u64);

impl XorShift {
    /// The generator from `seed` (not 0).
    pub(crate) fn new(seed: u64) -> XorShift {
        XorShift(seed)
    }

    /// The next number below `m`.
    pub(crate) fn below(&mut self, m: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % m
    }
}
