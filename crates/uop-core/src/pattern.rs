//! `UPat`: a pattern over UOps, and its compiled form used for matching.
//!
//! A UPat is built in Python (usually at module level) and keeps its fields as Python objects for introspection and
//! pickling. When a PatternMatcher is built, each rule's UPat tree is compiled to a [`CPat`] tree in which capture
//! names are slot numbers. Matching is a backtracking search written in continuation-passing style: every complete
//! match is handed to a continuation (which runs the rule's callback), and the search goes on to the next match when
//! the continuation declines — the semantics of trying each match in turn.

use std::cell::RefCell;
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyFrozenSet, PyList, PySet, PyString, PyTuple};

use crate::hashing::AddrMap;
use crate::node::UOp;
use crate::opset::OpSet;
use crate::registry::{self, safe_repr, type_name};
use crate::stats::RuleStats;

/// How a UPat constrains the sources of a node.
pub enum SrcSpec {
  /// `src=None`: sources unchecked.
  Unchecked,
  /// `src=(a, b, ...)`: in order (a prefix when `allow_any_len`); with `is_any`, the alternatives.
  Seq(Vec<Py<UPat>>),
  /// `src=[a, b, ...]`: in any order.
  Perm(Vec<Py<UPat>>),
  /// `src=a`: every source matches `a`.
  Repeat(Py<UPat>),
}

/// A pattern. Fields mirror tinygrad's: `op` (tuple of Ops or None), `match_dtype`, `arg`, `name`, `src`, ...
#[pyclass(frozen, module = "tinygrad.uop.ops", name = "UPat")]
pub struct UPat {
  /// Ops this pattern matches (None: any).
  #[pyo3(get)]
  pub op: Option<Py<PyTuple>>,
  /// DTypes this pattern matches (None: any).
  #[pyo3(get)]
  pub match_dtype: Option<Py<PyTuple>>,
  /// Tags this pattern matches (None: any).
  #[pyo3(get)]
  pub match_tag: Option<Py<PyTuple>>,
  /// The arg to compare with `==` (None: any).
  #[pyo3(get)]
  pub arg: Py<PyAny>,
  /// Capture name.
  #[pyo3(get)]
  pub name: Option<Py<PyString>>,
  /// The `src` argument as given (tuple, list, UPat or None).
  #[pyo3(get, name = "_in_src")]
  pub in_src: Py<PyAny>,
  /// The custom early-reject set as given.
  #[pyo3(get)]
  pub custom_early_reject: Py<PyAny>,
  /// `(filename, lineno)` of the code that built the pattern.
  #[pyo3(get)]
  pub location: Py<PyAny>,
  /// Alternation: matches if any of the src patterns matches the node itself.
  #[pyo3(get)]
  pub is_any: bool,
  /// Whether the number of sources must equal the pattern's.
  #[pyo3(get)]
  pub strict_length: bool,
  /// Whether a tuple `src` is a prefix (as given to the constructor).
  #[pyo3(get)]
  pub allow_any_len: bool,
  /// Minimum number of sources.
  #[pyo3(get)]
  pub required_len: usize,
  /// Ops as a bitset.
  pub ops: Option<OpSet>,
  /// The source constraint.
  pub src: SrcSpec,
  /// Ops that must occur among a node's direct sources for this pattern to have a chance.
  pub early_reject: OpSet,
  /// Counters for TRACK_MATCH_STATS.
  pub stats: Arc<RuleStats>,
}

thread_local! {
  /// Sources of dropped UPats waiting to be released (see `Drop for UPat`), and whether a drop is releasing them.
  static DROP_QUEUE: RefCell<(Vec<Py<PyAny>>, bool)> = const { RefCell::new((Vec::new(), false)) };
}

