//! The rewrite that hands a kernel's sanitizer type to its body's shared
//! arrays, barriers and warp collectives, so that the GPU's sanitized
//! entry checks races inside a block (free functions and `shared_array!`
//! have no `S` of their own):
//!
//! - `shared_array!(T; N)` becomes `shared_array!(@sanitizer S; T; N)`,
//!   `dynamic_shared_array!(T)` `dynamic_shared_array!(@sanitizer S; T)`,
//!   `mbarriers!(N)` `mbarriers!(@sanitizer S; N)`,
//!   `shared_stack!(BYTES)` `shared_stack!(@sanitizer S; BYTES)` (and the
//!   capacities of the stacks it rewrote, and where the body views the
//!   dynamic shared memory, go back to the attribute: [`Found`]);
//! - `sync_threads()` becomes `::vigil_device::sync::sync_threads_in::<S>()`;
//! - `warp::f(mask, ..)` for a collective `f` becomes
//!   `warp::f(::vigil_device::warp::__joining::<S>(mask), ..)`.
//!
//! The new tokens carry the original call's span, so `#[track_caller]`
//! locations are the user's. With `S = Plain` every rewritten call is the
//! call it replaces. Calls in helper functions outside the body, in other
//! macros' arguments, or through other paths (`use warp::ballot`) are
//! left as written: a helper takes `S` and calls the `_in`/`S`-typed forms.

use proc_macro2::{Ident, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{Expr, ExprPath, Macro, Path};

/// The warp collectives whose lanes the sanitizer orders.
const COLLECTIVES: &[&str] = &[
    "shfl",
    "shfl_up",
    "shfl_down",
    "shfl_xor",
    "ballot",
    "any",
    "all",
    "sync_warp",
];

/// What the rewrite saw of the body's use of dynamic shared memory.
#[derive(Default)]
pub(crate) struct Found {
    /// Each `shared_stack!`: where, and its capacity expression.
    pub stacks: Vec<(Span, TokenStream)>,
    /// Each `dynamic_shared_array!`.
    pub dynamic_views: Vec<Span>,
}

/// Rewrites `body` for the sanitizer type `san`.
pub(crate) fn carry_sanitizer(body: &mut syn::Block, san: &Ident) -> Found {
    let mut carry = Carry {
        san,
        found: Found::default(),
    };
    carry.visit_block_mut(body);
    carry.found
}

struct Carry<'a> {
    san: &'a Ident,
    found: Found,
}

/// The last segment of `path` and the one before it (if any), as strings;
/// `None` when a segment has generic arguments.
fn tail(path: &Path) -> Option<(String, Option<String>)> {
    let segs: Vec<_> = path.segments.iter().collect();
    if segs.iter().any(|s| !s.arguments.is_none()) {
        return None;
    }
    let last = segs.last()?.ident.to_string();
    let prev = segs.len().checked_sub(2).map(|i| segs[i].ident.to_string());
    Some((last, prev))
}

impl VisitMut for Carry<'_> {
    fn visit_macro_mut(&mut self, m: &mut Macro) {
        let first = m.tokens.clone().into_iter().next().map(|t| t.to_string());
        let Some(name) = m.path.segments.last().map(|s| s.ident.to_string()) else {
            return;
        };
        let rewritten = [
            "shared_array",
            "dynamic_shared_array",
            "shared_stack",
            "mbarriers",
        ];
        if !rewritten.contains(&name.as_str()) || first.as_deref() == Some("@") {
            return;
        }
        match name.as_str() {
            "shared_stack" => self.found.stacks.push((m.span(), m.tokens.clone())),
            "dynamic_shared_array" => self.found.dynamic_views.push(m.span()),
            _ => {}
        }
        let (s, t) = (self.san, &m.tokens);
        m.tokens = quote!(@sanitizer #s; #t);
    }

    fn visit_expr_mut(&mut self, e: &mut Expr) {
        visit_mut::visit_expr_mut(self, e);
        let Expr::Call(call) = e else {
            return;
        };
        let Expr::Path(ExprPath {
            qself: None, path, ..
        }) = &*call.func
        else {
            return;
        };
        let Some((last, prev)) = tail(path) else {
            return;
        };
        let s = self.san;
        let span: Span = call.span();
        if last == "sync_threads"
            && call.args.is_empty()
            && matches!(
                prev.as_deref(),
                None | Some("sync" | "prelude" | "vigil_device")
            )
        {
            *e = syn::parse2(quote_spanned!(span=> ::vigil_device::sync::sync_threads_in::<#s>()))
                .expect("a call expression");
        } else if prev.as_deref() == Some("warp") && COLLECTIVES.contains(&last.as_str()) {
            if let Some(mask) = call.args.first_mut() {
                let m = mask.clone();
                *mask = syn::parse2(
                    quote_spanned!(m.span()=> ::vigil_device::warp::__joining::<#s>(#m)),
                )
                .expect("a call expression");
            }
        }
    }
}
