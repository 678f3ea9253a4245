//! Device memory: [`DeviceBuffer`] (owning) and the borrowed views
//! [`DeviceSlice`] / [`DeviceSliceMut`].
//!
//! Copies take the [`Stream`] they are ordered on. Copies that read or write
//! host memory return only when the host side is done with it (the host
//! slice is only borrowed for the call); device-to-device copies and fills
//! are asynchronous, ordered on the stream like launches.
//!
//! Where the memory comes from depends on the context
//! ([`Context`](crate::Context) lists the modes): `cuMemAlloc` on a plain
//! GPU context, the sanitizer's shadow allocator on a sanitized one, and
//! zeroed host memory aligned to [`HOST_ALIGN`](crate::HOST_ALIGN) bytes on the CPU backend.
//! The API, the checks and the copy semantics are the same everywhere; only
//! the final allocation, copy or free differs, and that is the backend's
//! (handed over through [`Backend`](crate::backend::Backend)).

use crate::api::context::Context;
use crate::api::stream::Stream;
use crate::backend::Transfer;
use crate::error::{Error, Result};
use crate::types::DeviceId;
use bytemuck::Pod;
use std::fmt;
use std::marker::PhantomData;
use std::mem::{align_of, size_of};
use std::ops::{Bound, RangeBounds};
use std::panic::Location;

/// An owned array of `len` elements of `T` in device global memory (host
/// memory on the CPU backend).
///
/// Freed on drop (`cuMemFree`, which waits for work still using it; on a
/// sanitized GPU context the block goes back to the shadow allocator's
/// cache after a device-wide wait). A zero-length buffer owns no memory and
/// has a null pointer.
pub struct DeviceBuffer<T: Pod> {
    ctx: Context,
    ptr: u64,
    len: usize,
    _elem: PhantomData<T>,
}

/// A borrowed, read-only view of device memory (like `&[T]`).
pub struct DeviceSlice<'a, T> {
    ctx: &'a Context,
    ptr: u64,
    len: usize,
    _elem: PhantomData<&'a [T]>,
}

/// A borrowed, writable view of device memory (like `&mut [T]`).
pub struct DeviceSliceMut<'a, T> {
    ctx: &'a Context,
    ptr: u64,
    len: usize,
    _elem: PhantomData<&'a mut [T]>,
}

/// Anything that can be viewed as a read-only device slice: buffers and
/// both kinds of slices. Copy sources and read-only kernel arguments take it.
pub trait AsDeviceSlice<T> {
    /// The whole object as a read-only view.
    fn as_device_slice(&self) -> DeviceSlice<'_, T>;
}

/// Anything that can be viewed as a writable device slice.
pub trait AsDeviceSliceMut<T>: AsDeviceSlice<T> {
    /// The whole object as a writable view.
    fn as_device_slice_mut(&mut self) -> DeviceSliceMut<'_, T>;
}

fn byte_len<T>(len: usize) -> Result<usize> {
    len.checked_mul(size_of::<T>()).ok_or(Error::SizeOverflow {
        count: len,
        elem_size: size_of::<T>(),
    })
}

/// Resolves `range` against a slice of length `len`.
pub(crate) fn resolve_range(range: impl RangeBounds<usize>, len: usize) -> Result<(usize, usize)> {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    if start > end || end > len {
        return Err(Error::OutOfBounds { start, end, len });
    }
    Ok((start, end))
}

impl<T: Pod> DeviceBuffer<T> {
    /// Allocates `len` elements whose contents are unspecified (any bit
    /// pattern is a valid `T`; on the CPU backend they are zero). Use
    /// [`DeviceBuffer::alloc_zeroed`] or [`DeviceBuffer::from_slice`] unless
    /// every element is written first.
    #[track_caller]
    pub fn alloc(stream: &Stream, len: usize) -> Result<DeviceBuffer<T>> {
        let ctx = stream.context();
        let bytes = byte_len::<T>(len)?;
        let ptr = if bytes > 0 {
            allocate(stream, bytes, align_of::<T>())?
        } else {
            0
        };
        Ok(DeviceBuffer {
            ctx: ctx.clone(),
            ptr,
            len,
            _elem: PhantomData,
        })
    }

