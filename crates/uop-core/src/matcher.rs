//! `PatternMatcher`: an ordered list of (UPat, callback) rules, bucketed by the op of the node they can match.
//!
//! `rewrite(uop, ctx)` tries the rules of the node's op in order; each match is passed to the rule's callback (see
//! `callback`), and the first result that is neither None nor the node itself wins.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Instant;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::callback::Callback;
use crate::node::{PyNode, UOp};
use crate::opset::OpSet;
use crate::pattern::{match_node, Machine, MatchHost};
use crate::registry::{self, safe_repr, type_name};
use crate::stats::{self, RuleStats};
use crate::upat::{compile, UOpGraph, UPat, UPattern};

/// One compiled rule.
pub struct Rule {
  pat: UPattern,
  upat: Py<UPat>,
  callback: Callback,
  slots: usize,
  early_reject: OpSet,
  stats: Arc<RuleStats>,
  /// `file:line` of the pattern, for error messages.
  pub location: String,
}

/// Working memory for [`PatternMatcher::rewrite_node`]: the capture slots and the match machine. A caller rewriting
/// many nodes (graph_rewrite) keeps one for the whole call, so that no node pays for allocating or fetching them.
#[derive(Default)]
pub struct MatchScratch {
  caps: Vec<Option<PyNode>>,
  machine: Machine<PyNode>,
}

thread_local! {
  /// Idle scratch spaces: rewrites nest (a callback may rewrite), each takes one and gives it back.
  static SCRATCH: RefCell<Vec<MatchScratch>> = const { RefCell::new(Vec::new()) };
}

impl MatchScratch {
  /// A scratch space from this thread's pool (a new one when the pool is empty).
  pub fn take() -> MatchScratch {
    SCRATCH.with(|p| p.borrow_mut().pop()).unwrap_or_default()
  }

  /// Returns a scratch space to this thread's pool.
  pub fn give_back(mut self) {
    self.caps.clear();
    SCRATCH.with(|p| p.borrow_mut().push(self));
  }
}

/// The pattern matcher.
#[pyclass(frozen, module = "tinygrad.uop.ops", name = "PatternMatcher")]
pub struct PatternMatcher {
  /// The rules as given: a list of `(UPat, fn)`.
  #[pyo3(get)]
  patterns: Py<PyList>,
  rules: Vec<Rule>,
  /// Rule indices by op value.
  buckets: Vec<Vec<u32>>,
}

fn location_str(py: Python<'_>, upat: &UPat) -> String {
  let loc = upat.location.bind(py);
  match loc.extract::<(String, i64)>() {
    Ok((f, l)) => format!("{}:{l}", f.rsplit('/').next().unwrap_or(&f)),
    Err(_) => safe_repr(loc),
  }
}

impl PatternMatcher {
  fn build(py: Python<'_>, patterns: &Bound<'_, PyAny>) -> PyResult<PatternMatcher> {
    let list = PyList::empty(py);
    let mut rules = vec![];
    let mut buckets: Vec<Vec<u32>> = vec![vec![]; 256];
    let n_ops = registry::get(py)?.ops.len();
    for (i, item) in patterns.try_iter()?.enumerate() {
      let item = item?;
      let (upat, fxn): (Bound<PyAny>, Bound<PyAny>) = item.extract().map_err(|_| {
        PyTypeError::new_err(format!(
          "PatternMatcher rule {i} must be a (UPat, callable) pair, got {}",
          safe_repr(&item)
        ))
      })?;
      let upat = upat.cast_into::<UPat>().map_err(|e| {
        PyTypeError::new_err(format!(
          "PatternMatcher rule {i} must start with a UPat, got {}",
          safe_repr(&e.into_inner())
        ))
      })?;
      if !fxn.is_callable() {
        return Err(PyTypeError::new_err(format!(
          "PatternMatcher rule {i}: {} {} is not callable",
          type_name(&fxn),
          safe_repr(&fxn)
        )));
      }
      let mut names = vec![];
      let pat = compile(py, &upat, &mut names)?;
      let callback = Callback::plan(py, &fxn, &names)?;
      let u = upat.get();
      let idx = rules.len() as u32;
      match pat.root_ops() {
        Some(ops) => ops.iter().for_each(|op| buckets[op as usize].push(idx)),
        None => (0..n_ops).for_each(|op| buckets[op].push(idx)),
      }
      if stats::level() > 0 {
        stats::register(upat.as_any(), &u.stats);
      }
      rules.push(Rule {
        pat,
        callback,
        slots: names.len(),
        early_reject: u.early_reject,
        stats: u.stats.clone(),
        location: location_str(py, u),
        upat: upat.clone().unbind(),
      });
      list.append((upat, fxn))?;
    }
    Ok(PatternMatcher {
      patterns: list.unbind(),
      rules,
      buckets,
    })
  }

