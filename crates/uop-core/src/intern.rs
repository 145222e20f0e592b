//! The interning table: maps a node's structural hash to the live nodes with that hash, without owning them.
//!
//! Entries hold raw addresses, not references, so the table never keeps a graph alive. A node removes its own entry
//! in `Drop`, which runs before its memory is freed, so every address in the table points at a live node. The lock is
//! never held while Python code can run (no `__eq__`, no decref), so a `Drop` triggered by such code can always take it.
//!
//! The table is open addressing with linear probing over 16-byte slots (hash, object address): a lookup usually
//! touches one cache line, which matters because the table of a real program holds millions of nodes and every
//! constructor call probes it. Removal shifts the following entries of the run back (no tombstones), so probe runs
//! stay as short as the load allows however many nodes come and go. The table is rebuilt only when it grows; like a
//! Python dict it does not shrink when entries are removed (at most about 43 bytes per node of the peak, against ~150
//! for the node and its `src` tuple), so a program that builds and frees graphs of similar size in a loop does not
//! regrow it, with a fresh allocation and a rehash of every entry, each time.

use std::sync::{Mutex, MutexGuard};

use pyo3::ffi;

const EMPTY: usize = 0;

#[derive(Clone, Copy)]
struct Slot {
  hash: u64,
  object: usize,
}

const FREE: Slot = Slot { hash: 0, object: EMPTY };

/// Smallest capacity.
const MIN_CAP: usize = 1024;

/// Open-addressing hash table of (structural hash, object address).
struct Table {
  slots: Vec<Slot>,
  /// Live entries.
  live: usize,
}

impl Table {
  const fn new() -> Self {
    Table { slots: Vec::new(), live: 0 }
  }

  #[inline]
  fn mask(&self) -> usize {
    self.slots.len() - 1
  }

  /// Rebuilds at most half full. Probes stay short up to 3/4 full, and a smaller table keeps more of it in cache,
  /// which is what a lookup costs.
  fn rebuild(&mut self) {
    let cap = ((self.live + 1) * 2).next_power_of_two().max(MIN_CAP);
    let old = std::mem::replace(&mut self.slots, vec![FREE; cap]);
    let mask = self.mask();
    for s in old {
      if s.object != EMPTY {
        let mut i = s.hash as usize & mask;
        while self.slots[i].object != EMPTY {
          i = (i + 1) & mask;
        }
        self.slots[i] = s;
      }
    }
  }

  fn insert(&mut self, hash: u64, object: usize) {
    if (self.live + 1) * 4 > self.slots.len() * 3 {
      self.rebuild();
    }
    let mask = self.mask();
    let mut i = hash as usize & mask;
    while self.slots[i].object != EMPTY {
      i = (i + 1) & mask;
    }
    self.slots[i] = Slot { hash, object };
    self.live += 1;
  }

  fn remove(&mut self, hash: u64, object: usize) {
    if self.slots.is_empty() {
      return;
    }
    let mask = self.mask();
    let mut hole = hash as usize & mask;
    loop {
      let s = self.slots[hole];
      if s.object == EMPTY {
        return;
      }
      if s.object == object {
        break;
      }
      hole = (hole + 1) & mask;
    }
    // Backward shift: walk the rest of the run and move back every entry whose home slot is not between the hole
    // and its own position (cyclically), so that no probe for it has to cross the hole.
    let mut j = hole;
    loop {
      j = (j + 1) & mask;
      let s = self.slots[j];
      if s.object == EMPTY {
        break;
      }
      let home = s.hash as usize & mask;
      // distance from home to j, and from the hole to j, going forward
      if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
        self.slots[hole] = s;
        hole = j;
      }
    }
    self.slots[hole] = FREE;
    self.live -= 1;
  }
}

static TABLE: Mutex<Table> = Mutex::new(Table::new());

fn table() -> MutexGuard<'static, Table> {
  // A panic while holding the lock cannot leave the table half-updated (each operation finishes its writes before it
  // can panic), so a poisoned lock is safe to keep using.
  TABLE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Calls `visit` with the address of every live object stored under `hash`, while holding the lock.
