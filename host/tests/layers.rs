//! The host crate's layering (ARCHITECTURE.md) as a test: every
//! `crate::<module>` path in `host/src` names a module of its own layer or
//! of a layer below, and the two backends never name each other. An import
//! that would close a cycle between layers fails here with the file, the
//! line and both layers.
//!
//! Doc comments are skipped (an intra-doc link to a public path is no
//! dependency), and so are paths through the crate root's re-exports
//! (`crate::Error`): those name a leaf's public path, not a module.

use std::fs;
use std::path::{Path, PathBuf};

/// A layer: its rank (lower layers are imported by higher ones) and a name
/// for messages. Two backends share a rank but must not import each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Layer {
    rank: u8,
    name: &'static str,
}

const fn layer(rank: u8, name: &'static str) -> Layer {
    Layer { rank, name }
}

/// The layer of a module path below the crate root (`["backend", "cpu", ..]`).
fn layer_of(path: &[&str]) -> Option<Layer> {
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
    for entry in fs::read_dir(dir).expect("read host/src") {
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
    let mut paths = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before = &rest[..at];
        rest = &rest[at + "crate::".len()..];
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

#[test]
fn host_layers_import_only_downward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut violations = Vec::new();
    let mut checked = 0;
    for file in &files {
        let rel = file.strip_prefix(&src).expect("under src");
        let module = module_path(rel);
        let module: Vec<&str> = module.iter().map(String::as_str).collect();
        let Some(own) = layer_of(&module) else {
            violations.push(format!("{}: in no layer of this test", rel.display()));
            continue;
        };
        let text = fs::read_to_string(file).expect("read source");
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for path in crate_paths(code) {
                let Some(target) = layer_of(&path) else {
                    continue;
                };
                checked += 1;
                let upward = target.rank > own.rank;
                let sideways = target.rank == own.rank && target.name != own.name;
                if upward || sideways {
                    violations.push(format!(
                        "{}:{}: {} imports {} (`crate::{}`)",
                        rel.display(),
                        n + 1,
                        own.name,
                        target.name,
                        path.join("::")
                    ));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} crate paths found; is the parser broken?"
    );
    assert!(
        violations.is_empty(),
        "imports against the layer order (ARCHITECTURE.md):\n{}",
        violations.join("\n")
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