    /// Allocates `len` zeroed elements (the fill is ordered on `stream`).
    #[track_caller]
    pub fn alloc_zeroed(stream: &Stream, len: usize) -> Result<DeviceBuffer<T>> {
        let mut buf = DeviceBuffer::alloc(stream, len)?;
        buf.fill_zero(stream)?;
        Ok(buf)
    }

    /// Allocates a buffer holding a copy of `data`.
    #[track_caller]
    pub fn from_slice(stream: &Stream, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buf = DeviceBuffer::alloc(stream, data.len())?;
        buf.copy_from_host(stream, data)?;
        Ok(buf)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn size_bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// The device address of the first element (0 when empty; a host
    /// address on the CPU backend).
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The context the buffer was allocated on.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The whole buffer as a read-only view.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        DeviceSlice {
            ctx: &self.ctx,
            ptr: self.ptr,
            len: self.len,
            _elem: PhantomData,
        }
    }

    /// The whole buffer as a writable view.
    pub fn as_slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        DeviceSliceMut {
            ctx: &self.ctx,
            ptr: self.ptr,
            len: self.len,
            _elem: PhantomData,
        }
    }

    /// A read-only view of `range`; [`Error::OutOfBounds`] past the end.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'_, T>> {
        self.as_slice().slice(range)
    }

    /// A writable view of `range`; [`Error::OutOfBounds`] past the end.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        self.as_slice_mut().into_slice_mut(range)
    }

    /// Copies `src` from the host into the buffer; lengths must match.
    /// Returns when the copy has completed.
    #[track_caller]
    pub fn copy_from_host(&mut self, stream: &Stream, src: &[T]) -> Result<()> {
        self.as_slice_mut().copy_from_host(stream, src)
    }

    /// Copies the buffer into `dst` on the host; lengths must match.
    /// Returns when the copy has completed.
    #[track_caller]
    pub fn copy_to_host(&self, stream: &Stream, dst: &mut [T]) -> Result<()> {
        self.as_slice().copy_to_host(stream, dst)
    }

    /// Copies the buffer into a new `Vec`.
    #[track_caller]
    pub fn to_vec(&self, stream: &Stream) -> Result<Vec<T>> {
        self.as_slice().to_vec(stream)
    }

    /// Enqueues a device-to-device copy from `src`; lengths must match.
    #[track_caller]
    pub fn copy_from(&mut self, stream: &Stream, src: &impl AsDeviceSlice<T>) -> Result<()> {
        self.as_slice_mut().copy_from(stream, src)
    }

    /// Enqueues setting every byte to zero.
    #[track_caller]
    pub fn fill_zero(&mut self, stream: &Stream) -> Result<()> {
        self.as_slice_mut().fill_zero(stream)
    }
}

impl<'a, T: Pod> DeviceSlice<'a, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the slice has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of the first element.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The context the memory belongs to.
    pub fn context(&self) -> &'a Context {
        self.ctx
    }

    /// A sub-view of `range`; [`Error::OutOfBounds`] past the end.
    pub fn slice(&self, range: impl RangeBounds<usize>) -> Result<DeviceSlice<'a, T>> {
        let (start, end) = resolve_range(range, self.len)?;
        Ok(DeviceSlice {
            ctx: self.ctx,
            ptr: self.ptr + (start * size_of::<T>()) as u64,
            len: end - start,
            _elem: PhantomData,
        })
    }

    /// Copies the slice into `dst` on the host; lengths must match.
    /// Returns when the copy has completed.
    #[track_caller]
    pub fn copy_to_host(&self, stream: &Stream, dst: &mut [T]) -> Result<()> {
        check_len("copy_to_host", dst.len(), self.len)?;
        stream
            .context()
            .expect_device("copy_to_host", self.ctx.device())?;
        if self.len == 0 {
            return Ok(());
        }
        // The device range lies inside a live allocation borrowed for `'a`.
        transfer(
            stream,
            Transfer::ToHost {
                dst: bytemuck::cast_slice_mut(dst),
                src: self.ptr,
            },
        )
    }

    /// Copies the slice into a new `Vec`.
    #[track_caller]
    pub fn to_vec(&self, stream: &Stream) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); self.len];
        self.copy_to_host(stream, &mut v)?;
        Ok(v)
    }
}

