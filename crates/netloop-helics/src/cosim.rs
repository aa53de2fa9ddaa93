//! Runs a simulation as a HELICS federate, in simulated time.
//!
//! The loop follows helics-ns3's: netloop asks HELICS for a time and runs
//! its events up to the time granted, never past it. The time it asks for is
//! as far as no message can reach an endpoint before it ([`Horizon`]): its
//! next event's time plus the least delay into an endpoint's host, or a
//! known arrival on such a link if sooner (or the end of the run). A grant comes earlier than asked
//! when another federate sends a message for an earlier time; that message
//! then enters the simulated network at the granted time, from the endpoint
//! it was sent to. What reaches an endpoint is handed to its `federate` with
//! the simulated time it arrived, which is the granted time: netloop only
//! runs events at times it was granted. So the federation sees each
//! message's network delay, loss and reordering, and the run is as
//! deterministic as the federation's own order of messages at one time.
//!
//! Within one granted time the order is fixed: the events due at that time
//! run, then the federation's messages (endpoint by endpoint, each in
//! HELICS's order) enter the network, then the events they cause at that
//! same time run, then arrivals are handed over endpoint by endpoint in
//! their order of arrival.

use std::time::{Duration, Instant};

use netloop_core::SimTime;
use netloop_model::apps::Message;
use netloop_model::build::EndpointInfo;
use netloop_model::spec::{HelicsSpec, Transport};
use netloop_model::Simulation;
use serde::Serialize;

use crate::api::{Helics, TIME_MAXTIME};
use crate::federate::{Federate, HelicsError, Received, Settings};
use crate::watch::{federates, gone, Lost, Watch};

/// What the federate did, for the results (`cosim`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct CosimReport {
    /// The federate's name.
    pub federate: String,
    /// The HELICS library it ran with and its version.
    pub helics: String,
    /// Times granted by HELICS.
    pub grants: u64,
    /// In simulated time: the least delay of the links into the endpoints'
    /// hosts, how far past its next event netloop may ask to advance
    /// (see `docs/cosimulation.md`), ns.
    pub lookahead_ns: u64,
    /// Grants earlier than asked for (a message came for an earlier time).
    pub early_grants: u64,
    /// Wall-clock time spent waiting for grants (not deterministic).
    pub wait_wall_ns: u64,
    /// Times netloop asked the broker whether a federate left (at most
    /// every 100 ms of wall clock), and the wall-clock time the answers
    /// took, ns (not deterministic).
    pub departure_checks: u64,
    /// See `departure_checks`.
    pub departure_check_wall_ns: u64,
    /// Messages other federates sent to netloop's endpoints.
    pub from_federation: u64,
    /// Of those, sends the endpoint refused (its counters say why).
    pub refused: u64,
    /// Messages that reached an endpoint and were handed to its federate.
    pub to_federation: u64,
    /// Messages that reached an endpoint without a `federate`: read and
    /// discarded (counted, as there is nobody to hand them to).
    pub without_federate: u64,
    /// Why the run ended: `"duration"`, `"interrupted"`, `"federate_left"`
    /// (another federate left the federation before netloop's duration:
    /// `departed` names it), `"failed"` (HELICS failed mid-run, or a
    /// federate stopped answering: `failure` says how), or in real time `"run_ended"` (the run ended before the
    /// federation started).
    pub end: &'static str,
    /// The federates that had left the federation when netloop ended its
    /// run for it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub departed: Vec<String>,
    /// What HELICS said when it failed mid-run, or which federate stopped
    /// answering.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The federate (or `broker`) that stopped answering queries mid-run
    /// (killed, or its connection lost), which failed the run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unresponsive: Vec<String>,
    /// In real time: the engine's clock less HELICS's, ns (both on the wall
    /// clock and started together, but for the engine's own start, a few
    /// ms: negative when the federation started first); absent in
    /// simulated time, where they are the same.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset_ns: Option<i64>,
    /// In real time: how long messages that reached an endpoint waited for
    /// the grant that handed them to the federation, median and largest, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff_wait_p50_ns: Option<u64>,
    /// See `handoff_wait_p50_ns`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub handoff_wait_max_ns: Option<u64>,
    /// In real time: how long after its HELICS time a message from the
    /// federation entered the network (on the engine's clock), median and
    /// largest, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intake_lag_p50_ns: Option<u64>,
    /// See `intake_lag_p50_ns`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub intake_lag_max_ns: Option<u64>,
}

