//! `UPat`: a pattern over UOps, and its compiled form used for matching.
//!
//! A UPat is built in Python (usually at module level) and keeps its fields as Python objects for introspection and
//! pickling. When a PatternMatcher is built, each rule's UPat tree is compiled to a [`CPat`] tree in which capture
//! names are slot numbers. Matching is a backtracking search written in continuation-passing style: every complete
//! match is handed to a continuation (which runs the rule's callback), and the search goes on to the next match when
//! the continuation declines — the semantics of trying each match in turn.

use std::sync::Arc;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyFrozenSet, PyList, PySet, PyString, PyTuple};

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

/// How a compiled pattern constrains sources.
pub enum CSrc {
  /// No constraint.
  Unchecked,
  /// In order (prefix if not strict).
  Seq(Vec<CPat>),
  /// Each listed permutation of the patterns, in itertools.permutations order.
  Perms(Vec<CPat>, Vec<Vec<usize>>),
  /// Every source matches this.
  Repeat(Box<CPat>),
  /// The node matches any of these.
  Any(Vec<CPat>),
}

/// A compiled pattern: like [`UPat`], with the capture name replaced by a slot index.
pub struct CPat {
  ops: Option<OpSet>,
  dtypes: Option<Vec<usize>>,
  arg: Option<Py<PyAny>>,
  tags: Option<Vec<Py<PyAny>>>,
  slot: Option<usize>,
  strict: bool,
  required_len: usize,
  src: CSrc,
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

impl CPat {
  /// Compiles `upat`, assigning capture slots in `names` (shared across one rule so a repeated name is one slot).
  pub fn compile(py: Python<'_>, upat: &Bound<'_, UPat>, names: &mut Vec<String>) -> PyResult<CPat> {
    let u = upat.get();
    let slot = match &u.name {
      Some(n) => {
        let n = n.bind(py).to_str()?.to_string();
        Some(match names.iter().position(|x| *x == n) {
          Some(i) => i,
          None => {
            names.push(n);
            names.len() - 1
          }
        })
      }
      None => None,
    };
    let sub = |v: &Vec<Py<UPat>>, names: &mut Vec<String>| v.iter().map(|p| CPat::compile(py, p.bind(py), names)).collect::<PyResult<Vec<_>>>();
    let src = match &u.src {
      SrcSpec::Unchecked => CSrc::Unchecked,
      SrcSpec::Seq(v) if u.is_any => CSrc::Any(sub(v, names)?),
      SrcSpec::Seq(v) => CSrc::Seq(sub(v, names)?),
      SrcSpec::Perm(v) => {
        let all_same = v.windows(2).all(|w| w[0].is(&w[1]));
        let perms = if all_same { vec![(0..v.len()).collect()] } else { permutations(v.len()) };
        CSrc::Perms(sub(v, names)?, perms)
      }
      SrcSpec::Repeat(p) => CSrc::Repeat(Box::new(CPat::compile(py, p.bind(py), names)?)),
    };
    Ok(CPat {
      ops: u.ops,
      dtypes: u.match_dtype.as_ref().map(|t| t.bind(py).iter().map(|d| d.as_ptr() as usize).collect()),
      arg: if u.arg.is_none(py) { None } else { Some(u.arg.clone_ref(py)) },
      tags: u.match_tag.as_ref().map(|t| t.bind(py).iter().map(|x| x.unbind()).collect()),
      slot,
      strict: u.strict_length,
      required_len: u.required_len,
      src,
    })
  }

