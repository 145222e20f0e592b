//! Compiled patterns and the matching algorithm, generic over the graph they are matched against ([`MatchHost`]).
//!
//! A [`Pattern`] is a flat program of [`PatNode`]s referring to each other by index: flat so that neither building,
//! matching nor dropping a pattern recurses (patterns may nest arbitrarily deep), and so that a sub-pattern used in
//! several places is one node. Capture names are slot numbers. The Python `UPat` compiles to this form (see `upat`);
//! the toy host of the tests builds it directly.
//!
//! Matching is a backtracking search: every complete match is handed to a continuation (which runs the rule's
//! callback), and the search goes on to the next match when the continuation declines, the semantics of trying each
//! match in turn.

use crate::opset::OpSet;

/// Index of a node in a [`Pattern`].
pub type PatId = u32;

/// How a pattern node constrains the sources of a graph node (children are indices into the pattern).
pub enum PatSrc {
  /// No constraint.
  Unchecked,
  /// In order (a prefix when the node is not strict).
  Seq(Vec<PatId>),
  /// Each listed permutation of the patterns, in `itertools.permutations` order.
  Perms(Vec<PatId>, Vec<Vec<usize>>),
  /// Every source matches this.
  Repeat(PatId),
  /// The graph node itself matches any of these (the node's own fields are not checked).
  Any(Vec<PatId>),
}

/// Most sources an any-order constraint may list: its permutations are enumerated, so this bounds their number
/// (8! = 40320).
pub const MAX_PERM_LEN: usize = 8;

impl PatSrc {
  /// Sources in any order: every permutation of `pats`, or just one when they are all the same pattern.
  pub fn any_order(pats: Vec<PatId>) -> Result<PatSrc, String> {
    let all_same = pats.windows(2).all(|w| w[0] == w[1]);
    if all_same {
      let identity = (0..pats.len()).collect();
      return Ok(PatSrc::Perms(pats, vec![identity]));
    }
    if pats.len() > MAX_PERM_LEN {
      return Err(format!(
        "UPat src=[...] (any order) lists {} patterns; at most {MAX_PERM_LEN} are allowed (their permutations are tried)",
        pats.len()
      ));
    }
    let perms = permutations(pats.len());
    Ok(PatSrc::Perms(pats, perms))
  }

  /// The pattern nodes this constraint refers to.
  fn children(&self) -> &[PatId] {
    match self {
      PatSrc::Unchecked => &[],
      PatSrc::Seq(v) | PatSrc::Perms(v, _) | PatSrc::Any(v) => v,
      PatSrc::Repeat(p) => std::slice::from_ref(p),
    }
  }
}

/// All permutations of `0..n` in lexicographic order, as `itertools.permutations` yields them.
fn permutations(n: usize) -> Vec<Vec<usize>> {
  let mut out = vec![];
  let mut cur: Vec<usize> = (0..n).collect();
  loop {
    out.push(cur.clone());
    let Some(i) = (1..n).rev().find(|&i| cur[i - 1] < cur[i]) else { break };
    let j = (i..n).rev().find(|&j| cur[j] > cur[i - 1]).unwrap_or(i);
    cur.swap(i - 1, j);
    cur[i..].reverse();
  }
  out
}

/// One node of a pattern. `A` is the host's argument value, `T` its tag value.
pub struct PatNode<A, T> {
  /// Ops the node may have (None: any).
  pub ops: Option<OpSet>,
  /// DType identities the node may have (None: any).
  pub dtypes: Option<Vec<usize>>,
  /// The arg the node must have (None: any).
  pub arg: Option<A>,
  /// Tags the node may have (None: any).
  pub tags: Option<Vec<T>>,
  /// The capture slot the node is bound to.
  pub slot: Option<usize>,
  /// Whether the number of sources must equal `required_len` (else at least that many).
  pub strict: bool,
  /// Minimum number of sources.
  pub required_len: usize,
  /// The source constraint.
  pub src: PatSrc,
}

