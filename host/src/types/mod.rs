//! Leaf types every layer imports (front end, backends, sanitizer, ABI):
//! plain data with no dependency inside the crate, so importing them never
//! makes a cycle.

mod device;
mod function_attrs;
mod ids;
mod launch_config;
mod ptx_param;
mod tensor_element;

pub use device::{DeviceId, DeviceProps, LaunchVariant};
pub use function_attrs::FunctionAttrs;
pub(crate) use ids::next_id;
pub use ids::{EventId, StreamId};
pub use launch_config::{DeviceLimits, Dim3, LaunchConfig, LaunchConfigError};
pub use ptx_param::PtxParam;
pub use tensor_element::{TensorElement, TensorElementType};
