//! The methods the four OA1 handles share, written once per core trait: [`Engine`] (all four),
//! [`LineEndpoint`] ([`Oa1Client`], [`Oa1Server`]), [`ConnectionEngine`] ([`Desk`], [`Remote`]),
//! [`Requester`] ([`Oa1Client`], [`Desk`]) and [`Responder`] ([`Oa1Server`], [`Remote`]).
//!
//! uniffi exports concrete objects only, so each handle stays its own
//! `#[derive(uniffi::Object)]` type; a macro here writes its `#[uniffi::export]` block for one
//! trait, and every method in it calls the core through that trait. A call site names its
//! handle (and, for [`engine_methods`], the mirrors of its output and counters) and has
//! `Result` (the crate's) and `Arc` in scope, as the modules that define the handles do.
//!
//! [`Engine`]: deskwire::oa1::Engine
//! [`LineEndpoint`]: deskwire::oa1::LineEndpoint
//! [`ConnectionEngine`]: deskwire::oa1::ConnectionEngine
//! [`Requester`]: deskwire::oa1::Requester
//! [`Responder`]: deskwire::oa1::Responder
//! [`Oa1Client`]: crate::oa1::Oa1Client
//! [`Oa1Server`]: crate::oa1::Oa1Server
//! [`Desk`]: crate::connection::Desk
//! [`Remote`]: crate::connection::Remote

/// `handle_timeout`, `poll_output` and `stats` of handle `$t`, whose `poll_output` gives
/// `$output` and whose `stats` gives `$stats` (the Kotlin mirrors of the core's).
macro_rules! engine_methods {
    ($t:ident, $output:ident, $stats:ident) => {
        #[uniffi::export]
        impl $t {
            /// Does what is due by `now_ms`.
            pub fn handle_timeout(&self, now_ms: i64) -> Result<()> {
                let now = $crate::ms(now_ms)?;
                deskwire::oa1::Engine::handle_timeout(&mut *$crate::lock(&self.inner), now);
                Ok(())
            }

            /// The next thing to do; call until it answers `Timeout`.
            pub fn poll_output(&self, now_ms: i64) -> Result<$output> {
                let now = $crate::ms(now_ms)?;
                Ok(deskwire::oa1::Engine::poll_output(&mut *$crate::lock(&self.inner), now).into())
            }

            /// Counters.
            pub fn stats(&self) -> $stats {
                deskwire::oa1::Engine::stats(&*$crate::lock(&self.inner)).into()
            }
        }
    };
}

/// `handle_line` and `set_identity` of a bare endpoint `$t`.
macro_rules! line_methods {
    ($t:ident) => {
        $crate::endpoint::engine_methods!($t, Oa1Output, Oa1Stats);

        #[uniffi::export]
        impl $t {
            /// One line the IRC connection received (CRLF optional).
            /// Kotlin passes a direct `ByteBuffer` (position to limit), read in place for the
            /// call; `handleLine(nowMs, ByteArray)` copies an array into one first.
            pub fn handle_line(&self, now_ms: i64, line: &[u8]) -> Result<()> {
                let now = $crate::ms(now_ms)?;
                deskwire::oa1::LineEndpoint::handle_line(
                    &mut *$crate::lock(&self.inner),
                    now,
                    line,
                );
                Ok(())
            }

            /// Tells the engine our prefix, for hosts whose IRC client knows it.
            pub fn set_identity(&self, nick: String, user: String, host: String) {
                deskwire::oa1::LineEndpoint::set_identity(
                    &mut *$crate::lock(&self.inner),
                    &nick,
                    &user,
                    &host,
                )
            }
        }
    };
}

