//! Just enough JSON for cargo's `--message-format=json` lines: top-level
//! string fields and the `filenames` array (no dependency on a JSON crate
//! in every user's build script).

/// The `.ptx` paths in a `compiler-artifact` JSON line's `filenames`.
pub(crate) fn ptx_filenames(line: &str) -> Vec<String> {
    let Some(start) = line.find("\"filenames\":[") else {
        return Vec::new();
    };
    let rest = &line[start + "\"filenames\":[".len()..];
    let Some(end) = rest.find(']') else {
        return Vec::new();
    };
    rest[..end]
        .split(',')
        .filter_map(|s| unescape_json(s.trim().trim_matches('"')))
        .filter(|s| s.ends_with(".ptx"))
        .collect()
}

/// A top-level string field of a JSON line (`"rendered":"..."`), unescaped.
pub(crate) fn json_string_field(line: &str, field: &str) -> Option<String> {
    let key = format!("\"{field}\":\"");
    let start = line.find(&key)? + key.len();
    let bytes = &line.as_bytes()[start..];
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return unescape_json(&line[start..start + i]),
            _ => i += 1,
        }
    }
    None
}

fn unescape_json(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'u' => {
                let hex: String = chars.by_ref().take(4).collect();
                out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?).unwrap_or('\u{fffd}'));
            }
            other => out.push(other),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifact_lines_yield_ptx_paths() {
        let line = r#"{"reason":"compiler-artifact","target":{"name":"k"},"filenames":["/t/nvptx64-nvidia-cuda/release/k.ptx","/t/nvptx64-nvidia-cuda/release/libk.rlib"],"fresh":true}"#;
        assert_eq!(
            ptx_filenames(line),
            vec!["/t/nvptx64-nvidia-cuda/release/k.ptx".to_string()]
        );
        assert!(
            ptx_filenames(r#"{"reason":"compiler-artifact","filenames":["/t/libk.rlib"]}"#)
                .is_empty()
        );
    }

    #[test]
    fn rendered_diagnostics_are_unescaped() {
        let line = r#"{"reason":"compiler-message","message":{"rendered":"error: bad\n  --> src/lib.rs:1:1 \"x\"\n"}}"#;
        assert_eq!(
            json_string_field(line, "rendered").unwrap(),
            "error: bad\n  --> src/lib.rs:1:1 \"x\"\n"
        );
    }
}
