//! Refused clients in the log, for the operator and tools such as fail2ban: each refusal at
//! `warn` with the client's address and why, at most [`PER_WINDOW`] lines per address a
//! minute, so a flood of bad requests cannot flood the log; the rest are counted and said in
//! one line when the address's next minute starts.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Lines logged per address per [`WINDOW`].
pub const PER_WINDOW: u32 = 5;
/// How long an address's count lasts.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Addresses tracked at once; past it, those whose minute is over are forgotten first.
const MAX_ADDRESSES: usize = 4096;

#[derive(Debug)]
struct Count {
    since: Instant,
    logged: u32,
    unlogged: u32,
}

/// The per-address counts.
#[derive(Debug, Default)]
pub struct RefusalLog {
    counts: Mutex<HashMap<IpAddr, Count>>,
}

impl RefusalLog {
    /// Logs that `addr` was refused, and why, unless its address has had its lines this
    /// minute.
    pub fn refused(&self, addr: SocketAddr, why: &str) {
        if let Some(line) = self.line(Instant::now(), addr, why) {
            crate::log::warn(&line);
        }
    }

    /// The line to log for a refusal at `now`, if any.
    fn line(&self, now: Instant, addr: SocketAddr, why: &str) -> Option<String> {
        let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        let ip = addr.ip();
        if counts.len() >= MAX_ADDRESSES && !counts.contains_key(&ip) {
            counts.retain(|_, c| now.duration_since(c.since) < WINDOW);
            if counts.len() >= MAX_ADDRESSES {
                // Every address is in its minute: start over rather than grow.
                counts.clear();
            }
        }
        let count = counts.entry(ip).or_insert(Count {
            since: now,
            logged: 0,
            unlogged: 0,
        });
        let mut earlier = String::new();
        if now.duration_since(count.since) >= WINDOW {
            if count.unlogged > 0 {
                earlier = format!(
                    " ({} more from {ip} in the minute before, not logged)",
                    count.unlogged
                );
            }
            *count = Count {
                since: now,
                logged: 0,
                unlogged: 0,
            };
        }
        if count.logged == PER_WINDOW {
            count.unlogged += 1;
            return None;
        }
        count.logged += 1;
        let last = match count.logged == PER_WINDOW {
            true => format!(" (more from {ip} this minute are counted, not logged)"),
            false => String::new(),
        };
        Some(format!("refused {addr}: {why}{earlier}{last}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_lines_a_minute_per_address_then_a_count() {
        let log = RefusalLog::default();
        let t0 = Instant::now();
        let a: SocketAddr = "192.0.2.7:5000".parse().unwrap();
        let b: SocketAddr = "192.0.2.8:5000".parse().unwrap();
        let lines: Vec<_> = (0..20)
            .filter_map(|_| log.line(t0, a, "a wrong token"))
            .collect();
        assert_eq!(lines.len(), PER_WINDOW as usize);
        assert_eq!(lines[0], "refused 192.0.2.7:5000: a wrong token");
        assert!(lines[4].ends_with("(more from 192.0.2.7 this minute are counted, not logged)"));
        // Another address has its own count.
        assert!(log.line(t0, b, "a wrong token").is_some());
        // The next minute says how many went unlogged.
        let next = log.line(t0 + WINDOW, a, "a wrong token").unwrap();
        assert_eq!(
            next,
            "refused 192.0.2.7:5000: a wrong token (15 more from 192.0.2.7 in the minute before, not logged)"
        );
    }

    #[test]
    fn the_addresses_held_are_bounded() {
        let log = RefusalLog::default();
        let t0 = Instant::now();
        for i in 0..(MAX_ADDRESSES as u32 + 100) {
            let addr = SocketAddr::from((std::net::Ipv4Addr::from(0x0a00_0000 + i), 1));
            assert!(log.line(t0, addr, "x").is_some());
        }
        assert!(log.counts.lock().unwrap().len() <= MAX_ADDRESSES);
    }
}
