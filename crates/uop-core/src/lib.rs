//! The UOp core of tinygrad: interned graph nodes, toposort, UPat/PatternMatcher matching, graph_rewrite and match
//! statistics, exposed to Python as `tinygrad._core`. Everything above this layer is Python.

pub mod alloc;
pub mod arg;
pub mod class_getattr;
pub mod hashing;
pub mod intern;
pub mod matcher;
pub mod node;
pub mod opset;
pub mod pattern;
pub mod pickle;
pub mod prefetch;
pub mod presized_dict;
pub mod py_rewrite;
pub mod registry;
pub mod rewrite;
pub mod scratch;
pub mod stats;
pub mod toposort;
pub mod toy;

use pyo3::prelude::*;

/// The `tinygrad._core` extension module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
  m.add_class::<node::UOp>()?;
  node::install_vectorcall(m.py());
  m.add_class::<pattern::UPat>()?;
  m.add_class::<matcher::PatternMatcher>()?;
  m.add_function(wrap_pyfunction!(registry::register, m)?)?;
  m.add_function(wrap_pyfunction!(node::live_uops, m)?)?;
  m.add_function(wrap_pyfunction!(class_getattr::fast_class_getattr, m)?)?;
  m.add_function(wrap_pyfunction!(pickle::unflatten, m)?)?;
  m.add_function(wrap_pyfunction!(py_rewrite::graph_rewrite, m)?)?;
  m.add_function(wrap_pyfunction!(stats::set_track_level, m)?)?;
  m.add_function(wrap_pyfunction!(stats::track_level, m)?)?;
  m.add_function(wrap_pyfunction!(stats::match_stats, m)?)?;
  m.add_function(wrap_pyfunction!(stats::reset_match_stats, m)?)?;
  Ok(())
}
