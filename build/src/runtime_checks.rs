//! The check behind `#[kernel(no_runtime_checks)]`: the plain entry of
//! such a kernel carries a marker comment, and must keep no `trap` (the
//! end of every bounds check, `unwrap` or other panic the compiler could
//! not prove unreachable). Run on the PTX after every build, so a check
//! left in a kernel that promised none is a build error naming the
//! kernel and, when the PTX has line information, where the checks are.

use std::collections::HashMap;
use std::fmt;

/// The comment `#[kernel(no_runtime_checks)]` puts in a plain entry
/// (`vigil_device::kernel::__no_runtime_checks_marker`).
pub const MARKER: &str = "vigil:no_runtime_checks";

/// A `#[kernel(no_runtime_checks)]` kernel whose plain entry keeps checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeptChecks {
    /// The kernel (its PTX entry).
    pub kernel: String,
    /// Its `trap`s.
    pub traps: usize,
    /// Where they come from (`file:line:column`), when the PTX has line
    /// information; each place once, in order.
    pub sites: Vec<String>,
}

impl fmt::Display for KeptChecks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel `{}` is #[kernel(no_runtime_checks)] but its plain entry keeps {} runtime \
             check(s)",
            self.kernel, self.traps
        )?;
        if self.sites.is_empty() {
            write!(f, " (build with PtxBuilder::line_info(true) to see where)")
        } else {
            write!(f, " from {}", self.sites.join(", "))
        }
    }
}

/// Every marked entry of `ptx` that keeps a `trap`.
pub fn kept_checks(ptx: &str) -> Vec<KeptChecks> {
    let files = file_names(ptx);
    let mut out = Vec::new();
    let mut rest = ptx;
    while let Some(at) = rest.find(".entry ") {
        let entry = &rest[at + ".entry ".len()..];
        let name: String = entry
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '$')
            .collect();
        let end = entry.find("\n}").map_or(entry.len(), |e| e + 2);
        let body = &entry[..end];
        rest = &entry[end..];
        if !body.contains(MARKER) {
            continue;
        }
        let mut traps = 0;
        let mut sites: Vec<String> = Vec::new();
        let mut last_loc = None;
        for line in body.lines().map(str::trim) {
            if let Some(loc) = line.strip_prefix(".loc") {
                last_loc = Some(loc.to_owned());
            } else if line.starts_with("trap") {
                traps += 1;
                if let Some(site) = last_loc.as_deref().and_then(|l| site(l, &files)) {
                    if !sites.contains(&site) {
                        sites.push(site);
                    }
                }
            }
        }
        if traps > 0 {
            out.push(KeptChecks {
                kernel: name,
                traps,
                sites,
            });
        }
    }
    out
}

/// The `.file` directives: number to path.
fn file_names(ptx: &str) -> HashMap<String, String> {
    ptx.lines()
        .filter_map(|l| {
            let rest = l.trim().strip_prefix(".file")?.trim();
            let (number, path) = rest.split_once(char::is_whitespace)?;
            let path = path.trim().split('"').nth(1)?;
            Some((number.to_owned(), path.to_owned()))
        })
        .collect()
}

/// `file:line:column` of a `.loc` directive's operands (`1 31 9`, maybe
/// followed by attributes).
fn site(loc: &str, files: &HashMap<String, String>) -> Option<String> {
    let mut parts = loc.split_whitespace();
    let (file, line, col) = (parts.next()?, parts.next()?, parts.next()?);
    let path = files.get(file)?;
    Some(format!("{path}:{line}:{col}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PTX: &str = r#"
.visible .entry clean(
	.param .u64 clean_param_0
)
{
	// begin inline asm
	// vigil:no_runtime_checks
	// end inline asm
	ret;
}
.visible .entry checked(
	.param .u64 checked_param_0
)
{
	.loc	1 12 5
	// begin inline asm
	// vigil:no_runtime_checks
	// end inline asm
	.loc	1 14 9
	@%p1 bra 	$L__BB1_2;
	ret;
$L__BB1_2:
	.loc	2 40 13 // device/src/global.rs:40:13
	trap; exit;
	.loc	1 14 9
	trap; exit;
}
.visible .entry unmarked(
	.param .u64 unmarked_param_0
)
{
	trap; exit;
}
.visible .entry checked__vigil(
	.param .u64 checked__vigil_param_0
)
{
	trap; exit;
}
	.file	1 "/src/kernels/src/lib.rs"
	.file	2 "/src/device/src/global.rs"
"#;

    #[test]
    fn only_marked_entries_with_traps_are_reported_with_their_sites() {
        let kept = kept_checks(PTX);
        assert_eq!(
            kept,
            [KeptChecks {
                kernel: "checked".into(),
                traps: 2,
                sites: vec![
                    "/src/device/src/global.rs:40:13".into(),
                    "/src/kernels/src/lib.rs:14:9".into()
                ],
            }]
        );
        assert_eq!(
            kept[0].to_string(),
            "kernel `checked` is #[kernel(no_runtime_checks)] but its plain entry keeps 2 runtime \
             check(s) from /src/device/src/global.rs:40:13, /src/kernels/src/lib.rs:14:9"
        );
    }

    #[test]
    fn without_line_information_the_count_says_how_to_find_them() {
        let ptx = PTX.replace(".loc", "// no loc");
        let kept = kept_checks(&ptx);
        assert_eq!(kept.len(), 1);
        assert!(kept[0].sites.is_empty());
        assert!(kept[0]
            .to_string()
            .ends_with("(build with PtxBuilder::line_info(true) to see where)"));
    }
}
