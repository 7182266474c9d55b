//! The CLXF frame decoder fed arbitrary bytes in arbitrary chunking.
//!
//! Input: byte 0 picks the chunk length (0: one feed), the rest is the
//! stream. Checks: no panic; the frames and the outcome do not depend on the
//! chunking; at most one frame per 12-byte header; every decoded frame
//! encodes again (but an out-of-range CREDIT) and decodes back to itself; after an error the decoder
//! keeps returning it.

#![no_main]

use connlab_proto::xfer::{Frame, FrameDecoder, HEADER_LEN, MAX_WINDOW};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fn run(stream: &[u8], chunk: usize) -> (Vec<Frame>, bool) {
    let mut decoder = FrameDecoder::new();
    let mut frames = Vec::new();
    for part in common::chunks(stream, chunk) {
        let mut input = part;
        loop {
            let before = input.len();
            match decoder.decode(&mut input) {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => {
                    assert!(input.is_empty(), "Ok(None) with input left");
                    break;
                }
                Err(error) => {
                    let mut rest = stream;
                    assert_eq!(decoder.decode(&mut rest), Err(error), "error not sticky");
                    return (frames, true);
                }
            }
            assert!(input.len() < before, "a frame from no bytes");
        }
    }
    let _ = decoder.finish();
    let _ = decoder.frame_offset();
    (frames, false)
}

fuzz_target!(|data: &[u8]| {
    let Some((chunk_sel, stream)) = common::split(data) else {
        return;
    };
    let whole = run(stream, usize::MAX);
    assert_eq!(
        whole,
        run(stream, common::chunk_len(chunk_sel)),
        "depends on the chunking"
    );
    assert!(whole.0.len() <= stream.len() / HEADER_LEN);
    for frame in &whole.0 {
        let mut bytes = Vec::new();
        // A CREDIT increment of 0 or over 2^31 - 1 decodes (the session
        // answers it with a FLOW_CONTROL stream error, transfer-protocol.md
        // §6) but the encoder refuses to send one.
        if let Frame::Credit { increment, .. } = frame {
            if *increment == 0 || *increment > MAX_WINDOW {
                assert!(frame.encode(&mut bytes).is_err() && bytes.is_empty());
                continue;
            }
        }
        let n = frame
            .encode(&mut bytes)
            .unwrap_or_else(|e| panic!("decoded {frame:?} does not encode: {e}"));
        assert_eq!(n, bytes.len());
        let mut decoder = FrameDecoder::new();
        let mut input = bytes.as_slice();
        let again = decoder.decode(&mut input);
        assert_eq!(again, Ok(Some(frame.clone())), "round trip");
        assert!(input.is_empty());
        let _ = (frame.kind(), frame.stream());
    }
});
