//! A descriptor held in reserve for the descriptor limit (`EMFILE`).
//!
//! At the limit `accept` fails and the connection stays queued. An
//! edge-triggered listener then never reports it again, and a
//! level-triggered one reports it forever: either way the server stops
//! serving or spins. With a descriptor kept in reserve, the server gives it
//! up, accepts the pending connection, closes it at once (the client sees
//! a reset, not a hang), and takes the reserve back. This is the classic
//! answer (libev's and nginx's documentation describe it); the order matters:
//! the connection must be closed before the reserve is reopened, since at
//! the limit the connection holds the only free descriptor.

use std::fs::File;
use std::io;

/// What one [`FdReserve::shed`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shed {
    /// A pending connection was accepted and closed.
    One,
    /// Nothing was pending.
    Empty,
    /// No descriptor could be had, not even the reserve's (another thread
    /// took it): nothing was accepted; try again later.
    Stuck,
}

/// One spare descriptor (`/dev/null`), given up only to shed a connection.
#[derive(Debug)]
pub struct FdReserve(Option<File>);

impl Default for FdReserve {
    fn default() -> Self {
        Self::new()
    }
}

impl FdReserve {
    /// Opens the reserve now, while descriptors are free.
    pub fn new() -> FdReserve {
        FdReserve(File::open("/dev/null").ok())
    }

    /// Whether the reserve is held.
    pub fn is_held(&self) -> bool {
        self.0.is_some()
    }

    /// Frees the reserve, runs `accept_and_close` (which accepts one
    /// pending connection and closes it before it returns; `WouldBlock`
    /// when none is pending), then takes the reserve back. A reserve lost
    /// earlier is reopened first.
    pub fn shed(&mut self, accept_and_close: impl FnOnce() -> io::Result<()>) -> Shed {
        if self.0.is_none() {
            self.0 = File::open("/dev/null").ok();
        }
        if self.0.take().is_none() {
            return Shed::Stuck;
        }
        let outcome = match accept_and_close() {
            Ok(()) => Shed::One,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Shed::Empty,
            Err(_) => Shed::Stuck,
        };
        self.0 = File::open("/dev/null").ok();
        outcome
    }
}

/// Counts stretches of time at the descriptor limit ("episodes"): one
/// begins with a connection shed after a connection served (or with the
/// first one shed), so a flood that sheds thousands counts once.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LimitEpisodes {
    at_limit: bool,
}

impl LimitEpisodes {
    /// A connection was shed: counts it in `shed`, and in `episodes` when
    /// it begins a new stretch at the limit.
    pub fn shed(&mut self, shed: &mut u64, episodes: &mut u64) {
        *shed += 1;
        if !std::mem::replace(&mut self.at_limit, true) {
            *episodes += 1;
        }
    }

    /// A connection was served: the stretch at the limit (if any) ended.
    pub fn served(&mut self) {
        self.at_limit = false;
    }
}

/// Whether `e` says this process (`EMFILE`) or the system (`ENFILE`) is out
/// of descriptors.
pub fn is_descriptor_limit(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_at_the_limit_is_one_episode() {
        let (mut shed, mut episodes) = (0, 0);
        let mut e = LimitEpisodes::default();
        for _ in 0..3 {
            e.shed(&mut shed, &mut episodes);
        }
        e.served();
        e.served();
        e.shed(&mut shed, &mut episodes);
        assert_eq!((shed, episodes), (4, 2));
    }

    #[test]
    fn the_reserve_is_given_up_for_one_accept_and_taken_back() {
        let mut r = FdReserve::new();
        assert!(r.is_held());
        let mut ran = false;
        assert_eq!(
            r.shed(|| {
                ran = true;
                Ok(())
            }),
            Shed::One
        );
        assert!(ran && r.is_held());
        assert_eq!(
            r.shed(|| Err(io::ErrorKind::WouldBlock.into())),
            Shed::Empty
        );
        assert_eq!(
            r.shed(|| Err(io::Error::from_raw_os_error(libc::EMFILE))),
            Shed::Stuck
        );
        assert!(r.is_held());
        assert!(is_descriptor_limit(&io::Error::from_raw_os_error(
            libc::EMFILE
        )));
        assert!(is_descriptor_limit(&io::Error::from_raw_os_error(
            libc::ENFILE
        )));
        assert!(!is_descriptor_limit(&io::Error::from_raw_os_error(
            libc::ECONNREFUSED
        )));
    }
}
