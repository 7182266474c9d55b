//! The client-side CLB1 response parser fed arbitrary bytes in arbitrary
//! chunking.
//!
//! Input: byte 0 picks the chunk length (0: one feed), byte 1 picks
//! `max_message`, the rest is the response stream. Checks: no panic; the
//! completed responses and the outcome do not depend on the chunking; the
//! completed responses account for no more bytes than arrived.

#![no_main]

use connlab_proto::{ClientSession, Protocol, ResponseDone};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fn max_message(selector: u8) -> u32 {
    match selector % 4 {
        0 => 16,
        1 => 64,
        2 => 4096,
        _ => 16 * 1024 * 1024,
    }
}

fn run(stream: &[u8], chunk: usize, max: u32) -> (Vec<ResponseDone>, bool) {
    let mut session = ClientSession::new(Protocol::Clb1, max);
    let mut done = Vec::new();
    let mut failed = false;
    for part in common::chunks(stream, chunk) {
        if session.feed(part, &mut |d| done.push(d)).is_err() {
            failed = true;
            break;
        }
    }
    let _ = session.finish();
    assert!(!session.peer_closes());
    if failed {
        let mut late = 0;
        assert_eq!(session.feed(stream, &mut |_| late += 1), Ok(()));
        assert_eq!(late, 0);
    }
    (done, failed)
}

fuzz_target!(|data: &[u8]| {
    let Some((chunk_sel, rest)) = common::split(data) else {
        return;
    };
    let Some((limit_sel, stream)) = common::split(rest) else {
        return;
    };
    let max = max_message(limit_sel);
    let whole = run(stream, usize::MAX, max);
    let chunked = run(stream, common::chunk_len(chunk_sel), max);
    assert_eq!(whole, chunked, "parse depends on the chunking");
    let total: u64 = whole.0.iter().map(|d| d.total_bytes).sum();
    assert!(
        total <= stream.len() as u64,
        "more bytes completed than received"
    );
    for d in &whole.0 {
        assert!(d.seq.is_some() && d.status.is_none());
        assert!((16..=u64::from(max)).contains(&d.total_bytes));
    }
});
