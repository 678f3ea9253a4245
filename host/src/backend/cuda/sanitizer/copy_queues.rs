//! The device memory of the threads' queues of `cp.async` copies in
//! flight (`vigil_shared::copies_in_flight::QueueArea`): made by the
//! first sanitized launch of a kernel that issues asynchronous copies,
//! grown when a launch of larger CTAs comes (`growing.rs`). A kernel of
//! `T`-thread CTAs needs a queue for each thread of as many CTAs as an SM
//! holds (2,048 threads an SM: 456 bytes x 2,048 a SM, plus each CTA's
//! list of bulk copies, 126 MB on 132 SMs).

use std::mem::offset_of;

use vigil_shared::copies_in_flight::QueueArea;
use vigil_shared::gpu::GpuRuntime;

use super::device_memory::DeviceBlock;
use super::growing::{GrowingRegion, RegionLayout};
use crate::error::Result;

/// The most device memory the queues take (1 GiB): CTAs in regions past
/// what it covers keep no queue (their copies are checked at the issue).
const COPY_QUEUES_CAP: u64 = 1 << 30;

impl RegionLayout for QueueArea {
    fn covers(&self, other: &Self) -> bool {
        QueueArea::covers(self, other)
    }

    fn bytes(&self, sms: u64) -> u64 {
        QueueArea::bytes(self, sms)
    }

    fn header(&self) -> [u64; 2] {
        [self.threads, self.regions]
    }
}

/// The queues' areas: the current one and the ones it replaced.
#[derive(Debug, Default)]
pub(crate) struct CopyQueues(GrowingRegion<QueueArea>);

impl CopyQueues {
    /// The area a launch of `threads`-thread CTAs needs on `sms` SMs,
    /// grown to serve `current`'s CTAs too: the most threads of either,
    /// and as many regions as both want where the cap allows.
    pub(crate) fn layout_for(threads: u64, sms: u64, current: Option<QueueArea>) -> QueueArea {
        let own = QueueArea::for_threads(threads);
        let cur = current.unwrap_or(own);
        let threads = own.threads.max(cur.threads);
        let per_region = QueueArea {
            threads,
            regions: 1,
        }
        .bytes(sms)
            - QueueArea::HEADER as u64;
        let most = ((COPY_QUEUES_CAP - QueueArea::HEADER as u64) / per_region.max(1)).max(1);
        QueueArea {
            threads,
            regions: own.regions.max(cur.regions).min(most),
        }
    }

    /// Makes the area serve a launch of `threads`-thread CTAs on `sms`
    /// SMs (the context is bound), replacing the runtime's (`runtime`)
    /// area when it serves less.
    pub(crate) fn ensure(&mut self, runtime: &DeviceBlock, sms: u64, threads: u64) -> Result<()> {
        let layout = Self::layout_for(threads, sms, self.0.layout());
        self.0
            .ensure(runtime, offset_of!(GpuRuntime, copy_queues), sms, layout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_area_grows_to_serve_every_launch_within_the_cap() {
        let small = CopyQueues::layout_for(64, 132, None);
        assert_eq!((small.threads, small.regions), (64, 32));
        assert!(small.bytes(132) <= COPY_QUEUES_CAP);
        // Larger CTAs after smaller ones: as many regions as fit.
        let big = CopyQueues::layout_for(1024, 132, Some(small));
        assert_eq!(big.threads, 1024);
        assert!(big.regions >= 2 && big.bytes(132) <= COPY_QUEUES_CAP);
        assert!(big.covers(&QueueArea::for_threads(1024)));
        // The same launches again need nothing new.
        assert!(big.covers(&CopyQueues::layout_for(64, 132, Some(big))));
        assert!(big.covers(&CopyQueues::layout_for(1024, 132, Some(big))));
    }
}
