//! `include_ptx!("kernels")`: the PTX a build script built for a kernel
//! crate, embedded as a `&'static str`, without the caller spelling the
//! environment variable `vigil-build` sets (`VIGIL_PTX_<LIB>`).

use proc_macro2::TokenStream;
use quote::quote;
use std::path::{Path, PathBuf};
use syn::LitStr;

/// Expands to `include_str!(env!("VIGIL_PTX_<LIB>"))` when this crate's
/// build script built `name`, else to a compile error naming the kernel
/// crates it did build.
pub(crate) fn expand(name: &LitStr) -> TokenStream {
    let var = vigil_build::env_var_for(&name.value());
    if std::env::var_os(&var).is_some() {
        // `env!` makes rustc track the variable, `include_str!` the file.
        return quote! { ::core::include_str!(::core::env!(#var)) };
    }
    if std::env::var_os(vigil_build::failed_env_var_for(&name.value())).is_some() {
        let message = format!(
            "include_ptx!(\"{0}\"): the PTX build of `{0}` failed with the errors shown where cargo compiles `{0}` for the host",
            name.value()
        );
        return syn::Error::new(name.span(), message).to_compile_error();
    }
    let out_dir = std::env::var_os("OUT_DIR").map(PathBuf::from);
    let built = built_kernel_crates(out_dir.as_deref(), std::env::vars_os());
    let message = missing_ptx_message(&name.value(), out_dir.is_some(), &built);
    syn::Error::new(name.span(), message).to_compile_error()
}

/// The library names of the PTX files `vigil-build` built for this crate:
/// the `VIGIL_PTX_*` variables whose value is a `.ptx` file in `OUT_DIR`
/// (so a stray variable in the shell does not count).
fn built_kernel_crates(
    out_dir: Option<&Path>,
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<String> {
    let Some(out_dir) = out_dir else {
        return Vec::new();
    };
    let mut libs: Vec<String> = vars
        .filter(|(k, _)| k.to_str().is_some_and(|k| k.starts_with("VIGIL_PTX_")))
        .map(|(_, v)| PathBuf::from(v))
        .filter(|p| p.extension().is_some_and(|e| e == "ptx") && p.starts_with(out_dir))
        .filter_map(|p| Some(p.file_stem()?.to_string_lossy().into_owned()))
        .collect();
    libs.sort();
    libs.dedup();
    libs
}

/// The compile error for `include_ptx!(requested)` when it was not built.
fn missing_ptx_message(requested: &str, has_build_script: bool, built: &[String]) -> String {
    let setup =
        "a build.rs with `vigil_build::PtxBuilder::new(\"<kernel crate dir>\").build_or_exit();` \
                 and `vigil-build` under [build-dependencies]";
    if !has_build_script {
        return format!(
            "include_ptx!(\"{requested}\"): this crate has no build script, so no kernel crate was built to PTX; add {setup}"
        );
    }
    if built.is_empty() {
        return format!(
            "include_ptx!(\"{requested}\"): this crate's build script built no kernel crate to PTX; it needs {setup}"
        );
    }
    let names: Vec<String> = built.iter().map(|b| format!("\"{b}\"")).collect();
    format!(
        "include_ptx!(\"{requested}\"): no kernel crate of that name was built to PTX for this crate; \
         its build script built: {} (the library name, as in include_ptx!({}))",
        names.join(", "),
        names[0]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(
        pairs: &[(&str, &str)],
    ) -> impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn only_ptx_files_in_out_dir_count_as_built() {
        let out = Path::new("/t/debug/build/app-1/out");
        let built = built_kernel_crates(
            Some(out),
            vars(&[
                (
                    "VIGIL_PTX_MY_KERNELS",
                    "/t/debug/build/app-1/out/my_kernels.ptx",
                ),
                ("VIGIL_PTX_TARGET_DIR", "/somewhere/else"),
                ("VIGIL_PTX_STALE", "/home/me/stale.ptx"),
                ("PATH", "/usr/bin"),
            ]),
        );
        assert_eq!(built, vec!["my_kernels".to_string()]);
        assert!(built_kernel_crates(None, vars(&[("VIGIL_PTX_A", "/x/a.ptx")])).is_empty());
    }

    #[test]
    fn the_error_names_what_was_built_or_how_to_build() {
        let m = missing_ptx_message("kernels", true, &["my_kernels".into(), "other".into()]);
        assert!(
            m.contains("\"my_kernels\", \"other\"") && m.contains("include_ptx!(\"my_kernels\")"),
            "{m}"
        );
        let m = missing_ptx_message("kernels", false, &[]);
        assert!(
            m.contains("no build script") && m.contains("PtxBuilder::new"),
            "{m}"
        );
        let m = missing_ptx_message("kernels", true, &[]);
        assert!(
            m.contains("built no kernel crate") && m.contains("[build-dependencies]"),
            "{m}"
        );
    }
}
