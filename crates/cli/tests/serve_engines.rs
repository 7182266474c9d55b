//! Black-box tests of `connlab serve`: every server behaviour of `shared/protocol.md`
//! once per engine variant (`<behaviour>::<engine>`), driven by an independent client
//! over loopback. No connlab crate is used: these tests check the server against the
//! spec, not against its own codec.

use std::io::Write;

use connlab_testkit::per_engine;
use connlab_testkit::serve::{
    assert_only_error, counter, protocol_errors, Protocol, Server, Variant, ERROR_KINDS,
};
use connlab_testkit::wire::{
    clb1_header, clb1_request, http_get, http_request, is_reset, Conn, CLB1_MAGIC, KIB, MIB,
};

per_engine!(
    answers_round_trips,
    answers_pipelined_requests_in_order,
    reassembles_one_byte_writes,
    closes_connection_on_bad_magic,
    closes_connection_on_req_len_below_16,
    closes_connection_on_req_len_above_max,
    closes_connection_on_resp_len_below_16,
    closes_connection_on_resp_len_above_max,
    eof_mid_request_costs_only_that_connection,
    reset_mid_request_costs_only_that_connection,
    reset_mid_response_costs_only_that_connection,
    serves_hundreds_of_concurrent_connections,
    serves_more_connections_than_fd_setsize,
    answers_every_request_before_half_close,
    http_keeps_alive_for_sequential_gets,
    http_answers_pipelined_gets_in_order,
    http_404_and_405_keep_connection_open,
    http_connection_close_closes_after_response,
    http_1_0_closes_after_response,
    http_1_0_keep_alive_stays_open,
    http_oversized_header_gets_400_and_close,
    http_garbage_request_gets_400_and_close,
    counts_known_workload_in_stats,
    r17_header_timeout_closes_a_stalled_clb1_header,
    r17_header_timeout_closes_a_stalled_http_head,
    r17_header_timeout_cuts_a_trickled_http_head,
    r17_silent_connection_stays_open_without_idle_timeout,
    r17_idle_timeout_closes_a_silent_connection,
    r17_idle_timeout_closes_a_client_that_never_reads,
);

// ---------------------------------------------------------------------------
// CLB1 happy paths
// ---------------------------------------------------------------------------

/// The `shared/protocol.md` §1 example, then other sizes on the same connection.
fn answers_round_trips(engine: Variant) {
    let server = Server::start(engine, Protocol::Clb1, &[]);
    let mut conn = server.connect("client");

    let request = clb1_request(128, 10 * KIB, 7);
    let example_header = [
        0x43, 0x4c, 0x42, 0x31, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x28, 0x00, 0x00, 0x00, 0x00,
        0x07,
    ];
    assert_eq!(
        request[..16],
        example_header,
        "[{engine}] test encoder vs protocol.md"
    );
    assert_eq!(request.len(), 128, "[{engine}] test encoder request length");
    conn.send(&request);
    let resp = conn.read_clb1("the protocol.md example request");
    assert_eq!(
        resp.header, example_header,
        "[{engine}] response header to the protocol.md example (128-byte request, \
         resp 10 KiB, seq 7): got {:02x?}",
        resp.header
    );
    assert_eq!(
        resp.payload_len, 10224,
        "[{engine}] example response payload length"
    );

    conn.clb1_round_trip(16, 16, 8);
    conn.clb1_round_trip(100 * KIB, MIB, 9);
    conn.clb1_round_trip(128, 10 * KIB, 10);
}

fn answers_pipelined_requests_in_order(engine: Variant) {
    let server = Server::start(engine, Protocol::Clb1, &[]);
    let mut conn = server.connect("pipelining client");
    let requests: Vec<(u32, u32, u32)> = (0..50u32)
        .map(|i| (16 + (i * 53) % 700, 16 + (i * 389) % 5000, 1000 + 7 * i))
        .collect();
    let batch: Vec<u8> = requests
        .iter()
        .flat_map(|&(req, resp, seq)| clb1_request(req, resp, seq))
        .collect();
    conn.send(&batch);
    for &(req, resp, seq) in &requests {
        conn.expect_clb1(req, resp, seq);
    }
}