impl<A, T> Default for PatNode<A, T> {
  /// Matches any node.
  fn default() -> Self {
    PatNode {
      ops: None,
      dtypes: None,
      arg: None,
      tags: None,
      slot: None,
      strict: false,
      required_len: 0,
      src: PatSrc::Unchecked,
    }
  }
}

/// A compiled pattern: its nodes and the root's index.
pub struct Pattern<A, T> {
  nodes: Vec<PatNode<A, T>>,
  root: PatId,
}

impl<A, T> Pattern<A, T> {
  /// A pattern over `nodes` matching from `root`; every index must be in range.
  pub fn new(nodes: Vec<PatNode<A, T>>, root: PatId) -> Result<Self, String> {
    let in_range = |i: PatId| (i as usize) < nodes.len();
    if !in_range(root) || !nodes.iter().all(|n| n.src.children().iter().all(|&c| in_range(c))) {
      return Err("a pattern refers to a node it does not have".to_string());
    }
    Ok(Pattern { nodes, root })
  }

  #[inline]
  fn node(&self, i: PatId) -> &PatNode<A, T> {
    &self.nodes[i as usize]
  }

  /// Ops a node must have to possibly match (None: any op). For alternations, the union of the alternatives.
  pub fn root_ops(&self) -> Option<OpSet> {
    let mut s = OpSet::default();
    let mut seen = vec![false; self.nodes.len()];
    let mut stack: Vec<PatId> = vec![self.root];
    while let Some(i) = stack.pop() {
      if std::mem::replace(&mut seen[i as usize], true) {
        continue;
      }
      let n = self.node(i);
      match &n.src {
        PatSrc::Any(alts) => stack.extend(alts.iter().copied()),
        _ => s.insert_all(&n.ops?),
      }
    }
    Some(s)
  }
}

/// What matching needs from the graph: each node's op, dtype identity, sources, and how its arg and tag compare.
pub trait MatchHost {
  /// A node handle; equality is node identity.
  type Node: Copy + PartialEq;
  /// A pattern's arg value.
  type Arg;
  /// A pattern's tag value.
  type Tag;
  /// Error of an arg or tag comparison (a Python exception for the real host).
  type Error;
  /// The op of `n`.
  fn op(&self, n: Self::Node) -> u8;
  /// The identity of the dtype of `n`.
  fn dtype(&self, n: Self::Node) -> usize;
  /// Number of sources of `n`.
  fn n_src(&self, n: Self::Node) -> usize;
  /// Source `i` of `n`.
  fn src(&self, n: Self::Node, i: usize) -> Self::Node;
  /// Whether the arg of `n` equals `arg`.
  fn arg_is(&self, n: Self::Node, arg: &Self::Arg) -> Result<bool, Self::Error>;
  /// Whether the tag of `n` is one of `tags`.
  fn tag_in(&self, n: Self::Node, tags: &[Self::Tag]) -> Result<bool, Self::Error>;
}

/// "No next goal".
const NIL: u32 = u32::MAX;

/// A pending (pattern node, graph node) pair; goals form linked lists in [`Machine::goals`].
#[derive(Clone, Copy)]
struct Goal<N> {
  pat: PatId,
  node: N,
  next: u32,
}

/// A point the search returns to when a branch fails: the goals and captures as they were, and the next alternative.
struct Choice<N> {
  /// The Any or Perms pattern node with alternatives left, and the graph node it is matched against.
  pat: PatId,
  node: N,
  /// The next alternative (alternation member or permutation) to try.
  next: usize,
  head: u32,
  goals_len: usize,
  trail_len: usize,
}

/// The matcher's working memory. A caller matching many nodes keeps one, so that no match allocates.
pub struct Machine<N> {
  /// Goal cells: a goal list is a chain of cells; a choice keeps its list by remembering its head, and cells made after
  /// a choice are discarded when the search returns to it.
  goals: Vec<Goal<N>>,
  choices: Vec<Choice<N>>,
  /// Capture slots bound so far, in order, to unbind on backtracking.
  trail: Vec<usize>,
}

