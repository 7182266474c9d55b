//! A TUN device opened with raw `ioctl`s: layer-3 packets, no packet-info
//! prefix, non-blocking, optionally with the virtio-net offload header so the
//! kernel hands over whole GSO super-packets (up to 64 KiB) in one read.

use crate::LinkemError;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

const TUN_PATH: &str = "/dev/net/tun";
// From <linux/if_tun.h>; not all are in the libc crate.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;

#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// An open TUN device. The device exists as long as this value does.
#[derive(Debug)]
pub struct Tun {
    file: File,
    name: String,
    offload: bool,
    /// The network namespace the device lives in (`None` if it could not be
    /// opened), to read its counters from any thread.
    netns: Option<File>,
}

impl Tun {
    /// Creates (or attaches to) TUN device `name` in the calling thread's
    /// network namespace. With `offload` the device takes and gives GSO
    /// super-packets with checksums left to the kernel, each packet
    /// preceded by a 10-byte virtio-net header.
    pub fn open(name: &str, offload: bool) -> Result<Tun, LinkemError> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(LinkemError::BadConfig(format!(
                "TUN name {name:?}: 1-15 characters"
            )));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(TUN_PATH)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => LinkemError::NoTun,
                io::ErrorKind::PermissionDenied => LinkemError::NeedsRoot,
                _ => LinkemError::io(format!("opening {TUN_PATH}"), e),
            })?;
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            flags: IFF_TUN | IFF_NO_PI | if offload { IFF_VNET_HDR } else { 0 },
            _pad: [0; 22],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // SAFETY: TUNSETIFF reads and writes one `struct ifreq`, which
        // `IfReq` lays out (40 bytes); `req` outlives the call.
        if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
            let e = io::Error::last_os_error();
            return Err(if e.raw_os_error() == Some(libc::EPERM) {
                LinkemError::NeedsRoot
            } else {
                LinkemError::io(format!("TUNSETIFF {name}"), e)
            });
        }
        if offload {
            let flags = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
            // SAFETY: TUNSETOFFLOAD takes its argument by value.
            if unsafe { libc::ioctl(file.as_raw_fd(), TUNSETOFFLOAD, flags as libc::c_ulong) } < 0 {
                return Err(LinkemError::io(
                    format!("TUNSETOFFLOAD {name}"),
                    io::Error::last_os_error(),
                ));
            }
        }
        Ok(Tun {
            file,
            name: name.to_string(),
            offload,
            netns: File::open("/proc/thread-self/ns/net").ok(),
        })
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether packets carry the virtio-net header.
    pub fn offload(&self) -> bool {
        self.offload
    }

    /// Packets the kernel dropped so far because the device's queue toward
    /// this reader was full (the transmit `drop` counter of
    /// `/proc/net/dev`, read in the device's namespace); `None` when the
    /// counter cannot be read.
    pub fn tx_dropped(&self) -> Option<u64> {
        let netns = self.netns.as_ref()?;
        let text = connlab_os::netns::run_in_namespace_of(netns, &self.name, || {
            std::fs::read_to_string("/proc/thread-self/net/dev")
        })
        .ok()?
        .ok()?;
        parse_tx_dropped(&text, &self.name)
    }

    /// Reads one packet; `Ok(None)` when none is waiting.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        // SAFETY: `buf` is valid for writes of its length.
        let n = unsafe { libc::read(self.file.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
            _ => Err(e),
        }
    }

    /// Writes one packet back into the kernel (as if it arrived on the device).
    pub fn send(&self, packet: &[u8]) -> io::Result<()> {
        // SAFETY: `packet` is valid for reads of its length.
        let n = unsafe { libc::write(self.file.as_raw_fd(), packet.as_ptr().cast(), packet.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

/// The transmit `drop` column of interface `name` in the text of
/// `/proc/net/dev`.
fn parse_tx_dropped(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (iface, counters) = line.split_once(':')?;
        if iface.trim() != name {
            return None;
        }
        // Eight receive columns, then transmit: bytes, packets, errs, drop.
        counters.split_whitespace().nth(11)?.parse().ok()
    })
}

impl AsRawFd for Tun {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_tx_dropped, Tun};
    use std::net::UdpSocket;
    use std::process::Command;

    const NET_DEV: &str = "\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1200      12    0    0    0     0          0         0     1200      12    0    0    0     0       0          0
lk-lr0: 9000 90 1 2 0 0 0 0 8000 80 3 17 0 0 0 0
";

    #[test]
    fn reads_the_transmit_drop_column_of_the_named_interface() {
        assert_eq!(parse_tx_dropped(NET_DEV, "lk-lr0"), Some(17));
        assert_eq!(parse_tx_dropped(NET_DEV, "lo"), Some(0));
    }

    #[test]
    fn an_unknown_interface_or_a_short_line_reads_as_none() {
        assert_eq!(parse_tx_dropped(NET_DEV, "eth9"), None);
        assert_eq!(parse_tx_dropped("short: 1 2 3\n", "short"), None);
        assert_eq!(parse_tx_dropped("", "lo"), None);
    }

    /// Packets nobody reads overflow the device's queue (500 by default)
    /// and show up in `tx_dropped`. Runs in a private network namespace.
    #[test]
    fn counts_the_packets_it_drops_when_nobody_reads() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 || !std::path::Path::new("/dev/net/tun").exists() {
            eprintln!("skipped: needs root and /dev/net/tun");
            return;
        }
        std::thread::spawn(|| {
            // SAFETY: moves only this thread into a new network namespace.
            assert_eq!(unsafe { libc::unshare(libc::CLONE_NEWNET) }, 0);
            let tun = Tun::open("lkdrop0", false).unwrap();
            for args in [
                &["link", "set", "lkdrop0", "txqueuelen", "100", "up"][..],
                &["addr", "add", "10.9.9.1/24", "dev", "lkdrop0"][..],
            ] {
                assert!(Command::new("ip").args(args).status().unwrap().success());
            }
            assert_eq!(tun.tx_dropped(), Some(0));
            let sock = UdpSocket::bind("10.9.9.1:0").unwrap();
            for _ in 0..300 {
                sock.send_to(b"nobody reads this", "10.9.9.2:9").unwrap();
            }
            let dropped = tun.tx_dropped().unwrap();
            assert!((150..=300).contains(&dropped), "{dropped}");
        })
        .join()
        .unwrap();
    }
}