/// A failed co-simulation run.
#[derive(Debug, thiserror::Error)]
pub enum CosimError {
    /// HELICS refused a call.
    #[error(transparent)]
    Helics(#[from] HelicsError),
    /// The topology does not fit a federation.
    #[error("{0}")]
    Topology(String),
}

/// Simulated time as HELICS's seconds.
pub fn seconds(t: SimTime) -> f64 {
    t.as_nanos() as f64 / 1e9
}

/// HELICS's seconds as simulated time (HELICS keeps nanoseconds inside:
/// rounding recovers them).
pub fn sim_time(s: f64) -> SimTime {
    if s >= TIME_MAXTIME || s >= u64::MAX as f64 / 1e9 {
        SimTime::MAX
    } else if s <= 0.0 {
        SimTime::ZERO
    } else {
        SimTime::from_nanos((s * 1e9).round() as u64)
    }
}

/// The settings of `spec` as a federate's.
pub fn settings(spec: &HelicsSpec) -> Settings {
    Settings {
        name: spec.name.clone(),
        core: spec.core.clone(),
        broker: spec.broker.clone(),
        init: spec.init.clone(),
        timeout: Duration::from_nanos(spec.timeout.as_nanos()),
        realtime: None,
    }
}

/// Runs `sim` until its duration as federate `spec` of a HELICS
/// federation, its endpoints registered under their names. `stop` is asked
/// between grants (Ctrl-C).
pub fn run(
    sim: &mut Simulation,
    helics: &Helics,
    spec: &HelicsSpec,
    stop: &dyn Fn() -> bool,
) -> Result<CosimReport, CosimError> {
    let (mut fed, mut report) = join(helics, &settings(spec), spec, &sim.endpoints, || {})?;
    let horizon = Horizon::of(sim);
    report.lookahead_ns = horizon.lookahead.as_nanos();
    let Watched {
        out: advanced,
        disconnected,
        lost,
    } = watched(helics, &mut fed, spec, |fed, watch| {
        advance(sim, fed, &horizon, &mut report, stop, watch)
    })?;
    // From here on a failure of HELICS ends the run where it stands, its
    // results kept (a federate killed mid-run, a broker gone).
    if let Err(e) = advanced {
        failed(&mut report, e, lost, stop());
        return Ok(report);
    }
    disconnected?;
    Ok(report)
}

/// Marks `report` as ended by HELICS's failure `e` (or by the watcher's
/// finding a federate `lost`, which is why HELICS failed if it did), or as
/// interrupted if the run was (Ctrl-C aborts HELICS).
pub(crate) fn failed(
    report: &mut CosimReport,
    e: HelicsError,
    lost: Option<Lost>,
    interrupted: bool,
) {
    report.end = if interrupted { "interrupted" } else { "failed" };
    report.failure = Some(match lost {
        Some(l) => {
            report.unresponsive.push(l.who);
            l.why
        }
        None => e.to_string(),
    });
}

/// Runs `body` (the federate's loop) while a thread watches the federation
/// for a federate that is gone without leaving ([`crate::watch`]), then
/// disconnects the federate (which also ends a probe under way); returns
/// what `body` returned, how disconnecting went, and the federate the
/// watcher found lost, if any.
pub(crate) fn watched<'h, T>(
    helics: &'h Helics,
    fed: &mut Federate<'h>,
    spec: &HelicsSpec,
    body: impl FnOnce(&mut Federate<'h>, &Watch) -> T,
) -> Result<Watched<T>, HelicsError> {
    let core = fed.core()?;
    let watch = Watch::new(&spec.name, Duration::from_nanos(spec.timeout.as_nanos()));
    let (out, disconnected) = std::thread::scope(|scope| {
        let w = &watch;
        scope.spawn(move || w.probe(core));
        scope.spawn(move || w.judge(helics));
        let out = body(fed, &watch);
        watch.stop();
        (out, fed.disconnect())
    });
    Ok(Watched {
        out,
        disconnected,
        lost: watch.lost(),
    })
}

/// What [`watched`] returns.
pub(crate) struct Watched<T> {
    /// What the loop returned.
    pub out: T,
    /// How disconnecting the federate went.
    pub disconnected: Result<(), HelicsError>,
    /// The federate the watcher found lost, if any.
    pub lost: Option<Lost>,
}

/// The error a federate's loop ends with when the watcher found `lost`.
pub(crate) fn lost_error(lost: &Lost) -> HelicsError {
    HelicsError {
        what: "watching the federation".into(),
        code: -1,
        message: lost.why.clone(),
    }
}

/// Grants after which netloop warns that HELICS up to 3.6 may stop
/// granting: a global-time broker's time rounds are counted in a field of
/// 16 bits, three a round, and it stops at about 21 800
/// (GMLC-TDC/HELICS#2795, fixed after 3.6.1).
pub(crate) const GRANT_WARNING: u64 = 20_000;

/// Whether HELICS `version` (as `helicsGetVersion` says it, "3.6.1 (…)")
/// has the global-time broker that stops granting (before 3.7).
pub(crate) fn stops_granting(version: &str) -> bool {
    let mut parts = version
        .split(|c: char| !c.is_ascii_digit())
        .filter(|p| !p.is_empty())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    match (parts.next(), parts.next()) {
        (Some(major), Some(minor)) => (major, minor) < (3, 7),
        _ => false,
    }
}

/// Says once, at [`GRANT_WARNING`] grants, why the federation may stop.
pub(crate) fn warn_of_grant_limit(report: &CosimReport, version: &str) {
    if report.grants == GRANT_WARNING && stops_granting(version) {
        eprintln!(
            "warning: netloop has been granted time {GRANT_WARNING} times; a global-time broker \
             (--globaltime) of HELICS {version} stops granting at about 21 800 (GMLC-TDC/HELICS#2795, \
             fixed after 3.6.1): if the federation stops here, that is why \
             (docs/cosimulation.md, \"Setting up HELICS\")"
        );
    }
}

/// How often (wall clock) netloop asks the broker whether a federate left.
const DEPARTURES_EVERY: Duration = Duration::from_millis(100);

/// The loop of [`run`]: grants, intake, events, hand-over, until the end of
/// the run, Ctrl-C, or another federate leaving.
fn advance(
    sim: &mut Simulation,
    fed: &mut Federate<'_>,
    horizon: &Horizon,
    report: &mut CosimReport,
    stop: &dyn Fn() -> bool,
    watch: &Watch,
) -> Result<(), HelicsError> {
    let end = SimTime::ZERO + sim.net.spec().run.duration;
    let mut now = SimTime::ZERO;
    let mut checked = Instant::now();
    let version = fed.helics_version();
    loop {
        // The events due by the granted time first: the queue's clock then
        // stands at it, where the federation's messages enter.
        sim.run_until(now, u64::MAX, |_, _| true);
        for (i, m) in intake(fed, sim.endpoints.len(), report)? {
            let e = &sim.endpoints[i];
            if sim
                .net
                .endpoint_send(&mut sim.queue, e.node, e.app, None, &m.data)
                .is_err()
            {
                report.refused += 1;
            }
        }
        sim.run_until(now, u64::MAX, |_, _| true);
        let arrived = sim.net.take_messages(&mut sim.queue, &sim.endpoints);
        hand_over(fed, &sim.endpoints, arrived, |m| seconds(m.at), report)?;
        if now >= end {
            break;
        }
        if stop() {
            report.end = "interrupted";
            break;
        }
        if let Some(l) = watch.lost() {
            return Err(lost_error(&l));
        }
        if left(fed, report, &mut checked)? {
            break;
        }
        let next = horizon.next(sim, now, end);
        let t0 = Instant::now();
        let granted = fed.request_time(seconds(next))?;
        report.wait_wall_ns += t0.elapsed().as_nanos() as u64;
        report.grants += 1;
        warn_of_grant_limit(report, &version);
        let g = sim_time(granted).clamp(now, end);
        if g < next {
            report.early_grants += 1;
        }
        now = g;
    }
    Ok(())
}

/// Whether another federate has left the federation, asking the broker at
/// most every [`DEPARTURES_EVERY`] since `checked` (the last answer). If
/// one has, `report` says so (`end` and `departed`) and the run ends.
pub(crate) fn left(
    fed: &mut Federate<'_>,
    report: &mut CosimReport,
    checked: &mut Instant,
) -> Result<bool, HelicsError> {
    if checked.elapsed() < DEPARTURES_EVERY {
        return Ok(false);
    }
    let t0 = Instant::now();
    let gone = departed(fed, &report.federate)?;
    report.departure_checks += 1;
    report.departure_check_wall_ns += t0.elapsed().as_nanos() as u64;
    // From the answer: a slow broker is not asked more often.
    *checked = Instant::now();
    if gone.is_empty() {
        return Ok(false);
    }
    report.end = "federate_left";
    report.departed = gone;
    Ok(true)
}

/// The federates other than `me` that have left the federation (or failed),
/// by the broker's `current_state`.
///
/// Why ask: a federate that leaves releases netloop's time (HELICS then
/// grants whatever netloop asks), so nothing else tells netloop that the
/// federation it moves messages for is gone; it would run on to its
/// duration, handing messages to nobody.
fn departed(fed: &mut Federate<'_>, me: &str) -> Result<Vec<String>, HelicsError> {
    let answer = fed.query("root", "current_state")?;
    Ok(federates(&answer)
        .into_iter()
        .filter(|(name, state)| name != me && gone(state))
        .map(|(name, _)| name)
        .collect())
}

/// How far netloop may ask HELICS to advance: as far as no message can
/// reach an endpoint before the time asked for. Asking for the next event's
/// time every time would be exact too, but costs a round trip through the
/// broker per event (5 000 a simulated second beside 40 small UDP flows);
/// only an arrival at an endpoint's host must fall on a granted time.
///
/// Such an arrival is either on a wire into an endpoint's host already
/// (its time known: the wire's head), or is not on it yet, and then comes
/// after the next event by at least the least delay of those wires (the
/// lookahead). The federation's messages enter at granted times. A
/// scheduled link change may shorten a delay, so none is passed over.
struct Horizon {
    /// Link directions into hosts with endpoints, once each: link, side,
    /// whether it keeps a datagram's fragments in order (see
    /// [`first_completing`]), and the UDP ports of the host's UDP
    /// endpoints.
    into: Vec<(usize, usize, bool, Vec<u16>)>,
    /// Their least delay.
    lookahead: netloop_core::SimDuration,
    /// Times of the topology's scheduled link changes, ascending.
    changes: Vec<SimTime>,
}

impl Horizon {
    fn of(sim: &Simulation) -> Horizon {
        let hosts: Vec<usize> = sim.endpoints.iter().map(|e| e.node).collect();
        let mut into = Vec::new();
        let mut lookahead = None::<netloop_core::SimDuration>;
        for (li, l) in sim.net.links().iter().enumerate() {
            for side in 0..2 {
                let d = &l.dirs[side];
                if hosts.contains(&d.to.0) {
                    // No duplicates, no overtaking, nothing changed at run
                    // time: fragments arrive once and in the order sent.
                    let spec = d.channel.spec();
                    let ordered = spec.duplicate == 0.0
                        && spec.jitter.as_ref().is_none_or(|j| !j.reorder)
                        && !sim.net.spec().events.iter().any(|e| e.link == l.name);
                    let ports = sim
                        .endpoints
                        .iter()
                        .filter(|e| e.node == d.to.0 && e.protocol == Transport::Udp)
                        .map(|e| e.addr.port())
                        .collect();
                    into.push((li, side, ordered, ports));
                    let least = d.channel.spec().least_delay();
                    lookahead = Some(lookahead.map_or(least, |x| x.min(least)));
                }
            }
        }
        let mut changes: Vec<SimTime> = sim
            .net
            .spec()
            .events
            .iter()
            .map(|e| SimTime::ZERO + e.at)
            .collect();
        changes.sort_unstable();
        Horizon {
            into,
            lookahead: lookahead.unwrap_or_default(),
            changes,
        }
    }

