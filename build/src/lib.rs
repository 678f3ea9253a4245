//! `vigil-build`: compile a Vigil kernel crate to PTX from a `build.rs`.
//!
//! ```no_run
//! // in build.rs (of the crate that launches the kernels), inside `fn main`:
//! vigil_build::PtxBuilder::new("kernels").build_or_exit();
//! ```
//!
//! and in that crate: `const PTX: &str = vigil::include_ptx!("kernels");`
//! (the kernel crate's library or package name; underneath, the build sets
//! `VIGIL_PTX_<LIB>` to the PTX file, see [`env_var_for`]).
//!
//! Before building, the helper checks the toolchain (nightly, `rust-src`,
//! `llvm-bitcode-linker`) and, if it falls short, says which
//! `rust-toolchain.toml` to write ([`toolchain_file`]). A failed build shows
//! each compiler error once: errors that compiling the kernel crate for the
//! host also reports are left to cargo's host build (see
//! [`BuildError::ReportedByHostBuild`]).
//!
//! The helper runs a nested `cargo build --release --target
//! nvptx64-nvidia-cuda -Zbuild-std=core` with its own target directory
//! (beside the outer build's, so `core` is compiled once and reused), twice:
//! the plain build, and the sanitized build (`--cfg vigil_sanitized`, in the
//! target directory's `sanitized` folder), in which every access, atomic,
//! fence, barrier and warp collective the kernel crate compiles, helpers
//! included, calls the GPU sanitizer. It writes both modules into one PTX
//! file in `OUT_DIR`, the sanitized one after [`SANITIZED_BUILD_LINE`]
//! (the host loads the part a context needs), and tells cargo to rerun
//! when any source the kernel crate was built from changes. Users never
//! run a second command.
#![warn(missing_docs)]

mod diagnostics;
mod json;
mod runtime_checks;
mod toolchain;

use json::ptx_filenames;
pub use runtime_checks::KeptChecks;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
pub use toolchain::{toolchain_file, ToolchainProblem, PINNED_TOOLCHAIN};
pub use vigil_shared::gpu::SANITIZED_BUILD_LINE;

/// The GPU architecture used when neither the builder nor `VIGIL_CUDA_ARCH` names one.
pub const DEFAULT_ARCH: &str = "sm_90";

/// The target triple kernels are compiled for.
pub const PTX_TARGET: &str = "nvptx64-nvidia-cuda";

/// Why a PTX build failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// An environment variable cargo sets for build scripts is missing.
    #[error("{0} is not set: PtxBuilder::build must run inside a build script (build.rs)")]
    NotInBuildScript(&'static str),
    /// The kernel crate's directory has no `Cargo.toml`.
    #[error("no kernel crate at {path}: expected a Cargo.toml there")]
    NoManifest {
        /// Where the manifest was looked for.
        path: PathBuf,
    },
    /// The GPU architecture is not of the form `sm_NN`.
    #[error("invalid GPU architecture {arch:?} (from {source_name}): expected sm_NN with NN >= 70, e.g. sm_90")]
    InvalidArch {
        /// The rejected value.
        arch: String,
        /// Where it came from (the builder or `VIGIL_CUDA_ARCH`).
        source_name: &'static str,
    },
    /// Cargo could not be started.
    #[error("could not run {cargo:?} for the PTX build: {source}")]
    Spawn {
        /// The cargo executable.
        cargo: OsString,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The toolchain cannot build PTX (not a nightly, or a component missing).
    #[error("{0}")]
    Toolchain(ToolchainProblem),
    /// The nested build failed. Shows each compiler error once, with a hint
    /// where one applies.
    #[error("{}", failure_report(.krate, .status, .errors, .cargo_output, *.left_to_host_build))]
    Failed {
        /// The kernel crate's directory.
        krate: String,
        /// The nested cargo's exit status.
        status: std::process::ExitStatus,
        /// The rendered compiler errors to show (each once).
        errors: Vec<String>,
        /// Cargo's own output, shown when there are no compiler errors
        /// (a manifest or resolution problem).
        cargo_output: String,
        /// How many further errors the host build of the kernel crate also
        /// reports, and cargo shows there.
        left_to_host_build: usize,
    },
    /// The nested build failed with only errors that compiling the kernel
    /// crate for the host (a dependency of this crate) reports too. Cargo
    /// shows them there, so the build script does not repeat them:
    /// [`PtxBuilder::build_or_exit`] lets the build go on to that failure.
    #[error("the PTX build of `{package}` failed with the same {errors} error(s) that compiling `{package}` for the host reports; they are shown once, there")]
    ReportedByHostBuild {
        /// The kernel crate's package name.
        package: String,
        /// How many errors.
        errors: usize,
    },
    /// The nested build succeeded but produced no `.ptx` file.
    #[error(
        "the PTX build of {krate} produced no .ptx file: is its crate-type [\"cdylib\", \"rlib\"]?"
    )]
    NoPtx {
        /// The kernel crate's directory.
        krate: String,
    },
    /// A `#[kernel(no_runtime_checks)]` kernel's plain entry keeps checks
    /// (bounds checks, panics) the compiler could not remove: prove the
    /// indices it uses (the guide's chapter on fast safe kernels) or drop
    /// the attribute.
    #[error("the PTX of {krate}: {}", kept_list(.kept))]
    RuntimeChecksLeft {
        /// The kernel crate's directory.
        krate: String,
        /// Each kernel that keeps checks.
        kept: Vec<KeptChecks>,
    },
    /// Reading or writing a file failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

