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
//! Times: both clocks follow the wall clock, from different moments (the
//! federation starts executing before or after the engine's clock starts,
//! which waits for the real hosts); their offset is read once both run
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
    failed, hand_over, intake, join, left, lost_error, settings, watched, CosimError, CosimReport,
    Watched,
};

/// How far behind the wall clock HELICS may grant netloop's time when the
/// federation is slow (`HELICS_PROPERTY_TIME_RT_LAG`).
const RT_LAG: Duration = Duration::from_millis(100);

/// Runs the federate beside a real-time run reached through `remote`,
/// until the run ends (its requests fail) or `stop` says so. `connected`
/// is called once the broker has taken the federate: the caller starts the
/// run (its namespaces, its programs) only then, so that a broker that is
/// not there is an error before anything is created.
pub fn run_realtime(
    helics: &Helics,
    spec: &HelicsSpec,
    endpoints: &[EndpointInfo],
    remote: &RemoteHandle,
    stop: &dyn Fn() -> bool,
    connected: impl FnOnce(),
) -> Result<CosimReport, CosimError> {
    let mut s = settings(spec);
    s.realtime = Some((RT_LAG, Duration::ZERO));
    let (mut fed, mut report) = join(helics, &s, spec, endpoints, connected)?;
    // HELICS's real-time clock starts as the federation starts executing.
    // (Refined at each grant below: enterExecutingMode may return well after
    // HELICS started the clock, on a machine busy setting up the run.)
    let mut helics_zero = Instant::now();
    let helics_now = |zero: Instant| zero.elapsed().as_nanos() as i64;
    // The engine may still be setting up the real hosts: it answers once
    // its clock runs.
    let deadline = Instant::now() + Duration::from_nanos(spec.timeout.as_nanos());
    let mut offset = loop {
        match remote.call(Request::Now, Duration::from_millis(500)) {
            // The engine's clock less HELICS's, both read now.
            Ok(Reply::Now(t)) => break t.as_nanos() as i64 - helics_now(helics_zero),
            _ if Instant::now() < deadline && !stop() => continue,
            _ => {
                report.end = "run_ended";
                fed.disconnect()?;
                return Ok(report);
            }
        }
    };
    let step_ns = spec.step.as_nanos() as i64;
    let version = helics.version();
    let mut granted = 0.0;
    let mut waits: Vec<u64> = Vec::new();
    let mut lags: Vec<u64> = Vec::new();
    let mut checked = Instant::now();
    let Watched {
        out: served,
        disconnected,
        lost,
    } = watched(helics, &mut fed, spec, |fed, watch| {
        loop {
            if stop() {
                report.end = "interrupted";
                break;
            }
            if let Some(l) = watch.lost() {
                return Err(lost_error(&l).into());
            }
            if left(fed, &mut report, &mut checked)? {
                // The engine ends its run as if its duration were over.
                let _ = remote.call(Request::Stop, Duration::from_secs(10));
                break;
            }
            // The next step's boundary after the wall clock's now: asking for
            // the granted time plus a step would let HELICS's time fall ever
            // further behind the wall clock whenever a step costs more than a
            // step (up to its real-time lag, where it forces grants).
            let next = ((helics_now(helics_zero) / step_ns) + 1) * step_ns;
            let want = (next as f64 / 1e9).max(granted + 1e-9);
            let t0 = Instant::now();
            let g = fed.request_time(want)?;
            report.wait_wall_ns += t0.elapsed().as_nanos() as u64;
            report.grants += 1;
            crate::cosim::warn_of_grant_limit(&report, &version);
            if g < want - 1e-10 {
                report.early_grants += 1;
            }
            granted = g;
            // HELICS grants g once its clock has reached g: its clock started
            // no later than g before now. Where that is earlier than thought,
            // HELICS's clock is ahead of ours: move ours (and the offset) so
            // that no arrival is stamped with a time before its own.
            if let Some(start) = Instant::now().checked_sub(Duration::from_secs_f64(g.max(0.0))) {
                if start < helics_zero {
                    offset -= (helics_zero - start).as_nanos() as i64;
                    helics_zero = start;
                }
            }
            let (times, sends): (Vec<f64>, Vec<(usize, Vec<u8>)>) =
                intake(fed, endpoints.len(), &mut report)?
                    .into_iter()
                    .map(|(i, m)| (m.time, (i, m.data)))
                    .unzip();
            let reply = match remote.call(Request::Endpoints { sends }, Duration::from_secs(10)) {
                Ok(r) => r,
                // The run is over (its duration, Ctrl-C, an error it reports).
                Err(_) => break,
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
                break;
            };
            report.refused += refused.len() as u64;
            // How long after its HELICS time each message entered the network.
            let entered = now.as_nanos() as i64 - offset;
            lags.extend(
                times
                    .iter()
                    .map(|&t| (entered - (t * 1e9).round() as i64).max(0) as u64),
            );
            waits.extend(
                arrived
                    .iter()
                    .filter(|(i, _)| endpoints[*i].federate.is_some())
                    .map(|(_, m)| (now - m.at).as_nanos()),
            );
            // Stamped with the grant, or with its arrival on HELICS's clock if that
            // is later (the engine answers at its now, which may be past the
            // grant): never earlier than it arrived. HELICS takes sends stamped
            // at or after the federate's time.
            let off = offset;
            hand_over(
                fed,
                endpoints,
                arrived,
                |m| granted.max((m.at.as_nanos() as i64 - off) as f64 / 1e9),
                &mut report,
            )?;
        }
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
    report.offset_ns = Some(offset);
    if !lags.is_empty() {
        lags.sort_unstable();
        report.intake_lag_p50_ns = Some(lags[lags.len() / 2]);
        report.intake_lag_max_ns = lags.last().copied();
    }
    if !waits.is_empty() {
        waits.sort_unstable();
        report.handoff_wait_p50_ns = Some(waits[waits.len() / 2]);
        report.handoff_wait_max_ns = waits.last().copied();
    }
    Ok(report)
}
