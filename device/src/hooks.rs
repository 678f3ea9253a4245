//! Which sanitizer the kernel API calls in this build ([`Active`]): the
//! one place where the build, not a type, decides (see
//! [`crate::sanitizer`]).

/// The hooks of the sanitized PTX build: the GPU sanitizer's.
#[cfg(all(target_arch = "nvptx64", vigil_sanitized))]
pub type Active = crate::gpu_sanitizer::GpuSanitizer;

/// The hooks of the plain PTX build: none.
#[cfg(all(target_arch = "nvptx64", not(vigil_sanitized)))]
pub type Active = crate::sanitizer::Plain;

/// The hooks the kernel API calls on the host: [`Checked`]'s, which check
/// exactly when the CPU backend's executor installed a sanitizer runtime
/// for the calling thread. (The plain PTX build calls `Plain`'s, the
/// sanitized PTX build the GPU sanitizer's.)
///
/// [`Checked`]: crate::sanitizer::Checked
#[cfg(not(target_arch = "nvptx64"))]
pub type Active = crate::sanitizer::Checked;
