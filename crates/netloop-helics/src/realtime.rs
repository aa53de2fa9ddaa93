//! netloop as a HELICS federate in real time: the network runs on the wall
//! clock (the real-time engine, with real hosts), and the federation
//! follows it.
//!
//! The federate sets HELICS's real-time flag, so HELICS grants it time `t`
//! only when `t` seconds have passed on the wall clock since the federation
//! started executing; as every other federate may receive messages from
//! netloop, none is granted a time past netloop's, and the whole federation
//! keeps to the wall clock. This loop runs on a thread of its own, beside
//! the real-time engine, and asks for time in steps (`[helics] step`, 1 ms
//! by default). At each grant it hands the engine the federation's
//! messages (they leave their endpoint's host at the engine's now) and
//! takes what reached the endpoints, through the engine's request channel
//! ([`netloop_io::live::Request::Endpoints`]), and sends that to each
//! endpoint's federate.
//!
//! Times: both clocks follow the wall clock and start together. netloop
//! joins the federation before it creates anything, but enters executing
//! mode (which starts HELICS's clock, once every federate has entered it)
//! only when the engine has its real hosts up, and the engine starts its
//! clock as that returns: a `[[event]]` at 1.5 s and a federate's message
//! at 1.5 s happen at the same moment, however long the real hosts or the
//! other federates took to start (before, each clock started when its own
//! side was ready: a CI machine slow to start the other federates' Python
//! put HELICS's time seconds behind the engine's). What is left of the
//! offset (a few milliseconds of the engine's start) is read once both run
//! (`offset_ns` in the report: the engine's time less HELICS's). The
//! federate asks each time for the next step boundary after the wall
//! clock's now, so that HELICS's time never drifts behind the wall clock.
//! A message that reached an endpoint is handed over at the next grant `g`
//! and stamped `g`: HELICS takes no message for a time before the
//! federate's own, and `g` is when the federation could first see it. It
//! waited for that grant up to one step (plus HELICS's own wake-up); the
//! report says how long (`handoff_wait_*`). The network's own timing is
//! exact as in any real-time run: it is the real programs that see it.
//!
//! As in simulated time, netloop asks the broker at most every 100 ms of
//! wall clock whether another federate left; if one did, the run ends
//! there (`end: "federate_left"`), as its duration would have. A federate
//! killed never leaves, and HELICS, forcing grants at the real-time lag,
//! never fails netloop's requests for it: the watcher (module `watch`)
//! finds it, and the run ends as failed (`end: "failed"`), its results
//! kept, as when HELICS fails.

use std::time::{Duration, Instant};

use netloop_io::live::{RemoteHandle, Reply, Request};
use netloop_model::build::EndpointInfo;
use netloop_model::spec::HelicsSpec;

use crate::api::Helics;
use crate::cosim::{
    failed, hand_over, intake, left, lost_error, register, report_of, settings, watched,
    CosimError, CosimReport, Watched,
};
use crate::federate::Federate;
use crate::watch::Watch;

/// How far behind the wall clock HELICS may grant netloop's time when the
/// federation is slow (`HELICS_PROPERTY_TIME_RT_LAG`).
const RT_LAG: Duration = Duration::from_millis(100);

/// How the federate's start meets the engine's: the caller's side of the
/// three steps [`run_realtime`] takes before the run.
pub trait Meeting {
    /// The broker has taken the federate: the caller starts the run (its
    /// namespaces, its programs) only now, so that a broker that is not
    /// there is an error before anything is created.
    fn connected(&mut self);
    /// Waits until the engine has its real hosts up and is about to start
    /// its clock; false if the run ended before that.
    fn engine_ready(&mut self) -> bool;
    /// The federation executes (HELICS's clock runs): the engine starts
    /// its clock now. Not called if entering executing mode failed.
    fn executing(&mut self);
}