/// The socket side of a connection engine `$t`: bytes in, the pull loop, its state.
macro_rules! connection_methods {
    ($t:ident) => {
        $crate::endpoint::engine_methods!($t, ConnectionOutput, ConnectionStats);

        #[uniffi::export]
        impl $t {
            /// Bytes read from the socket (any split; partial lines wait for the rest),
            /// borrowed for the call: Kotlin passes a direct `ByteBuffer` (from its position
            /// to its limit), which the engine reads in place. `handleBytes(nowMs, ByteArray)`
            /// copies an array into one first.
            pub fn handle_bytes(&self, now_ms: i64, bytes: &[u8]) -> Result<()> {
                let now = $crate::ms(now_ms)?;
                deskwire::oa1::ConnectionEngine::handle_bytes(
                    &mut *$crate::lock(&self.inner),
                    now,
                    bytes,
                );
                Ok(())
            }

            /// The socket closed or failed.
            pub fn handle_eof(&self, now_ms: i64) -> Result<()> {
                let now = $crate::ms(now_ms)?;
                deskwire::oa1::ConnectionEngine::handle_eof(&mut *$crate::lock(&self.inner), now);
                Ok(())
            }

            /// Says goodbye (`QUIT`, in the next drain); the connection ends, and later
            /// commands throw `Misuse` with kind `CLOSED`.
            pub fn quit(&self, now_ms: i64, reason: String) -> Result<()> {
                let now = $crate::ms(now_ms)?;
                deskwire::oa1::ConnectionEngine::quit(
                    &mut *$crate::lock(&self.inner),
                    now,
                    &reason,
                );
                Ok(())
            }

            /// Everything `poll_output` would give until its `Timeout`, in one call: the
            /// lines to write, the events and the deadline.
            pub fn drain(&self, now_ms: i64) -> Result<ConnectionDrain> {
                let now = $crate::ms(now_ms)?;
                Ok($crate::connection::drain(
                    &mut *$crate::lock(&self.inner),
                    now,
                ))
            }

            /// Where the connection stands.
            pub fn state(&self) -> deskwire::oa1::ConnectionState {
                deskwire::oa1::ConnectionEngine::state(&*$crate::lock(&self.inner))
            }

            /// Our nick as the server knows it: the configured one or, after the server
            /// refused it (`433`, in use: `IrcSessionEvent.NickRefused`), the one tried next
            /// (`desk_`, `desk1`, ...), which a peer that allows only the configured nick
            /// ignores.
            pub fn nick(&self) -> String {
                let engine = $crate::lock(&self.inner);
                let session = deskwire::oa1::ConnectionEngine::session(&*engine);
                session.identity().nick().to_owned()
            }
        }
    };
}

/// The asking side of `$t` (a desk): requests, `RemoteBash` calls, cancelling.
macro_rules! requester_methods {
    ($t:ident) => {
        #[uniffi::export]
        impl $t {
            /// Sends `payload` as a request; `timeout_ms` overrides the configured timeout (on
            /// a `Desk` it starts when the request's lines may leave: the connection
            /// registered, in the channel, the remote there; until then `oa1.readyTimeoutMs`
            /// applies). The id its events carry.
            pub fn request(
                &self,
                now_ms: i64,
                payload: String,
                timeout_ms: Option<i64>,
            ) -> Result<String> {
                let now = $crate::ms(now_ms)?;
                let timeout_ms = timeout_ms
                    .map(|t| $crate::non_negative("timeoutMs", t))
                    .transpose()?;
                $crate::error::api(|| {
                    deskwire::oa1::Requester::request(
                        &mut *$crate::lock(&self.inner),
                        now,
                        &payload,
                        timeout_ms,
                    )
                })
            }

            /// Starts a `RemoteBash` call from the model's JSON arguments (`command`,
            /// `timeout_sec`). The id its events carry.
            pub fn remote_bash(&self, now_ms: i64, args_json: String) -> Result<String> {
                let now = $crate::ms(now_ms)?;
                $crate::error::api(|| {
                    deskwire::oa1::remote_bash::call(
                        &mut *$crate::lock(&self.inner),
                        now,
                        &args_json,
                    )
                })
            }

            /// Starts a `RemoteBash` call of `command`; `timeout` (`null`: the configured
            /// request timeout) counts as `request`'s does, rounded up to a whole
            /// millisecond. A zero `timeout` throws `InvalidInput` with kind `ZERO_TIMEOUT`.
            /// The id whose `Response` or `Failed` (`Oa1Failure.Timeout` when it ran out) ends
            /// the call.
            pub fn remote_bash_command(
                &self,
                now_ms: i64,
                command: String,
                timeout: Option<std::time::Duration>,
            ) -> Result<String> {
                let now = $crate::ms(now_ms)?;
                $crate::error::api(|| {
                    deskwire::oa1::Requester::remote_bash(
                        &mut *$crate::lock(&self.inner),
                        now,
                        &command,
                        timeout,
                    )
                })
            }

            /// Cancels a request (a `CANCEL` goes out; the remote stops).
            pub fn cancel(&self, now_ms: i64, id: String, reason: String) -> Result<()> {
                let now = $crate::ms(now_ms)?;
                $crate::error::api(|| {
                    deskwire::oa1::Requester::cancel(
                        &mut *$crate::lock(&self.inner),
                        now,
                        &id,
                        &reason,
                    )
                })
            }
        }
    };
}

