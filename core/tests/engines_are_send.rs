//! Every engine, and everything it hands out, can move to another thread: the bindings keep an
//! engine inside a Python object, a uniffi `Arc<Mutex<_>>` or a Godot node, and all of those
//! require `Send` (uniffi also `Sync` for the wrapper, which the mutex gives). A field that is
//! `Rc` or a non-`Send` callback would stop this file from compiling.

use deskwire::jsonrpc::{JsonRpc2, Peer, Sidecar};

fn send<T: Send + 'static>() {}

#[test]
fn engines_and_their_outputs_are_send() {
    send::<deskwire::oa1::Client>();
    send::<deskwire::oa1::Server>();
    send::<deskwire::oa1::Output>();
    send::<deskwire::oa1::LocalError>();
    send::<deskwire::irc::Session>();
    send::<deskwire::irc::SessionOutput>();
    send::<deskwire::irc::LineDecoder>();
    send::<Peer<JsonRpc2>>();
    send::<Peer<Sidecar>>();
    send::<deskwire::jsonrpc::Output>();
    send::<deskwire::gateway::Gateway>();
    send::<deskwire::gateway::Outgoing>();
    send::<deskwire::mobile::Client>();
    send::<deskwire::mobile::Server>();
    send::<deskwire::tools::Toolbox>();
    send::<deskwire::tools::Output>();
}
