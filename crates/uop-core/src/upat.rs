//! `UPat`: a pattern over UOps as Python builds it (usually at module level), and its compiled form.
//!
//! A UPat keeps its fields as Python objects for introspection and pickling. When a PatternMatcher is built, each
//! rule's UPat tree is compiled to a [`Pattern`] (capture names become slot numbers) and matched by the generic
//! matcher of [`crate::pattern`] through [`UOpGraph`], which says how a UPat's fields compare with a UOp's.

use std::cell::RefCell;
use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyFrozenSet, PyList, PySet, PyString, PyTuple};

use crate::hashing::AddrMap;
use crate::node::{PyNode, UOp};
use crate::opset::OpSet;
use crate::pattern::{MatchHost, PatId, PatNode, PatSrc, Pattern};
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

/// A compiled UPat: args and tags stay Python objects, compared as [`UOpGraph`] says.
pub type UPattern = Pattern<Py<PyAny>, Py<PyAny>>;

/// Compiles `upat`, assigning capture slots in `names` (shared across one rule so a repeated name is one slot).
/// Slots are numbered in the pre-order in which names are first met, as a recursive compiler would number them; a UPat
/// used in several places of the tree is compiled once.
pub fn compile(py: Python<'_>, upat: &Bound<'_, UPat>, names: &mut Vec<String>) -> PyResult<UPattern> {
  // pre-order walk: number every distinct UPat and its name; sources are resolved once all are numbered
  let mut ids: AddrMap<usize, PatId> = AddrMap::default();
  let mut order: Vec<Bound<'_, UPat>> = vec![];
  let mut nodes: Vec<PatNode<Py<PyAny>, Py<PyAny>>> = vec![];
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
    stack.extend(kids.iter().rev().map(|k| k.bind(py).clone()));
    nodes.push(PatNode {
      ops: u.ops,
      dtypes: u.match_dtype.as_ref().map(|t| t.bind(py).iter().map(|d| d.as_ptr() as usize).collect()),
      arg: if u.arg.is_none(py) { None } else { Some(u.arg.clone_ref(py)) },
      tags: u.match_tag.as_ref().map(|t| t.bind(py).iter().map(|x| x.unbind()).collect()),
      slot,
      strict: u.strict_length,
      required_len: u.required_len,
      src: PatSrc::Unchecked,
    });
    order.push(b);
  }
  for (node, b) in nodes.iter_mut().zip(&order) {
    let u = b.get();
    let id = |p: &Py<UPat>| ids[&(p.as_ptr() as usize)];
    node.src = match &u.src {
      SrcSpec::Unchecked => PatSrc::Unchecked,
      SrcSpec::Seq(v) if u.is_any => PatSrc::Any(v.iter().map(id).collect()),
      SrcSpec::Seq(v) => PatSrc::Seq(v.iter().map(id).collect()),
      SrcSpec::Perm(v) => PatSrc::any_order(v.iter().map(id).collect()).map_err(PyValueError::new_err)?,
      SrcSpec::Repeat(p) => PatSrc::Repeat(id(p)),
    };
  }
  Pattern::new(nodes, 0).map_err(PyValueError::new_err)
}

/// The UOps under a node a caller holds, as the generic matcher sees them: captures are [`PyNode`] handles, valid while
/// that node is held (UOps are immutable, so everything under a live node stays alive).
pub struct UOpGraph<'py>(pub Python<'py>);

impl<'py> UOpGraph<'py> {
  #[inline]
  fn node<'a>(&self, n: PyNode) -> Borrowed<'a, 'py, UOp> {
    // SAFETY: the matcher only reaches the node it was given and nodes under it (sources of UOps, which the
    // constructor checks are UOps), and the caller of `match_node` holds that node for the whole match.
    unsafe { n.bind(self.0) }
  }
}

impl MatchHost for UOpGraph<'_> {
  type Node = PyNode;
  type Arg = Py<PyAny>;
  type Tag = Py<PyAny>;
  type Error = PyErr;

  #[inline]
  fn op(&self, n: PyNode) -> u8 {
    self.node(n).get().op
  }
  #[inline]
  fn dtype(&self, n: PyNode) -> usize {
    self.node(n).get().dtype.as_ptr() as usize
  }
  #[inline]
  fn n_src(&self, n: PyNode) -> usize {
    self.node(n).get().children(self.0).len()
  }
  #[inline]
  fn src(&self, n: PyNode, i: usize) -> PyNode {
    PyNode(self.node(n).get().children(self.0)[i].as_ptr())
  }
  /// `arg == node.arg`, without calling Python for the very same int or str (a float may differ from itself: NaN).
  fn arg_is(&self, n: PyNode, arg: &Py<PyAny>) -> PyResult<bool> {
    let b = self.node(n);
    let node_arg = &b.get().arg;
    if arg.as_ptr() == node_arg.as_ptr() {
      let a = arg.bind(self.0);
      if a.is_exact_instance_of::<pyo3::types::PyInt>() || a.is_exact_instance_of::<PyString>() {
        return Ok(true);
      }
    }
    Ok(!arg.bind(self.0).ne(node_arg.bind(self.0))?)
  }
  /// Whether the node's tag is one of `tags` (identity or `==`).
  fn tag_in(&self, n: PyNode, tags: &[Py<PyAny>]) -> PyResult<bool> {
    let b = self.node(n);
    let t = b.get().tag.bind(self.0);
    for x in tags {
      let x = x.bind(self.0);
      if x.is(t) || x.eq(t)? {
        return Ok(true);
      }
    }
    Ok(false)
  }
}
