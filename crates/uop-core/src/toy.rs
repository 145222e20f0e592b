//! A pure-Rust interned DAG and rule host that drive the generic algorithms (toposort, the rewrite engine and the pattern
//! matcher) in `cargo test` and the criterion benchmarks, without a Python interpreter.

use std::collections::HashMap;

use crate::pattern::MatchHost;
use crate::rewrite::{BottomUp, Host, State};

/// A node id in a [`Graph`].
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Id(pub u32);

/// What a toy node computes.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Kind {
  /// An integer constant.
  Const(i64),
  /// A named variable.
  Var(u32),
  /// Sum of the sources.
  Add,
  /// Product of the sources.
  Mul,
  /// Negation of the single source.
  Neg,
}

/// An interned DAG: building a node equal to an existing one returns its id.
#[derive(Default)]
pub struct Graph {
  nodes: Vec<(Kind, Vec<Id>)>,
  index: HashMap<(Kind, Vec<Id>), Id>,
}

impl Graph {
  /// The node with this kind and sources.
  pub fn node(&mut self, kind: Kind, src: Vec<Id>) -> Id {
    if let Some(id) = self.index.get(&(kind.clone(), src.clone())) {
      return *id;
    }
    let id = Id(self.nodes.len() as u32);
    self.nodes.push((kind.clone(), src.clone()));
    self.index.insert((kind, src), id);
    id
  }
  /// The op value of a kind (as a pattern's op filter sees it; constants and variables each share one).
  pub fn op_of(kind: &Kind) -> u8 {
    match kind {
      Kind::Const(_) => 1,
      Kind::Var(_) => 2,
      Kind::Add => 3,
      Kind::Mul => 4,
      Kind::Neg => 5,
    }
  }
  /// A node's kind.
  pub fn kind(&self, id: Id) -> &Kind {
    &self.nodes[id.0 as usize].0
  }
  /// A node's sources.
  pub fn src(&self, id: Id) -> &[Id] {
    &self.nodes[id.0 as usize].1
  }
  /// Number of distinct nodes built so far.
  pub fn len(&self) -> usize {
    self.nodes.len()
  }
  /// Whether no node was built.
  pub fn is_empty(&self) -> bool {
    self.nodes.is_empty()
  }
  /// Evaluates a node with variables bound by `vars` (wrapping arithmetic).
  pub fn eval(&self, id: Id, vars: &dyn Fn(u32) -> i64) -> i64 {
    let order = crate::toposort::toposort_all(id, |n, i| self.src(n).get(i).copied());
    let mut val: HashMap<Id, i64> = HashMap::new();
    for n in order {
      let src = self.src(n).iter().map(|s| val[s]);
      let v = match self.kind(n) {
        Kind::Const(c) => *c,
        Kind::Var(v) => vars(*v),
        Kind::Add => src.fold(0i64, |a, b| a.wrapping_add(b)),
        Kind::Mul => src.fold(1i64, |a, b| a.wrapping_mul(b)),
        Kind::Neg => src.fold(0i64, |_, b| b.wrapping_neg()),
      };
      val.insert(n, v);
    }
    val[&id]
  }
  /// A mesh `width` wide and `depth` deep of Add/Mul nodes over a few variables: a DAG with heavy sharing.
  pub fn mesh(&mut self, width: usize, depth: usize) -> Id {
    let vars: Vec<Id> = (0..4).map(|v| self.node(Kind::Var(v), vec![])).collect();
    let mut layer: Vec<Id> = (0..width).map(|i| self.node(Kind::Const(i as i64), vec![])).collect();
    for d in 0..depth {
      layer = (0..width)
        .map(|i| {
          let kind = if (i + d) % 2 == 0 { Kind::Add } else { Kind::Mul };
          let (a, b) = (layer[i], layer[(i + 1) % width]);
          let v = vars[(i + d) % vars.len()];
          let inner = self.node(Kind::Add, vec![a, v]);
          self.node(kind, vec![inner, b])
        })
        .collect();
    }
    self.node(Kind::Add, layer)
  }
}

/// Which rules the toy host applies.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Rules {
  /// Algebraic simplification: constant folding, `x+0`, `x*1`, `x*0`, `--x`.
  Simplify,
  /// Rewrites every Add into a Mul (every node with an Add changes).
  AddToMul,
  /// `Const(c) -> Const(c+1)` forever: an endless rewrite.
  Increment,
  /// `Var(0) <-> Var(1)`: a two-step cycle.
  Flip,
  /// `Neg(x) -> Neg(Neg(Neg(x)))`: the replacement contains the node being rewritten.
  Grow,
  /// `Const(c) -> Neg(Const(c+1))`: every replacement holds a new node to rewrite, an endlessly deepening graph.
  Deepen,
}

/// A [`Host`] over a [`Graph`] with one of the [`Rules`], counting rule applications per node.
pub struct ToyHost<'g> {
  /// The graph.
  pub g: &'g mut Graph,
  /// The rules.
  pub rules: Rules,
  /// Whether the rules run bottom-up (before the sources) instead of top-down.
  pub bottom_up: bool,
  /// How many times the rules were applied to each node.
  pub visits: HashMap<Id, u32>,
  state: crate::hashing::AddrMap<Id, State<Id>>,
}

