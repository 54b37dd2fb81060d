//! Connection slots: `--max-connections` places, and from its first authenticated request a
//! connection's place among its principal's (`--max-connections-per-principal`).
//!
//! A connection that has not authenticated yet (in its TLS handshake, waiting for its first
//! request's headers, or refused) holds its slot only until a new client needs it: when every
//! slot is taken, the oldest such connection is closed to make room, as sshd's `MaxStartups`
//! drops pending logins. So idle sockets, however many, cannot keep a real client waiting;
//! authenticated connections (a WebSocket for its whole life) are never pushed out.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Connections open per principal, against `--max-connections-per-principal`.
pub(crate) struct PrincipalConns {
    max: usize,
    open: Mutex<HashMap<String, usize>>,
}

impl PrincipalConns {
    /// At most `max` connections per principal.
    pub(crate) fn new(max: usize) -> PrincipalConns {
        PrincipalConns {
            max,
            open: Mutex::default(),
        }
    }
}

/// A connection counted as its principal's, until dropped.
struct PrincipalPlace {
    conns: Arc<PrincipalConns>,
    principal: String,
}

impl Drop for PrincipalPlace {
    fn drop(&mut self) {
        let mut open = self.conns.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = open.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.principal);
            }
        }
    }
}

/// Where a connection stands: it may be pushed out only while `PENDING`.
const PENDING: u8 = 0;
const AUTHENTICATED: u8 = 1;
const PUSHED_OUT: u8 = 2;

/// One accepted connection's place under the limits. The connection's task and, after an
/// upgrade, its WebSocket share it, so that a WebSocket counts for its whole life.
pub(crate) struct ConnSlot {
    _slot: OwnedSemaphorePermit,
    principal: OnceLock<PrincipalPlace>,
    /// The client's address, for the log.
    pub(crate) addr: SocketAddr,
    state: AtomicU8,
    pushed_out: Notify,
}

/// Why [`ConnSlot::claim`] refused.
pub(crate) enum ClaimError {
    /// The principal already has this many connections open, its most.
    PrincipalFull(usize),
    /// The connection was just pushed out to make room for another client.
    PushedOut,
}

impl ConnSlot {
    /// Counts the connection as `principal`'s (once: its first authenticated request decides),
    /// after which it is never pushed out.
    pub(crate) fn claim(
        &self,
        principal: &str,
        conns: &Arc<PrincipalConns>,
    ) -> Result<(), ClaimError> {
        if self.principal.get().is_some() {
            return Ok(());
        }
        {
            let mut open = conns.open.lock().unwrap_or_else(|e| e.into_inner());
            let n = open.get(principal).copied().unwrap_or(0);
            if n >= conns.max {
                return Err(ClaimError::PrincipalFull(n));
            }
            let claimed = self.state.compare_exchange(
                PENDING,
                AUTHENTICATED,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
            if claimed == Err(PUSHED_OUT) {
                return Err(ClaimError::PushedOut);
            }
            open.insert(principal.to_owned(), n + 1);
        }
        let place = PrincipalPlace {
            conns: Arc::clone(conns),
            principal: principal.to_owned(),
        };
        // Requests on one connection come one after another: nothing set it meanwhile.
        let _ = self.principal.set(place);
        Ok(())
    }

    /// Resolves once the connection is pushed out (never, once it has authenticated): its
    /// task then drops the connection, and with it the slot.
    pub(crate) async fn until_pushed_out(&self) {
        self.pushed_out.notified().await
    }

    fn push_out(&self) -> bool {
        let pushed = self
            .state
            .compare_exchange(PENDING, PUSHED_OUT, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if pushed {
            self.pushed_out.notify_one();
        }
        pushed
    }
}

/// The `--max-connections` slots, and the connections holding one that have not
/// authenticated yet, oldest first.
pub(crate) struct Slots {
    free: Arc<Semaphore>,
    max: usize,
    unauthenticated: Mutex<VecDeque<Weak<ConnSlot>>>,
}

impl Slots {
    /// `max` connections at once.
    pub(crate) fn new(max: usize) -> Slots {
        Slots {
            free: Arc::new(Semaphore::new(max)),
            max,
            unauthenticated: Mutex::default(),
        }
    }

    /// A slot for the client just accepted from `addr`: a free one; else the slot of the
    /// oldest connection that has not authenticated (pushed out: its address is handed to
    /// `pushed`, for the log); else, every slot being an authenticated client's, the next one
    /// freed.
    pub(crate) async fn take(
        &self,
        addr: SocketAddr,
        pushed: impl FnOnce(SocketAddr),
    ) -> Arc<ConnSlot> {
        let permit = match Arc::clone(&self.free).try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if let Some(out) = self.push_out_oldest() {
                    pushed(out);
                }
                Arc::clone(&self.free)
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed")
            }
        };
        let slot = Arc::new(ConnSlot {
            _slot: permit,
            principal: OnceLock::new(),
            addr,
            state: AtomicU8::new(PENDING),
            pushed_out: Notify::new(),
        });
        let mut queue = self
            .unauthenticated
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Authenticated and closed connections leave the queue here, so it stays under about
        // twice the slots.
        if queue.len() >= 2 * self.max {
            queue.retain(|w| {
                w.upgrade()
                    .is_some_and(|s| s.state.load(Ordering::Acquire) == PENDING)
            });
        }
        queue.push_back(Arc::downgrade(&slot));
        slot
    }

    /// Pushes out the oldest connection that has not authenticated; its address.
    fn push_out_oldest(&self) -> Option<SocketAddr> {
        let mut queue = self
            .unauthenticated
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        while let Some(weak) = queue.pop_front() {
            if let Some(slot) = weak.upgrade()
                && slot.push_out()
            {
                return Some(slot.addr);
            }
        }
        None
    }
}
