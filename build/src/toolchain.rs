//! Checks, before the PTX build starts, that the toolchain can build PTX:
//! a nightly `rustc` (for `-Zbuild-std`) with the `rust-src` and
//! `llvm-bitcode-linker` components. A missing piece is an error that says
//! which file to write with which content.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The nightly Vigil is built and tested with (this workspace's
/// `rust-toolchain.toml` pins the same one; a test checks they agree).
pub const PINNED_TOOLCHAIN: &str = "nightly-2026-10-29";

/// The `rust-toolchain.toml` a project with Vigil kernels needs.
pub fn toolchain_file() -> String {
    format!(
        "[toolchain]\nchannel = \"{PINNED_TOOLCHAIN}\"\ncomponents = [\"rust-src\", \"llvm-tools\", \"llvm-bitcode-linker\"]\n"
    )
}

/// What the active toolchain lacks for the PTX build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolchainProblem {
    /// What is wrong, e.g. "rustc 1.95.0 is not a nightly".
    pub problem: String,
    /// Where the `rust-toolchain.toml` goes (or the existing one that needs changing).
    pub file: PathBuf,
    /// Whether `file` already exists (and is overridden or incomplete).
    pub file_exists: bool,
}

impl std::fmt::Display for ToolchainProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "the PTX build needs a nightly Rust with the rust-src and llvm-bitcode-linker components, but {}.",
            self.problem
        )?;
        if self.file_exists {
            writeln!(
                f,
                "{} exists: make its content the text below (if it already is, a `cargo +<toolchain>` or RUSTUP_TOOLCHAIN override is winning over it):",
                self.file.display()
            )?;
        } else {
            writeln!(f, "Create {} with this content:", self.file.display())?;
        }
        write!(
            f,
            "\n{}\nthen run `rustup toolchain install` in {} (cargo then uses that toolchain there by itself).",
            toolchain_file(),
            self.file.parent().unwrap_or(Path::new(".")).display()
        )
    }
}

/// Checks the toolchain `rustc` (the build script's `RUSTC`) belongs to.
/// `manifest_dir` is the package being built; the suggested file goes to
/// the nearest existing `rust-toolchain.toml` above it, else to its
/// workspace root.
pub fn check(rustc: &Path, manifest_dir: &Path) -> Result<(), ToolchainProblem> {
    let problem = |problem: String| ToolchainProblem {
        file: toolchain_file_location(manifest_dir),
        file_exists: existing_toolchain_file(manifest_dir).is_some(),
        problem,
    };
    let Some(version) = run(rustc, &["-vV"]) else {
        // Cannot ask: let the build itself report what is wrong.
        return Ok(());
    };
    let release = field(&version, "release").unwrap_or_default();
    let host = field(&version, "host").unwrap_or_default();
    let bootstrap = std::env::var_os("RUSTC_BOOTSTRAP").is_some_and(|v| v == "1");
    if !(release.contains("nightly") || release.contains("dev") || bootstrap) {
        return Err(problem(format!(
            "this build uses rustc {release}, which is not a nightly (`-Zbuild-std` needs one)"
        )));
    }
    let Some(sysroot) = run(rustc, &["--print", "sysroot"]) else {
        return Ok(());
    };
    let missing = missing_components(Path::new(sysroot.trim()), &host);
    if !missing.is_empty() {
        return Err(problem(format!(
            "its toolchain ({release}) lacks the {} component{}",
            missing.join(" and "),
            if missing.len() > 1 { "s" } else { "" }
        )));
    }
    Ok(())
}

/// The components of the toolchain at `sysroot` that the PTX build needs
/// and that are not installed.
pub fn missing_components(sysroot: &Path, host: &str) -> Vec<&'static str> {
    let rustlib = sysroot.join("lib").join("rustlib");
    let mut missing = Vec::new();
    if !rustlib.join("src/rust/library/core/Cargo.toml").is_file() {
        missing.push("rust-src");
    }
    let bin = rustlib.join(host).join("bin");
    let linker = ["self-contained/llvm-bitcode-linker", "llvm-bitcode-linker"];
    if !linker.iter().any(|p| bin.join(p).is_file()) {
        missing.push("llvm-bitcode-linker");
    }
    missing
}

