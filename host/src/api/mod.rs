//! The front end: the typed handles a kernel author uses. Backend-neutral:
//! no driver call and no executor detail lives here; each operation is
//! handed to the context's [`Backend`](crate::backend::Backend).

pub(crate) mod args;
pub(crate) mod builder;
pub(crate) mod context;
pub(crate) mod event;
pub(crate) mod globals;
pub(crate) mod launch;
pub(crate) mod memory;
pub(crate) mod module;
pub(crate) mod process_group;
pub(crate) mod proofs;
pub(crate) mod sanitized_group;
pub(crate) mod stream;
pub(crate) mod symmetric;
pub(crate) mod tensor_map;