impl<'a, T: Pod> DeviceSliceMut<'a, T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the slice has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The device address of the first element.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The context the memory belongs to.
    pub fn context(&self) -> &'a Context {
        self.ctx
    }

    /// A read-only view of the same memory.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        DeviceSlice {
            ctx: self.ctx,
            ptr: self.ptr,
            len: self.len,
            _elem: PhantomData,
        }
    }

    /// A shorter-lived writable view of the same memory.
    pub fn reborrow(&mut self) -> DeviceSliceMut<'_, T> {
        DeviceSliceMut {
            ctx: self.ctx,
            ptr: self.ptr,
            len: self.len,
            _elem: PhantomData,
        }
    }

    /// A writable sub-view of `range`, borrowing `self`.
    pub fn slice_mut(&mut self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'_, T>> {
        self.reborrow().into_slice_mut(range)
    }

    /// A writable sub-view of `range`, consuming `self`.
    pub fn into_slice_mut(self, range: impl RangeBounds<usize>) -> Result<DeviceSliceMut<'a, T>> {
        let (start, end) = resolve_range(range, self.len)?;
        Ok(DeviceSliceMut {
            ctx: self.ctx,
            ptr: self.ptr + (start * size_of::<T>()) as u64,
            len: end - start,
            _elem: PhantomData,
        })
    }

    /// Splits into `[0, mid)` and `[mid, len)`; [`Error::OutOfBounds`] when
    /// `mid > len`.
    pub fn split_at_mut(
        self,
        mid: usize,
    ) -> Result<(DeviceSliceMut<'a, T>, DeviceSliceMut<'a, T>)> {
        if mid > self.len {
            return Err(Error::OutOfBounds {
                start: mid,
                end: mid,
                len: self.len,
            });
        }
        let tail = self.ptr + (mid * size_of::<T>()) as u64;
        Ok((
            DeviceSliceMut {
                ctx: self.ctx,
                ptr: self.ptr,
                len: mid,
                _elem: PhantomData,
            },
            DeviceSliceMut {
                ctx: self.ctx,
                ptr: tail,
                len: self.len - mid,
                _elem: PhantomData,
            },
        ))
    }

    /// Copies `src` from the host; lengths must match. Returns when the copy
    /// has completed.
    #[track_caller]
    pub fn copy_from_host(&mut self, stream: &Stream, src: &[T]) -> Result<()> {
        check_len("copy_from_host", self.len, src.len())?;
        stream
            .context()
            .expect_device("copy_from_host", self.ctx.device())?;
        if self.len == 0 {
            return Ok(());
        }
        // The device range lies inside a live allocation mutably borrowed
        // for `'a`.
        transfer(
            stream,
            Transfer::FromHost {
                dst: self.ptr,
                src: bytemuck::cast_slice(src),
            },
        )
    }

    /// Copies to `dst` on the host; lengths must match.
    #[track_caller]
    pub fn copy_to_host(&self, stream: &Stream, dst: &mut [T]) -> Result<()> {
        self.as_slice().copy_to_host(stream, dst)
    }

    /// Copies into a new `Vec`.
    #[track_caller]
    pub fn to_vec(&self, stream: &Stream) -> Result<Vec<T>> {
        self.as_slice().to_vec(stream)
    }

    /// Enqueues a device-to-device copy from `src`; lengths must match.
    #[track_caller]
    pub fn copy_from(&mut self, stream: &Stream, src: &impl AsDeviceSlice<T>) -> Result<()> {
        let src = src.as_device_slice();
        check_len("copy_from", self.len, src.len)?;
        let ctx = stream.context();
        ctx.expect_device("copy_from (destination)", self.ctx.device())?;
        ctx.expect_device("copy_from (source)", src.ctx.device())?;
        if self.len == 0 {
            return Ok(());
        }
        // Both ranges lie inside live allocations of this device (the
        // source borrowed shared, the destination exclusively); device
        // memory stays allocated until queued work that uses it finishes.
        transfer(
            stream,
            Transfer::DeviceToDevice {
                dst: self.ptr,
                src: src.ptr,
                bytes: byte_len::<T>(self.len)?,
            },
        )
    }

    /// Enqueues setting every byte to zero.
    #[track_caller]
    pub fn fill_zero(&mut self, stream: &Stream) -> Result<()> {
        stream
            .context()
            .expect_device("fill_zero", self.ctx.device())?;
        if self.len == 0 {
            return Ok(());
        }
        // The range lies inside a live allocation mutably borrowed.
        transfer(
            stream,
            Transfer::Zero {
                dst: self.ptr,
                bytes: byte_len::<T>(self.len)?,
            },
        )
    }
}

