//! Finding the end of an HTTP/1.x message head (request or response) in a byte
//! stream that arrives in arbitrary chunks. Shared by the server's request
//! parser and the client's response parser. Each byte is scanned once, so
//! 1-byte feeds cost O(n). A head that lies whole in one input is handed over
//! in place. Only a head split across inputs is copied, into a buffer that
//! grows on demand up to [`MAX_HEADER_SECTION`] and is kept for reuse.

use crate::http1::MAX_HEADER_SECTION;

/// Smallest capacity reserved for a split head; most heads fit.
const MIN_PARTIAL_CAPACITY: usize = 512;

/// Reads one message head at a time from a chunked byte stream.
#[derive(Debug, Default)]
pub(crate) struct HeadReader {
    scanner: Scanner,
    partial: Vec<u8>,
}

/// A head longer than [`MAX_HEADER_SECTION`]: `len` bytes arrived without its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeadTooLarge {
    pub(crate) len: usize,
}

impl HeadReader {
    /// Consumes bytes from the front of `input`. When they complete a head,
    /// returns `parse(head)` (the head includes its terminating blank line) and
    /// leaves the bytes after it in `input`; otherwise keeps them and returns
    /// `None` with `input` used up.
    pub(crate) fn read<R>(
        &mut self,
        input: &mut &[u8],
        parse: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, HeadTooLarge> {
        match self.scanner.scan(input) {
            Scan::End(n) => {
                let (head, rest) = input.split_at(n);
                *input = rest;
                self.scanner = Scanner::default();
                if self.partial.is_empty() {
                    return Ok(Some(parse(head)));
                }
                self.keep(head);
                let parsed = parse(&self.partial);
                self.partial.clear();
                Ok(Some(parsed))
            }
            Scan::More => {
                self.keep(input);
                *input = &[];
                Ok(None)
            }
            Scan::TooLarge => Err(HeadTooLarge {
                len: MAX_HEADER_SECTION + 1,
            }),
        }
    }

    /// True between messages: nothing but blank lines (which HTTP/1.1 lets a
    /// recipient skip before a message, RFC 9112 §2.2) has arrived of the next head.
    pub(crate) fn at_boundary(&self) -> bool {
        self.scanner.state == State::Start
    }

    /// Whether the first line of the unfinished head has arrived whole
    /// (its bytes are in [`HeadReader::unfinished`]).
    pub(crate) fn first_line_done(&self) -> bool {
        self.scanner.line_ends > 0
    }

    /// The unfinished head kept so far (leading blank lines included),
    /// after [`HeadReader::read`] returned `None`.
    pub(crate) fn unfinished(&self) -> &[u8] {
        &self.partial
    }

    /// Bytes of the unfinished head received so far.
    pub(crate) fn received(&self) -> u64 {
        self.scanner.scanned as u64
    }

    /// Appends part of a split head. The scanner stops at `MAX_HEADER_SECTION`
    /// bytes, so the buffer never grows beyond that.
    fn keep(&mut self, bytes: &[u8]) {
        let needed = self.partial.len() + bytes.len();
        if needed > self.partial.capacity() {
            let target =
                (2 * self.partial.capacity()).clamp(MIN_PARTIAL_CAPACITY, MAX_HEADER_SECTION);
            let target = target.max(needed);
            self.partial.reserve_exact(target - self.partial.len());
        }
        self.partial.extend_from_slice(bytes);
    }
}

/// Looks for the blank line that ends a head: `\n` then `\n` or `\r\n`, which
/// covers `\r\n\r\n` and the bare-`\n` line endings httparse also accepts.
#[derive(Clone, Copy, Debug, Default)]
struct Scanner {
    state: State,
    scanned: usize,
    /// Line ends passed inside the head (the first one ends its first line).
    line_ends: usize,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum State {
    /// Only CR and LF so far: blank lines before the head.
    #[default]
    Start,
    /// Inside a line.
    Line,
    /// Just after a `\n`.
    Lf,
    /// Just after `\n\r`.
    LfCr,
}

enum Scan {
    /// The head ends after this many bytes of the scanned input.
    End(usize),
    /// All of the input belongs to the head, which has not ended yet.
    More,
    /// The head would exceed [`MAX_HEADER_SECTION`].
    TooLarge,
}

impl Scanner {
    /// Feeds `bytes`. Inside a line it jumps to the next `\n` with `memchr`
    /// (a request head is mostly line text); the states around line ends
    /// advance a byte at a time. Same result as feeding byte by byte.
    fn scan(&mut self, bytes: &[u8]) -> Scan {
        let mut i = 0;
        while i < bytes.len() {
            if self.scanned == MAX_HEADER_SECTION {
                return Scan::TooLarge;
            }
            if self.state == State::Line {
                // Only the bytes the size limit still allows are searched.
                let room = (MAX_HEADER_SECTION - self.scanned).min(bytes.len() - i);
                match memchr::memchr(b'\n', &bytes[i..i + room]) {
                    Some(at) => {
                        self.scanned += at + 1;
                        i += at + 1;
                        self.state = State::Lf;
                        self.line_ends += 1;
                    }
                    None => {
                        self.scanned += room;
                        i += room;
                    }
                }
                continue;
            }
            let byte = bytes[i];
            self.scanned += 1;
            i += 1;
            self.state = match (self.state, byte) {
                (State::Start, b'\r' | b'\n') => State::Start,
                (State::Lf | State::LfCr, b'\n') => return Scan::End(i),
                (State::Lf, b'\r') => State::LfCr,
                (_, b'\n') => State::Lf,
                _ => State::Line,
            };
        }
        Scan::More
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(reader: &mut HeadReader, chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut heads = Vec::new();
        for chunk in chunks {
            let mut input = *chunk;
            while !input.is_empty() {
                if let Some(head) = reader.read(&mut input, <[u8]>::to_vec).unwrap() {
                    heads.push(head);
                }
            }
        }
        heads
    }

    #[test]
    fn finds_crlf_and_bare_lf_head_ends() {
        let mut reader = HeadReader::default();
        let heads = read_all(&mut reader, &[b"A\r\nB: c\r\n\r\nD\n\nE\n\r\n"]);
        assert_eq!(
            heads,
            [
                b"A\r\nB: c\r\n\r\n".to_vec(),
                b"D\n\n".to_vec(),
                b"E\n\r\n".to_vec()
            ]
        );
        assert!(reader.at_boundary());
    }

    #[test]
    fn hands_over_a_whole_head_in_place_without_buffering() {
        let mut reader = HeadReader::default();
        let input = b"GET / HTTP/1.1\r\n\r\nrest".as_slice();
        let mut rest = input;
        let in_place = reader
            .read(&mut rest, |head| head.as_ptr() == input.as_ptr())
            .unwrap();
        assert_eq!(in_place, Some(true));
        assert_eq!(rest, b"rest");
        assert_eq!(reader.partial.capacity(), 0);
    }

    #[test]
    fn joins_a_head_fed_one_byte_at_a_time() {
        let message = b"\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n";
        let mut reader = HeadReader::default();
        let chunks: Vec<&[u8]> = message.chunks(1).collect();
        assert_eq!(read_all(&mut reader, &chunks), [message.to_vec()]);
        assert!(reader.partial.is_empty());
        assert!(reader.partial.capacity() <= MAX_HEADER_SECTION);
    }

    #[test]
    fn treats_leading_blank_lines_as_a_boundary() {
        let mut reader = HeadReader::default();
        assert_eq!(
            read_all(&mut reader, &[b"\r\n\r\n\n"]),
            Vec::<Vec<u8>>::new()
        );
        assert!(reader.at_boundary());
        assert_eq!(read_all(&mut reader, &[b"G"]), Vec::<Vec<u8>>::new());
        assert!(!reader.at_boundary());
        assert_eq!(reader.received(), 6);
    }

    #[test]
    fn accepts_a_head_of_exactly_the_maximum_size() {
        let mut head = b"GET / HTTP/1.1\r\nX: ".to_vec();
        head.resize(MAX_HEADER_SECTION - 4, b'a');
        head.extend_from_slice(b"\r\n\r\n");
        let mut reader = HeadReader::default();
        let (first, second) = head.split_at(100);
        assert_eq!(read_all(&mut reader, &[first, second]), [head.clone()]);
    }

    #[test]
    fn rejects_a_head_one_byte_over_the_maximum() {
        let mut head = b"GET / HTTP/1.1\r\nX: ".to_vec();
        head.resize(MAX_HEADER_SECTION - 3, b'a');
        head.extend_from_slice(b"\r\n\r\n");
        let mut reader = HeadReader::default();
        let mut input = head.as_slice();
        assert_eq!(
            reader.read(&mut input, |_| ()),
            Err(HeadTooLarge {
                len: MAX_HEADER_SECTION + 1
            })
        );
        let mut reader = HeadReader::default();
        let mut input = &head[..MAX_HEADER_SECTION];
        assert_eq!(reader.read(&mut input, |_| ()), Ok(None));
        assert!(reader.partial.capacity() <= MAX_HEADER_SECTION);
        let mut input = &head[MAX_HEADER_SECTION..];
        assert!(reader.read(&mut input, |_| ()).is_err());
    }

    /// The byte-at-a-time scanner the `memchr` one replaced: the reference.
    fn scan_bytewise(scanner: &mut Scanner, bytes: &[u8]) -> Scan {
        for (i, &byte) in bytes.iter().enumerate() {
            if scanner.scanned == MAX_HEADER_SECTION {
                return Scan::TooLarge;
            }
            scanner.scanned += 1;
            scanner.state = match (scanner.state, byte) {
                (State::Start, b'\r' | b'\n') => State::Start,
                (State::Lf | State::LfCr, b'\n') => return Scan::End(i + 1),
                (State::Lf, b'\r') => State::LfCr,
                (_, b'\n') => State::Lf,
                _ => State::Line,
            };
        }
        Scan::More
    }

    fn outcome(scan: Scan) -> Option<usize> {
        match scan {
            Scan::End(n) => Some(n),
            Scan::More => None,
            Scan::TooLarge => Some(usize::MAX),
        }
    }

    proptest::proptest! {
        /// Any split of any mix of line text, CR and LF (and a head near the
        /// size limit) scans exactly as the byte-at-a-time scanner did.
        #[test]
        fn memchr_scan_matches_bytewise_scan(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just(b"\r".to_vec()),
                    proptest::strategy::Just(b"\n".to_vec()),
                    proptest::collection::vec(b'a'..=b'z', 0..40),
                    proptest::collection::vec(b'a'..=b'z', MAX_HEADER_SECTION - 8..MAX_HEADER_SECTION + 8),
                ],
                0..12,
            ),
            cut in 0usize..200,
            start_scanned in proptest::prop_oneof![proptest::strategy::Just(0usize), MAX_HEADER_SECTION - 50..MAX_HEADER_SECTION],
        ) {
            let bytes: Vec<u8> = pieces.concat();
            let cut = cut.min(bytes.len());
            let mut fast = Scanner { state: State::Start, scanned: start_scanned, line_ends: 0 };
            let mut slow = fast;
            for part in [&bytes[..cut], &bytes[cut..]] {
                let (a, b) = (fast.scan(part), scan_bytewise(&mut slow, part));
                let (a, b) = (outcome(a), outcome(b));
                proptest::prop_assert_eq!(a, b);
                if a.is_some() {
                    break;
                }
                proptest::prop_assert_eq!(fast.state, slow.state);
                proptest::prop_assert_eq!(fast.scanned, slow.scanned);
            }
        }
    }
}
