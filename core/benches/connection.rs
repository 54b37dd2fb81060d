//! A desk's `handle_bytes` on the lines a busy desk channel brings that are not someone's
//! relayed `PRIVMSG` (those take a fast path): server `PING`s, members joining and leaving,
//! `NAMES` replies, nick changes, notices. Each such line goes through the OA1 endpoint (which
//! learns our prefix from it), the IRC session and the desk's member list.
//!
//! Run: `cargo bench -p deskwire --bench connection` (criterion; `--save-baseline NAME` and
//! `--baseline NAME` compare two builds).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use deskwire::oa1::{ConnectionConfig, ConnectionOutput, ConnectionState, Desk, Pacing, Remote};
use deskwire::sim::Network;

/// A desk that is ready: registered, in `#desk`, with its remote there.
fn ready_desk() -> Desk {
    let mut net = Network::new(1);
    let (d, r) = (net.connect("10.0.0.1"), net.connect("10.0.0.2"));
    let mut config = ConnectionConfig::new("desk", "#desk").with_peer("rexd");
    config.oa1.pacing = Pacing::UNLIMITED;
    let mut desk = Desk::new(config, 0, 1).expect("config");
    let mut remote =
        Remote::new(ConnectionConfig::new("rexd", "#desk").with_peer("desk"), 0).expect("config");
    for now in 0..20 {
        remote.handle_bytes(now, &net.take_bytes(r));
        loop {
            match remote.poll_output(now) {
                ConnectionOutput::Transmit(b) => net.handle_bytes(r, &b),
                ConnectionOutput::Event(_) => {}
                ConnectionOutput::Timeout(_) => break,
            }
        }
        desk.handle_bytes(now, &net.take_bytes(d));
        loop {
            match desk.poll_output(now) {
                ConnectionOutput::Transmit(b) => net.handle_bytes(d, &b),
                ConnectionOutput::Event(_) => {}
                ConnectionOutput::Timeout(_) => break,
            }
        }
    }
    assert_eq!(desk.state(), ConnectionState::Ready);
    desk
}

/// 600 lines of channel life, none of them a relayed `PRIVMSG`.
fn channel_life() -> Vec<u8> {
    let mut bytes = Vec::new();
    for i in 0..100 {
        let lines = [
            format!(":irc.example PING :token{i}"),
            format!(":eve{i}!~eve@10.1.0.{} JOIN #desk", i % 250),
            format!(":irc.example 353 desk = #desk :@op +voice eve{i} bob carol"),
            format!(":eve{i}!~eve@10.1.0.{} NICK :eve{i}_", i % 250),
            format!(":eve{i}_!~eve@10.1.0.{} PART #desk :bye", i % 250),
            format!(":irc.example NOTICE desk :*** message {i} of the day"),
        ];
        for line in lines {
            bytes.extend_from_slice(line.as_bytes());
            bytes.extend_from_slice(b"\r\n");
        }
    }
    bytes
}

fn bench(c: &mut Criterion) {
    let input = channel_life();
    let mut group = c.benchmark_group("desk_handle_bytes");
    group.throughput(Throughput::Elements(600));
    group.bench_function("600 non-PRIVMSG lines + drain", |b| {
        let mut desk = ready_desk();
        let mut now = 100;
        b.iter(|| {
            now += 1;
            desk.handle_bytes(now, black_box(&input));
            loop {
                match desk.poll_output(now) {
                    ConnectionOutput::Timeout(t) => break black_box(t),
                    other => {
                        black_box(other);
                    }
                }
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
