//! A dict created with room for a known number of entries.
//!
//! `toposort` returns a dict of every node it visited; filling a 100k-entry dict from empty resizes it about 15
//! times, each time rebuilding its index. CPython's `_PyDict_NewPresized` allocates the room at once, but it is not
//! part of the public C API, so it is looked up at run time by name (it has been exported with the same signature by
//! every CPython 3 release) and a plain `PyDict_New` is used where it is missing.

use std::ffi::c_void;
use std::sync::OnceLock;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// `PyObject *_PyDict_NewPresized(Py_ssize_t minused)`; calling it needs the GIL (see [`new_presized`]).
type NewPresized = unsafe extern "C" fn(ffi::Py_ssize_t) -> *mut ffi::PyObject;

static NEW_PRESIZED: OnceLock<Option<NewPresized>> = OnceLock::new();

#[cfg(target_os = "linux")]
fn lookup() -> Option<NewPresized> {
  extern "C" {
    fn dlsym(handle: *mut c_void, symbol: *const std::ffi::c_char) -> *mut c_void;
  }
  // SAFETY: the null handle is RTLD_DEFAULT on Linux (glibc and musl): a search of the global symbols of the process,
  // which include the interpreter's; the name is a NUL-terminated literal. dlsym has no other preconditions.
  let sym = unsafe { dlsym(std::ptr::null_mut(), c"_PyDict_NewPresized".as_ptr()) };
  if sym.is_null() {
    return None;
  }
  // SAFETY: the symbol is CPython's `_PyDict_NewPresized`, whose C signature is `PyObject *(Py_ssize_t)` in every
  // CPython 3 release, which is exactly `NewPresized`.
  Some(unsafe { std::mem::transmute::<*mut c_void, NewPresized>(sym) })
}

#[cfg(not(target_os = "linux"))]
fn lookup() -> Option<NewPresized> {
  None
}

/// A new empty dict with room for about `entries` entries (an ordinary empty dict where presizing is unavailable).
pub fn new_presized(py: Python<'_>, entries: usize) -> PyResult<Bound<'_, PyDict>> {
  let Some(new) = *NEW_PRESIZED.get_or_init(lookup) else {
    return Ok(PyDict::new(py));
  };
  let entries = ffi::Py_ssize_t::try_from(entries).unwrap_or(ffi::Py_ssize_t::MAX);
  // SAFETY: we hold the GIL (`py`), which `_PyDict_NewPresized` requires; it returns a new reference or NULL with an
  // exception set.
  let dict = unsafe { new(entries) };
  if dict.is_null() {
    return Err(PyErr::fetch(py));
  }
  // SAFETY: `dict` is a new reference to a dict.
  Ok(unsafe { Bound::from_owned_ptr(py, dict).cast_into_unchecked::<PyDict>() })
}

#[cfg(test)]
mod tests {
  use pyo3::types::PyDictMethods;

  #[test]
  fn presized_dict_is_an_empty_dict() {
    pyo3::Python::initialize();
    pyo3::Python::attach(|py| {
      let d = super::new_presized(py, 100_000).unwrap();
      assert_eq!(d.len(), 0);
      for i in 0..1000 {
        d.set_item(i, i).unwrap();
      }
      assert_eq!(d.len(), 1000);
      assert!(
        super::NEW_PRESIZED.get().unwrap().is_some(),
        "_PyDict_NewPresized should be found on Linux CPython"
      );
    });
  }
}
