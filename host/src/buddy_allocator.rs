//! A buddy allocator: a tree that hands out power-of-two blocks of a
//! range of addresses and coalesces them when freed. Pure Rust over
//! offsets, with no memory of its own and no driver calls, so it is
//! tested (and fuzzed) on the CPU. Both shadow allocators use it: the
//! GPU's over its virtual reservation, the CPU sanitizer's over its host
//! arena.
//!
//! The range is split into power-of-two blocks of `min_block << order`
//! bytes. The tree is a complete binary tree in an array (node 1 is the
//! root, node `i` has children `2i` and `2i + 1`); every node is *free*
//! (a whole block, not handed out), *used* (a whole block, handed out),
//! *split* (its two halves are nodes of their own) or *reserved* (past the
//! end of a range that is not a power of two).
//!
//! Every node also keeps the set of orders of the free blocks below it, as
//! a bit mask. The highest bit is the node's largest free descendant; the
//! lowest bit at or above the order a request needs is the best fit. That
//! makes allocation *exact* best fit (the smallest free block that fits,
//! lowest address among equals), and allocation, freeing and coalescing all
//! walk one root-to-leaf path: O(log range).
//!
//! [`model::ReferenceBuddy`] is an obviously-correct (and slow) model of the
//! same policy, for property tests and the fuzz target.

use std::fmt;

/// Most levels below the root a tree may have (2^26 leaves: 64 Mi nodes).
pub const MAX_LEVELS: u32 = 26;

/// A block of the range: `[offset, offset + size)`, `size` a power of two
/// times the minimum block, `offset` a multiple of `size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Block {
    /// Offset from the start of the range, in bytes.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

impl Block {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.offset + self.size
    }

    /// True when `offset` lies in the block.
    pub fn contains(&self, offset: u64) -> bool {
        offset >= self.offset && offset < self.end()
    }
}

/// What the buddy tree refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BuddyError {
    /// The minimum block is not a power of two, the capacity is zero or not
    /// a multiple of it, or the tree would be too deep.
    #[error(
        "invalid buddy tree geometry: capacity {capacity} bytes, minimum block {min_block} bytes \
         (need a power-of-two minimum block, a non-zero capacity that is a multiple of it, and at \
         most 2^{MAX_LEVELS} minimum blocks)"
    )]
    Geometry {
        /// Capacity asked for.
        capacity: u64,
        /// Minimum block asked for.
        min_block: u64,
    },
    /// A request for zero bytes.
    #[error("cannot allocate zero bytes")]
    ZeroSize,
    /// A request larger than the whole range.
    #[error("cannot allocate {size} bytes: the range holds {capacity} bytes")]
    TooLarge {
        /// Bytes asked for.
        size: u64,
        /// The range's capacity.
        capacity: u64,
    },
    /// No free block is large enough (the range is full or fragmented).
    #[error("no free block of {needed} bytes for a request of {size} bytes (largest free block: {largest_free} bytes)")]
    OutOfSpace {
        /// Bytes asked for.
        size: u64,
        /// The block size the request rounds up to.
        needed: u64,
        /// The largest free block.
        largest_free: u64,
    },
    /// Freeing an offset past the end of the range.
    #[error("offset {offset:#x} lies outside the range of {capacity:#x} bytes")]
    OutOfRange {
        /// The offset given.
        offset: u64,
        /// The range's capacity.
        capacity: u64,
    },
    /// Freeing an offset inside a used block, not at its start.
    #[error("offset {offset:#x} points into the block at {:#x} ({} bytes), not at its start", block.offset, block.size)]
    Interior {
        /// The offset given.
        offset: u64,
        /// The used block it lies in.
        block: Block,
    },
    /// Freeing an offset that lies in free space.
    #[error("offset {offset:#x} is not allocated")]
    NotAllocated {
        /// The offset given.
        offset: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Node {
    Free,
    Used,
    Split,
    Reserved,
}

/// The buddy tree. See the module documentation.
#[derive(Clone)]
pub struct BuddyTree {
    min_block: u64,
    capacity: u64,
    levels: u32,
    state: Vec<Node>,
    /// Bit `k` set: a free block of order `k` lies at or below the node.
    free_orders: Vec<u32>,
    used_bytes: u64,
    used_blocks: usize,
}

impl fmt::Debug for BuddyTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuddyTree")
            .field("capacity", &self.capacity)
            .field("min_block", &self.min_block)
            .field("levels", &self.levels)
            .field("used_bytes", &self.used_bytes)
            .field("used_blocks", &self.used_blocks)
            .field("largest_free", &self.largest_free())
            .finish()
    }
}

