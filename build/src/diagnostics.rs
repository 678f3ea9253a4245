//! What a failed PTX build shows: its compiler errors once each, a hint
//! only where one applies.
//!
//! The kernel crate is usually also a dependency of the crate whose build
//! script builds its PTX, so cargo compiles it for the host too, and an
//! error in its source would be printed by both builds. [`split`] sorts the
//! PTX build's errors into those the host build also reports (cargo shows
//! those, once) and those only the PTX build has (the build script shows
//! those).

use crate::json::json_string_field;

/// The rendered error diagnostics of cargo's JSON output, without the
/// "aborting due to N previous errors" summaries. (A rendered diagnostic
/// starts with its level; the JSON's own `level` fields include the
/// children's, in no fixed order.)
pub(crate) fn compiler_errors(json_stdout: &str) -> Vec<String> {
    json_stdout
        .lines()
        .filter(|l| l.contains("\"reason\":\"compiler-message\""))
        .filter_map(|l| json_string_field(l, "rendered"))
        .filter(|r| r.starts_with("error") && !r.starts_with("error: aborting due to"))
        .collect()
}

/// The PTX build's errors that the host build does not also report.
pub(crate) fn ptx_only(ptx: &[String], host: &[String]) -> Vec<String> {
    ptx.iter().filter(|e| !host.contains(e)).cloned().collect()
}

/// Hints for the errors that have a known cause in the PTX build, each once.
pub(crate) fn hints(errors: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut add = |h: String| {
        if !out.contains(&h) {
            out.push(h);
        }
    };
    for e in errors {
        let first = e.lines().next().unwrap_or_default();
        if let Some(method) = float_method(first) {
            add(match math_replacement(&method) {
                Some(f) => format!(
                    "hint: kernels have `core`, not `std`, so floats have no `.{method}()` on the GPU; call `vigil_device::math::{f}` instead (on the host it is std's)"
                ),
                None => format!(
                    "hint: kernels have `core`, not `std`, so floats have no `.{method}()` on the GPU, and `vigil_device::math` has no equivalent"
                ),
            });
        }
        if first.contains("can't find crate for `std`") {
            add("hint: a kernel crate starts with `#![cfg_attr(target_arch = \"nvptx64\", no_std, feature(abi_ptx))]`; the PTX build has no `std`".into());
        }
        if e.contains("ptx-kernel") && e.contains("experimental") {
            add("hint: add `#![cfg_attr(target_arch = \"nvptx64\", no_std, feature(abi_ptx))]` at the top of the kernel crate's lib.rs".into());
        }
    }
    out
}

/// `sqrt` from "no method named `sqrt` found for type `f32` ...".
fn float_method(first_line: &str) -> Option<String> {
    let rest = first_line.split("no method named `").nth(1)?;
    let (method, rest) = rest.split_once('`')?;
    (rest.contains("`f32`") || rest.contains("`f64`") || rest.contains("{float}"))
        .then(|| method.to_string())
}

/// The `vigil_device::math` call for a `std` float method.
fn math_replacement(method: &str) -> Option<&'static str> {
    Some(match method {
        "sqrt" => "sqrt(x)",
        "exp" => "exp(x)",
        "exp2" => "exp2(x)",
        "ln" => "ln(x)",
        "log2" => "log2(x)",
        "sin" => "sin(x)",
        "cos" => "cos(x)",
        "tanh" => "tanh(x)",
        "powf" => "pow(x, y)",
        "powi" => "pow(x, n as f32)",
        "mul_add" => "fma(a, b, c)",
        "floor" => "floor(x)",
        "ceil" => "ceil(x)",
        "abs" => "abs(x)",
        "min" => "min(a, b)",
        "max" => "max(a, b)",
        _ => return None,
    })
}