    /// The time to ask HELICS for, at `now`.
    fn next(&self, sim: &Simulation, now: SimTime, end: SimTime) -> SimTime {
        let next = sim.queue.peek_time().unwrap_or(end).min(end);
        let mut t = end.min(next + self.lookahead);
        for (li, side, ordered, ports) in &self.into {
            let wire = &sim.net.links()[*li].dirs[*side].wire;
            let first = if *ordered {
                first_completing(wire, ports)
            } else {
                // Frames may overtake each other: the first to arrive of
                // those that may complete a message.
                wire.frames()
                    .filter(|f| may_complete(&f.frame, ports))
                    .map(|f| f.at)
                    .min()
            };
            if let Some(a) = first {
                t = t.min(a);
            }
        }
        if let Some(&c) = self.changes.iter().find(|&&c| c > now) {
            t = t.min(c);
        }
        t.max(next.min(end))
    }
}

/// When the first frame on `wire` arrives that may complete a message, on
/// a direction that delivers each frame once and in order, into a host
/// whose UDP endpoints have `ports`: the first frame that
/// [`may_complete`] one, unless it is an IPv4 fragment followed on the
/// wire by a fragment of the same datagram further on in it. That later
/// fragment's bytes cannot be there before it arrives (no duplicates), so
/// the datagram is whole at its arrival at the earliest. Without this a
/// message of n fragments cost n grants each way: a 64 KB message across a
/// LAN took some 90 round trips through the broker.
fn first_completing(wire: &netloop_model::wire::Wire, ports: &[u16]) -> Option<SimTime> {
    let mut frames = wire.frames().peekable();
    while let Some(f) = frames.next() {
        if !may_complete(&f.frame, ports) {
            continue;
        }
        if let (Some((k, off)), Some(next)) = (fragment_of(&f.frame), frames.peek()) {
            if matches!(fragment_of(&next.frame), Some((k2, off2)) if k2 == k && off2 > off) {
                continue;
            }
        }
        return Some(f.at);
    }
    None
}

/// Whether `frame`, arriving at a host whose UDP endpoints have `ports`,
/// may complete a message there: a UDP datagram (or fragment of one) to
/// one of those ports, a TCP segment that carries data, or anything this
/// does not read (tagged, GSO, a fragment past the first). Not: ARP, ICMP,
/// a TCP segment without data (an ACK never completes a message), UDP to
/// another port (background traffic). What such a frame sets off at the
/// host reaches another host no sooner than the lookahead after it, which
/// the next event's time already bounds; so netloop need not be granted
/// its arrival. (Asking for every arrival cost a grant per ACK, and HELICS
/// 3.6.1 stops granting after about 21 800: GMLC-TDC/HELICS#2795.)
fn may_complete(frame: &netloop_core::Frame, ports: &[u16]) -> bool {
    if frame.is_super() || frame.len() < 34 {
        return true;
    }
    match [frame[12], frame[13]] {
        [0x08, 0x00] => {}
        // ARP, and what a host drops as unsupported.
        [0x08, 0x06] | [0x86, 0xdd] => return false,
        _ => return true,
    }
    let ip = &frame[14..];
    let ihl = (ip[0] & 0x0f) as usize * 4;
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    let offset = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
    if ip[0] >> 4 != 4 || ihl < 20 || offset != 0 {
        return true;
    }
    let l4 = ip.get(ihl..total.min(ip.len()).max(ihl)).unwrap_or(&[]);
    match ip[9] {
        // UDP: its destination port (the first fragment has the header).
        17 => match l4.get(2..4) {
            Some(p) => ports.contains(&u16::from_be_bytes([p[0], p[1]])),
            None => true,
        },
        // TCP: data after the header.
        6 => match l4.get(12) {
            Some(&d) => l4.len() > (d >> 4) as usize * 4,
            None => true,
        },
        // ICMP, and protocols a host does not take.
        _ => false,
    }
}

/// The datagram an untagged IPv4 fragment belongs to (source, destination,
/// identification, protocol) and its offset; `None` for anything else.
#[allow(clippy::type_complexity)]
fn fragment_of(frame: &[u8]) -> Option<(([u8; 4], [u8; 4], u16, u8), u16)> {
    let ip = frame.get(14..34)?;
    if frame[12..14] != [0x08, 0x00] || ip[0] >> 4 != 4 {
        return None;
    }
    let flags_offset = u16::from_be_bytes([ip[6], ip[7]]);
    // More fragments, or an offset: a fragment.
    if flags_offset & 0x3fff == 0 {
        return None;
    }
    let addr = |o: usize| [ip[o], ip[o + 1], ip[o + 2], ip[o + 3]];
    Some((
        (
            addr(12),
            addr(16),
            u16::from_be_bytes([ip[4], ip[5]]),
            ip[9],
        ),
        flags_offset & 0x1fff,
    ))
}

/// Joins the federation with `settings`: one HELICS endpoint per topology
/// endpoint, of the same name; calls `connected` once the broker has taken
/// the federate and its endpoints, and returns once every federate is
/// ready.
pub(crate) fn join<'h>(
    helics: &'h Helics,
    settings: &Settings,
    spec: &HelicsSpec,
    endpoints: &[EndpointInfo],
    connected: impl FnOnce(),
) -> Result<(Federate<'h>, CosimReport), CosimError> {
    let mut fed = register(helics, settings, endpoints, connected)?;
    fed.enter_executing(settings.timeout)?;
    Ok((fed, report_of(helics, spec)))
}