/// Runs the federate beside a real-time run reached through `remote`,
/// until the run ends (its requests fail) or `stop` says so; `meeting`
/// starts both together (see [`Meeting`] and the module docs).
pub fn run_realtime(
    helics: &Helics,
    spec: &HelicsSpec,
    endpoints: &[EndpointInfo],
    remote: &RemoteHandle,
    stop: &dyn Fn() -> bool,
    meeting: &mut dyn Meeting,
) -> Result<CosimReport, CosimError> {
    let mut s = settings(spec);
    s.realtime = Some((RT_LAG, Duration::ZERO));
    let mut fed = register(helics, &s, endpoints, || meeting.connected())?;
    let mut report = report_of(helics, spec);
    if !meeting.engine_ready() {
        report.end = "run_ended";
        fed.disconnect()?;
        return Ok(report);
    }
    fed.enter_executing(s.timeout)?;
    meeting.executing();
    let Some(clocks) = Clocks::start(remote, spec, stop) else {
        report.end = "run_ended";
        fed.disconnect()?;
        return Ok(report);
    };
    let mut run = Served {
        endpoints,
        remote,
        clocks,
        step_ns: spec.step.as_nanos() as i64,
        version: helics.version(),
        granted: 0.0,
        checked: Instant::now(),
        lags: Vec::new(),
        waits: Vec::new(),
    };
    let Watched {
        out: served,
        disconnected,
        lost,
    } = watched(helics, &mut fed, spec, |fed, watch| {
        while run.step(fed, watch, &mut report, stop)? {}
        Ok::<(), CosimError>(())
    })?;
    match served {
        Ok(()) => disconnected?,
        // HELICS failed (or a federate stopped answering): the run ends
        // where it stands, its results kept, as in simulated time.
        Err(CosimError::Helics(e)) => {
            failed(&mut report, e, lost, stop());
            let _ = remote.call(Request::Stop, Duration::from_secs(10));
        }
        Err(e) => return Err(e),
    }
    run.finish(&mut report);
    Ok(report)
}

/// HELICS's clock against the engine's: both follow the wall clock, and
/// start together but for the engine's own start (see the module docs).
struct Clocks {
    /// When HELICS's real-time clock started (as far as known).
    helics_zero: Instant,
    /// The engine's time less HELICS's, ns.
    offset: i64,
}

impl Clocks {
    /// Reads the offset once the engine's clock runs (it answers from its
    /// first step); `None` if the run ended first, or did not answer within
    /// the timeout.
    fn start(remote: &RemoteHandle, spec: &HelicsSpec, stop: &dyn Fn() -> bool) -> Option<Clocks> {
        // HELICS's real-time clock starts as the federation starts
        // executing, and the engine's as soon as it hears of that.
        // (Refined at each grant: enterExecutingMode may return after
        // HELICS started the clock, on a busy machine.)
        let helics_zero = Instant::now();
        let deadline = Instant::now() + Duration::from_nanos(spec.timeout.as_nanos());
        loop {
            match remote.call(Request::Now, Duration::from_millis(500)) {
                // The engine's clock less HELICS's, both read now.
                Ok(Reply::Now(t)) => {
                    let offset = t.as_nanos() as i64 - helics_zero.elapsed().as_nanos() as i64;
                    return Some(Clocks {
                        helics_zero,
                        offset,
                    });
                }
                // The run has ended (its end of the channel is gone):
                // asking again would only spin.
                Err(e) if !e.timed_out() => return None,
                // Not answered in time (a busy engine): again.
                _ if Instant::now() < deadline && !stop() => continue,
                _ => return None,
            }
        }
    }

    /// HELICS's time now, ns.
    fn helics_now(&self) -> i64 {
        self.helics_zero.elapsed().as_nanos() as i64
    }

    /// HELICS granted `g` seconds: its clock has reached `g`, so it started
    /// no later than `g` before now. Where that is earlier than thought,
    /// HELICS's clock is ahead of ours: ours (and the offset) move, so that
    /// no arrival is stamped with a time before its own.
    fn granted(&mut self, g: f64) {
        if let Some(start) = Instant::now().checked_sub(Duration::from_secs_f64(g.max(0.0))) {
            if start < self.helics_zero {
                self.offset -= (self.helics_zero - start).as_nanos() as i64;
                self.helics_zero = start;
            }
        }
    }
}

/// The loop's state between grants.
struct Served<'a> {
    endpoints: &'a [EndpointInfo],
    remote: &'a RemoteHandle,
    clocks: Clocks,
    step_ns: i64,
    version: String,
    /// The last time granted, s.
    granted: f64,
    /// When the broker last said who left.
    checked: Instant,
    /// How long after its HELICS time each message from the federation
    /// entered the network, ns.
    lags: Vec<u64>,
    /// How long each arrival at an endpoint waited for its hand-over, ns.
    waits: Vec<u64>,
}

