//! The fixed 24-byte layer header, its checked parser and the checksums.
//!
//! ```text
//! offset  size  field
//!  0      1     type (CR=1 CC=2 DT=3 AK=4 DR=5 DC=6 EX=7)
//!  1      1     flags (bit 0: data checksum present; others must be 0)
//!  2      2     window (credit the sender of this PDU grants, PDUs)
//!  4      4     seq (DT only; 0 otherwise)
//!  8      4     ack (cumulative: next sequence number expected from the peer)
//! 12      4     length (bytes of SDU after the header)
//! 16      4     data checksum (over the SDU, see `data_checksum`; 0 if absent)
//! 20      2     header checksum (Internet checksum over the 24 header bytes)
//! 22      1     layer number (1 = bottom), a sanity check against mis-stacking
//! 23      1     reserved, 0
//! ```
//! All multi-byte fields are big-endian (network order).

/// Bytes of every layer header.
pub const HEADER_LEN: usize = 24;

/// Flag bit: the data checksum field is valid.
pub const FLAG_DATA_CHECKSUM: u8 = 1;

const OFF_TYPE: usize = 0;
const OFF_FLAGS: usize = 1;
const OFF_WINDOW: usize = 2;
const OFF_SEQ: usize = 4;
const OFF_ACK: usize = 8;
const OFF_LENGTH: usize = 12;
const OFF_DCK: usize = 16;
const OFF_HCK: usize = 20;
const OFF_LAYER: usize = 22;
const OFF_RESERVED: usize = 23;

/// PDU types, TP4-like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PduType {
    /// Connection request.
    Cr = 1,
    /// Connection confirm.
    Cc = 2,
    /// Sequenced data.
    Dt = 3,
    /// Acknowledgement (cumulative).
    Ak = 4,
    /// Disconnect request.
    Dr = 5,
    /// Disconnect confirm.
    Dc = 6,
    /// Expedited (unsequenced, unacknowledged) data: carries the upper layer's
    /// control PDUs.
    Ex = 7,
}

impl PduType {
    fn from_u8(v: u8) -> Option<PduType> {
        Some(match v {
            1 => PduType::Cr,
            2 => PduType::Cc,
            3 => PduType::Dt,
            4 => PduType::Ak,
            5 => PduType::Dr,
            6 => PduType::Dc,
            7 => PduType::Ex,
            _ => return None,
        })
    }
}

/// A parsed or to-be-emitted header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// PDU type.
    pub kind: PduType,
    /// Flags ([`FLAG_DATA_CHECKSUM`]).
    pub flags: u8,
    /// Credit granted by the sender of this PDU.
    pub window: u16,
    /// Sequence number (DT).
    pub seq: u32,
    /// Cumulative acknowledgement: next sequence number expected.
    pub ack: u32,
    /// SDU length following the header.
    pub length: u32,
    /// Checksum of the SDU if [`FLAG_DATA_CHECKSUM`] is set.
    pub data_checksum: u32,
    /// Layer number, 1 = bottom.
    pub layer: u8,
}

/// Why a PDU was rejected.
#[derive(Debug, thiserror::Error, PartialEq, Eq, Clone, Copy)]
pub enum HeaderError {
    /// Fewer bytes than a header.
    #[error("PDU of {0} bytes is shorter than the {HEADER_LEN}-byte header")]
    Short(usize),
    /// Unknown type byte.
    #[error("unknown PDU type {0}")]
    BadType(u8),
    /// Unknown flag bits or non-zero reserved byte.
    #[error("unknown flags {0:#04x} or reserved byte set")]
    BadFlags(u8),
    /// Header checksum mismatch.
    #[error("header checksum mismatch")]
    HeaderChecksum,
    /// Length field disagrees with the bytes present.
    #[error("length field {field} but {present} SDU bytes present")]
    Length {
        /// Value of the length field.
        field: u32,
        /// Bytes after the header.
        present: usize,
    },
    /// PDU of another layer.
    #[error("PDU for layer {got}, expected layer {expected}")]
    Layer {
        /// Layer in the header.
        got: u8,
        /// This layer.
        expected: u8,
    },
    /// Data checksum mismatch.
    #[error("data checksum mismatch")]
    DataChecksum,
}

impl Header {
    /// Writes the header into `out` (exactly [`HEADER_LEN`] bytes; extra bytes
    /// are left alone), computing the header checksum.
    pub fn emit(&self, out: &mut [u8]) {
        let h = &mut out[..HEADER_LEN];
        h[OFF_TYPE] = self.kind as u8;
        h[OFF_FLAGS] = self.flags;
        h[OFF_WINDOW..OFF_WINDOW + 2].copy_from_slice(&self.window.to_be_bytes());
        h[OFF_SEQ..OFF_SEQ + 4].copy_from_slice(&self.seq.to_be_bytes());
        h[OFF_ACK..OFF_ACK + 4].copy_from_slice(&self.ack.to_be_bytes());
        h[OFF_LENGTH..OFF_LENGTH + 4].copy_from_slice(&self.length.to_be_bytes());
        h[OFF_DCK..OFF_DCK + 4].copy_from_slice(&self.data_checksum.to_be_bytes());
        h[OFF_HCK..OFF_HCK + 2].copy_from_slice(&[0, 0]);
        h[OFF_LAYER] = self.layer;
        h[OFF_RESERVED] = 0;
        let ck = !internet_sum(h);
        h[OFF_HCK..OFF_HCK + 2].copy_from_slice(&ck.to_be_bytes());
    }

