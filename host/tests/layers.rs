//! The layering of the host, device and shared crates (ARCHITECTURE.md,
//! "Layers") as a test: every `crate::<module>` path in a crate's `src/`
//! names a module of its own layer or of a layer below, and modules that
//! share a rank but not a name (the two backends; the kernel API and the
//! GPU sanitizer's runtime) never name each other. An import that would
//! close a cycle between layers fails here with the file, the line and
//! both layers. Beside the import order, each crate's own rules:
//!
//! - host: only the driver's result layer (`backend/cuda/driver/`) calls
//!   the CUDA driver (`sys::cu*`);
//! - device: inline PTX (`asm!`) only in the platform layer (`arch/`), the
//!   math lowering (`math/ptx.rs`) and the shared arrays' `.shared`
//!   declarations (`shared_mem.rs`, emitted where the macro expands); and
//!   inside the GPU sanitizer's runtime (`gpu_sanitizer/`), whose files
//!   name each other as `super::<file>`, the same order between its files;
//! - shared: `no_std` without `std` or `alloc` outside its unit tests, so
//!   that it builds for PTX;
//! - the crates: `vigil-shared` depends on no other crate of the
//!   workspace, `vigil-device` only on `vigil-shared` and its macros.
//!
//! Doc comments are skipped (an intra-doc link to a public path is no
//! dependency), and so are paths through a crate root's re-exports
//! (`crate::Error`): those name a leaf's public path, not a module.

use std::fs;
use std::path::{Path, PathBuf};

/// A layer: its rank (lower layers are imported by higher ones) and a name
/// for messages. Two layers of one rank must not import each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layer {
    rank: u8,
    name: &'static str,
}

const fn layer(rank: u8, name: &'static str) -> Layer {
    Layer { rank, name }
}

/// The host crate's layer of a module path below the crate root
/// (`["backend", "cpu", ..]`).
fn host_layer(path: &[&str]) -> Option<Layer> {
    Some(match path {
        ["types", ..] => layer(0, "types/"),
        ["ipc", ..] => layer(0, "ipc/"),
        ["buddy_allocator", ..] => layer(0, "buddy_allocator.rs"),
        ["sanitizer", ..] => layer(1, "sanitizer/"),
        ["error", ..] => layer(2, "error/"),
        ["launch_abi", ..] => layer(3, "launch_abi/"),
        ["backend", "transfer" | "launch", ..] => {
            layer(4, "backend/transfer.rs, backend/launch.rs")
        }
        ["backend", "cuda", ..] => layer(5, "backend/cuda/"),
        ["backend", "cpu", ..] => layer(5, "backend/cpu/"),
        ["backend", ..] => layer(6, "backend/mod.rs"),
        ["api", ..] => layer(7, "api/"),
        ["testing", ..] => layer(8, "testing/"),
        ["unstable", ..] | ["lib"] => layer(9, "lib.rs, unstable"),
        _ => return None,
    })
}

/// The device crate's layer of a module path.
fn device_layer(path: &[&str]) -> Option<Layer> {
    Some(match path {
        ["math", ..] => layer(0, "math/"),
        ["atomic", ..] => layer(0, "atomic.rs"),
        ["arch" | "index" | "timer" | "sanitizer", ..] => {
            layer(1, "arch/, index.rs, timer.rs, sanitizer.rs")
        }
        ["gpu_sanitizer", ..] => layer(2, "gpu_sanitizer/"),
        ["hooks", ..] => layer(3, "hooks.rs"),
        ["global" | "device_global" | "bounded" | "matrix" | "partition" | "shared_mem"
        | "shared_stack" | "sync" | "warp" | "peers" | "async_copy" | "grid_dependency", ..] => {
            layer(4, "the kernel API")
        }
        ["kernel", ..] | ["lib"] => layer(5, "kernel.rs, lib.rs"),
        _ => return None,
    })
}