impl Served<'_> {
    /// One step: a grant, the federation's messages into the network, the
    /// arrivals out to it. False when the run is over.
    fn step(
        &mut self,
        fed: &mut Federate<'_>,
        watch: &Watch,
        report: &mut CosimReport,
        stop: &dyn Fn() -> bool,
    ) -> Result<bool, CosimError> {
        if stop() {
            report.end = "interrupted";
            return Ok(false);
        }
        if let Some(l) = watch.lost() {
            return Err(lost_error(&l).into());
        }
        if left(fed, report, &mut self.checked)? {
            // The engine ends its run as if its duration were over.
            let _ = self.remote.call(Request::Stop, Duration::from_secs(10));
            return Ok(false);
        }
        // The next step's boundary after the wall clock's now: asking for
        // the granted time plus a step would let HELICS's time fall ever
        // further behind the wall clock whenever a step costs more than a
        // step (up to its real-time lag, where it forces grants).
        let next = ((self.clocks.helics_now() / self.step_ns) + 1) * self.step_ns;
        let want = (next as f64 / 1e9).max(self.granted + 1e-9);
        let t0 = Instant::now();
        let g = fed.request_time(want)?;
        report.wait_wall_ns += t0.elapsed().as_nanos() as u64;
        report.grants += 1;
        crate::cosim::warn_of_grant_limit(report, &self.version);
        if g < want - 1e-10 {
            report.early_grants += 1;
        }
        self.granted = g;
        self.clocks.granted(g);
        self.exchange(fed, report)
    }

    /// Hands the federation's messages to the engine and its arrivals to
    /// the federation. False when the run is over.
    fn exchange(
        &mut self,
        fed: &mut Federate<'_>,
        report: &mut CosimReport,
    ) -> Result<bool, CosimError> {
        let (times, sends): (Vec<f64>, Vec<(usize, Vec<u8>)>) =
            intake(fed, self.endpoints.len(), report)?
                .into_iter()
                .map(|(i, m)| (m.time, (i, m.data)))
                .unzip();
        let reply = match self
            .remote
            .call(Request::Endpoints { sends }, Duration::from_secs(10))
        {
            Ok(r) => r,
            // The run is over (its duration, Ctrl-C, an error it reports).
            Err(_) => return Ok(false),
        };
        let Reply::Endpoints {
            now,
            refused,
            arrived,
        } = reply
        else {
            if let Reply::Failed(why) = reply {
                return Err(CosimError::Topology(why));
            }
            return Ok(false);
        };
        report.refused += refused.len() as u64;
        // How long after its HELICS time each message entered the network.
        let entered = now.as_nanos() as i64 - self.clocks.offset;
        self.lags.extend(
            times
                .iter()
                .map(|&t| (entered - (t * 1e9).round() as i64).max(0) as u64),
        );
        self.waits.extend(
            arrived
                .iter()
                .filter(|(i, _)| self.endpoints[*i].federate.is_some())
                .map(|(_, m)| (now - m.at).as_nanos()),
        );
        // Stamped with the grant, or with its arrival on HELICS's clock if
        // that is later (the engine answers at its now, which may be past
        // the grant): never earlier than it arrived. HELICS takes sends
        // stamped at or after the federate's time.
        let (granted, off) = (self.granted, self.clocks.offset);
        hand_over(
            fed,
            self.endpoints,
            arrived,
            |m| granted.max((m.at.as_nanos() as i64 - off) as f64 / 1e9),
            report,
        )?;
        Ok(true)
    }

    /// The offset and the medians and maxima of the lags and waits, into
    /// `report`.
    fn finish(mut self, report: &mut CosimReport) {
        report.offset_ns = Some(self.clocks.offset);
        if !self.lags.is_empty() {
            self.lags.sort_unstable();
            report.intake_lag_p50_ns = Some(self.lags[self.lags.len() / 2]);
            report.intake_lag_max_ns = self.lags.last().copied();
        }
        if !self.waits.is_empty() {
            self.waits.sort_unstable();
            report.handoff_wait_p50_ns = Some(self.waits[self.waits.len() / 2]);
            report.handoff_wait_max_ns = self.waits.last().copied();
        }
    }
}