fn run(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `value` of a `key: value` line of `rustc -vV`.
fn field(version: &str, key: &str) -> Option<String> {
    version
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(": "))
        .map(str::to_owned)
}

/// The nearest `rust-toolchain.toml` (or legacy `rust-toolchain`) at or above `dir`.
fn existing_toolchain_file(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .flat_map(|d| [d.join("rust-toolchain.toml"), d.join("rust-toolchain")])
        .find(|p| p.is_file())
}

/// Where the toolchain file belongs: the existing one, else the workspace
/// root (the outermost directory above `dir` whose Cargo.toml has a
/// `[workspace]`), else `dir`.
fn toolchain_file_location(dir: &Path) -> PathBuf {
    existing_toolchain_file(dir).unwrap_or_else(|| {
        let root = dir
            .ancestors()
            .filter(|d| {
                std::fs::read_to_string(d.join("Cargo.toml"))
                    .is_ok_and(|m| m.lines().any(|l| l.trim() == "[workspace]"))
            })
            .last()
            .unwrap_or(dir);
        root.join("rust-toolchain.toml")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_toolchain_is_the_workspace_one() {
        let workspace = include_str!("../../rust-toolchain.toml");
        assert!(
            workspace.contains(&format!("channel = \"{PINNED_TOOLCHAIN}\"")),
            "rust-toolchain.toml and vigil_build::PINNED_TOOLCHAIN disagree"
        );
        for component in ["rust-src", "llvm-tools", "llvm-bitcode-linker"] {
            assert!(
                workspace.contains(&format!("\"{component}\"")),
                "{component}"
            );
        }
    }

    #[test]
    fn the_template_ships_the_file_the_error_asks_for() {
        let template = include_str!("../../templates/vigil-app/rust-toolchain.toml");
        assert_eq!(template, toolchain_file());
    }

    #[test]
    fn a_stable_rustc_is_refused_with_the_file_to_write() {
        let dir = std::env::temp_dir().join(format!("vigil-build-tc-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("app")).unwrap();
        std::fs::write(dir.join("Cargo.toml"), "[workspace]\nmembers = [\"app\"]\n").unwrap();
        // A fake rustc that reports a stable release.
        let fake = dir.join("rustc");
        std::fs::write(&fake, "#!/bin/sh\necho 'rustc 1.95.0 (abc 2026-01-01)'\necho 'release: 1.95.0'\necho 'host: x86_64-unknown-linux-gnu'\n").unwrap();
        let mut perms = std::fs::metadata(&fake).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&fake, perms).unwrap();

        let e = check(&fake, &dir.join("app")).unwrap_err();
        assert_eq!(e.file, dir.join("rust-toolchain.toml"));
        assert!(!e.file_exists);
        let msg = e.to_string();
        assert!(
            msg.contains("rustc 1.95.0, which is not a nightly"),
            "{msg}"
        );
        assert!(
            msg.contains(&toolchain_file()) && msg.contains("Create "),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn missing_components_are_named() {
        let sysroot =
            std::env::temp_dir().join(format!("vigil-build-sysroot-{}", std::process::id()));
        std::fs::create_dir_all(&sysroot).unwrap();
        assert_eq!(
            missing_components(&sysroot, "x86_64-unknown-linux-gnu"),
            vec!["rust-src", "llvm-bitcode-linker"]
        );
        let core = sysroot.join("lib/rustlib/src/rust/library/core");
        std::fs::create_dir_all(&core).unwrap();
        std::fs::write(core.join("Cargo.toml"), "").unwrap();
        assert_eq!(
            missing_components(&sysroot, "x86_64-unknown-linux-gnu"),
            vec!["llvm-bitcode-linker"]
        );
        std::fs::remove_dir_all(&sysroot).unwrap();
    }
}
