//! Noticing a federate that is gone without leaving the federation: its
//! process killed, its machine or its connection lost.
//!
//! Why netloop looks for itself: HELICS's broker finds a dead core by
//! pinging it, but it pings only after a tick (5 s) in which nothing at
//! all reached it. A federation in which anyone still talks never pings and
//! never notices: in real time netloop asks for time every step and HELICS
//! grants it at the real-time lag whatever the others do, so a run would
//! go on to its duration handing messages to nobody; in simulated time
//! netloop may be granted time by the federates still there and run on
//! (seen: 90 s and more after a federate was killed), or wait for a grant
//! that never comes.
//!
//! So a thread asks, every [`PROBE_EVERY`], the broker which federates are
//! in the federation, and each one's core what queries it takes
//! (`queries`): the broker passes that on to the federate's core, which
//! answers at once from its own thread whatever its federate is doing; so
//! only a core that is gone (or cut off) leaves it unanswered. A second
//! thread judges: a probe unanswered for longer than the `[helics]
//! timeout` (the time the other federates are given everywhere) means its
//! federate is lost (`broker` if the broker did not answer), and it says
//! so ([`Watch::lost`]). The federate's loop sees that at its next step and
//! ends the run as failed, its results kept. A loop blocked in HELICS
//! (waiting for a grant the lost federate holds up) is given [`GRACE`] to
//! notice; then HELICS is aborted in this process, which makes the blocked
//! call return with an error.
//!
//! Not HELICS's own query timeout: it is checked on the core's heartbeat
//! tick, which a busy core (netloop's, asking for time every step) never
//! takes, so a query to a dead core waits for ever (seen with 3.6.1).
//!
//! Only a federate that stopped answering counts: one that left (state
//! `disconnected`) is the departure check's (`cosim::left`), and one whose
//! query fails otherwise (it left between the two queries) is not judged.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::api::Helics;
use crate::federate::CoreHandle;

/// How often the federation is probed.
pub(crate) const PROBE_EVERY: Duration = Duration::from_secs(1);

/// How long the federate's loop has to notice a lost federate before HELICS
/// is aborted under it.
pub(crate) const GRACE: Duration = Duration::from_secs(2);

/// A federate (or the broker) that stopped answering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Lost {
    /// The federate's name, or `broker` for the broker itself.
    pub who: String,
    /// What to tell the user.
    pub why: String,
}

/// The watcher shared by the federate's loop and the two watching threads.
pub(crate) struct Watch {
    me: String,
    limit: Duration,
    stop: AtomicBool,
    /// The probe under way: whom it asks, since when.
    pending: Mutex<Option<(String, Instant)>>,
    lost: Mutex<Option<Lost>>,
}

impl Watch {
    /// A watcher for the federate named `me` (never probed), judging a
    /// probe unanswered after `limit` lost.
    pub(crate) fn new(me: &str, limit: Duration) -> Watch {
        Watch {
            me: me.to_string(),
            limit,
            stop: AtomicBool::new(false),
            pending: Mutex::new(None),
            lost: Mutex::new(None),
        }
    }

    /// The federate that stopped answering, once one has.
    pub(crate) fn lost(&self) -> Option<Lost> {
        self.lost.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Ends the watching threads (the prober once the probe under way
    /// returns: disconnecting the federate ends it).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Sleeps up to `d`, returning early (true) when stopped.
    fn sleep(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while Instant::now() < until {
            if self.stopped() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20).min(until - Instant::now()));
        }
        self.stopped()
    }

    /// Probes the federation through `core` until stopped. Runs on a
    /// thread of its own.
    pub(crate) fn probe(&self, core: CoreHandle<'_>) {
        while !self.sleep(PROBE_EVERY) {
            let Ok(state) = self.ask(&core, "broker", "root", "current_state") else {
                continue;
            };
            let others: Vec<String> = federates(&state)
                .into_iter()
                .filter(|(name, s)| *name != self.me && !gone(s))
                .map(|(name, _)| name)
                .collect();
            for name in others {
                if self.stopped() {
                    return;
                }
                let _ = self.ask(&core, &name, &name, "queries");
            }
        }
    }

    /// One query, marked as under way while it is.
    fn ask(
        &self,
        core: &CoreHandle<'_>,
        who: &str,
        target: &str,
        query: &str,
    ) -> Result<String, crate::federate::HelicsError> {
        *self.pending.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((who.to_string(), Instant::now()));
        let answer = core.query(target, query);
        *self.pending.lock().unwrap_or_else(|e| e.into_inner()) = None;
        answer
    }

