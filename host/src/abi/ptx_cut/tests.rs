use super::cut;
use std::borrow::Cow;

/// A module, one top-level item a piece (each with the comments before
/// it): two plain entries and a sanitized one, a helper they share by call
/// and by address, recursion, a function pointer in a variable's
/// initialiser, an unreachable helper and module variables.
const PIECES: &[&str] = &[
    /* 0 */ "//\n// Generated\n//\n\n.version 7.8\n",
    /* 1 */ ".target sm_90\n",
    /* 2 */ ".address_size 64\n",
    /* 3 */ "\n.global .align 4 .u32 counter;",
    /* 4 */ "\n.global .align 1 .b8 $str[3] = {104, 105, 0};",
    /* 5 */ "\n.func  (.param .b32 func_retval0) shared_helper\n(\n\t.param .b32 shared_helper_param_0\n)\n;",
    /* 6 */ "\n.func engine_rec(\n\t.param .b32 n\n)\n;",
    /* 7 */ "\n.global .align 8 .u64 vtable[1] = {generic(engine_slot)};",
    /* 8 */ "\n\t// .globl\tk\n.visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n\t.reg .b32 %r<2>;\n\
             \t// call engine_rec: a comment reaches nothing\n\t{ // callseq 0\n\
             \tcall.uni (retval0), shared_helper, (param0);\n\t}\n\tst.global.u32 [counter], %r1;\n\tret;\n}",
    /* 9 */ "\n\t// .globl\tk__vigil\n.visible .entry k__vigil(\n\t.param .u64 k__vigil_param_0\n)\n.maxntid 256, 1, 1\n{\n\
             \tcall.uni engine_rec, (param0);\n\tld.global.u64 %rd1, [vtable];\n\tret;\n}",
    /* 10 */ "\n.func engine_rec(\n\t.param .b32 n\n)\n{\n\tcall.uni engine_rec, (param0);\n\tret;\n}",
    /* 11 */ "\n.func engine_slot()\n{\n\tret;\n}",
    /* 12 */ "\n.func  (.param .b32 func_retval0) shared_helper(\n\t.param .b32 shared_helper_param_0\n)\n{\n\
             \tmov.u64 %rd1, $str;\n\tret;\n}",
    /* 13 */ "\n.func unused()\n{\n\tret;\n}",
    /* 14 */ "\n.visible .entry m(\n\t.param .u64 m_param_0\n)\n{\n\tmov.u64 %rd2, shared_helper;\n\tret;\n}",
    /* end */ "\n\n",
];

fn module() -> String {
    PIECES.concat()
}

/// The pieces at `keep`, with the text after the last item.
fn pieces(keep: &[usize]) -> String {
    let mut s: String = keep.iter().map(|&i| PIECES[i]).collect();
    s.push_str(PIECES[PIECES.len() - 1]);
    s
}

#[test]
fn a_plain_cut_is_the_plain_entries_and_what_they_reach_byte_for_byte() {
    let ptx = module();
    let plain = cut(&ptx, |n| !n.ends_with("__vigil"));
    // Not the recursion, vtable and slot only `k__vigil` uses, nor `unused`.
    assert_eq!(plain, pieces(&[0, 1, 2, 3, 4, 5, 8, 12, 14]));
}

#[test]
fn a_sanitized_cut_keeps_recursion_and_function_pointers() {
    let ptx = module();
    let sanitized = cut(&ptx, |n| n.ends_with("__vigil"));
    assert_eq!(sanitized, pieces(&[0, 1, 2, 6, 7, 9, 10, 11]));
}

#[test]
fn keeping_every_entry_drops_only_unreachable_functions() {
    let ptx = module();
    let all: Vec<usize> = (0..PIECES.len() - 1).filter(|&i| i != 13).collect();
    assert_eq!(cut(&ptx, |_| true), pieces(&all));
    // Nothing to drop: the text itself, not a copy.
    let whole = pieces(&all);
    assert!(matches!(cut(&whole, |_| true), Cow::Borrowed(_)));
}

#[test]
fn text_the_cut_does_not_understand_comes_back_whole() {
    let ptx = module();
    let plain = |text: &str| cut(text, |n| !n.ends_with("__vigil")).into_owned();
    for odd in [
        format!("{ptx}.section .debug_str {{ .b8 0 }}\n"),
        format!("{ptx}.func f()\n{{\n"),
        format!("{ptx}ret;\n"),
        ptx.replacen("{\n\tret;\n}", "}\n\tret;\n}", 1),
        ptx.replacen("/", "/*", 1),
    ] {
        assert_eq!(plain(&odd), odd);
    }
}
