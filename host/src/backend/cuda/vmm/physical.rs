//! Physical memory: create, map, grant access, zero, and tear down, with an
//! undo stack so that a failure part-way leaves nothing behind.
//!
//! Every step that succeeds pushes its exact inverse on an [`UndoStack`]
//! (`cuMemCreate` -> `cuMemRelease`, `cuMemMap` -> `cuMemUnmap`; access
//! rights and fills need none, unmapping drops them). If the sequence
//! returns early, the stack's `Drop` runs the inverses newest first; when
//! it completes, [`UndoStack::commit`] disarms it. Correct by construction:
//! no error path has its own clean-up code.
//!
//! The driver sits behind [`PhysOps`] so the undo logic is tested on the
//! CPU with a fake that fails at every step in turn.

use super::super::driver::{memory, virtual_memory as driver};
use super::error::VmmResult;
use cudarc::driver::sys;

/// A physical allocation handle (`CUmemGenericAllocationHandle`).
pub(crate) type Handle = sys::CUmemGenericAllocationHandle;

/// The physical-memory driver calls the allocator makes.
pub(crate) trait PhysOps {
    /// `cuMemCreate` of `bytes` on device `ordinal`, POSIX-fd shareable if asked.
    fn create(&self, ordinal: usize, bytes: u64, shareable: bool) -> VmmResult<Handle>;
    /// `cuMemRelease`.
    fn release(&self, handle: Handle) -> VmmResult<()>;
    /// `cuMemMap` of the whole handle at `va`.
    fn map(&self, va: u64, bytes: u64, handle: Handle) -> VmmResult<()>;
    /// `cuMemUnmap`.
    fn unmap(&self, va: u64, bytes: u64) -> VmmResult<()>;
    /// `cuMemSetAccess`: read/write for each device in `ordinals`.
    fn set_access(&self, va: u64, bytes: u64, ordinals: &[usize]) -> VmmResult<()>;
    /// `cuMemsetD8Async(va, 0, bytes, stream)`.
    fn zero_async(&self, va: u64, bytes: u64, stream: sys::CUstream) -> VmmResult<()>;
}

/// One mapped physical handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mapping {
    /// Where it is mapped.
    pub va: u64,
    /// Bytes mapped (the handle's size).
    pub bytes: u64,
    /// The handle (this allocator holds one reference).
    pub handle: Handle,
}

enum Step {
    Release(Handle),
    Unmap { va: u64, bytes: u64 },
}

/// Inverses of the steps done so far; run newest first on drop unless
/// [`UndoStack::commit`]ted.
pub(crate) struct UndoStack<'a, O: PhysOps> {
    ops: &'a O,
    steps: Vec<Step>,
}

impl<'a, O: PhysOps> UndoStack<'a, O> {
    /// An empty stack.
    pub fn new(ops: &'a O) -> Self {
        UndoStack {
            ops,
            steps: Vec::with_capacity(4),
        }
    }

    /// The sequence succeeded: keep everything.
    pub fn commit(mut self) {
        self.steps.clear();
    }

    /// Creates a handle of `bytes`, maps it at `va` and grants `access`.
    pub fn create_and_map(
        &mut self,
        ordinal: usize,
        va: u64,
        bytes: u64,
        shareable: bool,
        access: &[usize],
    ) -> VmmResult<Mapping> {
        let handle = self.ops.create(ordinal, bytes, shareable)?;
        self.steps.push(Step::Release(handle));
        self.map_handle(va, bytes, handle, access)
    }

    /// Maps an existing handle (owned by this stack from now on: it is
    /// released on failure) at `va` and grants `access`.
    pub fn map_owned(
        &mut self,
        va: u64,
        bytes: u64,
        handle: Handle,
        access: &[usize],
    ) -> VmmResult<Mapping> {
        self.steps.push(Step::Release(handle));
        self.map_handle(va, bytes, handle, access)
    }

    fn map_handle(
        &mut self,
        va: u64,
        bytes: u64,
        handle: Handle,
        access: &[usize],
    ) -> VmmResult<Mapping> {
        self.ops.map(va, bytes, handle)?;
        self.steps.push(Step::Unmap { va, bytes });
        self.ops.set_access(va, bytes, access)?;
        Ok(Mapping { va, bytes, handle })
    }
}

impl<O: PhysOps> Drop for UndoStack<'_, O> {
    fn drop(&mut self) {
        while let Some(step) = self.steps.pop() {
            let r = match step {
                Step::Release(h) => self.ops.release(h),
                Step::Unmap { va, bytes } => self.ops.unmap(va, bytes),
            };
            if let Err(e) = r {
                eprintln!("vigil: undoing a failed allocation step: {e}");
            }
        }
    }
}

/// A data mapping and its shadow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MappedPair {
    /// The user data.
    pub data: Mapping,
    /// Its shadow.
    pub shadow: Mapping,
}