fn reassembles_one_byte_writes(engine: Variant) {
    let server = Server::start(engine, Protocol::Clb1, &[]);
    let mut conn = server.connect("1-byte writer");
    conn.set_nodelay();
    for byte in clb1_request(128, 1000, 42) {
        conn.send(&[byte]);
    }
    conn.expect_clb1(128, 1000, 42);
    // And the connection is still framed correctly afterwards.
    conn.clb1_round_trip(64, 64, 43);
}

/// Requests on one connection, with distinct seqs so a mixed-up answer shows.
fn answers_every_request_before_half_close(engine: Variant) {
    let server = Server::start(engine, Protocol::Clb1, &[]);
    let mut conn = server.connect("half-closing client");
    let requests = [(128, 4 * KIB, 1), (16, 100 * KIB, 2), (3000, 16, 3)];
    let batch: Vec<u8> = requests
        .iter()
        .flat_map(|&(req, resp, seq)| clb1_request(req, resp, seq))
        .collect();
    conn.send(&batch);
    conn.shutdown_write();
    for (req, resp, seq) in requests {
        conn.expect_clb1(req, resp, seq);
    }
    conn.expect_eof("3 responses to a half-closed connection");
}

fn serves_hundreds_of_concurrent_connections(engine: Variant) {
    const N: u32 = 300;
    let server = Server::start(engine, Protocol::Clb1, &["--backlog", "512"]);
    let mut conns: Vec<Conn> = (0..N)
        .map(|i| server.connect(&format!("connection {i} of {N}")))
        .collect();
    for (seq, conn) in (0..).zip(conns.iter_mut()) {
        conn.send(&clb1_request(64, 512 + seq, seq));
    }
    // Responses are small enough to wait in the client's receive buffers, so one
    // thread reading them in turn cannot deadlock.
    for (seq, conn) in (0..).zip(conns.iter_mut()) {
        conn.expect_clb1(64, 512 + seq, seq);
    }
    let stats = server.stop();
    assert_eq!(
        counter(engine, &stats, "connections_accepted"),
        u64::from(N),
        "[{engine}] {stats}"
    );
    assert_eq!(
        counter(engine, &stats, "requests"),
        u64::from(N),
        "[{engine}] {stats}"
    );
    // All N were open together when the last response was read.
    assert_eq!(
        counter(engine, &stats, "connections_peak"),
        u64::from(N),
        "[{engine}] {stats}"
    );
    drop(conns);
}

/// More descriptors than glibc's FD_SETSIZE (1024): the select engine must size
/// its own bitmaps, and every other engine must not care.
fn serves_more_connections_than_fd_setsize(engine: Variant) {
    const N: u32 = 1100;
    raise_own_nofile_limit();
    let server = Server::start(engine, Protocol::Clb1, &["--backlog", "2048"]);
    let mut conns: Vec<Conn> = (0..N)
        .map(|i| server.connect(&format!("connection {i} of {N}")))
        .collect();
    for (seq, conn) in (0..).zip(conns.iter_mut()) {
        conn.send(&clb1_request(32, 64, seq));
    }
    for (seq, conn) in (0..).zip(conns.iter_mut()) {
        conn.expect_clb1(32, 64, seq);
    }
    let stats = server.stop();
    assert_eq!(
        counter(engine, &stats, "requests"),
        u64::from(N),
        "[{engine}] {stats}"
    );
    drop(conns);
}

/// The tests run in parallel in one process: make room for their sockets.
fn raise_own_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid rlimit pointers; raising the soft limit up to the hard one is always allowed.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}

// ---------------------------------------------------------------------------
// CLB1 bad input: the bad connection is closed without a response, counted under
// its kind, and a bystander opened before it is still served.
// ---------------------------------------------------------------------------

