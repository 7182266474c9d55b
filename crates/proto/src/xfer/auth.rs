//! The shared key and the handshake proofs: HMAC-SHA256 over a role label and
//! the handshake transcript (the HELLO payload and the first 44 bytes of the
//! CHALLENGE payload, everything but the server's proof). The labels differ,
//! so a proof of one role can never be replayed as the other's, and each side's
//! fresh nonce keeps the other's proof from being replayed on a new connection.

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::frame::CHALLENGE_SIGNED_LEN;
use super::{Challenge, Hello, LocalError};

type HmacSha256 = Hmac<Sha256>;

/// Label prefixed to the transcript for the server's proof.
pub(crate) const SERVER_LABEL: &[u8] = b"connlab-xfer v1 server proof\0";
/// Label prefixed to the transcript for the node's proof.
pub(crate) const NODE_LABEL: &[u8] = b"connlab-xfer v1 node proof\0";

/// The key shared by the I/O server and its nodes. `Debug` does not show it.
#[derive(Clone)]
pub struct AuthKey {
    /// HMAC keyed once; each proof works on a clone.
    mac: HmacSha256,
}

impl AuthKey {
    /// The least key length accepted, in bytes.
    pub const MIN_LEN: usize = 16;

    /// A key from its bytes (at least [`AuthKey::MIN_LEN`]; use random bytes).
    pub fn new(key: &[u8]) -> Result<AuthKey, LocalError> {
        let too_short = LocalError::KeyTooShort {
            len: key.len(),
            min: AuthKey::MIN_LEN,
        };
        if key.len() < AuthKey::MIN_LEN {
            return Err(too_short);
        }
        // HMAC takes keys of any length; the error case cannot happen.
        let mac = <HmacSha256 as Mac>::new_from_slice(key).map_err(|_| too_short)?;
        Ok(AuthKey { mac })
    }

    /// The proof `label` makes over the handshake transcript.
    pub(crate) fn proof(&self, label: &[u8], hello: &Hello, challenge: &Challenge) -> [u8; 32] {
        self.transcript_mac(label, hello, challenge)
            .finalize()
            .into_bytes()
            .into()
    }

    /// Whether `proof` is `label`'s proof over the transcript (constant time).
    pub(crate) fn verify(
        &self,
        label: &[u8],
        hello: &Hello,
        challenge: &Challenge,
        proof: &[u8; 32],
    ) -> bool {
        self.transcript_mac(label, hello, challenge)
            .verify_slice(proof)
            .is_ok()
    }

    fn transcript_mac(&self, label: &[u8], hello: &Hello, challenge: &Challenge) -> HmacSha256 {
        let mut mac = self.mac.clone();
        mac.update(label);
        mac.update(&hello.payload());
        mac.update(&challenge.payload()[..CHALLENGE_SIGNED_LEN]);
        mac
    }
}

impl fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuthKey(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transcript() -> (Hello, Challenge) {
        let hello = Hello {
            min_version: 1,
            max_version: 1,
            node_id: 7,
            initial_window: 65536,
            max_streams: 100,
            nonce: [1; 32],
        };
        let challenge = Challenge {
            version: 1,
            initial_window: 65536,
            max_streams: 100,
            nonce: [2; 32],
            proof: [0; 32],
        };
        (hello, challenge)
    }

    #[test]
    fn refuses_short_keys() {
        assert_eq!(
            AuthKey::new(b"short").unwrap_err(),
            LocalError::KeyTooShort { len: 5, min: 16 }
        );
        assert!(AuthKey::new(&[0; 16]).is_ok());
        assert_eq!(
            format!("{:?}", AuthKey::new(&[9; 16]).unwrap()),
            "AuthKey(..)"
        );
    }

    #[test]
    fn proof_is_hmac_sha256_of_label_and_transcript() {
        let key = AuthKey::new(b"0123456789abcdef").unwrap();
        let (hello, challenge) = transcript();
        let mut message = NODE_LABEL.to_vec();
        message.extend_from_slice(&hello.payload());
        message.extend_from_slice(&challenge.payload()[..44]);
        let mut mac = HmacSha256::new_from_slice(b"0123456789abcdef").unwrap();
        mac.update(&message);
        let expected: [u8; 32] = mac.finalize().into_bytes().into();
        assert_eq!(key.proof(NODE_LABEL, &hello, &challenge), expected);
    }

    #[test]
    fn verifies_only_the_right_label_key_and_transcript() {
        let key = AuthKey::new(b"0123456789abcdef").unwrap();
        let other = AuthKey::new(b"0123456789abcdeX").unwrap();
        let (hello, mut challenge) = transcript();
        let proof = key.proof(SERVER_LABEL, &hello, &challenge);
        assert!(key.verify(SERVER_LABEL, &hello, &challenge, &proof));
        assert!(!key.verify(NODE_LABEL, &hello, &challenge, &proof));
        assert!(!other.verify(SERVER_LABEL, &hello, &challenge, &proof));
        // The proof field itself is not covered, every other field is.
        challenge.proof = [0xff; 32];
        assert!(key.verify(SERVER_LABEL, &hello, &challenge, &proof));
        challenge.nonce[31] ^= 1;
        assert!(!key.verify(SERVER_LABEL, &hello, &challenge, &proof));
    }
}
