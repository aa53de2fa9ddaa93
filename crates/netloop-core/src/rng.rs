//! Seeded random streams, one per component.
//!
//! Each component (a link direction's loss model, a traffic source, …) draws
//! from its own stream, derived from the run's seed and the component's stable
//! name. Adding a component or changing the order in which components draw
//! therefore changes no other component's numbers — a property that the
//! ns-3 and OMNeT++ communities learned to want the hard way.
//!
//! The generator is ChaCha8 (`rand_chacha`), whose output is specified and
//! portable, so a seed gives the same numbers on every machine and version.

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A deterministic random stream for one component.
#[derive(Clone, Debug)]
pub struct RngStream {
    rng: ChaCha8Rng,
}

/// FNV-1a: a stable hash of the component's name (std's hasher is not
/// guaranteed stable across Rust releases).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// SplitMix64 step, used to spread the seed over the 32-byte key.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl RngStream {
    /// The stream named `name` in the run seeded with `seed`.
    pub fn new(seed: u64, name: &str) -> Self {
        let mut state = seed ^ fnv1a(name.as_bytes()).rotate_left(17);
        let mut key = [0u8; 32];
        for chunk in key.chunks_mut(8) {
            chunk.copy_from_slice(&splitmix(&mut state).to_le_bytes());
        }
        RngStream {
            rng: ChaCha8Rng::from_seed(key),
        }
    }

    /// A uniform float in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.rng.random::<f64>()
    }

    /// `true` with probability `p` (p ≤ 0 never, p ≥ 1 always; no draw is
    /// made for p ≤ 0 so that a loss-free link consumes no randomness).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            false
        } else if p >= 1.0 {
            true
        } else {
            self.uniform() < p
        }
    }

    /// A uniform integer in [0, n).
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            0
        } else {
            self.rng.random_range(0..n)
        }
    }
}

impl RngCore for RngStream {
    fn next_u32(&mut self) -> u32 {
        self.rng.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        self.rng.fill_bytes(dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_and_name_same_stream() {
        let a: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(RngStream::new(7, "link"), |r, _| Some(r.next_u64()))
            .collect();
        let b: Vec<u64> = (0..4)
            .map(|_| 0)
            .scan(RngStream::new(7, "link"), |r, _| Some(r.next_u64()))
            .collect();
        assert_eq!(a, b);
    }

    #[test]
    fn names_and_seeds_separate_streams() {
        let x = RngStream::new(7, "a").next_u64();
        assert_ne!(x, RngStream::new(7, "b").next_u64());
        assert_ne!(x, RngStream::new(8, "a").next_u64());
    }

    #[test]
    fn chance_edges_draw_nothing() {
        let mut r = RngStream::new(1, "x");
        let before = r.clone().next_u64();
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
        assert_eq!(r.next_u64(), before);
    }
}
