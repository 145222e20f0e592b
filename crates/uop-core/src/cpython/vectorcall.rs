//! `UOp(...)` through vectorcall: Python passes the arguments as an array, so no argument tuple or keyword dict is built
//! and `tp_init` is skipped. Installed by hand in the type's `tp_vectorcall` slot, which pyo3 leaves empty.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyTuple};

use crate::node::UOp;
use crate::py_uop::construct;

/// The constructor's parameters, in positional order.
const PARAMS: [&str; 6] = ["op", "dtype", "src", "arg", "tag", "metadata"];

/// [`PARAMS`] as interned Python strings, to match keyword names by identity.
static PARAM_NAMES: PyOnceLock<[Py<PyString>; 6]> = PyOnceLock::new();

/// The vectorcall function of the UOp type: the same behaviour as `__new__`.
///
/// # Safety
/// Called by CPython only, with the vectorcall protocol's arguments.
unsafe extern "C" fn uop_vectorcall(
  _callable: *mut ffi::PyObject,
  args: *const *mut ffi::PyObject,
  nargsf: usize,
  kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
  // SAFETY: CPython calls a vectorcall function from a thread attached to the interpreter (holding the GIL).
  let py = unsafe { Python::assume_attached() };
  // SAFETY: CPython passes `nargsf` positional arguments followed by one value per name in `kwnames`, all valid
  // borrowed references for the duration of the call.
  let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { vectorcall_args(py, args, nargsf, kwnames) }));
  match result {
    Ok(Ok(node)) => node.into_ptr(),
    Ok(Err(e)) => {
      e.restore(py);
      std::ptr::null_mut()
    }
    Err(_) => {
      PyTypeError::new_err("internal error (panic) in the UOp constructor").restore(py);
      std::ptr::null_mut()
    }
  }
}

/// Sorts vectorcall arguments into the constructor's parameters and builds the node.
///
/// # Safety
/// `args` must hold `PyVectorcall_NARGS(nargsf)` positional arguments followed by one value per name of the tuple
/// `kwnames` (or `kwnames` is NULL), each a valid borrowed reference.
unsafe fn vectorcall_args<'py>(
  py: Python<'py>,
  args: *const *mut ffi::PyObject,
  nargsf: usize,
  kwnames: *mut ffi::PyObject,
) -> PyResult<Bound<'py, UOp>> {
  // SAFETY: `PyVectorcall_NARGS` only masks the offset flag off its argument.
  let nargs = unsafe { ffi::PyVectorcall_NARGS(nargsf) } as usize;
  if nargs > PARAMS.len() {
    return Err(PyTypeError::new_err(format!(
      "UOp() takes at most {} arguments ({nargs} given)",
      PARAMS.len()
    )));
  }
  let mut slots: [Option<Borrowed<'_, 'py, PyAny>>; 6] = [None, None, None, None, None, None];
  for (i, slot) in slots.iter_mut().enumerate().take(nargs) {
    // SAFETY: `i < nargs`, and the first `nargs` entries of `args` are valid borrowed references (the contract).
    *slot = Some(unsafe { Borrowed::from_ptr(py, *args.add(i)) });
  }
  if !kwnames.is_null() {
    // SAFETY: a non-NULL `kwnames` is a valid borrowed reference to a tuple (the contract, as CPython's protocol says).
    let names = unsafe { Borrowed::from_ptr(py, kwnames).cast_unchecked::<PyTuple>() };
    let interned = PARAM_NAMES.get_or_init(py, || PARAMS.map(|p| PyString::intern(py, p).unbind()));
    for (j, name) in names.iter_borrowed().enumerate() {
      // keyword names written in source code are interned strings: usually a pointer comparison finds the parameter
      let k = match interned.iter().position(|p| p.as_ptr() == name.as_ptr()) {
        Some(k) => Some(k),
        None => {
          let name = name.cast::<PyString>()?;
          let name = name.to_str()?;
          PARAMS.iter().position(|p| *p == name)
        }
      };
      let Some(k) = k else {
        let name = name.cast::<PyString>()?;
        let name = name.to_str()?;
        return Err(PyTypeError::new_err(format!("UOp() got an unexpected keyword argument '{name}'")));
      };
      if slots[k].is_some() {
        return Err(PyTypeError::new_err(format!("UOp() got multiple values for argument '{}'", PARAMS[k])));
      }
      // SAFETY: `j` indexes `kwnames`, and `args` holds one valid borrowed reference per name after the positionals.
      slots[k] = Some(unsafe { Borrowed::from_ptr(py, *args.add(nargs + j)) });
    }
  }
  let Some(op) = slots[0] else {
    return Err(PyTypeError::new_err("UOp() missing required argument 'op'"));
  };
  construct(
    py,
    &op,
    slots[1].as_deref(),
    slots[2].as_deref(),
    slots[3].as_deref(),
    slots[4].as_deref(),
    slots[5].as_deref(),
  )
}

/// Makes `UOp(...)` calls use [`uop_vectorcall`].
pub fn install(py: Python<'_>) {
  let ty = py.get_type::<UOp>();
  // SAFETY: `tp_vectorcall` is the documented PyTypeObject field "vectorcall function to use for calls of this type
  // object"; we set it once on our own type, before Python code can call it, to a function with the vectorcall
  // signature that behaves as `tp_new` (the only other path that creates UOps) does.
  unsafe { (*ty.as_type_ptr()).tp_vectorcall = Some(uop_vectorcall) };
}