fn kept_list(kept: &[KeptChecks]) -> String {
    let lines: Vec<String> = kept.iter().map(|k| k.to_string()).collect();
    lines.join("; ")
}

/// What a successful build produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxArtifact {
    /// The PTX file inside `OUT_DIR`.
    pub path: PathBuf,
    /// The environment variable (set for the crate being built) that holds `path`.
    pub env_var: String,
    /// The kernel crate's library name.
    pub lib_name: String,
}

/// The PTX one nested build wrote.
struct BuiltPtx {
    /// The file.
    path: PathBuf,
    /// Its text.
    text: String,
}

/// Builds one kernel crate to PTX. See the crate docs.
#[derive(Clone, Debug)]
pub struct PtxBuilder {
    crate_dir: PathBuf,
    arch: Option<String>,
    line_info: bool,
    features: Vec<String>,
}

impl PtxBuilder {
    /// A builder for the kernel crate in `crate_dir` (relative paths are
    /// relative to the calling package's directory, as in `build.rs`).
    pub fn new(crate_dir: impl AsRef<Path>) -> Self {
        PtxBuilder {
            crate_dir: crate_dir.as_ref().to_path_buf(),
            arch: None,
            line_info: false,
            features: Vec::new(),
        }
    }

    /// The GPU architecture (`sm_90`, `sm_80`, ...). Overrides `VIGIL_CUDA_ARCH`.
    pub fn arch(mut self, arch: impl Into<String>) -> Self {
        self.arch = Some(arch.into());
        self
    }

    /// Keep source line information in the PTX (for profilers); off by default
    /// because it multiplies the PTX's size.
    pub fn line_info(mut self, on: bool) -> Self {
        self.line_info = on;
        self
    }

    /// Enables a cargo feature of the kernel crate.
    pub fn feature(mut self, feature: impl Into<String>) -> Self {
        self.features.push(feature.into());
        self
    }

