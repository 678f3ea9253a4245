//! The libtest command line the harness understands, so that `cargo test`
//! filters, `--list`, `--exact`, `--skip` and `--test-threads` work as
//! with the built-in harness.

/// A parsed command line.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Args {
    /// Names must contain one of these (all names when empty).
    pub(crate) filters: Vec<String>,
    /// Filters match whole names.
    pub(crate) exact: bool,
    /// Names containing one of these are left out.
    pub(crate) skip: Vec<String>,
    /// List the tests instead of running them.
    pub(crate) list: bool,
    /// Only `#[ignore]`d tests (the harness has none): run nothing.
    pub(crate) ignored_only: bool,
    /// One line per test, or a dot per test (`-q`, `--format terse`).
    pub(crate) terse: bool,
    /// Tests run at once; `None`: the machine's parallelism.
    pub(crate) threads: Option<usize>,
}

impl Args {
    /// Parses libtest's flags; flags that change nothing here
    /// (`--nocapture`, `--color`, ...) are accepted, unknown ones are an
    /// error naming them.
    pub(crate) fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut a = Args::default();
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
                _ => (arg.clone(), None),
            };
            let mut value = |name: &str| {
                inline
                    .clone()
                    .or_else(|| it.next())
                    .ok_or_else(|| format!("{name} needs a value"))
            };
            match flag.as_str() {
                "--exact" => a.exact = true,
                "--list" => a.list = true,
                "--ignored" => a.ignored_only = true,
                "-q" | "--quiet" => a.terse = true,
                "--skip" => a.skip.push(value("--skip")?),
                "--test-threads" => {
                    let v = value("--test-threads")?;
                    let n: usize = v.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        format!("--test-threads expects a positive integer, not {v:?}")
                    })?;
                    a.threads = Some(n);
                }
                "--format" => a.terse = value("--format")? == "terse",
                "--color" | "-Z" | "--logfile" | "--report-time" => {
                    if inline.is_none() && flag != "--report-time" {
                        value(&flag)?;
                    }
                }
                "--nocapture"
                | "--show-output"
                | "--include-ignored"
                | "--test"
                | "--bench"
                | "--ensure-time"
                | "--force-run-in-process" => {}
                f if f.starts_with('-') => {
                    return Err(format!("unknown option {f} (vigil's test harness)"));
                }
                _ => a.filters.push(arg),
            }
        }
        Ok(a)
    }

    /// Whether the test `name` is selected.
    pub(crate) fn selects(&self, name: &str) -> bool {
        let hit = |f: &String| {
            if self.exact {
                name == f
            } else {
                name.contains(f.as_str())
            }
        };
        (self.filters.is_empty() || self.filters.iter().any(hit)) && !self.skip.iter().any(hit)
    }
}

#[cfg(test)]
mod tests {
    use super::Args;

    fn parse(v: &[&str]) -> Result<Args, String> {
        Args::parse(v.iter().map(|s| s.to_string()))
    }

    #[test]
    fn libtest_flags_and_filters() {
        let a = parse(&[
            "axpy",
            "--test-threads=1",
            "--skip",
            "gpu::",
            "--nocapture",
            "-q",
        ])
        .unwrap();
        assert_eq!(a.filters, ["axpy"]);
        assert_eq!((a.threads, a.terse, a.exact), (Some(1), true, false));
        assert!(a.selects("cpu::axpy_small"));
        assert!(!a.selects("gpu::axpy_small"));
        assert!(!a.selects("cpu::reduce"));
        let exact = parse(&["--exact", "cpu::a"]).unwrap();
        assert!(exact.selects("cpu::a") && !exact.selects("cpu::ab"));
        assert!(parse(&[]).unwrap().selects("anything"));
    }

    #[test]
    fn bad_flags_are_errors_that_name_them() {
        assert!(parse(&["--frobnicate"])
            .unwrap_err()
            .contains("--frobnicate"));
        assert!(parse(&["--test-threads", "0"])
            .unwrap_err()
            .contains("positive"));
        assert!(parse(&["--skip"]).unwrap_err().contains("--skip"));
    }
}