/// Dropping a UPat releases its sources, which may drop their own sources, and so on: for a deep pattern that nesting
/// would overflow the native stack. The first UPat dropped on a thread releases, in a loop, the sources that it and every
/// UPat freed meanwhile hand over; nested drops only queue theirs.
impl Drop for UPat {
  fn drop(&mut self) {
    let src = std::mem::replace(&mut self.src, SrcSpec::Unchecked);
    // SAFETY: a UPat is only dropped by its Python object's deallocation, which runs attached to the interpreter.
    let py = unsafe { Python::assume_attached() };
    let in_src = std::mem::replace(&mut self.in_src, py.None());
    let releasing = DROP_QUEUE.with(|q| {
      let mut q = q.borrow_mut();
      q.0.push(in_src);
      match src {
        SrcSpec::Unchecked => {}
        SrcSpec::Seq(v) | SrcSpec::Perm(v) => q.0.extend(v.into_iter().map(Py::into_any)),
        SrcSpec::Repeat(p) => q.0.push(p.into_any()),
      }
      std::mem::replace(&mut q.1, true)
    });
    if releasing {
      return;
    }
    // the borrow is released before each drop: dropping runs deallocations that queue more
    while let Some(obj) = DROP_QUEUE.with(|q| q.borrow_mut().0.pop()) {
      drop(obj);
    }
    DROP_QUEUE.with(|q| q.borrow_mut().1 = false);
  }
}

fn ops_from(py: Python<'_>, obj: &Bound<'_, PyAny>, field: &str) -> PyResult<(Py<PyTuple>, OpSet)> {
  let reg = registry::get(py)?;
  let items: Vec<Bound<PyAny>> = if obj.get_type().is(reg.ops_type.bind(py)) {
    vec![obj.clone()]
  } else if obj.is_instance_of::<PyTuple>() || obj.is_instance_of::<PyList>() || obj.is_instance_of::<PySet>() || obj.is_instance_of::<PyFrozenSet>()
  {
    obj.try_iter()?.collect::<PyResult<_>>()?
  } else {
    return Err(PyTypeError::new_err(format!(
      "UPat {field} must be an Ops member or a tuple/set of them, got {} {}",
      type_name(obj),
      safe_repr(obj)
    )));
  };
  let mut set = OpSet::default();
  for it in &items {
    set.insert(reg.op_value(it, field).map_err(|_| {
      PyTypeError::new_err(format!(
        "UPat {field} must be an Ops member or a tuple/set of them, got {} {}",
        type_name(it),
        safe_repr(it)
      ))
    })?);
  }
  Ok((PyTuple::new(py, items)?.unbind(), set))
}

fn to_tuple<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyTuple>> {
  if let Ok(t) = obj.cast::<PyTuple>() {
    return Ok(t.clone());
  }
  PyTuple::new(obj.py(), obj.try_iter()?.collect::<PyResult<Vec<_>>>()?)
}

/// Where the UPat was written: the first caller frame outside tinygrad's pattern helpers.
fn caller_location(py: Python<'_>) -> PyResult<Py<PyAny>> {
  let mut frame = py.import("sys")?.call_method1("_getframe", (0,))?;
  loop {
    let code = frame.getattr("f_code")?;
    let file: String = code.getattr("co_filename")?.extract()?;
    let file = file.replace('\\', "/");
    let helper = file.ends_with("tinygrad/uop/ops.py") || file.ends_with("tinygrad/uop/upat.py") || file.contains("tinygrad/mixin/");
    let back = frame.getattr("f_back")?;
    if !helper || back.is_none() {
      let line = frame.getattr("f_lineno")?;
      return Ok((file, line).into_pyobject(py)?.into_any().unbind());
    }
    frame = back;
  }
}

