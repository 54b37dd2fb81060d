//! The two roles of OA1 as traits, so code that only asks or only answers (the `RemoteBash`
//! glue, an executor) works the same over the bare endpoints ([`Client`], [`Server`]) and the
//! per-connection engines ([`Desk`], [`Remote`]).

use std::time::Duration;

use super::remote_bash::ArgsError;
use super::{Client, Desk, LocalError, Remote, Server};

/// The asking side: the desk.
pub trait Requester {
    /// Sends `payload` as a new request; `timeout_ms` overrides the configured request timeout.
    /// Returns the id its events will carry.
    fn request(
        &mut self,
        now: u64,
        payload: &str,
        timeout_ms: Option<u64>,
    ) -> Result<String, LocalError>;

    /// Cancels a request in flight: no event comes for it, and the remote is sent a `CANCEL`.
    fn cancel(&mut self, now: u64, id: &str, reason: &str) -> Result<(), LocalError>;

    /// Runs `command` on the remote through `RemoteBash` (see [`Desk::remote_bash`]).
    fn remote_bash(
        &mut self,
        now: u64,
        command: &str,
        timeout: Option<Duration>,
    ) -> Result<String, ArgsError> {
        let timeout_ms = checked_remote_bash(command, timeout)?;
        Ok(self.request(now, command, timeout_ms)?)
    }
}

/// A host's own `RemoteBash` call checked as the model's arguments are
/// ([`check_command`](super::remote_bash::check_command), a zero timeout refused): its timeout
/// in the engines' whole milliseconds.
pub(crate) fn checked_remote_bash(
    command: &str,
    timeout: Option<Duration>,
) -> Result<Option<u64>, ArgsError> {
    let timeout_ms = remote_bash_timeout_ms(timeout)?;
    super::remote_bash::check_command(command)?;
    Ok(timeout_ms)
}

/// A `RemoteBash` timeout in the engines' whole milliseconds; zero is refused.
fn remote_bash_timeout_ms(timeout: Option<Duration>) -> Result<Option<u64>, ArgsError> {
    match timeout {
        Some(t) if t.is_zero() => Err(ArgsError::ZeroTimeout),
        // Under a millisecond rounds up: the engines count whole milliseconds.
        Some(t) => Ok(Some(
            u64::try_from(t.as_millis()).unwrap_or(u64::MAX).max(1),
        )),
        None => Ok(None),
    }
}

/// The answering side: the remote.
pub trait Responder {
    /// Streams more output of request `id`.
    fn send(&mut self, now: u64, id: &str, output: &str) -> Result<(), LocalError>;

    /// Ends the response of request `id` once its output has gone out.
    fn finish(&mut self, now: u64, id: &str) -> Result<(), LocalError>;

    /// Sends the whole response `text` of request `id` and ends it.
    fn respond(&mut self, now: u64, id: &str, text: &str) -> Result<(), LocalError> {
        self.send(now, id, text)?;
        self.finish(now, id)
    }

    /// Answers request `id` with `ERR code: message`.
    fn fail(&mut self, now: u64, id: &str, code: &str, message: &str) -> Result<(), LocalError>;
}

macro_rules! requester {
    ($($t:ty),*) => {$(
        impl Requester for $t {
            fn request(
                &mut self,
                now: u64,
                payload: &str,
                timeout_ms: Option<u64>,
            ) -> Result<String, LocalError> {
                <$t>::request(self, now, payload, timeout_ms)
            }

            fn cancel(&mut self, now: u64, id: &str, reason: &str) -> Result<(), LocalError> {
                <$t>::cancel(self, now, id, reason)
            }
        }
    )*};
}

macro_rules! responder {
    ($($t:ty),*) => {$(
        impl Responder for $t {
            fn send(&mut self, now: u64, id: &str, output: &str) -> Result<(), LocalError> {
                <$t>::send(self, now, id, output)
            }

            fn finish(&mut self, now: u64, id: &str) -> Result<(), LocalError> {
                <$t>::finish(self, now, id)
            }

            fn respond(&mut self, now: u64, id: &str, text: &str) -> Result<(), LocalError> {
                <$t>::respond(self, now, id, text)
            }

            fn fail(
                &mut self,
                now: u64,
                id: &str,
                code: &str,
                message: &str,
            ) -> Result<(), LocalError> {
                <$t>::fail(self, now, id, code, message)
            }
        }
    )*};
}

requester!(Client, Desk);
responder!(Server, Remote);
