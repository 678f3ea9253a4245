//! Properties of the generated PTX that need no GPU: the plain entry point
//! of a `#[kernel]` compiles to the same instructions as the hand-written
//! kernel, and every kernel's parameter list is what its Rust signature says.

use vigil::unstable::ptx::parse_entries;
use vigil::Kernel;
use vigil_shared::gpu::{
    HIDDEN_PARAMS, RANGE_ACCESS_ENTRY, RANGE_ACCESS_PARAMS, SANITIZED_SUFFIX, SHADOW_RECLAIM_ENTRY,
    SHADOW_RECLAIM_PARAMS,
};
use vigil_tests::KERNELS_PTX;

/// The instruction lines of one `.entry`, with names that differ between
/// two identical kernels (parameter names, labels) replaced, and a negated
/// predicate branch written as the opposite comparison (LLVM emits either).
fn body(ptx: &str, entry: &str) -> Vec<String> {
    let start = ptx
        .find(&format!(".entry {entry}("))
        .unwrap_or_else(|| panic!("no entry {entry}"));
    let text = &ptx[start..];
    let end = text.find("\n}").expect("entry end");
    let body = &text[text.find('{').expect("body")..end];
    let mut lines: Vec<String> = body
        .lines()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .map(|l| {
            let l = l.replace(&format!("{entry}_param_"), "param_");
            let l = l.split("//").next().unwrap_or("").trim().to_string();
            // Labels are numbered per function (`$L__BB3_2`): keep the block number only.
            l.split_whitespace()
                .map(|w| {
                    if w.starts_with("$L__BB") {
                        w.rsplit('_').next().unwrap_or(w).to_string()
                    } else {
                        w.to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    // `setp.lt a, b; @!p bra` == `setp.ge a, b; @p bra`.
    for i in 0..lines.len().saturating_sub(1) {
        if lines[i].starts_with("setp.lt.") && lines[i + 1].starts_with("@!") {
            lines[i] = lines[i].replacen("setp.lt.", "setp.ge.", 1);
            lines[i + 1] = lines[i + 1].replacen("@!", "@", 1);
        }
    }
    lines
}

/// The plain entry of `entry` as written: comments and labels kept.
fn entry_text<'a>(ptx: &'a str, entry: &str) -> &'a str {
    let start = ptx
        .find(&format!(".entry {entry}("))
        .unwrap_or_else(|| panic!("no entry {entry}"));
    let text = &ptx[start..];
    &text[..text.find("\n}").expect("entry end")]
}

/// `lines` without register numbers, in order (LLVM numbers registers
/// and orders independent instructions by where values come from; both
/// differ between a `#[kernel]` entry and a hand-written one).
fn sorted_unnumbered(lines: &[String]) -> Vec<String> {
    let mut v: Vec<String> = lines.iter().map(|l| unnumbered(l)).collect();
    v.sort();
    v
}

#[test]
fn plain_entry_matches_the_hand_written_kernel() {
    let generated = body(KERNELS_PTX, "axpy");
    let hand = body(KERNELS_PTX, "axpy_handwritten");
    assert!(
        generated.len() > 10,
        "suspiciously short body: {generated:?}"
    );
    // The same instructions, and the same memory accesses in the same order.
    let accesses = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| l.starts_with("ld.global") || l.starts_with("st.global"))
            .map(|l| unnumbered(l))
            .collect()
    };
    assert_eq!(
        sorted_unnumbered(&generated),
        sorted_unnumbered(&hand),
        "the #[kernel] entry costs something a hand-written kernel does not"
    );
    assert_eq!(accesses(&generated), accesses(&hand));
}

/// The instructions of the first loop of `lines`: from the first label a
/// backward branch jumps to, to that branch.
fn first_loop(lines: &[String]) -> Vec<String> {
    for (end, line) in lines.iter().enumerate() {
        let Some(target) = line.strip_prefix("@").and_then(|l| l.split("bra ").nth(1)) else {
            continue;
        };
        let label = format!("{}:", target.trim_end_matches(';'));
        if let Some(start) = lines[..end].iter().position(|l| *l == label) {
            return lines[start..=end].iter().map(|l| unnumbered(l)).collect();
        }
    }
    panic!("no loop in {lines:#?}")
}

/// A loop whose only check is its condition: `scale_rows` (a block's
/// chunk of each view, indices from `strided`, `#[kernel(no_runtime_checks)]`)
/// runs the loop the same loop over raw pointers compiles to.
#[test]
fn a_proven_loop_is_the_hand_written_loop() {
    let generated = body(KERNELS_PTX, "scale_rows");
    let hand = body(KERNELS_PTX, "scale_rows_handwritten");
    let (generated, hand) = (first_loop(&generated), first_loop(&hand));
    assert!(
        generated.len() > 5,
        "suspiciously short loop: {generated:?}"
    );
    let mut sorted = (generated.clone(), hand.clone());
    sorted.0.sort();
    sorted.1.sort();
    assert_eq!(
        sorted.0, sorted.1,
        "the proven loop costs something the hand-written one does not:\n{generated:#?}\n{hand:#?}"
    );
    assert_eq!(
        generated.iter().filter(|l| l.starts_with('@')).count(),
        1,
        "one conditional branch: the loop's condition"
    );
}

/// Every kernel written with proven views keeps no check in its plain
/// entry: no `trap`, and each loop's only conditional branch its own
/// condition (the build refuses a `#[kernel(no_runtime_checks)]` kernel
/// that keeps one; this says the same of the PTX the tests run).
#[test]
fn kernels_on_proven_views_keep_no_check() {
    use vigil_kernels::{examples as e, proofs as p};
    let names = [
        e::axpy::NAME,
        e::reduce_sum::NAME,
        p::thread_elems_owner::NAME,
        p::thread_cells_owner::NAME,
        p::grid_stride_owner::NAME,
        p::block_chunks_owner::NAME,
        p::block_tiles_owner::NAME,
        p::block_tiles_transposed_owner::NAME,
        p::row_sums::NAME,
        p::scale_rows::NAME,
        p::neighbour_sum::NAME,
        p::copy_elems::NAME,
        p::transpose_tiles::NAME,
    ];
    for name in names {
        let text = entry_text(KERNELS_PTX, name);
        assert!(
            text.contains("vigil:no_runtime_checks"),
            "{name} is not marked"
        );
        assert!(!text.contains("trap;"), "{name} keeps a check: {text}");
    }
    // The checked form of `copy_elems` (`x.load(i)` on an index checked
    // against `y` only) keeps one: the test sees a check where there is one.
    let checked = entry_text(KERNELS_PTX, "copy_checked");
    assert!(checked.contains("trap;"), "{checked}");
}

/// A `shared_array!` in a `#[kernel]` body is a module-scope `.shared`
/// array in the plain entry: its address is a constant, reached without
/// the call an out-of-line storage function costs every thread.
#[test]
fn a_kernel_s_shared_arrays_cost_no_call() {
    use vigil_kernels::{examples as e, proofs as p};
    for name in [e::reduce_sum::NAME, p::transpose_tiles::NAME] {
        let text = entry_text(KERNELS_PTX, name);
        assert!(!text.contains("call"), "{name} calls: {text}");
        let symbol = format!("vigil_array_{name}_0");
        assert!(text.contains(&symbol), "{name} does not use {symbol}");
        assert!(
            KERNELS_PTX.contains(&format!(".shared .align 16 .b8 {symbol}[")),
            "{symbol} is not declared at module scope"
        );
    }
}

/// `body` without what LLVM may schedule or spell differently for the
/// same arithmetic (register declarations, integer address arithmetic,
/// moves and conversions), registers renamed `%_`: the loads, stores,
/// checks, branches, barriers and asynchronous operations, in order.
fn memory_and_control(mut lines: Vec<String>) -> Vec<String> {
    const ARITHMETIC: [&str; 9] = [
        ".reg", "add.", "sub.", "shl.", "shr.", "mul.", "mad.", "cvt.", "mov.",
    ];
    // One spelling of an unsigned bound check against a constant:
    // `a > C` branching when false, and `a < C + 1` branching when true,
    // both become `a <= C` branching when true.
    for i in 0..lines.len().saturating_sub(1) {
        let Some((op, rest)) = lines[i].split_once(' ') else {
            continue;
        };
        let (op, rest) = (op.to_owned(), rest.trim_end_matches(';').to_owned());
        let Some((operands, c)) = rest.rsplit_once(", ") else {
            continue;
        };
        let Ok(c) = c.parse::<u64>() else { continue };
        if op.starts_with("setp.gt.u") && lines[i + 1].starts_with("@!") {
            lines[i] = format!("{}, {c};", op.replacen("gt", "le", 1) + " " + operands);
            lines[i + 1] = lines[i + 1].replacen("@!", "@", 1);
        } else if op.starts_with("setp.lt.u") && c > 0 {
            lines[i] = format!(
                "{}, {};",
                op.replacen("lt", "le", 1) + " " + operands,
                c - 1
            );
        }
    }
    lines
        .into_iter()
        .filter(|l| !ARITHMETIC.iter().any(|a| l.starts_with(a)))
        // Shared storage functions are named after the kernel.
        .map(|l| match l.find("___storage") {
            Some(_) => "call.uni (retval0), <shared storage>".to_owned(),
            None => l,
        })
        // So are the module-scope arrays of `#[kernel]` bodies.
        .map(|l| match l.find("vigil_array_") {
            Some(at) => {
                let end = l[at..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .map_or(l.len(), |e| at + e);
                format!("{}<shared array>{}", &l[..at], &l[end..])
            }
            None => l,
        })
        .map(|l| {
            let mut out = String::new();
            let mut chars = l.chars().peekable();
            while let Some(c) = chars.next() {
                out.push(c);
                if c == '%' && chars.peek().is_some_and(|c| c.is_ascii_lowercase()) {
                    while chars.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
                        chars.next();
                    }
                    out.push('_');
                }
            }
            out
        })
        .collect()
}

/// The asynchronous copies, mbarriers, tensor copies and dependent-launch
/// controls of `vigil_device` cost nothing over the instructions CUDA C++
/// writes for them: each plain entry makes the same loads, stores,
/// checks and operations as its hand-written twin, in the same order.
#[test]
fn async_copy_entries_match_their_hand_written_twins() {
    for kernel in [
        "codegen_cp_async",
        "codegen_bulk",
        "codegen_tensor",
        "codegen_grid_dependency",
    ] {
        let generated = memory_and_control(body(KERNELS_PTX, kernel));
        let hand = memory_and_control(body(KERNELS_PTX, &format!("{kernel}_handwritten")));
        assert!(
            generated.len() > 5,
            "{kernel}: suspiciously short body: {generated:?}"
        );
        assert_eq!(
            generated, hand,
            "{kernel}: the #[kernel] entry differs from the hand-written one"
        );
    }
}

/// The instructions each asynchronous operation compiles to, in the
/// order the kernel issues them (what nvcc emits for the CUDA C++
/// spelling: `cp.async.cg` for 16 bytes, 32-bit shared operands).
#[test]
fn async_copy_instructions_are_cuda_s() {
    let ops = |kernel: &str| -> Vec<String> {
        body(KERNELS_PTX, kernel)
            .into_iter()
            .filter(|l| {
                ["cp.async", "mbarrier.", "fence.proxy", "griddepcontrol"]
                    .iter()
                    .any(|op| l.contains(op))
            })
            .map(|l| l.split_whitespace().next().unwrap_or("").to_owned())
            .collect()
    };
    assert_eq!(
        ops("codegen_cp_async"),
        [
            "cp.async.cg.shared.global",
            "cp.async.commit_group;",
            "cp.async.wait_group"
        ]
    );
    assert_eq!(
        ops("codegen_bulk"),
        [
            "mbarrier.init.shared::cta.b64",
            "fence.proxy.async.shared::cta;",
            "mbarrier.arrive.expect_tx.shared::cta.b64",
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
            "{",
            "cp.async.bulk.global.shared::cta.bulk_group",
            "cp.async.bulk.commit_group;",
            "cp.async.bulk.wait_group",
        ]
    );
    assert_eq!(
        ops("codegen_grid_dependency"),
        ["griddepcontrol.wait;", "griddepcontrol.launch_dependents;"]
    );
}

/// `line` with its registers' numbers left out (`%rd12` is `%rd`).
fn unnumbered(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_register = false;
    for c in line.chars() {
        if c == '%' {
            in_register = true;
        } else if in_register && c.is_ascii_digit() {
            continue;
        } else if !c.is_ascii_alphanumeric() {
            in_register = false;
        }
        out.push(c);
    }
    out
}

/// A kernel on a shared stack costs nothing that placing its tiles by hand
/// does not: `stack_phases` (tiles pushed and popped on a stack, the GEMM
/// phase's popped with `pop_synced`) and `stack_phases_hand_placed` (the
/// same views at fixed offsets of the dynamic shared memory, the same
/// barriers) are the same instructions, with the tiles' offsets as
/// immediates, and make the same memory accesses and barriers in the same
/// order. Only register numbers and where LLVM puts an address conversion
/// (`cvta.to.shared`) may differ.
#[test]
fn a_shared_stack_costs_what_hand_placed_offsets_cost() {
    let stack: Vec<String> = body(KERNELS_PTX, "stack_phases")
        .iter()
        .map(|l| unnumbered(l))
        .collect();
    let hand: Vec<String> = body(KERNELS_PTX, "stack_phases_hand_placed")
        .iter()
        .map(|l| unnumbered(l))
        .collect();
    assert!(stack.len() > 30, "suspiciously short body: {stack:?}");
    let effects = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .filter(|l| {
                ["ld.", "st.", "bar.", "atom.", "red.", "trap"]
                    .iter()
                    .any(|p| l.starts_with(p))
            })
            .cloned()
            .collect()
    };
    assert_eq!(
        effects(&stack),
        effects(&hand),
        "the stack's memory accesses and barriers differ from hand-placed offsets'"
    );
    let sorted = |lines: &[String]| {
        let mut v = lines.to_vec();
        v.sort();
        v
    };
    assert_eq!(
        sorted(&stack),
        sorted(&hand),
        "the stack's instructions differ from hand-placed offsets'"
    );
    // The second tile's offset is an immediate of its store; one barrier
    // more than the kernel's two is the pop's.
    assert!(
        stack
            .iter()
            .any(|l| l.starts_with("st.shared") && l.contains("+1024]")),
        "{stack:#?}"
    );
    assert_eq!(
        stack.iter().filter(|l| l.starts_with("bar.sync")).count(),
        3
    );
    assert!(!stack.iter().any(|l| l.contains("local")), "{stack:#?}");
    // The comparison sees a difference: the same kernel without the pop's
    // barrier is not the stack's.
    let mut no_pop_barrier = stack.clone();
    let first = no_pop_barrier
        .iter()
        .position(|l| l.starts_with("bar.sync"))
        .unwrap();
    let second = first
        + 1
        + no_pop_barrier[first + 1..]
            .iter()
            .position(|l| l.starts_with("bar.sync"))
            .unwrap();
    no_pop_barrier.remove(second);
    assert_ne!(effects(&no_pop_barrier), effects(&hand));
}

