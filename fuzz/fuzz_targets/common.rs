//! Helpers shared by the fuzz targets (included with `#[path]`).

#![allow(dead_code)]

/// Splits a fuzz input into its leading selector byte and the byte stream
/// that follows; `None` for an empty input.
pub fn split(data: &[u8]) -> Option<(u8, &[u8])> {
    data.split_first().map(|(&b, rest)| (b, rest))
}

/// The chunk length a selector byte picks: 0 means the whole stream in one
/// feed, anything else that many bytes per feed (1..=255).
pub fn chunk_len(selector: u8) -> usize {
    match selector {
        0 => usize::MAX,
        n => n as usize,
    }
}

/// The stream cut into feeds of `chunk` bytes (at least one, possibly empty, feed).
pub fn chunks(stream: &[u8], chunk: usize) -> Vec<&[u8]> {
    if stream.is_empty() || chunk >= stream.len() {
        return vec![stream];
    }
    stream.chunks(chunk).collect()
}
