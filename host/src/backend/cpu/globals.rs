//! Device globals on the CPU backend: a kernel crate's `device_global!`
//! is a host static, registered with `vigil_device` (`host_globals`).
//! Each module load gives every global the module declares a copy in its
//! context's memory (checked like any buffer when the context is
//! sanitized), and each launch of the module tells the executor where
//! (`ThreadContext::globals`), so that modules of different contexts never
//! share a value.

use crate::error::Result;
use std::sync::OnceLock;
use vigil_device::device_global::host_globals;
use vigil_shared::gpu::GLOBAL_VALUE_OFFSET;

/// A module on the CPU backend: where its device globals are.
#[derive(Debug, Default)]
pub(crate) struct CpuModule {
    /// (the value's address in its host static, the module's copy).
    globals: OnceLock<Vec<(usize, usize)>>,
}

impl CpuModule {
    /// Where the module's launches find its device globals (none before
    /// [`relocate`](Self::relocate)).
    pub(crate) fn globals(&self) -> &[(usize, usize)] {
        self.globals.get().map_or(&[], Vec::as_slice)
    }

    /// Gives each global of `names` that this program registered a copy
    /// where `place` puts it (given its name and its initial value); a
    /// name no kernel crate of the program declares is left out.
    pub(crate) fn relocate(
        &self,
        names: &[String],
        place: &mut dyn FnMut(&str, &[u8]) -> Result<u64>,
    ) -> Result<()> {
        let mut table = Vec::new();
        for name in names {
            let Some(global) = host_globals().find(|g| g.name == name) else {
                continue;
            };
            let value_at = (global.symbol)() as usize + GLOBAL_VALUE_OFFSET;
            let bytes = global.bytes;
            // SAFETY: the static's value, `bytes` long past its slot; the
            // program never writes it (every module reads its own copy).
            let value = unsafe { std::slice::from_raw_parts(value_at as *const u8, bytes) };
            let to = place(name, value)?;
            if to != 0 {
                table.push((value_at, to as usize));
            }
        }
        // A module relocates once, right after its load.
        let _ = self.globals.set(table);
        Ok(())
    }
}
