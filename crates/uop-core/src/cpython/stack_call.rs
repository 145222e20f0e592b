//! Calling a Python function with positional arguments from a stack array through `PyObject_Vectorcall`: no argument
//! tuple is allocated (a rule callback is called once per match).

use std::marker::PhantomData;

use pyo3::ffi;
use pyo3::prelude::*;

/// Most arguments a [`StackArgs`] holds.
pub const MAX_STACK_ARGS: usize = 8;

/// Up to [`MAX_STACK_ARGS`] positional arguments, borrowed for `'a`.
pub struct StackArgs<'a> {
  /// Slot 0 stays free so that `PY_VECTORCALL_ARGUMENTS_OFFSET` lets a bound-method call use it without copying.
  buf: [*mut ffi::PyObject; MAX_STACK_ARGS + 1],
  len: usize,
  borrowed: PhantomData<&'a ()>,
}

impl Default for StackArgs<'_> {
  /// No arguments.
  fn default() -> Self {
    StackArgs {
      buf: [std::ptr::null_mut(); MAX_STACK_ARGS + 1],
      len: 0,
      borrowed: PhantomData,
    }
  }
}

impl<'a> StackArgs<'a> {
  /// Appends an argument; panics past [`MAX_STACK_ARGS`].
  #[inline]
  pub fn push(&mut self, arg: Borrowed<'a, '_, PyAny>) {
    self.len += 1;
    self.buf[self.len] = arg.as_ptr();
  }

  /// `f(*args)`.
  pub fn call<'py>(mut self, f: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let nargs = self.len | ffi::PY_VECTORCALL_ARGUMENTS_OFFSET;
    // SAFETY: `f` is a live object and the GIL is held (`f` is bound to it); `buf[1..=len]` are pointers to objects
    // borrowed for 'a, which outlives `self`, so they are alive for the whole call; slot 0 exists and may be
    // overwritten by the callee, as PY_VECTORCALL_ARGUMENTS_OFFSET allows; no keyword names are passed. The result is a
    // new reference or NULL with an exception set, which `from_owned_ptr_or_err` takes over.
    unsafe {
      let r = ffi::PyObject_Vectorcall(f.as_ptr(), self.buf.as_mut_ptr().add(1), nargs, std::ptr::null_mut());
      Bound::from_owned_ptr_or_err(f.py(), r)
    }
  }
}
