//! Emptying the race engine's knowledge tables on the device (snapshot
//! arena, exit log, SC-fence accumulators) once the launch order says
//! that everything they name is ordered before all later work
//! (`LaunchOrder::renew`). Without it they only fill: a long-lived
//! process (a test suite) would end with an arena that has no room left,
//! and every CTA that then needs a snapshot counts as knowing everything,
//! so that no race between blocks is reported any more.

use vigil_shared::atomic::CoreAtomics;
use vigil_shared::race::knowledge::{Arena, ARENA_HEADER_WORDS, EXIT_HEADER_WORDS};

use super::device_memory::{read_device, write_device, zero_device};
use super::{lock, GpuSanitizer, State};
use crate::error::Result;
use crate::sanitizer::order::launch_order;

impl GpuSanitizer {
    /// Empties the engine's knowledge tables if the launch order renewed
    /// since they were last emptied (no sanitized work can be running
    /// then). A failure leaves them as they are: renewing again later is
    /// just as right.
    pub(super) fn renew_if_idle(&self, st: &mut State) {
        // Held until the tables are empty: no launch is planned meanwhile.
        let mut order = lock(launch_order());
        let Some(renewal) = order.renew() else {
            return;
        };
        if renewal != st.renewed && self.empty_knowledge().is_ok() {
            st.renewed = renewal;
        }
    }

    /// Writes the empty tables (the descriptor's: a group's shared ones).
    fn empty_knowledge(&self) -> Result<()> {
        let d = self.desc();
        self.device.bind()?;
        let bytes = read_device(d.arena, 4 * ARENA_HEADER_WORDS)?;
        let old: [u32; ARENA_HEADER_WORDS] =
            std::array::from_fn(|i| u32::from_le_bytes([0, 1, 2, 3].map(|b| bytes[4 * i + b])));
        let new = Arena::<CoreAtomics>::renewed_header(&old);
        let exit_entries = (d.exit_words as usize).saturating_sub(EXIT_HEADER_WORDS);
        zero_device(d.exits + 4 * EXIT_HEADER_WORDS as u64, 4 * exit_entries)?;
        // The log's count only (its capacity and overflow count stay).
        write_device(d.exits, &0u32.to_le_bytes())?;
        zero_device(d.sc, 4 * d.sc_words as usize)?;
        let header: Vec<u8> = new.iter().flat_map(|w| w.to_le_bytes()).collect();
        write_device(d.arena, &header)
    }
}
