//! [`Transfer`]: one copy or fill, as the front end hands it to a backend.

/// One copy or fill, ordered on a stream. Built by the front end after it
/// checked lengths and devices; every device range lies inside a live
/// allocation the caller borrows (exclusively where written).
pub(crate) enum Transfer<'h> {
    /// Host to device; done when the stream has reached it.
    FromHost { dst: u64, src: &'h [u8] },
    /// Device to host; done when the stream has reached it.
    ToHost { dst: &'h mut [u8], src: u64 },
    /// Device to device (asynchronous on a GPU).
    DeviceToDevice { dst: u64, src: u64, bytes: usize },
    /// Zeroes `bytes` bytes (asynchronous on a GPU).
    Zero { dst: u64, bytes: usize },
}

impl Transfer<'_> {
    /// True when the transfer reads or writes host memory: the caller's
    /// host slice is only borrowed for the call, so the front end waits for
    /// the stream before returning.
    pub(crate) fn touches_host(&self) -> bool {
        matches!(self, Transfer::FromHost { .. } | Transfer::ToHost { .. })
    }
}