impl BuddyTree {
    /// A tree over `capacity` bytes handing out blocks of at least
    /// `min_block` bytes. `min_block` must be a power of two and `capacity`
    /// a non-zero multiple of it; a capacity that is not a power of two
    /// times `min_block` works too (the excess of the root is reserved).
    pub fn new(capacity: u64, min_block: u64) -> Result<BuddyTree, BuddyError> {
        let geometry = BuddyError::Geometry {
            capacity,
            min_block,
        };
        if !min_block.is_power_of_two() || capacity == 0 || !capacity.is_multiple_of(min_block) {
            return Err(geometry);
        }
        let leaves = (capacity / min_block).next_power_of_two();
        let levels = leaves.trailing_zeros();
        if levels > MAX_LEVELS {
            return Err(geometry);
        }
        let nodes = 2 * leaves as usize;
        let mut tree = BuddyTree {
            min_block,
            capacity,
            levels,
            state: vec![Node::Reserved; nodes],
            free_orders: vec![0; nodes],
            used_bytes: 0,
            used_blocks: 0,
        };
        tree.init_node(1, 0, levels);
        Ok(tree)
    }

    fn init_node(&mut self, i: usize, start: u64, order: u32) {
        let size = self.min_block << order;
        if start + size <= self.capacity {
            self.state[i] = Node::Free;
            self.free_orders[i] = 1 << order;
        } else if start >= self.capacity {
            self.state[i] = Node::Reserved;
            self.free_orders[i] = 0;
        } else {
            // Partly inside: only possible above the leaves, since the
            // capacity is a multiple of the minimum block.
            self.state[i] = Node::Split;
            self.init_node(2 * i, start, order - 1);
            self.init_node(2 * i + 1, start + size / 2, order - 1);
            self.free_orders[i] = self.free_orders[2 * i] | self.free_orders[2 * i + 1];
        }
    }

    /// The usable bytes of the range.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The smallest block handed out.
    pub fn min_block(&self) -> u64 {
        self.min_block
    }

