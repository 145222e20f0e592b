//! Per-node scratch space for graph traversals.
//!
//! Every UOp carries a `mark` (an epoch number) and a value slot. A traversal (toposort, graph_rewrite) takes a fresh
//! epoch; a node whose mark equals it has been visited by that traversal, and its slot holds the traversal's state for
//! it. This replaces hash-map lookups with reads of memory the traversal touches anyway (the node's own payload).
//!
//! Traversals can nest (a rewrite callback may run another graph_rewrite over shared nodes) or interleave (another
//! thread runs while a callback holds the GIL released). A traversal may therefore only take over a node whose mark is
//! not the epoch of another traversal that is still running; otherwise it keeps that node's state in its own map.
//! Epochs are never reused, so a mark left behind by a finished traversal is simply stale.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

static NEXT_EPOCH: AtomicU64 = AtomicU64::new(1);
static ACTIVE_COUNT: AtomicUsize = AtomicUsize::new(0);
static ACTIVE: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// A running traversal's epoch; registered as active until dropped.
pub struct Epoch(pub u64);

impl Epoch {
  /// Starts a traversal.
  pub fn begin() -> Epoch {
    let e = NEXT_EPOCH.fetch_add(1, Relaxed);
    ACTIVE.lock().unwrap_or_else(|p| p.into_inner()).push(e);
    ACTIVE_COUNT.fetch_add(1, Relaxed);
    Epoch(e)
  }

  /// Whether a node marked `mark` may be taken over by this traversal (its mark is not another running traversal's).
  #[inline]
  pub fn can_claim(&self, mark: u64) -> bool {
    if mark == self.0 || mark == 0 || ACTIVE_COUNT.load(Relaxed) == 1 {
      return true;
    }
    !ACTIVE.lock().unwrap_or_else(|p| p.into_inner()).contains(&mark)
  }
}

impl Drop for Epoch {
  fn drop(&mut self) {
    let mut active = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(i) = active.iter().rposition(|e| *e == self.0) {
      active.remove(i);
    }
    ACTIVE_COUNT.fetch_sub(1, Relaxed);
  }
}

#[cfg(test)]
mod tests {
  use super::Epoch;

  #[test]
  fn nested_epochs_protect_each_other() {
    let outer = Epoch::begin();
    assert!(outer.can_claim(0) && outer.can_claim(outer.0));
    let inner = Epoch::begin();
    assert!(!inner.can_claim(outer.0), "a running traversal's marks must not be taken over");
    assert!(!outer.can_claim(inner.0));
    let stale = inner.0;
    drop(inner);
    assert!(outer.can_claim(stale), "marks of finished traversals are stale");
  }
}
