//! The cut of `vigil_kernels.ptx` that each kind of GPU context loads
//! (`vigil::unstable::ptx_cut`), on the real module: a plain context gets
//! every plain entry byte-for-byte and none of the sanitizer, a sanitized
//! one every `__vigil` entry and no plain one. The cuts are written to
//! `target/tmp/ptx-cuts/` for `scripts/validate-ptx.sh` to hand to ptxas.

use vigil::unstable::ptx::parse_entries;
use vigil::unstable::ptx_cut::cut_for;
use vigil::LaunchVariant;
use vigil_shared::gpu::{split_builds, SANITIZED_SUFFIX};
use vigil_tests::KERNELS_PTX;

/// The text of `.entry name` (from its directive to its closing brace).
fn entry_text<'a>(ptx: &'a str, name: &str) -> &'a str {
    let start = ptx
        .find(&format!(".entry {name}("))
        .unwrap_or_else(|| panic!("no entry {name}"));
    let len = ptx[start..].find("\n}\n").expect("entry end") + 3;
    &ptx[start..start + len]
}

fn entry_names(ptx: &str) -> Vec<String> {
    let entries = parse_entries(ptx).expect("entries parse");
    entries.into_iter().map(|e| e.name).collect()
}

/// The distinct functions a module declares or defines (`.func` items).
fn funcs(ptx: &str) -> usize {
    let names: std::collections::HashSet<&str> = ptx
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix(".func"))
        .filter_map(|rest| {
            let rest = rest.trim_start();
            let rest = match rest.strip_prefix('(') {
                Some(ret) => ret.split_once(')')?.1,
                None => rest,
            };
            rest.split(|c: char| c == '(' || c.is_whitespace())
                .find(|t| !t.is_empty())
        })
        .collect();
    names.len()
}

fn write_cut(name: &str, text: &str) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ptx-cuts");
    std::fs::create_dir_all(&dir).expect("cut directory");
    std::fs::write(dir.join(name), text).expect("cut written");
}

#[test]
fn each_context_loads_only_the_entries_it_launches() {
    // The plain build's module, then the sanitized build's.
    let (plain_part, sanitized_part) =
        split_builds(KERNELS_PTX).expect("vigil-build writes both builds");
    let all = entry_names(KERNELS_PTX);
    let plain_names = entry_names(plain_part);
    assert!(
        plain_names.iter().all(|n| !n.ends_with(SANITIZED_SUFFIX)),
        "{plain_names:?}"
    );
    let sanitized_names: Vec<_> = entry_names(sanitized_part)
        .into_iter()
        .filter(|n| n.ends_with(SANITIZED_SUFFIX))
        .collect();
    assert!(
        sanitized_names.len() >= 10 && plain_names.len() >= 10,
        "{all:?}"
    );
    // Every kernel has both entries, one in each build.
    for name in &plain_names {
        let twin = format!("{name}{SANITIZED_SUFFIX}");
        let handwritten = name.ends_with("_handwritten");
        assert_eq!(sanitized_names.contains(&twin), !handwritten, "{name}");
    }

    let plain = cut_for(KERNELS_PTX, LaunchVariant::Plain);
    let sanitized = cut_for(KERNELS_PTX, LaunchVariant::Sanitized);
    assert_eq!(entry_names(&plain), plain_names);
    // A sanitized context keeps the instrumented entries, plus the plain
    // entries without an instrumented twin (hand-written PTX runs unchecked).
    let untwinned: Vec<_> = plain_names
        .iter()
        .filter(|n| !sanitized_names.contains(&format!("{n}{SANITIZED_SUFFIX}")))
        .cloned()
        .collect();
    assert!(
        untwinned.contains(&"axpy_handwritten".to_owned()),
        "{untwinned:?}"
    );
    let mut expected = entry_names(&sanitized);
    expected.retain(|n| !untwinned.contains(n));
    assert_eq!(expected, sanitized_names);
    for name in &plain_names {
        assert_eq!(entry_text(&plain, name), entry_text(KERNELS_PTX, name));
    }
    for name in &sanitized_names {
        assert_eq!(entry_text(&sanitized, name), entry_text(KERNELS_PTX, name));
    }
    // Every kernel crate carries the range-access entry (vigil-device's),
    // which a sanitized context checks copies and fills with; a plain
    // context does not even load it.
    let range = vigil_shared::gpu::RANGE_ACCESS_ENTRY.to_owned();
    assert!(sanitized_names.contains(&range), "{sanitized_names:?}");
    assert!(!plain.contains(&range));
    // The race engine and the device runtime are only the sanitized
    // entries' (their mangled names say so).
    for engine in ["gpu_sanitizer", "vigil_shared"] {
        assert!(!plain.contains(engine), "plain cut keeps `{engine}` code");
        assert!(sanitized.contains(engine));
    }

    println!(
        "whole: {} bytes, {} entries, {} functions",
        KERNELS_PTX.len(),
        all.len(),
        funcs(KERNELS_PTX)
    );
    for (label, cut, entries) in [
        ("plain", &plain, &plain_names),
        ("sanitized", &sanitized, &sanitized_names),
    ] {
        println!(
            "{label} cut: {} bytes, {} entries, {} functions",
            cut.len(),
            entries.len(),
            funcs(cut)
        );
        write_cut(&format!("vigil_kernels.{label}.ptx"), cut);
    }
    assert!(
        plain.len() * 4 < KERNELS_PTX.len(),
        "the plain cut is small"
    );
    assert!(sanitized.len() < KERNELS_PTX.len());
}

