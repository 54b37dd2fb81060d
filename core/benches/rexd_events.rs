//! Parsing a stream of REXD `exec.stdout` notifications (NDJSON lines, as a client reads them)
//! into typed events, next to `serde_json::from_slice::<Value>` of the same lines.
//!
//! `cargo bench -p deskwire --bench rexd_events`
//!
//! - `value`: `serde_json::from_slice::<Value>` per line (the untyped baseline).
//! - `typed`: `Event::from_notification` per line (one pass, strings borrowed when unescaped).
//! - `typed_two_pass`: a borrowed envelope with `&RawValue` params, then `Event::parse`, the
//!   path a generic JSON-RPC layer takes; shows what the one-pass parse saves.
//!
//! Two streams: `lines` (1000 events, one ~70-byte line of output each, ending in `\n`, so the
//! `data` string has an escape and is copied) and `chunks` (100 events of 4 KiB of output, as a
//! daemon sends when output comes fast).
//!
//! Measured on the 2-core dev machine (busy, so absolute times are noisy; medians):
//! `lines` value 2.93 ms, typed 1.32 ms (2.2x faster), two-pass 2.71 ms; `chunks` value
//! 1.36 ms, typed 0.91 ms (1.5x faster), two-pass 1.03 ms.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use deskwire::rexd::{Event, ExecOutput};
use serde_json::Value;
use serde_json::value::RawValue;

/// Output text as commands print it: `ls -l`/`git status`-like lines, some non-ASCII.
fn output_line(i: usize) -> String {
    let names = [
        "README.md",
        "src/lib.rs",
        "naïve.txt",
        "日本語.md",
        "build.log",
        "Cargo.toml",
    ];
    format!(
        "-rw-r--r-- 1 deploy deploy {:>6} Nov 22 07:{:02} {}\n",
        (i * 7919) % 100_000,
        i % 60,
        names[i % names.len()]
    )
}

fn stream(events: usize, bytes_per_event: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut line = 0;
    for seq in 1..=events {
        let mut data = String::new();
        while data.len() < bytes_per_event {
            data.push_str(&output_line(line));
            line += 1;
        }
        let event = Event::ExecStdout(ExecOutput {
            session_id: "s_1".into(),
            process_id: "p_42".into(),
            seq: seq as u64,
            data: data.into(),
            ..ExecOutput::default()
        });
        out.extend_from_slice(event.to_notification().as_bytes());
        out.push(b'\n');
    }
    out
}

#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    method: &'a str,
    #[serde(borrow)]
    params: &'a RawValue,
}

fn bench(c: &mut Criterion) {
    for (name, events, size) in [("lines", 1000, 1), ("chunks", 100, 4096)] {
        let input = stream(events, size);
        let lines: Vec<&[u8]> = input
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), events);

        let mut group = c.benchmark_group(format!("rexd_events/{name}"));
        group
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(2))
            .sample_size(30)
            .throughput(Throughput::Bytes(input.len() as u64));
        group.bench_function("value", |b| {
            b.iter(|| {
                for line in &lines {
                    let v: Value = serde_json::from_slice(line).unwrap();
                    black_box(v);
                }
            })
        });
        group.bench_function("typed", |b| {
            b.iter(|| {
                for line in &lines {
                    black_box(Event::from_notification(line).unwrap());
                }
            })
        });
        group.bench_function("typed_two_pass", |b| {
            b.iter(|| {
                for line in &lines {
                    let env: Envelope<'_> = serde_json::from_slice(line).unwrap();
                    black_box(Event::parse(env.method, Some(env.params)).unwrap());
                }
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