#[test]
fn every_kernel_entry_matches_its_rust_signature() {
    let entries = parse_entries(KERNELS_PTX).expect("parse PTX");
    /// The plain entry takes the Rust parameters; the sanitized one
    /// (`name__vigil`) the same plus the GPU sanitizer's hidden ones.
    fn check<K: Kernel>(entries: &[vigil::unstable::ptx::PtxEntry]) {
        let sanitized = format!("{}{}", K::NAME, SANITIZED_SUFFIX);
        for (name, hidden) in [(K::NAME, &[][..]), (sanitized.as_str(), HIDDEN_PARAMS)] {
            let entry = entries
                .iter()
                .find(|e| e.name == name)
                .unwrap_or_else(|| panic!("no PTX entry {name}"));
            vigil::unstable::launch_abi::check_signature(name, K::PARAMS, hidden, &entry.params)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    use vigil_kernels::{examples as e, tests as t};
    check::<e::axpy>(&entries);
    check::<e::reduce_sum>(&entries);
    check::<e::histogram>(&entries);
    check::<t::atomic_ops_u32>(&entries);
    check::<t::atomic_ops_i64>(&entries);
    check::<t::atomic_ops_f64>(&entries);
    check::<t::shared_reverse>(&entries);
    check::<t::warp_ops>(&entries);
    check::<t::index_map>(&entries);
    check::<t::block_ids>(&entries);
    use vigil_kernels::async_copies as a;
    check::<a::bulk_pipeline>(&entries);
    check::<a::tma_tile_roundtrip>(&entries);
    check::<a::tma_box_3d>(&entries);
    check::<a::codegen_tensor>(&entries);
    check::<a::stack_tile_copies>(&entries);
    use vigil_kernels::proofs as p;
    check::<p::thread_cells_owner>(&entries);
    check::<p::block_tiles_transposed_owner>(&entries);
    check::<p::transpose_tiles>(&entries);
    check::<p::copy_elems>(&entries);
    use vigil_kernels::races as r;
    check::<r::write_one>(&entries);
    use vigil_kernels::shared_stack as stack;
    check::<stack::gemm_softmax>(&entries);
    check::<stack::gemm_softmax_unsynced>(&entries);
    check::<stack::stack_phases>(&entries);
    check::<stack::stack_phases_hand_placed>(&entries);
    check::<stack::stack_script>(&entries);
    check::<r::persistent_spin>(&entries);
    // `Peers` arguments: MAX_RANKS pointers, the length, rank and world.
    use vigil_kernels::symmetric as sym;
    check::<sym::peer_put_get>(&entries);
    check::<sym::peer_flag_handoff>(&entries);
    check::<sym::barrier_exchange>(&entries);
    check::<sym::ring_all_reduce>(&entries);
    check::<sym::ring_all_reduce_timed>(&entries);
    // The runtime's own entries (vigil-device's) take what the host packs:
    // the range-access entry after the hidden parameters, the
    // shadow-reclaim entry with none.
    let runtime_entries = [
        (RANGE_ACCESS_ENTRY, RANGE_ACCESS_PARAMS, HIDDEN_PARAMS),
        (SHADOW_RECLAIM_ENTRY, SHADOW_RECLAIM_PARAMS, &[][..]),
    ];
    for (name, params, hidden) in runtime_entries {
        let entry = entries
            .iter()
            .find(|e| e.name == name)
            .unwrap_or_else(|| panic!("{name} missing from the kernel crate's PTX"));
        vigil::unstable::launch_abi::check_signature(name, params, hidden, &entry.params)
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn plain_kernels_use_no_local_memory_stack() {
    // A `#[kernel]` that only loads, stores and does arithmetic must not
    // spill to the stack (a sign of hidden formatting or panic machinery);
    // the shared-stack GEMM keeps its 64 accumulators in registers.
    for entry in ["axpy", "gemm_softmax"] {
        let text = &KERNELS_PTX[KERNELS_PTX.find(&format!(".entry {entry}(")).unwrap()..];
        let body = &text[..text.find("\n}").unwrap()];
        assert!(
            !body.contains("__local_depot") && !body.contains("%SP"),
            "{entry} uses a stack frame:\n{body}"
        );
    }
}

/// A PTX whose sanitized entry does not take the hidden parameters (built
/// by an older Vigil) is refused when the kernel is looked up, not
/// launched with arguments it would misread.
#[test]
fn a_stale_sanitized_entry_is_refused_at_lookup() {
    let stale = "
.version 8.0
.target sm_90
.address_size 64
.visible .entry write_one(.param .u64 p0, .param .u64 p1, .param .u32 p2) { ret; }
.visible .entry write_one__vigil(.param .u64 p0, .param .u64 p1, .param .u32 p2) { ret; }
";
    let ctx = vigil::Context::cpu().expect("CPU backend");
    let module = vigil::Module::from_ptx(&ctx, stale).expect("parses");
    let e = module
        .kernel::<vigil_kernels::races::write_one>()
        .expect_err("the sanitized entry lacks the hidden parameters");
    assert!(e.to_string().contains("write_one__vigil"), "{e}");
}

/// Every function of `ptx` with its name and body lines (`.entry` and
/// `.func`, a return parameter list skipped).
fn functions(ptx: &str) -> Vec<(&str, Vec<&str>)> {
    let mut out = Vec::new();
    let mut lines = ptx.lines();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        let Some(rest) = [
            ".visible .entry",
            ".entry",
            ".visible .func",
            ".weak .func",
            ".func",
        ]
        .iter()
        .find_map(|k| t.strip_prefix(k)) else {
            continue;
        };
        let mut rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('(') {
            rest = after[after.find(')').map_or(after.len(), |i| i + 1)..].trim_start();
        }
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '$'))
            .unwrap_or(rest.len());
        let name = &rest[..end];
        if rest.trim_end().ends_with(';') {
            continue; // a declaration
        }
        let body: Vec<&str> = lines
            .by_ref()
            .skip_while(|l| l.trim() != "{")
            .skip(1)
            .take_while(|l| *l != "}")
            .collect();
        out.push((name, body));
    }
    out
}

/// The registers (`%rd12`, `%r3`) an operand text names.
fn registers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '%' || c == '_'))
        .filter(|w| w.starts_with('%'))
}