/// The layer of a file of the GPU sanitizer's runtime (`gpu_sanitizer/`,
/// ARCHITECTURE.md): the leaves, the CTA's state and regions, the copies in flight,
/// the same-block check, the hooks, CTA entry and exit, the runtime's own
/// entries.
fn gpu_sanitizer_layer(path: &[&str]) -> Option<Layer> {
    Some(match path {
        ["device_atomics" | "report" | "warp" | "block_word", ..] => layer(0, "the leaves"),
        ["memory", ..] => layer(1, "memory.rs"),
        ["cta", ..] => layer(2, "cta.rs"),
        ["regions", ..] => layer(3, "regions.rs"),
        ["bulk", ..] => layer(4, "bulk.rs"),
        ["in_flight", ..] => layer(5, "in_flight.rs"),
        ["block", ..] => layer(6, "block.rs"),
        ["block_table", ..] => layer(7, "block_table.rs"),
        ["hooks", ..] => layer(8, "hooks.rs"),
        ["entry", ..] => layer(9, "entry.rs"),
        ["range", ..] => layer(10, "range.rs"),
        ["reclaim", ..] => layer(11, "reclaim.rs"),
        _ => return None,
    })
}

/// The shared crate's layer of a module path: the vocabulary host and
/// device agree on imports nothing of the crate; the engine and the
/// layouts it works on import from each other and the vocabulary.
fn shared_layer(path: &[&str]) -> Option<Layer> {
    Some(match path {
        ["memory_model" | "params" | "read_only", ..] => layer(0, "the vocabulary"),
        ["lib"] => layer(2, "lib.rs"),
        [_, ..] => layer(1, "the engine and its layouts"),
        [] => return None,
    })
}

/// The module path of a source file relative to `src/`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read a crate's src/") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module segments of each `crate::a::b` path on a code line.
fn crate_paths(line: &str) -> Vec<Vec<&str>> {
    rooted_paths(line, "crate::")
}

/// The module paths after each `root` (`crate::`, `super::`) in `line`,
/// as [`crate_paths`] reads them.
fn rooted_paths<'a>(line: &'a str, root: &str) -> Vec<Vec<&'a str>> {
    let mut paths = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find(root) {
        let before = &rest[..at];
        rest = &rest[at + root.len()..];
        if before.ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let segments: Vec<&str> = rest
            .split("::")
            .map(|s| {
                let end = s
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(s.len());
                &s[..end]
            })
            .take_while(|s| s.starts_with(|c: char| c.is_ascii_lowercase()))
            .collect();
        if !segments.is_empty() {
            paths.push(segments);
        }
    }
    paths
}

/// One source file of a crate: its path below `src/`, its module path
/// and its code lines (numbered from 1, doc and other comments left out).
struct Source {
    rel: PathBuf,
    module: Vec<String>,
    code: Vec<(usize, String)>,
    /// The code lines before the file's unit tests (a trailing
    /// `#[cfg(test)] mod tests`).
    before_tests: usize,
}

fn sources(crate_dir: &str) -> Vec<Source> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    files
        .iter()
        .map(|file| {
            let rel = file.strip_prefix(&src).expect("under src").to_owned();
            let text = fs::read_to_string(file).expect("read source");
            let lines: Vec<&str> = text.lines().collect();
            let tests_at = lines
                .windows(2)
                .position(|w| w[0] == "#[cfg(test)]" && w[1].starts_with("mod tests"))
                .unwrap_or(lines.len());
            let code: Vec<(usize, String)> = lines
                .iter()
                .enumerate()
                .filter(|(_, l)| !l.trim_start().starts_with("//"))
                .map(|(n, l)| (n + 1, l.trim_start().to_owned()))
                .collect();
            let before_tests = code.iter().take_while(|(n, _)| *n <= tests_at).count();
            Source {
                module: module_path(&rel),
                rel,
                code,
                before_tests,
            }
        })
        .collect()
}

/// Every import of `files` against the layer order `layer_of`, and the
/// number of crate paths checked.
fn layer_violations(
    files: &[Source],
    layer_of: fn(&[&str]) -> Option<Layer>,
) -> (Vec<String>, usize) {
    let mut violations = Vec::new();
    let mut checked = 0;
    for file in files {
        let module: Vec<&str> = file.module.iter().map(String::as_str).collect();
        let Some(own) = layer_of(&module) else {
            violations.push(format!("{}: in no layer of this test", file.rel.display()));
            continue;
        };
        checked += imports_against(file, &file.code, own, "crate::", layer_of, &mut violations);
    }
    (violations, checked)
}