    /// Parses and checks the header at the front of `pdu` (header plus SDU).
    /// Checks the header checksum, type, flags and that the length field
    /// matches the bytes present. Never panics.
    pub fn parse(pdu: &[u8]) -> Result<Header, HeaderError> {
        let Some(h) = pdu.get(..HEADER_LEN) else {
            return Err(HeaderError::Short(pdu.len()));
        };
        if internet_sum(h) != 0xffff {
            return Err(HeaderError::HeaderChecksum);
        }
        let kind = PduType::from_u8(h[OFF_TYPE]).ok_or(HeaderError::BadType(h[OFF_TYPE]))?;
        let flags = h[OFF_FLAGS];
        if flags & !FLAG_DATA_CHECKSUM != 0 || h[OFF_RESERVED] != 0 {
            return Err(HeaderError::BadFlags(flags));
        }
        let be32 = |o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let length = be32(OFF_LENGTH);
        let present = pdu.len() - HEADER_LEN;
        if length as usize != present {
            return Err(HeaderError::Length {
                field: length,
                present,
            });
        }
        Ok(Header {
            kind,
            flags,
            window: u16::from_be_bytes([h[OFF_WINDOW], h[OFF_WINDOW + 1]]),
            seq: be32(OFF_SEQ),
            ack: be32(OFF_ACK),
            length,
            data_checksum: be32(OFF_DCK),
            layer: h[OFF_LAYER],
        })
    }
}

/// The ones'-complement sum (RFC 1071) of `bytes` as 16-bit big-endian words.
fn internet_sum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        sum += u32::from(*b) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The data checksum: the 32-bit halves of the little-endian 64-bit words of
/// `bytes` (last word zero-padded) summed into 64 bits with the length, folded
/// to 32 bits with end-around carry. Cheap per byte (it vectorises) but still
/// touches every byte, which is the per-layer per-byte work of a TP4-like
/// checksum.
pub fn data_checksum(bytes: &[u8]) -> u32 {
    let mut lo: u64 = 0;
    let mut hi: u64 = 0;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let w = u64::from_le_bytes(w);
        lo += w & 0xffff_ffff;
        hi += w >> 32;
    }
    let rem = chunks.remainder();
    if !rem.is_empty() {
        let mut w = [0u8; 8];
        w[..rem.len()].copy_from_slice(rem);
        let w = u64::from_le_bytes(w);
        lo += w & 0xffff_ffff;
        hi += w >> 32;
    }
    let mut s = lo
        .wrapping_add(hi.rotate_left(16))
        .wrapping_add(bytes.len() as u64);
    s = (s & 0xffff_ffff) + (s >> 32);
    s = (s & 0xffff_ffff) + (s >> 32);
    s as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Header {
        Header {
            kind: PduType::Dt,
            flags: FLAG_DATA_CHECKSUM,
            window: 32,
            seq: 0xdead_beef,
            ack: 7,
            length: 3,
            data_checksum: data_checksum(b"abc"),
            layer: 3,
        }
    }

    #[test]
    fn round_trip() {
        let h = sample();
        let mut pdu = vec![0u8; HEADER_LEN + 3];
        h.emit(&mut pdu);
        pdu[HEADER_LEN..].copy_from_slice(b"abc");
        assert_eq!(Header::parse(&pdu), Ok(h));
    }

    #[test]
    fn rejects_bad_input() {
        let h = sample();
        let mut pdu = vec![0u8; HEADER_LEN + 3];
        h.emit(&mut pdu);
        assert_eq!(Header::parse(&pdu[..10]), Err(HeaderError::Short(10)));
        assert!(matches!(
            Header::parse(&pdu[..HEADER_LEN + 2]),
            Err(HeaderError::Length {
                field: 3,
                present: 2
            })
        ));
        let mut bad = pdu.clone();
        bad[5] ^= 1;
        assert_eq!(Header::parse(&bad), Err(HeaderError::HeaderChecksum));
        assert_eq!(
            Header::parse(&[0u8; HEADER_LEN]),
            Err(HeaderError::HeaderChecksum)
        );
        let mut t = h;
        t.flags = 0x80;
        t.emit(&mut bad);
        assert_eq!(Header::parse(&bad), Err(HeaderError::BadFlags(0x80)));
    }

    #[test]
    fn data_checksum_sees_changes() {
        let a = vec![5u8; 1000];
        let mut b = a.clone();
        b[999] = 6;
        assert_ne!(data_checksum(&a), data_checksum(&b));
        assert_ne!(data_checksum(&a[..999]), data_checksum(&a));
    }

    proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Header::parse(&bytes);
        }

        #[test]
        fn emit_parse_round_trips(seq in any::<u32>(), ack in any::<u32>(), window in any::<u16>(),
                                  kind in 1u8..=7, layer in any::<u8>(), len in 0usize..40) {
            let h = Header { kind: PduType::from_u8(kind).unwrap(), flags: 0, window, seq, ack,
                             length: len as u32, data_checksum: 0, layer };
            let mut pdu = vec![0xa5u8; HEADER_LEN + len];
            h.emit(&mut pdu);
            prop_assert_eq!(Header::parse(&pdu), Ok(h));
        }

        #[test]
        fn single_bit_flips_in_header_are_rejected(bit in 0usize..(HEADER_LEN * 8)) {
            let mut pdu = vec![0u8; HEADER_LEN + 3];
            sample().emit(&mut pdu);
            pdu[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(Header::parse(&pdu).is_err());
        }
    }
}
