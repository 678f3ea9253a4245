//! The rewrite that hands a kernel's sanitizer type to the shared-memory
//! macros of its body, and gives its shared arrays module-scope storage:
//!
//! - `shared_array!(T; N)` becomes
//!   `shared_array!(@sanitizer S; @symbol "vigil_array_<kernel>_<n>"; T; N)`
//!   (an `; align A` clause kept at the end)
//!   and the attribute declares that module-scope `.shared` array beside
//!   the kernel ([`Found::symbols`]): the plain entry's storage, unique to
//!   the expansion, whose address needs no call. When `T` or `N` names
//!   something declared inside the body (which the module cannot see), it
//!   becomes `shared_array!(@sanitizer S; T; N)`, storage behind a call;
//!   `dynamic_shared_array!(T)` `dynamic_shared_array!(@sanitizer S; T)`,
//!   `mbarriers!(N)` `mbarriers!(@sanitizer S; N)`,
//!   `shared_stack!(BYTES)` `shared_stack!(@sanitizer S; BYTES)` (and the
//!   capacities of the stacks it rewrote, and where the body views the
//!   dynamic shared memory, go back to the attribute: [`Found`]).
//!
//! `S` is the body's sanitizer type parameter when the kernel declares
//! one (so that its arrays' types match the helpers it hands them to),
//! `Plain` otherwise. Barriers, fences and warp collectives need no
//! rewrite: the kernel API's hooks are the build's
//! (`vigil_device::sanitizer::Active`), wherever they are called.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::Macro;

/// What the rewrite saw of the body's use of dynamic shared memory.
#[derive(Default)]
pub(crate) struct Found {
    /// Each `shared_stack!`: where, and its capacity expression.
    pub stacks: Vec<(Span, TokenStream)>,
    /// Each `dynamic_shared_array!`.
    pub dynamic_views: Vec<Span>,
    /// Each `shared_array!` given a module-scope symbol.
    pub symbols: Vec<SharedSymbol>,
}

/// A `shared_array!`'s module-scope `.shared` array.
pub(crate) struct SharedSymbol {
    /// The PTX symbol.
    pub symbol: String,
    /// The element type.
    pub ty: TokenStream,
    /// The length.
    pub len: TokenStream,
    /// The alignment asked for (`0`: the element type's default).
    pub align: TokenStream,
}

/// Rewrites the body of kernel `kernel` for the sanitizer type `san` (a
/// type parameter of the body, or a path).
pub(crate) fn carry_sanitizer(body: &mut syn::Block, san: &TokenStream, kernel: &Ident) -> Found {
    let kernel = kernel.to_string();
    let mut locals = LocalItems::default();
    locals.visit_block_mut(&mut body.clone());
    let mut carry = Carry {
        san,
        found: Found::default(),
        // A PTX identifier is ASCII: other names keep the storage call.
        kernel: kernel.is_ascii().then_some(kernel),
        locals: locals.names,
    };
    carry.visit_block_mut(body);
    carry.found
}

struct Carry<'a> {
    san: &'a TokenStream,
    found: Found,
    /// The kernel's name, for its arrays' symbols.
    kernel: Option<String>,
    /// The names the body declares (items, imports).
    locals: Vec<String>,
}

/// The names of the items and imports a block declares, at any depth.
#[derive(Default)]
struct LocalItems {
    names: Vec<String>,
}

impl VisitMut for LocalItems {
    fn visit_item_mut(&mut self, item: &mut syn::Item) {
        use syn::Item;
        let ident = match item {
            Item::Const(i) => Some(&i.ident),
            Item::Static(i) => Some(&i.ident),
            Item::Struct(i) => Some(&i.ident),
            Item::Enum(i) => Some(&i.ident),
            Item::Union(i) => Some(&i.ident),
            Item::Type(i) => Some(&i.ident),
            Item::Fn(i) => Some(&i.sig.ident),
            Item::Trait(i) => Some(&i.ident),
            Item::Mod(i) => Some(&i.ident),
            Item::Macro(i) => i.ident.as_ref(),
            _ => None,
        };
        self.names.extend(ident.map(|i| i.to_string()));
        visit_mut::visit_item_mut(self, item);
    }

    fn visit_use_name_mut(&mut self, n: &mut syn::UseName) {
        self.names.push(n.ident.to_string());
    }

    fn visit_use_rename_mut(&mut self, r: &mut syn::UseRename) {
        self.names.push(r.rename.to_string());
    }

    fn visit_use_glob_mut(&mut self, _: &mut syn::UseGlob) {
        // A glob could bring any name: nothing declared here is safe.
        self.names.push("*".to_owned());
    }
}

/// Every identifier in `tokens`, at any depth.
fn idents(tokens: &TokenStream, out: &mut Vec<String>) {
    for t in tokens.clone() {
        match t {
            proc_macro2::TokenTree::Ident(i) => out.push(i.to_string()),
            proc_macro2::TokenTree::Group(g) => idents(&g.stream(), out),
            _ => {}
        }
    }
}

/// `T; N` or `T; N; align A` split at the top-level `;`s: the type, the
/// length and the alignment asked for (`0` without one: the default).
fn type_len_align(tokens: &TokenStream) -> Option<(TokenStream, TokenStream, TokenStream)> {
    let all: Vec<_> = tokens.clone().into_iter().collect();
    let mut parts = all
        .split(|t| matches!(t, proc_macro2::TokenTree::Punct(p) if p.as_char() == ';'))
        .map(|part| part.iter().cloned().collect::<TokenStream>());
    let (ty, len) = (parts.next()?, parts.next()?);
    let align = match parts.next() {
        None => quote!(0),
        Some(clause) => {
            let mut clause = clause.into_iter();
            match clause.next() {
                Some(proc_macro2::TokenTree::Ident(i)) if i == "align" => clause.collect(),
                _ => return None,
            }
        }
    };
    let valid = !ty.is_empty() && !len.is_empty() && !align.is_empty() && parts.next().is_none();
    valid.then_some((ty, len, align))
}

impl Carry<'_> {
    /// The module-scope symbol of the next `shared_array!` with these
    /// `T; N` tokens, unless they name something the module cannot see.
    fn symbol(&mut self, tokens: &TokenStream) -> Option<String> {
        let kernel = self.kernel.as_ref()?;
        let (ty, len, align) = type_len_align(tokens)?;
        let mut names = Vec::new();
        idents(tokens, &mut names);
        let mut san = Vec::new();
        idents(self.san, &mut san);
        let glob = self.locals.iter().any(|l| l == "*");
        let generic = san.len() == 1;
        if glob
            || names
                .iter()
                .any(|n| (generic && *n == san[0]) || self.locals.contains(n))
        {
            return None;
        }
        let symbol = format!("vigil_array_{kernel}_{}", self.found.symbols.len());
        self.found.symbols.push(SharedSymbol {
            symbol: symbol.clone(),
            ty,
            len,
            align,
        });
        Some(symbol)
    }
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
        let symbol = if name == "shared_array" {
            self.symbol(&m.tokens)
        } else {
            None
        };
        let (s, t) = (self.san, &m.tokens);
        m.tokens = match symbol {
            Some(symbol) => quote!(@sanitizer #s; @symbol #symbol; #t),
            None => quote!(@sanitizer #s; #t),
        };
    }
}