    /// Runs the build from a build script: compiles, copies the PTX into
    /// `OUT_DIR`, and prints the `cargo:` lines (`rustc-env`, `rerun-if-*`).
    pub fn build(self) -> Result<PtxArtifact, BuildError> {
        let out_dir = env_path("OUT_DIR")?;
        let manifest_dir = env_path("CARGO_MANIFEST_DIR")?;
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let crate_dir = manifest_dir.join(&self.crate_dir);
        let target_dir = std::env::var_os("VIGIL_PTX_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| ptx_target_dir(&out_dir));
        println!("cargo:rerun-if-env-changed=VIGIL_CUDA_ARCH");
        println!("cargo:rerun-if-env-changed=VIGIL_PTX_TARGET_DIR");
        let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
        toolchain::check(Path::new(&rustc), &manifest_dir).map_err(BuildError::Toolchain)?;
        let artifact = match self.build_into(&cargo, &crate_dir, &target_dir, &out_dir) {
            Err(failed @ BuildError::Failed { .. }) => {
                let e = self.leave_shared_errors_to_host_build(
                    failed,
                    &cargo,
                    &crate_dir,
                    &target_dir,
                    &manifest_dir,
                );
                // The build script may succeed without a PTX (see
                // `build_or_exit`): it must still rerun once the kernel crate changes.
                println!("cargo:rerun-if-changed={}", crate_dir.display());
                return Err(e);
            }
            other => other?,
        };
        println!(
            "cargo:rustc-env={}={}",
            artifact.env_var,
            artifact.path.display()
        );
        Ok(artifact)
    }

    /// [`build`](Self::build) for a `build.rs`'s `main`: on success the
    /// artifact; on an error, the error on stderr and exit status 1 (no
    /// panic, so no backtrace). When the only errors are ones compiling the
    /// kernel crate for the host reports as well
    /// ([`BuildError::ReportedByHostBuild`]), returns `None` and lets cargo
    /// show them there, once.
    pub fn build_or_exit(self) -> Option<PtxArtifact> {
        match self.build() {
            Ok(artifact) => Some(artifact),
            Err(BuildError::ReportedByHostBuild { package, errors }) => {
                println!("cargo:rustc-env={}=1", failed_env_var_for(&package));
                println!(
                    "cargo:warning=the PTX build of `{package}` failed with the {errors} error(s) that compiling it for the host shows"
                );
                None
            }
            Err(e) => {
                eprintln!("error: {e}");
                std::process::exit(1)
            }
        }
    }

    /// Given a failed build, compiles the kernel crate for the host (into
    /// the PTX target directory, so it never waits on the outer build's
    /// lock) and keeps only the errors the host build does not report when
    /// cargo is about to compile that crate for the host anyway (this crate
    /// depends on it).
    fn leave_shared_errors_to_host_build(
        &self,
        failed: BuildError,
        cargo: &OsString,
        crate_dir: &Path,
        target_dir: &Path,
        manifest_dir: &Path,
    ) -> BuildError {
        let BuildError::Failed {
            krate,
            status,
            errors,
            cargo_output,
            ..
        } = failed
        else {
            return failed;
        };
        let read = |dir: &Path| std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        let package = diagnostics::package_name(&read(crate_dir));
        let host_errors = match &package {
            Some(p) if !errors.is_empty() && diagnostics::depends_on(&read(manifest_dir), p) => {
                let mut check = self.nested_cargo(cargo, "check", crate_dir, target_dir);
                check.env_remove("CARGO_PROFILE_RELEASE_PANIC");
                check
                    .output()
                    .ok()
                    .map(|o| diagnostics::compiler_errors(&String::from_utf8_lossy(&o.stdout)))
            }
            _ => None,
        };
        let (Some(package), Some(host_errors)) = (package, host_errors) else {
            return BuildError::Failed {
                krate,
                status,
                errors,
                cargo_output,
                left_to_host_build: 0,
            };
        };
        let ptx_only = diagnostics::ptx_only(&errors, &host_errors);
        if ptx_only.is_empty() {
            return BuildError::ReportedByHostBuild {
                package,
                errors: errors.len(),
            };
        }
        BuildError::Failed {
            krate,
            status,
            left_to_host_build: errors.len() - ptx_only.len(),
            errors: ptx_only,
            cargo_output,
        }
    }

    /// A nested `cargo <subcommand> --release` of the crate in `crate_dir`
    /// with JSON messages, in `target_dir`, without the outer build's
    /// host-only settings.
    fn nested_cargo(
        &self,
        cargo: &OsString,
        subcommand: &str,
        crate_dir: &Path,
        target_dir: &Path,
    ) -> Command {
        let mut cmd = Command::new(cargo);
        cmd.arg(subcommand)
            .arg("--release")
            .arg("--manifest-path")
            .arg(crate_dir.join("Cargo.toml"))
            .arg("--target-dir")
            .arg(target_dir)
            .arg("--message-format=json");
        if !self.features.is_empty() {
            cmd.arg("--features").arg(self.features.join(","));
        }
        // The outer build's settings are for the host; the nested one gets its own.
        for var in [
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
            "CARGO_BUILD_RUSTFLAGS",
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET",
            "RUSTC_WRAPPER",
            "RUSTC_WORKSPACE_WRAPPER",
        ] {
            cmd.env_remove(var);
        }
        cmd.env(
            "CARGO_PROFILE_RELEASE_DEBUG",
            if self.line_info {
                "line-tables-only"
            } else {
                "false"
            },
        );
        cmd.env("CARGO_PROFILE_RELEASE_PANIC", "abort");
        cmd
    }

    /// The build without the build-script plumbing: compiles the crate in
    /// `crate_dir` with `cargo` twice, using `target_dir` (the plain build)
    /// and its `sanitized` folder (the sanitized build, with `--cfg
    /// vigil_sanitized`), and writes both PTX modules into one file in
    /// `out_dir`, the plain one first, separated by
    /// [`SANITIZED_BUILD_LINE`]. Prints `cargo:rerun-if-changed` lines for
    /// its sources.
    pub fn build_into(
        &self,
        cargo: &OsString,
        crate_dir: &Path,
        target_dir: &Path,
        out_dir: &Path,
    ) -> Result<PtxArtifact, BuildError> {
        let manifest = crate_dir.join("Cargo.toml");
        if !manifest.is_file() {
            return Err(BuildError::NoManifest { path: manifest });
        }
        let arch = self.resolve_arch()?;
        let krate = crate_dir.display().to_string();
        let plain = self.compile(cargo, crate_dir, target_dir, &rustflags(&arch))?;
        let kept = runtime_checks::kept_checks(&plain.text);
        if !kept.is_empty() {
            return Err(BuildError::RuntimeChecksLeft { krate, kept });
        }
        let sanitized = self.compile(
            cargo,
            crate_dir,
            &target_dir.join("sanitized"),
            &format!("{}\x1f--cfg\x1fvigil_sanitized", rustflags(&arch)),
        )?;

        let lib_name = plain
            .path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let dest = out_dir.join(format!("{lib_name}.ptx"));
        let text = format!(
            "{}\n{SANITIZED_BUILD_LINE}\n{}",
            plain.text.trim_end(),
            sanitized.text
        );
        std::fs::write(&dest, text).map_err(|source| BuildError::Io {
            what: "writing the PTX to",
            path: dest.clone(),
            source,
        })?;

        // Rerun when any source file the kernel crate was built from changes.
        for ptx in [&plain.path, &sanitized.path] {
            if let Ok(deps) = std::fs::read_to_string(ptx.with_extension("d")) {
                for path in dep_info_sources(&deps) {
                    if !path.contains("/rustlib/src/") {
                        println!("cargo:rerun-if-changed={path}");
                    }
                }
            }
        }
        println!("cargo:rerun-if-changed={}", crate_dir.display());
        Ok(PtxArtifact {
            path: dest,
            env_var: env_var_for(&lib_name),
            lib_name,
        })
    }

    /// One nested build of the crate in `crate_dir` for the PTX target
    /// with `rustflags` (`CARGO_ENCODED_RUSTFLAGS`) in `target_dir`: the
    /// PTX it wrote.
    fn compile(
        &self,
        cargo: &OsString,
        crate_dir: &Path,
        target_dir: &Path,
        rustflags: &str,
    ) -> Result<BuiltPtx, BuildError> {
        let krate = crate_dir.display().to_string();
        let mut cmd = self.nested_cargo(cargo, "build", crate_dir, target_dir);
        cmd.arg("--target").arg(PTX_TARGET).arg("-Zbuild-std=core");
        cmd.env("CARGO_ENCODED_RUSTFLAGS", rustflags);

        let output = cmd.output().map_err(|source| BuildError::Spawn {
            cargo: cargo.clone(),
            source,
        })?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            return Err(BuildError::Failed {
                krate,
                status: output.status,
                errors: diagnostics::compiler_errors(&stdout),
                cargo_output: String::from_utf8_lossy(&output.stderr).into_owned(),
                left_to_host_build: 0,
            });
        }
        let path = stdout
            .lines()
            .filter(|l| l.contains("\"reason\":\"compiler-artifact\""))
            .flat_map(ptx_filenames)
            .last()
            .map(PathBuf::from)
            .ok_or(BuildError::NoPtx { krate })?;
        let text = std::fs::read_to_string(&path).map_err(|source| BuildError::Io {
            what: "reading the PTX",
            path: path.clone(),
            source,
        })?;
        Ok(BuiltPtx { path, text })
    }