/// `--max-message` for the bad-input cases.
const BAD_INPUT_MAX: u32 = MIB;

fn bad_header_case(engine: Variant, header: [u8; 16], kind: &str) {
    let server = Server::start(engine, Protocol::Clb1, &["--max-message", "1MiB"]);
    let mut bystander = server.connect("bystander");
    bystander.clb1_round_trip(128, KIB, 1);

    let mut bad = server.connect(&format!("{kind} client"));
    bad.send(&header);
    bad.expect_eof_without_response(&format!("header {header:02x?} ({kind})"));

    bystander.clb1_round_trip(128, KIB, 2);
    let stats = server.stop();
    assert_only_error(engine, &stats, kind);
    assert_eq!(
        counter(engine, &stats, "requests"),
        2,
        "[{engine}] requests: {stats}"
    );
}

fn closes_connection_on_bad_magic(engine: Variant) {
    bad_header_case(engine, clb1_header(*b"CLB2", 16, 16, 1), "bad_magic");
}

fn closes_connection_on_req_len_below_16(engine: Variant) {
    bad_header_case(
        engine,
        clb1_header(CLB1_MAGIC, 15, 16, 1),
        "req_len_out_of_range",
    );
}

fn closes_connection_on_req_len_above_max(engine: Variant) {
    bad_header_case(
        engine,
        clb1_header(CLB1_MAGIC, BAD_INPUT_MAX + 1, 16, 1),
        "req_len_out_of_range",
    );
}

fn closes_connection_on_resp_len_below_16(engine: Variant) {
    bad_header_case(
        engine,
        clb1_header(CLB1_MAGIC, 16, 15, 1),
        "resp_len_out_of_range",
    );
}

fn closes_connection_on_resp_len_above_max(engine: Variant) {
    bad_header_case(
        engine,
        clb1_header(CLB1_MAGIC, 16, BAD_INPUT_MAX + 1, 1),
        "resp_len_out_of_range",
    );
}

/// Half a request, then FIN: the server must give up on that connection only, and
/// count it as `truncated`.
fn eof_mid_request_costs_only_that_connection(engine: Variant) {
    let server = Server::start(engine, Protocol::Clb1, &[]);
    let mut bystander = server.connect("bystander");
    bystander.clb1_round_trip(128, KIB, 1);

    let mut quitter = server.connect("client sending half a request then FIN");
    quitter.send(&clb1_request(128, KIB, 99)[..64]);
    quitter.shutdown_write();
    quitter.expect_eof_without_response("64 of 128 request bytes then shutdown(Write)");
    drop(quitter);

    bystander.clb1_round_trip(128, KIB, 2);
    let stats = server.stop();
    assert_only_error(engine, &stats, "truncated");
}

/// Half a request, then RST.
fn reset_mid_request_costs_only_that_connection(engine: Variant) {
    let server = Server::start(engine, Protocol::Clb1, &[]);
    let mut bystander = server.connect("bystander");
    bystander.clb1_round_trip(128, KIB, 1);

    let mut quitter = server.connect("client sending half a request then RST");
    quitter.send(&clb1_request(128, KIB, 99)[..64]);
    quitter.reset();

    bystander.clb1_round_trip(128, KIB, 2);
    // A fresh connection after the reset is served too.
    server
        .connect("client after the reset")
        .clb1_round_trip(128, KIB, 3);
    let stats = server.stop();
    assert_eq!(
        counter(engine, &stats, "requests"),
        3,
        "[{engine}] requests: {stats}"
    );
}

