//! [`ParamBuffer`]: a kernel's arguments packed into one aligned buffer.
//!
//! Every PTX parameter scalar is copied into the buffer at the next offset
//! aligned to its own size ([`ParamCursor`], the same walk the `#[kernel]`
//! macro and the CPU backend use). `cuLaunchKernel` wants an array of
//! pointers, one per parameter; [`ParamBuffer::kernel_params`] builds it
//! pointing into the buffer, borrowed from it, so no pointer can outlive the
//! values it points to. Packing needs no GPU.

use crate::types::DeviceId;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::mem::size_of;
use vigil_shared::params::{ParamCursor, PtxType};
use vigil_shared::proofs::Layout;
use vigil_shared::read_only::ReadOnlyRanges;

mod sealed {
    pub trait Sealed {}
}

/// A Rust scalar that is one PTX parameter scalar.
pub trait ParamScalar: bytemuck::Pod + sealed::Sealed {
    /// The PTX scalar it packs as.
    const PTX: PtxType;
}

macro_rules! param_scalar {
    ($($t:ty => $ptx:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl ParamScalar for $t {
            const PTX: PtxType = PtxType::$ptx;
        }
        const _: () = assert!(size_of::<$t>() == PtxType::$ptx.size());
    )*};
}
param_scalar! {
    u8 => B8, i8 => B8, u16 => B16, i16 => B16, u32 => B32, i32 => B32,
    u64 => B64, i64 => B64, usize => B64, isize => B64, f32 => F32, f64 => F64,
}

/// Where a packed scalar came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SlotOrigin {
    /// Part of user argument number `n` (0-based).
    Arg(usize),
    /// Hidden argument number `n` (0-based), appended after the user's.
    Hidden(usize),
}

/// One packed scalar.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParamSlot {
    /// Byte offset in the buffer (aligned to the scalar's size).
    pub offset: usize,
    /// The scalar's PTX type.
    pub ty: PtxType,
    /// Which argument it belongs to.
    pub origin: SlotOrigin,
    /// For device pointers: the device the memory belongs to, when known.
    pub device: Option<DeviceId>,
}

/// A typed view a launch argument packed: its bytes, and whether the
/// kernel may write through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PackedView {
    /// The argument (0-based).
    pub arg: usize,
    /// The first byte's device address.
    pub addr: u64,
    /// Its size in bytes.
    pub bytes: u64,
    /// True for a view the kernel may write through.
    pub writes: bool,
}

impl PackedView {
    /// True when the two views share a byte.
    pub fn overlaps(&self, other: &PackedView) -> bool {
        self.bytes > 0
            && other.bytes > 0
            && self.addr < other.addr.saturating_add(other.bytes)
            && other.addr < self.addr.saturating_add(self.bytes)
    }
}

/// A view argument whose declared layout the launch proved before it ran
/// (`vigil_shared::proofs::check` for its geometry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProvenView {
    /// The argument (0-based).
    pub arg: usize,
    /// The layout, with the sizes the launch resolved.
    pub layout: Layout<u64>,
    /// True for a view the kernel writes through.
    pub writes: bool,
    /// The view's bytes.
    pub view: PackedView,
    /// For a partition the kernel writes through: no other argument of
    /// the launch reaches its bytes, so each thread's (or block's) part is
    /// its own. False when another argument aliases them (a peer's slice,
    /// a `Peers`): then only the bounds are proven, and who writes what
    /// stays the sanitizer's to check.
    pub exclusive: bool,
}

/// A kernel's arguments packed for a launch.
///
/// Storage is a `Vec<u64>`, so the buffer is 8-byte aligned and every
/// scalar sits at its natural alignment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ParamBuffer {
    words: Vec<u64>,
    cursor: ParamCursor,
    slots: Vec<ParamSlot>,
    origin: Option<SlotOrigin>,
    hidden: usize,
    /// The largest views no argument writes, see
    /// [`ParamBuffer::note_read_only`].
    read_only: ReadOnlyRanges,
    /// An argument may alias another's memory: no view is read-only.
    aliasing: bool,
    /// Every typed view packed, see [`ParamBuffer::note_view`].
    views: Vec<PackedView>,
    /// The views whose layout the launch proved.
    proven: Vec<ProvenView>,
    /// Whether the sanitizer may skip what the proven views rule out
    /// ([`ParamBuffer::trust_partitions`]).
    trust_partitions: bool,
}