/// The `.global` memory instructions of `ptx` whose address came from a
/// shared-memory address (`cvta.shared`, through arithmetic and moves, or
/// returned by a function that takes one): each `function: instruction`.
/// Such an instruction faults the context (`CUDA_ERROR_INVALID_ADDRESS_SPACE`).
fn shared_addresses_in_global_instructions(ptx: &str) -> Vec<String> {
    let funcs = functions(ptx);
    let returns_shared: Vec<&str> = funcs
        .iter()
        .filter(|(_, body)| body.iter().any(|l| l.contains("cvta.shared.")))
        .map(|(name, _)| *name)
        .collect();
    let mut bad = Vec::new();
    for (name, body) in &funcs {
        let mut shared: Vec<&str> = Vec::new();
        let mut from_call = false;
        let statements = body
            .iter()
            .flat_map(|l| l.split("//").next().unwrap_or("").split(';'))
            .map(|s| {
                s.trim()
                    .trim_start_matches('{')
                    .trim_end_matches('}')
                    .trim()
            })
            .filter(|s| !s.is_empty());
        for s in statements {
            // A guarded instruction (`@%p1 st.global...`) without its guard.
            let s = match s.strip_prefix('@') {
                Some(g) => g.split_once(char::is_whitespace).map_or("", |x| x.1).trim(),
                None => s,
            };
            let (op, args) = s.split_once(char::is_whitespace).unwrap_or((s, ""));
            let dest = args.split(',').next().unwrap_or("").trim();
            let sources = args.split_once(',').map_or("", |(_, r)| r);
            if op.starts_with("call") {
                from_call = returns_shared.iter().any(|f| args.contains(f));
            } else if op.starts_with("ld.param") && args.contains("retval0") {
                if std::mem::take(&mut from_call) {
                    shared.push(dest);
                }
            } else if op.starts_with("cvta.shared.")
                || (["add.", "sub.", "mov.", "cvt.", "mad.", "and.", "or."]
                    .iter()
                    .any(|p| op.starts_with(p))
                    && registers(sources).any(|r| shared.contains(&r)))
            {
                shared.push(dest);
            } else if op.contains(".global") {
                let address = args.split('[').nth(1).unwrap_or("");
                if registers(address).any(|r| shared.contains(&r)) {
                    bad.push(format!("{name}: {s}"));
                }
            }
        }
    }
    bad
}

