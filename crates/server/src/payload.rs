//! The one shared, pre-filled buffer every response payload is written from,
//! so no engine allocates or fills memory per request.

/// Size of the shared payload buffer; larger payloads repeat it.
pub(crate) const PAYLOAD_CHUNK: usize = 64 * 1024;

/// Response payload bytes (their value is not part of the protocol).
pub(crate) static PAYLOAD: [u8; PAYLOAD_CHUNK] = [b'x'; PAYLOAD_CHUNK];
