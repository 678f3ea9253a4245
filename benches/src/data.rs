//! Host data and device buffers of the two element types the suite uses,
//! and the comparison of a result against its reference.

use crate::error::{BenchError, Result};
use vigil::{DeviceBuffer, Stream};

/// A host array: a case's input, or the expected value of an output.
#[derive(Clone, Debug, PartialEq)]
pub enum HostData {
    /// 32-bit floats.
    F32(Vec<f32>),
    /// 32-bit unsigned integers.
    U32(Vec<u32>),
}

impl HostData {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            HostData::F32(v) => v.len(),
            HostData::U32(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` widened to `f64`.
    fn at(&self, i: usize) -> Option<f64> {
        match self {
            HostData::F32(v) => v.get(i).map(|&x| f64::from(x)),
            HostData::U32(v) => v.get(i).map(|&x| f64::from(x)),
        }
    }

    /// Copies the data into a new device buffer on `stream`'s context.
    pub fn upload(&self, stream: &Stream) -> Result<DevData> {
        Ok(match self {
            HostData::F32(v) => DevData::F32(DeviceBuffer::from_slice(stream, v)?),
            HostData::U32(v) => DevData::U32(DeviceBuffer::from_slice(stream, v)?),
        })
    }
}

/// A device buffer of one of the suite's element types.
pub enum DevData {
    /// 32-bit floats.
    F32(DeviceBuffer<f32>),
    /// 32-bit unsigned integers.
    U32(DeviceBuffer<u32>),
}

impl DevData {
    fn type_name(&self) -> &'static str {
        match self {
            DevData::F32(_) => "f32",
            DevData::U32(_) => "u32",
        }
    }

    fn wrong(&self, index: usize, expected: &'static str) -> BenchError {
        BenchError::BufferType {
            index,
            expected,
            found: self.type_name(),
        }
    }

    /// The device address (for the twins' raw launches).
    pub fn device_ptr(&self) -> u64 {
        match self {
            DevData::F32(b) => b.device_ptr(),
            DevData::U32(b) => b.device_ptr(),
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            DevData::F32(b) => b.len(),
            DevData::U32(b) => b.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the buffer back to the host.
    pub fn download(&self, stream: &Stream) -> Result<HostData> {
        Ok(match self {
            DevData::F32(b) => HostData::F32(b.to_vec(stream)?),
            DevData::U32(b) => HostData::U32(b.to_vec(stream)?),
        })
    }

    /// Overwrites the buffer with `data` (same type and length).
    pub fn set(&mut self, stream: &Stream, data: &HostData) -> Result<()> {
        match (self, data) {
            (DevData::F32(b), HostData::F32(v)) => b.copy_from_host(stream, v)?,
            (DevData::U32(b), HostData::U32(v)) => b.copy_from_host(stream, v)?,
            (b, _) => return Err(b.wrong(0, "the type of the data written")),
        }
        Ok(())
    }

    /// Fills the buffer with a value no kernel of the suite writes (NaN,
    /// `u32::MAX`), so that an element left unwritten fails the check.
    pub fn poison(&mut self, stream: &Stream) -> Result<()> {
        let n = self.len();
        match self {
            DevData::F32(b) => b.copy_from_host(stream, &vec![f32::NAN; n])?,
            DevData::U32(b) => b.copy_from_host(stream, &vec![u32::MAX; n])?,
        }
        Ok(())
    }

    /// Zeroes the buffer.
    pub fn zero(&mut self, stream: &Stream) -> Result<()> {
        match self {
            DevData::F32(b) => b.fill_zero(stream)?,
            DevData::U32(b) => b.fill_zero(stream)?,
        }
        Ok(())
    }
}

/// Typed views of a case's buffers for its launch function, each an error
/// (not a panic) when the case table put another type at that position.
pub trait BufferList {
    /// Buffer `i` as `f32`s.
    fn f32(&self, i: usize) -> Result<&DeviceBuffer<f32>>;
    /// Buffer `i` as `u32`s.
    fn u32(&self, i: usize) -> Result<&DeviceBuffer<u32>>;
    /// Buffer `i` as mutable `f32`s.
    fn f32_mut(&mut self, i: usize) -> Result<&mut DeviceBuffer<f32>>;
    /// Buffer `i` as mutable `u32`s.
    fn u32_mut(&mut self, i: usize) -> Result<&mut DeviceBuffer<u32>>;
    /// The device address of buffer `i` and its length.
    fn raw(&self, i: usize) -> Result<(u64, u64)>;
}

fn missing(i: usize) -> BenchError {
    BenchError::BufferType {
        index: i,
        expected: "a buffer",
        found: "nothing",
    }
}

impl BufferList for [DevData] {
    fn f32(&self, i: usize) -> Result<&DeviceBuffer<f32>> {
        match self.get(i).ok_or_else(|| missing(i))? {
            DevData::F32(b) => Ok(b),
            other => Err(other.wrong(i, "f32")),
        }
    }

    fn u32(&self, i: usize) -> Result<&DeviceBuffer<u32>> {
        match self.get(i).ok_or_else(|| missing(i))? {
            DevData::U32(b) => Ok(b),
            other => Err(other.wrong(i, "u32")),
        }
    }

    fn f32_mut(&mut self, i: usize) -> Result<&mut DeviceBuffer<f32>> {
        match self.get_mut(i).ok_or_else(|| missing(i))? {
            DevData::F32(b) => Ok(b),
            other => Err(other.wrong(i, "f32")),
        }
    }

    fn u32_mut(&mut self, i: usize) -> Result<&mut DeviceBuffer<u32>> {
        match self.get_mut(i).ok_or_else(|| missing(i))? {
            DevData::U32(b) => Ok(b),
            other => Err(other.wrong(i, "u32")),
        }
    }

    fn raw(&self, i: usize) -> Result<(u64, u64)> {
        let b = self.get(i).ok_or_else(|| missing(i))?;
        Ok((b.device_ptr(), b.len() as u64))
    }
}

/// What an output must hold after a run.
#[derive(Clone, Debug)]
pub struct Expect {
    /// The reference values: the whole output, or one per index of `at`.
    pub want: HostData,
    /// When set, only these indices are checked (a sampled reference, for
    /// outputs too costly to compute whole on the host).
    pub at: Option<Vec<usize>>,
    /// Largest accepted `|got - want| / scale`; 0 for exact.
    pub tol: f64,
    /// What errors are measured against (e.g. the sum of magnitudes for a
    /// float sum).
    pub scale: f64,
}

impl Expect {
    /// An exact reference for the whole output.
    pub fn exact(want: HostData) -> Expect {
        Expect {
            want,
            at: None,
            tol: 0.0,
            scale: 1.0,
        }
    }

    /// A float reference for the whole output: `|got - want|` at most
    /// `tol` times the largest `|want|`.
    pub fn close(want: Vec<f32>, tol: f64) -> Expect {
        let scale = want.iter().fold(0.0f64, |m, &x| m.max(f64::from(x).abs()));
        Expect {
            want: HostData::F32(want),
            at: None,
            tol,
            scale: scale.max(f64::MIN_POSITIVE),
        }
    }

    /// Checks `got`; returns the largest scaled error, or a
    /// [`BenchError::Mismatch`] naming the first bad element.
    pub fn check(&self, case: &str, output: usize, got: &HostData) -> Result<f64> {
        let mismatch = |what: String| BenchError::Mismatch {
            case: case.to_owned(),
            what: format!("output {output}: {what}"),
        };
        let indices: Box<dyn Iterator<Item = (usize, usize)>> = match &self.at {
            Some(at) => Box::new(at.iter().copied().enumerate()),
            None => {
                if got.len() != self.want.len() {
                    return Err(mismatch(format!(
                        "{} elements, the reference has {}",
                        got.len(),
                        self.want.len()
                    )));
                }
                Box::new((0..got.len()).map(|i| (i, i)))
            }
        };
        let mut worst = 0.0f64;
        for (w, g) in indices {
            let (Some(want), Some(have)) = (self.want.at(w), got.at(g)) else {
                return Err(mismatch(format!("index {g} is out of range")));
            };
            let err = (have - want).abs() / self.scale;
            // NaN is an unwritten (poisoned) element.
            if err.is_nan() || err > self.tol {
                return Err(mismatch(format!(
                    "element {g} is {have}, the reference {want} (scaled error {err:.3e}, tolerance {:.1e})",
                    self.tol
                )));
            }
            worst = worst.max(err);
        }
        Ok(worst)
    }
}

/// The largest `|a - b| / scale` over two outputs of the same shape (Vigil's
/// against the twin's); `None` when the shapes differ.
pub fn max_difference(a: &HostData, b: &HostData, scale: f64) -> Option<f64> {
    if a.len() != b.len() {
        return None;
    }
    let mut worst = 0.0f64;
    for i in 0..a.len() {
        let d = (a.at(i)? - b.at(i)?).abs() / scale;
        worst = if d.is_nan() {
            f64::INFINITY
        } else {
            worst.max(d)
        };
    }
    Some(worst)
}