/// A client that asks for 8 MiB, reads a little and resets: the server's writes fail
/// (EPIPE/ECONNRESET), which must cost only that connection.
fn reset_mid_response_costs_only_that_connection(engine: Variant) {
    let server = Server::start(engine, Protocol::Clb1, &[]);
    let mut bystander = server.connect("bystander");
    bystander.clb1_round_trip(128, KIB, 1);

    let mut quitter = server.connect("client resetting mid-response");
    quitter.send(&clb1_request(128, 8 * MIB, 99));
    let first = quitter.read_bytes(4096, "an 8 MiB response");
    assert_eq!(
        first[..16],
        clb1_header(CLB1_MAGIC, 128, 8 * MIB, 99),
        "[{engine}] header of the 8 MiB response"
    );
    quitter.reset();

    bystander.clb1_round_trip(128, KIB, 2);
    server
        .connect("client after the reset")
        .clb1_round_trip(128, KIB, 3);
    server.stop();
}

// ---------------------------------------------------------------------------
// HTTP mode (shared/protocol.md §2)
// ---------------------------------------------------------------------------

const HTTP11: &str = "HTTP/1.1";
const HTTP10: &str = "HTTP/1.0";
const KEEP_ALIVE_SIZES: [u64; 3] = [128, 0, 10240];

fn http_keeps_alive_for_sequential_gets(engine: Variant) {
    let server = Server::start(engine, Protocol::Http, &[]);
    let mut conn = server.connect("HTTP client");
    for n in KEEP_ALIVE_SIZES {
        let path = format!("/bytes/{n}");
        conn.send(&http_get(&path, HTTP11, &[]));
        conn.expect_http(&format!("GET {path}"), 200, n, false);
    }
}

fn http_answers_pipelined_gets_in_order(engine: Variant) {
    let server = Server::start(engine, Protocol::Http, &[]);
    let mut conn = server.connect("pipelining HTTP client");
    let batch: Vec<u8> = KEEP_ALIVE_SIZES
        .iter()
        .flat_map(|n| http_get(&format!("/bytes/{n}"), HTTP11, &[]))
        .collect();
    conn.send(&batch);
    for n in KEEP_ALIVE_SIZES {
        conn.expect_http(&format!("pipelined GET /bytes/{n}"), 200, n, false);
    }
}

fn http_404_and_405_keep_connection_open(engine: Variant) {
    let server = Server::start(engine, Protocol::Http, &[]);
    let mut conn = server.connect("HTTP client");
    conn.send(&http_get("/nope", HTTP11, &[]));
    conn.expect_http("GET /nope", 404, 0, false);
    conn.send(&http_request("POST", "/bytes/16", HTTP11, &[]));
    conn.expect_http("POST /bytes/16", 405, 0, false);
    conn.send(&http_get("/bytes/16", HTTP11, &[]));
    conn.expect_http("GET /bytes/16 after 404 and 405", 200, 16, false);
}

fn http_connection_close_closes_after_response(engine: Variant) {
    let server = Server::start(engine, Protocol::Http, &[]);
    let mut conn = server.connect("HTTP client");
    conn.send(&http_get("/bytes/64", HTTP11, &["Connection: close"]));
    conn.expect_http("GET /bytes/64 with Connection: close", 200, 64, true);
    conn.expect_eof("the response to a `Connection: close` request");
}

fn http_1_0_closes_after_response(engine: Variant) {
    let server = Server::start(engine, Protocol::Http, &[]);
    let mut conn = server.connect("HTTP/1.0 client");
    conn.send(&http_get("/bytes/64", HTTP10, &[]));
    conn.expect_http("HTTP/1.0 GET /bytes/64", 200, 64, true);
    conn.expect_eof("the response to an HTTP/1.0 request without keep-alive");
}

fn http_1_0_keep_alive_stays_open(engine: Variant) {
    let server = Server::start(engine, Protocol::Http, &[]);
    let mut conn = server.connect("HTTP/1.0 keep-alive client");
    for n in [64, 32] {
        conn.send(&http_get(
            &format!("/bytes/{n}"),
            HTTP10,
            &["Connection: keep-alive"],
        ));
        conn.expect_http(
            &format!("HTTP/1.0 GET /bytes/{n} with Connection: keep-alive"),
            200,
            n,
            false,
        );
    }
    conn.send(&http_get("/bytes/8", HTTP10, &[]));
    conn.expect_http("HTTP/1.0 GET /bytes/8 without keep-alive", 200, 8, true);
    conn.expect_eof("the response to an HTTP/1.0 request without keep-alive");
}

