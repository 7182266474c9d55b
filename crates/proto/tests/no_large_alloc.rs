//! The limits rule of `shared/protocol.md` §1, measured: parsers never allocate
//! in proportion to a declared length, and payloads are dropped as they arrive.
//! A counting global allocator (this test binary only) totals the bytes each
//! test thread asks for while a session takes in a huge message.

use connlab_proto::http1::MAX_HEADER_SECTION;
use connlab_proto::{
    encode_clb1_request_header, ClientSession, Flow, Protocol, ProtocolError, Response,
    ServerConfig, ServerSession,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

const MIB: u32 = 1024 * 1024;
const CHUNK: [u8; 4096] = [0x5a; 4096];
/// Allocation budget for taking in one huge message.
const BUDGET: u64 = 64 * 1024;

thread_local! {
    /// Bytes requested on this thread; a const-initialised `Cell` needs no
    /// allocation or destructor, so the allocator can touch it.
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
}

/// Forwards to [`System`], counting the bytes each thread requests.
struct Counting;

fn count(bytes: usize) {
    let _ = ALLOCATED.try_with(|total| total.set(total.get() + bytes as u64));
}

// SAFETY: every method forwards its arguments unchanged to `System`, which
// implements `GlobalAlloc` correctly; counting only updates a thread-local
// `Cell`, which neither allocates nor panics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller upholds `alloc`'s contract, which is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller upholds `alloc_zeroed`'s contract, which is `System`'s.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: `ptr` and `layout` come from this allocator, which is `System`
        // underneath, and the caller upholds the rest of `realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` (through this allocator) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes allocated on this thread while `f` runs.
fn allocated_during(f: impl FnOnce()) -> u64 {
    let before = ALLOCATED.with(Cell::get);
    f();
    ALLOCATED.with(Cell::get) - before
}

#[test]
fn counter_sees_allocations_on_this_thread() {
    let allocated = allocated_during(|| drop(std::hint::black_box(vec![0u8; 100_000])));
    assert!(allocated >= 100_000, "allocated {allocated} bytes");
}

#[test]
fn server_drops_clb1_payload_instead_of_buffering_it() {
    let mut header = [0; 16];
    encode_clb1_request_header(16 * MIB, 16 * MIB, 1, &mut header);
    let mut responses = 0;
    let mut finish = Ok(());
    let allocated = allocated_during(|| {
        let mut session = ServerSession::new(Protocol::Clb1, ServerConfig::default());
        let mut out = |_: Response| responses += 1;
        assert_eq!(session.feed(&header, &mut out), Ok(Flow::Continue));
        for _ in 0..(MIB as usize / CHUNK.len()) {
            assert_eq!(session.feed(&CHUNK, &mut out), Ok(Flow::Continue));
        }
        finish = session.finish();
    });
    assert!(allocated < BUDGET, "allocated {allocated} bytes");
    assert_eq!(responses, 0);
    assert_eq!(
        finish,
        Err(ProtocolError::Truncated {
            what: "request payload",
            received: u64::from(MIB),
        })
    );
}

#[test]
fn server_buffers_at_most_one_http_head() {
    let mut request = b"GET /bytes/16777216 HTTP/1.1\r\nX-Pad: ".to_vec();
    request.resize(MAX_HEADER_SECTION - 4, b'a');
    request.extend_from_slice(b"\r\n\r\n");
    let mut responses = Vec::with_capacity(1);
    let allocated = allocated_during(|| {
        let mut session = ServerSession::new(Protocol::Http, ServerConfig::default());
        for byte in request.chunks(1) {
            assert_eq!(
                session.feed(byte, &mut |r| responses.push(r)),
                Ok(Flow::Continue)
            );
        }
    });
    assert!(
        allocated < 2 * MAX_HEADER_SECTION as u64,
        "allocated {allocated} bytes"
    );
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].payload_len(), u64::from(16 * MIB));
}