impl<N> Default for Machine<N> {
  fn default() -> Self {
    Machine {
      goals: Vec::new(),
      choices: Vec::new(),
      trail: Vec::new(),
    }
  }
}

impl<N: Copy> Machine<N> {
  #[inline]
  fn push(&mut self, pat: PatId, node: N, next: u32) -> u32 {
    self.goals.push(Goal { pat, node, next });
    (self.goals.len() - 1) as u32
  }

  /// Records a point to come back to with alternative 1 of `pat` (alternative 0 is tried now), from the goal list `head`.
  #[inline]
  fn choice_point(&mut self, pat: PatId, node: N, head: u32) {
    let (goals_len, trail_len) = (self.goals.len(), self.trail.len());
    self.choices.push(Choice {
      pat,
      node,
      next: 1,
      head,
      goals_len,
      trail_len,
    });
  }

  /// Pushes goals matching source `i` of `node` against `pat_at(i)` for `i < len`, the first on top; returns the new
  /// head.
  #[inline]
  fn push_seq<H: MatchHost<Node = N>>(&mut self, host: &H, mut head: u32, node: N, len: usize, pat_at: impl Fn(usize) -> PatId) -> u32 {
    for i in (0..len).rev() {
      head = self.push(pat_at(i), host.src(node, i), head);
    }
    head
  }

  #[inline]
  fn unbind_to(&mut self, len: usize, caps: &mut [Option<N>]) {
    while self.trail.len() > len {
      if let Some(s) = self.trail.pop() {
        caps[s] = None;
      }
    }
  }
}

/// Whether `n` passes the checks of pattern node `p` that do not involve its sources; binds its capture slot.
#[inline]
fn check_fields<H: MatchHost>(
  host: &H,
  p: &PatNode<H::Arg, H::Tag>,
  n: H::Node,
  caps: &mut [Option<H::Node>],
  trail: &mut Vec<usize>,
) -> Result<bool, H::Error> {
  if p.ops.is_some_and(|ops| !ops.contains(host.op(n))) {
    return Ok(false);
  }
  if let Some(s) = p.slot {
    match caps[s] {
      Some(c) if c != n => return Ok(false),
      Some(_) => {}
      None => {
        caps[s] = Some(n);
        trail.push(s);
      }
    }
  }
  if p.dtypes.as_ref().is_some_and(|d| !d.contains(&host.dtype(n))) {
    return Ok(false);
  }
  if let Some(a) = &p.arg {
    if !host.arg_is(n, a)? {
      return Ok(false);
    }
  }
  if let Some(tags) = &p.tags {
    if !host.tag_in(n, tags)? {
      return Ok(false);
    }
  }
  let k = host.n_src(n);
  Ok(k >= p.required_len && !(p.strict && k != p.required_len))
}

