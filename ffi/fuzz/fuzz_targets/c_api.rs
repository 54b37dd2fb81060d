//! Drives the C entry points with fuzzed input, as a C host would call them: the first byte
//! picks the entry point, the rest is its input, either raw bytes (the hot path: socket
//! bytes, frames, lines, bodies) or a NUL-terminated string (JSON configs and values, ids).
//! Every call must answer a status and never crash; a long-lived set of handles takes the byte
//! inputs so their state builds up across runs.
#![no_main]

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::ptr;

use deskwire_ffi::gateway::*;
use deskwire_ffi::irc::*;
use deskwire_ffi::jsonrpc::*;
use deskwire_ffi::mobile::*;
use deskwire_ffi::oa1::*;
use deskwire_ffi::schemas::*;
use deskwire_ffi::tools::*;
use deskwire_ffi::{dw_output, dw_output_kind, dw_status, dw_str};
use libfuzzer_sys::fuzz_target;

struct Handles {
    desk: *mut dw_desk,
    remote: *mut dw_remote,
    peer: *mut dw_peer,
    sidecar: *mut dw_peer,
    gateway: *mut dw_gateway,
    phone: *mut dw_mobile_client,
    server: *mut dw_mobile_server,
    toolbox: *mut dw_toolbox,
    stream: *mut dw_stream_parser,
}

thread_local! {
    static HANDLES: RefCell<Option<Handles>> = const { RefCell::new(None) };
}

fn c(s: &str) -> CString {
    CString::new(s).unwrap()
}

