//! IRC line parsing: deskwire's zero-copy `Message::parse` against `irc_proto::Message::from_str`
//! on the same realistic corpus (chat with and without IRCv3 tags, OA1 frames, numerics, PING,
//! JOIN, NICK).
//!
//! Run: `cargo bench -p deskwire --bench irc_parse`
//!
//! deskwire parses `&[u8]` and checks UTF-8 itself. irc-proto parses `&str`, so it is measured
//! twice: from `&str` (`irc-proto`, leaning in its favour) and from the same bytes through
//! `std::str::from_utf8` (`irc-proto+utf8`, what a host reading a socket pays).

use std::hint::black_box;
use std::str::FromStr;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group};
use deskwire::irc::Message;
use irc_proto::Command;

/// A small deterministic generator, so the corpus is the same on every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn below(&mut self, n: u64) -> usize {
        (self.next() % n) as usize
    }
}

const WORDS: &[&str] = &[
    "the",
    "build",
    "is",
    "green",
    "again",
    "can",
    "you",
    "check",
    "desk",
    "logs",
    "deploy",
    "staging",
    "ok",
    "thanks",
    "running",
    "tests",
    "now",
    "ünïcode",
    "€",
    "🙂",
];

/// `min_words` to `min_words + 11` words.
fn text(rng: &mut Lcg, min_words: usize) -> String {
    let words = min_words + rng.below(12);
    (0..words)
        .map(|_| WORDS[rng.below(WORDS.len() as u64)])
        .collect::<Vec<_>>()
        .join(" ")
}