fn check_len(op: &'static str, dst: usize, src: usize) -> Result<()> {
    if dst == src {
        Ok(())
    } else {
        Err(Error::LengthMismatch { op, dst, src })
    }
}

impl<'a, T: Pod> DeviceSliceMut<'a, T> {
    /// A view of `len` elements at `ptr` of `ctx`'s memory.
    ///
    /// # Safety
    /// `ptr..ptr + len * size_of::<T>()` lies inside a live allocation of
    /// `ctx` for `'a`, aligned for `T`.
    pub(crate) unsafe fn from_raw(ctx: &'a Context, ptr: u64, len: usize) -> Self {
        DeviceSliceMut {
            ctx,
            ptr,
            len,
            _elem: PhantomData,
        }
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr == 0 {
            return;
        }
        self.ctx.forget_allocation(self.ptr);
        // SAFETY: `ptr` came from `allocate` on this context with this size
        // and alignment, and is released exactly once.
        let r = unsafe {
            self.ctx
                .backend()
                .release(self.ptr, self.size_bytes(), align_of::<T>())
        };
        if let Err(e) = r {
            eprintln!(
                "vigil: freeing a device buffer of {} bytes: {e}",
                self.size_bytes()
            );
        }
    }
}

impl<T> Clone for DeviceSlice<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for DeviceSlice<'_, T> {}

impl<T: Pod> AsDeviceSlice<T> for DeviceBuffer<T> {
    fn as_device_slice(&self) -> DeviceSlice<'_, T> {
        self.as_slice()
    }
}
impl<T: Pod> AsDeviceSliceMut<T> for DeviceBuffer<T> {
    fn as_device_slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        self.as_slice_mut()
    }
}
impl<T: Pod> AsDeviceSlice<T> for DeviceSlice<'_, T> {
    fn as_device_slice(&self) -> DeviceSlice<'_, T> {
        *self
    }
}
impl<T: Pod> AsDeviceSlice<T> for DeviceSliceMut<'_, T> {
    fn as_device_slice(&self) -> DeviceSlice<'_, T> {
        self.as_slice()
    }
}
impl<T: Pod> AsDeviceSliceMut<T> for DeviceSliceMut<'_, T> {
    fn as_device_slice_mut(&mut self) -> DeviceSliceMut<'_, T> {
        self.reborrow()
    }
}

fn debug_view(
    f: &mut fmt::Formatter<'_>,
    name: &str,
    elem: &str,
    device: DeviceId,
    ptr: u64,
    len: usize,
) -> fmt::Result {
    f.debug_struct(name)
        .field("elem", &elem)
        .field("device", &device)
        .field("ptr", &format_args!("{ptr:#x}"))
        .field("len", &len)
        .finish()
}

