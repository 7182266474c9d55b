//! The HTTP/1.1 mode: the server's request head parser and the client's
//! response parser, each fed the same arbitrary bytes in arbitrary chunking.
//!
//! Input: byte 0 picks the chunk length (0: one feed), byte 1 picks
//! `max_message` and whether the server has a file table, the rest is the
//! byte stream. Checks: no panic; responses, completions and outcomes do not
//! depend on the chunking; output is bounded by the input; `/bytes/N` bodies
//! stay within `max_message`; the client never completes more bytes than arrived.

#![no_main]

use std::sync::OnceLock;

use connlab_proto::http1::FileSizes;
use connlab_proto::{
    ClientSession, Flow, HttpStatus, Protocol, Response, ResponseDone, ServerConfig, ServerSession,
};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fn files() -> &'static FileSizes {
    static FILES: OnceLock<FileSizes> = OnceLock::new();
    FILES.get_or_init(|| {
        FileSizes::new([
            ("/index.html".to_string(), 1024),
            ("/a/b.gif".to_string(), 0),
            ("/big.bin".to_string(), u64::MAX),
        ])
    })
}

fn config(selector: u8) -> ServerConfig {
    let max_message = match selector % 4 {
        0 => 16,
        1 => 64,
        2 => 4096,
        _ => ServerConfig::DEFAULT_MAX_MESSAGE,
    };
    let files = (selector & 4 != 0).then(files);
    ServerConfig { max_message, files }
}

fn serve(stream: &[u8], chunk: usize, config: ServerConfig) -> (Vec<Response>, Result<Flow, ()>) {
    let mut session = ServerSession::new(Protocol::Http, config);
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
    (responses, outcome)
}

fn parse(stream: &[u8], chunk: usize) -> (Vec<ResponseDone>, bool, bool) {
    let mut session = ClientSession::new(Protocol::Http, 0);
    let mut done = Vec::new();
    let mut failed = false;
    for part in common::chunks(stream, chunk) {
        if session.feed(part, &mut |d| done.push(d)).is_err() {
            failed = true;
            break;
        }
    }
    let _ = session.finish();
    (done, failed, session.peer_closes())
}

fuzz_target!(|data: &[u8]| {
    let Some((chunk_sel, rest)) = common::split(data) else {
        return;
    };
    let Some((config_sel, stream)) = common::split(rest) else {
        return;
    };
    let chunk = common::chunk_len(chunk_sel);
    let config = config(config_sel);

    let whole = serve(stream, usize::MAX, config);
    assert_eq!(
        whole,
        serve(stream, chunk, config),
        "server depends on the chunking"
    );
    assert!(
        whole.0.len() <= stream.len() / 8 + 1,
        "more responses than requests"
    );
    let mut head = [0; Response::MAX_HEADER_LEN];
    for (i, response) in whole.0.iter().enumerate() {
        let Response::Http {
            close,
            status,
            content_length,
        } = *response
        else {
            panic!("HTTP session answered {response:?}");
        };
        if config.files.is_none() && status == HttpStatus::Ok {
            assert!(content_length <= u64::from(config.max_message));
        }
        // Only the last response may close the connection.
        assert!(!close || i + 1 == whole.0.len());
        assert!(response.encode_header(&mut head) <= Response::MAX_HEADER_LEN);
    }

    let done = parse(stream, usize::MAX);
    assert_eq!(done, parse(stream, chunk), "client depends on the chunking");
    let total: u64 = done.0.iter().map(|d| d.total_bytes).sum();
    assert!(
        total <= stream.len() as u64,
        "more bytes completed than received"
    );
    for d in &done.0 {
        assert!(d.seq.is_none() && d.status.is_some());
    }
});
