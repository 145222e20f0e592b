//! `UOp`: the immutable, interned graph node.
//!
//! Constructing a UOp with fields equal to a live one returns that very object, so `is`, `==` and `hash` are identity.
//! Field equality follows [`crate::arg`] for `arg` and `tag`, pointer identity for `dtype` (DTypes are interned in
//! Python) and for sources (they are interned UOps already).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::alloc::{new_object, object_of};
use crate::arg::{arg_eq, arg_eq_native, arg_hash, finish, mix};
use crate::hashing::AddrSet;
use crate::intern;
use crate::prefetch::prefetch;
use crate::presized_dict::new_presized;
use crate::registry::{self, safe_repr, type_name};
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
    // SAFETY: `Drop` runs only from the deallocation of the node's Python object (see `alloc`), with the GIL held.
    unsafe { crate::alloc::release_object_slots(self) };
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
    let mut found: Option<*mut ffi::PyObject> = None;
    let mut candidates: Vec<*mut ffi::PyObject> = Vec::new();
    intern::probe(h, |obj| {
      // SAFETY: the table only holds objects whose Drop has not run yet (see `intern`), and we hold the table lock, so
      // this node cannot be dropped while we read it; only UOps are in the table.
      let bound = unsafe { Borrowed::from_ptr(py, obj).cast_unchecked::<UOp>() };
      let node = bound.get();
      if node.op != op || node.dtype.as_ptr() != dtype_ptr || !same_src(node.children(py), src) {
        return false;
      }
      let same = match arg_eq_native(node.arg.bind_borrowed(py), arg.as_borrowed()) {
        Some(true) => arg_eq_native(node.tag.bind_borrowed(py), tag.as_borrowed()),
        other => other,
      };
      match same {
        Some(false) => false,
        Some(true) => {
          // SAFETY: the object is alive (refcount > 0 was checked by `probe`); taking a new reference is allowed with
          // the GIL held and runs no Python code.
          unsafe { ffi::Py_INCREF(obj) };
          found = Some(obj);
          true
        }
        None => {
          // SAFETY: as above.
          unsafe { ffi::Py_INCREF(obj) };
          candidates.push(obj);
          false
        }
      }
    });
    // SAFETY: `found` holds a reference taken above and not yet released, to a UOp (only UOps are in the table).
    let mut found: Option<Bound<'py, UOp>> = found.map(|f| unsafe { Bound::from_owned_ptr(py, f).cast_into_unchecked::<UOp>() });
    for (i, ptr) in candidates.iter().enumerate() {
      // SAFETY: as for `found`: each candidate holds a reference taken above and not yet released, to a UOp.
      let cand = unsafe { Bound::from_owned_ptr(py, *ptr).cast_into_unchecked::<UOp>() };
      if found.is_none() {
        let c = cand.get();
        let same = match (arg_eq(c.arg.bind(py), arg), arg_eq(c.tag.bind(py), tag)) {
          (Ok(a), Ok(t)) => a && t,
          (Err(e), _) | (_, Err(e)) => {
            // release the remaining references before failing
            for p in &candidates[i + 1..] {
              // SAFETY: each remaining pointer holds a reference taken above and not yet released.
              drop(unsafe { Bound::from_owned_ptr(py, *p) });
            }
            return Err(e);
          }
        };
        if same {
          found = Some(cand);
        }
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

/// How many keys ahead `toposort` prefetches the next node while filling its result dict.
const DICT_PREFETCH_AHEAD: usize = 8;

/// Converts a constructor/replace `src` argument to a tuple of UOps, with a TypeError naming the bad item.
fn src_to_tuple<'py>(py: Python<'py>, src: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyTuple>> {
  let tuple = match src {
    None => return Ok(PyTuple::empty(py)),
    Some(s) => {
      if let Ok(t) = s.cast::<PyTuple>() {
        t.clone()
      } else if let Ok(l) = s.cast::<PyList>() {
        l.to_tuple()
      } else {
        return Err(PyTypeError::new_err(format!(
          "UOp src must be a tuple of UOps, got {} {}",
          type_name(s),
          safe_repr(s)
        )));
      }
    }
  };
  for (i, item) in tuple.iter_borrowed().enumerate() {
    if !item.is_instance_of::<UOp>() {
      return Err(PyTypeError::new_err(format!(
        "UOp src must be a tuple of UOps, got {} {} at position {i}",
        type_name(&item),
        safe_repr(&item)
      )));
    }
  }
  Ok(tuple)
}

/// Builds a node from Python-level arguments (validation, dtype derivation, interning, metadata).
fn construct<'py>(
  py: Python<'py>,
  op: &Bound<'py, PyAny>,
  dtype: Option<&Bound<'py, PyAny>>,
  src: Option<&Bound<'py, PyAny>>,
  arg: Option<&Bound<'py, PyAny>>,
  tag: Option<&Bound<'py, PyAny>>,
  metadata: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, UOp>> {
  let reg = registry::get(py)?;
  let opv = reg.op_value(op, "op")?;
  let src = src_to_tuple(py, src)?;
  let none = py.None().into_bound(py);
  let arg = arg.unwrap_or(&none);
  let tag = tag.unwrap_or(&none);
  let dtype = match dtype {
    Some(d) if !d.is_none() => d.clone(),
    _ => {
      let d = reg.dtype_hook.bind(py).call1((op, &src, arg))?;
      if d.is_none() {
        reg.void.bind(py).clone()
      } else {
        d
      }
    }
  };
  reg.check_dtype(&dtype, "UOp dtype")?;
  let node = UOp::intern(py, opv, &dtype, src.as_slice(), Some(&src), arg, tag)?;
  if let Some(m) = metadata.filter(|m| !m.is_none()) {
    reg.metadata_hook.bind(py).call1((&node, m))?;
  }
  Ok(node)
}

/// The constructor's parameters, in positional order.
const PARAMS: [&str; 6] = ["op", "dtype", "src", "arg", "tag", "metadata"];

/// [`PARAMS`] as interned Python strings, to match keyword names by identity.
static PARAM_NAMES: PyOnceLock<[Py<PyString>; 6]> = PyOnceLock::new();

/// `UOp(...)` through vectorcall: Python passes the arguments as an array, so no argument tuple or keyword dict is built
/// and `tp_init` is skipped. Same behaviour as `__new__`.
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
  let nargs = unsafe { ffi::PyVectorcall_NARGS(nargsf) } as usize;
  if nargs > PARAMS.len() {
    return Err(PyTypeError::new_err(format!(
      "UOp() takes at most {} arguments ({nargs} given)",
      PARAMS.len()
    )));
  }
  let mut slots: [Option<Borrowed<'_, 'py, PyAny>>; 6] = [None, None, None, None, None, None];
  for (i, slot) in slots.iter_mut().enumerate().take(nargs) {
    *slot = Some(unsafe { Borrowed::from_ptr(py, *args.add(i)) });
  }
  if !kwnames.is_null() {
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
pub fn install_vectorcall(py: Python<'_>) {
  let ty = py.get_type::<UOp>();
  // SAFETY: `tp_vectorcall` is the documented PyTypeObject field "vectorcall function to use for calls of this type
  // object"; we set it once on our own type, before Python code can call it, to a function with the vectorcall
  // signature that behaves as `tp_new` (the only other path that creates UOps) does.
  unsafe { (*ty.as_type_ptr()).tp_vectorcall = Some(uop_vectorcall) };
}

#[pymethods]
impl UOp {
  #[new]
  #[pyo3(signature = (op, dtype=None, src=None, arg=None, tag=None, metadata=None))]
  fn py_new<'py>(
    py: Python<'py>,
    op: &Bound<'py, PyAny>,
    dtype: Option<&Bound<'py, PyAny>>,
    src: Option<&Bound<'py, PyAny>>,
    arg: Option<&Bound<'py, PyAny>>,
    tag: Option<&Bound<'py, PyAny>>,
    metadata: Option<&Bound<'py, PyAny>>,
  ) -> PyResult<Py<UOp>> {
    Ok(construct(py, op, dtype, src, arg, tag, metadata)?.unbind())
  }

  /// The op, an `Ops` member.
  #[getter]
  fn op<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    Ok(registry::get(py)?.op(py, self.op).clone())
  }
  #[getter]
  fn dtype(&self, py: Python<'_>) -> Py<PyAny> {
    self.dtype.clone_ref(py)
  }
  #[getter]
  fn src(&self, py: Python<'_>) -> Py<PyTuple> {
    self.src.clone_ref(py)
  }
  #[getter]
  fn arg(&self, py: Python<'_>) -> Py<PyAny> {
    self.arg.clone_ref(py)
  }
  #[getter]
  fn tag(&self, py: Python<'_>) -> Py<PyAny> {
    self.tag.clone_ref(py)
  }

  /// A node equal to this one except for the given fields (`op`, `dtype`, `src`, `arg`, `tag`).
  #[pyo3(signature = (**kwargs))]
  fn replace<'py>(slf: &Bound<'py, Self>, kwargs: Option<&Bound<'py, PyDict>>) -> PyResult<Bound<'py, UOp>> {
    let py = slf.py();
    let me = slf.get();
    let Some(kw) = kwargs else { return Ok(slf.clone()) };
    let (mut op, mut dtype, mut src, mut arg, mut tag) = (None, None, None, None, None);
    for (k, v) in kw.iter() {
      match k.extract::<&str>()? {
        "op" => op = Some(v),
        "dtype" => dtype = Some(v),
        "src" => src = Some(v),
        "arg" => arg = Some(v),
        "tag" => tag = Some(v),
        other => return Err(PyTypeError::new_err(format!("UOp.replace() got an unexpected field '{other}'"))),
      }
    }
    let reg = registry::get(py)?;
    let opv = match &op {
      Some(o) => reg.op_value(o, "op")?,
      None => me.op,
    };
    let dtype = match dtype {
      Some(d) => {
        reg.check_dtype(&d, "UOp dtype")?;
        d
      }
      None => me.dtype.bind(py).clone(),
    };
    let src = match &src {
      Some(s) => src_to_tuple(py, Some(s))?,
      None => me.src.bind(py).clone(),
    };
    let arg = arg.unwrap_or_else(|| me.arg.bind(py).clone());
    let tag = tag.unwrap_or_else(|| me.tag.bind(py).clone());
    UOp::intern(py, opv, &dtype, src.as_slice(), Some(&src), &arg, &tag)
  }

  /// All nodes reachable from this one, children before parents, as an ordered dict `{uop: None}`.
  /// `gate(node)` returning false skips that node and everything only reachable through it.
  #[pyo3(signature = (gate=None, enter_calls=true))]
  fn toposort<'py>(slf: &Bound<'py, Self>, gate: Option<&Bound<'py, PyAny>>, enter_calls: bool) -> PyResult<Bound<'py, PyDict>> {
    let _ = enter_calls;
    let py = slf.py();
    let order = match gate {
      None => UOp::toposort_ptrs(py, slf, |_| Ok(true))?,
      Some(g) => UOp::toposort_ptrs(py, slf, |n| {
        // SAFETY: `n` is a live node reachable from `slf`.
        let node = unsafe { Borrowed::from_ptr(py, n) };
        g.call1((node,))?.is_truthy()
      })?,
    };
    let out = new_presized(py, order.len())?;
    let none = py.None();
    for (i, &n) in order.iter().enumerate() {
      // inserting a key writes its reference count: start loading the header of a node a few keys ahead
      if let Some(&ahead) = order.get(i + DICT_PREFETCH_AHEAD) {
        prefetch(ahead);
      }
      // SAFETY: `out` is a dict we own, `n` a live node reachable from `slf` (the caller keeps it alive) and `none` a
      // live object; PyDict_SetItem takes its own references to both.
      if unsafe { ffi::PyDict_SetItem(out.as_ptr(), n, none.as_ptr()) } < 0 {
        return Err(PyErr::fetch(py));
      }
    }
    Ok(out)
  }

  fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
    crate::pickle::reduce(slf)
  }
}

/// Number of live interned UOps.
#[pyfunction]
pub fn live_uops() -> usize {
  intern::len()
}
