//! The Rust side of the Kotlin per-call measurement: one relayed `PRIVMSG` line into a desk
//! that is in its channel with its remote, then everything it wants done — the same loop as
//! `src/test/kotlin/dev/deskwire/HandleBytesBench.kt`, run on
//! - the core engine (`deskwire::oa1::Desk`): `handle_bytes`, then `poll_output` until it
//!   answers `Timeout`;
//! - this crate's wrapper (`deskwire_uniffi::connection::Desk`: the mutex, the borrowed bytes,
//!   the output converted to what Kotlin gets), without the FFI: `handle_bytes` then `drain`,
//!   and `handle_bytes` then `poll_output` until `Timeout`.
//!
//! A warm loop, timed in rounds; prints the median ns per call of each.
//!
//! ```sh
//! cargo bench -p deskwire-uniffi --bench handle_bytes
//! ```

use std::hint::black_box;
use std::time::Instant;

use deskwire::oa1::{ConnectionConfig, ConnectionOutput};
use deskwire_uniffi::connection::{self as wrapper, ConnectionOutput as WrapperOutput};

const WELCOME: &[u8] = b":srv 001 desk :Welcome desk!~desk@127.0.0.1\r\n\
    :desk!~desk@127.0.0.1 JOIN #desk\r\n:srv 353 desk = #desk :desk deskbot\r\n\
    :srv 366 desk #desk :End of NAMES list\r\n";
const LINE: &[u8] =
    b":deskbot!~bot@10.0.0.2 PRIVMSG #desk :hello from the remote end of the desk\r\n";
const ROUNDS: usize = 15;
const CALLS: usize = 200_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn rounds(mut call: impl FnMut()) -> f64 {
    for _ in 0..CALLS {
        call();
    }
    median(
        (0..ROUNDS)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..CALLS {
                    call();
                }
                start.elapsed().as_nanos() as f64 / CALLS as f64
            })
            .collect(),
    )
}

fn main() {
    let config = ConnectionConfig::new("desk", "#desk").with_peer("deskbot");

    let mut core = deskwire::oa1::Desk::new(config.clone(), 0, 1).unwrap();
    core.handle_bytes(0, WELCOME);
    while !matches!(core.poll_output(0), ConnectionOutput::Timeout(_)) {}
    let core_ns = rounds(|| {
        core.handle_bytes(1, black_box(LINE));
        while !matches!(black_box(core.poll_output(1)), ConnectionOutput::Timeout(_)) {}
    });

    let desk = wrapper::Desk::new(config.into(), 0, 1).unwrap();
    desk.handle_bytes(0, WELCOME).unwrap();
    desk.drain(0).unwrap();
    let drain_ns = rounds(|| {
        desk.handle_bytes(1, black_box(LINE)).unwrap();
        black_box(desk.drain(1).unwrap());
    });
    let poll_ns = rounds(|| {
        desk.handle_bytes(1, black_box(LINE)).unwrap();
        while !matches!(
            black_box(desk.poll_output(1).unwrap()),
            WrapperOutput::Timeout { .. }
        ) {}
    });
    let handle_only_ns = rounds(|| desk.handle_bytes(1, black_box(LINE)).unwrap());
    let drain_only_ns = rounds(|| {
        black_box(desk.drain(1).unwrap());
    });

    println!("rust core    handle_bytes + poll_output: {core_ns:.1} ns/call");
    println!("rust wrapper handle_bytes + drain:       {drain_ns:.1} ns/call");
    println!("rust wrapper handle_bytes + poll_output: {poll_ns:.1} ns/call");
    println!("rust wrapper handle_bytes alone:         {handle_only_ns:.1} ns/call");
    println!("rust wrapper drain alone:                {drain_only_ns:.1} ns/call");
}
