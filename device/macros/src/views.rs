//! View parameters and their layouts: which handle types a kernel may
//! take, the parameter attributes that declare a layout (`#[same_len(y)]`,
//! `#[shape(rows, cols)]`, `#[chunk(n)]`, `#[tile(tr, tc[, transposed])]`),
//! how the entry builds each handle from its pointer and length, and the
//! `Kernel::LAYOUTS` entry the host proves before a launch.

use proc_macro2::{Ident, TokenStream};
use quote::{format_ident, quote};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Expr, Token};

/// The global-memory handle types a kernel parameter may be.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    Ptr,
    PtrMut,
    Slice,
    SliceMut,
    Matrix,
    ThreadElemsMut,
    ThreadCellsMut,
    GridStrideMut,
    BlockChunks,
    BlockChunksMut,
    BlockTiles,
    BlockTilesMut,
}

impl View {
    pub(crate) const ALL: [(&'static str, View); 12] = [
        ("GlobalPtr", View::Ptr),
        ("GlobalPtrMut", View::PtrMut),
        ("GlobalSlice", View::Slice),
        ("GlobalSliceMut", View::SliceMut),
        ("GlobalMatrix", View::Matrix),
        ("ThreadElemsMut", View::ThreadElemsMut),
        ("ThreadCellsMut", View::ThreadCellsMut),
        ("GridStrideMut", View::GridStrideMut),
        ("BlockChunks", View::BlockChunks),
        ("BlockChunksMut", View::BlockChunksMut),
        ("BlockTiles", View::BlockTiles),
        ("BlockTilesMut", View::BlockTilesMut),
    ];

    pub(crate) fn named(name: &str) -> Option<View> {
        View::ALL.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
    }

    /// Whether the kernel may write through it.
    pub(crate) fn writes(self) -> bool {
        matches!(
            self,
            View::PtrMut
                | View::SliceMut
                | View::ThreadElemsMut
                | View::ThreadCellsMut
                | View::GridStrideMut
                | View::BlockChunksMut
                | View::BlockTilesMut
        )
    }

    /// Whether it lowers to a pointer and a length (every view but the
    /// single-element pointers).
    pub(crate) fn has_len(self) -> bool {
        !matches!(self, View::Ptr | View::PtrMut)
    }

    /// The layout attributes it takes: what each must be, in a sentence.
    fn wants(self) -> &'static str {
        match self {
            View::Ptr | View::PtrMut | View::ThreadElemsMut | View::GridStrideMut => {
                "takes no layout attribute"
            }
            View::Slice | View::SliceMut => "takes at most #[same_len(other_view)]",
            View::Matrix | View::ThreadCellsMut => "needs #[shape(rows, cols)] and nothing else",
            View::BlockChunks | View::BlockChunksMut => "needs #[chunk(n)] and nothing else",
            View::BlockTiles | View::BlockTilesMut => {
                "needs #[shape(rows, cols)] and #[tile(tile_rows, tile_cols)] (or \
                 #[tile(tile_rows, tile_cols, transposed)]) and nothing else"
            }
        }
    }
}

/// A size in a layout attribute: a scalar parameter of the kernel (by
/// name) or a constant expression.
#[derive(Clone)]
pub(crate) enum Size {
    Param { index: usize, name: Ident },
    Const(Expr),
}