impl ParamBuffer {
    /// An empty buffer.
    pub fn new() -> ParamBuffer {
        ParamBuffer::default()
    }

    /// An empty buffer with room for `bytes` bytes and `scalars` scalars.
    pub fn with_capacity(bytes: usize, scalars: usize) -> ParamBuffer {
        ParamBuffer {
            words: Vec::with_capacity(bytes.div_ceil(8)),
            slots: Vec::with_capacity(scalars),
            ..ParamBuffer::default()
        }
    }

    /// Notes that the view just packed (`bytes` at `addr`) is one no
    /// argument of the launch writes: a shared borrow (or an exclusive one)
    /// passed for a read-only parameter, so the host's borrow rules keep
    /// every mutable view of those bytes out of the launch. The GPU
    /// sanitizer skips its same-block check on reads there
    /// ([`vigil_shared::read_only`]).
    pub fn note_read_only(&mut self, addr: u64, bytes: u64) {
        self.read_only.insert(addr, bytes);
    }

    /// Notes an argument whose memory another argument of the launch may
    /// alias with write access (`Peers`, a peer's slice): the launch then
    /// has no read-only range.
    pub fn note_aliasing(&mut self) {
        self.aliasing = true;
    }

    /// The launch's read-only ranges: the largest views noted with
    /// [`ParamBuffer::note_read_only`], and, once
    /// [`trust_partitions`](Self::trust_partitions) is on, the
    /// thread-owned ones (`vigil_shared::read_only`): each per-thread
    /// partition whose layout the launch proved and that no other
    /// argument reaches. None when an argument may alias.
    pub fn read_only_ranges(&self) -> ReadOnlyRanges {
        if self.aliasing {
            return ReadOnlyRanges::NONE;
        }
        let mut ranges = self.read_only;
        if self.trust_partitions {
            for p in self
                .proven
                .iter()
                .filter(|p| p.exclusive && p.layout.has_parts() && !p.layout.parts_per_block())
            {
                ranges.insert_owned(p.view.addr, p.view.bytes);
            }
        }
        ranges
    }

    /// Lets the sanitizer skip what the proven views rule out (the
    /// context's `trust_types`): [`read_only_ranges`](Self::read_only_ranges)
    /// then carries the thread-owned partitions too.
    pub fn trust_partitions(&mut self, on: bool) {
        self.trust_partitions = on;
    }

    /// Notes the bytes of the view the current argument packed (`writes`:
    /// the kernel may write through it): a launch proves a partition's
    /// parts its own only when no other argument's view reaches them.
    pub fn note_view(&mut self, addr: u64, bytes: u64, writes: bool) {
        if let Some(SlotOrigin::Arg(arg)) = self.origin {
            self.views.push(PackedView {
                arg,
                addr,
                bytes,
                writes,
            });
        }
    }

    /// The typed views packed, in order.
    pub fn views(&self) -> &[PackedView] {
        &self.views
    }

    /// Records a view whose layout the launch proved.
    pub fn note_proven(&mut self, proven: ProvenView) {
        self.proven.push(proven);
    }

    /// The views whose declared layout the launch proved (empty for
    /// untyped launches and kernels that declare none): what a sanitizer
    /// may trust of this launch's accesses.
    pub fn proven_views(&self) -> &[ProvenView] {
        &self.proven
    }

