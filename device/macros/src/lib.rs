//! `#[kernel]`: turns a Rust function into a Vigil GPU kernel.
//!
//! See `vigil_device::kernel` for what the attribute generates. The macro
//! rewrites signatures, and in the body only hands the sanitizer type to
//! shared arrays, barriers and warp collectives (`carry`).
#![warn(missing_docs)]

mod carry;
mod include_ptx;
mod options;
mod views;

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{
    parse_macro_input, FnArg, GenericArgument, GenericParam, Ident, ItemFn, Pat, PathArguments,
    ReturnType, Type,
};
use views::{Layout, ScalarParam, View, ViewParam};

/// Scalar types a kernel may take by value, and the reason others are refused.
const SCALARS: &[&str] = &[
    "u8", "i8", "u16", "i16", "u32", "i32", "u64", "i64", "usize", "isize", "f32", "f64",
];

const SUPPORTED: &str = "kernel parameters must be scalars (u8, i8, u16, i16, u32, i32, u64, i64, usize, isize, f32, f64) \
     or global-memory handles (GlobalPtr<T>, GlobalPtrMut<T>, GlobalSlice<T>, GlobalSliceMut<T>, GlobalMatrix<T>, \
     ThreadElemsMut<T>, ThreadCellsMut<T>, GridStrideMut<T>, BlockChunks<T>, BlockChunksMut<T>, BlockTiles<T>, \
     BlockTilesMut<T>, Peers<T> with T: bytemuck::Pod) \
     or tensor maps (TensorMap<T, D>, TensorMapMut<T, D>)";

/// The PTX of a kernel crate that this crate's `build.rs` built with
/// `vigil_build::PtxBuilder`, as a `&'static str`: `include_ptx!("kernels")`
/// for the kernel crate whose library is `kernels` (a package name with
/// `-` works too). If that crate was not built, the compile error names the
/// kernel crates that were. Use it as `vigil::include_ptx!`.
#[proc_macro]
pub fn include_ptx(input: TokenStream) -> TokenStream {
    let name = parse_macro_input!(input as syn::LitStr);
    include_ptx::expand(&name).into()
}

/// Marks a function as a GPU kernel.
///
/// ```ignore
/// #[kernel]
/// pub fn axpy(a: f32, x: GlobalSlice<f32>, y: GlobalSliceMut<f32>) {
///     let i = global_index_x();
///     if i < y.len() {
///         y.store(i, a * x.load(i) + y.load(i));
///     }
/// }
/// ```
///
/// generates the body as `fn axpy<S: Sanitizer>(...)`, the PTX entry point
/// `axpy` (the plain variant) in the `nvptx64` build, and a launch marker
/// `struct axpy {}` implementing `vigil_device::Kernel` (whose
/// `DYNAMIC_SHARED_BYTES` is the capacity of the `shared_stack!` the body
/// declares, if any). To reach the
/// sanitizer type in the body (for `fence::<S>`), declare it:
/// `fn k<S: Sanitizer>(flag: GlobalPtrMut<u32, S>)`.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let options = match options::Options::parse(attr.into()) {
        Ok(o) => o,
        Err(e) => return e.to_compile_error().into(),
    };
    let func = parse_macro_input!(item as ItemFn);
    match expand(func, options) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// How one parameter crosses to the device.
enum ParamKind {
    Scalar,
    /// A global-memory handle: its type name (`GlobalSlice`, ...), what it
    /// is, and its element type.
    Handle {
        handle: Ident,
        view: View,
        elem: Box<Type>,
    },
    /// Every rank's buffer of a symmetric allocation (`Peers<T>`): its
    /// element type.
    Peers {
        elem: Box<Type>,
    },
    /// A tensor map (`TensorMap<T, D>`, `TensorMapMut<T, D>`): its type
    /// name and its element type and rank.
    TensorMap {
        handle: Ident,
        elem: Box<Type>,
        rank: Box<GenericArgument>,
    },
}

/// Pointers in a `Peers` argument: `vigil_device::MAX_RANKS` (the device
/// crate checks that its `KernelParam` lowering has this many).
const PEER_POINTERS: usize = 8;

