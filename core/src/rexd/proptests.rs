//! Property: any typed request, result or event → JSON → parse gives it back.

use std::borrow::Cow;
use std::collections::BTreeMap;

use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::value::RawValue;

use super::*;

fn text() -> impl Strategy<Value = String> {
    // Mostly short ASCII, sometimes anything (quotes, controls, astral planes).
    prop_oneof![3 => "[a-z0-9_./-]{0,12}", 1 => any::<String>()]
}

fn nonempty() -> impl Strategy<Value = String> {
    prop_oneof![3 => "[a-z0-9_./-]{1,12}", 1 => ".{1,8}"]
}

/// Variable names (any text but `=` and NUL, not empty) and values (any text but NUL): what
/// `exec.start` and `pty.open` take.
fn env() -> impl Strategy<Value = Option<BTreeMap<String, String>>> {
    let name = prop_oneof![3 => "[A-Z_][A-Z0-9_]{0,8}", 1 => "[^=\\x00]{1,8}"];
    option::of(btree_map(name, "[^\\x00]{0,12}", 0..3))
}

fn program() -> impl Strategy<Value = Program> {
    prop_oneof![
        vec(text(), 1..4).prop_map(Program::Argv),
        nonempty().prop_map(Program::Shell),
    ]
}

fn encoding() -> impl Strategy<Value = Encoding> {
    prop_oneof![Just(Encoding::Utf8), Just(Encoding::Base64)]
}

fn signal() -> impl Strategy<Value = Signal> {
    (0..Signal::ALL.len()).prop_map(|i| Signal::ALL[i])
}

fn limits() -> impl Strategy<Value = Limits> {
    let o = || option::of(any::<u64>());
    (o(), o(), o(), o(), o(), o()).prop_map(|(a, b, c, d, e, f)| Limits {
        max_output_bytes: a,
        max_file_read_bytes: b,
        max_processes_per_session: c,
        default_timeout_ms: d,
        hard_timeout_ms: e,
        max_concurrent_sessions: f,
    })
}

fn capability() -> impl Strategy<Value = Capability> {
    text().prop_map(|s| Capability::from_name(&s))
}

