//! JSON-RPC framing throughput, each next to its baseline in the same run:
//! - NDJSON: deskwire's `NdjsonDecoder` vs a plain `memchr` newline split of the same buffer
//!   (the limit) vs tokio-util's `LinesCodec`.
//! - Content-Length: deskwire's `ContentLengthDecoder` vs rust-analyzer's `lsp-server` reading
//!   the same stream.
//!
//! `cargo bench -p deskwire --bench jsonrpc_framing`

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use deskwire::jsonrpc::framing::{
    ContentLengthDecoder, Frame, NdjsonDecoder, encode_content_length, encode_ndjson,
};
use tokio_util::codec::{Decoder, LinesCodec};

/// A few thousand typical messages: REXD `exec.stdout` notifications of varying size.
fn messages() -> Vec<String> {
    (0..4000)
        .map(|i| {
            let chunk = "x".repeat(20 + (i * 37) % 400);
            format!(
                r#"{{"jsonrpc":"2.0","method":"exec.stdout","params":{{"exec_id":"e{i}","seq":{i},"data":"{chunk}"}}}}"#
            )
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let messages = messages();
    let mut ndjson = Vec::new();
    let mut content_length = Vec::new();
    for m in &messages {
        encode_ndjson(m.as_bytes(), &mut ndjson);
        encode_content_length(m.as_bytes(), &mut content_length);
    }
    // Streams arrive in socket-sized reads.
    const READ: usize = 16 * 1024;

    let mut group = c.benchmark_group("ndjson");
    group.throughput(Throughput::Bytes(ndjson.len() as u64));
    group.bench_function("memchr split (limit)", |b| {
        b.iter(|| {
            let mut n = 0;
            let mut total = 0;
            for line in memchr::memchr_iter(b'\n', black_box(&ndjson)) {
                total += line - n;
                n = line + 1;
            }
            black_box(total)
        })
    });
    group.bench_function("deskwire NdjsonDecoder feed + next_frame", |b| {
        b.iter(|| {
            let mut d = NdjsonDecoder::new(1 << 20);
            let mut total = 0;
            for read in black_box(&ndjson).chunks(READ) {
                d.feed(read);
                while let Some(Frame::Message(m)) = d.next_frame() {
                    total += m.len();
                }
            }
            assert_eq!(total + messages.len(), ndjson.len());
            black_box(total)
        })
    });
    group.bench_function("deskwire NdjsonDecoder::decode (zero-copy)", |b| {
        b.iter(|| {
            let mut d = NdjsonDecoder::new(1 << 20);
            let mut total = 0;
            for read in black_box(&ndjson).chunks(READ) {
                d.decode(read, |frame| {
                    if let Frame::Message(m) = frame {
                        total += m.len();
                    }
                });
            }
            assert_eq!(total + messages.len(), ndjson.len());
            black_box(total)
        })
    });
    group.bench_function("tokio-util LinesCodec", |b| {
        b.iter(|| {
            let mut codec = LinesCodec::new_with_max_length(1 << 20);
            let mut buf = BytesMut::new();
            let mut total = 0;
            for read in black_box(&ndjson).chunks(READ) {
                buf.extend_from_slice(read);
                while let Ok(Some(line)) = codec.decode(&mut buf) {
                    total += line.len();
                }
            }
            assert_eq!(total + messages.len(), ndjson.len());
            black_box(total)
        })
    });
    group.finish();

    let mut group = c.benchmark_group("content_length");
    group.throughput(Throughput::Bytes(content_length.len() as u64));
    group.bench_function("deskwire ContentLengthDecoder", |b| {
        b.iter(|| {
            let mut d = ContentLengthDecoder::new(1 << 20, 8192);
            let mut count = 0;
            for read in black_box(&content_length).chunks(READ) {
                d.feed(read);
                while let Some(Frame::Message(m)) = d.next_frame() {
                    count += 1;
                    black_box(m);
                }
            }
            assert_eq!(count, messages.len());
        })
    });
    group.bench_function("lsp-server Message::read", |b| {
        b.iter(|| {
            // lsp-server reads from a BufRead and parses each body into its message type.
            let mut reader =
                std::io::BufReader::with_capacity(READ, black_box(&content_length[..]));
            let mut count = 0;
            while let Ok(Some(m)) = lsp_server::Message::read(&mut reader) {
                count += 1;
                black_box(m);
            }
            assert_eq!(count, messages.len());
        })
    });
    group.bench_function("deskwire ContentLengthDecoder + message::parse", |b| {
        b.iter(|| {
            let mut d = ContentLengthDecoder::new(1 << 20, 8192);
            let mut count = 0;
            for read in black_box(&content_length).chunks(READ) {
                d.feed(read);
                while let Some(Frame::Message(m)) = d.next_frame() {
                    count += 1;
                    black_box(deskwire::jsonrpc::message::parse(m, 64).unwrap());
                }
            }
            assert_eq!(count, messages.len());
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
