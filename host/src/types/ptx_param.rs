//! [`PtxParam`]: one `.param` of a PTX entry, as the signature parser reads
//! it and as a signature-mismatch error reports it.

use vigil_shared::params::PtxType;

/// One `.param` of a PTX entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxParam {
    /// The parameter's name, e.g. `axpy_param_0`.
    pub name: String,
    /// Its scalar type; `None` for what Vigil never passes (byte arrays,
    /// vector or half types).
    pub ty: Option<PtxType>,
    /// The declaration between `.param` and the name, e.g. `.u64 .ptr .align 1`.
    pub decl: String,
}

impl PtxParam {
    /// True when a scalar of type `given` may be passed for this parameter.
    pub fn accepts(&self, given: PtxType) -> bool {
        self.ty.is_some_and(|decl| given.matches_ptx_decl(decl))
    }
}