    fn resolve_arch(&self) -> Result<String, BuildError> {
        let (arch, source_name) = match (&self.arch, std::env::var("VIGIL_CUDA_ARCH")) {
            (Some(a), _) => (a.clone(), "PtxBuilder::arch"),
            (None, Ok(a)) => (a, "VIGIL_CUDA_ARCH"),
            (None, Err(_)) => (DEFAULT_ARCH.to_string(), "the default"),
        };
        validate_arch(&arch)
            .then_some(arch.clone())
            .ok_or(BuildError::InvalidArch { arch, source_name })
    }
}

/// True for `sm_NN` / `sm_NNa` with NN >= 70 (the oldest with the scoped atomics Vigil emits).
pub fn validate_arch(arch: &str) -> bool {
    let Some(rest) = arch.strip_prefix("sm_") else {
        return false;
    };
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    let suffix = &rest[digits.len()..];
    matches!(digits.parse::<u32>(), Ok(n) if n >= 70)
        && (suffix.is_empty() || suffix == "a" || suffix == "f")
}

/// The PTX ISA version the kernels of an `sm_90`-or-newer build declare:
/// 8.3, the first with every Hopper instruction `vigil-device` emits
/// (bulk and tensor copies, `mbarrier` transaction counts, the tensor-map
/// proxy fence). LLVM's default for `sm_90` is 7.8.
pub const HOPPER_PTX_VERSION: &str = "ptx83";

