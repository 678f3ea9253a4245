//! Tensor maps on a GPU: the driver encodes them
//! (`cuTensorMapEncodeTiled`).

use super::driver::tensor_map as driver;
use super::CudaBackend;
use crate::error::Result;
use crate::types::TensorElementType;
use vigil_shared::tensor_map::{TensorMapBytes, TiledMap};

impl CudaBackend {
    /// The driver's descriptor of `map` (already validated by the front
    /// end) over elements of `element`, in this backend's device context.
    pub(crate) fn encode_tensor_map(
        &self,
        map: &TiledMap,
        element: TensorElementType,
    ) -> Result<TensorMapBytes> {
        self.device().bind()?;
        Ok(driver::encode_tiled(map, element)?)
    }
}
