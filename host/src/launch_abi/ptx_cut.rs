//! Cutting a PTX module down to the entries one context launches.
//!
//! `#[kernel]` puts each kernel's plain entry and its sanitized entry
//! (`name__vigil`, with the race engine inlined) into one PTX file. The
//! driver JIT-compiles every function it is handed, so a plain context
//! would pay for all sanitized code (and a sanitized one for all plain
//! code). [`cut`] keeps the header, the kept entries, and every function
//! or module-scope variable they reach (through `call` targets, function
//! addresses, variable uses and initialisers), each byte-for-byte and in
//! its original order. Text it does not understand is returned whole: the
//! cut never produces PTX the full text would not.

use super::ptx::strip_comments;
use crate::types::LaunchVariant;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use vigil_shared::gpu::{split_builds, GLOBAL_SYMBOL_PREFIX, SANITIZED_SUFFIX};

/// Header directives: one line each, kept in every cut.
const LINE_DIRECTIVES: &[&str] = &[".version", ".target", ".address_size", ".file"];

/// One top-level item of a PTX module.
struct Item<'a> {
    /// Its text, with the comments and blank lines before it.
    text: &'a str,
    /// The function or variable it declares or defines; `None` for a
    /// header directive (always kept).
    name: Option<&'a str>,
    /// Whether it is an `.entry`.
    is_entry: bool,
}

/// What a context launching `variant` needs of `ptx`: a plain context
/// the entries without the sanitized suffix; a sanitized one the
/// `name__vigil` entries plus every plain entry that has no sanitized twin
/// (hand-written PTX, which such a context launches unchecked), each with
/// what it reaches. See [`cut`].
///
/// A text of two builds (`vigil_build`'s, split by
/// [`SANITIZED_BUILD_LINE`](vigil_shared::gpu::SANITIZED_BUILD_LINE)) is
/// cut from its plain part for a plain context and from its sanitized
/// part (where hand-written entries are too) for a sanitized one.
pub fn cut_for(ptx: &str, variant: LaunchVariant) -> Cow<'_, str> {
    let part = match (split_builds(ptx), variant) {
        (Some((plain, _)), LaunchVariant::Plain) => plain,
        (Some((_, sanitized)), LaunchVariant::Sanitized) => sanitized,
        (None, _) => ptx,
    };
    match variant {
        LaunchVariant::Plain => cut(part, |name| !name.ends_with(SANITIZED_SUFFIX)),
        LaunchVariant::Sanitized => cut(part, |name| {
            name.ends_with(SANITIZED_SUFFIX) || !has_sanitized_twin(part, name)
        }),
    }
}

/// Whether `ptx` defines an entry `name__vigil`.
fn has_sanitized_twin(ptx: &str, name: &str) -> bool {
    let twin = format!(".entry {name}{SANITIZED_SUFFIX}(");
    ptx.contains(&twin)
}

/// `ptx` with only the entries `keep_entry` accepts, the device globals
/// (`vigil_global_` variables), and what they reach;
/// the whole text when it has a top-level item the cut does not
/// understand, or when the cut would keep everything anyway.
///
/// ```
/// use vigil::unstable::ptx_cut::cut;
/// let ptx = ".version 7.8\n.target sm_90\n.address_size 64\n\
///            .func helper()\n{\n\tret;\n}\n\
///            .visible .entry a()\n{\n\tcall.uni helper, ();\n\tret;\n}\n\
///            .visible .entry b()\n{\n\tret;\n}\n";
/// let only_b = cut(ptx, |name| name == "b");
/// assert!(only_b.contains(".entry b(") && !only_b.contains("helper"));
/// ```
pub fn cut(ptx: &str, keep_entry: impl Fn(&str) -> bool) -> Cow<'_, str> {
    match split(ptx) {
        Some(items) => {
            let keep = reachable(&items, keep_entry);
            if keep.iter().all(|&k| k) {
                return Cow::Borrowed(ptx);
            }
            let mut out = String::with_capacity(ptx.len());
            for (item, _) in items.iter().zip(&keep).filter(|(_, &k)| k) {
                out.push_str(item.text);
            }
            let consumed: usize = items.iter().map(|i| i.text.len()).sum();
            out.push_str(&ptx[consumed..]);
            Cow::Owned(out)
        }
        None => Cow::Borrowed(ptx),
    }
}