#[pymethods]
impl UPat {
  #[new]
  #[pyo3(signature = (op=None, dtype=None, src=None, arg=None, name=None, allow_any_len=false, custom_early_reject=None, location=None, is_any=false, tag=None))]
  #[allow(clippy::too_many_arguments)]
  fn py_new(
    py: Python<'_>,
    op: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    src: Option<&Bound<'_, PyAny>>,
    arg: Option<&Bound<'_, PyAny>>,
    name: Option<&Bound<'_, PyAny>>,
    allow_any_len: bool,
    custom_early_reject: Option<&Bound<'_, PyAny>>,
    location: Option<&Bound<'_, PyAny>>,
    is_any: bool,
    tag: Option<&Bound<'_, PyAny>>,
  ) -> PyResult<Self> {
    let reg = registry::get(py)?;
    let (op_t, ops) = match op {
      Some(o) if !o.is_none() => {
        let (t, s) = ops_from(py, o, "op")?;
        (Some(t), Some(s))
      }
      _ => (None, None),
    };
    let match_dtype = match dtype {
      Some(d) if !d.is_none() => {
        let t = if d.is_instance(reg.dtype_type.bind(py))? {
          PyTuple::new(py, [d])?
        } else {
          to_tuple(d).map_err(|_| bad_dtype(d))?
        };
        for x in t.iter() {
          if !x.is_instance(reg.dtype_type.bind(py))? {
            return Err(bad_dtype(&x));
          }
        }
        Some(t.unbind())
      }
      _ => None,
    };
    let match_tag = match tag {
      Some(t) if !t.is_none() => {
        let tt = if t.is_instance_of::<PyTuple>() || t.is_instance_of::<PySet>() || t.is_instance_of::<PyFrozenSet>() || t.is_instance_of::<PyList>()
        {
          to_tuple(t)?
        } else {
          PyTuple::new(py, [t])?
        };
        Some(tt.unbind())
      }
      _ => None,
    };
    let name = match name {
      Some(n) if !n.is_none() => {
        let s = n
          .cast::<PyString>()
          .map_err(|_| PyTypeError::new_err(format!("UPat name must be a str, got {} {}", type_name(n), safe_repr(n))))?;
        if s.to_str()? == "ctx" {
          return Err(PyValueError::new_err(
            "UPat can't be named ctx: that name is reserved for the rewrite context",
          ));
        }
        Some(s.clone().unbind())
      }
      _ => None,
    };
    let check_upat = |x: &Bound<'_, PyAny>| -> PyResult<Py<UPat>> {
      x.cast::<UPat>()
        .map(|u| u.clone().unbind())
        .map_err(|_| PyTypeError::new_err(format!("UPat src must contain UPats, got {} {}", type_name(x), safe_repr(x))))
    };
    let (spec, in_src) = match src {
      None => (SrcSpec::Unchecked, py.None()),
      Some(s) if s.is_none() => (SrcSpec::Unchecked, py.None()),
      Some(s) => {
        let spec = if let Ok(t) = s.cast::<PyTuple>() {
          SrcSpec::Seq(t.iter().map(|x| check_upat(&x)).collect::<PyResult<_>>()?)
        } else if let Ok(l) = s.cast::<PyList>() {
          SrcSpec::Perm(l.iter().map(|x| check_upat(&x)).collect::<PyResult<_>>()?)
        } else if s.is_instance_of::<UPat>() {
          SrcSpec::Repeat(check_upat(s)?)
        } else {
          return Err(PyTypeError::new_err(format!(
            "UPat src must be a tuple, list or UPat, got {} {}",
            type_name(s),
            safe_repr(s)
          )));
        };
        (spec, s.clone().unbind())
      }
    };
    let (strict_length, required_len) = match &spec {
      SrcSpec::Unchecked | SrcSpec::Repeat(_) => (false, 0),
      SrcSpec::Seq(v) | SrcSpec::Perm(v) => (!allow_any_len, v.len()),
    };
    let (custom, early_reject) = match custom_early_reject {
      Some(c) if !c.is_none() => (c.clone().unbind(), ops_from(py, c, "custom_early_reject")?.1),
      _ => {
        // ops that the direct source patterns pin down to a single op must appear among the node's sources
        let direct: Vec<&Py<UPat>> = match &spec {
          SrcSpec::Seq(v) if !is_any => v.iter().collect(),
          SrcSpec::Perm(v) => v.iter().collect(),
          SrcSpec::Repeat(p) => vec![p],
          _ => vec![],
        };
        let mut er = OpSet::default();
        for p in direct {
          let p = p.get();
          if let (Some(ops), Some(t)) = (&p.ops, &p.op) {
            if t.bind(py).len() == 1 && !p.is_any {
              er.insert(ops.iter().next().unwrap_or(0));
            }
          }
        }
        (py.None(), er)
      }
    };
    let location = match location {
      Some(l) if !l.is_none() => l.clone().unbind(),
      _ => caller_location(py)?,
    };
    Ok(UPat {
      op: op_t,
      match_dtype,
      match_tag,
      arg: arg.map(|a| a.clone().unbind()).unwrap_or_else(|| py.None()),
      name,
      in_src,
      custom_early_reject: custom,
      location,
      is_any,
      strict_length,
      allow_any_len,
      required_len,
      ops,
      src: spec,
      early_reject,
      stats: Arc::new(RuleStats::default()),
    })
  }

  fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
    let py = slf.py();
    let me = slf.get();
    let args = (
      me.op.as_ref().map(|x| x.clone_ref(py)),
      me.match_dtype.as_ref().map(|x| x.clone_ref(py)),
      me.in_src.clone_ref(py),
      me.arg.clone_ref(py),
      me.name.as_ref().map(|x| x.clone_ref(py)),
      me.allow_any_len,
      me.custom_early_reject.clone_ref(py),
      me.location.clone_ref(py),
      me.is_any,
      me.match_tag.as_ref().map(|x| x.clone_ref(py)),
    );
    PyTuple::new(py, [slf.get_type().into_any(), args.into_pyobject(py)?.into_any()])
  }

  fn __repr__(&self, py: Python<'_>) -> String {
    let ops = self.op.as_ref().map(|t| safe_repr(t.bind(py))).unwrap_or_else(|| "None".into());
    let name = self.name.as_ref().map(|n| n.bind(py).to_string()).unwrap_or_else(|| "None".into());
    format!(
      "UPat(op={ops}, name={name}, arg={}, location={})",
      safe_repr(self.arg.bind(py)),
      safe_repr(self.location.bind(py))
    )
  }
}

