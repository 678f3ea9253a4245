//! The launches a sanitizer remembers for naming the earlier access of a
//! race: by launch id (what a record's current access names) and by
//! serial (what the shadow names the earlier access by), so a serial
//! gives its launch, its kernel and its block (the serial less the
//! launch's first).

use std::collections::{BTreeMap, HashMap, VecDeque};

use vigil_shared::race::serial::Serial;

use super::decode::LaunchShape;

/// One remembered launch, with what its backend keeps beside (`T`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remembered<T> {
    /// Its kernel and shape.
    pub shape: LaunchShape,
    /// Its first serial.
    pub base: Serial,
    /// Serials it owns (a copy's or fill's: one).
    pub count: u32,
    /// The backend's own.
    pub extra: T,
}

/// The last `capacity` launches, by id and by serial.
#[derive(Debug)]
pub struct LaunchHistory<T> {
    capacity: usize,
    by_id: HashMap<u32, Remembered<T>>,
    by_base: BTreeMap<Serial, u32>,
    order: VecDeque<u32>,
}

impl<T> LaunchHistory<T> {
    /// An empty history of the last `capacity` launches.
    pub fn new(capacity: usize) -> Self {
        LaunchHistory {
            capacity: capacity.max(1),
            by_id: HashMap::new(),
            by_base: BTreeMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Remembers launch `id` (forgetting the oldest when full).
    pub fn insert(&mut self, id: u32, launch: Remembered<T>) {
        if self.order.len() == self.capacity {
            if let Some(old) = self.order.pop_front() {
                if let Some(r) = self.by_id.remove(&old) {
                    if self.by_base.get(&r.base) == Some(&old) {
                        self.by_base.remove(&r.base);
                    }
                }
            }
        }
        self.order.push_back(id);
        self.by_base.insert(launch.base, id);
        self.by_id.insert(id, launch);
    }

    /// Launch `id`, if still remembered.
    pub fn get(&self, id: u32) -> Option<&Remembered<T>> {
        self.by_id.get(&id)
    }

    /// The launch serial `s` belongs to, with its id.
    pub fn of_serial(&self, s: Serial) -> Option<(u32, &Remembered<T>)> {
        let (_, &id) = self.by_base.range(..=s).next_back()?;
        let r = self.by_id.get(&id)?;
        (s.wrapping_sub(r.base) < r.count.max(1)).then_some((id, r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Dim3;

    #[test]
    fn serials_find_their_launch_until_it_is_forgotten() {
        let mut h = LaunchHistory::new(2);
        let shape = LaunchShape {
            kernel: "k".to_owned(),
            grid: Dim3::new(8, 1, 1),
            block: Dim3::new(32, 1, 1),
            host_issued: false,
        };
        let launch = |base, count, extra| Remembered {
            shape: shape.clone(),
            base,
            count,
            extra,
        };
        h.insert(3, launch(100, 8, 'a'));
        h.insert(4, launch(108, 1, 'b'));
        assert_eq!(
            h.of_serial(100).map(|(id, r)| (id, r.extra)),
            Some((3, 'a'))
        );
        assert_eq!(h.of_serial(107).map(|(id, _)| id), Some(3));
        assert_eq!(h.of_serial(108).map(|(id, _)| id), Some(4));
        assert!(h.of_serial(109).is_none() && h.of_serial(99).is_none());
        h.insert(5, launch(200, 4, 'c'));
        assert!(h.get(3).is_none() && h.of_serial(100).is_none());
        assert_eq!(h.get(5).map(|r| r.extra), Some('c'));
    }
}
