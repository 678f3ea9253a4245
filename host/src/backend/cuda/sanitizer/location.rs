//! Source locations of GPU accesses, resolved on the host.
//!
//! A kernel's `#[track_caller]` `Location`s and their file names live in
//! the module's global memory. A report carries the current access's file
//! pointer, length, line and column, and the earlier access's `Location`
//! address; the host reads the bytes back after synchronising. The
//! `Location` layout is the compiler's (not stable), so it is learnt from
//! a host `Location` of the same compiler: both targets are 64-bit and
//! lay it out alike.

use std::collections::HashMap;
use std::panic::Location;

use crate::sanitizer::report::SourceLocation;

/// Longest file name read back.
const MAX_FILE_BYTES: usize = 4096;

/// Where a `Location`'s fields sit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LocationLayout {
    size: usize,
    file_ptr: usize,
    file_len: usize,
    line: usize,
    column: usize,
}

#[track_caller]
fn probe_site() -> &'static Location<'static> {
    Location::caller()
}

impl LocationLayout {
    /// The layout of this compiler's `Location`, or `None` if it does not
    /// hold a file pointer, a length, a line and a column as plain words.
    pub fn probe() -> Option<LocationLayout> {
        let loc = probe_site();
        let size = std::mem::size_of::<Location<'static>>();
        // SAFETY: reading the bytes of a live `Location` value.
        let bytes =
            unsafe { std::slice::from_raw_parts((loc as *const Location<'_>).cast::<u8>(), size) };
        let u64_at = |o: usize| {
            bytes
                .get(o..o + 8)
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
        };
        let u32_at = |o: usize| {
            bytes
                .get(o..o + 4)
                .map(|b| u32::from_ne_bytes(b.try_into().unwrap_or([0; 4])))
        };
        let find64 = |v: u64| (0..size).step_by(8).find(|&o| u64_at(o) == Some(v));
        let find32 = |v: u32| (0..size).step_by(4).find(|&o| u32_at(o) == Some(v));
        if loc.line() == loc.column() {
            return None; // the two could not be told apart
        }
        Some(LocationLayout {
            size,
            file_ptr: find64(loc.file().as_ptr() as u64)?,
            file_len: find64(loc.file().len() as u64)?,
            line: find32(loc.line())?,
            column: find32(loc.column())?,
        })
    }

    /// Bytes of a `Location`.
    pub fn size(&self) -> usize {
        self.size
    }

    /// `(file pointer, file length, line, column)` from a `Location`'s bytes.
    pub fn decode(&self, b: &[u8]) -> Option<(u64, usize, u32, u32)> {
        let u64_at = |o: usize| Some(u64::from_ne_bytes(b.get(o..o + 8)?.try_into().ok()?));
        let u32_at = |o: usize| Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?));
        Some((
            u64_at(self.file_ptr)?,
            usize::try_from(u64_at(self.file_len)?).ok()?,
            u32_at(self.line)?,
            u32_at(self.column)?,
        ))
    }
}

/// Resolves device addresses to source locations, caching what it read.
#[derive(Debug, Default)]
pub(crate) struct LocationCache {
    files: HashMap<(u64, usize), Option<String>>,
    locations: HashMap<u64, Option<SourceLocation>>,
}

impl LocationCache {
    /// The file name of `len` bytes at device address `ptr`.
    pub fn file(
        &mut self,
        ptr: u64,
        len: usize,
        read: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>,
    ) -> Option<String> {
        if ptr == 0 || len == 0 || len > MAX_FILE_BYTES {
            return None;
        }
        self.files
            .entry((ptr, len))
            .or_insert_with(|| read(ptr, len).and_then(|b| String::from_utf8(b).ok()))
            .clone()
    }

    /// The current access's location from a report's site fields.
    pub fn site(
        &mut self,
        ptr: u64,
        len: usize,
        line: u32,
        column: u32,
        read: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>,
    ) -> Option<SourceLocation> {
        Some(SourceLocation {
            file: self.file(ptr, len, read)?,
            line,
            column,
        })
    }

    /// The location a device `Location` at `addr` names.
    pub fn location(
        &mut self,
        addr: u64,
        layout: Option<LocationLayout>,
        read: &mut dyn FnMut(u64, usize) -> Option<Vec<u8>>,
    ) -> Option<SourceLocation> {
        let layout = layout?;
        if addr == 0 {
            return None;
        }
        if let Some(l) = self.locations.get(&addr) {
            return l.clone();
        }
        let resolved = read(addr, layout.size())
            .and_then(|b| layout.decode(&b))
            .and_then(|(ptr, len, line, column)| self.site(ptr, len, line, column, read));
        self.locations.insert(addr, resolved.clone());
        resolved
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device read simulated over host memory: the layout learnt from one
    /// `Location` decodes another.
    #[test]
    fn a_location_is_read_back_through_its_address() {
        let layout = LocationLayout::probe().expect("this compiler's Location is probeable");
        let here = Location::caller();
        let reads = std::cell::Cell::new(0);
        let mut read = |addr: u64, len: usize| {
            reads.set(reads.get() + 1);
            // SAFETY: the test only passes addresses of live host data.
            Some(unsafe { std::slice::from_raw_parts(addr as *const u8, len) }.to_vec())
        };
        let mut cache = LocationCache::default();
        let addr = here as *const Location<'_> as u64;
        let got = cache.location(addr, Some(layout), &mut read).unwrap();
        assert_eq!(got, SourceLocation::from_std(here));
        assert_eq!(cache.location(addr, Some(layout), &mut read), Some(got));
        assert_eq!(reads.get(), 2, "the Location and its file, once each");
        assert_eq!(cache.location(0, Some(layout), &mut read), None);
    }
}