/// `visit` must not run Python code or release references; it returns true to stop early.
pub fn probe(hash: u64, mut visit: impl FnMut(*mut ffi::PyObject) -> bool) {
  let t = table();
  if t.slots.is_empty() {
    return;
  }
  let mask = t.mask();
  let mut i = hash as usize & mask;
  loop {
    let s = t.slots[i];
    if s.object == EMPTY {
      return;
    }
    if s.hash == hash {
      let obj = s.object as *mut ffi::PyObject;
      // An object whose refcount reached zero is being deallocated (e.g. weakref callbacks are running) and must not be
      // handed out again; its Drop will remove the entry.
      // SAFETY: entries are removed in the node's Drop, before the object's memory is freed, so `obj` is a valid
      // pointer to a live (possibly dying) Python object; reading its refcount does not mutate anything.
      if unsafe { ffi::Py_REFCNT(obj) } > 0 && visit(obj) {
        return;
      }
    }
    i = (i + 1) & mask;
  }
}

/// Where the table's probes start, as plain numbers: a snapshot taken under the lock, to request the slots that a
/// batch of removals will touch before they happen (see [`Homes::prefetch`]).
#[derive(Clone, Copy)]
pub struct Homes {
  base: usize,
  mask: usize,
}

impl Homes {
  /// Snapshot of the current table (None while it is still unallocated).
  pub fn now() -> Option<Homes> {
    let t = table();
    if t.slots.is_empty() {
      return None;
    }
    Some(Homes {
      base: t.slots.as_ptr() as usize,
      mask: t.mask(),
    })
  }

  /// Starts loading the slot where the probe for `hash` begins. Only an address is computed and handed to the CPU as a
  /// hint, never dereferenced, so a snapshot made stale by a later rebuild merely wastes the hint.
  #[inline]
  pub fn prefetch(&self, hash: u64) {
    let addr = self.base.wrapping_add((hash as usize & self.mask) * std::mem::size_of::<Slot>());
    crate::cpython::prefetch::prefetch(addr as *const u8);
  }
}

/// Adds a newly created object.
pub fn insert(hash: u64, object: *mut ffi::PyObject) {
  table().insert(hash, object as usize);
}

/// Removes the entry of `object`, if it is in the table.
pub fn remove(hash: u64, object: *mut ffi::PyObject) {
  table().remove(hash, object as usize);
}

/// Number of live interned nodes (for tests and leak checks).
pub fn len() -> usize {
  table().live
}

#[cfg(test)]
mod tests {
  use super::{Table, EMPTY, MIN_CAP};

  /// Every live entry must be reachable from its home slot without crossing an empty slot.
  fn check(t: &Table) {
    let mask = t.mask();
    let mut n = 0;
    for (j, s) in t.slots.iter().enumerate() {
      if s.object == EMPTY {
        continue;
      }
      n += 1;
      let mut i = s.hash as usize & mask;
      while i != j {
        assert_ne!(t.slots[i].object, EMPTY, "entry at {j} is cut off from its home slot");
        i = (i + 1) & mask;
      }
    }
    assert_eq!(n, t.live);
  }

  #[test]
  fn insert_remove_keeps_runs_intact() {
    let mut t = Table::new();
    for i in 0..10_000usize {
      t.insert((i % 97) as u64, 16 + i * 16);
    }
    assert_eq!(t.live, 10_000);
    check(&t);
    for i in (0..10_000usize).step_by(2) {
      t.remove((i % 97) as u64, 16 + i * 16);
    }
    assert_eq!(t.live, 5_000);
    check(&t);
    for round in 0..50usize {
      for i in 0..1_000usize {
        t.insert(i as u64, 1_000_000 + (round * 1_000 + i) * 16);
      }
      for i in 0..1_000usize {
        t.remove(i as u64, 1_000_000 + (round * 1_000 + i) * 16);
      }
      check(&t);
    }
    assert_eq!(t.live, 5_000);
    for i in (1..10_000usize).step_by(2) {
      t.remove((i % 97) as u64, 16 + i * 16);
    }
    assert_eq!(t.live, 0);
    assert!(t.slots.len() >= MIN_CAP);
  }

  #[test]
  fn wrapping_runs() {
    // hashes whose home is the last slots make runs that wrap around to the start
    let mut t = Table::new();
    t.insert(0, 16);
    let last = (t.slots.len() - 1) as u64;
    for i in 0..40usize {
      t.insert(last - (i % 4) as u64, 32 + i * 16);
    }
    check(&t);
    for i in (0..40usize).rev().step_by(3) {
      t.remove(last - (i % 4) as u64, 32 + i * 16);
      check(&t);
    }
  }
}