    /// Bytes in used blocks.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes
    }

    /// Bytes in free blocks.
    pub fn free_bytes(&self) -> u64 {
        self.capacity - self.used_bytes
    }

    /// Number of used blocks.
    pub fn used_blocks(&self) -> usize {
        self.used_blocks
    }

    /// The largest free block in bytes (0 when full): the root's largest
    /// free descendant.
    pub fn largest_free(&self) -> u64 {
        match self.free_orders[1] {
            0 => 0,
            m => self.min_block << (31 - m.leading_zeros()),
        }
    }

    /// The block size a request of `size` bytes rounds up to.
    pub fn block_size_for(&self, size: u64) -> Result<u64, BuddyError> {
        self.order_for(size).map(|k| self.min_block << k)
    }

    fn order_for(&self, size: u64) -> Result<u32, BuddyError> {
        if size == 0 {
            return Err(BuddyError::ZeroSize);
        }
        if size > self.capacity {
            return Err(BuddyError::TooLarge {
                size,
                capacity: self.capacity,
            });
        }
        Ok(size
            .div_ceil(self.min_block)
            .next_power_of_two()
            .trailing_zeros())
    }

    fn recompute_up(&mut self, mut i: usize) {
        while i > 1 {
            i /= 2;
            self.free_orders[i] = self.free_orders[2 * i] | self.free_orders[2 * i + 1];
        }
    }

    /// Hands out the smallest free block of at least `size` bytes (lowest
    /// offset among equals), splitting a larger one if needed.
    pub fn alloc(&mut self, size: u64) -> Result<Block, BuddyError> {
        let k = self.order_for(size)?;
        let fitting = self.free_orders[1] >> k;
        if fitting == 0 {
            return Err(BuddyError::OutOfSpace {
                size,
                needed: self.min_block << k,
                largest_free: self.largest_free(),
            });
        }
        let j = k + fitting.trailing_zeros();
        // Descend to the lowest free block of order j. A node above order j
        // whose mask has bit j is split (a free node's mask is its own order).
        let (mut i, mut order, mut offset) = (1usize, self.levels, 0u64);
        while order > j {
            order -= 1;
            i *= 2;
            if self.free_orders[i] & (1 << j) == 0 {
                i += 1;
                offset += self.min_block << order;
            }
        }
        debug_assert_eq!(self.state[i], Node::Free);
        // Split down to order k, keeping the left half each time.
        while order > k {
            self.state[i] = Node::Split;
            order -= 1;
            self.state[2 * i + 1] = Node::Free;
            self.free_orders[2 * i + 1] = 1 << order;
            i *= 2;
        }
        self.state[i] = Node::Used;
        self.free_orders[i] = 0;
        self.recompute_up(i);
        let block = Block {
            offset,
            size: self.min_block << k,
        };
        self.used_bytes += block.size;
        self.used_blocks += 1;
        Ok(block)
    }

    /// The node holding `offset` that is not split: `(index, order, block)`.
    fn find(&self, offset: u64) -> Result<(usize, u32, Block), BuddyError> {
        if offset >= self.capacity {
            return Err(BuddyError::OutOfRange {
                offset,
                capacity: self.capacity,
            });
        }
        let (mut i, mut order, mut start) = (1usize, self.levels, 0u64);
        while self.state[i] == Node::Split {
            order -= 1;
            i *= 2;
            let half = self.min_block << order;
            if offset >= start + half {
                i += 1;
                start += half;
            }
        }
        Ok((
            i,
            order,
            Block {
                offset: start,
                size: self.min_block << order,
            },
        ))
    }

    /// The used block containing `offset`, if any.
    pub fn lookup(&self, offset: u64) -> Option<Block> {
        match self.find(offset) {
            Ok((i, _, block)) if self.state[i] == Node::Used => Some(block),
            _ => None,
        }
    }

    /// Returns the used block starting at `offset` and merges it with its
    /// free buddies as far as they go. Returns the block that was freed.
    pub fn free(&mut self, offset: u64) -> Result<Block, BuddyError> {
        let (mut i, mut order, block) = self.find(offset)?;
        match self.state[i] {
            Node::Used if block.offset == offset => {}
            Node::Used => return Err(BuddyError::Interior { offset, block }),
            Node::Free => return Err(BuddyError::NotAllocated { offset }),
            // Reserved nodes lie past the capacity, which find() rejected.
            Node::Reserved | Node::Split => {
                unreachable!("find() stops at a used or free node inside the range")
            }
        }
        self.state[i] = Node::Free;
        self.free_orders[i] = 1 << order;
        while i > 1 && self.state[i ^ 1] == Node::Free {
            i /= 2;
            order += 1;
            self.state[i] = Node::Free;
            self.free_orders[i] = 1 << order;
        }
        self.recompute_up(i);
        self.used_bytes -= block.size;
        self.used_blocks -= 1;
        Ok(block)
    }

    fn collect(&self, want: Node) -> Vec<Block> {
        let mut out = Vec::new();
        let mut stack = vec![(1usize, self.levels, 0u64)];
        while let Some((i, order, start)) = stack.pop() {
            match self.state[i] {
                Node::Split => {
                    let half = self.min_block << (order - 1);
                    stack.push((2 * i + 1, order - 1, start + half));
                    stack.push((2 * i, order - 1, start));
                }
                s if s == want => out.push(Block {
                    offset: start,
                    size: self.min_block << order,
                }),
                _ => {}
            }
        }
        out
    }

    /// The free blocks, by offset (O(number of nodes in use); for tests).
    pub fn free_blocks(&self) -> Vec<Block> {
        self.collect(Node::Free)
    }

    /// The used blocks, by offset (O(number of nodes in use); for tests).
    pub fn used_blocks_list(&self) -> Vec<Block> {
        self.collect(Node::Used)
    }

    /// True when nothing is allocated and every buddy pair has merged
    /// again (the free blocks are the ones a new tree starts with).
    pub fn is_fully_coalesced(&self) -> bool {
        self.used_blocks == 0
            && BuddyTree::new(self.capacity, self.min_block).map(|t| t.free_blocks())
                == Ok(self.free_blocks())
    }

    /// Checks every node's mask and state against its children (O(nodes);
    /// for tests and the fuzz target). Returns what is inconsistent.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut used = 0u64;
        let mut stack = vec![(1usize, self.levels)];
        while let Some((i, order)) = stack.pop() {
            let expect = match self.state[i] {
                Node::Free => 1 << order,
                Node::Used => {
                    used += self.min_block << order;
                    0
                }
                Node::Reserved => 0,
                Node::Split => {
                    if order == 0 {
                        return Err(format!("leaf node {i} is split"));
                    }
                    if self.state[2 * i] == Node::Free && self.state[2 * i + 1] == Node::Free {
                        return Err(format!(
                            "node {i} has two free children that were not merged"
                        ));
                    }
                    stack.push((2 * i, order - 1));
                    stack.push((2 * i + 1, order - 1));
                    self.free_orders[2 * i] | self.free_orders[2 * i + 1]
                }
            };
            if self.free_orders[i] != expect {
                return Err(format!(
                    "node {i}: mask {:#b}, expected {expect:#b}",
                    self.free_orders[i]
                ));
            }
        }
        if used != self.used_bytes {
            return Err(format!(
                "used bytes {} but used blocks sum to {used}",
                self.used_bytes
            ));
        }
        Ok(())
    }
}