/// Matches `pat` against `node`, calling `k` with the captures for every complete match until it returns `Some`.
///
/// Matches are tried in the order a recursive matcher would find them: depth first, sources left to right, alternatives
/// and permutations in order. The search runs on explicit goal and choice stacks, so pattern depth is not limited by
/// the native stack. `caps` (one entry per capture slot) is left as it was on entry, and so is `m`.
pub fn match_node<H: MatchHost, R>(
  host: &H,
  pat: &Pattern<H::Arg, H::Tag>,
  node: H::Node,
  caps: &mut [Option<H::Node>],
  m: &mut Machine<H::Node>,
  mut k: impl FnMut(&[Option<H::Node>]) -> Result<Option<R>, H::Error>,
) -> Result<Option<R>, H::Error> {
  // most attempts fail on the root's op or dtype: decide those before anything else
  let root = pat.node(pat.root);
  if !matches!(root.src, PatSrc::Any(_))
    && (root.ops.is_some_and(|ops| !ops.contains(host.op(node))) || root.dtypes.as_ref().is_some_and(|d| !d.contains(&host.dtype(node))))
  {
    return Ok(None);
  }
  let mut head = m.push(pat.root, node, NIL);
  let result = 'search: loop {
    // run the goal list until it is empty (a match) or a goal fails
    let matched = loop {
      if head == NIL {
        break true;
      }
      let g = m.goals[head as usize];
      head = g.next;
      let p = pat.node(g.pat);
      if let PatSrc::Any(alts) = &p.src {
        let Some(&first) = alts.first() else { break false };
        if alts.len() > 1 {
          m.choice_point(g.pat, g.node, head);
        }
        head = m.push(first, g.node, head);
        continue;
      }
      match check_fields(host, p, g.node, caps, &mut m.trail) {
        Ok(true) => {}
        Ok(false) => break false,
        Err(e) => break 'search Err(e),
      }
      let n_src = host.n_src(g.node);
      match &p.src {
        PatSrc::Unchecked => {}
        PatSrc::Seq(pats) => head = m.push_seq(host, head, g.node, pats.len().min(n_src), |i| pats[i]),
        PatSrc::Perms(pats, perms) => {
          if perms.len() > 1 {
            m.choice_point(g.pat, g.node, head);
          }
          let perm = &perms[0];
          head = m.push_seq(host, head, g.node, pats.len().min(n_src), |i| pats[perm[i]]);
        }
        PatSrc::Repeat(r) => head = m.push_seq(host, head, g.node, n_src, |_| *r),
        PatSrc::Any(_) => unreachable!("alternations are handled above"),
      }
    };
    if matched {
      match k(caps) {
        Ok(Some(r)) => break 'search Ok(Some(r)),
        Ok(None) => {}
        Err(e) => break 'search Err(e),
      }
    }
    // go back to the latest choice with an alternative left
    let Some(c) = m.choices.last_mut() else { break 'search Ok(None) };
    let (cpat, cnode, i) = (c.pat, c.node, c.next);
    c.next += 1;
    head = c.head;
    let (goals_len, trail_len) = (c.goals_len, c.trail_len);
    let p = pat.node(cpat);
    let last = match &p.src {
      PatSrc::Any(alts) => alts.len() == i + 1,
      PatSrc::Perms(_, perms) => perms.len() == i + 1,
      _ => unreachable!("only alternations and permutations leave choices"),
    };
    if last {
      m.choices.pop();
    }
    m.goals.truncate(goals_len);
    m.unbind_to(trail_len, caps);
    match &p.src {
      PatSrc::Any(alts) => head = m.push(alts[i], cnode, head),
      PatSrc::Perms(pats, perms) => {
        let perm = &perms[i];
        head = m.push_seq(host, head, cnode, pats.len().min(host.n_src(cnode)), |j| pats[perm[j]]);
      }
      _ => unreachable!("only alternations and permutations leave choices"),
    }
  };
  m.unbind_to(0, caps);
  m.goals.clear();
  m.choices.clear();
  result
}

#[cfg(test)]
mod tests {
  use super::{match_node, permutations, Machine, PatNode, PatSrc, Pattern};
  use crate::opset::OpSet;
  use crate::toy::{Graph, Id, Kind};

  #[test]
  fn permutations_follow_itertools_order() {
    assert_eq!(
      permutations(3),
      vec![vec![0, 1, 2], vec![0, 2, 1], vec![1, 0, 2], vec![1, 2, 0], vec![2, 0, 1], vec![2, 1, 0]]
    );
    assert_eq!(permutations(1), vec![vec![0]]);
  }

  fn ops(kinds: &[Kind]) -> Option<OpSet> {
    let mut s = OpSet::default();
    kinds.iter().for_each(|k| s.insert(Graph::op_of(k)));
    Some(s)
  }

  fn var(slot: usize) -> PatNode<i64, i64> {
    PatNode {
      slot: Some(slot),
      ..PatNode::default()
    }
  }

