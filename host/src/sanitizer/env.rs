//! Every `VIGIL_*` environment variable the project reads, in one list
//! ([`KNOWN_VARIABLES`], [`KNOWN_PREFIXES`]), and the warning for a
//! `VIGIL_*` variable that is none of them: a misspelt name
//! (`VIGIL_SANITISE=1`) would otherwise silently change nothing.
//!
//! [`ContextBuilder::env_vars`](crate::ContextBuilder::env_vars) (and so
//! [`Context::from_env`](crate::Context::from_env)) calls
//! [`warn_unknown_variables`], which scans the process environment once per
//! process and prints one line per unknown name on stderr, with the closest
//! known name when one is near.

use super::config::{
    ENV_ALLOC_CACHE, ENV_CLOCK_BUFFER_SIZE, ENV_DEVICE, ENV_DEVICE_RANKS, ENV_EXITCODE,
    ENV_HALT_ON_ERROR, ENV_LAUNCH_COUNT, ENV_LAUNCH_SKIP, ENV_LAUNCH_TIMEOUT, ENV_LEAN_ENTRIES,
    ENV_REPORT, ENV_REPORT_FORMAT, ENV_SANITIZE, ENV_SANITIZED_REGISTERS, ENV_SANITIZE_KERNELS,
    ENV_SANITIZE_KERNELS_EXCLUDE, ENV_SEED, ENV_SHADOW_POOL_RECORDS, ENV_SHAREABLE_HANDLES,
    ENV_SUPPRESSIONS, ENV_TRUST_TYPES,
};
use std::sync::Once;

/// Every `VIGIL_*` variable read anywhere in the project (the host crate,
/// the build helper, the tests and examples, the scripts), with what it
/// does. Add a variable here when something starts reading it.
pub const KNOWN_VARIABLES: &[(&str, &str)] = &[
    (ENV_DEVICE, "which device a context opens"),
    (ENV_SANITIZE, "race sanitizer on or off"),
    (ENV_SEED, "seed of the sanitizer's random evictions"),
    (ENV_CLOCK_BUFFER_SIZE, "snapshots per sanitizer thread"),
    (ENV_HALT_ON_ERROR, "stop a launch at its first race"),
    (
        ENV_TRUST_TYPES,
        "skip the checks a launch's proven views rule out",
    ),
    (
        ENV_REPORT,
        "file that race reports are written to (JSON Lines or SARIF)",
    ),
    (
        ENV_REPORT_FORMAT,
        "the report file's format (json or sarif)",
    ),
    (ENV_SUPPRESSIONS, "file of races to leave out of reports"),
    (ENV_SANITIZE_KERNELS, "kernels whose launches run sanitized"),
    (
        ENV_SANITIZE_KERNELS_EXCLUDE,
        "kernels whose launches run plain",
    ),
    (ENV_LAUNCH_SKIP, "selected launches that run plain first"),
    (
        ENV_LAUNCH_COUNT,
        "most selected launches that run sanitized",
    ),
    (
        ENV_EXITCODE,
        "the process's exit status when races were reported",
    ),
    (ENV_DEVICE_RANKS, "device ordinals in rank order"),
    (
        ENV_SHADOW_POOL_RECORDS,
        "inflated shadow records per device",
    ),
    (
        ENV_SANITIZED_REGISTERS,
        "register cap of sanitized GPU entries",
    ),
    (
        ENV_LEAN_ENTRIES,
        "sanitized GPU entries start on the build at 64 registers",
    ),
    (ENV_ALLOC_CACHE, "the shadow allocator's caching pool"),
    (ENV_SHAREABLE_HANDLES, "POSIX-fd shareable allocations"),
    (
        ENV_LAUNCH_TIMEOUT,
        "how long a launch or synchronisation may take",
    ),
    (
        "VIGIL_REQUIRE_GPU",
        "GPU tests fail instead of skipping without a GPU",
    ),
    ("VIGIL_EXAMPLE_SEED", "input seed of the examples"),
    (
        "VIGIL_CUDA_ARCH",
        "the PTX target architecture of the build",
    ),
    (
        "VIGIL_TEMPLATE_TARGET_DIR",
        "target directory of the template check",
    ),
    (
        "VIGIL_SCALE_PROGRAMS",
        "programs of the engine's scale sweep",
    ),
    (
        "VIGIL_GRID_BARRIER_BLOCKS",
        "blocks of the grid-barrier scenario",
    ),
    (
        "VIGIL_SPIN_LOCK_BLOCKS",
        "most blocks taking the spin-lock scenario's lock",
    ),
    (
        "VIGIL_GPU_RUN_TIMEOUT",
        "per-binary time limit of the GPU run script",
    ),
    (
        "VIGIL_SASS_LEAN",
        "sass-stats.sh at the lean entries' register cap",
    ),
];

/// Prefixes of variable families: `VIGIL_PTX_<LIB>` (the PTX path a
/// build script sets), `VIGIL_PTX_TARGET_DIR` (the nested build's target
/// directory), `VIGIL_FAILED_VIGIL_PTX_<LIB>` (a kernel crate whose PTX
/// build failed) and `VIGIL_REPLAY_<PART>` (what the race engine's model
/// test replays of a failing program, with `VIGIL_SEED`).
pub const KNOWN_PREFIXES: &[&str] = &["VIGIL_PTX_", "VIGIL_FAILED_", "VIGIL_REPLAY_"];

