//! One million relayed `PRIVMSG` lines through the desk engine, by the Rust API
//! (`deskwire::oa1::Desk`) and by the C API (`dw_desk_*`), timed in turns, round after round,
//! in one process.
//!
//! Each request is answered by 100 relayed lines (`:deskbot!~deskbot@10.0.0.2 PRIVMSG #desk
//! :OA1 RES <id> <seq> <more> <240 bytes>`), fed in 16 KiB reads as a socket gives them; the
//! host drains `poll_output` after the request and after the reads. A second pass feeds one
//! line per call (a host that reads line by line: a million `handle_bytes` calls), the case
//! where the cost of crossing the boundary shows most. The C entry points are
//! called through function pointers hidden behind `black_box`, so nothing is inlined across
//! the boundary, as for a C caller. Prints the time per line for both, the C API's overhead per
//! call in ns, and the median per-round ratio.
//!
//!   cargo bench -p deskwire-ffi --bench desk_lines

use std::ffi::CString;
use std::hint::black_box;
use std::time::{Duration, Instant};

use deskwire::oa1::{ConnectionConfig, ConnectionEvent, ConnectionOutput, Desk, Event};
use deskwire_ffi::oa1::{
    dw_desk, dw_desk_free, dw_desk_handle_bytes, dw_desk_new, dw_desk_poll_output, dw_desk_request,
};
use deskwire_ffi::{dw_output, dw_output_kind, dw_status, dw_str};

const LINES_PER_REQUEST: usize = 100;
const REQUESTS_PER_ROUND: usize = 1_000;
const ROUNDS: usize = 10;
const READ: usize = 16 * 1024;

/// How the host hands the bytes over.
#[derive(Clone, Copy)]
enum Feed {
    /// 16 KiB reads.
    Reads,
    /// One line per call.
    Lines,
}

fn pieces(lines: &[u8], feed: Feed) -> Vec<&[u8]> {
    match feed {
        Feed::Reads => lines.chunks(READ).collect(),
        Feed::Lines => lines.split_inclusive(|&b| b == b'\n').collect(),
    }
}
const CONFIG: &str = r##"{"nick":"desk","channel":"#desk","oa1":{"allowed_sender":"deskbot","request_timeout_ms":3600000,"pacing":{"burst":4000000000,"interval_ms":1}}}"##;
const WELCOME: &[u8] = b":irc.test 001 desk :Welcome\r\n:desk!~desk@10.0.0.1 JOIN #desk\r\n\
:irc.test 353 desk = #desk :desk @deskbot\r\n:irc.test 366 desk #desk :End of /NAMES list.\r\n";

/// The relayed answer to request `id`.
fn answer(id: &str, out: &mut Vec<u8>) {
    out.clear();
    let payload: Vec<u8> = (0..240)
        .map(|i| b"abcdefghijklmnopqrstuvwxyz0123456789 .-"[i % 39])
        .collect();
    for seq in 1..=LINES_PER_REQUEST {
        let more = u8::from(seq < LINES_PER_REQUEST);
        out.extend_from_slice(b":deskbot!~deskbot@10.0.0.2 PRIVMSG #desk :OA1 RES ");
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(format!(" {seq} {more} ").as_bytes());
        out.extend_from_slice(&payload);
        out.extend_from_slice(b"\r\n");
    }
}

/// One round through the Rust API: (time, lines, responses).
fn rust_round(
    desk: &mut Desk,
    now: &mut u64,
    lines: &mut Vec<u8>,
    feed: Feed,
) -> (Duration, usize) {
    let mut took = Duration::ZERO;
    let mut responses = 0;
    for _ in 0..REQUESTS_PER_ROUND {
        *now += 1;
        let t = Instant::now();
        let id = desk.request(*now, "uname -a", None).expect("request");
        while !matches!(desk.poll_output(*now), ConnectionOutput::Timeout(_)) {}
        took += t.elapsed();
        answer(&id, lines);
        let pieces = pieces(lines, feed);
        let t = Instant::now();
        for chunk in &pieces {
            desk.handle_bytes(*now, chunk);
        }
        loop {
            match desk.poll_output(*now) {
                ConnectionOutput::Timeout(_) => break,
                ConnectionOutput::Event(ConnectionEvent::Oa1(Event::Response { text, .. })) => {
                    black_box(text.len());
                    responses += 1;
                }
                other => {
                    black_box(other);
                }
            }
        }
        took += t.elapsed();
    }
    (took, responses)
}

type HandleBytes = unsafe extern "C" fn(*mut dw_desk, u64, *const u8, usize) -> dw_status;
type PollOutput = unsafe extern "C" fn(*mut dw_desk, u64, *mut dw_output) -> dw_status;
type Request =
    unsafe extern "C" fn(*mut dw_desk, u64, *const u8, usize, u64, *mut dw_str) -> dw_status;

struct CApi {
    handle_bytes: HandleBytes,
    poll_output: PollOutput,
    request: Request,
}

/// Drains the C desk; returns (calls made, responses seen).
unsafe fn c_drain(api: &CApi, desk: *mut dw_desk, now: u64) -> (usize, usize) {
    let mut out = dw_output {
        kind: dw_output_kind::DwOutputTimeout,
        data: std::ptr::null(),
        len: 0,
        deadline_ms: 0,
        conn: 0,
        text: std::ptr::null(),
        text_len: 0,
    };
    let (mut calls, mut responses) = (0, 0);
    loop {
        calls += 1;
        assert_eq!(
            unsafe { (api.poll_output)(desk, now, &mut out) },
            dw_status::Ok
        );
        match out.kind {
            dw_output_kind::DwOutputTimeout => return (calls, responses),
            dw_output_kind::DwOutputEvent if !out.text.is_null() => {
                black_box(out.text_len);
                responses += 1;
            }
            _ => {
                black_box(out.len);
            }
        }
    }
}

