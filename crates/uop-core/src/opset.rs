//! A set of op values as a 256-bit bitset: op filters of patterns and the early-reject check are a few AND/ORs.

/// Set of `Ops` values (0..256).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct OpSet([u64; 4]);

impl OpSet {
  /// Adds an op.
  #[inline]
  pub fn insert(&mut self, op: u8) {
    self.0[(op >> 6) as usize] |= 1u64 << (op & 63);
  }
  /// Adds every op of `other`.
  #[inline]
  pub fn insert_all(&mut self, other: &OpSet) {
    for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
      *a |= b;
    }
  }
  /// Whether `op` is in the set.
  #[inline]
  pub fn contains(&self, op: u8) -> bool {
    self.0[(op >> 6) as usize] & (1u64 << (op & 63)) != 0
  }
  /// Whether every op of `self` is in `other`.
  #[inline]
  pub fn is_subset(&self, other: &OpSet) -> bool {
    self.0.iter().zip(other.0.iter()).all(|(a, b)| a & !b == 0)
  }
  /// Whether the set is empty.
  #[inline]
  pub fn is_empty(&self) -> bool {
    self.0.iter().all(|w| *w == 0)
  }
  /// The ops in the set, ascending.
  pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
    (0..=255u8).filter(move |op| self.contains(*op))
  }
}

impl FromIterator<u8> for OpSet {
  fn from_iter<I: IntoIterator<Item = u8>>(iter: I) -> Self {
    let mut s = OpSet::default();
    for op in iter {
      s.insert(op);
    }
    s
  }
}

#[cfg(test)]
mod tests {
  use super::OpSet;

  #[test]
  fn insert_contains_subset() {
    let a: OpSet = [1u8, 64, 200].into_iter().collect();
    let b: OpSet = [1u8, 2, 64, 200, 255].into_iter().collect();
    assert!(a.contains(64) && a.contains(200) && !a.contains(2));
    assert!(a.is_subset(&b) && !b.is_subset(&a));
    assert!(OpSet::default().is_subset(&a) && OpSet::default().is_empty());
    assert_eq!(b.iter().collect::<Vec<_>>(), vec![1, 2, 64, 200, 255]);
  }
}
