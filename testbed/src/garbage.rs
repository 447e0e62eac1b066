//! Garbage for decoder tests: a small deterministic generator and a mutator of valid inputs, so
//! the bounded randomized loops that stand in for the `fuzz/` targets in CI share one source of
//! bytes (seeded: a failure replays).

/// xorshift64: fast, deterministic, good enough to pick bytes and positions.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Up to `max - 1` random bytes.
    pub fn bytes(&mut self, max: usize) -> Vec<u8> {
        (0..self.below(max))
            .map(|_| self.next_u64() as u8)
            .collect()
    }
}

/// `seed` changed one to five times: a byte overwritten, the tail cut, a byte of `alphabet` (the
/// decoder's structural characters) inserted, random bytes appended, or the whole doubled.
pub fn mutate(rng: &mut Rng, seed: &[u8], alphabet: &[u8]) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..=rng.below(4) {
        match rng.below(5) {
            0 if !v.is_empty() => {
                let i = rng.below(v.len());
                v[i] = rng.next_u64() as u8;
            }
            1 => v.truncate(rng.below(v.len() + 1)),
            2 => {
                let i = rng.below(v.len() + 1);
                if let Some(&c) = alphabet.get(rng.below(alphabet.len())) {
                    v.insert(i, c);
                }
            }
            3 => {
                let extra = rng.bytes(64);
                v.extend(extra);
            }
            _ => {
                let copy = v.clone();
                v.extend(copy);
            }
        }
    }
    v
}
