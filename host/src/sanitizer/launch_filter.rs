//! [`LaunchFilter`]: which launches of a sanitized context run the
//! sanitized entry, like compute-sanitizer's `--kernel-name`,
//! `--kernel-name-exclude`, `--launch-skip` and `--launch-count`.
//!
//! What is selected is said on [`LaunchFilter`].

use super::config::{err, ConfigError};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// One item of a kernel list: an exact name, or a `/regex/`.
///
/// ```
/// use vigil::KernelPattern;
/// let list = KernelPattern::parse_list("axpy, /^gemm_(f32|f64)$/").unwrap();
/// assert!(list[0].matches("axpy") && !list[0].matches("axpy2"));
/// assert!(list[1].matches("gemm_f32") && !list[1].matches("gemm_i8"));
/// ```
#[derive(Clone, Debug)]
pub enum KernelPattern {
    /// The kernel with exactly this name.
    Name(String),
    /// Kernels whose name the expression matches (anywhere, unless anchored).
    Regex(regex_lite::Regex),
}

impl PartialEq for KernelPattern {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (KernelPattern::Name(a), KernelPattern::Name(b)) => a == b,
            (KernelPattern::Regex(a), KernelPattern::Regex(b)) => a.as_str() == b.as_str(),
            _ => false,
        }
    }
}

impl Eq for KernelPattern {}

impl fmt::Display for KernelPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelPattern::Name(n) => f.write_str(n),
            KernelPattern::Regex(r) => write!(f, "/{}/", r.as_str()),
        }
    }
}

/// What a kernel list accepts, for error messages.
pub(crate) const LIST_SYNTAX: &str =
    "a comma-separated list of kernel names, or regular expressions written `/regex/`";

impl KernelPattern {
    /// Whether `kernel` is one this item names.
    pub fn matches(&self, kernel: &str) -> bool {
        match self {
            KernelPattern::Name(n) => n == kernel,
            KernelPattern::Regex(r) => r.is_match(kernel),
        }
    }

    /// One item: `/regex/` or a name (trimmed, not empty).
    pub fn parse(item: &str) -> Result<KernelPattern, String> {
        let item = item.trim();
        if item.is_empty() {
            return Err("an empty item".to_owned());
        }
        if let Some(body) = item.strip_prefix('/') {
            let Some(re) = body.strip_suffix('/') else {
                return Err(format!(
                    "`{item}` starts a regular expression without its closing `/`"
                ));
            };
            return regex_lite::Regex::new(re)
                .map(KernelPattern::Regex)
                .map_err(|e| format!("`{item}` is no regular expression: {e}"));
        }
        if item.chars().any(char::is_whitespace) {
            return Err(format!("`{item}` is no kernel name (it has spaces)"));
        }
        Ok(KernelPattern::Name(item.to_owned()))
    }

    /// A comma-separated list of items; a comma inside `/.../` belongs to
    /// the expression.
    pub fn parse_list(text: &str) -> Result<Vec<KernelPattern>, String> {
        split_items(text)
            .into_iter()
            .map(KernelPattern::parse)
            .collect()
    }
}

/// A kernel list from a variable's text.
pub(crate) fn parse_list(source_name: &str, text: &str) -> Result<Vec<KernelPattern>, ConfigError> {
    KernelPattern::parse_list(text)
        .map_err(|why| err(source_name, text, format!("{LIST_SYNTAX} ({why})")))
}

/// A kernel list from a builder option's items (at least one).
pub(crate) fn parse_items<S: AsRef<str>>(
    source_name: &str,
    items: impl IntoIterator<Item = S>,
) -> Result<Vec<KernelPattern>, ConfigError> {
    let items: Vec<S> = items.into_iter().collect();
    let shown = || {
        let all: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
        format!("{all:?}")
    };
    if items.is_empty() {
        return Err(err(
            source_name,
            shown(),
            "at least one kernel name or `/regex/`",
        ));
    }
    items
        .iter()
        .map(|i| KernelPattern::parse(i.as_ref()))
        .collect::<Result<_, _>>()
        .map_err(|why| {
            err(
                source_name,
                shown(),
                format!("kernel names or `/regex/` items ({why})"),
            )
        })
}

