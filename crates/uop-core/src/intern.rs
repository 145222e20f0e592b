//! The interning table: maps a node's structural hash to the live nodes with that hash, without owning them.
//!
//! Entries hold raw addresses, not references, so the table never keeps a graph alive. A node removes its own entry
//! in `Drop`, which runs before its memory is freed, so every address in the table points at a live node. The lock is
//! never held while Python code can run (no `__eq__`, no decref), so a `Drop` triggered by such code can always take it.
//!
//! The table is open addressing with linear probing over 16-byte slots (hash, object address): a lookup usually
//! touches one cache line, which matters because the table of a real program holds millions of nodes and every
//! constructor call probes it.

use std::sync::{Mutex, MutexGuard};

use pyo3::ffi;

const EMPTY: usize = 0;
const TOMBSTONE: usize = 1;

#[derive(Clone, Copy)]
struct Slot {
  hash: u64,
  object: usize,
}

const FREE: Slot = Slot { hash: 0, object: EMPTY };

/// Open-addressing hash table of (structural hash, object address).
struct Table {
  slots: Vec<Slot>,
  /// Live entries.
  live: usize,
  /// Live entries plus tombstones: what stands between a probe and an empty slot.
  used: usize,
}

impl Table {
  const fn new() -> Self {
    Table {
      slots: Vec::new(),
      live: 0,
      used: 0,
    }
  }

  #[inline]
  fn mask(&self) -> usize {
    self.slots.len() - 1
  }

  /// Rebuilds at most half full (dropping tombstones). Probes stay short up to 3/4 full, and a smaller table keeps more
  /// of it in cache, which is what a lookup costs.
  fn rebuild(&mut self) {
    let cap = ((self.live + 1) * 2).next_power_of_two().max(1024);
    let old = std::mem::replace(&mut self.slots, vec![FREE; cap]);
    self.used = 0;
    self.live = 0;
    for s in old {
      if s.object > TOMBSTONE {
        self.insert(s.hash, s.object);
      }
    }
  }

  fn insert(&mut self, hash: u64, object: usize) {
    if (self.used + 1) * 4 > self.slots.len() * 3 {
      self.rebuild();
    }
    let mask = self.mask();
    let mut i = hash as usize & mask;
    loop {
      let s = &mut self.slots[i];
      if s.object == EMPTY || s.object == TOMBSTONE {
        if s.object == EMPTY {
          self.used += 1;
        }
        *s = Slot { hash, object };
        self.live += 1;
        return;
      }
      i = (i + 1) & mask;
    }
  }

  fn remove(&mut self, hash: u64, object: usize) {
    if self.slots.is_empty() {
      return;
    }
    let mask = self.mask();
    let mut i = hash as usize & mask;
    loop {
      let s = &mut self.slots[i];
      if s.object == EMPTY {
        return;
      }
      if s.object == object {
        s.object = TOMBSTONE;
        self.live -= 1;
        return;
      }
      i = (i + 1) & mask;
    }
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
    if s.hash == hash && s.object != TOMBSTONE {
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
  use super::Table;

  #[test]
  fn insert_remove_and_reuse_tombstones() {
    let mut t = Table::new();
    for i in 0..10_000usize {
      t.insert((i % 97) as u64, 16 + i * 16);
    }
    assert_eq!(t.live, 10_000);
    for i in (0..10_000usize).step_by(2) {
      t.remove((i % 97) as u64, 16 + i * 16);
    }
    assert_eq!(t.live, 5_000);
    for round in 0..50usize {
      for i in 0..1_000usize {
        t.insert(i as u64, 1_000_000 + (round * 1_000 + i) * 16);
      }
      for i in 0..1_000usize {
        t.remove(i as u64, 1_000_000 + (round * 1_000 + i) * 16);
      }
    }
    assert_eq!(t.live, 5_000);
    assert!(t.used * 4 <= t.slots.len() * 3, "tombstones must not fill the table");
    let found = t.slots.iter().filter(|s| s.object > 1).count();
    assert_eq!(found, 5_000);
  }
}
