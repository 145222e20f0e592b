//! Fast class-attribute lookup for enum classes (`Ops.ADD`) on CPython 3.11.
//!
//! On CPython 3.11 `enum.EnumType` defines `__getattr__`, so every enum class gets CPython's generic attribute slot,
//! which calls `type.__getattribute__` through a freshly made method wrapper before it finds the member in the class
//! dict, for each `Ops.ADD`: a large part of building a UOp from Python (benches/README.md, Design measurements).
//! [`fast_class_getattr`] gives a metaclass derived from `EnumType` a slot that runs `type`'s own lookup directly and
//! calls the original slot (which ends in `__getattr__`) only when that lookup raises AttributeError: the same results,
//! without the detour. CPython 3.12 and later dropped `EnumType.__getattr__` and already use `type`'s lookup, so there it changes nothing.

use std::sync::OnceLock;

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

/// The slot the metaclass had before [`fast_class_getattr`] (CPython's generic `__getattr__` hook): the fallback.
static ORIGINAL: OnceLock<ffi::getattrofunc> = OnceLock::new();

/// `type`'s own attribute lookup (`type.__getattribute__`).
fn type_getattro() -> Option<ffi::getattrofunc> {
  // SAFETY: `PyType_Type` is CPython's statically allocated `type` object, initialized before any extension module is
  // loaded; its `tp_getattro` is never changed after that, so reading it is a plain read of immutable data.
  unsafe { (*std::ptr::addr_of!(ffi::PyType_Type)).tp_getattro }
}

/// The installed slot: `type.__getattribute__`, then the original slot if that raised AttributeError.
///
/// # Safety
/// Called by CPython only, as a `tp_getattro` slot: attached to the interpreter, with a live class and name.
unsafe extern "C" fn enum_class_getattro(cls: *mut ffi::PyObject, name: *mut ffi::PyObject) -> *mut ffi::PyObject {
  // Both functions exist: the slot is only installed after both were found (see `fast_class_getattr`).
  let (Some(lookup), Some(&original)) = (type_getattro(), ORIGINAL.get()) else {
    return std::ptr::null_mut();
  };
  // SAFETY: CPython calls a getattro slot with the GIL held, a live class object and a live name; `lookup` is the slot
  // of `type`, valid for every class, since `cls` is an instance of a subclass of `type`.
  let found = unsafe { lookup(cls, name) };
  // SAFETY: the GIL is held; checking and clearing the current exception is allowed then.
  if !found.is_null() || unsafe { ffi::PyErr_ExceptionMatches(ffi::PyExc_AttributeError) } == 0 {
    return found;
  }
  // SAFETY: as above; `original` is the slot CPython computed for this metaclass, and it repeats the `type` lookup
  // before calling `__getattr__`, so the result is exactly what the metaclass gave without this slot.
  unsafe {
    ffi::PyErr_Clear();
    original(cls, name)
  }
}

/// Makes class-attribute lookups on classes of the metaclass `meta` skip `EnumType.__getattr__`'s detour (see the
/// module docs). `meta` must be a metaclass that inherits `type.__getattribute__` unchanged; only `meta` itself is
/// changed (not its bases, and a subclass computes its own slot). Does nothing where the metaclass already uses `type`'s
/// lookup. Returns whether the fast slot is in place.
#[pyfunction]
pub fn fast_class_getattr(meta: &Bound<'_, PyType>) -> PyResult<bool> {
  let py = meta.py();
  let type_type = py.get_type::<PyType>();
  if !meta.is_subclass(&type_type)? || meta.is(&type_type) {
    return Err(PyTypeError::new_err("fast_class_getattr needs a subclass of type"));
  }
  if !meta.getattr("__getattribute__")?.is(type_type.getattr("__getattribute__")?) {
    return Err(PyTypeError::new_err(
      "fast_class_getattr needs a metaclass that inherits type.__getattribute__",
    ));
  }
  let Some(lookup) = type_getattro() else {
    return Ok(false);
  };
  let ty = meta.as_type_ptr();
  // SAFETY: `ty` is a live type object (we hold a reference) and the GIL is held; reading a slot is a plain read.
  let current = unsafe { (*ty).tp_getattro };
  let Some(current) = current else { return Ok(false) };
  if current as *const () == enum_class_getattro as *const () {
    return Ok(true);
  }
  if current as *const () == lookup as *const () {
    return Ok(false);
  }
  let original = *ORIGINAL.get_or_init(|| current);
  if original as *const () != current as *const () {
    return Err(PyRuntimeError::new_err(
      "fast_class_getattr: this metaclass has a different attribute slot",
    ));
  }
  // SAFETY: we hold the GIL and `ty` is a live heap type; CPython reads `tp_getattro` on every attribute access and
  // recomputes it itself if `__getattr__` or `__getattribute__` is later assigned on the metaclass or a base, so
  // replacing it with a function of the same signature and the same results (see `enum_class_getattro`) is sound.
  unsafe { (*ty).tp_getattro = Some(enum_class_getattro) };
  Ok(true)
}