/// The items of each name (a function declared, then defined, is two).
fn by_name<'a>(items: &[Item<'a>]) -> HashMap<&'a str, Vec<usize>> {
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, item) in items.iter().enumerate() {
        if let Some(name) = item.name {
            by_name.entry(name).or_default().push(i);
        }
    }
    by_name
}

/// Which items to keep: header directives, the entries `keep_entry`
/// accepts, and every named item their text refers to, transitively.
fn reachable(items: &[Item<'_>], keep_entry: impl Fn(&str) -> bool) -> Vec<bool> {
    let by_name = by_name(items);
    let mut keep = vec![false; items.len()];
    let mut work: Vec<usize> = items
        .iter()
        .enumerate()
        .filter(|(_, it)| match it.name {
            None => true,
            // Device globals stay whether or not a kept entry uses them:
            // the host reads and writes them by name.
            Some(name) if name.starts_with(GLOBAL_SYMBOL_PREFIX) => !it.is_entry,
            Some(name) => it.is_entry && keep_entry(name),
        })
        .map(|(i, _)| i)
        .collect();
    while let Some(i) = work.pop() {
        if std::mem::replace(&mut keep[i], true) {
            continue;
        }
        for ident in identifiers(&strip_comments(items[i].text)) {
            for &j in by_name.get(ident).into_iter().flatten() {
                if !keep[j] {
                    work.push(j);
                }
            }
        }
    }
    keep
}

/// The entries of `ptx` whose code, or a function they reach, holds an
/// instruction starting with `instruction` (say `"cp.async."`), by name;
/// `None` when the text has a top-level item the cut does not understand
/// (the caller then counts every entry in).
///
/// ```
/// use vigil::unstable::ptx_cut::entries_reaching;
/// let ptx = ".version 7.8\n.target sm_90\n.address_size 64\n\
///            .func load()\n{\n\tcp.async.wait_all;\n\tret;\n}\n\
///            .visible .entry a()\n{\n\tcall.uni load, ();\n\tret;\n}\n\
///            .visible .entry b()\n{\n\tret;\n}\n";
/// let reach = entries_reaching(ptx, "cp.async.").unwrap();
/// assert!(reach.contains("a") && !reach.contains("b"));
/// ```
pub fn entries_reaching(ptx: &str, instruction: &str) -> Option<HashSet<String>> {
    let items = split(ptx)?;
    let by_name = by_name(&items);
    let code: Vec<String> = items.iter().map(|i| strip_comments(i.text)).collect();
    // What each item refers to, and whether it holds the instruction
    // itself; then every item that refers to one that does, until none
    // changes (a call graph has no more steps than items).
    let refs: Vec<Vec<usize>> = code
        .iter()
        .map(|c| {
            identifiers(c)
                .flat_map(|ident| by_name.get(ident).into_iter().flatten().copied())
                .collect()
        })
        .collect();
    let mut reaches: Vec<bool> = code.iter().map(|c| c.contains(instruction)).collect();
    loop {
        let mut changed = false;
        for i in 0..items.len() {
            if !reaches[i] && refs[i].iter().any(|&j| reaches[j]) {
                reaches[i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    Some(
        items
            .iter()
            .zip(&reaches)
            .filter(|(item, &r)| item.is_entry && r)
            .filter_map(|(item, _)| item.name.map(str::to_owned))
            .collect(),
    )
}

/// The module-scope variables `ptx` defines or declares whose names start
/// with `prefix`, each once, in order (none when the text has an item the
/// cut does not understand).
pub(crate) fn variables_named<'a>(ptx: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut names: Vec<&str> = Vec::new();
    let items = split(ptx).unwrap_or_default();
    for name in items
        .iter()
        .filter(|it| !it.is_entry)
        .filter_map(|it| it.name)
    {
        if name.starts_with(prefix) && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// Splits `ptx` into top-level items, or `None` when one is not a header
/// directive, a function (`.entry`/`.func`, defined or declared) or a
/// module-scope variable with a name.
fn split(ptx: &str) -> Option<Vec<Item<'_>>> {
    let bytes = ptx.as_bytes();
    let mut items = Vec::new();
    let (mut start, mut i) = (0, 0);
    let (mut braces, mut parens) = (0i64, 0i64);
    let mut line_item = false;
    let mut has_code = false;
    while i < bytes.len() {
        let mut end = None;
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i += ptx[i..].find('\n').unwrap_or(ptx.len() - i);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i += 2 + ptx[i + 2..].find("*/")? + 2;
                continue;
            }
            b'"' => {
                i += 1 + ptx[i + 1..].find('"')? + 1;
                continue;
            }
            b'\n' if line_item => end = Some(i + 1),
            c if c.is_ascii_whitespace() => {}
            c => {
                if !has_code {
                    has_code = true;
                    line_item = braces == 0
                        && LINE_DIRECTIVES.iter().any(|d| {
                            ptx[i..].starts_with(d)
                                && ptx[i + d.len()..].starts_with(|c: char| c.is_whitespace())
                        });
                }
                match c {
                    b'{' => braces += 1,
                    b'(' => parens += 1,
                    b')' => parens -= 1,
                    b'}' => {
                        braces -= 1;
                        // An initialiser's `}` is followed by the `;`
                        // that ends its item; a body's ends the function.
                        let initialiser = ptx[i + 1..].trim_start().starts_with(';');
                        if braces == 0 && parens == 0 && !initialiser {
                            end = Some(i + 1);
                        }
                    }
                    b';' if braces == 0 && parens == 0 => end = Some(i + 1),
                    _ => {}
                }
                if braces < 0 || parens < 0 {
                    return None;
                }
            }
        }
        i += 1;
        if let Some(end) = end {
            items.push(classify(&ptx[start..end], line_item)?);
            start = end;
            i = end;
            (line_item, has_code) = (false, false);
        }
    }
    // What follows the last item may only be whitespace and comments.
    (!has_code).then_some(items)
}

/// The item `text` is, or `None` when the cut does not understand it.
fn classify(text: &str, line_directive: bool) -> Option<Item<'_>> {
    if line_directive {
        return Some(Item {
            text,
            name: None,
            is_entry: false,
        });
    }
    let code = strip_comments(text);
    // The declaration part: before the body or the initialiser.
    let head = code.split(['{', '=']).next().unwrap_or_default();
    let tokens: Vec<&str> = head
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ',' | ';'))
        .filter(|t| !t.is_empty())
        .collect();
    let kind = tokens.iter().position(|t| matches!(*t, ".entry" | ".func"));
    let name = match kind {
        // `.func (.param .b32 func_retval0) name(...)`: the name is the
        // first token after `.func` that is not in the return list.
        Some(at) => {
            let after = head.split_once(tokens[at])?.1.trim_start();
            let after = match after.strip_prefix('(') {
                Some(ret) => ret.split_once(')')?.1.trim_start(),
                None => after,
            };
            after.split(|c: char| !is_ident_char(c)).next()?
        }
        None => {
            let is_var = tokens
                .iter()
                .any(|t| matches!(*t, ".global" | ".shared" | ".const"));
            if !is_var {
                return None;
            }
            // `.global .align 4 .b8 name[8]`: the last token names it.
            tokens.last()?.split('[').next()?
        }
    };
    if name.is_empty() || name.starts_with('.') || !name.chars().all(is_ident_char) {
        return None;
    }
    // Names are slices of `text`, not of the comment-free copy.
    let at = text.find(name)?;
    Some(Item {
        text,
        name: Some(&text[at..at + name.len()]),
        is_entry: kind.is_some_and(|at| tokens[at] == ".entry"),
    })
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '%')
}

/// Every identifier-like token of `code`.
fn identifiers(code: &str) -> impl Iterator<Item = &str> {
    code.split(|c: char| !is_ident_char(c))
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests;