fn bad_dtype(d: &Bound<'_, PyAny>) -> PyErr {
  PyTypeError::new_err(format!(
    "UPat dtype must be a DType or a tuple/set of DTypes, got {} {}",
    type_name(d),
    safe_repr(d)
  ))
}

// ***** compiled patterns *****

/// Index of a node in a [`CPat`] program.
type PatId = u32;

/// How a compiled pattern node constrains sources (children are indices into the program).
enum CSrc {
  /// No constraint.
  Unchecked,
  /// In order (prefix if not strict).
  Seq(Vec<PatId>),
  /// Each listed permutation of the patterns, in itertools.permutations order.
  Perms(Vec<PatId>, Vec<Vec<usize>>),
  /// Every source matches this.
  Repeat(PatId),
  /// The node matches any of these.
  Any(Vec<PatId>),
}

/// One node of a compiled pattern: like [`UPat`], with the capture name replaced by a slot index.
struct CNode {
  ops: Option<OpSet>,
  dtypes: Option<Vec<usize>>,
  arg: Option<Py<PyAny>>,
  tags: Option<Vec<Py<PyAny>>>,
  slot: Option<usize>,
  strict: bool,
  required_len: usize,
  src: CSrc,
}

/// A compiled pattern: a flat program of nodes referring to each other by index, the root first. Flat so that neither
/// compiling, matching nor dropping a pattern recurses (patterns may be nested arbitrarily deep), and a UPat used in
/// several places of one rule is compiled once.
pub struct CPat {
  nodes: Vec<CNode>,
}

fn permutations(n: usize) -> Vec<Vec<usize>> {
  // lexicographic order, as itertools.permutations yields them
  let mut out = vec![];
  let mut cur: Vec<usize> = (0..n).collect();
  loop {
    out.push(cur.clone());
    let Some(i) = (1..n).rev().find(|&i| cur[i - 1] < cur[i]) else { break };
    let j = (i..n).rev().find(|&j| cur[j] > cur[i - 1]).unwrap_or(i);
    cur.swap(i - 1, j);
    cur[i..].reverse();
  }
  out
}

/// Most sources a `src=[...]` (any order) pattern may list: its permutations are enumerated, so this bounds their
/// number (8! = 40320).
const MAX_PERM_LEN: usize = 8;