/// On a GPU: both kinds of context load the module and look up a
/// `#[kernel]`; a plain context asked for a sanitized entry gets a typed
/// error that says why, and a sanitized context still loads a hand-written
/// entry (it has no instrumented twin and runs unchecked).
/// The sanitized entries that issue asynchronous copies, in their own
/// code or in a function they call, are the ones whose launches keep
/// copies in flight: the async-copy kernels, not the module's others.
#[test]
fn the_entries_that_issue_asynchronous_copies_are_found() {
    use vigil::unstable::ptx_cut::entries_reaching;
    let (_, sanitized) = split_builds(KERNELS_PTX).expect("vigil-build writes both builds");
    let cut = cut_for(KERNELS_PTX, LaunchVariant::Sanitized);
    for text in [sanitized, &*cut] {
        let found = entries_reaching(text, "cp.async.").expect("the module parses");
        for name in [
            "cp_async_early_read__vigil",
            "cp_async_many_in_flight__vigil",
            "cp_async_source_written_by_another__vigil",
            "bulk_load_read__vigil",
            "tensor_load_tile__vigil",
        ] {
            assert!(found.contains(name), "{name} not found in {found:?}");
        }
        for name in [
            "atomic_ops_u32__vigil",
            "plain_load_at__vigil",
            "pdl_reader__vigil",
        ] {
            assert!(
                entry_names(text).iter().any(|n| n == name),
                "{name} missing"
            );
            assert!(!found.contains(name), "{name} issues no copy");
        }
    }
}

/// The sanitized entries that use a shared array checked through the
/// window shadow, in their own code or in a function they call, are the
/// ones whose launches get the window shadow and claim their regions at
/// entry: the kernels with large tiles, not those whose arrays have a
/// `.shared` shadow nor those with no shared array at all.
#[test]
fn the_entries_that_use_the_window_shadow_are_found() {
    use vigil::unstable::ptx_cut::entries_reaching;
    use vigil_shared::block::WINDOW_ARRAY_SYMBOL;
    let (_, sanitized) = split_builds(KERNELS_PTX).expect("vigil-build writes both builds");
    let found = entries_reaching(sanitized, WINDOW_ARRAY_SYMBOL).expect("the module parses");
    for (kernel, window) in [
        ("large_tile", true),
        ("big_tile_transpose_twice", true),
        ("near_limit", true),
        ("tree_reduce", false),
        ("dynamic_reduce", false),
        ("global_neighbours", false),
        ("race_waw", false),
    ] {
        let name = format!("{kernel}__vigil");
        assert!(entry_names(sanitized).contains(&name), "{name} missing");
        assert_eq!(found.contains(&name), window, "{name}");
    }
}

#[test]
fn an_entry_cut_away_is_a_typed_error_on_a_gpu() {
    use vigil::{Context, Error, Module};
    use vigil_kernels::examples::axpy;
    if vigil::unstable::testing::require_gpu().is_none() {
        return;
    }
    for sanitize in [false, true] {
        let ctx = Context::builder()
            .gpu(0)
            .sanitize(sanitize)
            .build()
            .expect("GPU context");
        let module = Module::from_ptx(&ctx, KERNELS_PTX).expect("the cut loads");
        module
            .kernel::<axpy>()
            .expect("a #[kernel] in either context");
        if sanitize {
            module
                .function("axpy_handwritten")
                .expect("a hand-written entry stays in a sanitized context's cut");
            continue;
        }
        match module.function("axpy__vigil") {
            Err(e @ Error::EntryNotLoaded { .. }) => {
                assert!(e.to_string().contains("axpy__vigil"), "{e}");
                assert!(matches!(
                    e,
                    Error::EntryNotLoaded {
                        variant: LaunchVariant::Plain,
                        ..
                    }
                ));
            }
            other => panic!("axpy__vigil in a plain context: {other:?}"),
        }
    }
}