  /// Tries the rules for `node`'s op; returns the replacement and the index of the rule that produced it.
  /// `scratch` is working memory only: its contents on entry do not matter.
  pub fn rewrite_node<'py>(
    &self,
    node: &Bound<'py, UOp>,
    ctx: &Bound<'py, PyAny>,
    scratch: &mut MatchScratch,
  ) -> PyResult<Option<(Bound<'py, PyAny>, usize)>> {
    let py = node.py();
    let n = node.get();
    let bucket = &self.buckets[n.op as usize];
    if bucket.is_empty() {
      return Ok(None);
    }
    let graph = UOpGraph(py);
    let mut src_ops = OpSet::default();
    for c in n.children(py) {
      src_ops.insert(graph.op(PyNode(c.as_ptr())));
    }
    let level = stats::level();
    let node_any = node.as_any();
    let MatchScratch { caps, machine } = scratch;
    for &ri in bucket {
      let rule = &self.rules[ri as usize];
      let start = if level > 0 { Some(Instant::now()) } else { None };
      if !rule.early_reject.is_subset(&src_ops) {
        if let Some(t) = start {
          rule.stats.record(false, false, t.elapsed().as_nanos() as u64);
        }
        continue;
      }
      caps.clear();
      caps.resize(rule.slots, None);
      let found = match_node(&graph, &rule.pat, PyNode::of(node), caps, machine, |caps| {
        // SAFETY: captures are `node` and nodes under it, which the caller holds for the whole call.
        let r = unsafe { rule.callback.call(caps, ctx, &rule.location) }?;
        Ok(if r.is_none() { None } else { Some(r) })
      });
      let found = match found {
        Ok(f) => f,
        Err(e) => {
          let _ = e.value(py).call_method1(
            "add_note",
            (format!("in the callback of the rule at {}", self.rule_source(py, ri as usize)),),
          );
          return Err(e);
        }
      };
      let matched = matches!(&found, Some(r) if !r.is(node_any));
      if let Some(t) = start {
        let ns = t.elapsed().as_nanos() as u64;
        rule.stats.record(true, matched, ns);
        if matched && level >= 2 {
          if let Some(r) = &found {
            registry::get(py)?
              .track_hook
              .bind(py)
              .call1(("match", node, r, rule.upat.bind(py), ns as f64 * 1e-9))?;
          }
        }
      }
      if matched {
        return Ok(found.map(|r| (r, ri as usize)));
      }
    }
    Ok(None)
  }

  /// `file:line` of rule `i` as a full path, for messages.
  pub fn rule_source(&self, py: Python<'_>, i: usize) -> String {
    let loc = self.rules[i].upat.get().location.bind(py);
    match loc.extract::<(String, i64)>() {
      Ok((f, l)) => format!("{f}:{l}"),
      Err(_) => safe_repr(loc),
    }
  }
}

#[pymethods]
impl PatternMatcher {
  #[new]
  #[pyo3(signature = (patterns, compiled=true))]
  fn py_new(py: Python<'_>, patterns: &Bound<'_, PyAny>, compiled: bool) -> PyResult<Self> {
    let _ = compiled;
    PatternMatcher::build(py, patterns)
  }

  /// The replacement for `uop` from the first rule that produces one, or None.
  #[pyo3(signature = (uop, ctx=None))]
  fn rewrite<'py>(&self, uop: &Bound<'py, PyAny>, ctx: Option<&Bound<'py, PyAny>>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = uop.py();
    let node = uop
      .cast::<UOp>()
      .map_err(|_| PyTypeError::new_err(format!("PatternMatcher.rewrite expects a UOp, got {} {}", type_name(uop), safe_repr(uop))))?;
    let none = py.None().into_bound(py);
    let mut scratch = MatchScratch::take();
    let found = self.rewrite_node(node, ctx.unwrap_or(&none), &mut scratch);
    scratch.give_back();
    Ok(found?.map(|(r, _)| r))
  }

  fn __add__(&self, py: Python<'_>, other: &Bound<'_, PatternMatcher>) -> PyResult<Self> {
    let all = self.patterns.bind(py).add(other.get().patterns.bind(py))?;
    PatternMatcher::build(py, &all)
  }

  fn __len__(&self) -> usize {
    self.rules.len()
  }
}