impl<T: Pod> fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_view(
            f,
            "DeviceBuffer",
            std::any::type_name::<T>(),
            self.ctx.device(),
            self.ptr,
            self.len,
        )
    }
}
impl<T> fmt::Debug for DeviceSlice<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_view(
            f,
            "DeviceSlice",
            std::any::type_name::<T>(),
            self.ctx.device(),
            self.ptr,
            self.len,
        )
    }
}
impl<T> fmt::Debug for DeviceSliceMut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_view(
            f,
            "DeviceSliceMut",
            std::any::type_name::<T>(),
            self.ctx.device(),
            self.ptr,
            self.len,
        )
    }
}

/// Allocates `bytes > 0` bytes for work on `stream`, as the context's mode
/// says; returns the device address (a host address on the CPU backend).
/// Allocates on `stream`'s device, noting the caller as the allocation's
/// site (a sanitized context's reports name it).
#[track_caller]
fn allocate(stream: &Stream, bytes: usize, align: usize) -> Result<u64> {
    let (handle, _) = stream.handle();
    let ctx = stream.context();
    let ptr = ctx.backend().allocate(handle, bytes, align)?;
    ctx.note_allocation(ptr, std::panic::Location::caller());
    Ok(ptr)
}

/// Runs a copy or fill on `stream`'s device. The caller has checked
/// lengths and devices, and every device range is inside a live
/// allocation it borrows (exclusively where written).
/// Runs `op` on `stream`, named by the user's call site (every public
/// copy and fill method is `#[track_caller]` down to here).
#[track_caller]
fn transfer(stream: &Stream, op: Transfer<'_>) -> Result<()> {
    let ctx = stream.context();
    ctx.backend().transfer(
        stream.handle(),
        op,
        Location::caller(),
        ctx.launch_timeout(),
    )
}

/// The raw parts of a device view, for argument packing.
pub(crate) struct RawView {
    pub(crate) device: DeviceId,
    pub(crate) ptr: u64,
    pub(crate) len: usize,
}

impl<T> DeviceSlice<'_, T> {
    pub(crate) fn raw_view(&self) -> RawView {
        RawView {
            device: self.ctx.device(),
            ptr: self.ptr,
            len: self.len,
        }
    }
}

impl<T> DeviceSliceMut<'_, T> {
    pub(crate) fn raw_view(&self) -> RawView {
        RawView {
            device: self.ctx.device(),
            ptr: self.ptr,
            len: self.len,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_resolve_or_fail_without_panicking() {
        assert_eq!(resolve_range(.., 10).unwrap(), (0, 10));
        assert_eq!(resolve_range(2..5, 10).unwrap(), (2, 5));
        assert_eq!(resolve_range(2..=5, 10).unwrap(), (2, 6));
        assert_eq!(resolve_range(..=9, 10).unwrap(), (0, 10));
        assert_eq!(resolve_range(10.., 10).unwrap(), (10, 10));
        assert_eq!(resolve_range(0..0, 0).unwrap(), (0, 0));
        let r = (Bound::Excluded(3), Bound::Unbounded);
        assert_eq!(resolve_range(r, 10).unwrap(), (4, 10));
        for (s, e) in [(0, 11), (11, 11), (5, 4)] {
            assert_eq!(
                resolve_range(s..e, 10).unwrap_err(),
                Error::OutOfBounds {
                    start: s,
                    end: e,
                    len: 10
                }
            );
        }
        assert!(resolve_range(..=usize::MAX, 10).is_err());
        let r = (Bound::Excluded(usize::MAX), Bound::Unbounded);
        assert!(resolve_range(r, 10).is_err());
    }

    #[test]
    fn byte_sizes_overflow_into_errors() {
        assert_eq!(byte_len::<u64>(3).unwrap(), 24);
        assert_eq!(
            byte_len::<u64>(usize::MAX).unwrap_err(),
            Error::SizeOverflow {
                count: usize::MAX,
                elem_size: 8
            }
        );
    }
}
