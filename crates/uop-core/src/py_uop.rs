//! The Python API of [`UOp`]: the constructor (argument checks, dtype derivation), field getters, `replace`,
//! `toposort` (as an ordered dict) and pickling.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::cpython::prefetch::prefetch;
use crate::cpython::presized_dict::new_presized;
use crate::intern;
use crate::node::UOp;
use crate::registry::{self, safe_repr, type_name};

/// How many keys ahead `toposort` prefetches the next node while filling its result dict.
const DICT_PREFETCH_AHEAD: usize = 8;

/// Converts a constructor/replace `src` argument to a tuple of UOps, with a TypeError naming the bad item.
fn src_to_tuple<'py>(py: Python<'py>, src: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyTuple>> {
  let tuple = match src {
    None => return Ok(PyTuple::empty(py)),
    Some(s) => {
      if let Ok(t) = s.cast::<PyTuple>() {
        t.clone()
      } else if let Ok(l) = s.cast::<PyList>() {
        l.to_tuple()
      } else {
        return Err(PyTypeError::new_err(format!(
          "UOp src must be a tuple of UOps, got {} {}",
          type_name(s),
          safe_repr(s)
        )));
      }
    }
  };
  for (i, item) in tuple.iter_borrowed().enumerate() {
    if !item.is_instance_of::<UOp>() {
      return Err(PyTypeError::new_err(format!(
        "UOp src must be a tuple of UOps, got {} {} at position {i}",
        type_name(&item),
        safe_repr(&item)
      )));
    }
  }
  Ok(tuple)
}

/// Builds a node from Python-level arguments (validation, dtype derivation, interning, metadata).
pub(crate) fn construct<'py>(
  py: Python<'py>,
  op: &Bound<'py, PyAny>,
  dtype: Option<&Bound<'py, PyAny>>,
  src: Option<&Bound<'py, PyAny>>,
  arg: Option<&Bound<'py, PyAny>>,
  tag: Option<&Bound<'py, PyAny>>,
  metadata: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, UOp>> {
  let reg = registry::get(py)?;
  let opv = reg.op_value(op, "op")?;
  let src = src_to_tuple(py, src)?;
  let none = py.None().into_bound(py);
  let arg = arg.unwrap_or(&none);
  let tag = tag.unwrap_or(&none);
  let dtype = match dtype {
    Some(d) if !d.is_none() => d.clone(),
    _ => {
      let d = reg.dtype_hook.bind(py).call1((op, &src, arg))?;
      if d.is_none() {
        reg.void.bind(py).clone()
      } else {
        d
      }
    }
  };
  reg.check_dtype(&dtype, "UOp dtype")?;
  let node = UOp::intern(py, opv, &dtype, src.as_slice(), Some(&src), arg, tag)?;
  if let Some(m) = metadata.filter(|m| !m.is_none()) {
    reg.metadata_hook.bind(py).call1((&node, m))?;
  }
  Ok(node)
}