/// About 4000 lines, each ending in CRLF as it comes off the socket.
fn corpus() -> Vec<String> {
    let mut rng = Lcg(0x5eed);
    let mut lines = vec![
        ":irc.example.net 001 desk :Welcome to the Internet Relay Network desk!~desk@127.0.0.1"
            .to_owned(),
        ":irc.example.net 005 desk RFC2812 IRCD=ngIRCd CHARSET=UTF-8 CASEMAPPING=ascii PREFIX=(qaohv)~&@%+ CHANTYPES=#&+ CHANMODES=beI,k,l,imMnOPQRstVz CHANLIMIT=#&+:10 :are supported on this server".to_owned(),
        ":irc.example.net 005 desk CHANNELLEN=50 NICKLEN=9 TOPICLEN=490 AWAYLEN=127 KICKLEN=400 MODES=5 MAXLIST=beI:50 EXCEPTS=e INVEX=I PENALTY :are supported on this server".to_owned(),
    ];
    for i in 0..4000 {
        let nick = format!("user{}", rng.below(50));
        let line = match rng.below(20) {
            // Plain chat.
            0..=5 => format!(
                ":{nick}!~{nick}@host-{}.example.net PRIVMSG #desk :{}",
                rng.below(256),
                text(&mut rng, 3)
            ),
            // Chat with IRCv3 tags (server-time, msgid, account, an escaped client tag).
            6..=9 => format!(
                "@time=2026-11-02T10:{:02}:{:02}.{:03}Z;msgid=Qx{i:08x}Zb;account={nick};+draft/reply=ab\\scd\\:ef :{nick}!~{nick}@host-{}.example.net PRIVMSG #desk :{}",
                rng.below(60),
                rng.below(60),
                rng.below(1000),
                rng.below(256),
                text(&mut rng, 3)
            ),
            // OA1 frames of about 240 bytes.
            10..=14 => {
                let mut payload = text(&mut rng, 40);
                // Escaped newlines, as OA1 carries command output.
                let mut end = 180.min(payload.len());
                while !payload.is_char_boundary(end) {
                    end -= 1;
                }
                payload.truncate(end);
                payload = payload.replace(' ', "\\n");
                format!(
                    ":rexd!~rexd@10.0.0.{} PRIVMSG #desk :OA1 RES k3j2h1g0f9e{} {} {} {}",
                    rng.below(256),
                    rng.below(10),
                    1 + rng.below(40),
                    rng.below(2),
                    payload
                )
            }
            15 => format!(
                ":irc.example.net 353 desk = #desk :desk @rexd {}",
                (0..20)
                    .map(|n| format!("user{n}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
            16 => format!("PING :irc.example.net-{}", rng.below(100_000)),
            17 => format!(
                ":{nick}!~{nick}@host-{}.example.net JOIN #desk",
                rng.below(256)
            ),
            18 => format!(":{nick}!~{nick}@host.example.net NICK :{nick}_away"),
            _ => format!(
                ":{nick}!~{nick}@host.example.net NOTICE desk :{}",
                text(&mut rng, 2)
            ),
        };
        lines.push(line);
    }
    for line in &mut lines {
        line.push_str("\r\n");
    }
    lines
}

/// Reads the source nick, tag count, command and parameters of an irc-proto message.
fn read_irc_proto(msg: &irc_proto::Message) -> usize {
    let mut work = msg.source_nickname().map_or(0, str::len);
    work += msg.tags.as_ref().map_or(0, |t| t.len());
    work += match &msg.command {
        Command::PRIVMSG(target, text) | Command::NOTICE(target, text) => target.len() + text.len(),
        Command::Response(_, args) => args.len(),
        Command::Raw(command, args) => command.len() + args.len(),
        _ => 1,
    };
    work
}

// Each side reads what a host would (command, parameters, source nick) into `work`, which it
// returns, so the parse cannot be optimised away.

fn parse_deskwire(lines: &[String]) -> usize {
    let mut work = 0usize;
    for line in lines {
        let msg = Message::parse(line.as_bytes()).unwrap();
        work += msg.command.len() + msg.params().len();
        if let Some(last) = msg.trailing() {
            work += last.len();
        }
        if let Some(nick) = msg.source_nick() {
            work += nick.len();
        }
    }
    work
}

/// irc-proto from `&str`: its input already checked as UTF-8, which deskwire's is not.
fn parse_irc_proto(lines: &[String]) -> usize {
    let mut work = 0usize;
    for line in lines {
        let msg = irc_proto::Message::from_str(line).unwrap();
        work += read_irc_proto(&msg);
    }
    work
}

/// irc-proto from the same bytes deskwire gets, as they come off the socket.
fn parse_irc_proto_bytes(lines: &[String]) -> usize {
    let mut work = 0usize;
    for line in lines {
        let text = std::str::from_utf8(line.as_bytes()).unwrap();
        let msg = irc_proto::Message::from_str(text).unwrap();
        work += read_irc_proto(&msg);
    }
    work
}

/// The three parsers timed in turns, round after round, so that they see the same machine (a
/// shared host's speed moves by 2x between criterion's benches); prints the median per-round
/// ratio of irc-proto's time to deskwire's.
fn side_by_side() {
    const ROUNDS: usize = 300;
    let lines = corpus();
    type Parse = fn(&[String]) -> usize;
    let parsers: [(&str, Parse); 3] = [
        ("deskwire", parse_deskwire),
        ("irc-proto", parse_irc_proto),
        ("irc-proto+utf8", parse_irc_proto_bytes),
    ];
    let mut times: [Vec<f64>; 3] = Default::default();
    for _ in 0..ROUNDS {
        for (i, (_, parse)) in parsers.iter().enumerate() {
            let start = Instant::now();
            black_box(parse(black_box(&lines)));
            times[i].push(start.elapsed().as_secs_f64());
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!("\nirc_parse side by side, {ROUNDS} rounds of the three parsers in turn (medians):");
    for (i, (name, _)) in parsers.iter().enumerate() {
        let ratio = median((0..ROUNDS).map(|r| times[i][r] / times[0][r]).collect());
        let time = median(times[i].clone());
        println!(
            "  {name:<15} {:>8.1} us  ({ratio:.2}x deskwire's time)",
            time * 1e6
        );
    }
}

fn bench_parse(c: &mut Criterion) {
    let lines = corpus();
    let bytes: usize = lines.iter().map(|l| l.len()).sum();
    // Both parsers accept every line of the corpus.
    for line in &lines {
        Message::parse(line.as_bytes()).expect("deskwire parses the corpus");
        irc_proto::Message::from_str(line).expect("irc-proto parses the corpus");
    }

    let mut group = c.benchmark_group("irc_parse");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.sample_size(50);

    group.bench_function("deskwire", |b| b.iter(|| parse_deskwire(black_box(&lines))));
    group.bench_function("irc-proto", |b| {
        b.iter(|| parse_irc_proto(black_box(&lines)))
    });
    group.bench_function("irc-proto+utf8", |b| {
        b.iter(|| parse_irc_proto_bytes(black_box(&lines)))
    });
    group.finish();
}

criterion_group!(benches, bench_parse);
fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    side_by_side();
}
