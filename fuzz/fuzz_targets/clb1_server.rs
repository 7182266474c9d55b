//! The CLB1 server session fed arbitrary bytes in arbitrary chunking.
//!
//! Input: byte 0 picks the chunk length (0: one feed), byte 1 picks
//! `max_message`, the rest is the request stream. Checks: no panic; the
//! responses and the outcome do not depend on the chunking; at most one
//! response per 16 input bytes; no response larger than `max_message`.

#![no_main]

use connlab_proto::{Flow, Protocol, Response, ServerConfig, ServerSession};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fn max_message(selector: u8) -> u32 {
    match selector % 4 {
        0 => 16,
        1 => 64,
        2 => 4096,
        _ => ServerConfig::DEFAULT_MAX_MESSAGE,
    }
}

/// Feeds `stream` in `chunk`-byte feeds; returns the responses and whether
/// the session ended with an error.
fn run(stream: &[u8], chunk: usize, max: u32) -> (Vec<Response>, Result<Flow, ()>) {
    let config = ServerConfig {
        max_message: max,
        files: None,
    };
    let mut session = ServerSession::new(Protocol::Clb1, config);
    let mut responses = Vec::new();
    let mut outcome = Ok(Flow::Continue);
    for part in common::chunks(stream, chunk) {
        let _ = session.in_request_head();
        match session.feed(part, &mut |r| responses.push(r)) {
            Ok(Flow::Continue) => {}
            Ok(Flow::Close) => {
                outcome = Ok(Flow::Close);
                break;
            }
            Err(_) => {
                outcome = Err(());
                break;
            }
        }
    }
    let _ = session.finish();
    // A closed session takes nothing more.
    let mut late = 0;
    if outcome.is_err() {
        assert_eq!(session.feed(stream, &mut |_| late += 1), Ok(Flow::Close));
        assert_eq!(late, 0);
    }
    (responses, outcome)
}

fuzz_target!(|data: &[u8]| {
    let Some((chunk_sel, rest)) = common::split(data) else {
        return;
    };
    let Some((limit_sel, stream)) = common::split(rest) else {
        return;
    };
    let max = max_message(limit_sel);
    let (whole, whole_outcome) = run(stream, usize::MAX, max);
    let (chunked, chunked_outcome) = run(stream, common::chunk_len(chunk_sel), max);
    assert_eq!(whole, chunked, "responses depend on the chunking");
    assert_eq!(
        whole_outcome, chunked_outcome,
        "outcome depends on the chunking"
    );
    assert!(
        whole.len() <= stream.len() / 16,
        "more responses than requests"
    );
    for response in &whole {
        assert!(response.payload_len() + 16 <= u64::from(max));
        let mut head = [0; Response::MAX_HEADER_LEN];
        assert_eq!(response.encode_header(&mut head), 16);
    }
});
