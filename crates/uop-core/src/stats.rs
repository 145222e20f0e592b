//! Match statistics (TRACK_MATCH_STATS).
//!
//! Level 0 costs one relaxed atomic load per rewrite call. Level >= 1 counts, per UPat, the attempts (rules whose
//! early-reject check passed), the matches, and the time spent in matched and in all attempts. Level >= 2 also sends
//! every rewrite to the Python tracking hook, which records it for the viewer (and prints it at level 3).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use pyo3::prelude::*;
use pyo3::types::PyList;

static LEVEL: AtomicU8 = AtomicU8::new(0);

/// The current TRACK_MATCH_STATS level.
#[inline]
pub fn level() -> u8 {
  LEVEL.load(Relaxed)
}

/// Counters of one UPat.
#[derive(Default)]
pub struct RuleStats {
  /// Times the rule's callback produced a replacement.
  pub matches: AtomicU64,
  /// Times the rule was tried past the early-reject check.
  pub attempts: AtomicU64,
  /// Nanoseconds spent in attempts that matched.
  pub match_ns: AtomicU64,
  /// Nanoseconds spent in all attempts, early rejects included.
  pub total_ns: AtomicU64,
}

impl RuleStats {
  /// Records one attempt (or early reject, with `tried == false`).
  #[inline]
  pub fn record(&self, tried: bool, matched: bool, ns: u64) {
    if tried {
      self.attempts.fetch_add(1, Relaxed);
    }
    if matched {
      self.matches.fetch_add(1, Relaxed);
      self.match_ns.fetch_add(ns, Relaxed);
    }
    self.total_ns.fetch_add(ns, Relaxed);
  }
}

type Registered = Vec<(Py<PyAny>, Arc<RuleStats>)>;
static REGISTERED: Mutex<Registered> = Mutex::new(Vec::new());

/// Makes a UPat's counters visible to `match_stats` (once per UPat).
pub fn register(upat: &Bound<'_, PyAny>, stats: &Arc<RuleStats>) {
  let mut reg = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
  if !reg.iter().any(|(_, s)| Arc::ptr_eq(s, stats)) {
    reg.push((upat.clone().unbind(), stats.clone()));
  }
}

/// Sets the tracking level (read from TRACK_MATCH_STATS by `tinygrad.uop.ops`).
#[pyfunction]
pub fn set_track_level(level: u8) {
  LEVEL.store(level, Relaxed);
}

/// The tracking level.
#[pyfunction]
pub fn track_level() -> u8 {
  level()
}

/// `[(upat, matches, attempts, match_seconds, total_seconds), ...]` for every rule tried while tracking.
#[pyfunction]
pub fn match_stats(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
  let reg = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
  let out = PyList::empty(py);
  for (upat, s) in reg.iter() {
    out.append((
      upat.bind(py),
      s.matches.load(Relaxed),
      s.attempts.load(Relaxed),
      s.match_ns.load(Relaxed) as f64 * 1e-9,
      s.total_ns.load(Relaxed) as f64 * 1e-9,
    ))?;
  }
  Ok(out)
}

/// Zeroes every counter.
#[pyfunction]
pub fn reset_match_stats() {
  let reg = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
  for (_, s) in reg.iter() {
    for c in [&s.matches, &s.attempts, &s.match_ns, &s.total_ns] {
      c.store(0, Relaxed);
    }
  }
}
