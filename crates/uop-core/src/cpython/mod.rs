//! Shortcuts through CPython internals (and the CPU), each kept because a benchmark shows it pays; their measurements,
//! with and without, are in `benches/rust_shortcuts.md`.
//!
//! - [`vectorcall`]: `UOp(...)` through a `tp_vectorcall` slot installed by hand (pyo3 has none for a class).
//! - [`alloc`]: UOp objects allocated with the type's `tp_alloc` instead of through pyo3, and their instance dict
//!   released on deallocation (pyo3 0.28 on CPython 3.11 leaks one dict per node otherwise).
//! - [`class_getattr`]: `Ops.ADD` on CPython 3.11 without `EnumType.__getattr__`'s detour (a patched `tp_getattro`).
//! - [`presized_dict`]: `toposort`'s result dict created at its final size by CPython's private `_PyDict_NewPresized`
//!   (looked up with `dlsym`; a plain dict where it is missing).
//! - [`stack_call`]: rule callbacks called through `PyObject_Vectorcall` with borrowed arguments in a stack array.
//! - [`prefetch`]: cache-line prefetches of the objects and table slots a loop is about to touch.

pub mod alloc;
pub mod class_getattr;
pub mod prefetch;
pub mod presized_dict;
pub mod stack_call;
pub mod vectorcall;