  fn konst(arg: Option<i64>, slot: Option<usize>) -> PatNode<i64, i64> {
    PatNode {
      ops: ops(&[Kind::Const(0)]),
      arg,
      slot,
      strict: true,
      ..PatNode::default()
    }
  }

  /// Every complete match of `pat` against `node`, as the captures of each.
  fn all_matches(g: &Graph, pat: &Pattern<i64, i64>, node: Id, slots: usize) -> Vec<Vec<Option<Id>>> {
    let mut caps = vec![None; slots];
    let mut m = Machine::default();
    let mut seen = vec![];
    let r: Result<Option<()>, String> = match_node(g, pat, node, &mut caps, &mut m, |c| {
      seen.push(c.to_vec());
      Ok(None)
    });
    assert_eq!(r, Ok(None));
    assert!(caps.iter().all(Option::is_none), "captures must be unbound after the search");
    seen
  }

  #[test]
  fn sequence_binds_captures_and_checks_args() {
    // ADD(x, CONST 0)
    let mut g = Graph::default();
    let x = g.node(Kind::Var(7), vec![]);
    let zero = g.node(Kind::Const(0), vec![]);
    let one = g.node(Kind::Const(1), vec![]);
    let add0 = g.node(Kind::Add, vec![x, zero]);
    let add1 = g.node(Kind::Add, vec![x, one]);
    let nodes = vec![
      PatNode {
        ops: ops(&[Kind::Add]),
        strict: true,
        required_len: 2,
        src: PatSrc::Seq(vec![1, 2]),
        ..PatNode::default()
      },
      var(0),
      konst(Some(0), None),
    ];
    let pat = Pattern::new(nodes, 0).unwrap();
    assert_eq!(all_matches(&g, &pat, add0, 1), vec![vec![Some(x)]]);
    assert!(all_matches(&g, &pat, add1, 1).is_empty());
    assert!(all_matches(&g, &pat, x, 1).is_empty());
    assert_eq!(pat.root_ops(), ops(&[Kind::Add]));
  }

  #[test]
  fn any_order_tries_every_permutation_in_order() {
    // MUL[x, c] (any order) against MUL(CONST 2, CONST 3): both orders match
    let mut g = Graph::default();
    let two = g.node(Kind::Const(2), vec![]);
    let three = g.node(Kind::Const(3), vec![]);
    let mul = g.node(Kind::Mul, vec![two, three]);
    let nodes = vec![
      PatNode {
        ops: ops(&[Kind::Mul]),
        strict: true,
        required_len: 2,
        src: PatSrc::any_order(vec![1, 2]).unwrap(),
        ..PatNode::default()
      },
      var(0),
      konst(None, Some(1)),
    ];
    let pat = Pattern::new(nodes, 0).unwrap();
    assert_eq!(
      all_matches(&g, &pat, mul, 2),
      vec![vec![Some(two), Some(three)], vec![Some(three), Some(two)]]
    );
    assert!(PatSrc::any_order((0..9).collect()).is_err());
    assert!(PatSrc::any_order(vec![1; 9]).is_ok(), "one pattern repeated has a single order");
  }

  #[test]
  fn a_repeated_name_must_bind_the_same_node() {
    // ADD(x, x)
    let mut g = Graph::default();
    let a = g.node(Kind::Var(0), vec![]);
    let b = g.node(Kind::Var(1), vec![]);
    let aa = g.node(Kind::Add, vec![a, a]);
    let ab = g.node(Kind::Add, vec![a, b]);
    let nodes = vec![
      PatNode {
        ops: ops(&[Kind::Add]),
        src: PatSrc::Seq(vec![1, 1]),
        required_len: 2,
        ..PatNode::default()
      },
      var(0),
    ];
    let pat = Pattern::new(nodes, 0).unwrap();
    assert_eq!(all_matches(&g, &pat, aa, 1), vec![vec![Some(a)]]);
    assert!(all_matches(&g, &pat, ab, 1).is_empty());
  }