/// The paths after `root` in `code` (lines of `file`, whose layer is
/// `own`) that name a layer above `own` or another of its rank, pushed
/// to `violations`; the number of paths checked.
fn imports_against(
    file: &Source,
    code: &[(usize, String)],
    own: Layer,
    root: &str,
    layer_of: fn(&[&str]) -> Option<Layer>,
    violations: &mut Vec<String>,
) -> usize {
    let mut checked = 0;
    for (n, line) in code {
        for path in rooted_paths(line, root) {
            let Some(target) = layer_of(&path) else {
                continue;
            };
            checked += 1;
            let upward = target.rank > own.rank;
            let sideways = target.rank == own.rank && target.name != own.name;
            if upward || sideways {
                violations.push(format!(
                    "{}:{n}: {} imports {} (`{root}{}`)",
                    file.rel.display(),
                    own.name,
                    target.name,
                    path.join("::")
                ));
            }
        }
    }
    checked
}

/// Every `super::<file>` path of the GPU sanitizer runtime's files (their
/// code before their unit tests) against [`gpu_sanitizer_layer`], and
/// the number checked.
fn gpu_sanitizer_violations(files: &[Source]) -> (Vec<String>, usize) {
    let mut violations = Vec::new();
    let mut checked = 0;
    for file in files {
        let [dir, name] = file.module.as_slice() else {
            continue;
        };
        if dir != "gpu_sanitizer" {
            continue;
        }
        let Some(own) = gpu_sanitizer_layer(&[name.as_str()]) else {
            violations.push(format!("{}: in no layer of this test", file.rel.display()));
            continue;
        };
        let code = &file.code[..file.before_tests];
        checked += imports_against(
            file,
            code,
            own,
            "super::",
            gpu_sanitizer_layer,
            &mut violations,
        );
    }
    (violations, checked)
}

/// The code lines of `files` outside `allowed` that contain `needle`.
fn lines_with(files: &[Source], needle: &str, allowed: impl Fn(&Path) -> bool) -> Vec<String> {
    files
        .iter()
        .filter(|f| !allowed(&f.rel))
        .flat_map(|f| {
            f.code
                .iter()
                .filter(|(_, code)| code.contains(needle))
                .map(move |(n, code)| format!("{}:{n}: {code}", f.rel.display()))
        })
        .collect()
}

fn check_layers(crate_dir: &str, layer_of: fn(&[&str]) -> Option<Layer>, at_least: usize) {
    let (violations, checked) = layer_violations(&sources(crate_dir), layer_of);
    assert!(
        checked >= at_least,
        "only {checked} crate paths found in {crate_dir}/src; is the parser broken?"
    );
    assert!(
        violations.is_empty(),
        "imports against the layer order of {crate_dir}/src (ARCHITECTURE.md):\n{}",
        violations.join("\n")
    );
}

#[test]
fn host_layers_import_only_downward() {
    check_layers("host", host_layer, 50);
}

#[test]
fn device_layers_import_only_downward() {
    check_layers("device", device_layer, 30);
}

#[test]
fn the_gpu_sanitizer_runtime_imports_only_downward() {
    let (violations, checked) = gpu_sanitizer_violations(&sources("device"));
    assert!(
        checked >= 30,
        "only {checked} `super::` paths found in gpu_sanitizer/"
    );
    assert!(
        violations.is_empty(),
        "imports against the order of gpu_sanitizer/'s files (ARCHITECTURE.md):\n{}",
        violations.join("\n")
    );
}

#[test]
fn shared_layers_import_only_downward() {
    check_layers("shared", shared_layer, 30);
}

#[test]
fn only_the_driver_layer_calls_the_driver() {
    let calls = lines_with(&sources("host"), "sys::cu", |rel| {
        rel.starts_with("backend/cuda/driver")
    });
    assert!(
        calls.is_empty(),
        "driver calls outside backend/cuda/driver/ (call its functions instead):\n{}",
        calls.join("\n")
    );
}

#[test]
fn only_the_platform_layer_writes_inline_ptx() {
    let allowed = |rel: &Path| {
        rel.starts_with("arch")
            || rel == Path::new("math/ptx.rs")
            || rel == Path::new("shared_mem.rs")
    };
    let asm = lines_with(&sources("device"), "asm!", allowed);
    assert!(
        asm.is_empty(),
        "inline PTX outside the platform layer (add a function to arch/ptx.rs):\n{}",
        asm.join("\n")
    );
}

