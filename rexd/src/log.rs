//! Diagnostics on stderr (never stdout, which carries the protocol), filtered by level.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::config::LogLevel;

static LEVEL: AtomicU8 = AtomicU8::new(LogLevel::Info as u8);

/// Sets the level for the whole process.
pub fn set_level(level: LogLevel) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

fn say(level: LogLevel, tag: &str, message: &str) {
    if level as u8 <= LEVEL.load(Ordering::Relaxed) {
        eprintln!("rexd: {tag}: {message}");
    }
}

/// An error.
pub fn error(message: &str) {
    say(LogLevel::Error, "error", message);
}

/// A warning.
pub fn warn(message: &str) {
    say(LogLevel::Warn, "warn", message);
}

/// Information.
pub fn info(message: &str) {
    say(LogLevel::Info, "info", message);
}

/// Detail.
pub fn debug(message: &str) {
    say(LogLevel::Debug, "debug", message);
}
