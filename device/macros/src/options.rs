//! The arguments of `#[kernel(...)]`: `block = (x, y, z)` (the block shape
//! the kernel is written for, which a launch must use and the body may
//! rely on) and `no_runtime_checks` (the plain entry must keep no check:
//! the build fails if one is left).

use proc_macro2::TokenStream;
use quote::quote;
use syn::punctuated::Punctuated;
use syn::{Expr, Meta, Token};

/// What `#[kernel(...)]` asked for.
#[derive(Default)]
pub(crate) struct Options {
    /// `block = x`, `(x, y)` or `(x, y, z)`: the three extents.
    pub(crate) block: Option<[Expr; 3]>,
    pub(crate) no_runtime_checks: bool,
}

const USAGE: &str = "#[kernel] takes `block = (x, y, z)` (or `block = x`, `block = (x, y)`) and \
     `no_runtime_checks`, separated by commas";

impl Options {
    pub(crate) fn parse(attr: TokenStream) -> syn::Result<Options> {
        let mut options = Options::default();
        if attr.is_empty() {
            return Ok(options);
        }
        let metas =
            syn::parse::Parser::parse2(Punctuated::<Meta, Token![,]>::parse_terminated, attr)?;
        for meta in metas {
            match &meta {
                Meta::Path(p) if p.is_ident("no_runtime_checks") => {
                    if options.no_runtime_checks {
                        return Err(syn::Error::new_spanned(
                            meta,
                            "no_runtime_checks is given twice",
                        ));
                    }
                    options.no_runtime_checks = true;
                }
                Meta::NameValue(nv) if nv.path.is_ident("block") => {
                    if options.block.is_some() {
                        return Err(syn::Error::new_spanned(meta, "block is given twice"));
                    }
                    let one: Expr = syn::parse_quote!(1);
                    let dims: Vec<Expr> = match &nv.value {
                        Expr::Tuple(t) => t.elems.iter().cloned().collect(),
                        Expr::Paren(p) => vec![(*p.expr).clone()],
                        other => vec![other.clone()],
                    };
                    if dims.is_empty() || dims.len() > 3 {
                        return Err(syn::Error::new_spanned(
                            &nv.value,
                            "block takes one to three extents: x, (x, y) or (x, y, z)",
                        ));
                    }
                    let mut it = dims.into_iter();
                    let x = it.next().expect("one extent");
                    let y = it.next().unwrap_or_else(|| one.clone());
                    let z = it.next().unwrap_or(one);
                    options.block = Some([x, y, z]);
                }
                _ => return Err(syn::Error::new_spanned(meta, USAGE)),
            }
        }
        Ok(options)
    }

    /// The `Kernel::BLOCK_SHAPE` item, if a block was declared.
    pub(crate) fn block_shape_item(&self) -> TokenStream {
        match &self.block {
            Some([x, y, z]) => quote! {
                const BLOCK_SHAPE: Option<[u32; 3]> =
                    Some([(#x) as u32, (#y) as u32, (#z) as u32]);
            },
            None => quote!(),
        }
    }

    /// What an entry runs before the body: the block's shape, which the
    /// launch checked.
    pub(crate) fn entry_prologue(&self) -> TokenStream {
        match &self.block {
            Some([x, y, z]) => quote! {
                ::vigil_device::index::__assume_block_shape((#x) as u32, (#y) as u32, (#z) as u32);
            },
            None => quote!(),
        }
    }

    /// The plain entry's marker for the build's check.
    pub(crate) fn plain_marker(&self) -> TokenStream {
        if self.no_runtime_checks {
            quote!(::vigil_device::kernel::__no_runtime_checks_marker();)
        } else {
            quote!()
        }
    }
}
