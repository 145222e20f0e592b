//! graph_rewrite: rewrites a DAG with pattern matchers, children first, to a fixed point.
//!
//! The engine is generic over a [`Host`] (how to read sources, rebuild a node and apply the rules), so it can be
//! tested and benchmarked without Python. It runs on an explicit stack, so graph depth is limited only by memory.
//!
//! Default mode: a node's sources are rewritten first; a node whose sources changed is rebuilt, and the rebuilt node is
//! rewritten in turn; otherwise the top-down rules run on it, and a replacement is itself fully rewritten. Every node
//! seen is memoized, so each distinct node is processed once per call. Bottom-up rules (`bottom_up=True`, or `bpm`)
//! run on a node before its sources, repeatedly until they no longer match. Walk mode makes one pass and does not
//! revisit replacements.
//!
//! Endless rewrites fail instead of hanging: reaching a node that is still being rewritten (a cycle), or exceeding one of
//! the [`Limits`]: replacements nested inside replacements (every successive rewrite of one node, or a replacement
//! whose new parts are rewritten in turn, nests one level deeper; a rule that keeps producing new nodes nests without
//! end), nodes produced by the rules in one call relative to the input graph, or work-stack frames.

use std::hash::Hash;

/// Result of applying bottom-up rules to a node.
pub enum BottomUp<N> {
  /// No rule matched.
  Keep,
  /// A rule produced this replacement.
  Replace(N),
  /// A rule asked not to descend into this node's sources.
  Gate,
}

/// Where a node stands in the current rewrite.
#[derive(Clone)]
pub enum State<N> {
  /// Its rewrite has started and not finished: reaching it again means a cycle.
  InProgress,
  /// Fully rewritten into this node.
  Done(N),
}

/// What the engine needs from the graph and the rules.
pub trait Host {
  /// A node handle; equality and hash are node identity.
  type Node: Clone + Eq + Hash;
  /// Error type (a Python exception for the real host).
  type Error;
  /// Number of sources of `n`.
  fn n_src(&self, n: &Self::Node) -> usize;
  /// Source `i` of `n`.
  fn src(&self, n: &Self::Node, i: usize) -> Self::Node;
  /// `n` with its sources replaced.
  fn rebuild(&mut self, n: &Self::Node, src: Vec<Self::Node>) -> Result<Self::Node, Self::Error>;
  /// Whether top-down rules exist.
  fn has_top_down(&self) -> bool;
  /// Whether bottom-up rules exist.
  fn has_bottom_up(&self) -> bool;
  /// Applies the top-down rules once.
  fn top_down(&mut self, n: &Self::Node) -> Result<Option<Self::Node>, Self::Error>;
  /// Applies the bottom-up rules once.
  fn bottom_up(&mut self, n: &Self::Node) -> Result<BottomUp<Self::Node>, Self::Error>;
  /// Whether `n` was created during this rewrite (the default, "yes", only makes the limits stricter).
  fn is_new(&self, _n: &Self::Node) -> bool {
    true
  }
  /// The error for an endless rewrite, described by `what`.
  fn endless(&self, what: &str) -> Self::Error;
  /// This rewrite's state for `n` (None: not met yet).
  fn state(&self, n: &Self::Node) -> Option<State<Self::Node>>;
  /// Records this rewrite's state for `n`.
  fn set_state(&mut self, n: &Self::Node, s: State<Self::Node>);
}

/// Work items. `aliases` counts the nodes a bottom-up fixpoint walked through from `n` (they rewrite to what `n` does);
/// the nodes themselves are the top `aliases` entries of [`Engine::aliases`].
enum Frame<N> {
  /// A node to rewrite, and the chain of successive rewrites it is in.
  Enter(N, u32),
  Rebuild {
    n: N,
    aliases: u32,
    cur: N,
    chain: u32,
  },
  Link {
    n: N,
    aliases: u32,
    r: N,
  },
}

/// Limits that turn endless rewrites into errors.
#[derive(Clone, Copy)]
pub struct Limits {
  /// Successive rewrites of one node; bottom-up, successive rewrites of one node into nodes created by this rewrite
  /// (rewrites into nodes that existed before walk the finite input, e.g. down a deep chain, and are not limited).
  pub chain: u32,
  /// Replacements being rewritten inside one another at once.
  pub nested: usize,
  /// Nodes the rules (and rebuilds) may produce in one call: `growth_base + growth_factor * input nodes`.
  pub growth_base: usize,
  /// See `growth_base`.
  pub growth_factor: usize,
  /// Frames on the work stack.
  pub stack: usize,
}

