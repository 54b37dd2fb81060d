//! `rexd`: the REXD v1 remote execution daemon (`specs/rexd-v1.md`).
//!
//! The engine is [`service::Service`]: sessions, processes (pipes or a PTY, each in its own
//! process group), file operations confined to allowlisted roots, limits and the audit log,
//! behind typed [`deskwire::rexd::Request`]s. Transports drive it from one mio loop:
//! [`stdio`] (NDJSON JSON-RPC 2.0, also over `ssh host rexd --stdio`) and [`irc`] (OA1
//! `RemoteBash` on an IRC channel, [`remote_bash`]). Other frontends use the same `Service`:
//! [`mcp`] (`rexd --mcp`, the tools as an MCP server). [`client`] is the other end: `rex`, the
//! client library and CLI (`local` and `ssh://` targets).
//!
//! ```
//! use rexd::service::{Service, ServiceOutput, Settings};
//! use deskwire::rexd::{Request, Response, SessionOpenParams};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let poll = mio::Poll::new().unwrap();
//! let settings = Settings::for_roots(&[dir.path().to_owned()]).unwrap();
//! let mut service = Service::new(settings, poll.registry().try_clone().unwrap());
//! let open = SessionOpenParams { client_name: "doc".into(), ..Default::default() };
//! service.call(0, 1, Request::SessionOpen(open));
//! let Some(ServiceOutput::Reply { handle: 1, result: Ok(Response::SessionOpen(r)) }) = service.poll_output() else {
//!     panic!()
//! };
//! assert_eq!(r.protocol, "rexd/1");
//! ```

#![warn(missing_docs)]

pub mod audit;
pub mod client;
pub mod config;
pub mod fsops;
pub mod irc;
pub mod log;
pub mod mcp;
pub mod process;
pub mod remote_bash;
pub mod roots;
pub mod service;
pub mod stdio;
pub mod sys;
