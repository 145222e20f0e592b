//! Pickling of UOps.
//!
//! Small graphs reduce to `UOp(op, dtype, src, arg, tag)` and let pickle's memo share subtrees. Python's pickler
//! recurses once per `src` level, so larger graphs are flattened instead: a list of `(op, dtype, arg, tag, source
//! indices)` in topological order, rebuilt by `unflatten`. Either way loading re-interns, so in the same process
//! `pickle.loads(pickle.dumps(u)) is u`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::hashing::AddrMap;
use crate::node::UOp;
use crate::registry;

/// Graphs up to this many nodes pickle in the nested form.
const NESTED_LIMIT: usize = 64;

/// `UOp.__reduce__`.
pub fn reduce<'py>(slf: &Bound<'py, UOp>) -> PyResult<Bound<'py, PyTuple>> {
  let py = slf.py();
  let reg = registry::get(py)?;
  let order = UOp::toposort_ptrs(py, slf, |_| Ok(true))?;
  if order.len() <= NESTED_LIMIT {
    let me = slf.get();
    let args = (reg.op(py, me.op), me.dtype.bind(py), me.src.bind(py), me.arg.bind(py), me.tag.bind(py));
    return PyTuple::new(py, [slf.get_type().into_any(), args.into_pyobject(py)?.into_any()]);
  }
  let mut index: AddrMap<usize, usize> = AddrMap::default();
  let items = PyList::empty(py);
  for (i, ptr) in order.iter().enumerate() {
    index.insert(*ptr as usize, i);
    // SAFETY: every pointer is a live node reachable from `slf`.
    let node = unsafe { Borrowed::from_ptr(py, *ptr).cast_unchecked::<UOp>() };
    let n = node.get();
    let srcs: Vec<usize> = n.children(py).iter().map(|c| index[&(c.as_ptr() as usize)]).collect();
    items.append((
      reg.op(py, n.op),
      n.dtype.bind(py),
      n.arg.bind(py),
      n.tag.bind(py),
      PyTuple::new(py, srcs)?,
    ))?;
  }
  let args = PyTuple::new(py, [items])?;
  PyTuple::new(py, [reg.unflatten_hook.bind(py).clone(), args.into_any()])
}

/// Rebuilds a graph flattened by `reduce`; returns its last (root) node.
#[pyfunction]
pub fn unflatten<'py>(py: Python<'py>, nodes: &Bound<'py, PyList>) -> PyResult<Bound<'py, UOp>> {
  let reg = registry::get(py)?;
  let mut built: Vec<Bound<'py, PyAny>> = Vec::with_capacity(nodes.len());
  for item in nodes.iter() {
    let item = item.cast_into::<PyTuple>()?;
    if item.len() != 5 {
      return Err(PyValueError::new_err("a flattened UOp must be (op, dtype, arg, tag, source indices)"));
    }
    let (op, dtype, arg, tag) = (item.get_item(0)?, item.get_item(1)?, item.get_item(2)?, item.get_item(3)?);
    let srcs: Vec<usize> = item.get_item(4)?.extract()?;
    let opv = reg.op_value(&op, "op")?;
    reg.check_dtype(&dtype, "UOp dtype")?;
    let src = srcs
      .iter()
      .map(|&i| {
        built
          .get(i)
          .cloned()
          .ok_or_else(|| PyValueError::new_err(format!("bad source index {i} in a pickled UOp graph")))
      })
      .collect::<PyResult<Vec<_>>>()?;
    built.push(UOp::intern(py, opv, &dtype, &src, None, &arg, &tag)?.into_any());
  }
  match built.pop() {
    Some(root) => Ok(root.cast_into::<UOp>()?),
    None => Err(PyValueError::new_err("an empty pickled UOp graph")),
  }
}
