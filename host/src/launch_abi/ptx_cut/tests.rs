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
fn device_globals_stay_in_every_cut_used_or_not() {
    let global =
        "\n.visible .global .align 8 .b8 vigil_global_FLAG[24] = {0, 0, 0, 0, 0, 0, 0, 0, 4};";
    let ptx = format!("{}{global}{}", pieces(&[0, 1, 2]), pieces(&[8]));
    for keep_k in [true, false] {
        let text = cut(&ptx, |n| keep_k && n == "k");
        assert!(text.contains("vigil_global_FLAG[24]"), "{text}");
    }
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

/// A random module: `refs[i]` are the items item `i` names (functions by
/// call or by address, variables by load, functions in an initialiser).
#[derive(Debug, Clone)]
struct Graph {
    /// Per function: its references, whether it is an entry, whether a
    /// sanitized one, whether it has a prototype first.
    funcs: Vec<(Vec<usize>, bool, bool, bool)>,
    /// Per variable: the functions its initialiser takes the address of.
    vars: Vec<Vec<usize>>,
}

fn graph() -> impl proptest::strategy::Strategy<Value = Graph> {
    use proptest::prelude::*;
    (1usize..12, 0usize..4).prop_flat_map(|(nf, nv)| {
        let refs = proptest::collection::vec(0..nf + nv, 0..4);
        let funcs =
            proptest::collection::vec((refs, any::<bool>(), any::<bool>(), any::<bool>()), nf);
        let vars = proptest::collection::vec(proptest::collection::vec(0..nf, 0..3), nv);
        (funcs, vars).prop_map(|(funcs, vars)| Graph { funcs, vars })
    })
}

impl Graph {
    fn name(&self, item: usize) -> String {
        match self.funcs.get(item) {
            Some((_, true, true, _)) => format!("f{item}__vigil"),
            Some(_) => format!("f{item}"),
            None => format!("v{}", item - self.funcs.len()),
        }
    }

    /// The module's pieces: header, variables, prototypes, definitions;
    /// each tagged with the item (function or variable index) it is.
    fn pieces(&self) -> Vec<(Option<usize>, String)> {
        let nf = self.funcs.len();
        let mut out = vec![(
            None,
            ".version 7.8\n.target sm_90\n.address_size 64\n".to_owned(),
        )];
        for (v, inits) in self.vars.iter().enumerate() {
            let init: Vec<String> = inits
                .iter()
                .map(|&f| format!("generic({})", self.name(f)))
                .collect();
            let text = match init.is_empty() {
                true => format!("\n.global .align 8 .u64 v{v}[1];"),
                false => format!(
                    "\n.global .align 8 .u64 v{v}[{}] = {{{}}};",
                    init.len(),
                    init.join(", ")
                ),
            };
            out.push((Some(nf + v), text));
        }
        for (f, (_, entry, _, proto)) in self.funcs.iter().enumerate() {
            if *proto && !entry {
                out.push((
                    Some(f),
                    format!("\n.func {}(\n\t.param .b64 p\n)\n;", self.name(f)),
                ));
            }
        }
        for (f, (refs, entry, _, _)) in self.funcs.iter().enumerate() {
            let kind = if *entry { ".visible .entry" } else { ".func" };
            let mut body = format!(
                "\n\t// .globl\t{0}\n{kind} {0}(\n\t.param .b64 p\n)\n{{\n",
                self.name(f)
            );
            for (k, &r) in refs.iter().enumerate() {
                let line = match (r < nf, k % 2) {
                    (true, 0) => format!(
                        "\t{{ // callseq\n\tcall.uni {}, (param0);\n\t}}\n",
                        self.name(r)
                    ),
                    (true, _) => format!("\tmov.u64 %rd{k}, {};\n", self.name(r)),
                    (false, _) => format!("\tld.global.u64 %rd{k}, [{}];\n", self.name(r)),
                };
                body.push_str(&line);
            }
            body.push_str("\tret;\n}");
            out.push((Some(f), body));
        }
        out
    }

    /// The reference: items reachable from the entries `keep` accepts.
    fn reachable(&self, keep: impl Fn(&str) -> bool) -> Vec<bool> {
        let nf = self.funcs.len();
        let mut seen = vec![false; nf + self.vars.len()];
        let mut work: Vec<usize> = (0..nf)
            .filter(|&f| self.funcs[f].1 && keep(&self.name(f)))
            .collect();
        while let Some(i) = work.pop() {
            if !std::mem::replace(&mut seen[i], true) {
                work.extend(match i < nf {
                    true => self.funcs[i].0.clone(),
                    false => self.vars[i - nf].clone(),
                });
            }
        }
        seen
    }
}

proptest::proptest! {
    #[test]
    fn a_cut_is_the_reachable_items_in_order_byte_for_byte(g in graph(), sanitized: bool) {
        let keep = |n: &str| n.ends_with("__vigil") == sanitized;
        let pieces = g.pieces();
        let ptx: String = pieces.iter().map(|(_, t)| t.as_str()).collect();
        let reach = g.reachable(keep);
        let expected: String = pieces
            .iter()
            .filter(|(item, _)| item.is_none_or(|i| reach[i]))
            .map(|(_, t)| t.as_str())
            .collect();
        proptest::prop_assert_eq!(cut(&ptx, keep), expected);
    }
}
