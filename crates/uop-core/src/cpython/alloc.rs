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

/// `tp_dictoffset` and `tp_weaklistoffset` of the UOp type (0 until the first node is created).
static DICT_OFFSET: AtomicUsize = AtomicUsize::new(0);
static WEAKLIST_OFFSET: AtomicUsize = AtomicUsize::new(0);

/// Releases what a dying node's Python object holds besides the Rust value: its weak references (cleared first, so no
/// callback run below can reach the dying node) and its instance dict.
///
/// pyo3 0.28 only empties the dict of a `dict` class when an instance is freed and never releases the dict itself, so
/// every node whose `__dict__` was used (cached properties such as `vmin`, or `simplify()`) leaked it. Setting the slot
/// to NULL here leaves nothing for pyo3 to do, and stays correct with a pyo3 that releases the dict itself.
///
/// # Safety
/// `payload` must be the value of a live UOp object that is being deallocated (its reference count reached zero), and
/// the GIL must be held.
pub unsafe fn release_object_slots(payload: &UOp) {
  let (dict, weak) = (DICT_OFFSET.load(Relaxed), WEAKLIST_OFFSET.load(Relaxed));
  if dict == 0 || weak == 0 {
    return;
  }
  let obj = object_of(payload);
  // SAFETY: the offsets are the type's own `tp_weaklistoffset`/`tp_dictoffset`, read once the payload offset was known,
  // so both slots lie inside this object; it is being deallocated, so nothing else reads or writes them meanwhile.
  unsafe {
    if !(*(obj as *mut u8).add(weak).cast::<*mut ffi::PyObject>()).is_null() {
      ffi::PyObject_ClearWeakRefs(obj);
    }
    let slot = (obj as *mut u8).add(dict).cast::<*mut ffi::PyObject>();
    let d = std::ptr::replace(slot, std::ptr::null_mut());
    if !d.is_null() {
      ffi::Py_DECREF(d);
    }
  }
}

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
    // SAFETY: `ty` is the live UOp type object; plain reads of fields CPython set when the type was created.
    let (dict, weak) = unsafe { ((*ty).tp_dictoffset, (*ty).tp_weaklistoffset) };
    if let (Ok(d), Ok(w)) = (usize::try_from(dict), usize::try_from(weak)) {
      WEAKLIST_OFFSET.store(w, Relaxed);
      DICT_OFFSET.store(d, Relaxed);
    }
    return Ok(obj);
  }
  // SAFETY: `layout_allows_direct` checked that the type has a `tp_alloc`.
  let alloc = unsafe { (*ty).tp_alloc }.unwrap_or(ffi::PyType_GenericAlloc);
  // SAFETY: the GIL is held; `tp_alloc(ty, 0)` returns a new reference to a zeroed object of `ty`'s basic size with its
  // header (type, reference count) set, or NULL with an exception set.
  let obj = unsafe { alloc(ty, 0) };
  if obj.is_null() {
    let node = std::mem::ManuallyDrop::new(node);
    // SAFETY: `node` never lived in an object, so its `Drop` (which finds the node's object) must not run; its fields
    // are read out once each and released, and `node` is not used again.
    unsafe {
      drop(std::ptr::read(&node.dtype));
      drop(std::ptr::read(&node.src));
      drop(std::ptr::read(&node.arg));
      drop(std::ptr::read(&node.tag));
    }
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
