//! [`Transfer`]: one copy or fill, as the front end hands it to a backend,
//! and [`TransferKind`], how the sanitizers name it.

use crate::types::StreamId;
use std::fmt;

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

/// What a host-issued copy or fill does, as race reports name it: its
/// device-memory accesses are accesses of its stream, like a kernel's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransferKind {
    /// A host-to-device copy (writes device memory).
    HostToDevice,
    /// A device-to-host copy (reads device memory).
    DeviceToHost,
    /// A device-to-device copy (reads the source, writes the destination).
    DeviceToDevice,
    /// A fill (writes device memory).
    Memset,
}

impl TransferKind {
    /// How reports name a transfer of this kind on `stream`, on every
    /// backend (`host-to-device copy on stream #2`).
    pub fn on_stream(self, stream: StreamId) -> String {
        format!("{self} on {stream}")
    }
}

impl fmt::Display for TransferKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TransferKind::HostToDevice => "host-to-device copy",
            TransferKind::DeviceToHost => "device-to-host copy",
            TransferKind::DeviceToDevice => "device-to-device copy",
            TransferKind::Memset => "memset",
        })
    }
}

impl Transfer<'_> {
    /// True when the transfer reads or writes host memory: the caller's
    /// host slice is only borrowed for the call, so the front end waits for
    /// the stream before returning.
    pub(crate) fn touches_host(&self) -> bool {
        matches!(self, Transfer::FromHost { .. } | Transfer::ToHost { .. })
    }

    /// Its kind.
    pub(crate) fn kind(&self) -> TransferKind {
        match self {
            Transfer::FromHost { .. } => TransferKind::HostToDevice,
            Transfer::ToHost { .. } => TransferKind::DeviceToHost,
            Transfer::DeviceToDevice { .. } => TransferKind::DeviceToDevice,
            Transfer::Zero { .. } => TransferKind::Memset,
        }
    }

    /// The device range it reads, as (address, bytes).
    pub(crate) fn device_reads(&self) -> Option<(u64, u64)> {
        match *self {
            Transfer::ToHost { ref dst, src } => Some((src, dst.len() as u64)),
            Transfer::DeviceToDevice { src, bytes, .. } => Some((src, bytes as u64)),
            Transfer::FromHost { .. } | Transfer::Zero { .. } => None,
        }
    }

    /// The device range it writes, as (address, bytes).
    pub(crate) fn device_writes(&self) -> Option<(u64, u64)> {
        match *self {
            Transfer::FromHost { dst, src } => Some((dst, src.len() as u64)),
            Transfer::DeviceToDevice { dst, bytes, .. } | Transfer::Zero { dst, bytes } => {
                Some((dst, bytes as u64))
            }
            Transfer::ToHost { .. } => None,
        }
    }
}