  /// Ops a node must have to possibly match (None: any op). For alternations, the union of the alternatives.
  pub fn root_ops(&self) -> Option<OpSet> {
    if let CSrc::Any(alts) = &self.src {
      let mut s = OpSet::default();
      for a in alts {
        let o = a.root_ops()?;
        for op in o.iter() {
          s.insert(op);
        }
      }
      return Some(s);
    }
    self.ops
  }
}

/// Captured nodes, by slot.
pub type Captures<'py> = Vec<Option<Bound<'py, PyAny>>>;
/// What a continuation returns: `Some` stops the search with that value.
pub type Found<'py> = PyResult<Option<Bound<'py, PyAny>>>;

/// Matches `pat` against `node`, calling `k` with the captures for every complete match until it returns `Some`.
pub fn match_node<'py>(
  pat: &CPat,
  node: &Bound<'py, PyAny>,
  caps: &mut Captures<'py>,
  k: &mut dyn FnMut(&mut Captures<'py>) -> Found<'py>,
) -> Found<'py> {
  if let CSrc::Any(alts) = &pat.src {
    for a in alts {
      if let Some(r) = match_node(a, node, caps, k)? {
        return Ok(Some(r));
      }
    }
    return Ok(None);
  }
  // SAFETY: only UOps are ever matched (graph nodes and their sources, which the constructor checks are UOps).
  let n = unsafe { node.cast_unchecked::<UOp>() }.get();
  if let Some(ops) = &pat.ops {
    if !ops.contains(n.op) {
      return Ok(None);
    }
  }
  let mut bound_here = None;
  if let Some(s) = pat.slot {
    match &caps[s] {
      Some(b) if b.as_ptr() != node.as_ptr() => return Ok(None),
      Some(_) => {}
      None => {
        caps[s] = Some(node.clone());
        bound_here = Some(s);
      }
    }
  }
  let r = match_rest(pat, n, node.py(), caps, k);
  if let Some(s) = bound_here {
    caps[s] = None;
  }
  r
}

fn match_rest<'py>(
  pat: &CPat,
  n: &UOp,
  py: Python<'py>,
  caps: &mut Captures<'py>,
  k: &mut dyn FnMut(&mut Captures<'py>) -> Found<'py>,
) -> Found<'py> {
  if let Some(dts) = &pat.dtypes {
    let d = n.dtype.as_ptr() as usize;
    if !dts.contains(&d) {
      return Ok(None);
    }
  }
  if let Some(a) = &pat.arg {
    if a.bind(py).ne(n.arg.bind(py))? {
      return Ok(None);
    }
  }
  if let Some(tags) = &pat.tags {
    let t = n.tag.bind(py);
    let mut ok = false;
    for x in tags {
      if x.bind(py).is(t) || x.bind(py).eq(t)? {
        ok = true;
        break;
      }
    }
    if !ok {
      return Ok(None);
    }
  }
  let kids = n.children(py);
  if kids.len() < pat.required_len || (pat.strict && kids.len() != pat.required_len) {
    return Ok(None);
  }
  match &pat.src {
    CSrc::Unchecked => k(caps),
    CSrc::Seq(pats) => match_seq(&|i| &pats[i], pats.len().min(kids.len()), kids, 0, caps, k),
    CSrc::Perms(pats, perms) => {
      for perm in perms {
        if let Some(r) = match_seq(&|i| &pats[perm[i]], pats.len().min(kids.len()), kids, 0, caps, k)? {
          return Ok(Some(r));
        }
      }
      Ok(None)
    }
    CSrc::Repeat(p) => match_seq(&|_| &**p, kids.len(), kids, 0, caps, k),
    CSrc::Any(_) => unreachable!("alternations are handled in match_node"),
  }
}

/// Matches sources `i..len` against `pat_at(i)` in order, then calls `k`.
fn match_seq<'a, 'py>(
  pat_at: &dyn Fn(usize) -> &'a CPat,
  len: usize,
  kids: &[Bound<'py, PyAny>],
  i: usize,
  caps: &mut Captures<'py>,
  k: &mut dyn FnMut(&mut Captures<'py>) -> Found<'py>,
) -> Found<'py> {
  if i == len {
    return k(caps);
  }
  match_node(pat_at(i), &kids[i], caps, &mut |caps: &mut Captures<'py>| {
    match_seq(pat_at, len, kids, i + 1, caps, k)
  })
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