impl<'g> ToyHost<'g> {
  /// A host applying `rules` to `g`.
  pub fn new(g: &'g mut Graph, rules: Rules, bottom_up: bool) -> Self {
    ToyHost {
      g,
      rules,
      bottom_up,
      visits: HashMap::new(),
      state: Default::default(),
    }
  }

  fn apply(&mut self, n: Id) -> Option<Id> {
    *self.visits.entry(n).or_default() += 1;
    let kind = self.g.kind(n).clone();
    let src = self.g.src(n).to_vec();
    let consts: Option<Vec<i64>> = src
      .iter()
      .map(|s| match self.g.kind(*s) {
        Kind::Const(c) => Some(*c),
        _ => None,
      })
      .collect();
    match (self.rules, kind) {
      (Rules::Simplify, Kind::Add | Kind::Mul) if consts.is_some() && !src.is_empty() => {
        let v = self.g.eval(n, &|_| 0);
        Some(self.g.node(Kind::Const(v), vec![]))
      }
      (Rules::Simplify, Kind::Add) if src.len() == 2 && *self.g.kind(src[1]) == Kind::Const(0) => Some(src[0]),
      (Rules::Simplify, Kind::Mul) if src.len() == 2 && *self.g.kind(src[1]) == Kind::Const(1) => Some(src[0]),
      (Rules::Simplify, Kind::Mul) if src.len() == 2 && *self.g.kind(src[1]) == Kind::Const(0) => Some(src[1]),
      (Rules::Simplify, Kind::Neg) if *self.g.kind(src[0]) == Kind::Neg => Some(self.g.src(src[0])[0]),
      (Rules::AddToMul, Kind::Add) => Some(self.g.node(Kind::Mul, src)),
      (Rules::Increment, Kind::Const(c)) => Some(self.g.node(Kind::Const(c + 1), vec![])),
      (Rules::Flip, Kind::Var(v)) if v < 2 => Some(self.g.node(Kind::Var(1 - v), vec![])),
      (Rules::Deepen, Kind::Const(c)) => {
        let k = self.g.node(Kind::Const(c + 1), vec![]);
        Some(self.g.node(Kind::Neg, vec![k]))
      }
      (Rules::Grow, Kind::Neg) => {
        let a = self.g.node(Kind::Neg, vec![n]);
        Some(self.g.node(Kind::Neg, vec![a]))
      }
      _ => None,
    }
  }
}

impl Host for ToyHost<'_> {
  type Node = Id;
  type Error = String;
  fn n_src(&self, n: &Id) -> usize {
    self.g.src(*n).len()
  }
  fn src(&self, n: &Id, i: usize) -> Id {
    self.g.src(*n)[i]
  }
  fn rebuild(&mut self, n: &Id, src: Vec<Id>) -> Result<Id, String> {
    let kind = self.g.kind(*n).clone();
    Ok(self.g.node(kind, src))
  }
  fn has_top_down(&self) -> bool {
    !self.bottom_up
  }
  fn has_bottom_up(&self) -> bool {
    self.bottom_up
  }
  fn top_down(&mut self, n: &Id) -> Result<Option<Id>, String> {
    Ok(self.apply(*n))
  }
  fn bottom_up(&mut self, n: &Id) -> Result<BottomUp<Id>, String> {
    Ok(match self.apply(*n) {
      Some(r) => BottomUp::Replace(r),
      None => BottomUp::Keep,
    })
  }
  fn endless(&self, what: &str) -> String {
    what.to_string()
  }
  fn state(&self, n: &Id) -> Option<State<Id>> {
    self.state.get(n).cloned()
  }
  fn set_state(&mut self, n: &Id, s: State<Id>) {
    self.state.insert(*n, s);
  }
}

/// Patterns over a [`Graph`]: the arg of a constant is its value, of a variable its number; nodes have one dtype (0)
/// and one tag (0).
impl MatchHost for Graph {
  type Node = Id;
  type Arg = i64;
  type Tag = i64;
  type Error = String;
  fn op(&self, n: Id) -> u8 {
    Graph::op_of(self.kind(n))
  }
  fn dtype(&self, _n: Id) -> usize {
    0
  }
  fn n_src(&self, n: Id) -> usize {
    self.src(n).len()
  }
  fn src(&self, n: Id, i: usize) -> Id {
    Graph::src(self, n)[i]
  }
  fn arg_is(&self, n: Id, arg: &i64) -> Result<bool, String> {
    Ok(match self.kind(n) {
      Kind::Const(c) => c == arg,
      Kind::Var(v) => i64::from(*v) == *arg,
      _ => false,
    })
  }
  fn tag_in(&self, _n: Id, tags: &[i64]) -> Result<bool, String> {
    Ok(tags.contains(&0))
  }
}