/// One round through the C API: (time, calls, responses).
unsafe fn c_round(
    api: &CApi,
    desk: *mut dw_desk,
    now: &mut u64,
    lines: &mut Vec<u8>,
    feed: Feed,
) -> (Duration, usize, usize) {
    let mut took = Duration::ZERO;
    let (mut calls, mut responses) = (0, 0);
    let mut id = dw_str {
        ptr: std::ptr::null(),
        len: 0,
    };
    for _ in 0..REQUESTS_PER_ROUND {
        *now += 1;
        let t = Instant::now();
        let st = unsafe { (api.request)(desk, *now, b"uname -a".as_ptr(), 8, 0, &mut id) };
        assert_eq!(st, dw_status::Ok);
        // SAFETY: the view is valid until the next call with `desk`; copied at once.
        let request_id = String::from_utf8(
            unsafe { std::slice::from_raw_parts(id.ptr.cast::<u8>(), id.len) }.to_vec(),
        )
        .unwrap();
        let (c, _) = unsafe { c_drain(api, desk, *now) };
        took += t.elapsed();
        calls += 1 + c;
        answer(&request_id, lines);
        let pieces = pieces(lines, feed);
        let t = Instant::now();
        for chunk in &pieces {
            assert_eq!(
                unsafe { (api.handle_bytes)(desk, *now, chunk.as_ptr(), chunk.len()) },
                dw_status::Ok
            );
            calls += 1;
        }
        let (c, r) = unsafe { c_drain(api, desk, *now) };
        took += t.elapsed();
        calls += c;
        responses += r;
    }
    (took, calls, responses)
}

fn run(
    api: &CApi,
    rust: &mut Desk,
    rust_now: &mut u64,
    c_desk: *mut dw_desk,
    c_now: &mut u64,
    feed: Feed,
    label: &str,
) {
    let mut lines = Vec::with_capacity(LINES_PER_REQUEST * 320);
    // A warm-up round each, not counted.
    rust_round(rust, rust_now, &mut lines, feed);
    unsafe { c_round(api, c_desk, c_now, &mut lines, feed) };

    let (mut rust_total, mut c_total) = (Duration::ZERO, Duration::ZERO);
    let (mut c_calls, mut responses) = (0, [0usize; 2]);
    let mut ratios = Vec::new();
    for _ in 0..ROUNDS {
        let (r, rn) = rust_round(rust, rust_now, &mut lines, feed);
        let (c, calls, cn) = unsafe { c_round(api, c_desk, c_now, &mut lines, feed) };
        rust_total += r;
        c_total += c;
        c_calls += calls;
        responses[0] += rn;
        responses[1] += cn;
        ratios.push(c.as_secs_f64() / r.as_secs_f64());
    }
    let requests = ROUNDS * REQUESTS_PER_ROUND;
    assert_eq!(
        responses,
        [requests, requests],
        "every request answered through both APIs"
    );
    let lines_total = requests * LINES_PER_REQUEST;
    let per_line = |d: Duration| d.as_nanos() as f64 / lines_total as f64;
    println!(
        "desk_lines, {label}: {lines_total} relayed PRIVMSG lines per API ({requests} responses of {LINES_PER_REQUEST} lines)"
    );
    println!(
        "  Rust API (deskwire::oa1::Desk): {:8.1} ms, {:6.1} ns/line",
        rust_total.as_secs_f64() * 1e3,
        per_line(rust_total)
    );
    println!(
        "  C API    (dw_desk_*):           {:8.1} ms, {:6.1} ns/line",
        c_total.as_secs_f64() * 1e3,
        per_line(c_total)
    );
    println!(
        "  C API calls: {c_calls} ({:.2} per line); overhead per call: {:.1} ns",
        c_calls as f64 / lines_total as f64,
        (c_total.as_nanos() as f64 - rust_total.as_nanos() as f64) / c_calls as f64
    );
    println!(
        "  C / Rust: median per-round ratio {:.3} over {ROUNDS} rounds (whole run {:.3})",
        median(&mut ratios),
        c_total.as_secs_f64() / rust_total.as_secs_f64()
    );
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let api = CApi {
        handle_bytes: black_box(dw_desk_handle_bytes as HandleBytes),
        poll_output: black_box(dw_desk_poll_output as PollOutput),
        request: black_box(dw_desk_request as Request),
    };
    // Both desks: registered, in the channel with the remote, drained.
    let mut rust = Desk::new(ConnectionConfig::from_json(CONFIG).unwrap(), 0, 7).unwrap();
    rust.handle_bytes(0, WELCOME);
    while !matches!(rust.poll_output(0), ConnectionOutput::Timeout(_)) {}
    assert_eq!(format!("{:?}", rust.state()), "Ready");
    let mut c_desk: *mut dw_desk = std::ptr::null_mut();
    let config = CString::new(CONFIG).unwrap();
    unsafe {
        assert_eq!(
            dw_desk_new(config.as_ptr(), 0, 7, &mut c_desk),
            dw_status::Ok
        );
        assert_eq!(
            (api.handle_bytes)(c_desk, 0, WELCOME.as_ptr(), WELCOME.len()),
            dw_status::Ok
        );
        c_drain(&api, c_desk, 0);
    }

    let (mut rust_now, mut c_now) = (0, 0);
    for (feed, label) in [
        (Feed::Reads, "16 KiB reads"),
        (Feed::Lines, "one line per call"),
    ] {
        run(
            &api,
            &mut rust,
            &mut rust_now,
            c_desk,
            &mut c_now,
            feed,
            label,
        );
    }
    unsafe { dw_desk_free(c_desk) };
}
