//! The launch in progress and the blocks running it, as the engine sees
//! them: each block is one CTA, named by its serial, with the engine's
//! synchronisation words (`race::sync::CtaSync`: its epoch, what it
//! acquired, its release fences). A virtual SM runs one block at a time,
//! all of whose threads are coroutines on the SM's worker, so the state
//! is per SM, behind an uncontended lock.

use super::atomics::HostAtomics;
use crate::sanitizer::decode::LaunchShape;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering as MemOrder};
use std::sync::{Arc, Mutex};
use vigil_device::Dim3;
use vigil_shared::race::memory::LaneRef;
use vigil_shared::race::serial::{lane_of, HostOrder, LaneBounds, Serial};
use vigil_shared::race::sync::{CtaSync, SYNC_WORDS};
use vigil_shared::race::{CtaView, LaneDevices};

use super::lock;

/// A launch (or a copy or fill) as planned: what its CTAs' views are made
/// of, and what reports name it by.
pub(super) struct LaunchState {
    /// Its launch id.
    pub(super) id: u32,
    /// Its number in the launch ring.
    pub(super) lane_ref: LaneRef,
    /// Its first serial, and how many it owns.
    pub(super) base: Serial,
    pub(super) count: u32,
    /// What the host ordered before it (its own lane's bound: what a CTA
    /// is ordered after until it waits for the launch before it, in a
    /// programmatic dependent launch; its base otherwise).
    pub(super) bounds: LaneBounds,
    /// What every launch running or to come orders (forgotten).
    pub(super) global: LaneBounds,
    /// The device of each lane when it was planned.
    pub(super) devices: LaneDevices,
    /// Its kernel and shape.
    pub(super) shape: LaunchShape,
}

/// One CTA: a block of a launch, or the one CTA of a copy or fill.
pub(super) struct Cta {
    /// Its serial.
    pub(super) serial: Serial,
    /// Its linear block index.
    pub(super) block: u32,
    /// Its launch.
    pub(super) launch: Arc<LaunchState>,
    sync: [AtomicU32; SYNC_WORDS],
    /// Whether a thread of it waited for the launch before it
    /// (`griddepcontrol.wait`).
    waited: AtomicBool,
}

/// Linear index of `i` in `extent`, x fastest.
pub(super) fn linear(i: Dim3, extent: Dim3) -> u64 {
    u64::from(i.x) + u64::from(extent.x) * (u64::from(i.y) + u64::from(extent.y) * u64::from(i.z))
}

impl Cta {
    /// Block `block` (linear index) of `launch`, starting.
    pub(super) fn new(launch: Arc<LaunchState>, block: u32) -> Cta {
        let cta = Cta {
            serial: launch.base + block,
            block,
            launch,
            sync: std::array::from_fn(|_| AtomicU32::new(0)),
            waited: AtomicBool::new(false),
        };
        cta.sync().init();
        cta
    }

    /// A thread of it waited for the launch before it: from now on the
    /// CTA is ordered after that launch (the whole CTA: the engine sees a
    /// block as one thread, which may hide a race, never invent one).
    pub(super) fn waited_for_prerequisites(&self) {
        self.waited.store(true, MemOrder::Relaxed);
    }

    /// Its synchronisation state.
    #[inline(always)]
    pub(super) fn sync(&self) -> CtaSync<'_, HostAtomics> {
        CtaSync::new(&self.sync)
    }

    /// The engine's view of it, on device `device`.
    #[inline(always)]
    pub(super) fn view(&self, device: u32) -> CtaView<'_> {
        let sync = self.sync();
        let l = &*self.launch;
        CtaView {
            serial: self.serial,
            epoch: sync.epoch(),
            device,
            host: HostOrder {
                own_bound: if self.waited.load(MemOrder::Relaxed) {
                    l.base
                } else {
                    l.bounds.0[lane_of(l.base)]
                },
                ..HostOrder::new(l.base, l.count, &l.bounds)
            },
            global: &l.global,
            devices: &l.devices,
            known: sync.known(),
            launch: l.lane_ref,
            own: Default::default(),
        }
    }
}

/// The block each virtual SM runs.
pub(super) struct CtaSlots(Box<[Mutex<Option<Cta>>]>);

impl CtaSlots {
    /// Slots for `sms` virtual SMs.
    pub(super) fn new(sms: usize) -> Self {
        CtaSlots((0..sms).map(|_| Mutex::new(None)).collect())
    }

    /// Virtual SMs.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }

    fn slot(&self, smid: u32) -> &Mutex<Option<Cta>> {
        self.0.get(smid as usize).unwrap_or_else(|| {
            panic!(
                "vigil: the CPU sanitizer keeps block state for {} virtual SMs, fewer than the \
                 executor's; configure at least one per worker",
                self.0.len()
            )
        })
    }

    /// `cta` starts on `smid`.
    pub(super) fn start(&self, smid: u32, cta: Cta) {
        *lock(self.slot(smid)) = Some(cta);
    }

    /// The block on `smid` ends: its state.
    pub(super) fn end(&self, smid: u32) -> Option<Cta> {
        lock(self.slot(smid)).take()
    }

    /// `f` with the block running on `smid` (`None`: no block, a hook
    /// outside a sanitized launch).
    #[inline(always)]
    pub(super) fn with<R>(&self, smid: u32, f: impl FnOnce(&Cta) -> R) -> Option<R> {
        lock(self.slot(smid)).as_ref().map(f)
    }
}