impl Default for Limits {
  fn default() -> Self {
    Limits {
      chain: 10_000,
      nested: 10_000,
      growth_base: 1_000_000,
      growth_factor: 64,
      stack: 16_000_000,
    }
  }
}

/// One graph_rewrite call's state (per-node state lives in the host, see [`Host::state`]).
pub struct Engine<H: Host> {
  /// The host.
  pub host: H,
  limits: Limits,
  /// Nodes produced so far by rules and rebuilds (not necessarily new ones).
  pub produced: usize,
  /// Distinct nodes reached so far that existed before the rewrite (see [`Host::is_new`]).
  pub input_nodes: usize,
  /// `Link` frames on the stack: replacements being rewritten inside one another.
  nested: usize,
  /// Deepest `nested` reached.
  pub max_nested: usize,
  /// The alias nodes of the frames on the stack, in stack order. Frames complete in last-in first-out order, so each
  /// frame's aliases are on top when it finishes; one shared stack means no allocation per node in bottom-up mode.
  aliases: Vec<H::Node>,
}

impl<H: Host> Engine<H> {
  /// A fresh engine.
  pub fn new(host: H, limits: Limits) -> Self {
    Engine {
      host,
      limits,
      produced: 0,
      input_nodes: 0,
      nested: 0,
      max_nested: 0,
      aliases: Vec::new(),
    }
  }

  /// Starts rewriting a replacement inside the replacements being rewritten, failing when they nest deeper than
  /// [`Limits::nested`] plus the input nodes reached so far (a deep input may legitimately nest once per level).
  #[inline]
  fn enter_nested(&mut self) -> Result<(), H::Error> {
    if self.nested >= self.limits.nested + self.input_nodes {
      return Err(self.host.endless(&format!(
        "{} replacements nested in one another, more than {} + the {} input nodes reached (new nodes keep being rewritten into new nodes)",
        self.nested + 1,
        self.limits.nested,
        self.input_nodes
      )));
    }
    self.nested += 1;
    self.max_nested = self.max_nested.max(self.nested);
    Ok(())
  }

  /// Counts a node produced by a rule or a rebuild, failing once the rewrite has produced far more nodes than its input
  /// graph has (see [`Limits::growth_base`]).
  #[inline]
  fn count_produced(&mut self) -> Result<(), H::Error> {
    self.produced += 1;
    if self.produced > self.limits.growth_base && self.produced > self.limits.growth_base + self.limits.growth_factor * self.input_nodes {
      return Err(self.host.endless(&format!(
        "the rules produced {} nodes from an input graph of {} nodes, more than {} + {} per input node (the graph keeps growing)",
        self.produced, self.input_nodes, self.limits.growth_base, self.limits.growth_factor
      )));
    }
    Ok(())
  }

  /// Records that `n` (and the nodes its bottom-up fixpoint went through) rewrite to `v`.
  fn finish(&mut self, n: H::Node, aliases: u32, v: H::Node) {
    if aliases > 0 {
      let from = self.aliases.len() - aliases as usize;
      for a in &self.aliases[from..] {
        self.host.set_state(a, State::Done(v.clone()));
      }
      self.aliases.truncate(from);
    }
    self.host.set_state(&n, State::Done(v));
  }

  /// The sources of `n` with each replaced by its rewrite where it is done, or None when none changed (most nodes: no
  /// vector is allocated for them).
  fn rewritten_src(&self, n: &H::Node) -> Option<Vec<H::Node>> {
    let k = self.host.n_src(n);
    let (first, r) = (0..k).find_map(|i| {
      let c = self.host.src(n, i);
      self.done(&c).filter(|r| *r != c).map(|r| (i, r))
    })?;
    let mut new_src = Vec::with_capacity(k);
    new_src.extend((0..first).map(|i| self.host.src(n, i)));
    new_src.push(r);
    for i in first + 1..k {
      let c = self.host.src(n, i);
      new_src.push(self.done(&c).unwrap_or(c));
    }
    Some(new_src)
  }

  /// The rewritten node, if `n` is done.
  #[inline]
  fn done(&self, n: &H::Node) -> Option<H::Node> {
    match self.host.state(n) {
      Some(State::Done(v)) => Some(v),
      _ => None,
    }
  }