impl CPat {
  /// Compiles `upat`, assigning capture slots in `names` (shared across one rule so a repeated name is one slot).
  /// Slots are numbered in the pre-order in which names are first met, as a recursive compiler would number them.
  pub fn compile(py: Python<'_>, upat: &Bound<'_, UPat>, names: &mut Vec<String>) -> PyResult<CPat> {
    // pre-order walk: number every distinct UPat and its name; sources are resolved once all are numbered
    let mut ids: AddrMap<usize, PatId> = AddrMap::default();
    let mut order: Vec<Bound<'_, UPat>> = vec![];
    let mut nodes: Vec<CNode> = vec![];
    let mut stack: Vec<Bound<'_, UPat>> = vec![upat.clone()];
    while let Some(b) = stack.pop() {
      let key = b.as_ptr() as usize;
      if ids.contains_key(&key) {
        continue;
      }
      ids.insert(key, order.len() as PatId);
      let u = b.get();
      let slot = match &u.name {
        Some(n) => {
          let n = n.bind(py).to_str()?;
          Some(match names.iter().position(|x| x == n) {
            Some(i) => i,
            None => {
              names.push(n.to_string());
              names.len() - 1
            }
          })
        }
        None => None,
      };
      let kids: &[Py<UPat>] = match &u.src {
        SrcSpec::Unchecked => &[],
        SrcSpec::Seq(v) | SrcSpec::Perm(v) => v,
        SrcSpec::Repeat(p) => std::slice::from_ref(p),
      };
      if let SrcSpec::Perm(v) = &u.src {
        if v.len() > MAX_PERM_LEN && !v.windows(2).all(|w| w[0].is(&w[1])) {
          return Err(PyValueError::new_err(format!(
            "UPat src=[...] (any order) lists {} patterns; at most {MAX_PERM_LEN} are allowed (their permutations are tried)",
            v.len()
          )));
        }
      }
      stack.extend(kids.iter().rev().map(|k| k.bind(py).clone()));
      nodes.push(CNode {
        ops: u.ops,
        dtypes: u.match_dtype.as_ref().map(|t| t.bind(py).iter().map(|d| d.as_ptr() as usize).collect()),
        arg: if u.arg.is_none(py) { None } else { Some(u.arg.clone_ref(py)) },
        tags: u.match_tag.as_ref().map(|t| t.bind(py).iter().map(|x| x.unbind()).collect()),
        slot,
        strict: u.strict_length,
        required_len: u.required_len,
        src: CSrc::Unchecked,
      });
      order.push(b);
    }
    for (node, b) in nodes.iter_mut().zip(&order) {
      let u = b.get();
      let id = |p: &Py<UPat>| ids[&(p.as_ptr() as usize)];
      node.src = match &u.src {
        SrcSpec::Unchecked => CSrc::Unchecked,
        SrcSpec::Seq(v) if u.is_any => CSrc::Any(v.iter().map(id).collect()),
        SrcSpec::Seq(v) => CSrc::Seq(v.iter().map(id).collect()),
        SrcSpec::Perm(v) => {
          let all_same = v.windows(2).all(|w| w[0].is(&w[1]));
          let perms = if all_same { vec![(0..v.len()).collect()] } else { permutations(v.len()) };
          CSrc::Perms(v.iter().map(id).collect(), perms)
        }
        SrcSpec::Repeat(p) => CSrc::Repeat(id(p)),
      };
    }
    Ok(CPat { nodes })
  }

  /// Ops a node must have to possibly match (None: any op). For alternations, the union of the alternatives.
  pub fn root_ops(&self) -> Option<OpSet> {
    let mut s = OpSet::default();
    let mut seen = vec![false; self.nodes.len()];
    let mut stack: Vec<PatId> = vec![0];
    while let Some(i) = stack.pop() {
      if std::mem::replace(&mut seen[i as usize], true) {
        continue;
      }
      let n = &self.nodes[i as usize];
      match &n.src {
        CSrc::Any(alts) => stack.extend(alts.iter().copied()),
        _ => s.insert_all(&n.ops?),
      }
    }
    Some(s)
  }
}

/// Captured nodes, by slot.
pub type Captures<'py> = Vec<Option<Bound<'py, PyAny>>>;
/// What a continuation returns: `Some` stops the search with that value.
pub type Found<'py> = PyResult<Option<Bound<'py, PyAny>>>;

/// "No next goal".
const NIL: u32 = u32::MAX;

/// A pending (pattern node, graph node) pair; goals form linked lists in [`Machine::goals`].
#[derive(Clone, Copy)]
struct Goal {
  pat: PatId,
  node: *mut ffi::PyObject,
  next: u32,
}

/// A point the search returns to when a branch fails: the goals and captures as they were, and the next alternative.
struct Choice {
  /// The Any or Perms pattern node with alternatives left, and the graph node it is matched against.
  pat: PatId,
  node: *mut ffi::PyObject,
  /// The next alternative (alternation member or permutation) to try.
  next: usize,
  head: u32,
  goals_len: usize,
  trail_len: usize,
}

/// The matcher's working memory, reused across matches (see [`MACHINES`]).
#[derive(Default)]
struct Machine {
  /// Goal cells: a goal list is a chain of cells; a choice keeps its list by remembering its head, and cells made after
  /// a choice are discarded when the search returns to it.
  goals: Vec<Goal>,
  choices: Vec<Choice>,
  /// Capture slots bound so far, in order, to unbind on backtracking.
  trail: Vec<usize>,
}

impl Machine {
  #[inline]
  fn push(&mut self, pat: PatId, node: *mut ffi::PyObject, next: u32) -> u32 {
    self.goals.push(Goal { pat, node, next });
    (self.goals.len() - 1) as u32
  }

