//! Counting past payload bytes without keeping them: CLB1 request and response
//! payloads and HTTP response bodies are only ever skipped, so memory stays
//! independent of the lengths a peer declares (`shared/protocol.md` §1, limits).

/// A payload of known length that is being consumed and dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Discard {
    len: u64,
    left: u64,
}

impl Discard {
    /// A payload of `len` bytes, none of them seen yet.
    pub(crate) fn new(len: u64) -> Discard {
        Discard { len, left: len }
    }

    /// Drops up to the rest of the payload from the front of `input`; true once
    /// every byte of it has gone by (at once for an empty payload).
    pub(crate) fn take(&mut self, input: &mut &[u8]) -> bool {
        let n = usize::try_from(self.left).map_or(input.len(), |left| left.min(input.len()));
        *input = &input[n..];
        // `n` fits in u64: it is at most `self.left`.
        self.left -= n as u64;
        self.left == 0
    }

    /// Payload bytes seen so far.
    pub(crate) fn received(&self) -> u64 {
        self.len - self.left
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumes_exactly_the_declared_length() {
        let mut discard = Discard::new(5);
        let mut input: &[u8] = b"abc";
        assert!(!discard.take(&mut input));
        assert!(input.is_empty());
        assert_eq!(discard.received(), 3);
        let mut input: &[u8] = b"defgh";
        assert!(discard.take(&mut input));
        assert_eq!(input, b"fgh");
        assert_eq!(discard.received(), 5);
    }

    #[test]
    fn finishes_an_empty_payload_without_input() {
        let mut input: &[u8] = b"";
        assert!(Discard::new(0).take(&mut input));
    }
}
