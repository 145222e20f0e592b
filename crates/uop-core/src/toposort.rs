//! Topological order of a DAG: children before parents, children in source order, each node once.
//!
//! Iterative (an explicit stack of (node, next child index)), so a chain a million nodes deep needs no recursion.
//! Generic over the node handle so it can be tested and benchmarked without Python.

use std::hash::Hash;

use crate::hashing::AddrSet;

/// Post-order DFS from `root`. `child(n, i)` returns the i-th source of `n` or None past the end. `gate(n)` decides
/// whether a node (and everything only reachable through it) is visited; a gated-out node is not in the result.
/// `first_visit(n)` marks `n` as seen and tells whether it was not seen before.
pub fn toposort<N, E>(
  root: N,
  mut child: impl FnMut(N, usize) -> Option<N>,
  mut gate: impl FnMut(N) -> Result<bool, E>,
  mut first_visit: impl FnMut(N) -> bool,
) -> Result<Vec<N>, E>
where
  N: Copy,
{
  let mut out = Vec::new();
  if !gate(root)? {
    return Ok(out);
  }
  first_visit(root);
  let mut stack: Vec<(N, usize)> = vec![(root, 0)];
  while let Some(top) = stack.last_mut() {
    let (n, i) = *top;
    match child(n, i) {
      Some(c) => {
        top.1 += 1;
        if first_visit(c) && gate(c)? {
          stack.push((c, 0));
        }
      }
      None => {
        out.push(n);
        stack.pop();
      }
    }
  }
  Ok(out)
}

/// Every node under `root`, with a hash set for the marks (for callers without per-node marks).
pub fn toposort_all<N: Copy + Eq + Hash>(root: N, child: impl FnMut(N, usize) -> Option<N>) -> Vec<N> {
  let mut seen: AddrSet<N> = AddrSet::default();
  let r: Result<Vec<N>, ()> = toposort(root, child, |_| Ok(true), |n| seen.insert(n));
  r.unwrap_or_default()
}

#[cfg(test)]
mod tests {
  use super::{toposort, toposort_all};
  use std::collections::HashSet;

  fn run(edges: &[Vec<usize>], root: usize) -> Vec<usize> {
    toposort_all(root, |n, i| edges[n].get(i).copied())
  }

  #[test]
  fn children_before_parents_in_source_order() {
    // 0 = f(1, 2), 1 = g(3), 2 = h(3, 1)
    let edges = vec![vec![1, 2], vec![3], vec![3, 1], vec![]];
    assert_eq!(run(&edges, 0), vec![3, 1, 2, 0]);
  }

  #[test]
  fn deep_chain_is_iterative() {
    let n = 1_000_000;
    let edges: Vec<Vec<usize>> = (0..n).map(|i| if i + 1 < n { vec![i + 1] } else { vec![] }).collect();
    let order = run(&edges, 0);
    assert_eq!(order.len(), n);
    assert_eq!(order[0], n - 1);
    assert_eq!(*order.last().unwrap(), 0);
  }

  #[test]
  fn gate_prunes_subgraphs() {
    let edges = [vec![1, 2], vec![3], vec![], vec![]];
    let mut seen = HashSet::new();
    let order = toposort::<usize, ()>(0, |n, i| edges[n].get(i).copied(), |n| Ok(n != 1), |n| seen.insert(n)).unwrap();
    assert_eq!(order, vec![2, 0]);
  }

  #[test]
  fn shared_nodes_appear_once() {
    let edges = vec![vec![1, 1, 2], vec![2], vec![]];
    assert_eq!(run(&edges, 0), vec![2, 1, 0]);
  }
}
