//! `random`: uniform among the hosts that fit.
//!
//! The APSR paper's Random baseline (and APSR's own pick among the sampled hosts that fit):
//! every passing host is equally likely to be chosen, and the alternates are further uniform
//! draws without replacement.

use rand::Rng;

/// Moves a uniform random sample of `k` items, in random order, to the front of `items`
/// (a partial Fisher–Yates shuffle: `k` draws, no allocation).
pub fn shuffle_prefix<T>(items: &mut [T], k: usize, rng: &mut impl Rng) {
    let n = items.len();
    for i in 0..k.min(n.saturating_sub(1)) {
        let j = rng.gen_range(i..n);
        items.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn first_item_is_uniform() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut counts = [0u32; 4];
        for _ in 0..8000 {
            let mut items = [0, 1, 2, 3];
            shuffle_prefix(&mut items, 1, &mut rng);
            counts[items[0]] += 1;
        }
        for c in counts {
            assert!((1800..2200).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn prefix_is_a_sample_without_replacement() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let cases = [(5, 3), (5, 5), (5, 9), (1, 1), (0, 2)];
        for (n, k) in cases {
            let mut items: Vec<usize> = (0..n).collect();
            shuffle_prefix(&mut items, k, &mut rng);
            let mut sorted = items.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "n={n} k={k}");
        }
    }
}
