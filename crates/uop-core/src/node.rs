//! `UOp`: the immutable, interned graph node, and its handle for the generic algorithms ([`PyNode`]).
//!
//! Constructing a UOp with fields equal to a live one returns that very object, so `is`, `==` and `hash` are identity.
//! Field equality follows [`crate::arg`] for `arg` and `tag`, pointer identity for `dtype` (DTypes are interned in
//! Python) and for sources (they are interned UOps already). The Python-facing methods are in `py_uop`.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::arg::{arg_eq, arg_eq_native, arg_hash, finish, mix};
use crate::cpython::alloc::{new_object, object_of, release_object_slots};
use crate::hashing::AddrSet;
use crate::intern;
use crate::scratch::Epoch;
use crate::toposort::toposort;

/// The graph node. Fields: `op` (an `Ops` member), `dtype`, `src` (tuple of UOps), `arg`, `tag`.
///
/// UOps are not tracked by Python's cyclic garbage collector: graphs are DAGs, freed by reference counting alone, and
/// tracking millions of nodes made every collection walk them (creation was several times slower with the GC on). A reference
/// cycle through a node's own attributes (`u.x = u`) is therefore never collected; don't cache a node's graph on it.
#[pyclass(frozen, weakref, dict, module = "tinygrad.uop.ops", name = "UOp")]
pub struct UOp {
  /// The op's integer value (index into the registered `Ops` table).
  pub op: u8,
  /// Creation order, wrapping (graph_rewrite tells the nodes it created by this); it fits in the padding after `op`.
  pub serial: u32,
  /// The DType object.
  pub dtype: Py<PyAny>,
  /// The sources, a tuple of UOps.
  pub src: Py<PyTuple>,
  /// The op-specific argument (hashable).
  pub arg: Py<PyAny>,
  /// A tag used by rewrites to mark nodes.
  pub tag: Py<PyAny>,
  /// Structural hash, kept so `Drop` can find the node's table entry without calling Python.
  pub hash: u64,
  /// Epoch of the traversal that last claimed this node's scratch slot (see `scratch`).
  pub mark: AtomicU64,
  /// That traversal's per-node state.
  pub slot: AtomicUsize,
}

/// The serial of the next node created.
static NEXT_SERIAL: AtomicU32 = AtomicU32::new(0);

/// The serial the next node created will get. Serials wrap: a node was created in a window `[a, b)` of serials when
/// `serial.wrapping_sub(a) < b.wrapping_sub(a)`.
pub fn next_serial() -> u32 {
  NEXT_SERIAL.load(Relaxed)
}

/// Takes the next serial. Nodes are only created attached to the interpreter, which serializes creations, so a plain
/// load and store is enough (a locked read-modify-write on every node creation cost measurable time); should two
/// creations ever race, two nodes share a serial, which only affects graph_rewrite's limit accounting.
#[inline]
fn take_serial(_py: Python<'_>) -> u32 {
  let s = NEXT_SERIAL.load(Relaxed);
  NEXT_SERIAL.store(s.wrapping_add(1), Relaxed);
  s
}

impl Drop for UOp {
  fn drop(&mut self) {
    intern::remove(self.hash, object_of(self));
    // SAFETY: `Drop` runs only from the deallocation of the node's Python object (pyo3's `tp_dealloc`, after its
    // reference count reached zero), attached to the interpreter.
    unsafe { release_object_slots(self) };
  }
}

#[inline]
fn same_src(a: &[Bound<'_, PyAny>], b: &[Bound<'_, PyAny>]) -> bool {
  a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.as_ptr() == y.as_ptr())
}