    /// The value of scalar argument `arg` (unsigned, widened), when it
    /// packed one integer scalar.
    pub fn arg_scalar(&self, arg: usize) -> Option<u64> {
        let mut slots = self.arg_slots(arg);
        let (i, slot) = slots.next()?;
        if slots.next().is_some() {
            return None;
        }
        match slot.ty {
            PtxType::B8 => self.read::<u8>(i).map(u64::from),
            PtxType::B16 => self.read::<u16>(i).map(u64::from),
            PtxType::B32 => self.read::<u32>(i).map(u64::from),
            PtxType::B64 => self.read::<u64>(i),
            _ => None,
        }
    }

    /// The length (in elements) view argument `arg` packed after its
    /// pointer.
    pub fn arg_len(&self, arg: usize) -> Option<u64> {
        let mut slots = self.arg_slots(arg);
        let (_, ptr) = slots.next()?;
        let (i, len) = slots.next()?;
        (ptr.ty == PtxType::Ptr && len.ty == PtxType::B64)
            .then(|| self.read::<u64>(i))
            .flatten()
    }

    /// Argument `arg`'s slots, with their indices.
    fn arg_slots(&self, arg: usize) -> impl Iterator<Item = (usize, &ParamSlot)> {
        self.slots
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.origin == SlotOrigin::Arg(arg))
    }

    /// Starts user argument `index`: scalars pushed from now on belong to it.
    pub fn begin_arg(&mut self, index: usize) {
        self.origin = Some(SlotOrigin::Arg(index));
    }

    fn write(&mut self, ty: PtxType, bytes: &[u8], device: Option<DeviceId>) -> usize {
        debug_assert_eq!(bytes.len(), ty.size());
        let at = self.cursor.next(ty);
        let end = at + bytes.len();
        let words = end.div_ceil(8);
        if self.words.len() < words {
            self.words.resize(words, 0);
        }
        bytemuck::cast_slice_mut::<u64, u8>(&mut self.words)[at..end].copy_from_slice(bytes);
        let origin = self.origin.unwrap_or(SlotOrigin::Arg(0));
        self.slots.push(ParamSlot {
            offset: at,
            ty,
            origin,
            device,
        });
        at
    }

    /// Packs one scalar of the current argument; returns its offset.
    pub fn push<S: ParamScalar>(&mut self, value: S) -> usize {
        self.write(S::PTX, bytemuck::bytes_of(&value), None)
    }

    /// Packs one device pointer (a PTX `.u64`) of the current argument;
    /// `device` is the ordinal of the CUDA device the memory is on, when
    /// known (launches check it against the stream's device). Returns its
    /// offset.
    pub fn push_pointer(&mut self, addr: u64, device: Option<usize>) -> usize {
        self.push_pointer_on(addr, device.map(DeviceId::Cuda))
    }

    /// [`ParamBuffer::push_pointer`] for memory of any device (e.g.
    /// [`DeviceId::Cpu`] for the CPU backend's buffers).
    pub fn push_pointer_on(&mut self, addr: u64, device: Option<DeviceId>) -> usize {
        self.write(PtxType::Ptr, &addr.to_ne_bytes(), device)
    }

    /// Appends a hidden scalar argument (e.g. for the sanitizer) after the
    /// user arguments; returns its offset.
    pub fn append_hidden<S: ParamScalar>(&mut self, value: S) -> usize {
        self.begin_hidden();
        self.push(value)
    }

    /// Appends a hidden device-pointer argument (`device`: CUDA ordinal);
    /// returns its offset.
    pub fn append_hidden_pointer(&mut self, addr: u64, device: Option<usize>) -> usize {
        self.begin_hidden();
        self.push_pointer(addr, device)
    }

    fn begin_hidden(&mut self) {
        self.origin = Some(SlotOrigin::Hidden(self.hidden));
        self.hidden += 1;
    }

    /// The packed bytes (what `Kernel::run_host` reads on the CPU backend).
    pub fn as_bytes(&self) -> &[u8] {
        &bytemuck::cast_slice::<u64, u8>(&self.words)[..self.cursor.len()]
    }

    /// Every packed scalar, in order.
    pub fn slots(&self) -> &[ParamSlot] {
        &self.slots
    }

    /// Number of packed bytes.
    pub fn len(&self) -> usize {
        self.cursor.len()
    }

    /// True when nothing is packed.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Number of hidden arguments appended.
    pub fn hidden_count(&self) -> usize {
        self.hidden
    }

    /// Reads back the scalar packed at slot `index`, if it has type `S`'s
    /// size (pointers read as `u64`).
    pub fn read<S: ParamScalar>(&self, index: usize) -> Option<S> {
        let slot = self.slots.get(index)?;
        if slot.ty.size() != size_of::<S>() {
            return None;
        }
        let bytes = self
            .as_bytes()
            .get(slot.offset..slot.offset + size_of::<S>())?;
        Some(bytemuck::pod_read_unaligned(bytes))
    }

    /// This buffer with `hidden` appended after its arguments, in order
    /// (what a sanitized entry takes).
    pub(crate) fn with_hidden(&self, hidden: &HiddenArgs) -> ParamBuffer {
        let mut out = self.clone();
        for &arg in &hidden.args {
            match arg {
                HiddenArg::Pointer { addr, device } => out.append_hidden_pointer(addr, device),
                HiddenArg::B32(v) => out.append_hidden(v),
                HiddenArg::B64(v) => out.append_hidden(v),
            };
        }
        out
    }

    /// The `void*` array `cuLaunchKernel` takes: one pointer per packed
    /// scalar, each into this buffer. It borrows the buffer, so it cannot
    /// outlive (or see a reallocation of) the values it points to.
    pub fn kernel_params(&self) -> KernelParams<'_> {
        let base = self.words.as_ptr().cast::<u8>();
        let ptrs = self
            .slots
            .iter()
            // `wrapping_add` keeps this safe code; every offset is inside
            // the buffer (checked by `write`).
            .map(|s| base.wrapping_add(s.offset).cast_mut().cast::<c_void>())
            .collect();
        KernelParams {
            ptrs,
            _buf: PhantomData,
        }
    }
}