pub mod model {
    //! [`ReferenceBuddy`]: the buddy policy written the obvious way (a set
    //! of free blocks, linear searches), to check [`BuddyTree`] against.
    //!
    //! [`BuddyTree`]: super::BuddyTree

    use super::{Block, BuddyError, BuddyTree};
    use std::collections::{BTreeMap, BTreeSet};

    /// A free-list buddy allocator: best fit by block size, lowest offset
    /// among equals, merging with the buddy on free. O(n) per operation.
    #[derive(Clone, Debug)]
    pub struct ReferenceBuddy {
        min_block: u64,
        capacity: u64,
        free: BTreeSet<Block>,
        used: BTreeMap<u64, u64>,
    }

    impl ReferenceBuddy {
        /// The model of `BuddyTree::new(capacity, min_block)` (same
        /// geometry rules; the initial free blocks are taken from it).
        pub fn new(capacity: u64, min_block: u64) -> Result<ReferenceBuddy, BuddyError> {
            let free = BuddyTree::new(capacity, min_block)?
                .free_blocks()
                .into_iter()
                .collect();
            Ok(ReferenceBuddy {
                min_block,
                capacity,
                free,
                used: BTreeMap::new(),
            })
        }

        /// Best-fit allocation.
        pub fn alloc(&mut self, size: u64) -> Result<Block, BuddyError> {
            if size == 0 {
                return Err(BuddyError::ZeroSize);
            }
            if size > self.capacity {
                return Err(BuddyError::TooLarge {
                    size,
                    capacity: self.capacity,
                });
            }
            let mut need = self.min_block;
            while need < size {
                need *= 2;
            }
            let best = self
                .free
                .iter()
                .filter(|b| b.size >= need)
                .min_by_key(|b| (b.size, b.offset))
                .copied();
            let Some(mut b) = best else {
                let largest_free = self.free.iter().map(|b| b.size).max().unwrap_or(0);
                return Err(BuddyError::OutOfSpace {
                    size,
                    needed: need,
                    largest_free,
                });
            };
            self.free.remove(&b);
            while b.size > need {
                b.size /= 2;
                self.free.insert(Block {
                    offset: b.offset + b.size,
                    size: b.size,
                });
            }
            self.used.insert(b.offset, b.size);
            Ok(b)
        }