/// What [`map_pair`] creates.
pub(crate) struct PairPlan<'a> {
    pub ordinal: usize,
    pub data_va: u64,
    pub data_bytes: u64,
    pub shadow_va: u64,
    pub shadow_bytes: u64,
    pub shareable: bool,
    pub access: &'a [usize],
    pub stream: sys::CUstream,
}

/// Creates and maps data and shadow, grants access, and zeroes the shadow
/// on the plan's stream; on failure, undoes exactly what was done.
pub(crate) fn map_pair<O: PhysOps>(ops: &O, p: &PairPlan<'_>) -> VmmResult<MappedPair> {
    let mut undo = UndoStack::new(ops);
    let data = undo.create_and_map(p.ordinal, p.data_va, p.data_bytes, p.shareable, p.access)?;
    let shadow = undo.create_and_map(
        p.ordinal,
        p.shadow_va,
        p.shadow_bytes,
        p.shareable,
        p.access,
    )?;
    ops.zero_async(shadow.va, shadow.bytes, p.stream)?;
    undo.commit();
    Ok(MappedPair { data, shadow })
}

/// Unmaps and releases `mappings` (all of them, even after a failure),
/// returning the first error.
pub(crate) fn teardown<O: PhysOps>(ops: &O, mappings: &[Mapping]) -> VmmResult<()> {
    let mut first = Ok(());
    for m in mappings {
        let r = ops
            .unmap(m.va, m.bytes)
            .and_then(|()| ops.release(m.handle));
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// The real driver.
pub(crate) struct Cuda;

/// The allocation properties of pinned device memory on `ordinal`.
pub(crate) fn alloc_prop(ordinal: usize, shareable: bool) -> sys::CUmemAllocationProp {
    let handle_type = if shareable {
        sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    } else {
        sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_NONE
    };
    sys::CUmemAllocationProp {
        type_: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        requestedHandleTypes: handle_type,
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: ordinal as i32,
        },
        win32HandleMetaData: std::ptr::null_mut(),
        allocFlags: sys::CUmemAllocationProp_st__bindgen_ty_1 {
            compressionType: 0,
            gpuDirectRDMACapable: 0,
            usage: 0,
            reserved: [0; 4],
        },
    }
}

impl PhysOps for Cuda {
    fn create(&self, ordinal: usize, bytes: u64, shareable: bool) -> VmmResult<Handle> {
        let prop = alloc_prop(ordinal, shareable);
        driver::mem_create(bytes as usize, &prop).map_err(|e| {
            e.during(|| {
                format!("creating {bytes} bytes of physical memory on device {ordinal} (shareable: {shareable})")
            })
        })
    }

    fn release(&self, handle: Handle) -> VmmResult<()> {
        // SAFETY: `handle` came from cuMemCreate/cuMemImport and this
        // allocator releases its one reference exactly once.
        unsafe { driver::mem_release(handle) }
            .map_err(|e| e.during(|| format!("releasing physical handle {handle:#x}")))
    }

    fn map(&self, va: u64, bytes: u64, handle: Handle) -> VmmResult<()> {
        // SAFETY: `va..va+bytes` lies in a reservation this allocator owns
        // and is not mapped (the buddy tree hands it out once).
        unsafe { driver::mem_map(va, bytes as usize, handle) }.map_err(|e| {
            e.during(|| format!("mapping {bytes} bytes of handle {handle:#x} at {va:#x}"))
        })
    }

    fn unmap(&self, va: u64, bytes: u64) -> VmmResult<()> {
        // SAFETY: `va..va+bytes` is exactly one mapping this allocator made.
        unsafe { driver::mem_unmap(va, bytes as usize) }
            .map_err(|e| e.during(|| format!("unmapping {bytes} bytes at {va:#x}")))
    }

    fn set_access(&self, va: u64, bytes: u64, ordinals: &[usize]) -> VmmResult<()> {
        let desc: Vec<sys::CUmemAccessDesc> = ordinals
            .iter()
            .map(|&o| sys::CUmemAccessDesc {
                location: sys::CUmemLocation {
                    type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                    id: o as i32,
                },
                flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
            })
            .collect();
        // SAFETY: the range is mapped by this allocator.
        unsafe { driver::mem_set_access(va, bytes as usize, &desc) }.map_err(|e| {
            e.during(|| {
                format!(
                    "granting devices {ordinals:?} read/write access to {bytes} bytes at {va:#x}"
                )
            })
        })
    }

    fn zero_async(&self, va: u64, bytes: u64, stream: sys::CUstream) -> VmmResult<()> {
        // SAFETY: the range is mapped with read/write access for the
        // stream's device; the caller made the stream's context current.
        unsafe { memory::memset_d8_async(va, 0, bytes as usize, stream) }
            .map_err(|e| e.during(|| format!("zeroing {bytes} bytes of shadow at {va:#x}")))
    }
}

#[cfg(test)]
pub(crate) mod fake {
    //! A driver double that records calls and fails on request.

    use super::*;
    use crate::backend::cuda::vmm::VmmError;
    use std::cell::RefCell;
    use std::collections::{HashMap, HashSet};

    /// Fails the `fail_at`-th call (0-based; `usize::MAX`: never) and
    /// tracks live handles and mappings.
    #[derive(Default)]
    pub struct FakeOps {
        pub fail_at: usize,
        pub calls: RefCell<usize>,
        pub next: RefCell<Handle>,
        pub handles: RefCell<HashSet<Handle>>,
        pub maps: RefCell<HashMap<u64, (u64, Handle)>>,
        pub log: RefCell<Vec<String>>,
    }

    impl FakeOps {
        pub fn failing_at(n: usize) -> Self {
            FakeOps {
                fail_at: n,
                ..Default::default()
            }
        }

        fn step(&self, what: String) -> VmmResult<()> {
            let mut c = self.calls.borrow_mut();
            let n = *c;
            *c += 1;
            self.log.borrow_mut().push(what.clone());
            if n == self.fail_at {
                return Err(VmmError::Driver {
                    call: "fake",
                    result: "INJECTED".into(),
                    code: 2,
                    during: what,
                });
            }
            Ok(())
        }
    }

    impl PhysOps for FakeOps {
        fn create(&self, _: usize, bytes: u64, _: bool) -> VmmResult<Handle> {
            self.step(format!("create {bytes}"))?;
            let mut n = self.next.borrow_mut();
            *n += 1;
            self.handles.borrow_mut().insert(*n);
            Ok(*n)
        }
        fn release(&self, h: Handle) -> VmmResult<()> {
            assert!(
                self.handles.borrow_mut().remove(&h),
                "release of unknown handle {h}"
            );
            assert!(
                self.maps.borrow().values().all(|&(_, mh)| mh != h),
                "released handle {h} while still mapped"
            );
            self.log.borrow_mut().push(format!("release {h}"));
            Ok(())
        }
        fn map(&self, va: u64, bytes: u64, h: Handle) -> VmmResult<()> {
            self.step(format!("map {va:#x}"))?;
            assert!(self.handles.borrow().contains(&h));
            assert!(
                self.maps.borrow_mut().insert(va, (bytes, h)).is_none(),
                "double map at {va:#x}"
            );
            Ok(())
        }
        fn unmap(&self, va: u64, bytes: u64) -> VmmResult<()> {
            assert_eq!(
                self.maps.borrow_mut().remove(&va).map(|m| m.0),
                Some(bytes),
                "unmap of {va:#x}"
            );
            self.log.borrow_mut().push(format!("unmap {va:#x}"));
            Ok(())
        }
        fn set_access(&self, va: u64, _: u64, _: &[usize]) -> VmmResult<()> {
            self.step(format!("access {va:#x}"))
        }
        fn zero_async(&self, va: u64, _: u64, _: sys::CUstream) -> VmmResult<()> {
            self.step(format!("zero {va:#x}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fake::FakeOps;
    use super::*;

    fn plan() -> PairPlan<'static> {
        PairPlan {
            ordinal: 0,
            data_va: 0x1000_0000,
            data_bytes: 2 << 20,
            shadow_va: 0x2000_0000,
            shadow_bytes: 4 << 20,
            shareable: true,
            access: &[0],
            stream: std::ptr::null_mut(),
        }
    }

    #[test]
    fn every_failure_is_undone_exactly() {
        // create, map, access (data) + create, map, access (shadow) + zero.
        const STEPS: usize = 7;
        for n in 0..STEPS {
            let ops = FakeOps::failing_at(n);
            let e = map_pair(&ops, &plan()).unwrap_err();
            assert!(
                matches!(
                    e,
                    crate::backend::cuda::vmm::VmmError::Driver { code: 2, .. }
                ),
                "step {n}: {e}"
            );
            assert!(
                ops.handles.borrow().is_empty(),
                "step {n}: handles leaked: {:?}",
                ops.log.borrow()
            );
            assert!(
                ops.maps.borrow().is_empty(),
                "step {n}: mappings leaked: {:?}",
                ops.log.borrow()
            );
            assert_eq!(
                *ops.calls.borrow(),
                n + 1,
                "step {n}: went on after the failure"
            );
        }
    }

    #[test]
    fn success_keeps_everything_and_teardown_frees_it() {
        let ops = FakeOps::failing_at(usize::MAX);
        let pair = map_pair(&ops, &plan()).unwrap();
        assert_eq!(ops.handles.borrow().len(), 2);
        assert_eq!(ops.maps.borrow().len(), 2);
        assert_eq!(pair.shadow.bytes, 4 << 20);
        teardown(&ops, &[pair.data, pair.shadow]).unwrap();
        assert!(ops.handles.borrow().is_empty() && ops.maps.borrow().is_empty());
    }

    #[test]
    fn owned_handle_released_when_mapping_fails() {
        let ops = FakeOps::failing_at(1); // create ok, map fails
        let h = ops.create(0, 1 << 21, false).unwrap();
        let mut undo = UndoStack::new(&ops);
        assert!(undo.map_owned(0x4000_0000, 1 << 21, h, &[0]).is_err());
        drop(undo);
        assert!(ops.handles.borrow().is_empty());
    }
}
