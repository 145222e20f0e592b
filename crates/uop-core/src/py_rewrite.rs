//! The Python side of graph_rewrite: a [`Host`] over interned UOps and PatternMatchers, and the `graph_rewrite`
//! function itself.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;

use std::sync::atomic::Ordering::Relaxed;

use crate::cpython::prefetch::prefetch;
use crate::hashing::AddrMap;
use crate::intern::Homes;
use crate::matcher::{MatchScratch, PatternMatcher};
use crate::node::{next_serial, PyNode, UOp};
use crate::registry::{self, safe_repr, type_name};
use crate::rewrite::{BottomUp, Engine, Host, Limits, State};
use crate::scratch::Epoch;
use crate::stats;

/// The host of one graph_rewrite call. Every [`PyNode`] the engine sees is kept alive either by the graph under the
/// root (which the caller holds) or by the `keep` list (nodes created or returned during the rewrite).
struct PyHost<'a, 'py> {
  py: Python<'py>,
  pm: Option<&'a PatternMatcher>,
  bpm: Option<&'a PatternMatcher>,
  ctx: Bound<'py, PyAny>,
  name: String,
  /// The matcher and index of the last rule that fired, described only if an error needs it.
  last_rule: Option<(&'a PatternMatcher, usize)>,
  /// Strong references to every node produced during the rewrite, so their handles stay valid until it ends.
  keep: Vec<Bound<'py, UOp>>,
  /// This rewrite's epoch: per-node state lives in the nodes' scratch slots (see `scratch`)...
  epoch: Epoch,
  /// ...except for nodes whose slot another running traversal holds.
  elsewhere: AddrMap<PyNode, State<PyNode>>,
  /// Nodes with a serial from this one up to (not including) the next serial were created during the rewrite.
  first_serial: u32,
  /// The matchers' working memory, kept for the whole rewrite.
  scratch: MatchScratch,
}

/// Slot encoding of a node's state: 1 is "in progress", anything else the address of the result.
const IN_PROGRESS: usize = 1;

impl<'a, 'py> PyHost<'a, 'py> {
  #[inline]
  fn bound<'b>(&self, n: PyNode) -> Borrowed<'b, 'py, UOp> {
    // SAFETY: handles are live UOps (see `PyHost`): graph nodes and sources are checked UOps, rule results are checked
    // in `apply`, and rebuilt nodes come from the UOp constructor.
    unsafe { n.bind(self.py) }
  }

  fn hold(&mut self, node: Bound<'py, UOp>) -> PyNode {
    let n = PyNode::of(&node);
    self.keep.push(node);
    n
  }

  fn apply(&mut self, pm: &'a PatternMatcher, n: PyNode) -> PyResult<Option<PyNode>> {
    let node = self.bound(n);
    match pm.rewrite_node(&node, &self.ctx, &mut self.scratch)? {
      None => Ok(None),
      Some((r, rule)) => {
        let r = r.cast_into::<UOp>().map_err(|e| {
          let r = e.into_inner();
          PyTypeError::new_err(format!(
            "graph_rewrite: the rule at {} returned {} {}, expected a UOp or None",
            pm.rule_source(self.py, rule),
            type_name(&r),
            safe_repr(&r)
          ))
        })?;
        self.last_rule = Some((pm, rule));
        Ok(Some(self.hold(r)))
      }
    }
  }
}

impl<'a, 'py> Host for PyHost<'a, 'py> {
  type Node = PyNode;
  type Error = PyErr;

  fn n_src(&self, n: &PyNode) -> usize {
    self.bound(*n).get().children(self.py).len()
  }
  fn src(&self, n: &PyNode, i: usize) -> PyNode {
    PyNode(self.bound(*n).get().children(self.py)[i].as_ptr())
  }
  fn rebuild(&mut self, n: &PyNode, src: Vec<PyNode>) -> PyResult<PyNode> {
    let src: Vec<Bound<'py, PyAny>> = src.into_iter().map(|s| self.bound(s).to_owned().into_any()).collect();
    let node = self.bound(*n).get().with_src(self.py, &src)?;
    Ok(self.hold(node))
  }
  fn has_top_down(&self) -> bool {
    self.pm.is_some()
  }
  fn has_bottom_up(&self) -> bool {
    self.bpm.is_some()
  }
  fn top_down(&mut self, n: &PyNode) -> PyResult<Option<PyNode>> {
    match self.pm {
      Some(pm) => self.apply(pm, *n),
      None => Ok(None),
    }
  }
  fn bottom_up(&mut self, n: &PyNode) -> PyResult<BottomUp<PyNode>> {
    let Some(bpm) = self.bpm else { return Ok(BottomUp::Keep) };
    match self.apply(bpm, *n) {
      Ok(Some(r)) => Ok(BottomUp::Replace(r)),
      Ok(None) => Ok(BottomUp::Keep),
      Err(e) if e.is_instance(self.py, registry::get(self.py)?.bottom_up_gate.bind(self.py)) => Ok(BottomUp::Gate),
      Err(e) => Err(e),
    }
  }
  fn is_new(&self, n: &PyNode) -> bool {
    let age = self.bound(*n).get().serial.wrapping_sub(self.first_serial);
    age < next_serial().wrapping_sub(self.first_serial)
  }
  fn endless(&self, what: &str) -> PyErr {
    let rule = match self.last_rule {
      Some((pm, i)) => pm.rule_source(self.py, i),
      None => "(no rule matched yet)".to_string(),
    };
    PyRuntimeError::new_err(format!(
      "graph_rewrite{}: endless rewrite: {what}; last rule that fired: {rule}",
      self.name
    ))
  }
  fn state(&self, n: &PyNode) -> Option<State<PyNode>> {
    let b = self.bound(*n);
    let u = b.get();
    if u.mark.load(Relaxed) == self.epoch.0 {
      return Some(match u.slot.load(Relaxed) {
        IN_PROGRESS => State::InProgress,
        r => State::Done(PyNode(r as *mut ffi::PyObject)),
      });
    }
    if self.elsewhere.is_empty() {
      None
    } else {
      self.elsewhere.get(n).cloned()
    }
  }
  fn set_state(&mut self, n: &PyNode, s: State<PyNode>) {
    let b = self.bound(*n);
    let u = b.get();
    if self.epoch.can_claim(u.mark.load(Relaxed)) {
      let v = match s {
        State::InProgress => IN_PROGRESS,
        State::Done(r) => r.0 as usize,
      };
      u.slot.store(v, Relaxed);
      u.mark.store(self.epoch.0, Relaxed);
    } else {
      self.elsewhere.insert(*n, s);
    }
  }
}

