//! What the log records of a packet: IPv4 addresses, protocol, TCP/UDP ports,
//! TCP sequence and acknowledgement numbers, flags and payload length. One
//! checked parse from untrusted bytes; anything it does not understand gives
//! empty fields, never an error.

use std::net::Ipv4Addr;

/// Size of `struct virtio_net_hdr` (the prefix of every packet on a TUN
/// device opened with `IFF_VNET_HDR`).
pub const VNET_HDR_LEN: usize = 10;
/// `VIRTIO_NET_HDR_GSO_NONE`.
const GSO_NONE: u8 = 0;

/// The offload header of a packet read with `IFF_VNET_HDR`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `gso_type` (0: not a GSO super-packet).
    pub gso_type: u8,
    /// Length of the headers repeated in every segment.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
}

impl VnetHdr {
    /// Parses the 10-byte header (little-endian fields, as on x86).
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        if b.len() < VNET_HDR_LEN {
            return None;
        }
        Some(VnetHdr {
            gso_type: b[1] & 0x7f,
            hdr_len: u16::from_le_bytes([b[2], b[3]]),
            gso_size: u16::from_le_bytes([b[4], b[5]]),
        })
    }

    /// How many packets a super-packet of `len` bytes becomes on the wire,
    /// and their total size (the headers repeated in each).
    pub fn wire(&self, len: usize) -> (u64, u64) {
        if self.gso_type == GSO_NONE || self.gso_size == 0 {
            return (1, len as u64);
        }
        // hdr_len from the guest may be a hint only: use the parsed headers
        // when it looks wrong.
        let hdr = (self.hdr_len as usize).min(len);
        let payload = len - hdr;
        let segs = payload.div_ceil(self.gso_size as usize).max(1) as u64;
        (segs, len as u64 + (segs - 1) * hdr as u64)
    }
}

/// Header fields of an IPv4 packet (with TCP or UDP ports when present).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketInfo {
    /// Source and destination, when IPv4.
    pub addrs: Option<(Ipv4Addr, Ipv4Addr)>,
    /// IP protocol number.
    pub protocol: u8,
    /// Source and destination port (TCP/UDP).
    pub ports: Option<(u16, u16)>,
    /// TCP sequence number, acknowledgement number and flags.
    pub tcp: Option<(u32, u32, u8)>,
    /// Transport payload length (TCP/UDP), else IP payload length.
    pub payload_len: u32,
}

impl PacketInfo {
    /// Parses an IP packet (no link header). Unknown or truncated packets
    /// give what could be read.
    pub fn parse(p: &[u8]) -> PacketInfo {
        let mut info = PacketInfo::default();
        if p.len() < 20 || p[0] >> 4 != 4 {
            return info;
        }
        let ihl = ((p[0] & 0x0f) as usize) * 4;
        let total = (u16::from_be_bytes([p[2], p[3]]) as usize).min(p.len());
        if ihl < 20 || total < ihl {
            return info;
        }
        info.protocol = p[9];
        info.addrs = Some((
            Ipv4Addr::new(p[12], p[13], p[14], p[15]),
            Ipv4Addr::new(p[16], p[17], p[18], p[19]),
        ));
        // A GSO super-packet's IPv4 total length may be 0 or a segment's:
        // take the bytes actually present.
        let total = if total == ihl {
            p.len()
        } else {
            p.len().max(total)
        };
        info.payload_len = (total - ihl) as u32;
        let l4 = &p[ihl..total];
        let fragment_offset = u16::from_be_bytes([p[6], p[7]]) & 0x1fff;
        if fragment_offset != 0 {
            return info;
        }
        match info.protocol {
            6 if l4.len() >= 20 => {
                let doff = ((l4[12] >> 4) as usize) * 4;
                info.ports = Some((
                    u16::from_be_bytes([l4[0], l4[1]]),
                    u16::from_be_bytes([l4[2], l4[3]]),
                ));
                info.tcp = Some((
                    u32::from_be_bytes([l4[4], l4[5], l4[6], l4[7]]),
                    u32::from_be_bytes([l4[8], l4[9], l4[10], l4[11]]),
                    l4[13],
                ));
                info.payload_len = l4.len().saturating_sub(doff) as u32;
            }
            17 if l4.len() >= 8 => {
                info.ports = Some((
                    u16::from_be_bytes([l4[0], l4[1]]),
                    u16::from_be_bytes([l4[2], l4[3]]),
                ));
                info.payload_len = (l4.len() - 8) as u32;
            }
            _ => {}
        }
        info
    }
}

/// TCP flags as letters, tcpdump style (`S`, `.`, `P`, `F`, `R`, `U`, `E`, `W`).
pub fn tcp_flags(flags: u8) -> String {
    let mut s = String::new();
    for (bit, c) in [
        (0x02, 'S'),
        (0x01, 'F'),
        (0x04, 'R'),
        (0x08, 'P'),
        (0x20, 'U'),
        (0x40, 'E'),
        (0x80, 'W'),
        (0x10, '.'),
    ] {
        if flags & bit != 0 {
            s.push(c);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_packet(payload: usize) -> Vec<u8> {
        let total = 20 + 20 + payload;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[9] = 6;
        p[12..16].copy_from_slice(&[198, 18, 1, 1]);
        p[16..20].copy_from_slice(&[198, 18, 2, 1]);
        let t = &mut p[20..];
        t[0..2].copy_from_slice(&40000u16.to_be_bytes());
        t[2..4].copy_from_slice(&5001u16.to_be_bytes());
        t[4..8].copy_from_slice(&123456u32.to_be_bytes());
        t[8..12].copy_from_slice(&7u32.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = 0x18;
        p
    }

    #[test]
    fn parses_tcp() {
        let info = PacketInfo::parse(&tcp_packet(100));
        assert_eq!(
            info.addrs,
            Some((Ipv4Addr::new(198, 18, 1, 1), Ipv4Addr::new(198, 18, 2, 1)))
        );
        assert_eq!(info.ports, Some((40000, 5001)));
        assert_eq!(info.tcp, Some((123456, 7, 0x18)));
        assert_eq!(info.payload_len, 100);
        assert_eq!(tcp_flags(0x18), "P.");
    }

    #[test]
    fn garbage_gives_empty_fields() {
        assert_eq!(PacketInfo::parse(&[]), PacketInfo::default());
        assert_eq!(PacketInfo::parse(&[0x60; 40]).addrs, None);
        let mut p = tcp_packet(0);
        p.truncate(30);
        let info = PacketInfo::parse(&p);
        assert!(info.addrs.is_some());
        assert_eq!(info.tcp, None);
    }

    #[test]
    fn gso_wire_size() {
        let h = VnetHdr {
            gso_type: 1,
            hdr_len: 52,
            gso_size: 1448,
        };
        // 10 full segments.
        assert_eq!(h.wire(52 + 14480), (10, 10 * 1500));
        assert_eq!(VnetHdr::default().wire(1500), (1, 1500));
    }
}
