//! A single-threaded TCP echo server on the RT-signal poller.
//!
//! ```text
//! cargo run --release -p connlab-rtsig --example echo -- 127.0.0.1:7007
//! ```
//! then, for example, `nc 127.0.0.1 7007`. Ctrl-C stops it.

use connlab_rtsig::{Ready, RtSig};
use std::os::fd::IntoRawFd;

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:7007".into());
    let listener = std::net::TcpListener::bind(&addr)
        .map_err(|e| std::io::Error::new(e.kind(), format!("bind {addr}: {e}")))?;
    eprintln!("echo: listening on {}", listener.local_addr()?);
    let lfd = listener.into_raw_fd();
    let rt = RtSig::new()?;
    rt.register(lfd, Ready::ACCEPTED)?;
    let mut fds = vec![libc::pollfd {
        fd: lfd,
        events: libc::POLLIN,
        revents: 0,
    }];
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        rt.poll(&mut fds, None)?;
        let mut i = 1;
        while i < fds.len() {
            let fd = fds[i].fd;
            if fds[i].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                match rt.read(fd, &mut buf) {
                    Ok(0) => {
                        rt.close(fd)?;
                        fds.swap_remove(i);
                        continue;
                    }
                    Ok(n) => {
                        if rt.write_blocking(fd, &buf[..n]).is_err() {
                            rt.close(fd)?;
                            fds.swap_remove(i);
                            continue;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => {
                        rt.close(fd)?;
                        fds.swap_remove(i);
                        continue;
                    }
                }
            }
            i += 1;
        }
        if fds[0].revents & libc::POLLIN != 0 {
            while let Ok(fd) = rt.accept(lfd) {
                fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
        }
    }
}