/// The first half of [`join`]: the federate made and its endpoints
/// registered with the broker (then `connected` is called); the federation
/// is not yet executing.
pub(crate) fn register<'h>(
    helics: &'h Helics,
    settings: &Settings,
    endpoints: &[EndpointInfo],
    connected: impl FnOnce(),
) -> Result<Federate<'h>, CosimError> {
    if endpoints.is_empty() {
        return Err(CosimError::Topology(
            "[helics] needs at least one [[endpoint]]: netloop moves the federation's messages between its endpoints".into(),
        ));
    }
    let mut fed = Federate::new(helics, settings)?;
    for e in endpoints {
        fed.register_endpoint(&e.name)?;
    }
    connected();
    Ok(fed)
}

/// A report for a run of the federate `spec` names, before it runs.
pub(crate) fn report_of(helics: &Helics, spec: &HelicsSpec) -> CosimReport {
    CosimReport {
        federate: spec.name.clone(),
        helics: format!("{} ({})", helics.version(), helics.path().display()),
        end: "duration",
        ..CosimReport::default()
    }
}

/// The messages the federation sent to netloop's `n` endpoints since the
/// last grant: (endpoint, message), endpoint by endpoint.
pub(crate) fn intake(
    fed: &mut Federate<'_>,
    n: usize,
    report: &mut CosimReport,
) -> Result<Vec<(usize, Received)>, HelicsError> {
    let mut out = Vec::new();
    for i in 0..n {
        while let Some(m) = fed.receive(i)? {
            out.push((i, m));
        }
    }
    report.from_federation += out.len() as u64;
    Ok(out)
}

