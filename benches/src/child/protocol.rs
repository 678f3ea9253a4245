//! The lines a measuring child prints, one per event, tab-separated after
//! [`TAG`], so that they can be picked out of a tool's own output.

use crate::cases::NAMES;
use crate::timing::Timing;
use std::io::Write;

/// The first field of every protocol line.
pub const TAG: &str = "vigil-bench-child";

/// One event of a child's run.
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    /// The case's set-up begins (inputs, buffers).
    Case(&'static str),
    /// Its first launch begins: the per-case limit counts from here.
    Launch(&'static str),
    /// Its first launch ended after this many ms (host wall time).
    Launched(&'static str, f64),
    /// Its results checked: the largest scaled error, or the mismatch.
    Check(&'static str, Result<f64, String>),
    /// One timed repeat.
    Repeat(&'static str, Timing),
    /// The case failed.
    Error(&'static str, String),
}

/// Tabs and newlines would split a message into fields or lines.
fn one_field(s: &str) -> String {
    s.replace(['\t', '\n'], " ")
}

impl Line {
    /// The case the line is about.
    pub fn case(&self) -> &'static str {
        match self {
            Line::Case(c)
            | Line::Launch(c)
            | Line::Launched(c, _)
            | Line::Check(c, _)
            | Line::Repeat(c, _)
            | Line::Error(c, _) => c,
        }
    }

    /// The line's text, without the newline.
    pub fn text(&self) -> String {
        let body = match self {
            Line::Case(c) => format!("case\t{c}"),
            Line::Launch(c) => format!("launch\t{c}"),
            Line::Launched(c, ms) => format!("launched\t{c}\t{ms}"),
            Line::Check(c, Ok(err)) => format!("check\t{c}\tok\t{err}"),
            Line::Check(c, Err(e)) => format!("check\t{c}\tmismatch\t{}", one_field(e)),
            Line::Repeat(c, t) => format!(
                "repeat\t{c}\t{}\t{}\t{}\t{}\t{}",
                t.median_ms, t.min_ms, t.max_ms, t.wall_ms, t.launches
            ),
            Line::Error(c, e) => format!("error\t{c}\t{}", one_field(e)),
        };
        format!("{TAG}\t{body}")
    }

    /// Prints the line and flushes, so that the parent sees it before the
    /// next (possibly endless) launch.
    pub fn emit(&self) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", self.text());
        let _ = out.flush();
    }

    /// Reads a protocol line; `None` for any other line (a tool's output)
    /// or an unknown case.
    pub fn parse(line: &str) -> Option<Line> {
        let fields: Vec<&str> = line.strip_prefix(TAG)?.split('\t').skip(1).collect();
        let case = NAMES.iter().copied().find(|&n| Some(&n) == fields.get(1))?;
        let num = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok());
        Some(match (fields[0], fields.len()) {
            ("case", 2) => Line::Case(case),
            ("launch", 2) => Line::Launch(case),
            ("launched", 3) => Line::Launched(case, num(2)?),
            ("check", 4) if fields[2] == "ok" => Line::Check(case, Ok(num(3)?)),
            ("check", 4) => Line::Check(case, Err(fields[3].to_owned())),
            ("repeat", 7) => Line::Repeat(
                case,
                Timing {
                    median_ms: num(2)?,
                    min_ms: num(3)?,
                    max_ms: num(4)?,
                    wall_ms: num(5)?,
                    launches: fields[6].parse().ok()?,
                },
            ),
            ("error", 3) => Line::Error(case, fields[2].to_owned()),
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_reads_back_as_written() {
        let t = Timing {
            median_ms: 1.5,
            min_ms: 1.25,
            max_ms: 2.0,
            wall_ms: 1.75,
            launches: 30,
        };
        for line in [
            Line::Case("copy"),
            Line::Launch("axpy"),
            Line::Launched("scan", 12.5),
            Line::Check("sgemm", Ok(3e-7)),
            Line::Check("sgemm", Err("out[3] wrong".to_owned())),
            Line::Repeat("counter", t),
            Line::Error("softmax", "launch failed".to_owned()),
        ] {
            assert_eq!(Line::parse(&line.text()), Some(line.clone()), "{line:?}");
        }
    }

    #[test]
    fn other_lines_and_unknown_cases_are_not_protocol() {
        assert_eq!(Line::parse("========= ERROR SUMMARY: 0 errors"), None);
        assert_eq!(Line::parse("vigil-bench-child\tcase\tnot_a_case"), None);
        assert_eq!(
            Line::parse("vigil-bench-child\terror\tcopy\ta\tb"),
            None,
            "a tab in a message is a malformed line"
        );
        assert_eq!(
            Line::Error("copy", "a\tb\nc".to_owned()).text(),
            "vigil-bench-child\terror\tcopy\ta b c"
        );
    }
}
