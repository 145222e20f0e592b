//! Equality and hashing of UOp `arg` and `tag` values, as the interning cache sees them.
//!
//! Python's `==` would merge constants that must stay apart: `0.0 == -0.0`, `1 == 1.0 == True`, and it would never
//! match a NaN with itself unless it is the very same object. The cache therefore uses its own rule:
//! two values are equal when they have the same type and
//! - floats: the same bits, except that every NaN equals every other NaN (so `-0.0` and `0.0` are different nodes and a
//!   NaN constant interns to one node);
//! - tuples: the same length and pairwise equal under this rule, recursively;
//! - anything else: Python `==`.
//!
//! The hash is consistent with this rule: it mixes the type with the value's hash (the bit pattern for floats).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyFloat, PyInt, PyString, PyTuple};

use crate::registry::{safe_repr, type_name};

const CANONICAL_NAN: u64 = 0x7ff8_0000_0000_0000;
const NONE_HASH: u64 = 0x2545_f491_4f6c_dd1d;

/// One round of the structural hash: cheap to compute, good enough once finished with [`finish`].
#[inline]
pub fn mix(h: u64, v: u64) -> u64 {
  (h.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95)
}

/// Final avalanche so the top bits (used by the hash table's control bytes) depend on every input.
#[inline]
pub fn finish(mut h: u64) -> u64 {
  h ^= h >> 33;
  h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
  h ^= h >> 33;
  h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
  h ^ (h >> 33)
}

#[inline]
fn float_bits(f: f64) -> u64 {
  if f.is_nan() {
    CANONICAL_NAN
  } else {
    f.to_bits()
  }
}

/// Hash of an `arg`/`tag` value consistent with [`arg_eq`]. `field` names the value in the error for unhashable input.
pub fn arg_hash(obj: &Bound<'_, PyAny>, field: &str) -> PyResult<u64> {
  if obj.is_none() {
    return Ok(NONE_HASH);
  }
  let ty = obj.get_type_ptr() as u64;
  if let Ok(f) = obj.cast_exact::<PyFloat>() {
    return Ok(mix(ty, float_bits(f.value())));
  }
  if let Ok(t) = obj.cast_exact::<PyTuple>() {
    // nested tuples are walked on an explicit stack (an arg may nest arbitrarily deep): every value in pre-order
    // contributes its leaf hash, or its type and length for a tuple, which determines the structure
    let mut h = mix(ty, t.len() as u64);
    let mut stack: Vec<Bound<'_, PyAny>> = t.iter().rev().collect();
    while let Some(item) = stack.pop() {
      if let Ok(t) = item.cast_exact::<PyTuple>() {
        h = mix(h, mix(item.get_type_ptr() as u64, t.len() as u64));
        stack.extend(t.iter().rev());
      } else {
        h = mix(h, arg_hash(&item, field)?);
      }
    }
    return Ok(h);
  }
  match obj.hash() {
    Ok(v) => Ok(mix(ty, v as u64)),
    Err(e) if e.is_instance_of::<PyTypeError>(obj.py()) => Err(PyTypeError::new_err(format!(
      "UOp {field} must be hashable, got {} {}",
      type_name(obj),
      safe_repr(obj)
    ))),
    Err(e) => Err(e),
  }
}

/// Whether two `arg`/`tag` values are the same for interning (see the module docs).
pub fn arg_eq(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> PyResult<bool> {
  Ok(compare(a.as_borrowed(), b.as_borrowed(), false)? == Some(true))
}

/// [`arg_eq`] where it can be decided without running Python code: identical objects, different types, and values
/// that are exact `int`, `str`, `float` or tuples of those (their comparisons are CPython's own C code, which never
/// calls back into Python nor frees anything). None when Python code might run (other types: a user-defined `__eq__`).
pub fn arg_eq_native(a: Borrowed<'_, '_, PyAny>, b: Borrowed<'_, '_, PyAny>) -> Option<bool> {
  compare(a, b, true).ok().flatten()
}

/// The comparison behind [`arg_eq`] and [`arg_eq_native`]; `Ok(None)` only when `native_only` and deciding would run
/// Python code. Nested tuples are compared on an explicit stack, in the order a recursive walk would compare them.
fn compare(a: Borrowed<'_, '_, PyAny>, b: Borrowed<'_, '_, PyAny>, native_only: bool) -> PyResult<Option<bool>> {
  let mut stack: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = Vec::new();
  let first = compare_one(a, b, native_only, &mut stack)?;
  if first != Some(true) {
    return Ok(first);
  }
  while let Some((x, y)) = stack.pop() {
    match compare_one(x.as_borrowed(), y.as_borrowed(), native_only, &mut stack)? {
      Some(true) => {}
      other => return Ok(other),
    }
  }
  Ok(Some(true))
}

/// Compares one pair; for two tuples of the same length, pushes their item pairs (to compare later) and says "equal".
fn compare_one<'py>(
  a: Borrowed<'_, 'py, PyAny>,
  b: Borrowed<'_, 'py, PyAny>,
  native_only: bool,
  pending: &mut Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>,
) -> PyResult<Option<bool>> {
  if a.is(b) {
    return Ok(Some(true));
  }
  if a.get_type_ptr() != b.get_type_ptr() {
    return Ok(Some(false));
  }
  if a.is_exact_instance_of::<PyInt>() || a.is_exact_instance_of::<PyString>() {
    // SAFETY: both are live objects of the exact type int (or str) and the GIL is held; int and str equality is C code
    // that only compares the values, and its result is -1 only on error (not possible for these types).
    let r = unsafe { pyo3::ffi::PyObject_RichCompareBool(a.as_ptr(), b.as_ptr(), pyo3::ffi::Py_EQ) };
    return if r >= 0 {
      Ok(Some(r == 1))
    } else if native_only {
      Ok(None)
    } else {
      Err(PyErr::fetch(a.py()))
    };
  }
  if let Ok(fa) = a.cast_exact::<PyFloat>() {
    // SAFETY of the unchecked cast: `b` has exactly the same type as `a`, which is `float`.
    let fb = unsafe { b.cast_unchecked::<PyFloat>() };
    return Ok(Some(float_bits(fa.value()) == float_bits(fb.value())));
  }
  if let Ok(ta) = a.cast_exact::<PyTuple>() {
    // SAFETY of the unchecked cast: `b` has exactly the same type as `a`, which is `tuple`.
    let tb = unsafe { b.cast_unchecked::<PyTuple>() };
    if ta.len() != tb.len() {
      return Ok(Some(false));
    }
    pending.extend(ta.iter().zip(tb.iter()).rev());
    return Ok(Some(true));
  }
  if native_only {
    Ok(None)
  } else {
    a.eq(b).map(Some)
  }
}
