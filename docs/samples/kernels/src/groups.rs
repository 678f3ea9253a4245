//! Multi-GPU and multi-process groups: symmetric memory.

use vigil_device::prelude::*;

// ANCHOR: pass_right
/// Every rank writes its rank into element `rank` of the next rank's
/// buffer, then all ranks meet at a group barrier, then each copies its
/// own buffer to `out`. `flags` holds one flag per rank; `generation`
/// grows by one per launch.
#[kernel]
pub fn pass_right(data: Peers<u32>, flags: Peers<u32>, out: GlobalSliceMut<u32>, generation: u32) {
    let (rank, world) = (data.rank(), data.world());
    if thread_idx().x == 0 {
        data.peer((rank + 1) % world).store(rank as usize, rank + 1);
        group_barrier(&flags, generation);
    }
    sync_threads();
    let i = thread_idx().x as usize;
    if i < out.len() {
        out.store(i, data.local().load(i));
    }
}
// ANCHOR_END: pass_right
