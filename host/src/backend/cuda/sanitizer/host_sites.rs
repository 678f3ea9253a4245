//! Host call sites of sanitized copies and fills, as the device sees them.
//!
//! A kernel's accesses name their `#[track_caller]` `Location` by its
//! address in the module's device memory. A copy's location is the host
//! code that issued it, a host `Location` the device cannot point to: the
//! range-access entry gets a *tag* instead, `HOST_SITE_TAG` plus an
//! index into this table, and carries it where a kernel carries its
//! `Location` address and file pointer. The resolver maps tags back
//! ([`HostSites::location`], [`HostSites::file`]); device addresses never
//! have the tag bit (user-space addresses are below 2^57).

use std::collections::HashMap;
use std::panic::Location;

use crate::sanitizer::report::SourceLocation;
use vigil_shared::gpu::HOST_SITE_TAG;

/// The call sites of the transfers checked so far, each once.
#[derive(Debug, Default)]
pub(crate) struct HostSites {
    sites: Vec<&'static Location<'static>>,
    index: HashMap<(&'static str, u32, u32), u64>,
}

impl HostSites {
    /// The tag of `site` (the same for every transfer issued there).
    pub fn tag(&mut self, site: &'static Location<'static>) -> u64 {
        let key = (site.file(), site.line(), site.column());
        let sites = &mut self.sites;
        *self.index.entry(key).or_insert_with(|| {
            sites.push(site);
            HOST_SITE_TAG | (sites.len() as u64 - 1)
        })
    }

    /// True when `value` is a tag (not a device address).
    pub fn is_tag(value: u64) -> bool {
        value & HOST_SITE_TAG != 0
    }

    fn site(&self, tag: u64) -> Option<&'static Location<'static>> {
        if !Self::is_tag(tag) {
            return None;
        }
        let i = usize::try_from(tag & !HOST_SITE_TAG).ok()?;
        self.sites.get(i).copied()
    }

    /// The call site a tag names.
    pub fn location(&self, tag: u64) -> Option<SourceLocation> {
        self.site(tag).map(SourceLocation::from_std)
    }

    /// The file of the call site a tag names.
    pub fn file(&self, tag: u64) -> Option<String> {
        self.site(tag).map(|s| s.file().to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_names_its_call_site_and_nothing_else_does() {
        let mut sites = HostSites::default();
        let (a, b) = (Location::caller(), Location::caller());
        let ta = sites.tag(a);
        assert_eq!(sites.tag(a), ta, "one tag per call site");
        let tb = sites.tag(b);
        assert_ne!(ta, tb);
        assert!(HostSites::is_tag(ta) && HostSites::is_tag(tb));
        assert_eq!(sites.location(tb), Some(SourceLocation::from_std(b)));
        assert_eq!(sites.file(ta).as_deref(), Some(a.file()));
        // A device address, or a tag never handed out, names nothing.
        assert_eq!(sites.location(0x7f00_0000_1000), None);
        assert_eq!(sites.location(HOST_SITE_TAG | 99), None);
    }
}