/// A shared-memory atomic on a shared array's (generic) address was once
/// an `atom.global` and faulted the whole context on an H100: no kernel's
/// shared address reaches a `.global` instruction, and the check itself
/// sees that bug.
#[test]
fn shared_addresses_never_reach_global_instructions() {
    let bad = shared_addresses_in_global_instructions(KERNELS_PTX);
    assert!(
        bad.is_empty(),
        "shared addresses in .global instructions:\n{bad:#?}"
    );
    let histogram = &functions(KERNELS_PTX)
        .into_iter()
        .find(|(n, _)| *n == "shared_histogram")
        .expect("shared_histogram entry")
        .1;
    assert!(
        histogram
            .iter()
            .any(|l| l.contains("atom.relaxed.cta.shared.add.u32")),
        "the shared histogram's atomic is not a shared atomic"
    );
    let buggy = "
.func  (.param .b64 func_retval0) storage()
{
\tcvta.shared.u64 %rd1, smem;
\tst.param.b64 [func_retval0], %rd1;
\tret;
}
.visible .entry k()
{
\tcall.uni (retval0), storage, ();
\tld.param.b64 %rd8, [retval0];
\tmul.wide.u32 %rd3, %r2, 4;
\tadd.s64 %rd9, %rd8, %rd3;
\tatom.relaxed.cta.global.add.u32 %r4, [%rd9], %r5;
\tret;
}
";
    assert_eq!(
        shared_addresses_in_global_instructions(buggy),
        ["k: atom.relaxed.cta.global.add.u32 %r4, [%rd9], %r5"]
    );
}

