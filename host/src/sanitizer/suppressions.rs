//! [`Suppressions`]: races to leave out of a context's reports, in the
//! spirit of ThreadSanitizer's suppressions file (`VIGIL_SUPPRESSIONS`,
//! [`SanitizerConfigBuilder::suppressions`](super::config::SanitizerConfigBuilder::suppressions)).
//!
//! The syntax is on [`Suppressions`].

use super::config::{err, ConfigError};
use super::report::{RaceReport, SourceLocation};
use std::path::Path;

/// What a suppression line looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Kernel,
    Location,
    Alloc,
    Any,
}

/// One suppression: a line of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    /// The line as written (trimmed).
    text: String,
    /// Its line number, from 1.
    line: usize,
    field: Field,
    pattern: Glob,
}

/// A parsed suppressions file.
///
/// One suppression per line; blank lines and lines starting with `#` are
/// ignored:
///
/// ```text
/// # a known race in a vendored kernel
/// race:kernel=histogram_*
/// race:location=*/third_party/scan.rs:4?
/// race:alloc=*/src/main.rs:120
/// race:legacy_reduce
/// ```
///
/// | form | suppresses a race whose |
/// |------|--------------------------|
/// | `race:kernel=GLOB` | kernel (either access's) matches |
/// | `race:location=GLOB` | either access's `file:line` (or `file:line:column`) matches |
/// | `race:alloc=GLOB` | allocation's site (where the host code allocated the buffer: `file:line` or `file:line:column`) matches |
/// | `race:GLOB` | kernel, either location or the allocation site matches |
///
/// A glob matches the whole text: `*` stands for any run of characters
/// (`/` included), `?` for one. File names are the compiler's (as the
/// reports print them), so a pattern usually starts with `*/`.
/// Suppression happens on the host, after decoding, for both backends; a
/// suppressed race is counted, never silently dropped (see
/// [`RaceReports::suppressed`](super::report::RaceReports::suppressed)).
///
/// ```
/// use vigil::Suppressions;
/// let s = Suppressions::parse("# known\nrace:kernel=legacy_*\n", "inline").unwrap();
/// assert_eq!(s.len(), 1);
/// let e = Suppressions::parse("race:kernal=x", "sup.txt").unwrap_err();
/// assert!(e.to_string().starts_with("sup.txt:1:"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suppressions {
    /// Where they came from (a path, or what the caller named them).
    origin: String,
    rules: Vec<Rule>,
}

/// A suppressions file that could not be read or parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SuppressionError {
    /// The file could not be read.
    #[error("{path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A line that is no suppression.
    #[error("{origin}:{line}: {reason} in `{text}`")]
    Line {
        /// The file (or name given to [`Suppressions::parse`]).
        origin: String,
        /// The line, from 1.
        line: usize,
        /// The line's text.
        text: String,
        /// What is wrong.
        reason: String,
    },
}

/// The accepted forms, for error messages.
pub(crate) const SYNTAX: &str = "lines `race:kernel=GLOB`, `race:location=GLOB` (file:line), \
     `race:alloc=GLOB` (the allocation's file:line) or `race:GLOB`; `#` comments and blank lines";

