//! Message contents and the stream checksum.
//!
//! Message `i` of a run with seed `s` is a pure function of `(s, i)`: its first
//! 8 bytes are `i` (little-endian), and 64-bit word `j >= 1` is
//! `splitmix64(s ^ splitmix64(i)) ^ (j * 0x9e37_79b9_7f4a_7c15)` (little-endian,
//! the last word cut to the message size). Cheap to generate and to check, and
//! different for every message, so a lost, duplicated, reordered or corrupted
//! message shows.
//!
//! The stream checksum is 64-bit FNV-1a over each message's little-endian
//! 64-bit words (last word zero-padded), in delivery order.

use connlab_measure::splitmix64;

const K: u64 = 0x9e37_79b9_7f4a_7c15;
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn base(seed: u64, index: u64) -> u64 {
    splitmix64(seed ^ splitmix64(index))
}

fn word(base: u64, index: u64, j: usize) -> u64 {
    if j == 0 {
        index
    } else {
        base ^ (j as u64).wrapping_mul(K)
    }
}

/// Fills `out` with message `index` of the stream with `seed`.
pub fn fill_message(seed: u64, index: u64, out: &mut [u8]) {
    let b = base(seed, index);
    for (j, chunk) in out.chunks_mut(8).enumerate() {
        let w = word(b, index, j).to_le_bytes();
        chunk.copy_from_slice(&w[..chunk.len()]);
    }
}

/// True if `data` is exactly message `index` of the stream with `seed`, of
/// `size` bytes.
pub fn message_matches(seed: u64, index: u64, size: usize, data: &[u8]) -> bool {
    if data.len() != size {
        return false;
    }
    let b = base(seed, index);
    data.chunks(8).enumerate().all(|(j, chunk)| {
        let w = word(b, index, j).to_le_bytes();
        chunk == &w[..chunk.len()]
    })
}

/// The message index stored in the first 8 bytes, if present.
pub fn message_index(data: &[u8]) -> Option<u64> {
    let b: [u8; 8] = data.get(..8)?.try_into().ok()?;
    Some(u64::from_le_bytes(b))
}

/// 64-bit FNV-1a over 64-bit words of each message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamChecksum(u64);

impl Default for StreamChecksum {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamChecksum {
    /// The empty stream.
    pub fn new() -> Self {
        StreamChecksum(FNV_OFFSET)
    }

    /// Adds one message.
    pub fn update(&mut self, message: &[u8]) {
        let mut h = self.0;
        let mut chunks = message.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            h ^= u64::from_le_bytes(w);
            h = h.wrapping_mul(FNV_PRIME);
        }
        let rem = chunks.remainder();
        if !rem.is_empty() {
            let mut w = [0u8; 8];
            w[..rem.len()].copy_from_slice(rem);
            h ^= u64::from_le_bytes(w);
            h = h.wrapping_mul(FNV_PRIME);
        }
        self.0 = h;
    }

    /// The value.
    pub fn value(&self) -> u64 {
        self.0
    }

    /// The value as 16 hex digits.
    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_messages_match_and_differ() {
        let mut a = vec![0u8; 37];
        fill_message(1, 5, &mut a);
        assert!(message_matches(1, 5, 37, &a));
        assert_eq!(message_index(&a), Some(5));
        assert!(!message_matches(1, 6, 37, &a));
        assert!(!message_matches(2, 5, 37, &a));
        a[36] ^= 1;
        assert!(!message_matches(1, 5, 37, &a));
    }

    #[test]
    fn stream_checksum_depends_on_order() {
        let (mut x, mut y) = (StreamChecksum::new(), StreamChecksum::new());
        x.update(b"first message...");
        x.update(b"second");
        y.update(b"second");
        y.update(b"first message...");
        assert_ne!(x, y);
        assert_eq!(x.hex().len(), 16);
    }
}