/// The `name` of a manifest's `[package]`.
pub(crate) fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package {
            if let Some(v) = line.strip_prefix("name") {
                let v = v.trim_start().strip_prefix('=')?.trim();
                return Some(v.trim_matches('"').to_string());
            }
        }
    }
    None
}

/// Whether a manifest lists `package` as a normal dependency (any target),
/// so that cargo compiles it for the host in the same build.
pub(crate) fn depends_on(manifest: &str, package: &str) -> bool {
    let mut section = String::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(['[', ']']).trim().to_string();
            let table = section.strip_suffix(&format!(".{package}")).unwrap_or("");
            if table == "dependencies"
                || table.ends_with(".dependencies") && table.starts_with("target.")
            {
                return true;
            }
            continue;
        }
        let normal = section == "dependencies"
            || (section.starts_with("target.") && section.ends_with(".dependencies"));
        if normal {
            if let Some(rest) = line.strip_prefix(package) {
                let rest = rest.trim_start();
                if rest.starts_with('=') || rest.starts_with('.') {
                    return true;
                }
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_SQRT: &str = "error[E0599]: no method named `sqrt` found for type `f32` in the current scope\n --> src/lib.rs:3:7\n";
    const UNKNOWN: &str =
        "error[E0425]: cannot find value `y` in this scope\n --> src/lib.rs:4:1\n";

    #[test]
    fn errors_come_from_compiler_messages_without_summaries() {
        let out = [
            r#"{"reason":"compiler-message","message":{"rendered":"error: bad\n","children":[{"level":"help"}],"level":"error"}}"#,
            r#"{"reason":"compiler-message","message":{"message":"w","level":"warning","rendered":"warning: meh\n"}}"#,
            r#"{"reason":"compiler-message","message":{"level":"error","rendered":"error: aborting due to 1 previous error\n"}}"#,
            r#"{"reason":"build-finished","success":false}"#,
        ]
        .join("\n");
        assert_eq!(compiler_errors(&out), vec!["error: bad\n".to_string()]);
    }

    #[test]
    fn errors_the_host_build_reports_are_not_repeated() {
        let ptx = vec![UNKNOWN.to_string(), NO_SQRT.to_string()];
        let host = vec![UNKNOWN.to_string()];
        assert_eq!(ptx_only(&ptx, &host), vec![NO_SQRT.to_string()]);
    }

    #[test]
    fn hints_only_where_they_apply() {
        assert!(hints(&[UNKNOWN.to_string()]).is_empty());
        let h = hints(&[NO_SQRT.to_string(), NO_SQRT.to_string()]);
        assert_eq!(h.len(), 1);
        assert!(h[0].contains("vigil_device::math::sqrt(x)"), "{h:?}");
        let h = hints(&[
            "error[E0599]: no method named `cbrt` found for type `f32` in the current scope".into(),
        ]);
        assert!(h[0].contains("no equivalent"), "{h:?}");
        let h = hints(&["error[E0463]: can't find crate for `std`".into()]);
        assert!(h[0].contains("no_std"), "{h:?}");
    }

    #[test]
    fn manifests_are_read_for_name_and_dependencies() {
        let m = "[package]\nname = \"my-app\"\n\n[dependencies]\nvigil = \"0.1\"\nmy-kernels = { path = \"../kernels\" }\n\n[build-dependencies]\nvigil-build = \"0.1\"\n";
        assert_eq!(package_name(m).as_deref(), Some("my-app"));
        assert!(depends_on(m, "my-kernels"));
        assert!(!depends_on(m, "vigil-build"));
        assert!(!depends_on(m, "my"));
        assert!(depends_on("[dependencies]\nk.workspace = true\n", "k"));
        assert!(depends_on("[dependencies.k]\npath = \"k\"\n", "k"));
        assert!(depends_on(
            "[target.'cfg(unix)'.dependencies]\nk = \"1\"\n",
            "k"
        ));
        assert!(!depends_on("[dev-dependencies]\nk = \"1\"\n", "k"));
    }
}