/// The items of a list: split at commas, except inside a `/regex/` item
/// (one that starts with `/` ends at the next `/` followed by a comma or
/// the end).
fn split_items(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut rest = text;
    loop {
        let item_start = rest.trim_start();
        let end = if item_start.starts_with('/') {
            let mut from = 1;
            let mut end = None;
            while let Some(at) = item_start[from..].find('/') {
                let close = from + at;
                let after = item_start[close + 1..].trim_start();
                if after.is_empty() || after.starts_with(',') {
                    end = item_start[close + 1..].find(',').map(|c| close + 1 + c);
                    if end.is_none() {
                        items.push(item_start);
                        return items;
                    }
                    break;
                }
                from = close + 1;
            }
            // An unterminated expression: the item is the rest (refused
            // by `parse`).
            end.or_else(|| item_start.find(','))
        } else {
            item_start.find(',')
        };
        match end {
            Some(comma) => {
                items.push(&item_start[..comma]);
                rest = &item_start[comma + 1..];
            }
            None => {
                items.push(item_start);
                return items;
            }
        }
    }
}

/// Which launches of a sanitized context run sanitized. The default
/// selects every launch.
///
/// A launch is *selected* when its kernel's name (the PTX entry name, as
/// reports print it) matches the include list (`VIGIL_SANITIZE_KERNELS`;
/// every kernel when there is none) and not the exclude list
/// (`VIGIL_SANITIZE_KERNELS_EXCLUDE`). Of the selected launches, counted
/// per context in issue order, the first `skip` (`VIGIL_LAUNCH_SKIP`) run
/// plain, then at most `count` (`VIGIL_LAUNCH_COUNT`) run sanitized, and
/// the rest plain again. Launches that are not selected run plain too.
///
/// A list is comma-separated; an item is an exact kernel name, or a
/// regular expression between slashes (`/^gemm_/`, matched anywhere in
/// the name unless anchored; the `regex-lite` syntax).
///
/// A plain launch of a sanitized context is ordered like any other work on
/// its stream; its own accesses are not checked (see
/// [`Context::launch_variant`](crate::Context::launch_variant)).
///
/// ```
/// let config = vigil::SanitizerConfig::builder()
///     .sanitize_kernels(["/^gemm_/"])
///     .exclude_kernels(["gemm_reference"])
///     .launch_skip(1)
///     .build()
///     .unwrap();
/// let filter = config.launch_filter();
/// assert!(filter.selects("gemm_f32") && !filter.selects("gemm_reference"));
/// assert!(!filter.selects("axpy"));
/// assert_eq!((filter.skip(), filter.count()), (1, None));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LaunchFilter {
    kernels: Option<Vec<KernelPattern>>,
    exclude: Vec<KernelPattern>,
    skip: u64,
    count: Option<u64>,
}

impl LaunchFilter {
    /// Only kernels that one of `patterns` names are selected (`None`:
    /// every kernel).
    pub(crate) fn with_kernels(mut self, patterns: Option<Vec<KernelPattern>>) -> Self {
        self.kernels = patterns;
        self
    }

    /// Kernels that one of `patterns` names are not selected.
    pub(crate) fn with_excluded(mut self, patterns: Vec<KernelPattern>) -> Self {
        self.exclude = patterns;
        self
    }

    /// The first `n` selected launches run plain.
    pub(crate) fn with_skip(mut self, n: u64) -> Self {
        self.skip = n;
        self
    }

    /// At most `n` selected launches (after the skipped ones) run
    /// sanitized; `None`: no limit.
    pub(crate) fn with_count(mut self, n: Option<u64>) -> Self {
        self.count = n;
        self
    }

    /// The include list, if any.
    pub fn kernels(&self) -> Option<&[KernelPattern]> {
        self.kernels.as_deref()
    }

    /// The exclude list.
    pub fn excluded(&self) -> &[KernelPattern] {
        &self.exclude
    }

    /// Selected launches that run plain before the first sanitized one.
    pub fn skip(&self) -> u64 {
        self.skip
    }

    /// The most selected launches that run sanitized.
    pub fn count(&self) -> Option<u64> {
        self.count
    }

    /// Whether every launch runs sanitized (the default).
    pub fn is_everything(&self) -> bool {
        *self == LaunchFilter::default()
    }

