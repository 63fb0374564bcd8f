//! How a thread sends the daemon messages of one kind and waits for their answers, without knowing the daemon's
//! other messages: an [`Outlet`] of a feature's message type (Slurm's, `dcs`'s) wraps
//! each message into the daemon's command (`Mailbox::map`), so that a feature's threads depend on their feature
//! alone.

use std::sync::mpsc::{self, Sender};
use std::sync::Arc;

/// Where messages of type `M` go; cheap to clone, one per thread that sends.
pub struct Outlet<M> {
    send: Arc<dyn Fn(M) -> bool + Send + Sync>,
}

impl<M> Clone for Outlet<M> {
    fn clone(&self) -> Self {
        Self { send: Arc::clone(&self.send) }
    }
}

impl<M: 'static> Outlet<M> {
    /// An outlet that hands each message to `send`, which says whether it was taken (false once the receiver is
    /// gone).
    pub fn new(send: impl Fn(M) -> bool + Send + Sync + 'static) -> Self {
        Self { send: Arc::new(send) }
    }

    /// An outlet of messages of type `N`, each wrapped by `wrap` into one of this outlet's.
    pub fn map<N: 'static>(&self, wrap: fn(N) -> M) -> Outlet<N> {
        let inner = self.clone();
        Outlet::new(move |n| (inner.send)(wrap(n)))
    }

    /// Sends the message `make` builds around a reply channel and waits for its answer; `None` when the receiver
    /// has ended (the message, or its reply channel, dropped unanswered).
    pub fn ask<T>(&self, make: impl FnOnce(Sender<T>) -> M) -> Option<T> {
        let (reply, answer) = mpsc::channel();
        if !(self.send)(make(reply)) {
            return None;
        }
        answer.recv().ok()
    }

    /// Sends `message`, which has no answer (nothing happens when the receiver has ended).
    pub fn tell(&self, message: M) {
        (self.send)(message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_outlet_wraps_its_messages_and_answers_come_back_until_the_receiver_ends() {
        let (tx, rx) = mpsc::channel::<(u32, Sender<u32>)>();
        let outlet = Outlet::new(move |m| tx.send(m).is_ok());
        let doubled: Outlet<(u8, Sender<u32>)> = outlet.map(|(n, reply)| (u32::from(n), reply));
        let server = std::thread::spawn(move || {
            for (n, reply) in rx.iter().take(2) {
                let _ = reply.send(n * 2);
            }
        });
        assert_eq!(doubled.ask(|reply| (21, reply)), Some(42));
        assert_eq!(outlet.ask(|reply| (5, reply)), Some(10));
        server.join().unwrap();
        assert_eq!(doubled.ask(|reply| (1, reply)), None);
    }
}