/// Hands what reached the endpoints to each one's federate, stamped
/// `stamp(message)`; counts those without a federate.
pub(crate) fn hand_over(
    fed: &mut Federate<'_>,
    endpoints: &[EndpointInfo],
    arrived: Vec<(usize, Message)>,
    stamp: impl Fn(&Message) -> f64,
    report: &mut CosimReport,
) -> Result<(), HelicsError> {
    for (i, m) in arrived {
        match &endpoints[i].federate {
            Some(dst) => {
                fed.send(i, &m.data, dst, stamp(&m))?;
                report.to_federation += 1;
            }
            None => report.without_federate += 1,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An untagged IPv4 frame: datagram `id`, fragment offset `off` (in
    /// 8-byte units), more fragments or not.
    fn ipv4(id: u16, off: u16, more: bool) -> netloop_core::Frame {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[18..20].copy_from_slice(&id.to_be_bytes());
        f[20..22].copy_from_slice(&(off | if more { 0x2000 } else { 0 }).to_be_bytes());
        f[23] = 17;
        f[26..30].copy_from_slice(&[198, 18, 0, 1]);
        f[30..34].copy_from_slice(&[198, 18, 0, 2]);
        f[16..18].copy_from_slice(&46u16.to_be_bytes());
        f[36..38].copy_from_slice(&4000u16.to_be_bytes());
        netloop_core::Frame::copy_from(&f)
    }

    fn wire(frames: Vec<netloop_core::Frame>) -> netloop_model::wire::Wire {
        let mut w = netloop_model::wire::Wire::default();
        for (i, f) in frames.into_iter().enumerate() {
            w.push(SimTime::from_nanos(100 * (i as u64 + 1)), 0, f);
        }
        w
    }

    #[test]
    fn a_datagram_is_whole_at_its_last_fragment_on_the_wire_at_the_earliest() {
        let at = |ns| Some(SimTime::from_nanos(ns));
        // Three fragments in order: only the last can complete it.
        let w = wire(vec![
            ipv4(7, 0, true),
            ipv4(7, 185, true),
            ipv4(7, 370, false),
        ]);
        assert_eq!(first_completing(&w, &[4000]), at(300));
        // Not a fragment: the head.
        assert_eq!(
            first_completing(&wire(vec![ipv4(7, 0, false), ipv4(8, 0, false)]), &[4000]),
            at(100)
        );
        // Another datagram next: the head may complete its own.
        assert_eq!(
            first_completing(&wire(vec![ipv4(7, 0, true), ipv4(8, 185, false)]), &[4000]),
            at(100)
        );
        // Fragments out of order, or the same one twice: the head.
        assert_eq!(
            first_completing(&wire(vec![ipv4(7, 185, false), ipv4(7, 0, true)]), &[4000]),
            at(100)
        );
        assert_eq!(
            first_completing(
                &wire(vec![ipv4(7, 185, false), ipv4(7, 185, false)]),
                &[4000]
            ),
            at(100)
        );
        // The last fragment still to leave: nothing on the wire completes
        // it, but its first fragment is the answer (the lookahead bounds
        // what is not on the wire yet).
        assert_eq!(
            first_completing(&wire(vec![ipv4(7, 0, true)]), &[4000]),
            at(100)
        );
        assert_eq!(first_completing(&wire(vec![]), &[4000]), None);
    }

    /// What cannot complete a message is not waited for: ARP, an ACK,
    /// ICMP, UDP to a port without an endpoint.
    #[test]
    fn only_what_may_complete_a_message_is_waited_for() {
        let at = |ns| Some(SimTime::from_nanos(ns));
        let with = |proto: u8, bytes: &[(usize, u8)]| {
            let mut f = ipv4(9, 0, false).to_vec();
            f[23] = proto;
            for &(i, b) in bytes {
                f[i] = b;
            }
            netloop_core::Frame::copy_from(&f)
        };
        let mut arp = ipv4(1, 0, false).to_vec();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let arp = netloop_core::Frame::copy_from(&arp);
        // TCP: 46 bytes of IP = 20 of IP header, 20 of TCP header (data
        // offset 5) and 6 of data; an ACK is 40 bytes of IP.
        let data = with(6, &[(46, 0x50)]);
        let ack = with(6, &[(46, 0x50), (17, 40)]);
        let icmp = with(1, &[]);
        let other_port = with(17, &[(37, 0x99)]);
        let w = wire(vec![arp, ack, icmp, other_port, data.clone()]);
        assert_eq!(first_completing(&w, &[4000]), at(500));
        assert_eq!(
            first_completing(&wire(vec![ipv4(7, 0, false)]), &[4001]),
            None
        );
        // The first fragment has the UDP header; later ones may be anyone's.
        assert_eq!(
            first_completing(&wire(vec![ipv4(7, 0, true)]), &[4001]),
            None
        );
        assert_eq!(
            first_completing(&wire(vec![ipv4(7, 185, false)]), &[4001]),
            at(100)
        );
        assert!(may_complete(&data, &[]));
    }

    #[test]
    fn helics_before_3_7_may_stop_granting() {
        assert!(stops_granting("3.6.1 (2025-02-24)"));
        assert!(stops_granting("2.8.1"));
        assert!(!stops_granting("3.7.0 (2026-08-07)"));
        assert!(!stops_granting("4.0.0"));
        assert!(!stops_granting("unknown"));
    }

    #[test]
    fn simulated_time_survives_helics_seconds() {
        for ns in [
            0u64,
            1,
            999,
            1_000_000_001,
            123_456_789_012_345,
            86_400_000_000_007,
        ] {
            let t = SimTime::from_nanos(ns);
            assert_eq!(sim_time(seconds(t)), t, "{ns} ns");
        }
        assert_eq!(sim_time(TIME_MAXTIME), SimTime::MAX);
        assert_eq!(sim_time(-1.0), SimTime::ZERO);
    }
}
