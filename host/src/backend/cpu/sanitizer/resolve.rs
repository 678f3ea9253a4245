//! The CPU sanitizer's [`ReportResolver`]: what the numbers in its engine
//! records mean, read from host memory and its launch history, so its
//! reports go through the shared decoder like the GPU's.

use super::{CpuRaceSanitizer, LaunchRecord, LAUNCH_HISTORY};
use crate::sanitizer::decode::{LaunchShape, ReportResolver, ThreadPlace};
use crate::sanitizer::report::SourceLocation;
use std::panic::Location;

/// Resolves one report's numbers (built per report, under the launch
/// history's lock).
pub(super) struct CpuResolver<'a> {
    pub(super) sanitizer: &'a CpuRaceSanitizer,
    pub(super) launches: &'a [LaunchRecord],
    /// The reporting access's clock slot and the virtual SM it ran on: a
    /// clock slot says nothing about the SM, so only this one is known.
    pub(super) current: (u32, u32),
}

impl ReportResolver for CpuResolver<'_> {
    fn location(&self, location: u64) -> Option<SourceLocation> {
        if location == 0 {
            return None;
        }
        // SAFETY: the CPU sanitizer's side entries, the only source of
        // these addresses, hold `&'static Location<'static>` values as
        // addresses (`CpuRaceSanitizer::note`).
        let l: &'static Location<'static> = unsafe { &*(location as *const Location<'static>) };
        Some(SourceLocation::from_std(l))
    }

    fn file_name(&self, ptr: u64, len: u32) -> Option<String> {
        if ptr == 0 {
            return None;
        }
        // SAFETY: the CPU sanitizer's access sites, the only source of
        // these, take `file_ptr`/`file_len` from a `&'static Location`'s
        // file name (`CpuRaceSanitizer::site`): live, UTF-8, `len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len as usize) };
        std::str::from_utf8(bytes).ok().map(str::to_owned)
    }

    fn launch(&self, launch: u32) -> Option<LaunchShape> {
        let r = self.launches.get(launch as usize % LAUNCH_HISTORY)?;
        (!r.kernel.is_empty()).then(|| LaunchShape {
            kernel: r.kernel.clone(),
            grid: r.grid,
            block: r.block,
            host_issued: r.host_issued,
        })
    }

    fn place(&self, tid: u32) -> ThreadPlace {
        ThreadPlace {
            device: self.sanitizer.device_of(tid),
            sm: (tid == self.current.0).then_some(self.current.1),
        }
    }

    fn allocation(&self, address: u64) -> Option<(u64, u64)> {
        self.sanitizer
            .allocation_of(address)
            .map(|a| (a.address, a.size))
    }
}