#[pymethods]
impl UOp {
  #[new]
  #[pyo3(signature = (op, dtype=None, src=None, arg=None, tag=None, metadata=None))]
  fn py_new<'py>(
    py: Python<'py>,
    op: &Bound<'py, PyAny>,
    dtype: Option<&Bound<'py, PyAny>>,
    src: Option<&Bound<'py, PyAny>>,
    arg: Option<&Bound<'py, PyAny>>,
    tag: Option<&Bound<'py, PyAny>>,
    metadata: Option<&Bound<'py, PyAny>>,
  ) -> PyResult<Py<UOp>> {
    Ok(construct(py, op, dtype, src, arg, tag, metadata)?.unbind())
  }

  /// The op, an `Ops` member.
  #[getter]
  fn op<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    Ok(registry::get(py)?.op(py, self.op).clone())
  }
  #[getter]
  fn dtype(&self, py: Python<'_>) -> Py<PyAny> {
    self.dtype.clone_ref(py)
  }
  #[getter]
  fn src(&self, py: Python<'_>) -> Py<PyTuple> {
    self.src.clone_ref(py)
  }
  #[getter]
  fn arg(&self, py: Python<'_>) -> Py<PyAny> {
    self.arg.clone_ref(py)
  }
  #[getter]
  fn tag(&self, py: Python<'_>) -> Py<PyAny> {
    self.tag.clone_ref(py)
  }

  /// A node equal to this one except for the given fields (`op`, `dtype`, `src`, `arg`, `tag`).
  #[pyo3(signature = (**kwargs))]
  fn replace<'py>(slf: &Bound<'py, Self>, kwargs: Option<&Bound<'py, PyDict>>) -> PyResult<Bound<'py, UOp>> {
    let py = slf.py();
    let me = slf.get();
    let Some(kw) = kwargs else { return Ok(slf.clone()) };
    let (mut op, mut dtype, mut src, mut arg, mut tag) = (None, None, None, None, None);
    for (k, v) in kw.iter() {
      match k.extract::<&str>()? {
        "op" => op = Some(v),
        "dtype" => dtype = Some(v),
        "src" => src = Some(v),
        "arg" => arg = Some(v),
        "tag" => tag = Some(v),
        other => return Err(PyTypeError::new_err(format!("UOp.replace() got an unexpected field '{other}'"))),
      }
    }
    let reg = registry::get(py)?;
    let opv = match &op {
      Some(o) => reg.op_value(o, "op")?,
      None => me.op,
    };
    let dtype = match dtype {
      Some(d) => {
        reg.check_dtype(&d, "UOp dtype")?;
        d
      }
      None => me.dtype.bind(py).clone(),
    };
    let src = match &src {
      Some(s) => src_to_tuple(py, Some(s))?,
      None => me.src.bind(py).clone(),
    };
    let arg = arg.unwrap_or_else(|| me.arg.bind(py).clone());
    let tag = tag.unwrap_or_else(|| me.tag.bind(py).clone());
    UOp::intern(py, opv, &dtype, src.as_slice(), Some(&src), &arg, &tag)
  }

  /// All nodes reachable from this one, children before parents, as an ordered dict `{uop: None}`.
  /// `gate(node)` returning false skips that node and everything only reachable through it.
  #[pyo3(signature = (gate=None, enter_calls=true))]
  fn toposort<'py>(slf: &Bound<'py, Self>, gate: Option<&Bound<'py, PyAny>>, enter_calls: bool) -> PyResult<Bound<'py, PyDict>> {
    let _ = enter_calls;
    let py = slf.py();
    let order = match gate {
      None => UOp::toposort_ptrs(py, slf, |_| Ok(true))?,
      Some(g) => UOp::toposort_ptrs(py, slf, |n| {
        // SAFETY: `n` is a live node reachable from `slf`.
        let node = unsafe { Borrowed::from_ptr(py, n) };
        g.call1((node,))?.is_truthy()
      })?,
    };
    let out = new_presized(py, order.len())?;
    let none = py.None();
    for (i, &n) in order.iter().enumerate() {
      // inserting a key writes its reference count: start loading the header of a node a few keys ahead
      if let Some(&ahead) = order.get(i + DICT_PREFETCH_AHEAD) {
        prefetch(ahead);
      }
      // SAFETY: `out` is a dict we own, `n` a live node reachable from `slf` (the caller keeps it alive) and `none` a
      // live object; PyDict_SetItem takes its own references to both.
      if unsafe { ffi::PyDict_SetItem(out.as_ptr(), n, none.as_ptr()) } < 0 {
        return Err(PyErr::fetch(py));
      }
    }
    Ok(out)
  }

  fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
    crate::pickle::reduce(slf)
  }
}

/// Number of live interned UOps.
#[pyfunction]
pub fn live_uops() -> usize {
  intern::len()
}