#[test]
fn client_skips_a_16_mib_clb1_response_without_buffering() {
    let mut header = [0; 16];
    encode_clb1_request_header(16, 16 * MIB, 9, &mut header);
    let mut done = Vec::with_capacity(1);
    let allocated = allocated_during(|| {
        let mut session = ClientSession::new(Protocol::Clb1, 16 * MIB);
        assert_eq!(session.feed(&header, &mut |d| done.push(d)), Ok(()));
        let mut left = 16 * MIB as usize - 16;
        while left > 0 {
            let n = left.min(CHUNK.len());
            assert_eq!(session.feed(&CHUNK[..n], &mut |d| done.push(d)), Ok(()));
            left -= n;
        }
        assert_eq!(session.finish(), Ok(()));
    });
    assert!(allocated < BUDGET, "allocated {allocated} bytes");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].seq, Some(9));
    assert_eq!(done[0].total_bytes, u64::from(16 * MIB));
}

#[test]
fn client_skips_a_16_mib_http_body_without_buffering() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Length: 16777216\r\n\r\n";
    let mut done = Vec::with_capacity(1);
    let allocated = allocated_during(|| {
        let mut session = ClientSession::new(Protocol::Http, 16 * MIB);
        for byte in head.chunks(1) {
            assert_eq!(session.feed(byte, &mut |d| done.push(d)), Ok(()));
        }
        for _ in 0..(16 * MIB as usize / CHUNK.len()) {
            assert_eq!(session.feed(&CHUNK, &mut |d| done.push(d)), Ok(()));
        }
        assert_eq!(session.finish(), Ok(()));
    });
    assert!(allocated < BUDGET, "allocated {allocated} bytes");
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].status, Some(200));
    assert_eq!(done[0].total_bytes, head.len() as u64 + u64::from(16 * MIB));
}

#[test]
fn xfer_decoder_refuses_a_huge_declared_length_without_buffering() {
    use connlab_proto::xfer::{FrameDecoder, FrameKind, XferError};
    // DATA on stream 1 declaring 4 GiB - 1 of payload, then 1 MiB of bytes.
    let header = [0xff, 0xff, 0xff, 0xff, 0x30, 0, 0, 0, 0, 0, 0, 1];
    let mut result = Ok(None);
    let allocated = allocated_during(|| {
        let mut decoder = FrameDecoder::new();
        let mut input: &[u8] = &header;
        result = decoder.decode(&mut input);
        for _ in 0..(MIB as usize / CHUNK.len()) {
            let mut input: &[u8] = &CHUNK;
            assert!(decoder.decode(&mut input).is_err());
        }
    });
    assert!(allocated < BUDGET, "allocated {allocated} bytes");
    assert!(matches!(
        result,
        Err(XferError::BadLength {
            kind: FrameKind::Data,
            len: u32::MAX,
            ..
        })
    ));
}

#[test]
fn xfer_decoder_buffers_at_most_one_payload_when_fed_byte_by_byte() {
    use connlab_proto::xfer::{Frame, FrameDecoder, StreamId, MAX_PAYLOAD};
    let mut bytes = Vec::new();
    let frame = Frame::Data {
        stream: StreamId(1),
        bytes: vec![7; MAX_PAYLOAD],
    };
    for _ in 0..64 {
        frame.encode(&mut bytes).unwrap();
    }
    let mut frames = 0;
    let allocated = allocated_during(|| {
        let mut decoder = FrameDecoder::new();
        for byte in bytes.chunks(1) {
            let mut input = byte;
            if let Some(decoded) = decoder.decode(&mut input).unwrap() {
                // Each frame's payload is one exact-size allocation.
                assert_eq!(decoded, frame);
                frames += 1;
            }
        }
    });
    assert_eq!(frames, 64);
    // One exact-size payload buffer per frame, nothing in proportion to the stream.
    assert!(
        allocated <= 64 * (MAX_PAYLOAD as u64 + 64),
        "allocated {allocated} bytes"
    );
}