        /// Frees the block at `offset` and merges buddies.
        pub fn free(&mut self, offset: u64) -> Result<Block, BuddyError> {
            if offset >= self.capacity {
                return Err(BuddyError::OutOfRange {
                    offset,
                    capacity: self.capacity,
                });
            }
            if let Some((&start, &size)) = self.used.range(..=offset).next_back() {
                if offset < start + size {
                    if start != offset {
                        return Err(BuddyError::Interior {
                            offset,
                            block: Block {
                                offset: start,
                                size,
                            },
                        });
                    }
                    self.used.remove(&start);
                    let freed = Block {
                        offset: start,
                        size,
                    };
                    let mut b = freed;
                    loop {
                        let buddy = Block {
                            offset: b.offset ^ b.size,
                            size: b.size,
                        };
                        if !self.free.remove(&buddy) {
                            break;
                        }
                        b = Block {
                            offset: b.offset.min(buddy.offset),
                            size: b.size * 2,
                        };
                    }
                    self.free.insert(b);
                    return Ok(freed);
                }
            }
            Err(BuddyError::NotAllocated { offset })
        }

        /// The free blocks, by offset.
        pub fn free_blocks(&self) -> Vec<Block> {
            self.free.iter().copied().collect()
        }

        /// The used blocks, by offset.
        pub fn used_blocks(&self) -> Vec<Block> {
            self.used
                .iter()
                .map(|(&offset, &size)| Block { offset, size })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::model::ReferenceBuddy;
    use super::*;
    use proptest::prelude::*;

    const MB: u64 = 1 << 20;

    #[test]
    fn geometry_errors() {
        assert!(matches!(
            BuddyTree::new(0, 2 * MB),
            Err(BuddyError::Geometry { .. })
        ));
        assert!(matches!(
            BuddyTree::new(6 * MB, 3 * MB),
            Err(BuddyError::Geometry { .. })
        ));
        assert!(matches!(
            BuddyTree::new(5 * MB, 2 * MB),
            Err(BuddyError::Geometry { .. })
        ));
        assert!(matches!(
            BuddyTree::new(1 << 40, 1),
            Err(BuddyError::Geometry { .. })
        ));
        // The real half: 256 GiB in 2 MiB blocks is 17 levels.
        let t = BuddyTree::new(256 << 30, 2 * MB).unwrap();
        assert_eq!(t.largest_free(), 256 << 30);
        assert_eq!(t.levels, 17);
    }

    #[test]
    fn alloc_rounds_aligns_and_coalesces() {
        let mut t = BuddyTree::new(64 * MB, 2 * MB).unwrap();
        let a = t.alloc(1).unwrap();
        assert_eq!(
            a,
            Block {
                offset: 0,
                size: 2 * MB
            }
        );
        let b = t.alloc(2 * MB + 1).unwrap();
        assert_eq!(
            b,
            Block {
                offset: 4 * MB,
                size: 4 * MB
            }
        );
        // Best fit: the 2 MiB hole at 2 MiB, not a split of a larger block.
        let c = t.alloc(2 * MB).unwrap();
        assert_eq!(
            c,
            Block {
                offset: 2 * MB,
                size: 2 * MB
            }
        );
        assert_eq!(
            t.free(4 * MB + 1),
            Err(BuddyError::Interior {
                offset: 4 * MB + 1,
                block: b
            })
        );
        assert_eq!(
            t.free(64 * MB),
            Err(BuddyError::OutOfRange {
                offset: 64 * MB,
                capacity: 64 * MB
            })
        );
        for blk in [a, c, b] {
            assert_eq!(t.free(blk.offset), Ok(blk));
            t.check_invariants().unwrap();
        }
        assert_eq!(t.free(0), Err(BuddyError::NotAllocated { offset: 0 }));
        assert!(t.is_fully_coalesced());
        assert_eq!(
            t.free_blocks(),
            vec![Block {
                offset: 0,
                size: 64 * MB
            }]
        );
    }

    #[test]
    fn size_errors() {
        let mut t = BuddyTree::new(8 * MB, 2 * MB).unwrap();
        assert_eq!(t.alloc(0), Err(BuddyError::ZeroSize));
        assert_eq!(
            t.alloc(8 * MB + 1),
            Err(BuddyError::TooLarge {
                size: 8 * MB + 1,
                capacity: 8 * MB
            })
        );
        t.alloc(8 * MB).unwrap();
        assert_eq!(
            t.alloc(1),
            Err(BuddyError::OutOfSpace {
                size: 1,
                needed: 2 * MB,
                largest_free: 0
            })
        );
    }

    #[test]
    fn non_power_of_two_capacity() {
        let mut t = BuddyTree::new(6 * MB, 2 * MB).unwrap();
        assert_eq!(
            t.free_blocks(),
            vec![
                Block {
                    offset: 0,
                    size: 4 * MB
                },
                Block {
                    offset: 4 * MB,
                    size: 2 * MB
                }
            ]
        );
        assert_eq!(
            t.alloc(6 * MB).unwrap_err(),
            BuddyError::OutOfSpace {
                size: 6 * MB,
                needed: 8 * MB,
                largest_free: 4 * MB
            }
        );
        let a = t.alloc(2 * MB).unwrap();
        assert_eq!(a.offset, 4 * MB, "best fit takes the exact 2 MiB block");
        t.free(a.offset).unwrap();
        assert!(t.is_fully_coalesced());
    }

    #[derive(Clone, Debug)]
    enum Op {
        Alloc(u64),
        Free(usize),
        FreeRaw(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u64..=40).prop_map(|k| Op::Alloc(k * k * 1000)),
            3 => any::<usize>().prop_map(Op::Free),
            1 => (0u64..2_000_000).prop_map(Op::FreeRaw),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Random allocate/free sequences agree with the reference model
        /// (so best fit holds), never overlap, are aligned to their size,
        /// and freeing everything coalesces back to the initial blocks.
        #[test]
        fn matches_model(units in 1u64..=96, ops in prop::collection::vec(op(), 1..200)) {
            let min = 4096;
            let cap = units * min;
            let mut tree = BuddyTree::new(cap, min).unwrap();
            let mut model = ReferenceBuddy::new(cap, min).unwrap();
            let mut live: Vec<(Block, u64)> = Vec::new();
            for op in ops {
                match op {
                    Op::Alloc(size) => {
                        let got = tree.alloc(size);
                        prop_assert_eq!(&got, &model.alloc(size));
                        if let Ok(b) = got {
                            prop_assert!(b.size >= size && b.size.is_power_of_two() && b.size >= min);
                            prop_assert_eq!(b.offset % b.size, 0);
                            prop_assert!(b.end() <= cap);
                            for (o, _) in &live {
                                prop_assert!(b.end() <= o.offset || o.end() <= b.offset, "{:?} overlaps {:?}", b, o);
                            }
                            prop_assert_eq!(tree.lookup(b.offset + b.size - 1), Some(b));
                            live.push((b, size));
                        }
                    }
                    Op::Free(i) if !live.is_empty() => {
                        let (b, _) = live.swap_remove(i % live.len());
                        prop_assert_eq!(tree.free(b.offset), Ok(b));
                        prop_assert_eq!(model.free(b.offset), Ok(b));
                        prop_assert_eq!(tree.lookup(b.offset), None);
                    }
                    Op::Free(_) => {}
                    Op::FreeRaw(off) => {
                        let got = tree.free(off);
                        prop_assert_eq!(&got, &model.free(off));
                        if let Ok(b) = got {
                            live.retain(|(l, _)| *l != b);
                        }
                    }
                }
                tree.check_invariants().map_err(TestCaseError::fail)?;
                prop_assert_eq!(tree.free_blocks(), model.free_blocks());
                prop_assert_eq!(tree.used_blocks_list(), model.used_blocks());
                prop_assert_eq!(tree.largest_free(), model.free_blocks().iter().map(|b| b.size).max().unwrap_or(0));
            }
            for (b, _) in live.drain(..) {
                prop_assert_eq!(tree.free(b.offset), Ok(b));
            }
            prop_assert!(tree.is_fully_coalesced());
            prop_assert_eq!(tree.used_bytes(), 0);
            if cap.is_power_of_two() {
                prop_assert_eq!(tree.free_blocks(), vec![Block { offset: 0, size: cap }]);
            }
        }
    }
}