/// Sends `request` on a fresh connection, expects `400` with `Connection: close`
/// then EOF, with a bystander served before and after; checks the error's kind.
fn http_bad_request_case(engine: Variant, request: &[u8], what: &str, kind: &str) {
    let server = Server::start(engine, Protocol::Http, &[]);
    let mut bystander = server.connect("HTTP bystander");
    bystander.send(&http_get("/bytes/100", HTTP11, &[]));
    bystander.expect_http("bystander's first GET", 200, 100, false);

    let mut bad = server.connect(&format!("{kind} client"));
    bad.send(request);
    let resp = bad.read_http(what);
    assert_eq!(
        resp.status, 400,
        "[{engine}] status of response to {what}: {resp:?}"
    );
    assert!(
        resp.says_close(),
        "[{engine}] response to {what} lacks `Connection: close`: {resp:?}"
    );
    bad.expect_eof(&format!("400 response to {what}"));

    bystander.send(&http_get("/bytes/200", HTTP11, &[]));
    bystander.expect_http("bystander's second GET", 200, 200, false);
    let stats = server.stop();
    assert_only_error(engine, &stats, kind);
}

fn http_oversized_header_gets_400_and_close(engine: Variant) {
    let filler = format!("X-Filler: {}", "a".repeat(9000));
    let request = http_get("/bytes/16", HTTP11, &[&filler]);
    http_bad_request_case(
        engine,
        &request,
        "a GET with a 9 KB header section",
        "http_header_too_large",
    );
}

fn http_garbage_request_gets_400_and_close(engine: Variant) {
    http_bad_request_case(
        engine,
        b"this is not http\r\n\r\n",
        "the request line `this is not http`",
        "http_malformed",
    );
}

// ---------------------------------------------------------------------------
// Timeouts (issue 17): a slowloris client costs only its own connection, and
// only for --header-timeout; silent connections stay unless --idle-timeout.
// ---------------------------------------------------------------------------

/// Short enough for a quick test, long enough for a loaded machine to send
/// a whole request within it.
const SHORT_TIMEOUT: &str = "300ms";

/// Sends `partial` (part of a request head) and stalls: the server must close
/// the connection without a response and count one header timeout, while a
/// bystander is served before and after.
fn stalled_head_case(
    engine: Variant,
    protocol: Protocol,
    partial: &[u8],
    round_trip: fn(&mut Conn, u32),
) {
    let server = Server::start(engine, protocol, &["--header-timeout", SHORT_TIMEOUT]);
    let mut bystander = server.connect("bystander");
    round_trip(&mut bystander, 1);

    let mut slow = server.connect("client stalling mid-head");
    slow.send(partial);
    slow.expect_eof_without_response(&format!(
        "{} bytes of a request head, then nothing",
        partial.len()
    ));

    round_trip(&mut bystander, 2);
    let stats = server.stop();
    assert_eq!(
        counter(engine, &stats, "header_timeouts"),
        1,
        "[{engine}] header_timeouts: {stats}"
    );
    assert_eq!(
        counter(engine, &stats, "idle_timeouts"),
        0,
        "[{engine}] idle_timeouts: {stats}"
    );
    for kind in ERROR_KINDS {
        assert_eq!(
            protocol_errors(engine, &stats, kind),
            0,
            "[{engine}] protocol_errors.{kind}: {stats}"
        );
    }
}

fn clb1_round_trip(conn: &mut Conn, seq: u32) {
    conn.clb1_round_trip(128, KIB, seq);
}

fn http_round_trip(conn: &mut Conn, seq: u32) {
    conn.send(&http_get(&format!("/bytes/{seq}"), HTTP11, &[]));
    conn.expect_http("bystander's GET", 200, u64::from(seq), false);
}

