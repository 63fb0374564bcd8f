//! State that several threads share: a value behind a mutex, with the condition variable its owner sleeps on
//! between changes (the sampler).

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

/// `T` under a lock, and the condition that wakes whoever waits for it to change.
#[derive(Debug)]
pub struct Guarded<T> {
    state: Mutex<T>,
    wake: Condvar,
}

impl<T> Guarded<T> {
    /// `value`, guarded.
    pub fn new(value: T) -> Self {
        Self { state: Mutex::new(value), wake: Condvar::new() }
    }

    /// Locks the state. A thread that panicked while holding it leaves a state that is still whole (every
    /// change is a method that completes or returns an error), so the poison is ignored.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Wakes the threads waiting for a change.
    pub fn notify(&self) {
        self.wake.notify_all();
    }

    /// Releases `guard` until woken or `timeout` has passed, and locks again.
    pub fn wait<'a>(&self, guard: MutexGuard<'a, T>, timeout: Duration) -> MutexGuard<'a, T> {
        self.wake.wait_timeout(guard, timeout).unwrap_or_else(std::sync::PoisonError::into_inner).0
    }
}
