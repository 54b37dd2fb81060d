//! JSON-RPC: framing on byte streams, the JSON-RPC 2.0 message model, and a sans-IO
//! correlation engine (the peer) that the JSON protocols share.

pub mod framing;
pub mod message;