/// The code lines of `files`, outside their unit tests, that name `std`
/// or `alloc`.
fn std_uses(files: &[Source]) -> Vec<String> {
    let mut uses = Vec::new();
    for file in files {
        for (n, code) in &file.code[..file.before_tests] {
            let words = code.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'));
            if words
                .filter(|w| !w.is_empty())
                .any(|w| w.starts_with("std::") || w.starts_with("alloc::") || w == "std")
            {
                uses.push(format!("{}:{n}: {code}", file.rel.display()));
            }
        }
    }
    uses
}

#[test]
fn the_shared_crate_uses_neither_std_nor_alloc() {
    let uses = std_uses(&sources("shared"));
    assert!(
        uses.is_empty(),
        "vigil-shared builds for PTX: no std or alloc outside its unit tests:\n{}",
        uses.join("\n")
    );
}

/// The workspace crates a crate's manifest depends on (its
/// `[dependencies]`, not its dev- or build-dependencies).
fn workspace_deps(crate_dir: &str) -> Vec<String> {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(crate_dir)
        .join("Cargo.toml");
    let text = fs::read_to_string(manifest).expect("read Cargo.toml");
    let mut in_deps = false;
    let mut deps = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
        } else if in_deps && line.starts_with("vigil") {
            let name = line.split(|c: char| c == '=' || c.is_whitespace()).next();
            deps.extend(name.map(str::to_owned));
        }
    }
    deps
}

#[test]
fn the_crates_depend_downward() {
    assert_eq!(workspace_deps("shared"), Vec::<String>::new());
    let mut device = workspace_deps("device");
    device.sort();
    assert_eq!(device, ["vigil-macros", "vigil-shared"]);
    let host = workspace_deps("host");
    assert!(
        host.iter().all(|d| d.starts_with("vigil-")) && host.contains(&"vigil-device".to_owned()),
        "{host:?}"
    );
}

#[test]
fn the_path_parser_reads_use_lines_and_skips_identifiers_ending_in_crate() {
    assert_eq!(
        crate_paths("use crate::backend::cuda::{CudaStream, x};"),
        vec![vec!["backend", "cuda"]]
    );
    assert_eq!(
        crate_paths("$crate::backend::cuda::driver::check(a)"),
        vec![vec!["backend", "cuda", "driver", "check"]]
    );
    assert_eq!(
        crate_paths("let x = crate::Error::Races(r);"),
        Vec::<Vec<&str>>::new()
    );
    assert_eq!(
        crate_paths("use my_crate::api::x;"),
        Vec::<Vec<&str>>::new()
    );
}

/// The checks can fail: an upward import, a sideways one, an import
/// between the GPU runtime's files against their order, `std` in the
/// shared crate and a driver call in the wrong place are each found.
#[test]
fn a_misplaced_import_or_call_is_found() {
    let file = |rel: &str, code: &str| Source {
        rel: PathBuf::from(rel),
        module: module_path(Path::new(rel)),
        code: vec![(7, code.to_owned())],
        before_tests: 1,
    };
    let upward = [file("error/mod.rs", "use crate::api::context::Context;")];
    let (v, _) = layer_violations(&upward, host_layer);
    assert_eq!(
        v,
        ["error/mod.rs:7: error/ imports api/ (`crate::api::context`)"]
    );
    let sideways = [file(
        "gpu_sanitizer/hooks.rs",
        "use crate::global::GlobalSlice;",
    )];
    let (v, _) = layer_violations(&sideways, device_layer);
    assert_eq!(v.len(), 1, "{v:?}");
    let cycle = [file("gpu_sanitizer/cta.rs", "super::hooks::linear_block()")];
    let (v, _) = gpu_sanitizer_violations(&cycle);
    assert_eq!(
        v,
        ["gpu_sanitizer/cta.rs:7: cta.rs imports hooks.rs (`super::hooks::linear_block`)"]
    );
    let vocabulary = [file("params.rs", "use crate::engine::Engine;")];
    let (v, _) = layer_violations(&vocabulary, shared_layer);
    assert_eq!(v.len(), 1, "{v:?}");
    let call = [file(
        "backend/cuda/stream.rs",
        "unsafe { sys::cuStreamQuery(s) }",
    )];
    assert_eq!(
        lines_with(&call, "sys::cu", |rel| rel
            .starts_with("backend/cuda/driver"))
        .len(),
        1
    );
}
