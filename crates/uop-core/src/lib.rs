//! The UOp core of tinygrad: interned graph nodes, toposort, UPat/PatternMatcher matching, graph_rewrite and match
//! statistics, exposed to Python as `tinygrad._core`. Everything above this layer is Python.
//!
//! The algorithms are generic and know nothing of Python: `toposort`, the pattern matcher (`pattern`) and the rewrite
//! engine (`rewrite`), each tested on a pure-Rust toy graph (`toy`). The Python classes (`UOp`, `UPat`,
//! `PatternMatcher`) and `graph_rewrite` host them; the shortcuts through CPython internals are all in `cpython`.

mod arg;
mod callback;
mod cpython;
mod hashing;
mod intern;
mod matcher;
mod node;
mod opset;
mod pattern;
mod pickle;
mod py_rewrite;
mod py_uop;
mod registry;
mod rewrite;
mod scratch;
mod stats;
mod toposort;
mod upat;

/// The toy graph and rule host, for the benchmarks (`--features bench`) and the tests.
#[cfg(any(test, feature = "bench"))]
pub mod toy;

pub use matcher::PatternMatcher;
pub use node::UOp;
pub use py_rewrite::graph_rewrite;
pub use registry::register;
pub use rewrite::{Engine, Limits};
pub use toposort::toposort_all;
pub use upat::UPat;

use pyo3::prelude::*;

/// The `tinygrad._core` extension module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
  m.add_class::<UOp>()?;
  cpython::vectorcall::install(m.py());
  m.add_class::<UPat>()?;
  m.add_class::<PatternMatcher>()?;
  m.add_function(wrap_pyfunction!(registry::register, m)?)?;
  m.add_function(wrap_pyfunction!(py_uop::live_uops, m)?)?;
  m.add_function(wrap_pyfunction!(cpython::class_getattr::fast_class_getattr, m)?)?;
  m.add_function(wrap_pyfunction!(pickle::unflatten, m)?)?;
  m.add_function(wrap_pyfunction!(py_rewrite::graph_rewrite, m)?)?;
  m.add_function(wrap_pyfunction!(stats::set_track_level, m)?)?;
  m.add_function(wrap_pyfunction!(stats::track_level, m)?)?;
  m.add_function(wrap_pyfunction!(stats::match_stats, m)?)?;
  m.add_function(wrap_pyfunction!(stats::reset_match_stats, m)?)?;
  Ok(())
}