fn r17_header_timeout_closes_a_stalled_clb1_header(engine: Variant) {
    let request = clb1_request(128, KIB, 5);
    stalled_head_case(engine, Protocol::Clb1, &request[..8], clb1_round_trip);
}

fn r17_header_timeout_closes_a_stalled_http_head(engine: Variant) {
    let request = http_get("/bytes/16", HTTP11, &[]);
    // Everything but the blank line that ends the head.
    let partial = &request[..request.len() - 2];
    stalled_head_case(engine, Protocol::Http, partial, http_round_trip);
}

/// Slowloris proper: the head keeps arriving, one byte per 25 ms (about a
/// second in all), so every read makes progress; the head must still be
/// complete within the header timeout of its first byte.
fn r17_header_timeout_cuts_a_trickled_http_head(engine: Variant) {
    let server = Server::start(engine, Protocol::Http, &["--header-timeout", SHORT_TIMEOUT]);
    let mut slow = server.connect("client trickling a head");
    slow.set_nodelay();
    let request = http_get("/bytes/16", HTTP11, &[]);
    let mut stream = slow.stream();
    for byte in &request {
        // Once the server has closed, a write fails (EPIPE or RST): stop.
        if stream.write_all(&[*byte]).is_err() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    slow.expect_eof_without_response(&format!(
        "a {}-byte head sent one byte per 25 ms",
        request.len()
    ));
    let stats = server.stop();
    assert_eq!(
        counter(engine, &stats, "header_timeouts"),
        1,
        "[{engine}] header_timeouts: {stats}"
    );
    assert_eq!(counter(engine, &stats, "requests"), 0, "[{engine}] {stats}");
}

/// Connections that have sent nothing (yet, or since their last request)
/// outlive a short header timeout when --idle-timeout is off: the locality
/// experiments hold such connections open on purpose.
fn r17_silent_connection_stays_open_without_idle_timeout(engine: Variant) {
    let server = Server::start(engine, Protocol::Clb1, &["--header-timeout", SHORT_TIMEOUT]);
    let mut silent = server.connect("connection silent from the start");
    let mut paused = server.connect("connection silent after a request");
    paused.clb1_round_trip(128, KIB, 1);
    // Several header timeouts long.
    std::thread::sleep(std::time::Duration::from_millis(1200));
    silent.clb1_round_trip(128, KIB, 2);
    paused.clb1_round_trip(128, KIB, 3);
    let stats = server.stop();
    for field in ["header_timeouts", "idle_timeouts"] {
        assert_eq!(
            counter(engine, &stats, field),
            0,
            "[{engine}] {field}: {stats}"
        );
    }
    assert_eq!(counter(engine, &stats, "requests"), 3, "[{engine}] {stats}");
}

fn r17_idle_timeout_closes_a_silent_connection(engine: Variant) {
    let server = Server::start(engine, Protocol::Clb1, &["--idle-timeout", SHORT_TIMEOUT]);
    let mut conn = server.connect("connection going silent");
    conn.clb1_round_trip(128, KIB, 1);
    conn.expect_eof("a request, then nothing");
    let stats = server.stop();
    assert_eq!(
        counter(engine, &stats, "idle_timeouts"),
        1,
        "[{engine}] idle_timeouts: {stats}"
    );
    assert_eq!(
        counter(engine, &stats, "header_timeouts"),
        0,
        "[{engine}] header_timeouts: {stats}"
    );
}

/// Asks for 16 MiB (more than loopback's socket buffers hold) and reads
/// nothing until the server gives up: its send makes no progress for the
/// idle timeout, so the connection is closed (the client then gets what the
/// kernel had buffered, and EOF).
fn r17_idle_timeout_closes_a_client_that_never_reads(engine: Variant) {
    const RESP: u32 = 16 * MIB;
    let server = Server::start(engine, Protocol::Clb1, &["--idle-timeout", SHORT_TIMEOUT]);
    let mut stuck = server.connect("client that never reads");
    stuck.send(&clb1_request(128, RESP, 1));
    // Several idle timeouts long: the server closes meanwhile.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let header = stuck.read_bytes(16, "the 16 MiB response");
    assert_eq!(
        header[..],
        clb1_header(CLB1_MAGIC, 128, RESP, 1),
        "[{engine}] header of the 16 MiB response"
    );
    let mut stream = stuck.stream();
    let mut rest = Vec::new();
    match std::io::Read::read_to_end(&mut stream, &mut rest) {
        Ok(_) => {}
        Err(e) if is_reset(&e) => {}
        Err(e) => panic!(
            "[{engine}] expected the server to close the connection after {} bytes: {e}",
            rest.len()
        ),
    }
    assert!(
        rest.len() < (RESP - 16) as usize,
        "[{engine}] got the whole response: the client was never stalled"
    );
    let stats = server.stop();
    assert_eq!(
        counter(engine, &stats, "idle_timeouts"),
        1,
        "[{engine}] idle_timeouts: {stats}"
    );
}

// ---------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------

/// 10 requests of 128 B asking for 1 KiB, on 2 connections.
fn counts_known_workload_in_stats(engine: Variant) {
    let server = Server::start(engine, Protocol::Clb1, &[]);
    let mut a = server.connect("connection A");
    let mut b = server.connect("connection B");
    for seq in 0..5 {
        a.clb1_round_trip(128, KIB, seq);
        b.clb1_round_trip(128, KIB, 100 + seq);
    }
    drop((a, b));
    let stats = server.stop();
    let field = |name| counter(engine, &stats, name);
    assert_eq!(field("requests"), 10, "[{engine}] requests: {stats}");
    assert_eq!(
        field("connections_accepted"),
        2,
        "[{engine}] connections_accepted: {stats}"
    );
    assert_eq!(field("bytes_in"), 1280, "[{engine}] bytes_in: {stats}");
    assert_eq!(field("bytes_out"), 10240, "[{engine}] bytes_out: {stats}");
    let peak = field("connections_peak");
    assert!(
        (1..=2).contains(&peak),
        "[{engine}] connections_peak {peak} not in 1..=2: {stats}"
    );
    for kind in ERROR_KINDS {
        assert_eq!(
            protocol_errors(engine, &stats, kind),
            0,
            "[{engine}] protocol_errors.{kind}: {stats}"
        );
    }
    assert_eq!(
        stats["engine"],
        engine.engine(),
        "[{engine}] engine field: {stats}"
    );
    assert_eq!(
        stats["protocol"], "clb1",
        "[{engine}] protocol field: {stats}"
    );
    // Where it could run and did: the CPUs its loops, threads or children
    // were seen on are some of those it was allowed.
    let list = |field: &str| -> Vec<u64> {
        stats[field]
            .as_array()
            .unwrap_or_else(|| panic!("[{engine}] `{field}` is not a list: {stats}"))
            .iter()
            .map(|c| c.as_u64().expect("a CPU number"))
            .collect()
    };
    let (allowed, used) = (list("cpus_allowed"), list("cpus_used"));
    assert!(!used.is_empty(), "[{engine}] no CPU used: {stats}");
    assert!(
        used.iter().all(|c| allowed.contains(c)),
        "[{engine}] cpus_used outside cpus_allowed: {stats}"
    );
    // The RT-signal engine reports what its library did (its loops'
    // libraries, added up); no other does.
    if engine.engine() == "rtsig" {
        let signals = stats["rtsig"]["signals"].as_u64().unwrap_or(0);
        assert!(signals > 0, "[{engine}] rtsig.signals: {stats}");
        assert_eq!(stats["rtsig"]["overflows"], 0, "[{engine}] {stats}");
    } else {
        assert!(stats.get("rtsig").is_none(), "[{engine}] rtsig: {stats}");
    }
}
