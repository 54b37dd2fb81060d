//! The byte pipe under `DeskRpcClient` when it connects by itself: Godot's `StreamPeerTCP`,
//! optionally wrapped in `StreamPeerTLS`, polled without blocking from `_process`.
//!
//! It only moves bytes: what to send and what the bytes mean is the engine's.

use godot::classes::stream_peer_tcp::Status as TcpStatus;
use godot::classes::stream_peer_tls::Status as TlsStatus;
use godot::classes::{StreamPeer, StreamPeerTcp, StreamPeerTls, TlsOptions, X509Certificate};
use godot::global::Error;
use godot::prelude::*;

/// Bytes waiting to be written at most. The engine paces its lines, so this only fills while
/// the connection is being set up or the peer stops reading; past it the link is dropped.
pub const MAX_OUTBOUND: usize = 256 * 1024;

/// Bytes read per `pump` at most, so one busy peer cannot stall a frame.
const MAX_READ_PER_PUMP: usize = 256 * 1024;

/// How long a TLS handshake may take: a plain-text server may say nothing to a TLS hello.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How to secure the connection.
pub struct TlsSettings {
    /// The name the certificate must carry (usually the host).
    pub server_name: String,
    /// Trust this certificate (or chain) instead of the system's CAs.
    pub trusted: Option<Gd<X509Certificate>>,
}

/// What a pump found.
pub enum Input {
    /// Bytes arrived.
    Bytes(Vec<u8>),
    /// The connection ended or could not be made.
    Closed(String),
}

enum Phase {
    Connecting,
    Handshaking(Gd<StreamPeerTls>, std::time::Instant),
    Open(Option<Gd<StreamPeerTls>>),
    Closed,
}

/// One outgoing connection.
pub struct Socket {
    tcp: Gd<StreamPeerTcp>,
    tls: Option<TlsSettings>,
    phase: Phase,
    outbound: Vec<u8>,
}

impl Socket {
    /// Starts connecting to `host:port` (the name is resolved by Godot, blocking, unless it
    /// is an address).
    pub fn connect(host: &str, port: u16, tls: Option<TlsSettings>) -> Result<Socket, String> {
        let mut tcp = StreamPeerTcp::new_gd();
        match tcp.connect_to_host(host, i32::from(port)) {
            Error::OK => Ok(Socket {
                tcp,
                tls,
                phase: Phase::Connecting,
                outbound: Vec::new(),
            }),
            e => Err(format!("cannot connect to {host}:{port}: {e:?}")),
        }
    }

    /// Whether bytes can flow (TCP connected and, with TLS, the handshake done).
    pub fn is_open(&self) -> bool {
        matches!(self.phase, Phase::Open(_))
    }

    /// Queues bytes; they go out as soon as the connection takes them. `false` when the
    /// queue would pass [`MAX_OUTBOUND`] (nothing is queued then).
    pub fn send(&mut self, bytes: &[u8]) -> bool {
        if self.outbound.len() + bytes.len() > MAX_OUTBOUND {
            return false;
        }
        self.outbound.extend_from_slice(bytes);
        true
    }

    /// Advances the connection, writes what is queued and reads what arrived.
    pub fn pump(&mut self) -> Vec<Input> {
        let mut found = Vec::new();
        if let Err(reason) = self.advance() {
            self.shut();
            found.push(Input::Closed(reason));
            return found;
        }
        if !self.is_open() {
            return found;
        }
        if let Err(reason) = self.write() {
            self.shut();
            found.push(Input::Closed(reason));
            return found;
        }
        match self.read() {
            Ok(bytes) if !bytes.is_empty() => found.push(Input::Bytes(bytes)),
            Ok(_) => {}
            Err(reason) => {
                self.shut();
                found.push(Input::Closed(reason));
            }
        }
        found
    }

    /// Writes what it can of the queue; the reason when the connection broke.
    pub fn flush(&mut self) -> Option<String> {
        if !self.is_open() {
            return None;
        }
        let reason = self.write().err()?;
        self.shut();
        Some(reason)
    }

    /// Writes what it can of the queue now and closes the connection (used when the client
    /// goes away: nothing will pump it again).
    pub fn close_now(&mut self) {
        if self.is_open() {
            let _ = self.write();
            // Unread input would make the kernel reset the connection and drop what was just
            // written (the QUIT): read it away first.
            let _ = self.read();
        }
        self.shut();
    }

    fn shut(&mut self) {
        if let Phase::Open(Some(tls)) | Phase::Handshaking(tls, _) = &mut self.phase {
            tls.disconnect_from_stream();
        }
        self.tcp.disconnect_from_host();
        self.phase = Phase::Closed;
        self.outbound.clear();
    }

