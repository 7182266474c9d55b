use super::commands::cpu_mask_bits;
use super::output::parse_wrk;

#[test]
fn reads_wrk_summaries() {
    let text = "Running 1s test @ http://127.0.0.1:1/bytes/128\n  1 threads and 10 connections\n\
                \x20 95213 requests in 1.00s, 24.87MB read\n\
                \x20 Socket errors: connect 0, read 2, write 0, timeout 1\n\
                \x20 Non-2xx or 3xx responses: 4\nRequests/sec:  95102.31\nTransfer/sec:     24.84MB\n";
    let o = parse_wrk(text).unwrap();
    assert_eq!(o.requests, 95213);
    assert_eq!(o.errors, 7);
    assert!((o.requests_per_s - 95102.31).abs() < 1e-6);
    assert!(parse_wrk("nothing").is_err());
}

#[test]
fn nginx_masks_count_from_the_right() {
    assert_eq!(cpu_mask_bits(0), "1");
    assert_eq!(cpu_mask_bits(1), "10");
}