/// True for a variable the project reads.
pub fn is_known(name: &str) -> bool {
    KNOWN_VARIABLES.iter().any(|(n, _)| *n == name)
        || KNOWN_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Edit distance (insertions, deletions, substitutions, transpositions of
/// neighbours) between two ASCII-ish names.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // Three rows of the optimal-string-alignment table.
    let mut before: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(before[j - 2] + 1);
            }
            cur[j] = d;
        }
        std::mem::swap(&mut before, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The known name closest to `name`, when it is close enough to be a
/// likely misspelling (at most a third of the name's letters after
/// `VIGIL_` differ).
pub fn closest_known(name: &str) -> Option<&'static str> {
    let stem = name.strip_prefix("VIGIL_").unwrap_or(name).len().max(1);
    KNOWN_VARIABLES
        .iter()
        .map(|(n, _)| (distance(name, n), *n))
        .min()
        .filter(|(d, _)| *d * 3 <= stem)
        .map(|(_, n)| n)
}

/// One line per `VIGIL_*` name in `names` that the project does not read,
/// in the order given, each with the closest known name if there is one.
pub fn unknown_variable_warnings<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    names
        .into_iter()
        .filter(|n| n.starts_with("VIGIL_") && !is_known(n))
        .map(|n| match closest_known(n) {
            Some(k) => {
                format!("vigil: unknown environment variable {n} (ignored); did you mean {k}?")
            }
            None => format!(
                "vigil: unknown environment variable {n} (ignored); Vigil reads {}",
                KNOWN_VARIABLES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })
        .collect()
}

/// Prints [`unknown_variable_warnings`] for the process environment on
/// stderr, the first time it is called in the process (later calls do
/// nothing).
pub fn warn_unknown_variables() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let names: Vec<String> = std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .collect();
        for line in unknown_variable_warnings(names.iter().map(String::as_str)) {
            eprintln!("{line}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Misspellings and their closest names (the tests use these names on
    /// purpose; the repository scan below ignores them).
    const TYPOS: &[(&str, &str)] = &[
        ("VIGIL_SANITISE", "VIGIL_SANITIZE"),
        ("VIGIL_SANITZE", "VIGIL_SANITIZE"),
        ("VIGIL_SEDE", "VIGIL_SEED"),
        ("VIGIL_HALT_ON_ERRORS", "VIGIL_HALT_ON_ERROR"),
        ("VIGIL_REPROT", "VIGIL_REPORT"),
        ("VIGIL_DEVCIE", "VIGIL_DEVICE"),
        ("VIGIL_CLOCK_BUFER_SIZE", "VIGIL_CLOCK_BUFFER_SIZE"),
        ("VIGIL_LAUNCH_TIMEOUTS", "VIGIL_LAUNCH_TIMEOUT"),
    ];

    /// Other names tests use as unknown variables.
    const UNRELATED: &[&str] = &["VIGIL_UNRELATED", "VIGIL_COLOUR"];

    #[test]
    fn misspellings_name_the_closest_variable() {
        for &(typo, known) in TYPOS {
            assert_eq!(closest_known(typo), Some(known), "{typo}");
            let w = unknown_variable_warnings([typo]);
            assert_eq!(w.len(), 1);
            assert!(
                w[0].contains(typo) && w[0].ends_with(&format!("did you mean {known}?")),
                "{}",
                w[0]
            );
        }
    }

    #[test]
    fn known_names_prefixes_and_other_variables_are_not_reported() {
        let names = [
            "VIGIL_SANITIZE",
            "VIGIL_PTX_MY_KERNELS",
            "VIGIL_PTX_TARGET_DIR",
            "VIGIL_REQUIRE_GPU",
            "PATH",
            "CUDA_VISIBLE_DEVICES",
        ];
        assert!(unknown_variable_warnings(names).is_empty());
        for (n, _) in KNOWN_VARIABLES {
            assert!(is_known(n) && n.starts_with("VIGIL_"), "{n}");
        }
    }

    #[test]
    fn a_name_near_nothing_lists_the_known_ones() {
        assert_eq!(closest_known("VIGIL_COLOUR"), None);
        let w = unknown_variable_warnings(["VIGIL_COLOUR"]);
        assert!(w[0].contains("VIGIL_SANITIZE") && w[0].contains("VIGIL_REPORT"));
    }

    #[test]
    fn distance_counts_edits() {
        assert_eq!(distance("abc", "abc"), 0);
        assert_eq!(distance("abc", "acb"), 1);
        assert_eq!(distance("abc", "ab"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    /// Every `VIGIL_*` name the repository's sources read is in the list
    /// (or a known family), so a new variable cannot be forgotten here.
    #[test]
    fn the_list_covers_every_variable_in_the_repository() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut missing = Vec::new();
        let mut stack = vec![root];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                let name = e.file_name().to_string_lossy().into_owned();
                if p.is_dir() {
                    if !name.starts_with('.') && name != "target" && name != "fuzz" {
                        stack.push(p);
                    }
                    continue;
                }
                let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
                if !matches!(ext, "rs" | "sh" | "toml") {
                    continue;
                }
                let Ok(text) = std::fs::read_to_string(&p) else {
                    continue;
                };
                for (i, _) in text.match_indices("VIGIL_") {
                    // Inside a longer name (`VIGIL_PTX_VIGIL_KERNELS`).
                    let before = text[..i].chars().next_back();
                    if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                        continue;
                    }
                    let v: String = text[i..]
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    // `VIGIL_` alone, or a prefix spelt `VIGIL_PTX_<LIB>`.
                    let deliberate =
                        TYPOS.iter().any(|(t, _)| *t == v) || UNRELATED.contains(&v.as_str());
                    if v.len() > "VIGIL_".len() && !v.ends_with('_') && !is_known(&v) && !deliberate
                    {
                        missing.push(format!("{v} ({})", p.display()));
                    }
                }
            }
        }
        assert!(missing.is_empty(), "not in KNOWN_VARIABLES: {missing:?}");
    }
}
