//! CLB1, the request/response benchmark protocol (`shared/protocol.md` §1): the
//! 16-byte [`Header`] codec, with [`Header::parse`] as the one checked way in
//! from untrusted bytes, and the streaming framer both sessions use to split a
//! byte stream into headers and counted payloads while buffering only a header.

use crate::payload::Discard;

/// Offset of the ASCII magic `CLB1`.
pub const MAGIC_AT: usize = 0;
/// Offset of `req_len`, the request's total length, header included.
pub const REQ_LEN_AT: usize = 4;
/// Offset of `resp_len`, the response's total length, header included.
pub const RESP_LEN_AT: usize = 8;
/// Offset of `seq`, the client's opaque number that the server echoes.
pub const SEQ_AT: usize = 12;

/// A CLB1 header: the same fields for a request and for its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Total request length in bytes, header included (16 ..= max).
    pub req_len: u32,
    /// Total response length in bytes, header included (16 ..= max).
    pub resp_len: u32,
    /// Opaque number chosen by the client, echoed by the server.
    pub seq: u32,
}

impl Header {
    /// Encoded size of a header, and the smallest valid `req_len` and `resp_len`.
    pub const LEN: usize = 16;
    /// The first four bytes of every header.
    pub const MAGIC: [u8; 4] = *b"CLB1";

    /// Checked parse: the only way in from untrusted bytes. Checks the magic,
    /// then `req_len` in `16..=max`, then `resp_len` in `16..=max`.
    pub fn parse(bytes: &[u8; Header::LEN], max: u32) -> Result<Header, HeaderError> {
        check_magic(bytes)?;
        let header = Header::read(bytes);
        if !in_range(header.req_len, max) {
            return Err(HeaderError::ReqLenOutOfRange {
                len: header.req_len,
                max,
            });
        }
        check_resp_len(header, max)
    }

    /// Writes the header big-endian into `dst`, magic first.
    pub fn emit(&self, dst: &mut [u8; Header::LEN]) {
        dst[MAGIC_AT..MAGIC_AT + 4].copy_from_slice(&Header::MAGIC);
        dst[REQ_LEN_AT..REQ_LEN_AT + 4].copy_from_slice(&self.req_len.to_be_bytes());
        dst[RESP_LEN_AT..RESP_LEN_AT + 4].copy_from_slice(&self.resp_len.to_be_bytes());
        dst[SEQ_AT..SEQ_AT + 4].copy_from_slice(&self.seq.to_be_bytes());
    }

    /// Checked parse of a response header for a client: the magic and
    /// `resp_len` in `16..=max`. `req_len` is the client's own value echoed back.
    pub(crate) fn parse_response(
        bytes: &[u8; Header::LEN],
        max: u32,
    ) -> Result<Header, HeaderError> {
        check_magic(bytes)?;
        check_resp_len(Header::read(bytes), max)
    }

    /// Payload bytes after a request header (`req_len - 16`).
    pub(crate) fn req_payload_len(&self) -> u64 {
        u64::from(self.req_len.saturating_sub(Header::LEN as u32))
    }

    /// Payload bytes after a response header (`resp_len - 16`).
    pub(crate) fn resp_payload_len(&self) -> u64 {
        u64::from(self.resp_len.saturating_sub(Header::LEN as u32))
    }

    /// Reads the length and sequence fields without checking them.
    fn read(bytes: &[u8; Header::LEN]) -> Header {
        Header {
            req_len: be_u32(bytes, REQ_LEN_AT),
            resp_len: be_u32(bytes, RESP_LEN_AT),
            seq: be_u32(bytes, SEQ_AT),
        }
    }
}

/// A CLB1 header that `shared/protocol.md` §1 says must close the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The first four bytes were not `CLB1`: the peer speaks another protocol
    /// or lost track of message boundaries.
    #[error("bad magic at byte 0: expected \"CLB1\", got {0:02x?}")]
    BadMagic([u8; 4]),
    /// `req_len` below the header size or above the configured maximum
    /// (`--max-message`); raise the maximum if the request is genuine.
    #[error("req_len {len} at byte 4 is outside 16..={max}")]
    ReqLenOutOfRange {
        /// The declared request length.
        len: u32,
        /// The largest length allowed.
        max: u32,
    },
    /// `resp_len` below the header size or above the configured maximum
    /// (`--max-message`); raise the maximum if the request is genuine.
    #[error("resp_len {len} at byte 8 is outside 16..={max}")]
    RespLenOutOfRange {
        /// The declared response length.
        len: u32,
        /// The largest length allowed.
        max: u32,
    },
}