    fn advance(&mut self) -> Result<(), String> {
        self.tcp.poll();
        match self.tcp.get_status() {
            TcpStatus::CONNECTING => return Ok(()),
            TcpStatus::CONNECTED => {}
            TcpStatus::ERROR => return Err("the TCP connection failed".into()),
            _ => {
                if matches!(self.phase, Phase::Closed) {
                    return Ok(());
                }
                return Err("the connection was closed".into());
            }
        }
        match &mut self.phase {
            Phase::Connecting => {
                self.tcp.set_no_delay(true);
                self.phase = match &self.tls {
                    None => Phase::Open(None),
                    Some(settings) => Phase::Handshaking(
                        start_tls(&self.tcp, settings)?,
                        std::time::Instant::now(),
                    ),
                };
                if let Phase::Handshaking(..) = self.phase {
                    return self.advance();
                }
                Ok(())
            }
            Phase::Handshaking(tls, _) | Phase::Open(Some(tls)) => {
                tls.poll();
                match tls.get_status() {
                    TlsStatus::HANDSHAKING => match &self.phase {
                        Phase::Handshaking(_, started) if started.elapsed() > HANDSHAKE_TIMEOUT => {
                            Err(format!(
                                "TLS: no answer to the handshake within {} s (a plain-text port?)",
                                HANDSHAKE_TIMEOUT.as_secs()
                            ))
                        }
                        _ => Ok(()),
                    },
                    TlsStatus::CONNECTED => {
                        if let Phase::Handshaking(tls, _) = &self.phase {
                            self.phase = Phase::Open(Some(tls.clone()));
                        }
                        Ok(())
                    }
                    TlsStatus::ERROR_HOSTNAME_MISMATCH => {
                        Err("TLS: the certificate is for another host".into())
                    }
                    TlsStatus::ERROR => match &self.phase {
                        Phase::Handshaking(..) => Err(handshake_failed(
                            self.tls.as_ref().map_or("", |t| t.server_name.as_str()),
                        )),
                        _ => Err("TLS: the connection failed".into()),
                    },
                    _ => Err("TLS: the connection was closed".into()),
                }
            }
            Phase::Open(None) => Ok(()),
            Phase::Closed => Ok(()),
        }
    }

    fn peer(&self) -> Gd<StreamPeer> {
        match &self.phase {
            Phase::Open(Some(tls)) => tls.clone().upcast(),
            _ => self.tcp.clone().upcast(),
        }
    }

    fn write(&mut self) -> Result<(), String> {
        if self.outbound.is_empty() {
            return Ok(());
        }
        let mut peer = self.peer();
        let data = PackedByteArray::from(self.outbound.as_slice());
        let answer = peer.put_partial_data(&data);
        let error: Error = answer.get(0).map(|v| v.to()).unwrap_or(Error::FAILED);
        if error != Error::OK {
            return Err(format!("writing failed: {error:?}"));
        }
        let sent: i64 = answer.get(1).map(|v| v.to()).unwrap_or(0);
        let sent = usize::try_from(sent).unwrap_or(0).min(self.outbound.len());
        self.outbound.drain(..sent);
        Ok(())
    }

    fn read(&mut self) -> Result<Vec<u8>, String> {
        let mut peer = self.peer();
        let mut bytes = Vec::new();
        while bytes.len() < MAX_READ_PER_PUMP {
            let available = usize::try_from(peer.get_available_bytes()).unwrap_or(0);
            if available == 0 {
                break;
            }
            let want = available.min(MAX_READ_PER_PUMP - bytes.len());
            let answer = peer.get_partial_data(i32::try_from(want).unwrap_or(i32::MAX));
            let error: Error = answer.get(0).map(|v| v.to()).unwrap_or(Error::FAILED);
            if error != Error::OK {
                return Err(format!("reading failed: {error:?}"));
            }
            let chunk: PackedByteArray = answer.get(1).map(|v| v.to()).unwrap_or_default();
            if chunk.is_empty() {
                break;
            }
            bytes.extend_from_slice(chunk.as_slice());
        }
        Ok(bytes)
    }
}

fn start_tls(tcp: &Gd<StreamPeerTcp>, settings: &TlsSettings) -> Result<Gd<StreamPeerTls>, String> {
    let mut tls = StreamPeerTls::new_gd();
    let options = match &settings.trusted {
        Some(cert) => TlsOptions::client_ex().trusted_chain(cert).done(),
        None => TlsOptions::client(),
    };
    let stream: Gd<StreamPeer> = tcp.clone().upcast();
    match tls
        .connect_to_stream_ex(&stream, settings.server_name.as_str())
        .client_options(options.as_ref())
        .done()
    {
        Error::OK => Ok(tls),
        // The handshake's first step may already check the certificate.
        Error::FAILED => Err(handshake_failed(&settings.server_name)),
        e => Err(format!("TLS could not start: {e:?}")),
    }
}

/// A failed handshake, as far as Godot tells: one FAILED or ERROR whether the certificate is
/// not trusted, is for another name, or the server does not speak TLS (mbedtls's code goes to
/// Godot's log: -0x2700 is a certificate that failed verification).
fn handshake_failed(server_name: &str) -> String {
    format!(
        "TLS: the handshake failed: the server's certificate is not signed by a trusted CA or is \
         not for {server_name:?} (set tls_trusted_certificate to its CA, or tls_server_name), or \
         it does not speak TLS; Godot's log has mbedtls's code"
    )
}