  /// Rewrites `root` to a fixed point (default and bottom-up modes).
  pub fn unified(&mut self, root: H::Node) -> Result<H::Node, H::Error> {
    let mut stack: Vec<Frame<H::Node>> = vec![Frame::Enter(root.clone(), 0)];
    while let Some(frame) = stack.pop() {
      if stack.len() > self.limits.stack {
        return Err(self.host.endless(&format!("the rewrite stack grew past {} frames", self.limits.stack)));
      }
      match frame {
        Frame::Enter(n, chain) => {
          match self.host.state(&n) {
            Some(State::Done(_)) => continue,
            Some(State::InProgress) => return Err(self.host.endless("a node was rewritten into a graph that contains it (a rewrite cycle)")),
            None => self.host.set_state(&n, State::InProgress),
          }
          self.input_nodes += usize::from(!self.host.is_new(&n));
          let mut cur = n.clone();
          let mut aliases: u32 = 0;
          if self.host.has_bottom_up() {
            // apply the bottom-up rules to a fixed point; every node on the way rewrites to the same result as `n`
            let mut finished = None;
            let mut fresh: u32 = 0;
            loop {
              let step = self.host.bottom_up(&cur)?;
              if matches!(step, BottomUp::Replace(_)) {
                self.count_produced()?;
              }
              match step {
                BottomUp::Keep => break,
                BottomUp::Gate => {
                  finished = Some(cur.clone());
                  break;
                }
                BottomUp::Replace(r) => match self.host.state(&r) {
                  Some(State::Done(v)) => {
                    finished = Some(v);
                    break;
                  }
                  Some(State::InProgress) => return Err(self.host.endless("bottom-up rules rewrote a node back into itself (a rewrite cycle)")),
                  None => {
                    fresh += u32::from(self.host.is_new(&r));
                    if fresh > self.limits.chain {
                      return Err(
                        self
                          .host
                          .endless(&format!("more than {} successive bottom-up rewrites of one node", self.limits.chain)),
                      );
                    }
                    self.host.set_state(&r, State::InProgress);
                    self.aliases.push(r.clone());
                    aliases += 1;
                    cur = r;
                  }
                },
              }
            }
            if let Some(v) = finished {
              self.finish(n, aliases, v);
              continue;
            }
          }
          let k = self.host.n_src(&cur);
          if aliases > 0 {
            // a bottom-up replacement's sources are rewritten before it is done: one level deeper
            self.enter_nested()?;
          }
          stack.push(Frame::Rebuild {
            n,
            aliases,
            cur: cur.clone(),
            chain,
          });
          for i in (0..k).rev() {
            stack.push(Frame::Enter(self.host.src(&cur, i), 0));
          }
        }
        Frame::Rebuild { n, aliases, cur, chain } => {
          if aliases > 0 {
            self.nested -= 1;
          }
          let next = if let Some(new_src) = self.rewritten_src(&cur) {
            Some(self.host.rebuild(&cur, new_src)?)
          } else if self.host.has_top_down() {
            self.host.top_down(&cur)?
          } else {
            None
          };
          match next {
            None => self.finish(n, aliases, cur),
            Some(r) => {
              self.count_produced()?;
              if chain >= self.limits.chain {
                return Err(
                  self
                    .host
                    .endless(&format!("more than {} successive rewrites of one node", self.limits.chain)),
                );
              }
              self.enter_nested()?;
              stack.push(Frame::Link { n, aliases, r: r.clone() });
              stack.push(Frame::Enter(r, chain + 1));
            }
          }
        }
        Frame::Link { n, aliases, r } => {
          self.nested -= 1;
          let v = self.done(&r).unwrap_or(r);
          self.finish(n, aliases, v);
        }
      }
    }
    Ok(self.done(&root).unwrap_or(root))
  }

  /// One pass: bottom-up rules once before the sources (a replacement is final), then sources, rebuild, and top-down
  /// rules once (a replacement is final).
  pub fn walk(&mut self, root: H::Node) -> Result<H::Node, H::Error> {
    let mut stack: Vec<(H::Node, bool)> = vec![(root.clone(), false)];
    while let Some((n, processed)) = stack.pop() {
      if self.done(&n).is_some() {
        continue;
      }
      if !processed {
        if self.host.has_bottom_up() {
          match self.host.bottom_up(&n)? {
            BottomUp::Replace(r) => {
              self.host.set_state(&n, State::Done(r));
              continue;
            }
            BottomUp::Gate => {
              self.host.set_state(&n, State::Done(n.clone()));
              continue;
            }
            BottomUp::Keep => {}
          }
        }
        let k = self.host.n_src(&n);
        stack.push((n.clone(), true));
        for i in (0..k).rev() {
          let c = self.host.src(&n, i);
          if self.done(&c).is_none() {
            stack.push((c, false));
          }
        }
      } else {
        let mut m = match self.rewritten_src(&n) {
          Some(new_src) => self.host.rebuild(&n, new_src)?,
          None => n.clone(),
        };
        if self.host.has_top_down() {
          if let Some(r) = self.host.top_down(&m)? {
            m = r;
          }
        }
        self.host.set_state(&n, State::Done(m));
      }
    }
    Ok(self.done(&root).unwrap_or(root))
  }
}