fn as_pm<'a, 'py>(obj: Option<&'a Bound<'py, PyAny>>, what: &str) -> PyResult<Option<&'a Bound<'py, PatternMatcher>>> {
  match obj {
    None => Ok(None),
    Some(o) if o.is_none() => Ok(None),
    Some(o) => o.cast::<PatternMatcher>().map(Some).map_err(|_| {
      PyTypeError::new_err(format!(
        "graph_rewrite {what} must be a PatternMatcher, got {} {}",
        type_name(o),
        safe_repr(o)
      ))
    }),
  }
}

/// How many nodes ahead [`release`] requests the table slot of a node; the node itself is requested twice as far ahead.
const RELEASE_AHEAD: usize = 8;

/// Drops the rewrite's strong references in order. Most intermediate nodes die here and remove their interning entry,
/// one cache miss on the node and one on the table each; requesting both a few nodes ahead overlaps those misses.
fn release(keep: Vec<Bound<'_, UOp>>) {
  let homes = Homes::now();
  let mut it = keep.into_iter();
  while it.len() > 0 {
    let rest = it.as_slice();
    if let Some(far) = rest.get(2 * RELEASE_AHEAD) {
      prefetch(far.as_ptr());
    }
    if let (Some(near), Some(h)) = (rest.get(RELEASE_AHEAD), homes) {
      h.prefetch(near.get().hash);
    }
    drop(it.next());
  }
}

/// Rewrites the graph under `sink` with `pm` (see the module docs of `rewrite` for the modes) and returns the new root.
#[pyfunction]
#[pyo3(signature = (sink, pm, ctx=None, bottom_up=false, name=None, bpm=None, walk=false, enter_calls=false))]
#[allow(clippy::too_many_arguments)]
pub fn graph_rewrite<'py>(
  py: Python<'py>,
  sink: &Bound<'py, PyAny>,
  pm: Option<&Bound<'py, PyAny>>,
  ctx: Option<&Bound<'py, PyAny>>,
  bottom_up: bool,
  name: Option<String>,
  bpm: Option<&Bound<'py, PyAny>>,
  walk: bool,
  enter_calls: bool,
) -> PyResult<Bound<'py, PyAny>> {
  let _ = enter_calls;
  if !sink.is_instance_of::<UOp>() {
    return Err(PyTypeError::new_err(format!(
      "graph_rewrite expects a UOp, got {} {}",
      type_name(sink),
      safe_repr(sink)
    )));
  }
  let pm = as_pm(pm, "pm")?;
  let bpm = as_pm(bpm, "bpm")?;
  let (top, bottom) = if bottom_up { (None, pm) } else { (pm, bpm) };
  let track = stats::level() >= 2;
  if track {
    registry::get(py)?
      .track_hook
      .bind(py)
      .call1(("begin", sink, name.as_deref(), bottom_up, walk))?;
  }
  let host = PyHost {
    py,
    pm: top.map(|p| p.get()),
    bpm: bottom.map(|p| p.get()),
    ctx: ctx.cloned().unwrap_or_else(|| py.None().into_bound(py)),
    name: name.as_ref().map(|n| format!(" ({n})")).unwrap_or_default(),
    last_rule: None,
    keep: Vec::new(),
    epoch: Epoch::begin(),
    elsewhere: AddrMap::default(),
    first_serial: next_serial(),
    scratch: MatchScratch::take(),
  };
  let mut engine = Engine::new(host, Limits::default());
  let root = PyNode(sink.as_ptr());
  // SAFETY: the result handle is alive: it is the root, a node under it, or held by the host's keep list, which is
  // dropped only after this new reference is taken.
  let result = (if walk { engine.walk(root) } else { engine.unified(root) }).map(|r| unsafe { Bound::from_borrowed_ptr(py, r.0) });
  let keep = std::mem::take(&mut engine.host.keep);
  std::mem::take(&mut engine.host.scratch).give_back();
  drop(engine);
  release(keep);
  if track {
    registry::get(py)?.track_hook.bind(py).call1(("end", result.as_ref().ok()))?;
  }
  result
}