impl Suppressions {
    /// Parses `text` (the content of a suppressions file); `origin` names
    /// it in errors and in the exit summary.
    pub fn parse(text: &str, origin: &str) -> Result<Suppressions, SuppressionError> {
        let mut rules = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = |reason: String| SuppressionError::Line {
                origin: origin.to_owned(),
                line: i + 1,
                text: line.to_owned(),
                reason,
            };
            let Some((kind, rest)) = line.split_once(':') else {
                return Err(bad(format!(
                    "no `race:` before the pattern (expected {SYNTAX})"
                )));
            };
            if kind.trim() != "race" {
                return Err(bad(format!(
                    "unknown suppression type `{}` (Vigil suppresses `race` reports)",
                    kind.trim()
                )));
            }
            let rest = rest.trim();
            let (field, pattern) = match rest.split_once('=') {
                Some((key, pattern)) => {
                    let field = match key.trim() {
                        "kernel" => Field::Kernel,
                        "location" => Field::Location,
                        "alloc" => Field::Alloc,
                        other => {
                            return Err(bad(format!(
                                "unknown key `{other}` (expected kernel, location or alloc)"
                            )))
                        }
                    };
                    (field, pattern.trim())
                }
                None => (Field::Any, rest),
            };
            if pattern.is_empty() {
                return Err(bad("empty pattern".to_owned()));
            }
            if pattern.chars().any(char::is_whitespace) {
                return Err(bad(
                    "a pattern has no spaces (a comment takes a line of its own)".to_owned(),
                ));
            }
            rules.push(Rule {
                text: line.to_owned(),
                line: i + 1,
                field,
                pattern: Glob::new(pattern),
            });
        }
        Ok(Suppressions {
            origin: origin.to_owned(),
            rules,
        })
    }

    /// Reads and parses the file at `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Suppressions, SuppressionError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| SuppressionError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Suppressions::parse(&text, &path.display().to_string())
    }

    /// Where the suppressions came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Number of suppressions.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// True without any suppression (a file of comments).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The first suppression that matches `report`, described as the
    /// exit summary names it (`` `race:kernel=x` (sup.txt:3) ``).
    pub fn matching(&self, report: &RaceReport) -> Option<String> {
        self.rules
            .iter()
            .find(|r| r.matches(report))
            .map(|r| format!("`{}` ({}:{})", r.text, self.origin, r.line))
    }
}

/// A suppressions file's error as the variable's (or option's).
pub(crate) fn suppression_error(
    source_name: &str,
    path: &Path,
    e: SuppressionError,
) -> ConfigError {
    err(
        source_name,
        path.display(),
        format!("a readable suppressions file of {SYNTAX} ({e})"),
    )
}

impl Rule {
    fn matches(&self, r: &RaceReport) -> bool {
        let kernel = || {
            std::iter::once(r.kernel.as_str())
                .chain(r.prior.kernel.as_deref())
                .any(|k| self.pattern.matches(k))
        };
        let at = |l: Option<&SourceLocation>| {
            l.is_some_and(|l| {
                self.pattern.matches(&format!("{}:{}", l.file, l.line))
                    || self.pattern.matches(&l.to_string())
            })
        };
        let location = || at(r.current.location.as_ref()) || at(r.prior.location.as_ref());
        let alloc = || at(r.allocation.as_ref().and_then(|a| a.site.as_ref()));
        match self.field {
            Field::Kernel => kernel(),
            Field::Location => location(),
            Field::Alloc => alloc(),
            Field::Any => kernel() || location() || alloc(),
        }
    }
}

/// A glob over a whole text: `*` any run of characters, `?` one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Glob(Vec<char>);

impl Glob {
    pub(crate) fn new(pattern: &str) -> Glob {
        Glob(pattern.chars().collect())
    }

