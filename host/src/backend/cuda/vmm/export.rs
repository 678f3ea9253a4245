//! Export and import of physical memory as POSIX file descriptors
//! (docs/src/design/groups.md): an allocation's data and shadow handles, and a device's runtime
//! state. In one process the importer maps the handles directly; across
//! processes the descriptors travel over a Unix socket (`SCM_RIGHTS`).

use super::super::driver::virtual_memory as driver;
use super::super::AsCudaDevice;
use super::layout::{device_globals, shadow_address};
use super::physical::{Handle, MappedPair, UndoStack};
use super::runtime_state::DeviceRuntime;
use super::{lock, Allocation, BlockGuard, Cuda, Record, Vmm, VmmError, VmmResult};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use vigil_shared::abi::GlobalState;

/// An allocation's physical memory as file descriptors.
#[derive(Debug)]
pub struct ExportedAllocation {
    /// The exporting device's ordinal.
    pub device: usize,
    /// Bytes the exporter asked for.
    pub size: u64,
    /// Bytes of the data handle.
    pub mapped_bytes: u64,
    /// Bytes of the shadow handle.
    pub shadow_bytes: u64,
    /// The data handle.
    pub data_fd: OwnedFd,
    /// The shadow handle.
    pub shadow_fd: OwnedFd,
}

/// A device's runtime-state region as a file descriptor.
#[derive(Debug)]
pub struct ExportedRuntimeState {
    /// The device's rank.
    pub rank: u32,
    /// The exporting device's ordinal.
    pub device: usize,
    /// Bytes of the handle.
    pub bytes: u64,
    /// The `GlobalState` the exporter wrote.
    pub global: GlobalState,
    /// The handle.
    pub fd: OwnedFd,
}

fn export_fd(handle: Handle, what: &str) -> VmmResult<OwnedFd> {
    // SAFETY: `handle` is live (the caller holds its allocation) and was
    // created shareable (checked by the caller).
    let fd = unsafe { driver::export_to_fd(handle) }.map_err(|e| {
        e.during(|| format!("exporting the {what} handle {handle:#x} as a POSIX file descriptor"))
    })?;
    // SAFETY: the driver returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn import_fd(fd: &OwnedFd, what: &str) -> VmmResult<Handle> {
    let raw = fd.as_raw_fd();
    // SAFETY: `fd` is an open descriptor (owned by `fd`) of exported
    // physical memory; the driver does not take ownership of it.
    unsafe { driver::import_from_fd(raw) }
        .map_err(|e| e.during(|| format!("importing the {what} handle from file descriptor {raw}")))
}

fn not_shareable(ordinal: usize) -> VmmError {
    VmmError::NotShareable {
        ordinal,
        reason:
            "its handles were created without CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR (the device \
                 lacks it, or VIGIL_SHAREABLE_HANDLES is off)"
                .to_owned(),
    }
}

impl Vmm {
    /// Exports the data and shadow handles of the live allocation at `ptr`.
    pub fn export(&self, ptr: u64) -> VmmResult<ExportedAllocation> {
        let st = lock(&self.shared.state);
        let Some(rec) = st.live.get(&ptr) else {
            return Err(self.classify(&st, ptr));
        };
        if !rec.shareable {
            return Err(not_shareable(rec.alloc.device));
        }
        Ok(ExportedAllocation {
            device: rec.alloc.device,
            size: rec.alloc.size,
            mapped_bytes: rec.pair.data.bytes,
            shadow_bytes: rec.pair.shadow.bytes,
            data_fd: export_fd(rec.pair.data.handle, "data")?,
            shadow_fd: export_fd(rec.pair.shadow.handle, "shadow")?,
        })
    }

