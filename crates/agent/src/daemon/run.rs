//! The daemon's loop: the policy applied at every slot boundary (at once when asked to replan), the watchdog fed,
//! and between boundaries the inbox's commands carried out, one at a time, on the one thread that owns the state.

use std::time::{Duration, Instant};

use super::state::Daemon;
use crate::command::Command;
use crate::watchdog;
use lockstep_core::cosched::slot;

mod lag;
mod realtime;

/// How close to a boundary the loop stops waiting for commands and sleeps precisely until it.
const PRECISE: Duration = Duration::from_millis(2);

/// How soon the loop tries again to publish a status that a reader kept it from putting on the board.
const RETRY_PUBLISH: Duration = Duration::from_millis(1);

impl Daemon {
    /// Runs until told to stop ([`Command::Stop`]); the caller then restores every job
    /// ([`Daemon::restore_all`]). The thread runs at real-time priority.
    pub fn run(&mut self) {
        realtime::thread("slot switches");
        let mut lag = lag::Lag::default();
        let mut k = self.clock.index(slot::realtime_ns());
        self.tick(k, false);
        loop {
            let next = self.clock.start_ns(k + 1);
            // Wait for commands until close to the boundary (waking to beat for the watchdog at least every
            // BEAT_INTERVAL), then sleep the rest precisely.
            loop {
                if self.inbox.stopping() {
                    return;
                }
                if self.pulse.due() {
                    let began = Instant::now();
                    self.heartbeat();
                    lag.note("the watchdog's beat", began.elapsed());
                }
                let unpublished = self.publisher.retry();
                if self.planning.take_replan() {
                    // A replan that comes after the boundary it was waiting for is that slot's first tick: its
                    // boundary (recorded as such, with the jobs it favours).
                    let now_k = self.clock.index(slot::realtime_ns());
                    let boundary = now_k != k;
                    k = now_k;
                    let began = Instant::now();
                    self.tick(k, boundary);
                    lag.note("a replan", began.elapsed());
                    break;
                }
                let now = slot::realtime_ns();
                // The wall clock stepped back by more than a slot: start again from the slot it says it is, rather
                // than wait (perhaps an hour) for the boundary the old time was heading to.
                if now.saturating_add(self.clock.length_ns()) < next {
                    log::info!("the wall clock stepped back; slots follow it");
                    k = self.clock.index(now);
                    self.tick(k, true);
                    break;
                }
                if now >= next {
                    // How late this switch begins after the boundary the loop waited for (a stall of several slots
                    // counts whole); a replan or a clock step is no boundary waited for.
                    self.clock.late(now - next);
                    k = self.clock.index(now);
                    lag.switched(k, Duration::from_nanos(now - next), self.clock.length());
                    let began = Instant::now();
                    self.tick(k, true);
                    lag.note("the slot's switch", began.elapsed());
                    break;
                }
                let left = Duration::from_nanos(next - now);
                if left <= PRECISE {
                    slot::sleep_until(next);
                    continue;
                }
                let mut wait = left.saturating_sub(PRECISE / 2).min(watchdog::BEAT_INTERVAL);
                if unpublished {
                    // A reader held the board: try again soon rather than wait for the lock.
                    wait = wait.min(RETRY_PUBLISH);
                }
                if let Some(command) = self.inbox.next(wait) {
                    let (what, began) = (command.what(), Instant::now());
                    self.handle(command);
                    lag.note(what, began.elapsed());
                }
            }
        }
    }

    /// Carries out `command`. An answer that cannot be sent (its asker gave up) is dropped.
    fn handle(&mut self, command: Command) {
        match command {
            Command::Control { request, uid, resolved, reply } => {
                let response = self.control(request, uid, resolved);
                // Published before the answer: a status asked right after a change shows it.
                self.publish();
                let _ = reply.send(response);
            }
            Command::Slurm(msg) => self.slurm_msg(msg),
            Command::Dcs(msg) => self.dcs_msg(msg),
            Command::Stored(trouble) => {
                self.table.store_refuses(trouble.as_ref().filter(|t| t.refuses).map(|t| t.said.clone()));
                match trouble {
                    Some(t) => self.faults.report(crate::faults::Place::Store, &t.said),
                    None => self.faults.clear(&crate::faults::Place::Store),
                }
                self.publish();
            }
            Command::Stop => self.inbox.stop(),
            Command::Reload { policy, slot } => {
                if let Err(e) = self.set_policy(policy, Some(slot)) {
                    log::warn!("configuration read again, but policy {policy} cannot start: {e:#}");
                }
                self.publish();
            }
        }
    }
}