unsafe fn handles() -> Handles {
    let mut h = Handles {
        desk: ptr::null_mut(),
        remote: ptr::null_mut(),
        peer: ptr::null_mut(),
        sidecar: ptr::null_mut(),
        gateway: ptr::null_mut(),
        phone: ptr::null_mut(),
        server: ptr::null_mut(),
        toolbox: ptr::null_mut(),
        stream: ptr::null_mut(),
    };
    let entropy = [7u8; 32];
    unsafe {
        assert_eq!(
            dw_desk_new(
                c(r##"{"nick":"d","channel":"#d","oa1":{"allowed_sender":"r"}}"##).as_ptr(),
                0,
                1,
                &mut h.desk
            ),
            dw_status::Ok
        );
        assert_eq!(
            dw_remote_new(
                c(r##"{"nick":"r","channel":"#d"}"##).as_ptr(),
                0,
                &mut h.remote
            ),
            dw_status::Ok
        );
        assert_eq!(
            dw_peer_new(DW_DIALECT_JSONRPC2, ptr::null(), 1, &mut h.peer),
            dw_status::Ok
        );
        assert_eq!(
            dw_peer_new(
                DW_DIALECT_SIDECAR,
                c(r#"{"framing":"content_length"}"#).as_ptr(),
                1,
                &mut h.sidecar
            ),
            dw_status::Ok
        );
        assert_eq!(
            dw_gateway_new(
                c(r#"{"tokens":["t"]}"#).as_ptr(),
                0,
                entropy.as_ptr(),
                0,
                &mut h.gateway
            ),
            dw_status::Ok
        );
        assert_eq!(
            dw_mobile_client_new(ptr::null(), c("tok").as_ptr(), &mut h.phone),
            dw_status::Ok
        );
        assert_eq!(
            dw_mobile_server_new(ptr::null(), entropy.as_ptr(), &mut h.server),
            dw_status::Ok
        );
        assert_eq!(
            dw_toolbox_new(ptr::null(), ptr::null(), true, 1, &mut h.toolbox),
            dw_status::Ok
        );
        assert_eq!(
            dw_stream_parser_new(DW_PROVIDER_ANTHROPIC, ptr::null(), 1, &mut h.stream),
            dw_status::Ok
        );
    }
    h
}

/// Drains an engine's outputs, reading every byte each one points to.
fn drain(mut poll: impl FnMut(&mut dw_output) -> dw_status) {
    for _ in 0..10_000 {
        let mut out = dw_output {
            kind: dw_output_kind::DwOutputTimeout,
            data: ptr::null(),
            len: 0,
            deadline_ms: 0,
            conn: 0,
            text: ptr::null(),
            text_len: 0,
        };
        if poll(&mut out) != dw_status::Ok || out.kind == dw_output_kind::DwOutputTimeout {
            return;
        }
        if out.len > 0 {
            // SAFETY: the library says out.data[0..len] is readable until the next call.
            let bytes = unsafe { std::slice::from_raw_parts(out.data, out.len) };
            std::hint::black_box(bytes.iter().map(|&b| b as u32).sum::<u32>());
        }
        if out.text_len > 0 {
            // SAFETY: out.text[0..text_len] lives as long as out.data.
            let text = unsafe { std::slice::from_raw_parts(out.text, out.text_len) };
            std::hint::black_box(text.iter().map(|&b| b as u32).sum::<u32>());
        }
    }
    panic!("an engine never drained");
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, input)) = data.split_first() else {
        return;
    };
    // A NUL-terminated string from the input, as C would pass it (cut at the first NUL).
    let text = CString::new(input.split(|&b| b == 0).next().unwrap_or_default()).unwrap();
    let s: *const c_char = text.as_ptr();
    let mut buf = vec![0u8; 1 << 16];
    let mut len = 0usize;
    let out = buf.as_mut_ptr().cast::<c_char>();
    let cap = buf.len();
    let mut view = dw_str {
        ptr: ptr::null(),
        len: 0,
    };
    HANDLES.with(|cell| {
        let mut cell = cell.borrow_mut();
        let h = cell.get_or_insert_with(|| unsafe { handles() });
        unsafe {
            let st = match selector % 24 {
                // Byte inputs into long-lived engines.
                0 => {
                    let st = dw_desk_handle_bytes(h.desk, 1, input.as_ptr(), input.len());
                    drain(|o| dw_desk_poll_output(h.desk, 1, o));
                    st
                }
                1 => {
                    let st = dw_remote_handle_bytes(h.remote, 1, input.as_ptr(), input.len());
                    drain(|o| dw_remote_poll_output(h.remote, 1, o));
                    st
                }
                2 => {
                    let st = dw_peer_handle_bytes(h.peer, 1, input.as_ptr(), input.len());
                    drain(|o| dw_peer_poll_output(h.peer, 1, o));
                    st
                }
                3 => {
                    let st = dw_peer_handle_bytes(h.sidecar, 1, input.as_ptr(), input.len());
                    drain(|o| dw_peer_poll_output(h.sidecar, 1, o));
                    st
                }
                4 => {
                    let st =
                        dw_gateway_handle_message(h.gateway, 1, 1, input.as_ptr(), input.len());
                    drain(|o| dw_gateway_poll_output(h.gateway, 1, o));
                    st
                }
                5 => {
                    let st = dw_mobile_client_handle_text(h.phone, 1, input.as_ptr(), input.len());
                    drain(|o| dw_mobile_client_poll_output(h.phone, 1, o));
                    st
                }
                6 => {
                    let st =
                        dw_mobile_server_handle_text(h.server, 1, 1, input.as_ptr(), input.len());
                    drain(|o| dw_mobile_server_poll_output(h.server, 1, o));
                    st
                }
                7 => dw_stream_parser_feed(h.stream, input.as_ptr(), input.len()),
                // Free functions over bytes.
                8 => dw_irc_parse_line(input.as_ptr(), input.len(), out, cap, &mut len),
                9 => dw_oa1_frame_parse(input.as_ptr(), input.len(), out, cap, &mut len),
                10 => dw_oa1_unescape(input.as_ptr(), input.len(), out, cap, &mut len),
                11 => dw_jsonrpc_parse(input.as_ptr(), input.len(), 16, out, cap, &mut len),
                12 => dw_provider_parse_response(
                    DW_PROVIDER_OPENAI_CHAT + u32::from(selector / 24 % 4),
                    input.as_ptr(),
                    input.len(),
                    1,
                    out,
                    cap,
                    &mut len,
                ),
                // JSON and string inputs.
                13 => {
                    let mut p = ptr::null_mut();
                    let st = dw_peer_new(DW_DIALECT_SIDECAR, s, 1, &mut p);
                    dw_peer_free(p);
                    st
                }
                14 => {
                    let mut d = ptr::null_mut();
                    let st = dw_desk_new(s, 0, 1, &mut d);
                    dw_desk_free(d);
                    st
                }
                15 => dw_toolbox_set_context(h.toolbox, c("npc").as_ptr(), s),
                16 => dw_toolbox_check_call(
                    h.toolbox,
                    1,
                    c("npc").as_ptr(),
                    s,
                    DW_ORIGIN_MODEL,
                    &mut view,
                ),
                17 => dw_toolbox_slash(h.toolbox, s, &mut view),
                18 => dw_provider_request_tools(DW_PROVIDER_GEMINI, s, out, cap, &mut len),
                19 => dw_schema_read(
                    c("gateway").as_ptr(),
                    c("Envelope").as_ptr(),
                    s,
                    out,
                    cap,
                    &mut len,
                ),
                20 => dw_peer_respond(h.peer, 1, s, c("{}").as_ptr()),
                21 => dw_desk_remote_bash(h.desk, 1, s, &mut view),
                22 => dw_oa1_frame_format(s, out, cap, &mut len),
                _ => {
                    let mut g = ptr::null_mut();
                    let st = dw_gateway_new(s, 0, [1u8; 32].as_ptr(), 0, &mut g);
                    dw_gateway_free(g);
                    st
                }
            };
            assert!(
                !matches!(st, dw_status::Panic | dw_status::Poisoned),
                "selector {selector}: {st:?}"
            );
        }
    });
});