impl Size {
    /// The value in the entry (a `usize`).
    fn value(&self) -> TokenStream {
        match self {
            Size::Param { name, .. } => quote!((#name as usize)),
            Size::Const(e) => quote!(((#e) as usize)),
        }
    }

    /// The `vigil_shared::proofs::Extent` the host resolves.
    fn extent(&self) -> TokenStream {
        let proofs = quote!(::vigil_device::__shared::proofs);
        match self {
            Size::Param { index, .. } => {
                let i = *index as u16;
                quote!(#proofs::Extent::Param(#i))
            }
            Size::Const(e) => quote!(#proofs::Extent::Const((#e) as u64)),
        }
    }
}

/// A view parameter's declared layout.
#[derive(Clone, Default)]
pub(crate) struct Layout {
    same_len: Option<(Ident, proc_macro2::Span)>,
    shape: Option<[Size; 2]>,
    chunk: Option<Size>,
    tile: Option<([Size; 2], bool)>,
}

/// A scalar parameter a size may name: its index, name and type.
pub(crate) struct ScalarParam<'a> {
    pub(crate) index: usize,
    pub(crate) name: &'a Ident,
    pub(crate) ty: String,
}

/// Scalar types a size may come from (signed and float values are not sizes).
const SIZE_TYPES: &[&str] = &["u8", "u16", "u32", "u64", "usize"];

const ATTRS: &str =
    "a kernel parameter takes the layout attributes #[same_len(..)], #[shape(..)], #[chunk(..)] \
     and #[tile(..)]";

impl Layout {
    /// Reads (and removes) the layout attributes of one parameter.
    pub(crate) fn parse(attrs: &[Attribute], scalars: &[ScalarParam]) -> syn::Result<Layout> {
        let mut layout = Layout::default();
        for attr in attrs {
            let Some(name) = attr.path().get_ident().map(|i| i.to_string()) else {
                return Err(syn::Error::new_spanned(attr, ATTRS));
            };
            let args: Punctuated<Expr, Token![,]> =
                attr.parse_args_with(Punctuated::parse_terminated)?;
            let args: Vec<Expr> = args.into_iter().collect();
            let span = attr.span();
            let duplicate = || syn::Error::new(span, format!("#[{name}] is given twice"));
            let arity = |n: &str| syn::Error::new(span, format!("#[{name}] takes {n}"));
            match name.as_str() {
                "same_len" => {
                    let [Expr::Path(p)] = args.as_slice() else {
                        return Err(arity("the name of another view parameter"));
                    };
                    let Some(other) = p.path.get_ident() else {
                        return Err(arity("the name of another view parameter"));
                    };
                    if layout.same_len.replace((other.clone(), span)).is_some() {
                        return Err(duplicate());
                    }
                }
                "shape" => {
                    let [rows, cols] = args.as_slice() else {
                        return Err(arity("two sizes: rows and columns"));
                    };
                    let shape = [size(rows, scalars)?, size(cols, scalars)?];
                    if layout.shape.replace(shape).is_some() {
                        return Err(duplicate());
                    }
                }
                "chunk" => {
                    let [n] = args.as_slice() else {
                        return Err(arity("one size: the elements per block"));
                    };
                    if layout.chunk.replace(size(n, scalars)?).is_some() {
                        return Err(duplicate());
                    }
                }
                "tile" => {
                    let (rows, cols, transposed) =
                        match args.as_slice() {
                            [r, c] => (r, c, false),
                            [r, c, Expr::Path(t)] if t.path.is_ident("transposed") => (r, c, true),
                            _ => return Err(arity(
                                "two sizes (tile rows, tile columns), then optionally `transposed`",
                            )),
                        };
                    let tile = ([size(rows, scalars)?, size(cols, scalars)?], transposed);
                    if layout.tile.replace(tile).is_some() {
                        return Err(duplicate());
                    }
                }
                _ => return Err(syn::Error::new_spanned(attr, ATTRS)),
            }
        }
        Ok(layout)
    }

    /// Checks that `view` takes exactly these attributes.
    pub(crate) fn check_for(
        &self,
        view: View,
        span: proc_macro2::Span,
        ty: &str,
    ) -> syn::Result<()> {
        let has = (
            self.same_len.is_some(),
            self.shape.is_some(),
            self.chunk.is_some(),
            self.tile.is_some(),
        );
        let fits = match view {
            View::Ptr | View::PtrMut | View::ThreadElemsMut | View::GridStrideMut => {
                has == (false, false, false, false)
            }
            View::Slice | View::SliceMut => !has.1 && !has.2 && !has.3,
            View::Matrix | View::ThreadCellsMut => has == (false, true, false, false),
            View::BlockChunks | View::BlockChunksMut => has == (false, false, true, false),
            View::BlockTiles | View::BlockTilesMut => has == (false, true, false, true),
        };
        if fits {
            Ok(())
        } else {
            Err(syn::Error::new(
                span,
                format!("a `{ty}` parameter {}", view.wants()),
            ))
        }
    }

    /// The scalar parameters its sizes name.
    pub(crate) fn scalars(&self) -> Vec<&Ident> {
        let shape = self.shape.iter().flatten();
        let tile = self.tile.iter().flat_map(|(t, _)| t.iter());
        shape
            .chain(self.chunk.iter())
            .chain(tile)
            .filter_map(|s| match s {
                Size::Param { name, .. } => Some(name),
                Size::Const(_) => None,
            })
            .collect()
    }

    /// The other view parameter this one shares its length with.
    pub(crate) fn same_len(&self) -> Option<&(Ident, proc_macro2::Span)> {
        self.same_len.as_ref()
    }
}

/// A size argument: a scalar parameter's name, or a constant expression.
fn size(e: &Expr, scalars: &[ScalarParam]) -> syn::Result<Size> {
    if let Expr::Path(p) = e {
        if let Some(id) = p.path.get_ident() {
            if let Some(s) = scalars.iter().find(|s| s.name == id) {
                if !SIZE_TYPES.contains(&s.ty.as_str()) {
                    return Err(syn::Error::new_spanned(
                        e,
                        format!(
                            "`{id}` is a `{}`: a size must be an unsigned integer parameter \
                             (u8, u16, u32, u64, usize) or a constant",
                            s.ty
                        ),
                    ));
                }
                return Ok(Size::Param {
                    index: s.index,
                    name: id.clone(),
                });
            }
        }
    }
    Ok(Size::Const(e.clone()))
}

/// One view parameter as the entry sees it.
pub(crate) struct ViewParam<'a> {
    pub(crate) index: usize,
    pub(crate) name: &'a Ident,
    pub(crate) view: View,
    pub(crate) layout: &'a Layout,
    /// The length parameter of the view it shares its length with:
    /// `(its index, its entry length ident)`.
    pub(crate) same_len_as: Option<(usize, Ident)>,
}

impl ViewParam<'_> {
    /// The entry's length parameter of view `name`.
    pub(crate) fn len_ident(name: &Ident) -> Ident {
        format_ident!("{}__len", name)
    }

    /// The entry's pointer parameter.
    pub(crate) fn ptr_ident(&self) -> Ident {
        format_ident!("{}__ptr", self.name)
    }

    /// The arguments of the handle's `from_raw`/`from_raw_parts` after the
    /// pointer.
    pub(crate) fn build_args(&self) -> TokenStream {
        let len = match &self.same_len_as {
            Some((_, other)) => other.clone(),
            None => ViewParam::len_ident(self.name),
        };
        let l = self.layout;
        match self.view {
            View::Ptr | View::PtrMut => quote!(),
            View::Slice | View::SliceMut | View::ThreadElemsMut | View::GridStrideMut => {
                quote!(, #len)
            }
            View::Matrix => {
                let [r, c] = shape(l);
                quote!(, #r, #c, #c)
            }
            View::ThreadCellsMut => {
                let [r, c] = shape(l);
                quote!(, #r, #c)
            }
            View::BlockChunks | View::BlockChunksMut => {
                let n = l.chunk.as_ref().expect("checked: a chunk").value();
                quote!(, #len, #n)
            }
            View::BlockTiles | View::BlockTilesMut => {
                let [r, c] = shape(l);
                let (tile, transposed) = l.tile.as_ref().expect("checked: a tile");
                let (tr, tc) = (tile[0].value(), tile[1].value());
                let order = order(*transposed);
                quote!(, #r, #c, #tr, #tc, #order)
            }
        }
    }

    /// The `ParamLayout` the host proves, if the view declares one.
    pub(crate) fn param_layout(&self) -> Option<TokenStream> {
        let proofs = quote!(::vigil_device::__shared::proofs);
        let l = self.layout;
        let shape = || {
            let s = l.shape.as_ref().expect("checked: a shape");
            (s[0].extent(), s[1].extent())
        };
        let layout = match self.view {
            View::Ptr | View::PtrMut => return None,
            View::Slice | View::SliceMut => {
                let (other, _) = self.same_len_as.as_ref()?;
                let other = *other as u16;
                quote!(#proofs::Layout::SameLen { len: #proofs::Extent::LenOf(#other) })
            }
            View::Matrix => {
                let (rows, cols) = shape();
                quote!(#proofs::Layout::Matrix { rows: #rows, cols: #cols })
            }
            View::ThreadElemsMut => quote!(#proofs::Layout::ThreadElems),
            View::GridStrideMut => quote!(#proofs::Layout::GridStride),
            View::ThreadCellsMut => {
                let (rows, cols) = shape();
                quote!(#proofs::Layout::ThreadCells { rows: #rows, cols: #cols })
            }
            View::BlockChunks | View::BlockChunksMut => {
                let chunk = l.chunk.as_ref().expect("checked: a chunk").extent();
                quote!(#proofs::Layout::BlockChunks { chunk: #chunk })
            }
            View::BlockTiles | View::BlockTilesMut => {
                let (rows, cols) = shape();
                let (tile, transposed) = l.tile.as_ref().expect("checked: a tile");
                let (tile_rows, tile_cols) = (tile[0].extent(), tile[1].extent());
                let order = order(*transposed);
                quote!(#proofs::Layout::BlockTiles {
                    rows: #rows,
                    cols: #cols,
                    tile_rows: #tile_rows,
                    tile_cols: #tile_cols,
                    order: #order,
                })
            }
        };
        let param = self.index as u16;
        let writes = self.view.writes();
        Some(quote!(#proofs::ParamLayout { param: #param, layout: #layout, writes: #writes }))
    }
}

fn shape(l: &Layout) -> [TokenStream; 2] {
    let s = l.shape.as_ref().expect("checked: a shape");
    [s[0].value(), s[1].value()]
}

fn order(transposed: bool) -> TokenStream {
    if transposed {
        quote!(::vigil_device::__shared::proofs::TileOrder::Transposed)
    } else {
        quote!(::vigil_device::__shared::proofs::TileOrder::Natural)
    }
}