/// The host gives a sanitized module a window shadow when its PTX declares
/// [`WINDOW_ARRAY_SYMBOL`]: exactly the sanitized entries of kernels with
/// an array too large for a `.shared` shadow declare it, and no plain one.
#[test]
fn only_sanitized_large_arrays_mark_the_window_shadow() {
    use vigil::unstable::ptx_cut::cut;
    use vigil_shared::block::WINDOW_ARRAY_SYMBOL;
    let marks = |entry: &str| cut(KERNELS_PTX, |e| e == entry).contains(WINDOW_ARRAY_SYMBOL);
    for (kernel, large) in [
        ("large_tile", true),
        ("big_tile_transpose_twice", true),
        ("near_limit", true),
        ("tree_reduce", false),
        ("dynamic_reduce", false),
    ] {
        assert_eq!(
            marks(&format!("{kernel}{SANITIZED_SUFFIX}")),
            large,
            "{kernel}"
        );
        assert!(!marks(kernel), "plain {kernel}");
    }
}

/// Shared-memory loads and stores of a plain entry name the shared state
/// space (`ld.shared`, `st.volatile.shared`: SASS `LDS`/`STS`), not
/// generic addressing, which ptxas leaves generic: `shared_reverse` moves
/// every element through a static shared array and through the raw
/// dynamic shared pointer.
#[test]
fn plain_shared_memory_accesses_name_the_shared_space() {
    let lines = body(KERNELS_PTX, "shared_reverse");
    let access = |l: &&String| l.starts_with("ld.") || l.starts_with("st.");
    let space = |l: &String, s: &str| l.split_whitespace().next().is_some_and(|op| op.contains(s));
    let shared = lines
        .iter()
        .filter(access)
        .filter(|l| space(l, ".shared."))
        .count();
    assert!(
        shared >= 4,
        "shared accesses are not ld/st.shared:\n{}",
        lines.join("\n")
    );
    // Every other load or store names global memory or a parameter
    // (`ld.param::entry` from PTX 8.3 on).
    let generic: Vec<&String> = lines
        .iter()
        .filter(access)
        .filter(|l| {
            ![".shared.", ".global.", ".param.", ".param::"]
                .iter()
                .any(|s| space(l, s))
        })
        .collect();
    assert!(generic.is_empty(), "generic accesses: {generic:?}");
}

/// Volatile accesses of a plain entry are volatile instructions of their
/// handle's state space: `ld.volatile.global`/`st.volatile.global` for a
/// global handle (`volatile_flag`), `ld.volatile.shared`/
/// `st.volatile.shared` for a shared array (`shared_volatile_handoff`).
#[test]
fn volatile_accesses_are_volatile_instructions_of_their_space() {
    let cases = [
        (
            "volatile_flag",
            ["ld.volatile.global.b32", "st.volatile.global.b32"],
        ),
        (
            "shared_volatile_handoff",
            ["ld.volatile.shared.b32", "st.volatile.shared.b32"],
        ),
    ];
    for (entry, instructions) in cases {
        let lines = body(KERNELS_PTX, entry);
        for insn in instructions {
            assert!(
                lines.iter().any(|l| l.contains(insn)),
                "{entry}: no {insn} in\n{}",
                lines.join("\n")
            );
        }
        let generic = lines
            .iter()
            .flat_map(|l| l.split(';'))
            .map(str::trim)
            .filter(|s| s.starts_with("ld.volatile.b") || s.starts_with("st.volatile.b"));
        assert_eq!(generic.count(), 0, "{entry}: a generic volatile access");
    }
}
