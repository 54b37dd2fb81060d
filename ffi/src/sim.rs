//! The in-memory IRC server (`deskwire::sim::Network`), so C hosts can test their loops over
//! the desk and remote engines without a real server.

use std::ffi::c_char;

use deskwire::sim::{ClientId, Network};
use serde_json::json;

use crate::boundary::{self, Error, Handle, Result, as_handle, dw_status, dw_str};

pub(crate) struct NetworkState {
    network: Network,
    clients: Vec<ClientId>,
}

/// An in-memory IRC server over raw bytes (`deskwire::sim::Network`): registration, `PING`,
/// `JOIN`, `PART`, `QUIT`, and channel `PRIVMSG` relayed with the sender's prefix, cut at 512
/// bytes as ngircd does.
pub struct dw_sim_network(Handle<NetworkState>);
as_handle!(dw_sim_network, NetworkState);

/// Creates a server; `seed` fixes the noise, and every `noise_every` relayed line (0: never)
/// it injects a line of channel noise, as real channels have. On success `*out` is a new
/// handle the caller frees with `dw_sim_network_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_sim_network_new(
    seed: u64,
    noise_every: u32,
    out: *mut *mut dw_sim_network,
) -> dw_status {
    boundary::new_handle(out, || {
        Ok(NetworkState {
            network: Network::new(seed).with_noise(noise_every),
            clients: Vec::new(),
        })
    })
}

/// Frees a server. `NULL` is a no-op.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_sim_network_free(network: *mut dw_sim_network) {
    boundary::free_handle(network)
}

/// The message of the server's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_sim_network_last_error(
    network: *const dw_sim_network,
) -> *const c_char {
    boundary::last_error(network)
}

/// The kind of the server's last failed call, or `""`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_sim_network_last_error_kind(
    network: *const dw_sim_network,
) -> *const c_char {
    boundary::last_error_kind(network)
}

/// Opens a connection from `host` (what the server shows in the client's prefix); `*client`
/// is its number for the other calls.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_sim_network_connect(
    network: *mut dw_sim_network,
    host: *const c_char,
    client: *mut u64,
) -> dw_status {
    boundary::with(network, |h| {
        let out = boundary::out_ptr(client, "client")?;
        let host = boundary::str_arg(host, "host")?;
        let id = h.engine.network.connect(host);
        h.engine.clients.push(id);
        boundary::write(out, (h.engine.clients.len() - 1) as u64);
        Ok(())
    })
}

fn client(state: &NetworkState, client: u64) -> Result<ClientId> {
    usize::try_from(client)
        .ok()
        .and_then(|i| state.clients.get(i).copied())
        .ok_or_else(|| Error::argument(format_args!("no client {client}")))
}

/// Bytes the client's engine transmitted: `data[0..len]`, as if written to its socket.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_sim_network_handle_bytes(
    network: *mut dw_sim_network,
    client: u64,
    data: *const u8,
    len: usize,
) -> dw_status {
    boundary::with(network, |h| {
        let id = self::client(&h.engine, client)?;
        let bytes = boundary::bytes_arg(data, len, "data")?;
        h.engine.network.handle_bytes(id, bytes);
        Ok(())
    })
}

/// Takes what the server sent the client since the last call, as if read from its socket:
/// `*out` views the bytes (maybe none) until the next call with `network`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_sim_network_take_bytes(
    network: *mut dw_sim_network,
    client: u64,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(network, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let id = self::client(&h.engine, client)?;
        let bytes = h.engine.network.take_bytes(id);
        h.out = bytes;
        h.out.push(0);
        boundary::write(
            out,
            dw_str {
                ptr: h.out.as_ptr().cast(),
                len: h.out.len() - 1,
            },
        );
        Ok(())
    })
}

/// Whether the client's connection is open (the server closes it for an over-long line or a
/// `QUIT`); `*open` receives it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_sim_network_is_open(
    network: *mut dw_sim_network,
    client: u64,
    open: *mut bool,
) -> dw_status {
    boundary::with(network, |h| {
        let out = boundary::out_ptr(open, "open")?;
        let id = self::client(&h.engine, client)?;
        boundary::write(out, h.engine.network.is_open(id));
        Ok(())
    })
}

/// Closes the client's connection from the server's side.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_sim_network_disconnect(
    network: *mut dw_sim_network,
    client: u64,
) -> dw_status {
    boundary::with(network, |h| {
        let id = self::client(&h.engine, client)?;
        h.engine.network.disconnect(id);
        Ok(())
    })
}

/// What the server saw, as JSON in `*out`: `{"relayed", "cut_lines", "longest_line",
/// "noise"}`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dw_sim_network_stats(
    network: *mut dw_sim_network,
    out: *mut dw_str,
) -> dw_status {
    boundary::with(network, |h| {
        let out = boundary::out_ptr(out, "out")?;
        let s = h.engine.network.stats();
        let value = json!({
            "relayed": s.relayed, "cut_lines": s.cut_lines,
            "longest_line": s.longest_line, "noise": s.noise
        });
        boundary::write(out, h.json_view(&value));
        Ok(())
    })
}