/// The rustflags of the nested PTX build for `arch` (a valid one), as
/// cargo's `CARGO_ENCODED_RUSTFLAGS` (separated by `0x1f`).
fn rustflags(arch: &str) -> String {
    let major: u32 = arch
        .trim_start_matches("sm_")
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or(0);
    if major >= 90 {
        format!("-Ctarget-cpu={arch}\x1f-Ctarget-feature=+{HOPPER_PTX_VERSION}")
    } else {
        format!("-Ctarget-cpu={arch}")
    }
}

/// `VIGIL_PTX_` + the library name in upper case.
pub fn env_var_for(lib_name: &str) -> String {
    format!(
        "VIGIL_PTX_{}",
        lib_name.to_ascii_uppercase().replace('-', "_")
    )
}

/// The variable `build_or_exit` sets when the PTX of `package` failed with
/// errors left to its host build (`include_ptx!` then points there).
pub fn failed_env_var_for(package: &str) -> String {
    format!("VIGIL_FAILED_{}", env_var_for(package))
}

/// [`BuildError::Failed`]'s text: the errors, a note on those left to the
/// host build, and the hints that apply.
fn failure_report(
    krate: &str,
    status: &std::process::ExitStatus,
    errors: &[String],
    cargo_output: &str,
    left_to_host_build: usize,
) -> String {
    let mut out = format!("the PTX build of the kernel crate at {krate} failed ({status}):\n");
    if errors.is_empty() {
        out.push_str(cargo_output.trim_end());
        out.push('\n');
    }
    for e in errors {
        out.push_str(e.trim_end());
        out.push_str("\n\n");
    }
    if left_to_host_build > 0 {
        out.push_str(&format!(
            "({left_to_host_build} more error(s) that compiling the kernel crate for the host also reports are shown there)\n"
        ));
    }
    for hint in diagnostics::hints(errors) {
        out.push_str(&hint);
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// Where nested PTX builds go: `vigil-ptx` beside the outer build's profile
/// directory (`target/vigil-ptx` for `target/<profile>/build/<pkg>/out`), so
/// every kernel crate of a workspace shares one compiled `core`.
pub fn ptx_target_dir(out_dir: &Path) -> PathBuf {
    out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(|build| build.parent())
        .and_then(|profile| profile.parent())
        .map(|t| t.join("vigil-ptx"))
        .unwrap_or_else(|| out_dir.join("vigil-ptx"))
}

fn env_path(var: &'static str) -> Result<PathBuf, BuildError> {
    std::env::var_os(var)
        .map(PathBuf::from)
        .ok_or(BuildError::NotInBuildScript(var))
}

/// The source paths of a makefile-style dep-info file (`out: src1 src2 ...`).
fn dep_info_sources(deps: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in deps.lines() {
        let Some((_, srcs)) = line.split_once(": ") else {
            continue;
        };
        let mut cur = String::new();
        let mut escaped = false;
        for c in srcs.chars() {
            match (c, escaped) {
                ('\\', false) => escaped = true,
                (' ', false) => {
                    if !cur.is_empty() {
                        out.push(std::mem::take(&mut cur));
                    }
                }
                (c, _) => {
                    cur.push(c);
                    escaped = false;
                }
            }
        }
        if !cur.is_empty() {
            out.push(cur);
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_names_are_validated() {
        for ok in ["sm_70", "sm_80", "sm_90", "sm_90a", "sm_100", "sm_120f"] {
            assert!(validate_arch(ok), "{ok}");
        }
        for bad in [
            "sm_60",
            "sm90",
            "compute_90",
            "sm_",
            "sm_9x",
            "90",
            "sm_90b",
        ] {
            assert!(!validate_arch(bad), "{bad}");
        }
    }

    #[test]
    fn hopper_builds_declare_the_ptx_version_of_the_async_copies() {
        assert_eq!(
            rustflags("sm_90a"),
            "-Ctarget-cpu=sm_90a\x1f-Ctarget-feature=+ptx83"
        );
        assert_eq!(
            rustflags("sm_120f"),
            "-Ctarget-cpu=sm_120f\x1f-Ctarget-feature=+ptx83"
        );
        assert_eq!(rustflags("sm_80"), "-Ctarget-cpu=sm_80");
    }

    #[test]
    fn invalid_arch_error_names_value_and_source() {
        let e = PtxBuilder::new(".")
            .arch("sm_9")
            .resolve_arch()
            .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("\"sm_9\"") && msg.contains("PtxBuilder::arch") && msg.contains("sm_NN"),
            "{msg}"
        );
    }

    #[test]
    fn env_var_is_upper_lib_name() {
        assert_eq!(env_var_for("vigil_kernels"), "VIGIL_PTX_VIGIL_KERNELS");
        assert_eq!(env_var_for("my-kernels"), "VIGIL_PTX_MY_KERNELS");
    }

    #[test]
    fn ptx_target_dir_sits_beside_the_profile_dir() {
        let out = Path::new("/w/target/release/build/app-1234/out");
        assert_eq!(ptx_target_dir(out), Path::new("/w/target/vigil-ptx"));
        let out = Path::new("/w/target/x86_64-unknown-linux-gnu/debug/build/app-1/out");
        assert_eq!(
            ptx_target_dir(out),
            Path::new("/w/target/x86_64-unknown-linux-gnu/vigil-ptx")
        );
        assert_eq!(
            ptx_target_dir(Path::new("/tmp/out")),
            Path::new("/tmp/out/vigil-ptx")
        );
    }

    #[test]
    fn dep_info_lists_sources_with_escaped_spaces() {
        let d = "/t/k.ptx: /w/src/lib.rs /w/my\\ dir/a.rs\n\n/w/src/lib.rs:\n";
        assert_eq!(
            dep_info_sources(d),
            vec!["/w/my dir/a.rs".to_string(), "/w/src/lib.rs".to_string()]
        );
    }

    #[test]
    fn missing_manifest_is_a_typed_error() {
        let dir = std::env::temp_dir().join("vigil-build-no-such-crate");
        let e = PtxBuilder::new(&dir)
            .build_into(&"cargo".into(), &dir, &dir, &dir)
            .unwrap_err();
        assert!(matches!(e, BuildError::NoManifest { .. }));
        assert!(e.to_string().contains("no kernel crate at"));
    }

    #[test]
    fn outside_a_build_script_is_a_typed_error() {
        if std::env::var_os("OUT_DIR").is_none() {
            let e = PtxBuilder::new("k").build().unwrap_err();
            assert!(e.to_string().contains("build script"), "{e}");
        }
    }
}
