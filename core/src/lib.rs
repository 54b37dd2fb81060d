//! deskwire: a sans-IO protocol engine for agent tools.
//!
//! The engines in this crate do no I/O. They own no sockets, files, threads, clocks or random
//! sources: the host feeds them what arrived (`handle_line`), the time (`now_ms`, a monotonic
//! millisecond clock the host owns) and its commands (`request`, `respond`, `cancel`), and pulls out
//! what to do next with `poll_output`. Every engine answers `poll_output` with one of:
//!
//! - [`oa1::Output::Transmit`]: a line to write to the IRC connection,
//! - [`oa1::Output::Event`]: something the application should learn,
//! - [`oa1::Output::Timeout`]: nothing more to do until that instant (or until new input).
//!
//! A drained engine always answers `Timeout`, so a host loop always has exactly one deadline to
//! wait for:
//!
//! ```
//! use deskwire::oa1::{Client, Config, Output};
//!
//! let mut desk = Client::new(Config::new("#desk", "desk"), 42);
//! let now = 0;
//! let id = desk.request(now, "uname -a", None).unwrap();
//! loop {
//!     match desk.poll_output(now) {
//!         Output::Transmit(line) => {
//!             // write `line` plus "\r\n" to the IRC socket
//!             assert!(line.starts_with("PRIVMSG #desk :OA1 REQ "));
//!             assert!(line.contains(&id));
//!         }
//!         Output::Event(event) => println!("{event:?}"),
//!         // wait for input or until `deadline`, then call `handle_line` / `handle_timeout`
//!         Output::Timeout(deadline) => { assert!(deadline > now); break; }
//!     }
//! }
//! ```
//!
//! Hosts that own an IRC socket drive one engine per connection, [`oa1::Desk`] or
//! [`oa1::Remote`], with the bytes they read and the time; the whole loop for a TCP socket is in
//! the [`oa1::connection`] docs, and every binding copies it: bytes read → `handle_bytes`; drain
//! `poll_output` (write the transmits, deliver the events); sleep until the deadline or the next
//! read.
//!
//! Modules:
//! - [`irc`]: IRC line parsing and formatting, case mapping, line budgets, a session helper.
//! - [`lines`]: a bounded line splitter for byte streams (IRC, NDJSON).
//! - [`oa1`]: OA1, request/response RPC over IRC `PRIVMSG` lines, and the `RemoteBash` contract.
//! - [`reconnect`]: the reconnect policy (first wait, doubling, cap, random part) every driver uses.
//! - [`sim`]: an in-memory IRC channel relay and an in-memory IRC server, for tests and demos.
//! - [`jsonrpc`]: framing (NDJSON, `Content-Length`), the JSON-RPC 2.0 message model and the
//!   correlation engine shared by the JSON protocols.
//! - [`rexd`]: the REXD wire types (methods, results, events, error codes).
//! - [`entropy`]: secrets (pairing codes, tokens, approval ids) from 32 bytes of host entropy.
//! - [`gateway`]: the gateway job state machine, idempotent job creation and approvals.
//! - [`sidecar`]: typed params and results of the sidecar IPC methods (over [`jsonrpc`]).
//! - [`mobile`]: the mobile companion's WebSocket messages and its client and server engines.
//! - [`tools`]: tool specs, desk gating, policy and approvals, provider translation, retrieval.
//! - [`schemas`]: values of the JSON Schemas in `core/schemas/`, read through the Rust types.
#![warn(missing_docs)]
// `unsafe` is allowed only where a measurement asked for it, each with its SAFETY note:
// oa1::escape (SSE2 compares; AVX2 and AVX-512 block loads and stores for decoding, behind run-time
// detection; UTF-8 that escaping cannot break), oa1::into_text and irc::message::short_str.
#![deny(unsafe_code)]

// With the `uniffi` feature (the Kotlin binding, `bindings/kotlin`, turns it on) the types it
// hands to Kotlin as they are derive uniffi's traits; the derives need this crate's own uniffi
// component. Kotlin finds them in the package `dev.deskwire.core` (`core/uniffi.toml`).
#[cfg(feature = "uniffi")]
uniffi::setup_scaffolding!();

pub mod entropy;
pub mod gateway;
pub mod ids;
pub mod irc;
pub mod jsonrpc;
pub mod lines;
pub mod mobile;
pub mod oa1;
pub mod reconnect;
pub mod rexd;
pub mod schemas;
pub mod sidecar;
pub mod sim;
pub mod tools;

// The README's Rust programs run as doctests, so a README that no longer compiles or no longer
// does what it says fails `cargo test`.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct ReadmeRust;

// And so does the protocol reference's.
#[cfg(doctest)]
#[doc = include_str!("../../docs/oa1.md")]
struct Oa1DocRust;