impl UOp {
  /// The sources as a slice of Python objects (each is a UOp).
  #[inline]
  pub fn children<'a, 'py>(&'a self, py: Python<'py>) -> &'a [Bound<'py, PyAny>] {
    self.src.bind(py).as_slice()
  }

  /// Returns the interned node for these fields, creating it if no live node has them.
  /// Every item of `src` must be a UOp; `src_tuple`, when given, is a tuple holding exactly `src`.
  pub fn intern<'py>(
    py: Python<'py>,
    op: u8,
    dtype: &Bound<'py, PyAny>,
    src: &[Bound<'py, PyAny>],
    src_tuple: Option<&Bound<'py, PyTuple>>,
    arg: &Bound<'py, PyAny>,
    tag: &Bound<'py, PyAny>,
  ) -> PyResult<Bound<'py, UOp>> {
    let mut h = mix(u64::from(op) + 1, dtype.as_ptr() as u64);
    for s in src {
      h = mix(h, s.as_ptr() as u64);
    }
    h = mix(h, arg_hash(arg, "arg")?);
    h = finish(mix(h, arg_hash(tag, "tag")?));

    // Look for a live node with the same fields. Candidates whose op, dtype and sources match are compared on arg and
    // tag right away when that needs no Python code (the usual case); the others are collected, with a reference so
    // they stay alive once the lock is released, and compared afterwards, because `__eq__` may run Python code.
    let dtype_ptr = dtype.as_ptr();
    let mut found: Option<Bound<'py, UOp>> = None;
    let mut candidates: Vec<Bound<'py, UOp>> = Vec::new();
    intern::probe(h, |obj| {
      // SAFETY: the table only holds live objects (a node removes its entry in Drop, before its memory is freed, and
      // `probe` skips nodes whose deallocation has begun), and it cannot be freed while we hold the table lock, which its
      // Drop needs; only UOps are in the table.
      let bound = unsafe { Borrowed::from_ptr(py, obj).cast_unchecked::<UOp>() };
      let node = bound.get();
      if node.op != op || node.dtype.as_ptr() != dtype_ptr || !same_src(node.children(py), src) {
        return false;
      }
      let same = match arg_eq_native(node.arg.bind_borrowed(py), arg.as_borrowed()) {
        Some(true) => arg_eq_native(node.tag.bind_borrowed(py), tag.as_borrowed()),
        other => other,
      };
      // taking a reference runs no Python code, as `probe` requires (releasing one could, so none is dropped here)
      match same {
        Some(false) => false,
        Some(true) => {
          found = Some(bound.to_owned());
          true
        }
        None => {
          candidates.push(bound.to_owned());
          false
        }
      }
    });
    for cand in candidates {
      if found.is_some() {
        break;
      }
      let c = cand.get();
      if arg_eq(c.arg.bind(py), arg)? && arg_eq(c.tag.bind(py), tag)? {
        found = Some(cand);
      }
    }
    if let Some(f) = found {
      return Ok(f);
    }

    let tuple = match src_tuple {
      Some(t) => t.clone(),
      None => PyTuple::new(py, src)?,
    };
    let node = UOp {
      op,
      serial: take_serial(py),
      dtype: dtype.clone().unbind(),
      src: tuple.unbind(),
      arg: arg.clone().unbind(),
      tag: tag.clone().unbind(),
      hash: h,
      mark: AtomicU64::new(0),
      slot: AtomicUsize::new(0),
    };
    let obj = new_object(py, node)?;
    intern::insert(h, obj.as_ptr());
    Ok(obj)
  }

  /// Rebuilds this node with new sources, keeping op, dtype, arg and tag.
  pub fn with_src<'py>(&self, py: Python<'py>, src: &[Bound<'py, PyAny>]) -> PyResult<Bound<'py, UOp>> {
    UOp::intern(py, self.op, self.dtype.bind(py), src, None, self.arg.bind(py), self.tag.bind(py))
  }

  /// Nodes reachable from `root` (itself included) in topological order, as raw object pointers.
  /// `gate` may reject nodes (and what is only reachable through them).
  pub fn toposort_ptrs(
    py: Python<'_>,
    root: &Bound<'_, UOp>,
    mut gate: impl FnMut(*mut ffi::PyObject) -> PyResult<bool>,
  ) -> PyResult<Vec<*mut ffi::PyObject>> {
    // SAFETY (both closures): `n` is a UOp reachable from `root`, which the caller keeps alive, so `n` and its sources
    // are alive for the whole traversal.
    let node = |n: *mut ffi::PyObject| unsafe { Borrowed::from_ptr(py, n).cast_unchecked::<UOp>() };
    let epoch = Epoch::begin();
    // nodes whose mark belongs to another running traversal are tracked here instead
    let mut elsewhere: AddrSet<*mut ffi::PyObject> = AddrSet::default();
    toposort(
      root.as_ptr(),
      |n, i| node(n).get().children(py).get(i).map(|c| c.as_ptr()),
      &mut gate,
      |n| {
        let b = node(n);
        let u = b.get();
        let m = u.mark.load(Relaxed);
        if m == epoch.0 {
          false
        } else if epoch.can_claim(m) {
          u.mark.store(epoch.0, Relaxed);
          !elsewhere.contains(&n)
        } else {
          elsewhere.insert(n)
        }
      },
    )
  }
}

/// A UOp handle for the generic algorithms: the object's address. Copying it takes no reference; whoever makes one
/// keeps the node alive for as long as the handle is used (typically by holding a root the node is under: UOps are
/// immutable, so everything under a live node stays alive).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PyNode(pub *mut ffi::PyObject);

impl PyNode {
  /// The handle of a node.
  #[inline]
  pub fn of(node: &Bound<'_, UOp>) -> PyNode {
    PyNode(node.as_ptr())
  }

  /// The node behind the handle.
  ///
  /// # Safety
  /// The handle must point to a UOp that stays alive for `'a`.
  #[inline]
  pub unsafe fn bind<'a, 'py>(self, py: Python<'py>) -> Borrowed<'a, 'py, UOp> {
    // SAFETY: the caller guarantees a live UOp for 'a; a borrowed reference takes no ownership.
    unsafe { Borrowed::from_ptr(py, self.0).cast_unchecked::<UOp>() }
  }
}