  /// Records a point to come back to with alternative 1 of `pat` (alternative 0 is tried now), from the goal list `head`.
  #[inline]
  fn choice_point(&mut self, pat: PatId, node: *mut ffi::PyObject, head: u32) {
    let (goals_len, trail_len) = (self.goals.len(), self.trail.len());
    self.choices.push(Choice {
      pat,
      node,
      next: 1,
      head,
      goals_len,
      trail_len,
    });
  }

  /// Pushes goals matching `kids[i]` against `pat_at(i)` for `i < len`, the first on top; returns the new head.
  #[inline]
  fn push_seq(&mut self, mut head: u32, len: usize, kids: &[Bound<'_, PyAny>], pat_at: impl Fn(usize) -> PatId) -> u32 {
    for i in (0..len).rev() {
      head = self.push(pat_at(i), kids[i].as_ptr(), head);
    }
    head
  }

  #[inline]
  fn unbind_to(&mut self, len: usize, caps: &mut Captures<'_>) {
    while self.trail.len() > len {
      if let Some(s) = self.trail.pop() {
        caps[s] = None;
      }
    }
  }
}

thread_local! {
  /// Idle machines: matches nest (a callback may rewrite), each takes one and gives it back.
  static MACHINES: RefCell<Vec<Machine>> = const { RefCell::new(Vec::new()) };
}

/// A matcher's working memory taken from a per-thread pool, given back (emptied) when dropped. A caller matching
/// several patterns in a row takes it once (see [`match_node`]).
pub struct Lease(Machine);

impl Lease {
  fn take() -> Lease {
    Lease(MACHINES.with(|m| m.borrow_mut().pop()).unwrap_or_default())
  }
}

impl Drop for Lease {
  fn drop(&mut self) {
    let mut m = std::mem::take(&mut self.0);
    m.goals.clear();
    m.choices.clear();
    m.trail.clear();
    MACHINES.with(|p| p.borrow_mut().push(m));
  }
}

/// Matches `pat` against `node`, calling `k` with the captures for every complete match until it returns `Some`.
///
/// Matches are tried in the order a recursive matcher would find them: depth first, sources left to right, alternatives
/// and permutations in order. The search runs on explicit goal and choice stacks, so pattern depth is not limited by
/// the native stack. `caps` is left as it was on entry.
/// `lease` is the working memory, taken on first need and kept for the caller's next match.
pub fn match_node<'py>(
  pat: &CPat,
  node: &Bound<'py, PyAny>,
  caps: &mut Captures<'py>,
  k: &mut dyn FnMut(&mut Captures<'py>) -> Found<'py>,
  lease: &mut Option<Lease>,
) -> Found<'py> {
  let py = node.py();
  // most attempts fail on the root's op or dtype: decide those before taking a machine
  let root = &pat.nodes[0];
  if !matches!(root.src, CSrc::Any(_)) {
    // SAFETY: only UOps are ever matched (graph nodes and their sources, which the constructor checks are UOps).
    let n = unsafe { node.cast_unchecked::<UOp>() }.get();
    if root.ops.is_some_and(|ops| !ops.contains(n.op)) || root.dtypes.as_ref().is_some_and(|d| !d.contains(&(n.dtype.as_ptr() as usize))) {
      return Ok(None);
    }
  }
  let m = &mut lease.get_or_insert_with(Lease::take).0;
  let mut head = m.push(0, node.as_ptr(), NIL);
  let result = 'search: loop {
    // run the goal list until it is empty (a match) or a goal fails
    let matched = loop {
      if head == NIL {
        break true;
      }
      let g = m.goals[head as usize];
      head = g.next;
      let p = &pat.nodes[g.pat as usize];
      if let CSrc::Any(alts) = &p.src {
        // an alternation matches the node itself; its own fields are not checked (as the recursive matcher did)
        let Some(&first) = alts.first() else { break false };
        if alts.len() > 1 {
          m.choice_point(g.pat, g.node, head);
        }
        head = m.push(first, g.node, head);
        continue;
      }
      // SAFETY: goal nodes are `node` and sources of goal nodes, all kept alive by `node` (which the caller holds) for
      // the whole search; only UOps are ever matched (sources are checked to be UOps by the constructor).
      let b = unsafe { Borrowed::from_ptr(py, g.node).cast_unchecked::<UOp>() };
      let n = b.get();
      if let Some(ops) = &p.ops {
        if !ops.contains(n.op) {
          break false;
        }
      }
      if let Some(s) = p.slot {
        match &caps[s] {
          Some(c) if c.as_ptr() != g.node => break false,
          Some(_) => {}
          None => {
            caps[s] = Some(b.to_owned().into_any());
            m.trail.push(s);
          }
        }
      }
      if let Some(dts) = &p.dtypes {
        if !dts.contains(&(n.dtype.as_ptr() as usize)) {
          break false;
        }
      }
      if let Some(a) = &p.arg {
        // SAFETY: both pointers are live objects (the pattern holds its arg, the node its own); the checks read their types.
        let same = a.as_ptr() == n.arg.as_ptr() && unsafe { ffi::PyLong_CheckExact(a.as_ptr()) != 0 || ffi::PyUnicode_CheckExact(a.as_ptr()) != 0 };
        // an int or str is equal to itself (a float may not be: NaN), so the common `arg=0` needs no Python comparison
        if !same {
          match a.bind(py).ne(n.arg.bind(py)) {
            Ok(true) => break false,
            Ok(false) => {}
            Err(e) => break 'search Err(e),
          }
        }
      }
      if let Some(tags) = &p.tags {
        let t = n.tag.bind(py);
        let mut ok = false;
        for x in tags {
          let x = x.bind(py);
          if x.is(t) {
            ok = true;
            break;
          }
          match x.eq(t) {
            Ok(true) => {
              ok = true;
              break;
            }
            Ok(false) => {}
            Err(e) => break 'search Err(e),
          }
        }
        if !ok {
          break false;
        }
      }
      let kids = n.children(py);
      if kids.len() < p.required_len || (p.strict && kids.len() != p.required_len) {
        break false;
      }
      match &p.src {
        CSrc::Unchecked => {}
        CSrc::Seq(pats) => head = m.push_seq(head, pats.len().min(kids.len()), kids, |i| pats[i]),
        CSrc::Perms(pats, perms) => {
          if perms.len() > 1 {
            m.choice_point(g.pat, g.node, head);
          }
          let perm = &perms[0];
          head = m.push_seq(head, pats.len().min(kids.len()), kids, |i| pats[perm[i]]);
        }
        CSrc::Repeat(r) => head = m.push_seq(head, kids.len(), kids, |_| *r),
        CSrc::Any(_) => unreachable!("alternations are handled above"),
      }
    };
    if matched {
      match k(caps) {
        Ok(Some(r)) => break 'search Ok(Some(r)),
        Ok(None) => {}
        Err(e) => break 'search Err(e),
      }
    }
    // go back to the latest choice with an alternative left
    let Some(c) = m.choices.last_mut() else { break 'search Ok(None) };
    let (cpat, cnode, i) = (c.pat, c.node, c.next);
    c.next += 1;
    head = c.head;
    let (goals_len, trail_len) = (c.goals_len, c.trail_len);
    let p = &pat.nodes[cpat as usize];
    let last = match &p.src {
      CSrc::Any(alts) => alts.len() == i + 1,
      CSrc::Perms(_, perms) => perms.len() == i + 1,
      _ => unreachable!("only alternations and permutations leave choices"),
    };
    if last {
      m.choices.pop();
    }
    m.goals.truncate(goals_len);
    m.unbind_to(trail_len, caps);
    match &p.src {
      CSrc::Any(alts) => head = m.push(alts[i], cnode, head),
      CSrc::Perms(pats, perms) => {
        // SAFETY: as above, `cnode` is a live UOp reachable from `node`.
        let b = unsafe { Borrowed::from_ptr(py, cnode).cast_unchecked::<UOp>() };
        let kids = b.get().children(py);
        let perm = &perms[i];
        head = m.push_seq(head, pats.len().min(kids.len()), kids, |j| pats[perm[j]]);
      }
      _ => unreachable!("only alternations and permutations leave choices"),
    }
  };
  m.unbind_to(0, caps);
  m.goals.clear();
  m.choices.clear();
  result
}

#[cfg(test)]
mod tests {
  use super::permutations;

  #[test]
  fn permutations_follow_itertools_order() {
    assert_eq!(
      permutations(3),
      vec![vec![0, 1, 2], vec![0, 2, 1], vec![1, 0, 2], vec![1, 2, 0], vec![2, 0, 1], vec![2, 1, 0]]
    );
    assert_eq!(permutations(1), vec![vec![0]]);
  }
}
