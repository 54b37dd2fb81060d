//! JSON-RPC: framing on byte streams, the JSON-RPC 2.0 message model, and a sans-IO
//! correlation engine (the [`Peer`]) that the JSON protocols share through their
//! [dialects](dialect).

pub mod dialect;
pub mod framing;
pub mod message;
pub mod peer;

pub use dialect::{Code, Dialect, JsonRpc2, RemoteError, Sidecar, SidecarErrorCode};
pub use message::{ErrorCode, ErrorCodes, ErrorObject, Id, MAX_ID_BYTES, Message, RawJson};
pub use peer::{
    CallError, Framing, LocalError, Output, Peer, PeerConfig, PeerEvent, PeerStats, TimeoutPolicy,
    TimeoutRule,
};
