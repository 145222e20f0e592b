//! Creating a UOp's Python object without the instance dict that `object.__new__` makes.
//!
//! pyo3 creates a pyclass instance by calling the base type's `tp_new` (`object.__new__`) and then writes the Rust
//! value and empty `__dict__`/`__weakref__` slots over the new object. On CPython 3.11 `object.__new__` already puts a
//! fresh dict into the `__dict__` slot of a type that has one, so every UOp allocated a dict that pyo3 then overwrote
//! with NULL: one leaked empty dict per node, and an extra allocation on the hottest path.
//!
//! [`new_object`] allocates with the type's `tp_alloc` (zeroed memory with the header set, what `object.__new__`
//! starts from) and moves the value into the payload. It does so only once the first node, created by pyo3, has shown
//! the layout this relies on: the payload is followed directly by the dict and weakref slots (pyo3's other
//! per-object fields, the borrow and thread checkers, take no space for a frozen, sendable class), so zeroed memory
//! plus the value is exactly pyo3's initialized object, with the dict left to be created on first use as CPython's
//! generic `__dict__` getter does.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::OnceLock;

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::PyTypeInfo;

use crate::node::UOp;

/// Distance in bytes from a UOp's Python object to its Rust payload. It is the same for every instance (one type, one
/// layout); the first node created records it.
static PAYLOAD_OFFSET: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Whether the layout allows [`new_object`]'s direct allocation (checked once, after the first node).
static DIRECT: OnceLock<bool> = OnceLock::new();

/// The object that holds `payload` (a UOp's Rust value inside its Python object).
#[inline]
pub fn object_of(payload: &UOp) -> *mut ffi::PyObject {
  // Every UOp payload was created by `new_object`, which records the offset before returning the first node.
  (payload as *const UOp as usize).wrapping_sub(PAYLOAD_OFFSET.load(Relaxed)) as *mut ffi::PyObject
}

/// Whether zeroed memory plus the value at `offset` is pyo3's initialized object for the type `ty` (see the module docs).
fn layout_allows_direct(ty: *mut ffi::PyTypeObject, offset: usize) -> bool {
  let word = std::mem::size_of::<*mut ffi::PyObject>();
  // SAFETY: `ty` is the live UOp type object; these are plain reads of fields CPython set when the type was created.
  let (basic, item, dict, weak, alloc) = unsafe {
    (
      (*ty).tp_basicsize,
      (*ty).tp_itemsize,
      (*ty).tp_dictoffset,
      (*ty).tp_weaklistoffset,
      (*ty).tp_alloc,
    )
  };
  let dict_at = offset + std::mem::size_of::<UOp>();
  alloc.is_some()
    && item == 0
    && usize::try_from(dict).ok() == Some(dict_at)
    && usize::try_from(weak).ok() == Some(dict_at + word)
    && usize::try_from(basic).ok() == Some(dict_at + 2 * word)
}

/// The Python object for a new node.
pub fn new_object(py: Python<'_>, node: UOp) -> PyResult<Bound<'_, UOp>> {
  let offset = PAYLOAD_OFFSET.load(Relaxed);
  let ty = UOp::type_object_raw(py);
  let direct = offset != usize::MAX && *DIRECT.get_or_init(|| layout_allows_direct(ty, offset));
  if !direct {
    let obj = Bound::new(py, node)?;
    let (payload, object) = (obj.get() as *const UOp as usize, obj.as_ptr() as usize);
    PAYLOAD_OFFSET.store(payload - object, Relaxed);
    return Ok(obj);
  }
  // SAFETY: `layout_allows_direct` checked that the type has a `tp_alloc`.
  let alloc = unsafe { (*ty).tp_alloc }.unwrap_or(ffi::PyType_GenericAlloc);
  // SAFETY: the GIL is held; `tp_alloc(ty, 0)` returns a new reference to a zeroed object of `ty`'s basic size with its
  // header (type, reference count) set, or NULL with an exception set.
  let obj = unsafe { alloc(ty, 0) };
  if obj.is_null() {
    return Err(PyErr::fetch(py));
  }
  // SAFETY: the object is `tp_basicsize` bytes, and the layout check showed the payload occupies
  // `offset..offset + size_of::<UOp>()` of it, suitably aligned (pyo3 placed the first node's payload there; every
  // object of the type has the same layout and allocation alignment). Writing the value there and leaving the zeroed
  // dict and weakref slots NULL reproduces what pyo3 writes, so pyo3's deallocation later drops the value and frees the
  // object as for any other instance.
  unsafe {
    std::ptr::write((obj as *mut u8).add(offset).cast::<UOp>(), node);
    Ok(Bound::from_owned_ptr(py, obj).cast_into_unchecked::<UOp>())
  }
}
