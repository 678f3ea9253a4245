//! Reading kernel entry signatures from PTX text.
//!
//! A module's PTX declares each kernel as
//! `.visible .entry name(.param .f32 name_param_0, .param .u64 .ptr .align 1 name_param_1, ...)`.
//! Vigil parses these lists so that a launch can be checked against what the
//! GPU code really takes (a stale PTX file is a typed error, not a crash).

use crate::error::{Error, Result};
pub use crate::types::PtxParam;
use vigil_shared::params::PtxType;

/// One `.entry` of a PTX module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxEntry {
    /// The entry point's name.
    pub name: String,
    /// Its `.param`s, in order.
    pub params: Vec<PtxParam>,
}

/// Parses every `.entry` signature of a PTX module.
pub fn parse_entries(ptx: &str) -> Result<Vec<PtxEntry>> {
    let text = strip_comments(ptx);
    let mut entries = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = find_directive(rest, ".entry") {
        rest = &rest[at + ".entry".len()..];
        let trimmed = rest.trim_start();
        let name_len = trimmed
            .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '%' | '.')))
            .unwrap_or(trimmed.len());
        if name_len == 0 {
            return Err(ptx_error("`.entry` without a name".to_owned()));
        }
        let name = trimmed[..name_len].to_owned();
        let after = trimmed[name_len..].trim_start();
        let mut params = Vec::new();
        if let Some(list) = after.strip_prefix('(') {
            let close = list
                .find(')')
                .ok_or_else(|| ptx_error(format!("entry `{name}`: unclosed parameter list")))?;
            for decl in list[..close]
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
            {
                params.push(parse_param(&name, decl)?);
            }
            rest = &list[close + 1..];
        } else {
            rest = after;
        }
        entries.push(PtxEntry { name, params });
    }
    Ok(entries)
}

/// Checks that `ptx` is a PTX module before any backend takes it: it
/// starts with `.version <major>.<minor>`, has a `.target`, declares at
/// least one `.entry`, and its braces balance. The error says what is
/// missing and what the text has instead.
pub fn check_module(ptx: &str) -> Result<()> {
    let text = strip_comments(ptx);
    let first_line = text.lines().map(str::trim).find(|l| !l.is_empty());
    let Some(first_line) = first_line else {
        return Err(ptx_error(
            "the text is empty (a PTX module starts with `.version`)".to_owned(),
        ));
    };
    let mut tokens = text.split_whitespace();
    if tokens.next() != Some(".version") {
        return Err(ptx_error(format!(
            "a PTX module starts with `.version <major>.<minor>`, this text with `{}`",
            shorten(first_line)
        )));
    }
    let version = tokens.next().unwrap_or_default();
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !version
        .split_once('.')
        .is_some_and(|(a, b)| numeric(a) && numeric(b))
    {
        return Err(ptx_error(format!(
            "`.version` must be followed by <major>.<minor> (e.g. `8.0`), not `{}`",
            shorten(version)
        )));
    }
    let target = find_directive(&text, ".target")
        .and_then(|at| text[at + ".target".len()..].split_whitespace().next());
    if target.is_none_or(|t| t.starts_with('.')) {
        return Err(ptx_error(
            "no `.target` directive naming an architecture (e.g. `.target sm_80`)".to_owned(),
        ));
    }
    if find_directive(&text, ".entry").is_none() {
        return Err(ptx_error(
            "the module declares no `.entry` (no kernel to launch)".to_owned(),
        ));
    }
    let mut depth = 0i64;
    for c in text.chars() {
        depth += match c {
            '{' => 1,
            '}' => -1,
            _ => 0,
        };
        if depth < 0 {
            return Err(ptx_error("a `}` closes no block".to_owned()));
        }
    }
    if depth != 0 {
        return Err(ptx_error(format!(
            "{depth} block(s) not closed (missing `}}`)"
        )));
    }
    Ok(())
}

/// At most 40 characters of `s`, for an error message.
fn shorten(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((at, _)) => format!("{}...", &s[..at]),
        None => s.to_owned(),
    }
}

fn ptx_error(message: String) -> Error {
    Error::PtxText { message }
}