    /// Whether launches of `kernel` are selected (by name).
    pub fn selects(&self, kernel: &str) -> bool {
        let included = self
            .kernels
            .as_ref()
            .is_none_or(|list| list.iter().any(|p| p.matches(kernel)));
        included && !self.exclude.iter().any(|p| p.matches(kernel))
    }

    /// Whether the `n`-th selected launch (from 0) runs sanitized.
    fn sanitizes_nth(&self, n: u64) -> bool {
        n >= self.skip && self.count.is_none_or(|c| n - self.skip < c)
    }
}

/// A context's filter with its count of selected launches.
#[derive(Debug, Default)]
pub(crate) struct LaunchSelection {
    filter: LaunchFilter,
    selected: AtomicU64,
}

impl LaunchSelection {
    pub(crate) fn new(filter: LaunchFilter) -> LaunchSelection {
        LaunchSelection {
            filter,
            selected: AtomicU64::new(0),
        }
    }

    /// Whether some launches may run plain.
    pub(crate) fn is_everything(&self) -> bool {
        self.filter.is_everything()
    }

    /// Decides one launch of `kernel`, counting it when it is selected.
    pub(crate) fn sanitizes(&self, kernel: &str) -> bool {
        if self.filter.is_everything() {
            return true;
        }
        if !self.filter.selects(kernel) {
            return false;
        }
        let n = self.selected.fetch_add(1, Ordering::Relaxed);
        self.filter.sanitizes_nth(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn names(list: &[KernelPattern]) -> Vec<String> {
        list.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn lists_split_at_commas_outside_expressions() {
        let list = KernelPattern::parse_list(" axpy ,/^g{1,2}emm$/, /a,b/ ,copy").unwrap();
        assert_eq!(names(&list), ["axpy", "/^g{1,2}emm$/", "/a,b/", "copy"]);
        assert!(list[1].matches("ggemm") && !list[1].matches("gemm2"));
        assert!(list[2].matches("xa,by"));
        assert_eq!(names(&KernelPattern::parse_list("/x/").unwrap()), ["/x/"]);
        assert_eq!(
            names(&KernelPattern::parse_list("/a/b/").unwrap()),
            ["/a/b/"]
        );
    }

    #[test]
    fn malformed_lists_say_why() {
        for (text, why) in [
            ("", "empty item"),
            ("a,,b", "empty item"),
            ("a,", "empty item"),
            ("/open", "without its closing"),
            ("/(/", "no regular expression"),
            ("two words", "has spaces"),
        ] {
            let e = KernelPattern::parse_list(text).unwrap_err();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn include_and_exclude_lists_select_by_name() {
        let p = |t| KernelPattern::parse_list(t).unwrap();
        let f = LaunchFilter::default()
            .with_kernels(Some(p("/^gemm/,copy")))
            .with_excluded(p("gemm_slow"));
        assert!(f.selects("gemm_fast") && f.selects("copy"));
        assert!(!f.selects("gemm_slow") && !f.selects("axpy") && !f.selects("copy2"));
        let all_but = LaunchFilter::default().with_excluded(p("axpy"));
        assert!(all_but.selects("copy") && !all_but.selects("axpy"));
        assert!(LaunchFilter::default().is_everything() && !all_but.is_everything());
    }

    proptest! {
        /// Against a model: the selected launches, numbered in order,
        /// run sanitized exactly from `skip` on, `count` of them;
        /// unselected ones never do and do not count.
        #[test]
        fn skip_and_count_apply_to_selected_launches_in_order(
            launches in proptest::collection::vec(any::<bool>(), 0..40),
            skip in 0u64..8,
            count in proptest::option::of(0u64..8),
        ) {
            let filter = LaunchFilter::default()
                .with_kernels(Some(vec![KernelPattern::Name("k".to_owned())]))
                .with_skip(skip)
                .with_count(count);
            let selection = LaunchSelection::new(filter);
            let mut nth = 0u64;
            for selected in launches {
                let name = if selected { "k" } else { "other" };
                let want = selected && nth >= skip && count.is_none_or(|c| nth < skip + c);
                prop_assert_eq!(selection.sanitizes(name), want);
                nth += u64::from(selected);
            }
        }
    }
}