fn request() -> impl Strategy<Value = Request> {
    let session = prop_oneof![
        (
            text(),
            option::of(text()),
            option::of(vec(text(), 0..3)),
            option::of(vec(capability(), 0..3)),
            option::of(limits()),
            option::of(vec(text(), 0..3)),
            any::<(bool, bool)>()
        )
            .prop_map(|(a, b, c, d, e, f, (raw_frames, raw_output))| {
                Request::SessionOpen(SessionOpenParams {
                    client_name: a,
                    client_version: b,
                    workspace_roots: c,
                    requested_capabilities: d,
                    limits: e,
                    resumable: false,
                    compression: f,
                    raw_frames,
                    raw_output,
                })
            }),
        text().prop_map(|s| Request::SessionClose(SessionCloseParams { session_id: s })),
        text().prop_map(|s| Request::SessionInfo(SessionInfoParams { session_id: s })),
    ];
    let exec = prop_oneof![
        (
            text(),
            program(),
            option::of(text()),
            env(),
            option::of(text()),
            option::of(any::<u64>()),
            option::of(any::<u64>()),
            any::<bool>()
        )
            .prop_map(|(s, p, cwd, env, stdin, t, m, d)| {
                Request::ExecStart(ExecStartParams {
                    session_id: s,
                    program: p,
                    cwd,
                    env,
                    stdin,
                    timeout_ms: t,
                    max_output_bytes: m,
                    uncapped_output: false,
                    detach: d,
                })
            }),
        (text(), text(), option::of(any::<u64>()), any::<bool>()).prop_map(|(s, p, t, o)| {
            Request::ExecWait(ExecWaitParams {
                session_id: s,
                process_id: p,
                timeout_ms: t,
                output: o,
            })
        }),
        (text(), text(), signal()).prop_map(|(s, p, signal)| {
            Request::ExecKill(ExecKillParams {
                session_id: s,
                process_id: p,
                signal,
            })
        }),
        (text(), text(), text(), encoding(), any::<bool>()).prop_map(
            |(s, p, data, encoding, eof)| {
                Request::ExecInput(ExecInputParams {
                    session_id: s,
                    process_id: p,
                    data,
                    encoding,
                    eof,
                })
            }
        ),
    ];
    let fs = prop_oneof![
        (
            text(),
            text(),
            option::of(any::<u64>()),
            option::of(any::<u64>()),
            encoding()
        )
            .prop_map(|(s, path, offset, length, encoding)| {
                Request::FsRead(FsReadParams {
                    session_id: s,
                    path,
                    offset,
                    length,
                    encoding,
                })
            }),
        (
            text(),
            text(),
            text(),
            encoding(),
            prop_oneof![
                Just(WriteMode::Create),
                Just(WriteMode::Replace),
                Just(WriteMode::Append)
            ],
            any::<bool>(),
            any::<bool>(),
            option::of(text())
        )
            .prop_map(|(s, path, content, encoding, mode, mk, atomic, mtime)| {
                Request::FsWrite(FsWriteParams {
                    session_id: s,
                    path,
                    content,
                    encoding,
                    mode,
                    mkdir_parents: mk,
                    atomic,
                    expected_mtime: mtime,
                })
            }),
        (text(), text(), any::<bool>(), option::of(any::<u64>())).prop_map(|(s, path, r, m)| {
            Request::FsList(FsListParams {
                session_id: s,
                path,
                recursive: r,
                max_entries: m,
            })
        }),
        (text(), text(), option::of(text()), option::of(any::<u64>())).prop_map(
            |(s, pattern, cwd, m)| {
                Request::FsGlob(FsGlobParams {
                    session_id: s,
                    pattern,
                    cwd,
                    max_matches: m,
                })
            }
        ),
        (text(), text()).prop_map(|(s, path)| Request::FsStat(FsStatParams {
            session_id: s,
            path
        })),
    ];
    let pty = prop_oneof![
        (
            text(),
            program(),
            option::of(text()),
            env(),
            option::of(any::<u16>()),
            option::of(any::<u16>())
        )
            .prop_map(|(s, program, cwd, env, cols, rows)| {
                Request::PtyOpen(PtyOpenParams {
                    session_id: s,
                    program,
                    cwd,
                    env,
                    cols,
                    rows,
                })
            }),
        (text(), text(), text(), encoding()).prop_map(|(s, t, data, encoding)| {
            Request::PtyInput(PtyInputParams {
                session_id: s,
                pty_id: t,
                data,
                encoding,
            })
        }),
        (text(), text(), any::<u16>(), any::<u16>()).prop_map(|(s, t, cols, rows)| {
            Request::PtyResize(PtyResizeParams {
                session_id: s,
                pty_id: t,
                cols,
                rows,
            })
        }),
        (text(), text(), any::<bool>()).prop_map(|(s, t, k)| {
            Request::PtyClose(PtyCloseParams {
                session_id: s,
                pty_id: t,
                kill_process: k,
            })
        }),
    ];
    prop_oneof![session, exec, fs, pty]
}

fn output() -> impl Strategy<Value = ExecOutput<'static>> {
    (
        text(),
        text(),
        any::<u64>(),
        text(),
        encoding(),
        proptest::option::of(any::<u64>()),
    )
        .prop_map(|(s, p, seq, data, encoding, raw_bytes)| ExecOutput {
            session_id: Cow::Owned(s),
            process_id: Cow::Owned(p),
            seq,
            data: Cow::Owned(data),
            encoding,
            // The bytes themselves are not in the line: only their count round-trips.
            raw_bytes,
            raw: Vec::new(),
        })
}

fn event() -> impl Strategy<Value = Event<'static>> {
    prop_oneof![
        output().prop_map(Event::ExecStdout),
        output().prop_map(Event::ExecStderr),
        (
            text(),
            text(),
            option::of(any::<i32>()),
            option::of(text()),
            any::<bool>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<bool>()
        )
            .prop_map(|(s, p, code, signal, t, d, o, e, tr)| {
                Event::ExecExit(ExecExit {
                    session_id: s,
                    process_id: p,
                    exit_code: code,
                    signal,
                    timed_out: t,
                    duration_ms: d,
                    bytes_stdout: o,
                    bytes_stderr: e,
                    truncated: tr,
                })
            }),
        (text(), text(), text(), option::of(any::<i32>())).prop_map(|(s, p, m, errno)| {
            Event::ExecError(ExecErrorEvent {
                session_id: s,
                process_id: p,
                message: m,
                errno,
            })
        }),
        (text(), text(), any::<u64>(), text(), encoding()).prop_map(
            |(s, t, seq, data, encoding)| {
                Event::PtyOutput(PtyOutput {
                    session_id: Cow::Owned(s),
                    pty_id: Cow::Owned(t),
                    seq,
                    data: Cow::Owned(data),
                    encoding,
                })
            }
        ),
        (
            text(),
            text(),
            text(),
            option::of(any::<i32>()),
            option::of(text()),
            any::<u64>()
        )
            .prop_map(|(s, t, p, code, signal, d)| {
                Event::PtyExit(PtyExit {
                    session_id: s,
                    pty_id: t,
                    process_id: p,
                    exit_code: code,
                    signal,
                    duration_ms: d,
                })
            }),
    ]
}

