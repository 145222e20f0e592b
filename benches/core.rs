//! Criterion benchmarks of the UOp core (`cargo bench`).
//!
//! Two groups: the generic algorithms on toy nodes (no Python at all), and the real path — interned UOps, toposort and
//! graph_rewrite with PatternMatcher rules — driven through an embedded interpreter with a minimal Ops/DType setup.

use std::ffi::CString;
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple, PyType};

use uop_core::toy::{Graph, Rules, ToyHost};
use uop_core::{graph_rewrite, register, toposort_all, Engine, Limits, PatternMatcher, UOp, UPat};

fn toy(c: &mut Criterion) {
  let mut g = Graph::default();
  let root = g.mesh(500, 100);
  let n = toposort_all(root, |x, i| g.src(x).get(i).copied()).len();
  let mut group = c.benchmark_group("toy");
  group
    .sample_size(10)
    .measurement_time(Duration::from_secs(3))
    .warm_up_time(Duration::from_secs(1));
  group.throughput(criterion::Throughput::Elements(n as u64));
  group.bench_function("toposort_100k", |b| {
    b.iter(|| toposort_all(black_box(root), |x, i| g.src(x).get(i).copied()))
  });
  group.bench_function("rewrite_every_node_100k", |b| {
    b.iter(|| {
      let mut e = Engine::new(ToyHost::new(&mut g, Rules::AddToMul, false), Limits::default());
      e.unified(black_box(root)).unwrap()
    })
  });
  group.finish();
}

/// Python set-up for the real path: an Ops enum, a DType class, hooks, the core's classes, rules and a 100k-node mesh.
const SETUP: &str = r#"
import enum
class Ops(enum.IntEnum):
  CONST = 1; ADD = 2; MUL = 3; NEG = 4; SINK = 5; SPECIAL = 6
class DType:
  def __init__(self, name): self.name = name
INT, VOID = DType("int"), DType("void")
class BottomUpGate(Exception): pass
def hook(*args): return None

def mesh(width, depth):
  vs = [UOp(Ops.SPECIAL, INT, (), f"v{i}") for i in range(4)]
  layer = [UOp(Ops.CONST, INT, (), i) for i in range(width)]
  for d in range(depth):
    layer = [UOp(Ops.ADD if (i+d) % 2 == 0 else Ops.MUL, INT, (UOp(Ops.ADD, INT, (layer[i], vs[(i+d) % 4])), layer[(i+1) % width]))
             for i in range(width)]
  return UOp(Ops.SINK, VOID, tuple(layer))

def to_mul(x): return UOp(Ops.MUL, x.dtype, x.src)
def fold(a, b): return UOp(Ops.CONST, a.dtype, (), a.arg + b.arg)
"#;

const BUILD: &str = r#"
rules = [
  (UPat(Ops.ADD, src=(UPat(name="x"), UPat(Ops.CONST, arg=0))), lambda x: x),
  (UPat(Ops.MUL, src=(UPat(name="x"), UPat(Ops.CONST, arg=1))), lambda x: x),
  (UPat(Ops.ADD, src=(UPat(Ops.CONST, name="a"), UPat(Ops.CONST, name="b"))), fold),
  (UPat(Ops.NEG, src=(UPat(Ops.NEG, src=(UPat(name="x"),)),)), lambda x: x),
]
nomatch = PatternMatcher(rules)
every = PatternMatcher([(UPat(Ops.ADD, name="x"), to_mul)] + rules)
graph = mesh(250, 200)
"#;

fn real(c: &mut Criterion) {
  Python::attach(|py| {
    let ns = PyDict::new(py);
    ns.set_item("UOp", py.get_type::<UOp>()).unwrap();
    ns.set_item("UPat", py.get_type::<UPat>()).unwrap();
    ns.set_item("PatternMatcher", py.get_type::<PatternMatcher>()).unwrap();
    py.run(&CString::new(SETUP).unwrap(), Some(&ns), None).unwrap();
    let get = |k: &str| ns.get_item(k).unwrap().unwrap();
    let hook = get("hook");
    register(
      py,
      get("Ops").cast_into::<PyType>().unwrap(),
      get("DType").cast_into::<PyType>().unwrap(),
      get("VOID"),
      get("BottomUpGate").cast_into::<PyType>().unwrap(),
      hook.clone(),
      hook.clone(),
      hook.clone(),
      hook,
    )
    .unwrap();
    py.run(&CString::new(BUILD).unwrap(), Some(&ns), None).unwrap();
    let graph = get("graph").cast_into::<UOp>().unwrap();
    let n = UOp::toposort_ptrs(py, &graph, |_| Ok(true)).unwrap().len() as u64;
    let int = get("INT");
    let none = py.None().into_bound(py);
    let empty = PyTuple::empty(py);
    let mut group = c.benchmark_group("real");
    group
      .sample_size(10)
      .measurement_time(Duration::from_secs(3))
      .warm_up_time(Duration::from_secs(1));
    group.throughput(criterion::Throughput::Elements(1000));
    let mut fresh = 0i64;
    group.bench_function("uop_new_1000", |b| {
      b.iter(|| {
        let made: Vec<_> = (0..1000)
          .map(|_| {
            fresh += 1;
            UOp::intern(
              py,
              1,
              &int,
              empty.as_slice(),
              Some(&empty),
              &fresh.into_pyobject(py).unwrap().into_any(),
              &none,
            )
            .unwrap()
          })
          .collect();
        black_box(made)
      })
    });
    let one = 1i64.into_pyobject(py).unwrap().into_any();
    let _keep = UOp::intern(py, 1, &int, empty.as_slice(), Some(&empty), &one, &none).unwrap();
    group.bench_function("uop_cached_1000", |b| {
      b.iter(|| {
        for _ in 0..1000 {
          black_box(UOp::intern(py, 1, &int, empty.as_slice(), Some(&empty), &one, &none).unwrap());
        }
      })
    });
    group.throughput(criterion::Throughput::Elements(n));
    group.bench_function("toposort_100k", |b| {
      b.iter(|| UOp::toposort_ptrs(py, &graph, |_| Ok(true)).unwrap().len())
    });
    for (name, pm) in [("graph_rewrite_nomatch_100k", "nomatch"), ("graph_rewrite_every_node_100k", "every")] {
      let pm = get(pm);
      group.bench_function(name, |b| {
        b.iter(|| graph_rewrite(py, graph.as_any(), Some(&pm), None, false, None, None, false, false).unwrap())
      });
    }
    group.finish();
  });
}

criterion_group!(benches, toy, real);
criterion_main!(benches);