/// The hidden arguments of one sanitized launch, in the order its entry
/// declares them after the user's: what a sanitizer hands the launch
/// ([`ParamBuffer::with_hidden`] appends them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HiddenArgs {
    args: Vec<HiddenArg>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HiddenArg {
    /// A device pointer (`device`: the CUDA ordinal of its memory).
    Pointer {
        addr: u64,
        device: Option<usize>,
    },
    B32(u32),
    B64(u64),
}

impl HiddenArgs {
    /// No hidden arguments yet.
    pub(crate) fn new() -> HiddenArgs {
        HiddenArgs::default()
    }

    /// Appends a device pointer into CUDA device `device`'s memory.
    pub(crate) fn pointer(&mut self, addr: u64, device: Option<usize>) -> &mut HiddenArgs {
        self.args.push(HiddenArg::Pointer { addr, device });
        self
    }

    /// Appends a `.u32`.
    pub(crate) fn u32(&mut self, value: u32) -> &mut HiddenArgs {
        self.args.push(HiddenArg::B32(value));
        self
    }

    /// Appends a `.u64`.
    pub(crate) fn u64(&mut self, value: u64) -> &mut HiddenArgs {
        self.args.push(HiddenArg::B64(value));
        self
    }

    /// How many hidden arguments there are.
    pub(crate) fn len(&self) -> usize {
        self.args.len()
    }
}

/// The `void*` array for `cuLaunchKernel`, borrowed from a [`ParamBuffer`].
#[derive(Debug)]
pub struct KernelParams<'a> {
    ptrs: Vec<*mut c_void>,
    _buf: PhantomData<&'a ParamBuffer>,
}

