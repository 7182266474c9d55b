//! System 4: the single-IP cluster front end of the SAPS paper.
//!
//! An [I/O server](server) holds every TCP connection of the cluster address
//! and relays each one, as a stream of the transfer protocol
//! ([`connlab_proto::xfer`], `docs/transfer-protocol.md`), to an application
//! node over one interconnect connection per node. Toward clients it bounds
//! what the kernel may hold per socket (`TCP_NOTSENT_LOWAT` and the send
//! buffer) and writes to ready sockets in deficit-round-robin order
//! ([`FairQueue`]), so one bulk stream cannot fill the interface queue ahead of
//! the others. An [application node](node) authenticates with the shared key
//! and either forwards each stream to a local unmodified server or hands it
//! to Rust code as a [`ClusterStream`] from a [`ClusterListener`].

#![warn(clippy::unwrap_used)]

pub mod access;
pub mod api;
pub mod drr;
pub mod node;
pub mod options;
mod outbuf;
mod relay;
pub mod server;
pub mod sizing;
mod splice;
pub mod stats;
#[cfg(test)]
mod test_sessions;

pub use access::{Access, ConnectRule, PortRange};
pub use api::{ClusterListener, ClusterStream};
pub use drr::{After, FairQueue, Turn};
pub use node::{run_node, run_node_with_stats, NodeConfig, Outbound};
pub use options::{NodeOptions, SendBufferChoice, ServerOptions};
pub use server::{run_server, SendBuffer, SendLimit, ServerConfig};
pub use sizing::ShareSizing;
pub use stats::{ConnStats, NodeRunStats, NodeStats, ServerStats};

use connlab_proto::xfer::{AuthKey, LocalError};
use std::io;
use std::path::{Path, PathBuf};

/// What went wrong in the front end, naming the file, address or operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key file could not be read.
    #[error("reading the key file {path}: {source}")]
    KeyRead {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The key file holds fewer than [`AuthKey::MIN_LEN`] bytes.
    #[error("key file {path} holds {len} bytes; the shared key needs at least {min} (use random bytes, e.g. `head -c 32 /dev/urandom > key`)")]
    KeyTooShort {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: usize,
        /// The least length.
        min: usize,
    },
    /// The key file is larger than [`MAX_KEY_FILE`]: not a key file (a
    /// wrong path, a device, a log).
    #[error("key file {path} is larger than {max} bytes; the shared key is a small file of random bytes (e.g. `head -c 32 /dev/urandom > key`)")]
    KeyTooLong {
        /// The file.
        path: PathBuf,
        /// The largest size accepted.
        max: usize,
    },
    /// The I/O server refused to serve a cluster port this node asked for
    /// (LISTEN_RESULT with an errno, `EADDRINUSE` when the port is taken on
    /// the cluster address).
    #[error("the I/O server at {addr} refused cluster port {port}: {source}")]
    PortRefused {
        /// The I/O server's address.
        addr: String,
        /// The cluster port asked for.
        port: u16,
        /// The errno the I/O server gave.
        source: io::Error,
    },
    /// A socket operation failed during setup.
    #[error("{what} {addr}: {source}")]
    Io {
        /// The operation ("binding", "connecting to the I/O server at", ...).
        what: &'static str,
        /// The address concerned.
        addr: String,
        /// The cause.
        source: io::Error,
    },
    /// The I/O server refused or broke the session.
    #[error("session with the I/O server at {addr}: {reason}")]
    Session {
        /// The I/O server's address.
        addr: String,
        /// What happened.
        reason: String,
    },
    /// A configuration value is out of range.
    #[error("{0}")]
    Config(String),
}

impl Error {
    pub(crate) fn io(what: &'static str, addr: impl ToString, source: io::Error) -> Error {
        Error::Io {
            what,
            addr: addr.to_string(),
            source,
        }
    }
}

/// The largest key file [`load_key`] reads, bytes.
pub const MAX_KEY_FILE: usize = 64 * 1024;

/// Reads the shared key from `path` (all its bytes; at least
/// [`AuthKey::MIN_LEN`], at most [`MAX_KEY_FILE`]).
pub fn load_key(path: &Path) -> Result<AuthKey, Error> {
    use std::io::Read as _;
    let read_error = |source| Error::KeyRead {
        path: path.to_path_buf(),
        source,
    };
    // Bounded read: one byte past the cap tells "too long" without reading
    // a huge file or a device like /dev/zero to its end.
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_KEY_FILE as u64 + 1).read_to_end(&mut bytes))
        .map_err(read_error)?;
    if bytes.len() > MAX_KEY_FILE {
        return Err(Error::KeyTooLong {
            path: path.to_path_buf(),
            max: MAX_KEY_FILE,
        });
    }
    AuthKey::new(&bytes).map_err(|e| match e {
        LocalError::KeyTooShort { len, min } => Error::KeyTooShort {
            path: path.to_path_buf(),
            len,
            min,
        },
        other => Error::Config(format!("key file {}: {other}", path.display())),
    })
}

/// 32 fresh random bytes from the kernel (`getrandom(2)`), for handshake nonces.
pub fn os_nonce() -> io::Result<[u8; 32]> {
    let mut nonce = [0u8; 32];
    let mut filled = 0;
    while filled < nonce.len() {
        let rest = &mut nonce[filled..];
        // SAFETY: the pointer and length describe the writable tail of `nonce`.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        filled += n as usize;
    }
    Ok(nonce)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
        let path = std::env::temp_dir().join(format!("connlab-key-{}-{name}", std::process::id()));
        std::fs::write(&path, bytes).unwrap();
        path
    }

    #[test]
    fn key_file_over_the_cap_is_refused_by_name() {
        let path = temp_file("big", &vec![7u8; MAX_KEY_FILE + 1]);
        let err = load_key(&path).err().unwrap();
        let _ = std::fs::remove_file(&path);
        assert!(
            matches!(err, Error::KeyTooLong { max, .. } if max == MAX_KEY_FILE),
            "{err}"
        );
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn unbounded_key_source_is_refused_without_reading_it_all() {
        // /dev/zero never ends: an unbounded read would never return.
        let err = load_key(Path::new("/dev/zero")).err().unwrap();
        assert!(matches!(err, Error::KeyTooLong { .. }), "{err}");
    }

    #[test]
    fn key_file_at_the_cap_is_read() {
        let path = temp_file("cap", &vec![7u8; MAX_KEY_FILE]);
        let key = load_key(&path);
        let _ = std::fs::remove_file(&path);
        assert!(key.is_ok());
    }
}
