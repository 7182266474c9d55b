//! Socket options socket2 0.5 does not wrap: `TCP_INFO` (the fields connlab
//! reads), `TCP_NOTSENT_LOWAT`, `SO_SNDBUFFORCE`, and any integer option.

use std::io;
use std::os::fd::RawFd;

/// The head of the kernel's `struct tcp_info` (include/uapi/linux/tcp.h) up to
/// `tcpi_delivery_rate` (Linux 4.9). glibc's `struct tcp_info` (and so
/// `libc::tcp_info` on gnu) stops at `tcpi_total_retrans`, before `min_rtt`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct RawTcpInfo {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    app_limited: u8,
    rto: u32,
    ato: u32,
    snd_mss: u32,
    rcv_mss: u32,
    unacked: u32,
    sacked: u32,
    lost: u32,
    retrans: u32,
    fackets: u32,
    last_data_sent: u32,
    last_ack_sent: u32,
    last_data_recv: u32,
    last_ack_recv: u32,
    pmtu: u32,
    rcv_ssthresh: u32,
    rtt: u32,
    rttvar: u32,
    snd_ssthresh: u32,
    snd_cwnd: u32,
    advmss: u32,
    reordering: u32,
    rcv_rtt: u32,
    rcv_space: u32,
    total_retrans: u32,
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
}

/// What connlab reads of a TCP socket's `TCP_INFO` (tcp(7)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Smoothed round-trip time, microseconds.
    pub rtt_us: u32,
    /// Lowest round-trip time seen on the connection, microseconds (0 if the
    /// kernel is older than 4.6 or none was measured yet).
    pub min_rtt_us: u32,
    /// Congestion window, segments.
    pub snd_cwnd: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// Bytes written by the application and not yet sent.
    pub notsent_bytes: u32,
    /// Bytes the peer acknowledged.
    pub bytes_acked: u64,
    /// The kernel's latest delivery-rate sample, bytes per second.
    pub delivery_rate: u64,
}

/// Reads `TCP_INFO` of socket `fd`. Fields the kernel did not fill stay 0.
pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let mut raw = RawTcpInfo::default();
    let mut len = size_of::<RawTcpInfo>() as libc::socklen_t;
    // SAFETY: `raw` is a plain-old-data struct of `len` bytes; the kernel
    // writes at most `len` bytes into it and stores how many in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut RawTcpInfo).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpInfo {
        rtt_us: raw.rtt,
        min_rtt_us: raw.min_rtt,
        snd_cwnd: raw.snd_cwnd,
        unacked: raw.unacked,
        notsent_bytes: raw.notsent_bytes,
        bytes_acked: raw.bytes_acked,
        delivery_rate: raw.delivery_rate,
    })
}

/// `setsockopt(fd, level, name, &value)` for an integer option; values above
/// `c_int::MAX` are clamped.
pub fn set_int(fd: RawFd, level: libc::c_int, name: libc::c_int, value: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(value).unwrap_or(libc::c_int::MAX);
    // SAFETY: a pointer to a c_int of the size passed; the kernel checks `fd`.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `setsockopt(TCP_NOTSENT_LOWAT)`: unsent bytes above which the socket is
/// not reported writable (tcp(7)).
pub fn set_notsent_lowat(fd: RawFd, bytes: usize) -> io::Result<()> {
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, bytes)
}

/// Sets `SO_SNDBUF` to `bytes` (the kernel doubles it, socket(7)), past
/// `net.core.wmem_max` with `SO_SNDBUFFORCE` when the process may
/// (CAP_NET_ADMIN), else with `SO_SNDBUF`, which the kernel caps there.
/// Either way the kernel stops autotuning the buffer.
pub fn set_send_buffer(fd: RawFd, bytes: usize) -> io::Result<()> {
    set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, bytes)
        .or_else(|_| set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    #[test]
    fn layout_matches_the_kernel_header() {
        // Offsets from include/uapi/linux/tcp.h.
        assert_eq!(std::mem::offset_of!(RawTcpInfo, rtt), 68);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, pacing_rate), 104);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, notsent_bytes), 144);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, min_rtt), 148);
        assert_eq!(std::mem::offset_of!(RawTcpInfo, delivery_rate), 160);
    }

    #[test]
    fn reads_a_connected_socket() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(&[7; 1000]).unwrap();
        let mut buf = [0; 1000];
        s.read_exact(&mut buf).unwrap();
        s.write_all(b"ok").unwrap();
        c.read_exact(&mut buf[..2]).unwrap();
        let info = tcp_info(c.as_raw_fd()).unwrap();
        assert!(info.rtt_us > 0 && info.min_rtt_us > 0, "{info:?}");
        assert!(info.min_rtt_us <= info.rtt_us.max(info.min_rtt_us));
        // Kernels differ on whether the SYN counts.
        assert!((1000..=1001).contains(&info.bytes_acked), "{info:?}");
        set_notsent_lowat(c.as_raw_fd(), 16384).unwrap();
        set_send_buffer(c.as_raw_fd(), 1 << 20).unwrap();
        let sk = socket2::SockRef::from(&c).send_buffer_size().unwrap();
        // Without CAP_NET_ADMIN the kernel caps it at net.core.wmem_max.
        assert!(sk >= 64 << 10, "{sk}");
        assert!(tcp_info(-1).is_err());
    }
}
