//! `vigil-bench`'s command line: `--help` names every option the scripts
//! pass (`scripts/bench-run.sh`, `scripts/prepare-bench.sh`, the parent's
//! children), a repeated option keeps its last value (the scripts put
//! their defaults first), and bad arguments are refused with a reason.

use std::process::{Command, Output};

fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vigil-bench"))
        .args(args)
        .output()
        .expect("run vigil-bench")
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
fn help_names_every_option_the_scripts_use() {
    let out = bench(&["--help"]);
    assert!(out.status.success(), "{}", text(&out));
    let help = text(&out);
    for option in [
        "--cpu-smoke",
        "--cpu",
        "--twins",
        "--out",
        "--seed",
        "--repeats",
        "--only",
        "--no-tools",
        "--compute-sanitizer",
        "--budget",
        "--case-limit",
    ] {
        assert!(help.contains(option), "{option} missing from:\n{help}");
    }
}

#[test]
fn a_repeated_option_keeps_its_last_value() {
    // `--only` is checked against the case names: the error names the
    // last list's unknown case, not the first's; a repeated number
    // parses.
    let out = bench(&[
        "--budget",
        "390",
        "--budget",
        "600",
        "--only",
        "nope",
        "--only",
        "copy,nope2",
    ]);
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("no case named \"nope2\"") && said.contains("the cases are"),
        "{said}"
    );
}

#[test]
fn bad_arguments_are_refused_with_a_reason() {
    for (args, says) in [
        (&["--budget", "soon"][..], "--budget"),
        (&["--frobnicate"][..], "--frobnicate"),
        (&["--twins"][..], "--twins"),
    ] {
        let out = bench(args);
        assert!(!out.status.success(), "{args:?}");
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
    }
}
