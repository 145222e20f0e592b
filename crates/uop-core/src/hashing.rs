//! A fast hasher for maps keyed by object addresses (graph traversals visit every node once, so hashing is hot).

use std::hash::{BuildHasherDefault, Hasher};

/// Hashes a single machine word with one multiply; addresses are already unique, they only need spreading.
#[derive(Default, Clone, Copy)]
pub struct AddrHasher(u64);

impl Hasher for AddrHasher {
  #[inline]
  fn finish(&self) -> u64 {
    self.0
  }
  #[inline]
  fn write(&mut self, bytes: &[u8]) {
    for b in bytes {
      self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
  }
  #[inline]
  fn write_usize(&mut self, n: usize) {
    let x = (n as u64 ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    self.0 = x ^ (x >> 29);
  }
  #[inline]
  fn write_u32(&mut self, n: u32) {
    self.write_usize(n as usize);
  }
  #[inline]
  fn write_u64(&mut self, n: u64) {
    self.write_usize(n as usize);
  }
}

/// `BuildHasher` for [`AddrHasher`].
pub type AddrBuild = BuildHasherDefault<AddrHasher>;
/// A set of addresses.
pub type AddrSet<K> = hashbrown::HashSet<K, AddrBuild>;
/// A map keyed by addresses.
pub type AddrMap<K, V> = hashbrown::HashMap<K, V, AddrBuild>;
