//! What a process says and how it exits when races were reported, on the
//! CPU backend: races nobody collected (a context dropped, a
//! `synchronize()` error ignored) are printed at exit, suppression counts
//! too, and `VIGIL_EXITCODE=N` makes the process exit with `N` when any
//! race was reported, collected or not. Each case runs this test binary
//! again as a child and looks at its status and stderr.

mod common;

use common::TwoStreams;
use std::process::Output;
use vigil::{Context, Error};

/// The variable that tells the child which case to run.
const CASE: &str = "EXIT_STATUS_CASE";

/// A race between `write_one` on one stream and `read_one` on another,
/// on a sanitized CPU context built from the environment.
fn racy() -> TwoStreams {
    let ctx = Context::builder()
        .env_vars()
        .cpu()
        .sanitize(true)
        .build()
        .expect("a sanitized CPU context");
    let t = TwoStreams::new(ctx);
    let (mut data, mut out) = (t.zeros(1), t.zeros(1));
    t.write(&t.a, &mut data, 1);
    t.read(&t.b, &mut data, &mut out);
    t
}

/// Run as a child by the tests below: the case `EXIT_STATUS_CASE` names.
#[test]
#[ignore = "run as a child process by the tests of this file"]
fn child_case() {
    match std::env::var(CASE).as_deref() {
        // Collected and read: printed by the program itself.
        Ok("collected") => match racy().ctx.synchronize() {
            Err(Error::Races(r)) => println!("the program read {} race(s)", r.len()),
            other => panic!("expected races, got {other:?}"),
        },
        // The context goes before anything collected its race.
        Ok("dropped") => drop(racy()),
        // Collected, but the error is ignored.
        Ok("ignored") => {
            let t = racy();
            let _ = t.ctx.synchronize();
        }
        Ok("clean") => {
            let t = racy();
            t.ctx.synchronize().unwrap_err();
            let mut data = t.zeros(1);
            t.write(&t.a, &mut data, 2);
            t.ctx.synchronize().expect("a race-free launch");
        }
        other => panic!("unknown {CASE}: {other:?}"),
    }
}

/// Runs [`child_case`] with `case` and the extra variables `vars`.
fn child(case: &str, vars: &[(&str, &str)]) -> Output {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "child_case", "--nocapture"])
        .env(CASE, case);
    for var in ["VIGIL_EXITCODE", "VIGIL_SUPPRESSIONS", "VIGIL_REPORT"] {
        cmd.env_remove(var);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().expect("run the child")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Which of the exit summary's parts the child's stderr holds.
fn said(out: &Output) -> [bool; 4] {
    let e = stderr(out);
    [
        e.contains("vigil: races of contexts dropped before a synchronize"),
        e.contains("vigil: races returned to the program and dropped unread"),
        e.contains("race report(s) suppressed"),
        e.contains("(VIGIL_EXITCODE)"),
    ]
}

#[test]
fn races_nobody_collected_are_printed_at_exit() {
    let read_one = "in kernel `read_one`";
    let out = child("dropped", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(said(&out), [true, false, false, false], "{}", stderr(&out));
    assert!(stderr(&out).contains(read_one), "{}", stderr(&out));

    let out = child("ignored", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(said(&out), [false, true, false, false], "{}", stderr(&out));
    assert!(stderr(&out).contains(read_one), "{}", stderr(&out));

    // Read by the program: nothing more to say.
    let out = child("collected", &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(said(&out), [false; 4], "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("the program read 1 race(s)"));
}

#[test]
fn an_exit_code_is_taken_whenever_a_race_was_reported() {
    for case in ["collected", "dropped", "ignored"] {
        let out = child(case, &[("VIGIL_EXITCODE", "66")]);
        assert_eq!(out.status.code(), Some(66), "{case}: {}", stderr(&out));
        assert!(said(&out)[3], "{case}: {}", stderr(&out));
        assert!(stderr(&out).contains("exit status 66"), "{case}");
    }
    // `clean` reports its first race too: any race counts.
    let out = child("clean", &[("VIGIL_EXITCODE", "3")]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // Off, or every race suppressed: the program's own status.
    let out = child("collected", &[("VIGIL_EXITCODE", "off")]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let supp = std::env::temp_dir().join(format!("vigil-{}-exit.supp", std::process::id()));
    std::fs::write(&supp, "race:kernel=read_one\n").unwrap();
    let supp_text = supp.display().to_string();
    let out = child(
        "dropped",
        &[("VIGIL_EXITCODE", "66"), ("VIGIL_SUPPRESSIONS", &supp_text)],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(said(&out), [false, false, true, false], "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "1 race report(s) suppressed: 1 by `race:kernel=read_one` ({supp_text}:1)"
        )),
        "{}",
        stderr(&out)
    );
    // A malformed value fails the context, naming the variable.
    let out = child("collected", &[("VIGIL_EXITCODE", "256")]);
    assert!(!out.status.success());
    let e = stderr(&out) + &String::from_utf8_lossy(&out.stdout);
    assert!(e.contains("VIGIL_EXITCODE") && e.contains("1..=255"), "{e}");
    let _ = std::fs::remove_file(&supp);
}
