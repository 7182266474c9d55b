//! linkem's packet parser: the virtio-net offload header and the IPv4/TCP/UDP
//! fields the packet log records, from arbitrary bytes.
//!
//! Checks: no panic; what is parsed lies within the packet (ports and TCP
//! fields only with an IPv4 header, payload no longer than the packet); a
//! super-packet's wire size is at least its length.

#![no_main]

use connlab_linkem::packet::{tcp_flags, PacketInfo, VnetHdr, VNET_HDR_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // As read from the TUN device: offload header, then the IP packet.
    if let Some(hdr) = VnetHdr::parse(data) {
        let len = data.len() - VNET_HDR_LEN;
        let (segments, bytes) = hdr.wire(len);
        assert!(segments >= 1);
        assert!(bytes >= len as u64);
    }
    for packet in [data, data.get(VNET_HDR_LEN..).unwrap_or_default()] {
        let info = PacketInfo::parse(packet);
        if info.addrs.is_none() {
            assert_eq!(info, PacketInfo::default());
        }
        if info.tcp.is_some() || info.ports.is_some() {
            assert!(info.addrs.is_some());
        }
        if info.tcp.is_some() {
            assert_eq!(info.protocol, 6);
        }
        assert!(info.payload_len as usize <= packet.len());
        if let Some((_, _, flags)) = info.tcp {
            assert!(tcp_flags(flags).len() <= 8);
        }
    }
});