    /// Maps an exported allocation into this allocator's real half (a new
    /// block; the shadow at its usual place below it), accessible from
    /// `ctx`'s device. The shadow is shared, not zeroed. Free it with
    /// [`Vmm::free`] like any allocation (this releases the imported
    /// handles; the exporter keeps its own).
    pub fn import(&self, ctx: &impl AsCudaDevice, e: &ExportedAllocation) -> VmmResult<Allocation> {
        let ctx = ctx.cuda_device()?;
        let dev = self.device(ctx)?;
        let ordinal = ctx.ordinal();
        if !e.mapped_bytes.is_multiple_of(dev.granularity) || e.shadow_bytes != 2 * e.mapped_bytes {
            return Err(VmmError::Granularity {
                ordinal,
                granularity: e.mapped_bytes,
                min_block: dev.granularity,
            });
        }
        let real = self.real_base();
        let block = lock(&self.shared.state)
            .buddy
            .alloc(e.mapped_bytes)
            .map_err(|err| VmmError::from_buddy(err, real, real + super::REAL_CAPACITY))?;
        let guard = BlockGuard {
            vmm: self,
            offset: Some(block.offset),
        };
        let ptr = real + block.offset;
        ctx.bind()?;
        let mut undo = UndoStack::new(&Cuda);
        let h = import_fd(&e.data_fd, "data")?;
        let data = undo.map_owned(ptr, e.mapped_bytes, h, &[ordinal])?;
        let h = import_fd(&e.shadow_fd, "shadow")?;
        let shadow = undo.map_owned(shadow_address(ptr), e.shadow_bytes, h, &[ordinal])?;
        undo.commit();
        guard.disarm();
        let alloc = Allocation {
            ptr,
            size: e.size,
            mapped_bytes: e.mapped_bytes,
            shadow_ptr: shadow.va,
            shadow_bytes: shadow.bytes,
            device: ordinal,
        };
        let mut st = lock(&self.shared.state);
        st.freed.remove(&ptr);
        st.live.insert(
            ptr,
            Record {
                alloc,
                pair: MappedPair { data, shadow },
                shareable: true,
            },
        );
        Ok(alloc)
    }

    /// Exports device `ordinal`'s runtime-state region.
    pub fn export_runtime_state(&self, ordinal: usize) -> VmmResult<ExportedRuntimeState> {
        let shareable = lock(&self.shared.devices)
            .get(&ordinal)
            .map(|d| d.shareable);
        let rt = self.runtime_of(ordinal)?;
        if shareable != Some(true) {
            return Err(not_shareable(ordinal));
        }
        Ok(ExportedRuntimeState {
            rank: rt.rank,
            device: rt.ordinal,
            bytes: rt.mapping.bytes,
            global: rt.global,
            fd: export_fd(rt.mapping.handle, "runtime-state")?,
        })
    }

    /// Maps a peer's exported runtime state at its rank's stride in this
    /// allocator's runtime-state reservation, accessible from `ctx`'s
    /// device, and returns the `GlobalState` its owner wrote there. Fails
    /// with [`VmmError::RuntimeStateExists`] if that rank is mapped
    /// already. Freezes the configuration.
    pub fn import_runtime_state(
        &self,
        ctx: &impl AsCudaDevice,
        e: &ExportedRuntimeState,
    ) -> VmmResult<GlobalState> {
        let ctx = ctx.cuda_device()?;
        let stride = super::PER_DEVICE_STATE_STRIDE;
        if e.rank as u64 >= super::MAX_DEVICES || e.bytes == 0 || e.bytes > stride {
            return Err(VmmError::RuntimeStateTooLarge {
                ordinal: e.device,
                bytes: e.bytes,
                sms: e.global.num_sms,
                threads: e.global.num_threads,
                clock_buffer_size: e.global.clock_buffer_size,
                stride,
            });
        }
        self.shared.frozen.store(true, Ordering::Release);
        let mut runtime = lock(&self.shared.runtime);
        if runtime[e.rank as usize].is_some() {
            return Err(VmmError::RuntimeStateExists { rank: e.rank });
        }
        ctx.bind()?;
        let mut undo = UndoStack::new(&Cuda);
        let h = import_fd(&e.fd, "runtime-state")?;
        let va = device_globals(self.globals_base(), e.rank);
        let mapping = undo.map_owned(va, e.bytes, h, &[ctx.ordinal()])?;
        // What the owner wrote, not what the exporter said (across
        // processes only the descriptor travels).
        let bytes = super::runtime_state::read(va, size_of::<GlobalState>(), ctx.ordinal())?;
        let global = bytemuck::pod_read_unaligned(&bytes);
        undo.commit();
        runtime[e.rank as usize] = Some(DeviceRuntime {
            ordinal: e.device,
            rank: e.rank,
            mapping,
            global,
        });
        Ok(global)
    }

    /// Device address of rank `rank`'s runtime-state region, if mapped
    /// (created here or imported).
    pub fn runtime_state_of_rank(&self, rank: u32) -> Option<u64> {
        lock(&self.shared.runtime)
            .get(rank as usize)
            .copied()
            .flatten()
            .map(|r| r.mapping.va)
    }
}
