//! An engine behind a lock: the core engines are `Send`, not `Sync`, and a Python object may be
//! reached from several threads. `None` once closed, so use after `close()` is a `ClosedError`.

use std::sync::Mutex;

use pyo3::PyResult;

use crate::errors;

/// An engine, or nothing once closed.
pub struct Slot<T>(Mutex<Option<T>>, &'static str);

impl<T> Slot<T> {
    /// Holds `engine`; `what` names it in the `ClosedError`.
    pub fn new(engine: T, what: &'static str) -> Self {
        Slot(Mutex::new(Some(engine)), what)
    }

    /// Runs `f` on the engine, or raises `ClosedError`.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> PyResult<R> {
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_mut() {
            Some(engine) => Ok(f(engine)),
            None => Err(errors::closed(self.1)),
        }
    }

    /// Takes the engine out (the slot is closed afterwards).
    pub fn take(&self) -> Option<T> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Drops the engine.
    pub fn close(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    /// Whether `close` was called.
    pub fn is_closed(&self) -> bool {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }
}
