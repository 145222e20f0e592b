//! Python objects the core needs to know about, registered once by `tinygrad.uop.ops` at import time.
//!
//! The core does not define `Ops` or `DType` itself: both are plain Python objects (an IntEnum and an interned
//! dataclass) so that they pickle and print exactly as tinygrad's do. Rust keeps a table of the `Ops` members indexed
//! by value and the few classes and hooks it must call.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyType};

/// Everything registered by `_core.register`.
pub struct Registry {
  /// `Ops` members, indexed by their integer value (index 0 is unused).
  pub ops: Vec<Py<PyAny>>,
  /// The `Ops` class.
  pub ops_type: Py<PyType>,
  /// The `DType` class: a UOp's dtype must be an instance of it.
  pub dtype_type: Py<PyType>,
  /// `dtypes.void`, the default dtype.
  pub void: Py<PyAny>,
  /// The `BottomUpGate` exception class: raised by a bottom-up rule to stop descending into a node's sources.
  pub bottom_up_gate: Py<PyType>,
  /// `dtype_from_uop(op, src, arg)`: derives a dtype when the constructor is given `dtype=None`.
  pub dtype_hook: Py<PyAny>,
  /// `metadata_hook(uop, metadata)`: records metadata passed to the constructor.
  pub metadata_hook: Py<PyAny>,
  /// `unflatten_hook(nodes)`: the picklable module-level function that rebuilds a flattened graph.
  pub unflatten_hook: Py<PyAny>,
  /// `track_hook(event, *args)`: receives rewrite events when TRACK_MATCH_STATS >= 2.
  pub track_hook: Py<PyAny>,
}

static REGISTRY: PyOnceLock<Registry> = PyOnceLock::new();

/// The registry, or a clear error when `tinygrad.uop.ops` has not registered it yet.
pub fn get(py: Python<'_>) -> PyResult<&'static Registry> {
  REGISTRY
    .get(py)
    .ok_or_else(|| PyRuntimeError::new_err("tinygrad._core is not initialized: import tinygrad.uop.ops first"))
}

impl Registry {
  /// The `Ops` member for an op value.
  #[inline]
  pub fn op<'py>(&self, py: Python<'py>, op: u8) -> &Bound<'py, PyAny> {
    self.ops[op as usize].bind(py)
  }

  /// Converts a Python object to an op value, with a TypeError naming `field` when it is not an `Ops` member.
  pub fn op_value(&self, obj: &Bound<'_, PyAny>, field: &str) -> PyResult<u8> {
    if obj.get_type().is(self.ops_type.bind(obj.py())) {
      if let Ok(v) = obj.extract::<usize>() {
        if v < self.ops.len() && self.ops[v].bind(obj.py()).is(obj) {
          return Ok(v as u8);
        }
      }
    }
    Err(PyTypeError::new_err(format!(
      "UOp {field} must be an Ops member, got {} {}",
      type_name(obj),
      safe_repr(obj)
    )))
  }

  /// Checks that `obj` is a DType, with a TypeError naming `field` otherwise.
  pub fn check_dtype(&self, obj: &Bound<'_, PyAny>, field: &str) -> PyResult<()> {
    let dtype_type = self.dtype_type.bind(obj.py());
    if obj.get_type_ptr() == dtype_type.as_type_ptr() || obj.is_instance(dtype_type)? {
      Ok(())
    } else {
      Err(PyTypeError::new_err(format!(
        "{field} must be a DType, got {} {}",
        type_name(obj),
        safe_repr(obj)
      )))
    }
  }
}

/// `repr(obj)` for error messages, shortened, never failing.
pub fn safe_repr(obj: &Bound<'_, PyAny>) -> String {
  let s = obj.repr().map(|r| r.to_string()).unwrap_or_else(|_| "<unrepresentable>".to_string());
  if s.chars().count() > 200 {
    format!("{}...", s.chars().take(200).collect::<String>())
  } else {
    s
  }
}

/// The name of an object's type, for error messages.
pub fn type_name(obj: &Bound<'_, PyAny>) -> String {
  obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".to_string())
}

/// Registers the Python objects the core depends on. Called once by `tinygrad.uop.ops`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn register(
  py: Python<'_>,
  ops_type: Bound<'_, PyType>,
  dtype_type: Bound<'_, PyType>,
  void: Bound<'_, PyAny>,
  bottom_up_gate: Bound<'_, PyType>,
  dtype_hook: Bound<'_, PyAny>,
  metadata_hook: Bound<'_, PyAny>,
  unflatten_hook: Bound<'_, PyAny>,
  track_hook: Bound<'_, PyAny>,
) -> PyResult<()> {
  let members = PyList::new(py, ops_type.try_iter()?.collect::<PyResult<Vec<_>>>()?)?;
  let mut max = 0usize;
  for m in members.iter() {
    max = max.max(m.extract::<usize>()?);
  }
  if max >= 256 {
    return Err(PyTypeError::new_err(format!("Ops values must be below 256, got {max}")));
  }
  let mut ops: Vec<Py<PyAny>> = (0..=max).map(|_| py.None()).collect();
  for m in members.iter() {
    let v = m.extract::<usize>()?;
    ops[v] = m.unbind();
  }
  let reg = Registry {
    ops,
    ops_type: ops_type.unbind(),
    dtype_type: dtype_type.unbind(),
    void: void.unbind(),
    bottom_up_gate: bottom_up_gate.unbind(),
    dtype_hook: dtype_hook.unbind(),
    metadata_hook: metadata_hook.unbind(),
    unflatten_hook: unflatten_hook.unbind(),
    track_hook: track_hook.unbind(),
  };
  if REGISTRY.set(py, reg).is_err() {
    return Err(PyRuntimeError::new_err("tinygrad._core.register was called twice"));
  }
  Ok(())
}