#[cfg(test)]
mod tests {
  use super::{Engine, Limits};
  use crate::toy::{Graph, Id, Kind, Rules, ToyHost};

  fn run(g: &mut Graph, root: Id, rules: Rules, bottom_up: bool, walk: bool) -> (Result<Id, String>, usize) {
    let limits = Limits {
      chain: 300_000,
      stack: 4_000_000,
      ..Limits::default()
    };
    let mut e = Engine::new(ToyHost::new(g, rules, bottom_up), limits);
    let r = if walk { e.walk(root) } else { e.unified(root) };
    let max_visits = e.host.visits.values().copied().max().unwrap_or(0) as usize;
    (r, max_visits)
  }

  #[test]
  fn simplify_folds_to_a_constant_and_preserves_value() {
    let mut g = Graph::default();
    let x = g.node(Kind::Var(0), vec![]);
    let zero = g.node(Kind::Const(0), vec![]);
    let one = g.node(Kind::Const(1), vec![]);
    let two = g.node(Kind::Const(2), vec![]);
    let three = g.node(Kind::Const(3), vec![]);
    let c = g.node(Kind::Add, vec![two, three]);
    let xc = g.node(Kind::Mul, vec![x, one]);
    let e = g.node(Kind::Add, vec![xc, zero]);
    let root = g.node(Kind::Mul, vec![e, c]);
    for bottom_up in [false, true] {
      let (r, visits) = run(&mut g, root, Rules::Simplify, bottom_up, false);
      let r = r.unwrap();
      assert_eq!(g.kind(r), &Kind::Mul);
      let five = g.node(Kind::Const(5), vec![]);
      assert_eq!(g.src(r), &[x, five]);
      assert!(visits <= 1, "a node was rewritten {visits} times in one call");
    }
  }

  #[test]
  fn every_node_rewritten_in_a_mesh_keeps_the_value() {
    let mut g = Graph::default();
    let root = g.mesh(20, 30);
    let vars = |v: u32| i64::from(v) + 2;
    let before = g.eval(root, &vars);
    let (r, visits) = run(&mut g, root, Rules::AddToMul, false, false);
    let r = r.unwrap();
    assert!(visits <= 1);
    assert_ne!(before, g.eval(r, &vars));
    let all = crate::toposort::toposort_all(r, |n, i| g.src(n).get(i).copied());
    assert!(all.iter().all(|n| g.kind(*n) != &Kind::Add));
  }

  #[test]
  fn endless_rewrites_are_errors() {
    let mut g = Graph::default();
    let c = g.node(Kind::Const(0), vec![]);
    let root = g.node(Kind::Neg, vec![c]);
    for bottom_up in [false, true] {
      assert!(run(&mut g, root, Rules::Increment, bottom_up, false).0.is_err());
    }
    let v = g.node(Kind::Var(0), vec![]);
    let root = g.node(Kind::Neg, vec![v]);
    for bottom_up in [false, true] {
      assert!(run(&mut g, root, Rules::Flip, bottom_up, false).0.unwrap_err().contains("cycle"));
    }
    assert!(run(&mut g, root, Rules::Grow, false, false).0.unwrap_err().contains("cycle"));
  }

  #[test]
  fn deepening_rewrites_fail_on_nesting() {
    let mut g = Graph::default();
    let c = g.node(Kind::Const(0), vec![]);
    let root = g.node(Kind::Neg, vec![c]);
    for bottom_up in [false, true] {
      let err = run(&mut g, root, Rules::Deepen, bottom_up, false).0.unwrap_err();
      assert!(err.contains("nested"), "{err}");
    }
  }

  #[test]
  fn walk_does_not_revisit_replacements() {
    let mut g = Graph::default();
    let c = g.node(Kind::Const(0), vec![]);
    let root = g.node(Kind::Neg, vec![c]);
    let (r, _) = run(&mut g, root, Rules::Increment, false, true);
    let r = r.unwrap();
    let one = g.node(Kind::Const(1), vec![]);
    assert_eq!(g.src(r), &[one]);
  }

  #[test]
  fn deep_chains_need_no_recursion() {
    let mut g = Graph::default();
    let mut n = g.node(Kind::Var(0), vec![]);
    let zero = g.node(Kind::Const(0), vec![]);
    for _ in 0..200_000 {
      n = g.node(Kind::Add, vec![n, zero]);
    }
    for bottom_up in [false, true] {
      let (r, _) = run(&mut g, n, Rules::Simplify, bottom_up, false);
      assert_eq!(g.kind(r.unwrap()), &Kind::Var(0));
    }
  }
}