/// Splits a CLB1 byte stream into headers and payloads, keeping at most one
/// 16-byte header; payload bytes are counted and dropped.
#[derive(Clone, Debug)]
pub(crate) struct Framer {
    header: [u8; Header::LEN],
    filled: usize,
    payload: Option<Discard>,
}

/// What [`Framer::next`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A whole header arrived; the caller checks it and calls
    /// [`Framer::expect_payload`] before asking for the next frame.
    Header([u8; Header::LEN]),
    /// The payload announced by the last header has all gone by.
    End,
}

/// Where in a message the stream stands, for EOF handling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Position {
    /// Between messages.
    Boundary,
    /// This many header bytes have arrived.
    Header(u64),
    /// The header and this many payload bytes have arrived.
    Payload(u64),
}

impl Framer {
    /// A framer at the start of a stream.
    pub(crate) fn new() -> Framer {
        Framer {
            header: [0; Header::LEN],
            filled: 0,
            payload: None,
        }
    }

    /// Consumes bytes from the front of `input` up to the next frame; `None`
    /// once `input` is used up without completing one.
    pub(crate) fn next(&mut self, input: &mut &[u8]) -> Option<Frame> {
        if let Some(payload) = &mut self.payload {
            if payload.take(input) {
                self.payload = None;
                return Some(Frame::End);
            }
            return None;
        }
        let n = (Header::LEN - self.filled).min(input.len());
        self.header[self.filled..self.filled + n].copy_from_slice(&input[..n]);
        *input = &input[n..];
        self.filled += n;
        if self.filled == Header::LEN {
            self.filled = 0;
            Some(Frame::Header(self.header))
        } else {
            None
        }
    }

    /// The header just returned announced `len` payload bytes.
    pub(crate) fn expect_payload(&mut self, len: u64) {
        self.payload = Some(Discard::new(len));
    }

    /// Where the stream stands.
    pub(crate) fn position(&self) -> Position {
        match (&self.payload, self.filled) {
            (Some(payload), _) => Position::Payload(payload.received()),
            (None, 0) => Position::Boundary,
            (None, filled) => Position::Header(filled as u64),
        }
    }
}

fn check_magic(bytes: &[u8; Header::LEN]) -> Result<(), HeaderError> {
    let magic = [
        bytes[MAGIC_AT],
        bytes[MAGIC_AT + 1],
        bytes[MAGIC_AT + 2],
        bytes[MAGIC_AT + 3],
    ];
    if magic == Header::MAGIC {
        Ok(())
    } else {
        Err(HeaderError::BadMagic(magic))
    }
}

fn check_resp_len(header: Header, max: u32) -> Result<Header, HeaderError> {
    if in_range(header.resp_len, max) {
        Ok(header)
    } else {
        Err(HeaderError::RespLenOutOfRange {
            len: header.resp_len,
            max,
        })
    }
}

fn in_range(len: u32, max: u32) -> bool {
    (Header::LEN as u32..=max).contains(&len)
}