/// The answering side of `$t` (a remote): streamed answers and failures.
macro_rules! responder_methods {
    ($t:ident) => {
        #[uniffi::export]
        impl $t {
            /// Streams output for request `id`.
            pub fn send(&self, now_ms: i64, id: String, output: String) -> Result<()> {
                let now = $crate::ms(now_ms)?;
                $crate::error::api(|| {
                    deskwire::oa1::Responder::send(
                        &mut *$crate::lock(&self.inner),
                        now,
                        &id,
                        &output,
                    )
                })
            }

            /// Ends the response of `id`.
            pub fn finish(&self, now_ms: i64, id: String) -> Result<()> {
                let now = $crate::ms(now_ms)?;
                $crate::error::api(|| {
                    deskwire::oa1::Responder::finish(&mut *$crate::lock(&self.inner), now, &id)
                })
            }

            /// `send` then `finish`.
            pub fn respond(&self, now_ms: i64, id: String, text: String) -> Result<()> {
                let now = $crate::ms(now_ms)?;
                $crate::error::api(|| {
                    deskwire::oa1::Responder::respond(
                        &mut *$crate::lock(&self.inner),
                        now,
                        &id,
                        &text,
                    )
                })
            }

            /// Answers `id` with `ERR code: message` (`code` is `[a-z_]+`).
            pub fn fail(
                &self,
                now_ms: i64,
                id: String,
                code: String,
                message: String,
            ) -> Result<()> {
                let now = $crate::ms(now_ms)?;
                $crate::error::api(|| {
                    deskwire::oa1::Responder::fail(
                        &mut *$crate::lock(&self.inner),
                        now,
                        &id,
                        &code,
                        &message,
                    )
                })
            }
        }
    };
}

pub(crate) use {
    connection_methods, engine_methods, line_methods, requester_methods, responder_methods,
};

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::connection::{Desk, connection_config};
    use crate::error::{DeskwireError, ErrorKind};
    use crate::oa1::{Oa1Client, Oa1Output, oa1_config};

    fn desk() -> std::sync::Arc<Desk> {
        let config = connection_config("desk".into(), "#desk".into(), Some("deskbot".into()));
        Desk::new(config, 0, 1).unwrap()
    }

    fn kind(e: DeskwireError) -> (bool, ErrorKind) {
        match e {
            DeskwireError::InvalidInput { kind, .. } => (true, kind),
            DeskwireError::Misuse { kind, .. } => (false, kind),
            other => panic!("{other:?}"),
        }
    }

    /// The typed `RemoteBash` call goes through the core's `Requester::remote_bash`: its
    /// refusals are the core's, mapped where every error is (`error.rs`).
    #[test]
    fn remote_bash_command_maps_the_core_refusals() {
        let desk = desk();
        let id = desk
            .remote_bash_command(0, "uname".into(), Some(Duration::from_micros(1)))
            .unwrap();
        assert!(!id.is_empty());
        assert_eq!(desk.in_flight(), 1);
        let zero = desk.remote_bash_command(0, "ls".into(), Some(Duration::ZERO));
        assert_eq!(kind(zero.unwrap_err()), (true, ErrorKind::ZeroTimeout));
        desk.quit(1, "bye".into()).unwrap();
        desk.drain(1).unwrap();
        let closed = desk.remote_bash_command(2, "ls".into(), None);
        assert_eq!(kind(closed.unwrap_err()), (false, ErrorKind::Closed));
    }

    /// A bare client sends the command as the request payload.
    #[test]
    fn a_client_sends_the_command() {
        let mut config = oa1_config("desk".into(), "#desk".into());
        config.pacing_burst = 100;
        let client = Oa1Client::new(config, 1).unwrap();
        let id = client
            .remote_bash_command(0, "uname -a".into(), None)
            .unwrap();
        match client.poll_output(0).unwrap() {
            Oa1Output::Transmit { line } => {
                assert!(line.contains(&id) && line.ends_with("uname -a"), "{line}")
            }
            other => panic!("{other:?}"),
        }
    }
}