    /// Whether the glob matches all of `text` (linear backtracking over
    /// the last `*`: at most `pattern × text` steps).
    pub(crate) fn matches(&self, text: &str) -> bool {
        let (p, t): (&[char], Vec<char>) = (&self.0, text.chars().collect());
        let (mut i, mut j) = (0, 0);
        // The last `*` seen and the text position it is tried at.
        let mut star: Option<(usize, usize)> = None;
        while j < t.len() {
            match p.get(i) {
                Some('*') => {
                    star = Some((i, j));
                    i += 1;
                }
                Some(&c) if c == '?' || c == t[j] => {
                    i += 1;
                    j += 1;
                }
                _ => match star {
                    Some((si, sj)) => {
                        // Let the `*` take one more character.
                        star = Some((si, sj + 1));
                        i = si + 1;
                        j = sj + 1;
                    }
                    None => return false,
                },
            }
        }
        p[i..].iter().all(|&c| c == '*')
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sanitizer::report::RaceAllocation;
    use crate::sanitizer::report_json::tests::sample_report;
    use proptest::prelude::*;

    /// The reference: the glob as an anchored regular expression.
    fn regex_of(pattern: &str) -> regex_lite::Regex {
        let mut re = String::from("^");
        for c in pattern.chars() {
            match c {
                '*' => re.push_str("(?s:.*)"),
                '?' => re.push_str("(?s:.)"),
                c => re.push_str(&regex_lite::escape(&c.to_string())),
            }
        }
        re.push('$');
        regex_lite::Regex::new(&re).unwrap()
    }

    proptest! {
        /// The matcher agrees with the regular expression on small
        /// alphabets, where stars have many ways to match.
        #[test]
        fn globs_match_as_their_regular_expression(
            pattern in "[ab*?/]{0,8}",
            text in "[ab/]{0,12}",
        ) {
            prop_assert_eq!(Glob::new(&pattern).matches(&text), regex_of(&pattern).is_match(&text));
        }
    }

    fn with(report: impl FnOnce(&mut RaceReport)) -> RaceReport {
        let mut r = sample_report();
        report(&mut r);
        r
    }

    #[test]
    fn each_form_matches_its_field() {
        // sample_report: kernel `reader` after `writer`, at
        // src/kernels.rs:12:9 after :8:9, allocated at :3:9.
        let r = sample_report();
        let s = |text: &str| Suppressions::parse(text, "s.txt").unwrap();
        for hit in [
            "race:kernel=reader",
            "race:kernel=writ*",
            "race:location=src/kernels.rs:12",
            "race:location=*/kernels.rs:8",
            "race:location=*kernels.rs:8:9",
            "race:alloc=*:3",
            "race:reader",
            "race:*kernels.rs:1?",
        ] {
            let rule = s(&format!("# comment\n\n  {hit}  \n")).matching(&r);
            assert_eq!(
                rule.as_deref(),
                Some(&*format!("`{hit}` (s.txt:3)")),
                "{hit}"
            );
        }
        for miss in [
            "race:kernel=read",
            "race:location=src/kernels.rs:1",
            "race:location=*:3",
            "race:alloc=*:12",
            "race:kernel=*kernels.rs*",
            "race:other",
        ] {
            assert_eq!(s(miss).matching(&r), None, "{miss}");
        }
        // No allocation site, no prior kernel or location: only what is there.
        let bare = with(|r| {
            r.allocation = Some(RaceAllocation {
                site: None,
                ..r.allocation.clone().unwrap()
            });
            r.prior.kernel = None;
            r.prior.location = None;
        });
        assert_eq!(s("race:alloc=*").matching(&bare), None);
        assert_eq!(s("race:kernel=writer").matching(&bare), None);
        assert_eq!(s("race:location=*:8").matching(&bare), None);
        assert!(s("race:location=*:12").matching(&bare).is_some());
    }

    #[test]
    fn malformed_lines_name_the_file_and_line() {
        for (text, reason) in [
            ("kernel=x", "no `race:`"),
            ("deadlock:x", "unknown suppression type `deadlock`"),
            ("race:kernal=x", "unknown key `kernal`"),
            ("race:kernel=", "empty pattern"),
            ("race:", "empty pattern"),
            ("race:kernel=x # why", "no spaces"),
        ] {
            let e =
                Suppressions::parse(&format!("# ok\nrace:fine\n{text}\n"), "sup.txt").unwrap_err();
            let msg = e.to_string();
            assert!(msg.starts_with("sup.txt:3: "), "{msg}");
            assert!(msg.contains(reason) && msg.contains(text), "{msg}");
        }
        let e = Suppressions::from_file("/nonexistent/vigil.supp").unwrap_err();
        assert!(
            e.to_string().starts_with("/nonexistent/vigil.supp: "),
            "{e}"
        );
    }
}