fn be_u32(bytes: &[u8; Header::LEN], at: usize) -> u32 {
    u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// `shared/protocol.md` §1: a 128-byte request for a 10 KiB response, seq 7.
    const EXAMPLE_HEADER: [u8; 16] = [
        0x43, 0x4c, 0x42, 0x31, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00,
        0x07,
    ];
    const MAX: u32 = 16 * 1024 * 1024;

    fn header_bytes(req_len: u32, resp_len: u32) -> [u8; 16] {
        let mut bytes = [0; 16];
        Header {
            req_len,
            resp_len,
            seq: 1,
        }
        .emit(&mut bytes);
        bytes
    }

    #[test]
    fn parses_the_example_from_the_protocol_document() {
        let header = Header::parse(&EXAMPLE_HEADER, MAX).unwrap();
        assert_eq!(
            header,
            Header {
                req_len: 128,
                resp_len: 10240,
                seq: 7
            }
        );
        let mut emitted = [0; 16];
        header.emit(&mut emitted);
        assert_eq!(emitted, EXAMPLE_HEADER);
    }

    #[test]
    fn rejects_bad_magic_naming_the_bytes() {
        let mut bytes = EXAMPLE_HEADER;
        bytes[..4].copy_from_slice(b"GET ");
        let err = Header::parse(&bytes, MAX).unwrap_err();
        assert_eq!(err, HeaderError::BadMagic(*b"GET "));
        assert_eq!(
            err.to_string(),
            "bad magic at byte 0: expected \"CLB1\", got [47, 45, 54, 20]"
        );
    }

    #[test]
    fn rejects_req_len_below_the_header_size() {
        let err = Header::parse(&header_bytes(15, 16), MAX).unwrap_err();
        assert_eq!(err, HeaderError::ReqLenOutOfRange { len: 15, max: MAX });
        assert_eq!(
            err.to_string(),
            "req_len 15 at byte 4 is outside 16..=16777216"
        );
    }

    #[test]
    fn rejects_req_len_above_the_maximum() {
        let err = Header::parse(&header_bytes(MAX + 1, 16), MAX).unwrap_err();
        assert_eq!(
            err,
            HeaderError::ReqLenOutOfRange {
                len: MAX + 1,
                max: MAX
            }
        );
        assert_eq!(
            err.to_string(),
            "req_len 16777217 at byte 4 is outside 16..=16777216"
        );
    }

    #[test]
    fn rejects_resp_len_below_the_header_size() {
        let err = Header::parse(&header_bytes(16, 15), MAX).unwrap_err();
        assert_eq!(err, HeaderError::RespLenOutOfRange { len: 15, max: MAX });
        assert_eq!(
            err.to_string(),
            "resp_len 15 at byte 8 is outside 16..=16777216"
        );
    }

    #[test]
    fn rejects_resp_len_above_the_maximum() {
        let err = Header::parse(&header_bytes(16, MAX + 1), MAX).unwrap_err();
        assert_eq!(
            err.to_string(),
            "resp_len 16777217 at byte 8 is outside 16..=16777216"
        );
    }

    #[test]
    fn accepts_lengths_at_both_ends_of_the_range() {
        assert!(Header::parse(&header_bytes(16, MAX), MAX).is_ok());
        assert!(Header::parse(&header_bytes(MAX, 16), MAX).is_ok());
    }

    #[test]
    fn checks_magic_before_lengths() {
        let mut bytes = header_bytes(0, 0);
        bytes[0] = b'X';
        assert!(matches!(
            Header::parse(&bytes, MAX),
            Err(HeaderError::BadMagic(_))
        ));
    }

    #[test]
    fn response_parse_ignores_the_echoed_req_len() {
        let header = Header::parse_response(&header_bytes(0, 100), MAX).unwrap();
        assert_eq!(header.resp_len, 100);
        assert_eq!(
            Header::parse_response(&header_bytes(16, 15), MAX),
            Err(HeaderError::RespLenOutOfRange { len: 15, max: MAX })
        );
    }

    #[test]
    fn framer_yields_header_then_end_across_chunks() {
        let mut framer = Framer::new();
        let mut input: &[u8] = &EXAMPLE_HEADER[..10];
        assert_eq!(framer.next(&mut input), None);
        assert_eq!(framer.position(), Position::Header(10));
        let mut rest = EXAMPLE_HEADER[10..].to_vec();
        rest.extend_from_slice(&[0; 112]);
        let mut input: &[u8] = &rest;
        assert_eq!(framer.next(&mut input), Some(Frame::Header(EXAMPLE_HEADER)));
        framer.expect_payload(112);
        assert_eq!(framer.position(), Position::Payload(0));
        assert_eq!(framer.next(&mut input), Some(Frame::End));
        assert_eq!(framer.position(), Position::Boundary);
        assert_eq!(framer.next(&mut input), None);
    }

    proptest! {
        #[test]
        fn parse_inverts_emit_for_valid_headers(
            max in 16u32..=u32::MAX,
            req in any::<u32>(),
            resp in any::<u32>(),
            seq in any::<u32>(),
        ) {
            let span = u64::from(max) - 15;
            let header = Header {
                req_len: 16 + (u64::from(req) % span) as u32,
                resp_len: 16 + (u64::from(resp) % span) as u32,
                seq,
            };
            let mut bytes = [0; 16];
            header.emit(&mut bytes);
            prop_assert_eq!(Header::parse(&bytes, max), Ok(header));
        }

        #[test]
        fn parse_accepts_exactly_the_valid_headers(bytes in any::<[u8; 16]>(), max in any::<u32>()) {
            let valid = bytes[..4] == Header::MAGIC
                && (16..=max).contains(&be_u32(&bytes, REQ_LEN_AT))
                && (16..=max).contains(&be_u32(&bytes, RESP_LEN_AT));
            prop_assert_eq!(Header::parse(&bytes, max).is_ok(), valid);
        }
    }
}