impl KernelParams<'_> {
    /// The pointers, in parameter order.
    pub fn as_slice(&self) -> &[*mut c_void] {
        &self.ptrs
    }

    /// The array as `cuLaunchKernel`'s `kernelParams` argument (the driver
    /// only reads through it). Null when there are no parameters.
    pub fn as_mut_ptr(&mut self) -> *mut *mut c_void {
        if self.ptrs.is_empty() {
            std::ptr::null_mut()
        } else {
            self.ptrs.as_mut_ptr()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Pushes scalar kind `k` (0..7) carrying `v`, returning its PTX type.
    fn push_kind(b: &mut ParamBuffer, k: u8, v: u64) -> PtxType {
        match k {
            0 => b.push(v as u8),
            1 => b.push(v as i16),
            2 => b.push(v as u32),
            3 => b.push(v),
            4 => b.push(f32::from_bits(v as u32)),
            5 => b.push(f64::from_bits(v)),
            _ => b.push_pointer(v, None),
        };
        b.slots().last().map(|s| s.ty).unwrap_or(PtxType::B8)
    }

    proptest! {
        #[test]
        fn any_sequence_packs_at_cursor_offsets(items in proptest::collection::vec((0u8..7, any::<u64>()), 0..40),
                                                hidden in proptest::collection::vec(any::<u64>(), 0..4)) {
            let mut b = ParamBuffer::new();
            let mut c = ParamCursor::new();
            for (i, &(k, v)) in items.iter().enumerate() {
                b.begin_arg(i);
                let ty = push_kind(&mut b, k, v);
                let slot = b.slots()[i];
                prop_assert_eq!(slot.offset, c.next(ty));
                prop_assert_eq!(slot.offset % ty.align(), 0);
                prop_assert_eq!(slot.origin, SlotOrigin::Arg(i));
            }
            for (j, &h) in hidden.iter().enumerate() {
                let at = b.append_hidden(h);
                prop_assert_eq!(at, c.next(PtxType::B64));
                prop_assert_eq!(b.slots().last().unwrap().origin, SlotOrigin::Hidden(j));
            }
            prop_assert_eq!(b.len(), c.len());
            prop_assert_eq!(b.as_bytes().as_ptr() as usize % 8, 0);
            // Values read back bit-exactly, and the pointer array points at them.
            let base = b.as_bytes().as_ptr() as usize;
            let params = b.kernel_params();
            for (i, s) in b.slots().iter().enumerate() {
                prop_assert_eq!(params.as_slice()[i] as usize, base + s.offset);
                let bytes = &b.as_bytes()[s.offset..s.offset + s.ty.size()];
                let mut full = [0u8; 8];
                full[..bytes.len()].copy_from_slice(bytes);
                let got = u64::from_ne_bytes(full);
                let want = items.get(i).map(|&(_, v)| v).unwrap_or_else(|| hidden[i - items.len()]);
                let mask = if s.ty.size() == 8 { u64::MAX } else { (1u64 << (8 * s.ty.size())) - 1 };
                prop_assert_eq!(got, want & mask);
            }
        }
    }

    /// A sanitizer's hidden arguments land after the user's exactly as
    /// appending them one by one puts them: same offsets, same values,
    /// hidden origins in order, pointers with their device; the user's
    /// buffer is left as it was.
    #[test]
    fn hidden_arguments_append_after_the_users() {
        let mut user = ParamBuffer::new();
        user.begin_arg(0);
        user.push(7u8);
        user.begin_arg(1);
        user.push_pointer(0x1000, Some(0));
        let mut hidden = HiddenArgs::new();
        hidden.pointer(0x2000, Some(1)).u32(3).u64(u64::MAX).u32(9);
        let mut by_hand = user.clone();
        by_hand.append_hidden_pointer(0x2000, Some(1));
        by_hand.append_hidden(3u32);
        by_hand.append_hidden(u64::MAX);
        by_hand.append_hidden(9u32);
        let appended = user.with_hidden(&hidden);
        assert_eq!(appended, by_hand);
        assert_eq!(appended.hidden_count(), hidden.len());
        assert_eq!(appended.slots()[2].origin, SlotOrigin::Hidden(0));
        assert_eq!(appended.slots()[2].device, Some(DeviceId::Cuda(1)));
        assert_eq!(appended.read::<u64>(4), Some(u64::MAX));
        assert_eq!(user.hidden_count(), 0);
    }
}
