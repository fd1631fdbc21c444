//! A small byte mutator for the stable smoke in CI: libFuzzer's coverage-guided search needs a
//! nightly compiler, and CI builds on stable, so CI mutates the seeds blindly instead (bit flips,
//! interesting bytes, inserted, deleted and repeated ranges, splices of another seed).

use rand::Rng;

/// Bytes parsers treat specially: JSON's and protobuf's structure, signs, extremes.
const INTERESTING: &[u8] =
    b"\0\x01\x7f\x80\xff{}[]\":,-+.0123456789eE\\/nftu \n\x08\x0a\x12\x1a\x22";

/// `input` changed in one to four places, perhaps spliced with `other`.
pub fn mutate(input: &[u8], other: &[u8], rng: &mut impl Rng) -> Vec<u8> {
    let mut bytes = input.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let at = if bytes.is_empty() {
            0
        } else {
            rng.random_range(0..bytes.len())
        };
        match rng.random_range(0..7) {
            0 if !bytes.is_empty() => bytes[at] ^= 1 << rng.random_range(0..8),
            1 if !bytes.is_empty() => {
                bytes[at] = INTERESTING[rng.random_range(0..INTERESTING.len())];
            }
            2 => bytes.insert(at, INTERESTING[rng.random_range(0..INTERESTING.len())]),
            3 if !bytes.is_empty() => {
                let end = rng.random_range(at..=bytes.len().min(at + 16));
                bytes.drain(at..end);
            }
            4 if !bytes.is_empty() => {
                // Repeat a range: deep nesting, long strings, repeated fields.
                let end = rng.random_range(at..=bytes.len().min(at + 32));
                let range = bytes[at..end].to_vec();
                for _ in 0..rng.random_range(1..=64) {
                    bytes.splice(at..at, range.iter().copied());
                }
            }
            5 if !other.is_empty() => {
                let from = rng.random_range(0..other.len());
                bytes.truncate(at);
                bytes.extend_from_slice(&other[from..]);
            }
            _ => bytes.truncate(at),
        }
    }
    bytes
}