/// Finds `directive` as a whole token (not e.g. `.entry` inside `.entryfoo`).
fn find_directive(text: &str, directive: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find(directive) {
        let at = from + i;
        let before_ok = at == 0 || text[..at].ends_with(|c: char| c.is_whitespace());
        let after_ok = text[at + directive.len()..].starts_with(|c: char| c.is_whitespace());
        if before_ok && after_ok {
            return Some(at);
        }
        from = at + directive.len();
    }
    None
}

fn parse_param(entry: &str, decl: &str) -> Result<PtxParam> {
    let tokens: Vec<&str> = decl.split_whitespace().collect();
    let bad = || ptx_error(format!("entry `{entry}`: cannot parse parameter `{decl}`"));
    if tokens.len() < 3 || tokens[0] != ".param" {
        return Err(bad());
    }
    let name_tok = tokens[tokens.len() - 1];
    let mods = &tokens[1..tokens.len() - 1];
    let is_array = name_tok.contains('[');
    let name = name_tok.split('[').next().unwrap_or(name_tok).to_owned();
    let is_ptr = mods.contains(&".ptr");
    let mut ty = None;
    let mut skip_next = false;
    let mut unknown = false;
    for &m in mods {
        if skip_next {
            skip_next = false;
            continue;
        }
        match m {
            ".align" => skip_next = true,
            ".ptr" | ".global" | ".shared" | ".const" | ".local" => {}
            _ if !m.starts_with('.') => return Err(bad()),
            _ => match scalar_type(m) {
                Some(t) if ty.is_none() && !unknown => ty = Some(t),
                _ => unknown = true,
            },
        }
    }
    let ty = match ty {
        _ if is_array || unknown => None,
        Some(PtxType::B64) if is_ptr => Some(PtxType::Ptr),
        t => t,
    };
    Ok(PtxParam {
        name,
        ty,
        decl: mods.join(" "),
    })
}

/// PTX type token to scalar (`None` for types Vigil never passes, such as
/// `.f16`: such parameters parse, and accept no argument).
fn scalar_type(tok: &str) -> Option<PtxType> {
    Some(match tok {
        ".u8" | ".s8" | ".b8" => PtxType::B8,
        ".u16" | ".s16" | ".b16" => PtxType::B16,
        ".u32" | ".s32" | ".b32" => PtxType::B32,
        ".u64" | ".s64" | ".b64" => PtxType::B64,
        ".f32" => PtxType::F32,
        ".f64" => PtxType::F64,
        _ => return None,
    })
}

/// Removes `//` and `/* */` comments, leaving string literals intact.
pub(crate) fn strip_comments(ptx: &str) -> String {
    let mut out = String::with_capacity(ptx.len());
    let mut chars = ptx.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                out.push(c);
                for s in chars.by_ref() {
                    out.push(s);
                    if s == '"' {
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                for s in chars.by_ref() {
                    if s == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for s in chars.by_ref() {
                    if prev == '*' && s == '/' {
                        break;
                    }
                    prev = s;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::check_module;
    use crate::error::Error;

    const GOOD: &str = "// generated\n.version 8.0\n.target sm_80\n.address_size 64\n\
                        .visible .entry k(.param .u64 k_param_0)\n{\n ret;\n}\n";

    fn problem(ptx: &str) -> String {
        match check_module(ptx) {
            Err(Error::PtxText { message }) => message,
            other => panic!("expected a PTX text error for {ptx:?}, got {other:?}"),
        }
    }

    #[test]
    fn a_module_needs_version_target_an_entry_and_balanced_braces() {
        assert_eq!(check_module(GOOD), Ok(()));
        assert!(problem("this is not ptx").contains("this text with `this is not ptx`"));
        assert!(problem("").contains("empty"));
        assert!(problem("  // only a comment\n").contains("empty"));
        assert!(problem(".version eight\n.target sm_80").contains("<major>.<minor>"));
        assert!(problem(&GOOD.replace(".target sm_80", "")).contains("`.target`"));
        assert!(problem(&GOOD.replace(".entry", ".func")).contains("no `.entry`"));
        assert!(problem(&GOOD.replace("ret;\n}", "ret;")).contains("not closed"));
        assert!(problem(&GOOD.replace("{", "")).contains("closes no block"));
    }
}
