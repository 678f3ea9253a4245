//! `#[vigil::test]`: registers a function `fn name(ctx: &vigil::Context)`
//! (returning `()` or a `Result` whose error is an error type, a string or
//! anything `Display`) with Vigil's
//! test harness, which runs it once per backend. Use it through the `vigil`
//! crate (`#[vigil::test]`); see `vigil::testing` for the harness.
//!
//! Options, comma-separated: `cpu` (the CPU backend only), `gpu` (GPUs
//! only), `plain` (without the sanitizer). The macro parses only the
//! function's name (no `syn`, so it builds in a moment); the compiler
//! checks the signature where the harness calls the function.

use proc_macro::{Delimiter, TokenStream, TokenTree};

/// Registers a test with Vigil's harness; see the crate documentation.
#[proc_macro_attribute]
pub fn test(attr: TokenStream, item: TokenStream) -> TokenStream {
    match expand(attr, &item) {
        Ok(registration) => {
            let mut out = item;
            out.extend(registration);
            out
        }
        Err(message) => {
            let mut out: TokenStream = format!("::core::compile_error!({message:?});")
                .parse()
                .expect("a compile_error! invocation parses");
            out.extend(item);
            out
        }
    }
}

/// What `#[vigil::test(...)]` asked for.
struct Options {
    cpu: bool,
    gpu: bool,
    sanitize: bool,
}

fn options(attr: TokenStream) -> Result<Options, String> {
    let mut o = Options {
        cpu: true,
        gpu: true,
        sanitize: true,
    };
    let (mut only_cpu, mut only_gpu) = (false, false);
    for tt in attr {
        match tt {
            TokenTree::Ident(i) => match i.to_string().as_str() {
                "cpu" => only_cpu = true,
                "gpu" => only_gpu = true,
                "plain" => o.sanitize = false,
                other => {
                    return Err(format!(
                        "#[vigil::test]: unknown option `{other}` (accepted: cpu, gpu, plain)"
                    ))
                }
            },
            TokenTree::Punct(p) if p.as_char() == ',' => {}
            other => {
                return Err(format!(
                "#[vigil::test]: unexpected `{other}` (accepted: cpu, gpu, plain, comma-separated)"
            ))
            }
        }
    }
    if only_cpu && only_gpu {
        return Err(
            "#[vigil::test]: `cpu` and `gpu` exclude each other; give neither to run on both"
                .into(),
        );
    }
    o.cpu = !only_gpu;
    o.gpu = !only_cpu;
    Ok(o)
}

/// The name of the function `item` declares.
fn function_name(item: &TokenStream) -> Result<String, String> {
    let mut tokens = item.clone().into_iter();
    while let Some(tt) = tokens.next() {
        if let TokenTree::Ident(i) = &tt {
            if i.to_string() == "fn" {
                return match tokens.next() {
                    Some(TokenTree::Ident(name)) => Ok(name.to_string()),
                    _ => Err("#[vigil::test]: expected a function name after `fn`".into()),
                };
            }
        }
        if let TokenTree::Group(g) = &tt {
            if g.delimiter() == Delimiter::Brace {
                break;
            }
        }
    }
    Err("#[vigil::test] goes on a function `fn name(ctx: &vigil::Context)`".into())
}

fn expand(attr: TokenStream, item: &TokenStream) -> Result<TokenStream, String> {
    let o = options(attr)?;
    let name = function_name(item)?;
    let code = format!(
        "::vigil::testing::__private::inventory::submit! {{
            ::vigil::testing::__private::TestCase {{
                name: {name:?},
                module: ::core::module_path!(),
                file: ::core::file!(),
                line: ::core::line!(),
                cpu: {cpu},
                gpu: {gpu},
                sanitize: {sanitize},
                body: |ctx| {{
                    use ::vigil::testing::__private::{{WithCauses as _, WithDisplay as _}};
                    (&&::vigil::testing::__private::Returned::new({name}(ctx))).outcome()
                }},
            }}
        }}",
        cpu = o.cpu,
        gpu = o.gpu,
        sanitize = o.sanitize,
    );
    code.parse()
        .map_err(|e| format!("#[vigil::test]: internal expansion error: {e}"))
}