fn file_type() -> impl Strategy<Value = FileType> {
    prop_oneof![
        Just(FileType::File),
        Just(FileType::Dir),
        Just(FileType::Symlink),
        Just(FileType::Other)
    ]
}

fn response() -> impl Strategy<Value = Response> {
    prop_oneof![
        (
            text(),
            text(),
            vec(capability(), 0..3),
            limits(),
            vec(text(), 0..3),
            option::of(text()),
            any::<(bool, bool)>()
        )
            .prop_map(
                |(id, v, caps, limits, roots, compression, (raw_frames, raw_output))| {
                    Response::SessionOpen(SessionOpenResult {
                        session_id: id,
                        protocol: PROTOCOL_VERSION.into(),
                        server_version: v,
                        capabilities: caps,
                        limits,
                        workspace_roots: roots,
                        resume: None,
                        compression,
                        raw_frames,
                        raw_output,
                    })
                }
            ),
        any::<bool>().prop_map(|ok| Response::ExecKill(OkResult { ok })),
        (
            prop_oneof![
                Just(ProcessStatus::Running),
                Just(ProcessStatus::Exited),
                Just(ProcessStatus::Killed),
                Just(ProcessStatus::TimedOut)
            ],
            option::of(any::<i32>()),
            option::of(text()),
            any::<u64>(),
            any::<u64>(),
            any::<bool>()
        )
            .prop_map(|(status, code, signal, o, e, t)| {
                Response::ExecWait(ExecWaitResult {
                    status,
                    exit_code: code,
                    signal,
                    bytes_stdout: o,
                    bytes_stderr: e,
                    truncated: t,
                    output: None,
                    error: None,
                })
            }),
        (
            text(),
            vec(
                (
                    text(),
                    text(),
                    file_type(),
                    option::of(any::<u64>()),
                    option::of(text())
                ),
                0..3
            ),
            any::<bool>()
        )
            .prop_map(|(path, entries, truncated)| {
                Response::FsList(FsListResult {
                    path,
                    entries: entries
                        .into_iter()
                        .map(|(name, path, kind, size, mtime)| DirEntry {
                            name,
                            path,
                            kind,
                            size,
                            mtime,
                        })
                        .collect(),
                    truncated,
                })
            }),
        (
            text(),
            any::<bool>(),
            option::of(file_type()),
            option::of(any::<u64>()),
            option::of(text()),
            option::of(any::<u32>()),
            option::of(any::<u32>()),
            option::of(text())
        )
            .prop_map(|(path, exists, kind, size, mtime, mode, uid, link)| {
                Response::FsStat(FsStatResult {
                    path,
                    exists,
                    kind,
                    size,
                    mtime,
                    mode,
                    uid,
                    gid: uid,
                    symlink_target: link,
                })
            }),
    ]
}

proptest! {
    #[test]
    fn request_round_trips(req in request()) {
        let line = RequestMessage { id: crate::jsonrpc::Id::Number(1), request: req.clone() }.to_line();
        prop_assert_eq!(&RequestMessage::from_slice(line.as_bytes()).unwrap().request, &req);
        let params = serde_json::value::to_raw_value(&req.params_value()).unwrap();
        prop_assert_eq!(Request::parse(req.method().as_str(), Some(&params)).unwrap(), req);
    }

    #[test]
    fn event_round_trips(event in event()) {
        let line = event.to_notification();
        prop_assert_eq!(&Event::from_notification(line.as_bytes()).unwrap(), &event);
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        let params = RawValue::from_string(v["params"].to_string()).unwrap();
        prop_assert_eq!(Event::parse(v["method"].as_str().unwrap(), Some(&params)).unwrap(), event);
    }

    #[test]
    fn response_round_trips(resp in response()) {
        let raw = serde_json::value::to_raw_value(&resp).unwrap();
        prop_assert_eq!(Response::parse(resp.method(), &raw).unwrap(), resp);
    }

    #[test]
    fn arbitrary_lines_never_panic(line in vec(any::<u8>(), 0..200)) {
        let _ = Event::from_notification(&line);
        let _ = RequestMessage::from_slice(&line);
        let _ = ErrorResponse::from_slice(&line);
    }
}