    /// Judges the probes until stopped or one goes unanswered past the
    /// limit; then says who is lost, and aborts HELICS in this process if
    /// the federate's loop has not stopped within [`GRACE`]. Runs on a
    /// thread of its own.
    pub(crate) fn judge(&self, helics: &Helics) {
        self.judge_with(|why| helics.abort(why));
    }

    /// [`Watch::judge`], aborting with `abort`.
    fn judge_with(&self, abort: impl Fn(&str)) {
        while !self.sleep(Duration::from_millis(100)) {
            let late = self
                .pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
                .filter(|(_, since)| since.elapsed() > self.limit)
                .map(|(who, _)| who.clone());
            let Some(who) = late else {
                continue;
            };
            let lost = lost(who, self.limit);
            let why = lost.why.clone();
            *self.lost.lock().unwrap_or_else(|e| e.into_inner()) = Some(lost);
            if !self.sleep(GRACE) {
                abort(&why);
            }
            return;
        }
    }
}

/// What to say of `who` (a federate's name, or `broker`) when it left a
/// probe unanswered for `limit`.
fn lost(who: String, limit: Duration) -> Lost {
    let secs = limit.as_secs_f64();
    let why = if who == "broker" {
        format!(
            "the broker stopped answering (no answer to a query within {secs} s, the \
             [helics] timeout): it was killed, or the connection to it is lost"
        )
    } else {
        format!(
            "federate '{who}' stopped answering (its core gave no answer to a query within \
             {secs} s, the [helics] timeout): it was killed, or the connection to it is lost"
        )
    };
    Lost { who, why }
}

/// Whether a state of HELICS's `current_state` is one of a federate that
/// has left (or failed, and said so).
pub(crate) fn gone(state: &str) -> bool {
    matches!(state, "disconnected" | "error")
}

/// The federates of a broker's `current_state` answer: (name, state), in
/// its order; none if the answer is not that.
pub(crate) fn federates(current_state: &str) -> Vec<(String, String)> {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(current_state) else {
        return Vec::new();
    };
    v["federates"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| {
            Some((
                f["attributes"]["name"].as_str()?.to_string(),
                f["state"].as_str().unwrap_or("").to_string(),
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_unanswered_past_the_limit_is_a_lost_federate() {
        let w = Watch::new("netloop", Duration::from_millis(300));
        *w.pending.lock().unwrap() = Some(("returnee".into(), Instant::now()));
        let h = std::thread::scope(|s| {
            let judge = s.spawn(|| {
                // No HELICS here: the loop stops within the grace, so the
                // judge never aborts (a `Helics` is not needed to judge).
                w.judge_with(|_| panic!("aborted although the loop stopped"))
            });
            while w.lost().is_none() {
                std::thread::sleep(Duration::from_millis(10));
            }
            w.stop();
            judge.join()
        });
        assert!(h.is_ok());
        let l = w.lost().unwrap();
        assert_eq!(l.who, "returnee");
        assert!(
            l.why.contains("federate 'returnee' stopped answering"),
            "{}",
            l.why
        );
        // Answered in time: nobody is lost.
        let w = Watch::new("netloop", Duration::from_millis(300));
        std::thread::scope(|s| {
            s.spawn(|| w.judge_with(|_| panic!("aborted")));
            for _ in 0..10 {
                *w.pending.lock().unwrap() = Some(("returnee".into(), Instant::now()));
                std::thread::sleep(Duration::from_millis(50));
                *w.pending.lock().unwrap() = None;
            }
            w.stop();
        });
        assert_eq!(w.lost(), None);
    }

    #[test]
    fn the_federates_of_a_current_state_answer() {
        let answer = r#"{"attributes":{"id":1,"name":"b","parent":0},"cores":[],
            "federates":[
              {"attributes":{"id":131072,"name":"rti_returnee","parent":1879048192},"state":"connected"},
              {"attributes":{"id":131073,"name":"rti_sender","parent":1879048193},"state":"disconnected"}],
            "state":"operating","status":true}"#;
        assert_eq!(
            federates(answer),
            vec![
                ("rti_returnee".to_string(), "connected".to_string()),
                ("rti_sender".to_string(), "disconnected".to_string())
            ]
        );
        assert!(federates("#wait").is_empty());
        assert!(gone("disconnected") && gone("error") && !gone("connected"));
    }
}