struct Param {
    name: Ident,
    mutability: Option<syn::token::Mut>,
    ty: Type,
    kind: ParamKind,
    /// The layout attributes it was declared with.
    layout: Layout,
    /// Where it was declared (errors about its attributes point here).
    span: Span,
}

fn expand(func: ItemFn, options: options::Options) -> syn::Result<TokenStream2> {
    let sig = &func.sig;
    if let Some(t) = &sig.asyncness {
        return Err(syn::Error::new_spanned(t, "a kernel cannot be async"));
    }
    if let Some(t) = &sig.constness {
        return Err(syn::Error::new_spanned(t, "a kernel cannot be const"));
    }
    if let Some(t) = &sig.unsafety {
        return Err(syn::Error::new_spanned(t, "a kernel cannot be unsafe: its parameters are checked handles; use unsafe blocks inside"));
    }
    if let Some(abi) = &sig.abi {
        return Err(syn::Error::new_spanned(
            abi,
            "a kernel takes no ABI: #[kernel] emits the extern \"ptx-kernel\" entry point itself",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(syn::Error::new_spanned(v, "a kernel cannot be variadic"));
    }
    if let ReturnType::Type(_, ty) = &sig.output {
        let unit = matches!(&**ty, Type::Tuple(t) if t.elems.is_empty());
        if !unit {
            return Err(syn::Error::new_spanned(ty, "a kernel returns nothing: write results through a GlobalSliceMut or GlobalPtrMut parameter"));
        }
    }
    if let Some(w) = &sig.generics.where_clause {
        return Err(syn::Error::new_spanned(w, "a kernel takes no where clause; bound the sanitizer parameter inline: fn k<S: Sanitizer>(...)"));
    }

    // The sanitizer type parameter: the user's single type parameter, or a hidden one.
    let mut user_san = None;
    for g in &sig.generics.params {
        match g {
            GenericParam::Type(t) if user_san.is_none() => user_san = Some(t.clone()),
            other => {
                return Err(syn::Error::new_spanned(
                    other,
                    "a kernel takes at most one generic parameter, the sanitizer type (fn k<S: Sanitizer>(...)); \
                     lifetimes, const generics and other type parameters cannot cross to the GPU",
                ))
            }
        }
    }
    // A kernel that declares no sanitizer parameter has a plain
    // (non-generic) body whose handles are the default ones, so that
    // helpers written without a sanitizer type take them.
    let san: TokenStream2 = match &user_san {
        Some(t) => t.ident.to_token_stream(),
        None => quote!(::vigil_device::Plain),
    };
    let generics = user_san.as_ref().map(|t| {
        let (ident, bounds) = (&t.ident, &t.bounds);
        quote!(<#ident: ::vigil_device::Sanitizer + #bounds>)
    });
    // The body's instance with sanitizer `s` (the build decides the hooks:
    // `vigil_device::sanitizer::Active`; `s` only types the handles).
    let call_with = |s: &TokenStream2| match &user_san {
        Some(_) => quote!(::<#s>),
        None => quote!(),
    };

    let mut params = sig
        .inputs
        .iter()
        .map(parse_param)
        .collect::<syn::Result<Vec<_>>>()?;
    resolve_layouts(&mut params, sig)?;

    let name = &sig.ident;
    let name_str = name.to_string();
    let vis = &func.vis;
    let attrs = &func.attrs;
    let mut body = func.block.clone();
    // A scalar parameter may serve only as a view's size: used, then.
    for n in params.iter().flat_map(|p| p.layout.scalars()) {
        body.stmts.insert(0, syn::parse_quote!(let _ = #n;));
    }
    let found = carry::carry_sanitizer(&mut body, &san, &sig.ident);
    let dynamic_shared = dynamic_shared_bytes(&found)?;
    // The plain entry's shared arrays, declared at module scope.
    let shared_symbols = found.symbols.iter().map(|shared| {
        let carry::SharedSymbol {
            symbol,
            ty,
            len,
            align,
        } = shared;
        quote! {
            ::vigil_device::__shared_symbol!(
                #symbol,
                { ::vigil_device::shared_mem::__align_at_least::<#ty>(#align) },
                { ::vigil_device::shared_mem::__bytes::<#ty, { #len }>() }
            );
        }
    });
    let has_inline = attrs.iter().any(|a| a.path().is_ident("inline"));
    let inline = if has_inline {
        quote!()
    } else {
        quote!(#[inline(always)])
    };

    let with_san = |s: &TokenStream2| -> Vec<TokenStream2> {
        params
            .iter()
            .map(|p| match &p.kind {
                ParamKind::Scalar => {
                    let ty = &p.ty;
                    quote!(#ty)
                }
                ParamKind::Handle { handle, elem, .. } => {
                    quote!(::vigil_device::#handle<#elem, #s>)
                }
                ParamKind::Peers { elem } => quote!(::vigil_device::Peers<#elem, #s>),
                ParamKind::TensorMap { handle, elem, rank } => {
                    quote!(::vigil_device::async_copy::#handle<#elem, #rank, #s>)
                }
            })
            .collect()
    };
    let names: Vec<&Ident> = params.iter().map(|p| &p.name).collect();
    let muts: Vec<_> = params.iter().map(|p| p.mutability).collect();
    let body_tys = with_san(&san);
    let plain_tys = with_san(&quote!(::vigil_device::Plain));
    let ty_strs: Vec<String> = params.iter().map(|p| type_string(&p.ty)).collect();
    let name_strs: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let views = view_params(&params);
    let layouts: Vec<TokenStream2> = views.iter().filter_map(|v| v.param_layout()).collect();
    let block_shape = options.block_shape_item();
    let prologue = options.entry_prologue();
    let plain_marker = options.plain_marker();

    // PTX entry parameters: scalars as themselves, handles as pointer (+
    // length), each with the name the entry's handle construction reads.
    let mut entry_params = Vec::new();
    let mut entry_names = Vec::new();
    let mut entry_tys = Vec::new();
    let mut part = |name: Ident, ty: TokenStream2| {
        entry_params.push(quote!(#name: #ty));
        entry_names.push(name);
        entry_tys.push(ty);
    };
    for p in &params {
        let n = &p.name;
        match &p.kind {
            ParamKind::Scalar => {
                let ty = &p.ty;
                part(n.clone(), quote!(#ty));
            }
            ParamKind::Handle { view, elem, .. } => {
                let ptr_ty = if view.writes() {
                    quote!(*mut #elem)
                } else {
                    quote!(*const #elem)
                };
                part(format_ident!("{}__ptr", n), ptr_ty);
                if view.has_len() {
                    part(ViewParam::len_ident(n), quote!(usize));
                }
            }
            ParamKind::TensorMap { .. } => {
                part(format_ident!("{}__ptr", n), quote!(*const u8));
                part(format_ident!("{}__len", n), quote!(usize));
            }
            ParamKind::Peers { elem } => {
                for ptr in peer_pointers(n) {
                    part(ptr, quote!(*mut #elem));
                }
                let (len, rank, world) = peer_scalars(n);
                part(len, quote!(usize));
                part(rank, quote!(u32));
                part(world, quote!(u32));
            }
        }
    }
    // Rebuilds the handles from the entry's scalars, with sanitizer `s`:
    // the same code in the PTX entries and in the CPU backend's.
    let entry_build = |s: &TokenStream2| -> Vec<TokenStream2> {
        let mut views = views.iter();
        params
            .iter()
            .map(|p| {
                let n = &p.name;
                match &p.kind {
                    ParamKind::Scalar => quote!(let #n = #n;),
                    ParamKind::Handle { handle, elem, view } => {
                        let v = views.next().expect("one view per handle");
                        let ptr = v.ptr_ident();
                        let args = v.build_args();
                        let h = quote!(::vigil_device::#handle::<#elem, #s>);
                        let ctor = if view.has_len() {
                            quote!(from_raw_parts)
                        } else {
                            quote!(from_raw)
                        };
                        quote! {
                            // SAFETY: the host passed a device allocation of the
                            // length it packed (at least one element for a
                            // pointer), and proved the parameter's layout
                            // (`Kernel::LAYOUTS`) for this launch's geometry.
                            let #n = unsafe { #h::#ctor(#ptr #args) };
                        }
                    }
                    ParamKind::TensorMap { handle, elem, rank } => {
                        let ptr = format_ident!("{}__ptr", n);
                        let len = format_ident!("{}__len", n);
                        quote! {
                            // SAFETY: the host passed a tensor map of this rank and
                            // element type with `len`-element boxes.
                            let #n = unsafe {
                                ::vigil_device::async_copy::#handle::<#elem, #rank, #s>::__from_param(#ptr, #len)
                            };
                        }
                    }
                    ParamKind::Peers { elem } => {
                        let ptrs = peer_pointers(n);
                        let (len, rank, world) = peer_scalars(n);
                        quote! {
                            // SAFETY: the host passed every rank's buffer of `len` elements,
                            // `rank < world <= MAX_RANKS`.
                            let #n = unsafe {
                                ::vigil_device::Peers::<#elem, #s>::from_raw_parts([#(#ptrs),*], #len, #rank, #world)
                            };
                        }
                    }
                }
            })
            .collect()
    };
    let plain_san = quote!(::vigil_device::Plain);
    let plain_build = entry_build(&plain_san);
    let plain_call = call_with(&plain_san);
    let host_san = match &user_san {
        Some(_) => quote!(__VigilHostSanitizer),
        None => plain_san.clone(),
    };
    let host_build = entry_build(&host_san);
    let host_call = call_with(&host_san);
    let gpu_san = match &user_san {
        Some(_) => quote!(::vigil_device::gpu_sanitizer::GpuSanitizer),
        None => plain_san.clone(),
    };
    let sanitized_build = entry_build(&gpu_san);
    let sanitized_call = call_with(&gpu_san);
    let sanitized_name = format!("{name_str}__vigil");
    let sanitized_ident = format_ident!("__vigil_ptx_sanitized_entry_{}", name);
    let entry_ident = format_ident!("__vigil_ptx_entry_{}", name);
    let marker_doc = format!("Launch handle of the kernel `{name_str}`: pass it to the host API (`module.kernel::<{name_str}>()`).");

    Ok(quote! {
        #(#attrs)*
        #inline
        #[allow(clippy::too_many_arguments)]
        #vis fn #name #generics(#(#muts #names: #body_tys),*) #body

        #(#shared_symbols)*

        #[doc = #marker_doc]
        #[allow(non_camel_case_types)]
        #vis struct #name {}

        impl ::vigil_device::Kernel for #name {
            const NAME: &'static str = #name_str;
            const PARAMS: &'static [::vigil_device::__shared::params::ParamDesc] = &[
                #(::vigil_device::__shared::params::ParamDesc {
                    name: #name_strs,
                    rust_type: #ty_strs,
                    parts: <#plain_tys as ::vigil_device::KernelParam>::PARTS,
                }),*
            ];
            type Params = (#(#plain_tys,)*);
            #dynamic_shared
            const LAYOUTS: &'static [::vigil_device::__shared::proofs::ParamLayout] = &[#(#layouts),*];
            #block_shape

            #[cfg(not(target_arch = "nvptx64"))]
            #[allow(non_snake_case, unused_variables)]
            unsafe fn run_host<__VigilHostSanitizer: ::vigil_device::Sanitizer>(params: &[u8]) {
                let mut __vigil_cursor = ::vigil_device::__shared::params::ParamCursor::new();
                #(
                    // SAFETY: the caller packed this kernel's parameters in order.
                    let #entry_names: #entry_tys = unsafe {
                        <#entry_tys as ::vigil_device::kernel::HostPart>::read(params, &mut __vigil_cursor)
                    };
                )*
                #(#host_build)*
                #prologue
                #name #host_call(#(#names),*);
                // Copies still in flight complete as the thread returns.
                ::vigil_device::host_runtime::thread_returned();
            }
        }

        // The plain PTX build has the plain entry, the sanitized build
        // (`vigil_device::sanitizer::Active`) the sanitized one.
        ::vigil_device::__in_plain_build! {
        #[cfg(target_arch = "nvptx64")]
        #[doc(hidden)]
        #[export_name = #name_str]
        #[allow(non_snake_case, clippy::too_many_arguments, unused_variables)]
        pub unsafe extern "ptx-kernel" fn #entry_ident(#(#entry_params),*) {
            #plain_marker
            #(#plain_build)*
            #prologue
            #name #plain_call(#(#names),*)
        }
        }

        ::vigil_device::__in_sanitized_build! {
        /// The sanitized variant: the same body with the GPU sanitizer,
        /// taking the hidden parameters (`vigil_shared::gpu::HIDDEN_PARAMS`)
        /// after the user's.
        #[cfg(target_arch = "nvptx64")]
        #[doc(hidden)]
        #[export_name = #sanitized_name]
        #[allow(non_snake_case, clippy::too_many_arguments, unused_variables)]
        pub unsafe extern "ptx-kernel" fn #sanitized_ident(
            #(#entry_params,)*
            __vigil_runtime: u64,
            __vigil_launch_record: u64,
            __vigil_base: u32,
            __vigil_launch: u32,
            __vigil_extensions: u32,
            __vigil_count: u32,
            __vigil_flags: u32,
            __vigil_tag: u32,
            __vigil_device: u32,
            __vigil_own_bound: u32,
            __vigil_path_word: u64,
            __vigil_real_base: u64,
            __vigil_read_only_0_start: u64,
            __vigil_read_only_0_end: u64,
            __vigil_read_only_1_start: u64,
            __vigil_read_only_1_end: u64,
        ) {
            #(#sanitized_build)*
            #prologue
            // SAFETY: the host's sanitized launch passes a live runtime and
            // launch record, and ranges no thread of the launch writes
            // (see `vigil_shared::gpu`).
            unsafe {
                ::vigil_device::gpu_sanitizer::run_cta(
                    ::vigil_device::gpu_sanitizer::LaunchArgs {
                        runtime: __vigil_runtime,
                        record: __vigil_launch_record,
                        base: __vigil_base,
                        launch: __vigil_launch,
                        extensions: __vigil_extensions,
                        count: __vigil_count,
                        flags: __vigil_flags,
                        tag: __vigil_tag,
                        device: __vigil_device,
                        own_bound: __vigil_own_bound,
                        path_word: __vigil_path_word,
                        real_base: __vigil_real_base,
                        read_only: [
                            __vigil_read_only_0_start,
                            __vigil_read_only_0_end,
                            __vigil_read_only_1_start,
                            __vigil_read_only_1_end,
                        ],
                    },
                    || #name #sanitized_call(#(#names),*),
                )
            }
        }
        }
    })
}

/// Reads every parameter's layout attributes, now that the scalar
/// parameters a size may name are known, and checks them against the
/// parameter's type and the other parameters.
fn resolve_layouts(params: &mut [Param], sig: &syn::Signature) -> syn::Result<()> {
    let scalars: Vec<ScalarParam> = params
        .iter()
        .enumerate()
        .filter(|(_, p)| matches!(p.kind, ParamKind::Scalar))
        .map(|(index, p)| ScalarParam {
            index,
            name: &p.name,
            ty: type_string(&p.ty),
        })
        .collect();
    let mut layouts = Vec::new();
    for (arg, p) in sig.inputs.iter().zip(params.iter()) {
        let FnArg::Typed(pt) = arg else {
            unreachable!("parse_param refused self")
        };
        let layout = Layout::parse(&pt.attrs, &scalars)?;
        match &p.kind {
            ParamKind::Handle { view, .. } => {
                layout.check_for(*view, p.span, &type_string(&p.ty))?
            }
            _ if !pt.attrs.is_empty() => {
                return Err(syn::Error::new_spanned(
                    &pt.attrs[0],
                    "layout attributes belong on global-memory views (GlobalSlice<T>, ...)",
                ))
            }
            _ => {}
        }
        layouts.push(layout);
    }
    for (p, layout) in params.iter_mut().zip(layouts) {
        p.layout = layout;
    }
    // A `#[same_len(y)]` names a view with a length of its own.
    for p in params.iter() {
        let Some((other, span)) = p.layout.same_len() else {
            continue;
        };
        let target = params.iter().find(|q| &q.name == other);
        let ok = match target {
            Some(q) if q.name == p.name => false,
            Some(q) => {
                matches!(&q.kind, ParamKind::Handle { view, .. } if view.has_len())
                    && q.layout.same_len().is_none()
            }
            None => false,
        };
        if !ok {
            return Err(syn::Error::new(
                *span,
                format!(
                    "#[same_len({other})] needs `{other}` to be another view parameter with a \
                     length of its own (a slice, a partition, not a #[same_len] view)"
                ),
            ));
        }
    }
    Ok(())
}

/// The handle parameters, in order, with what their entry needs.
fn view_params(params: &[Param]) -> Vec<ViewParam<'_>> {
    params
        .iter()
        .enumerate()
        .filter_map(|(index, p)| {
            let ParamKind::Handle { view, .. } = &p.kind else {
                return None;
            };
            let same_len_as = p.layout.same_len().map(|(other, _)| {
                let i = params
                    .iter()
                    .position(|q| &q.name == other)
                    .expect("resolve_layouts found it");
                (i, ViewParam::len_ident(other))
            });
            Some(ViewParam {
                index,
                name: &p.name,
                view: *view,
                layout: &p.layout,
                same_len_as,
            })
        })
        .collect()
}

/// The `Kernel::DYNAMIC_SHARED_BYTES` item of a body that declares a
/// shared stack (its capacity), or nothing. A second stack, or a
/// `dynamic_shared_array!` beside one, would alias the stack's bytes:
/// compile errors.
fn dynamic_shared_bytes(found: &carry::Found) -> syn::Result<TokenStream2> {
    let Some((_, capacity)) = found.stacks.first() else {
        return Ok(quote!());
    };
    if let Some((span, _)) = found.stacks.get(1) {
        return Err(syn::Error::new(
            *span,
            "a kernel declares at most one shared_stack!: it owns the launch's dynamic shared memory",
        ));
    }
    if let Some(span) = found.dynamic_views.first() {
        return Err(syn::Error::new(
            *span,
            "dynamic_shared_array! would alias this kernel's shared_stack!, which owns the launch's \
             dynamic shared memory: push a tile on the stack instead",
        ));
    }
    Ok(quote!(const DYNAMIC_SHARED_BYTES: usize = { #capacity };))
}

/// The entry's pointer parameters of `Peers` argument `n`.
fn peer_pointers(n: &Ident) -> Vec<Ident> {
    (0..PEER_POINTERS)
        .map(|i| format_ident!("{}__ptr{}", n, i))
        .collect()
}

/// The entry's length, rank and world parameters of `Peers` argument `n`.
fn peer_scalars(n: &Ident) -> (Ident, Ident, Ident) {
    (
        format_ident!("{}__len", n),
        format_ident!("{}__rank", n),
        format_ident!("{}__world", n),
    )
}

fn parse_param(arg: &FnArg) -> syn::Result<Param> {
    let FnArg::Typed(pt) = arg else {
        return Err(syn::Error::new_spanned(
            arg,
            "a kernel is a free function; it cannot take self",
        ));
    };
    let Pat::Ident(pi) = &*pt.pat else {
        return Err(syn::Error::new_spanned(
            &pt.pat,
            "kernel parameters must be plain names (no patterns)",
        ));
    };
    if pi.by_ref.is_some() || pi.subpat.is_some() {
        return Err(syn::Error::new_spanned(
            &pt.pat,
            "kernel parameters must be plain names (no patterns)",
        ));
    }
    let ty = (*pt.ty).clone();
    let kind = classify(&ty)?;
    Ok(Param {
        name: pi.ident.clone(),
        mutability: pi.mutability,
        span: pt.span(),
        ty,
        kind,
        layout: Layout::default(),
    })
}

fn classify(ty: &Type) -> syn::Result<ParamKind> {
    let unsupported = |why: &str| {
        let msg = format!(
            "unsupported kernel parameter type `{}`: {why}{SUPPORTED}",
            type_string(ty)
        );
        Err(syn::Error::new(ty.span(), msg))
    };
    match ty {
        Type::Path(tp) if tp.qself.is_none() => {
            let last = tp.path.segments.last().expect("a path has a segment");
            let ident = last.ident.to_string();
            if let Some(view) = View::named(&ident) {
                let PathArguments::AngleBracketed(ab) = &last.arguments else {
                    return unsupported(
                        "a global-memory handle needs its element type, e.g. GlobalSlice<f32>; ",
                    );
                };
                let tys: Vec<&Type> = ab
                    .args
                    .iter()
                    .filter_map(|a| {
                        if let GenericArgument::Type(t) = a {
                            Some(t)
                        } else {
                            None
                        }
                    })
                    .collect();
                if tys.is_empty() || tys.len() > 2 || tys.len() != ab.args.len() {
                    return unsupported("a global-memory handle takes its element type and optionally the sanitizer type; ");
                }
                return Ok(ParamKind::Handle {
                    handle: last.ident.clone(),
                    view,
                    elem: Box::new(tys[0].clone()),
                });
            }
            if ident == "TensorMap" || ident == "TensorMapMut" {
                let PathArguments::AngleBracketed(ab) = &last.arguments else {
                    return unsupported(
                        "a tensor map needs its element type and rank, e.g. TensorMap<f32, 2>; ",
                    );
                };
                let args: Vec<&GenericArgument> = ab.args.iter().collect();
                let elem = match args.first() {
                    Some(GenericArgument::Type(t)) if args.len() == 2 || args.len() == 3 => t,
                    _ => {
                        return unsupported("a tensor map takes its element type, its rank and optionally the sanitizer type; ")
                    }
                };
                return Ok(ParamKind::TensorMap {
                    handle: last.ident.clone(),
                    elem: Box::new(elem.clone()),
                    rank: Box::new(args[1].clone()),
                });
            }
            if ident == "Peers" {
                let PathArguments::AngleBracketed(ab) = &last.arguments else {
                    return unsupported("Peers needs its element type, e.g. Peers<f32>; ");
                };
                let tys: Vec<&Type> = ab
                    .args
                    .iter()
                    .filter_map(|a| match a {
                        GenericArgument::Type(t) => Some(t),
                        _ => None,
                    })
                    .collect();
                if tys.is_empty() || tys.len() > 2 || tys.len() != ab.args.len() {
                    return unsupported(
                        "Peers takes its element type and optionally the sanitizer type; ",
                    );
                }
                return Ok(ParamKind::Peers {
                    elem: Box::new(tys[0].clone()),
                });
            }
            if tp.path.segments.len() == 1
                && last.arguments.is_empty()
                && SCALARS.contains(&ident.as_str())
            {
                return Ok(ParamKind::Scalar);
            }
            match ident.as_str() {
                "bool" => unsupported("bool has no fixed PTX parameter ABI, pass a u32 (0 or 1) instead; "),
                "char" => unsupported("pass a u32 instead; "),
                "u128" | "i128" => unsupported("128-bit integers are not PTX parameter types, pass two u64s; "),
                "Vec" | "Box" | "String" => unsupported("host heap types cannot cross to the GPU, pass a GlobalSlice<T>; "),
                _ => unsupported("structs and other named types are not supported yet, pass their fields as separate parameters; "),
            }
        }
        Type::Reference(_) => unsupported(
            "references cannot cross to the GPU, use GlobalSlice<T> / GlobalSliceMut<T>; ",
        ),
        Type::Ptr(_) => unsupported(
            "raw pointers carry no length or sanitizer hooks, use GlobalPtr<T> / GlobalSlice<T>; ",
        ),
        Type::Array(_) | Type::Tuple(_) | Type::Slice(_) => {
            unsupported("pass each element as its own parameter, or the data in a GlobalSlice<T>; ")
        }
        _ => unsupported(""),
    }
}

fn type_string(ty: &Type) -> String {
    quote_spanned!(ty.span()=> #ty)
        .to_string()
        .replace(" < ", "<")
        .replace(" >", ">")
        .replace(" ,", ",")
        .replace("< ", "<")
}