  #[test]
  fn alternation_and_repeat() {
    // NEG(CONST | VAR as y) and ADD(every source a CONST)
    let mut g = Graph::default();
    let c = g.node(Kind::Const(4), vec![]);
    let v = g.node(Kind::Var(0), vec![]);
    let neg_c = g.node(Kind::Neg, vec![c]);
    let neg_v = g.node(Kind::Neg, vec![v]);
    let nodes = vec![
      PatNode {
        ops: ops(&[Kind::Neg]),
        src: PatSrc::Seq(vec![1]),
        required_len: 1,
        strict: true,
        ..PatNode::default()
      },
      PatNode {
        src: PatSrc::Any(vec![2, 3]),
        ..PatNode::default()
      },
      konst(None, Some(0)),
      PatNode {
        ops: ops(&[Kind::Var(0)]),
        slot: Some(0),
        ..PatNode::default()
      },
    ];
    let pat = Pattern::new(nodes, 0).unwrap();
    assert_eq!(all_matches(&g, &pat, neg_c, 1), vec![vec![Some(c)]]);
    assert_eq!(all_matches(&g, &pat, neg_v, 1), vec![vec![Some(v)]]);
    let sum_consts = g.node(Kind::Add, vec![c, c, c]);
    let sum_mixed = g.node(Kind::Add, vec![c, v]);
    let nodes = vec![
      PatNode {
        ops: ops(&[Kind::Add]),
        src: PatSrc::Repeat(1),
        ..PatNode::default()
      },
      konst(None, None),
    ];
    let pat = Pattern::new(nodes, 0).unwrap();
    assert_eq!(all_matches(&g, &pat, sum_consts, 0).len(), 1);
    assert!(all_matches(&g, &pat, sum_mixed, 0).is_empty());
    assert!(Pattern::<i64, i64>::new(vec![PatNode::default()], 1).is_err());
  }

  #[test]
  fn continuation_result_stops_the_search() {
    let mut g = Graph::default();
    let a = g.node(Kind::Var(0), vec![]);
    let b = g.node(Kind::Var(1), vec![]);
    let add = g.node(Kind::Add, vec![a, b]);
    let nodes = vec![
      PatNode {
        ops: ops(&[Kind::Add]),
        src: PatSrc::any_order(vec![1, 2]).unwrap(),
        required_len: 2,
        ..PatNode::default()
      },
      var(0),
      var(1),
    ];
    let pat = Pattern::new(nodes, 0).unwrap();
    let (mut caps, mut m, mut calls) = (vec![None; 2], Machine::default(), 0);
    // decline the first match, accept the second (the other order)
    let r: Result<Option<Id>, String> = match_node(&g, &pat, add, &mut caps, &mut m, |c| {
      calls += 1;
      Ok((calls == 2).then(|| c[0].unwrap()))
    });
    assert_eq!(r, Ok(Some(b)));
    let err: Result<Option<()>, String> = match_node(&g, &pat, add, &mut caps, &mut m, |_| Err("stop".to_string()));
    assert_eq!(err, Err("stop".to_string()));
    assert!(caps.iter().all(Option::is_none));
  }

  #[test]
  fn deep_patterns_need_no_recursion() {
    // NEG(NEG(...(VAR)...)) 100k deep, matched by a pattern as deep
    let mut g = Graph::default();
    let depth = 100_000;
    let mut n = g.node(Kind::Var(0), vec![]);
    for _ in 0..depth {
      n = g.node(Kind::Neg, vec![n]);
    }
    let mut nodes: Vec<PatNode<i64, i64>> = (0..depth)
      .map(|i| PatNode {
        ops: ops(&[Kind::Neg]),
        src: PatSrc::Seq(vec![i + 1]),
        required_len: 1,
        ..PatNode::default()
      })
      .collect();
    nodes.push(var(0));
    let pat = Pattern::new(nodes, 0).unwrap();
    assert_eq!(all_matches(&g, &pat, n, 1).len(), 1);
  }
}
