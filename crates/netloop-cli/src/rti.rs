//! `netloop bench rti-federate`: one federate of the RTI benchmark
//! (`bench/rti.py` starts them; `netloop_helics::rti` is what they do), or
//! all of them in one process on HELICS's `inproc` core.
//!
//! Roles: `sender`, `returnee` (answers every message), `receiver` (counts
//! only: the throughput test), and `inproc`: a broker, the returnee (or
//! receiver), the sender and, with `--topology`, netloop's own federate as
//! threads of this process. HELICS's in-process core is its fastest, and it
//! only joins federates of one process; running netloop there too measures
//! what netloop adds on that core.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::{Args, ValueEnum};
use netloop_helics::federate::Settings;
use netloop_helics::rti::{self, SenderPlan, Shape, Test};
use netloop_helics::{Broker, Helics};
use serde_json::json;

/// Which federate to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Role {
    /// Sends, and waits for the echoes (round trip) or only sends
    /// (throughput).
    Sender,
    /// Answers every message to where it came from.
    Returnee,
    /// Counts what arrives (the throughput test's other end).
    Receiver,
    /// A federate in the middle that only passes messages on (what a
    /// federate between the two costs HELICS, without a network).
    Relay,
    /// All of them, netloop (--topology) or the relay (--relay) too, on the
    /// inproc core.
    Inproc,
}

/// The test the sender runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TestArg {
    /// Round-trip latency and its rate.
    RoundTrip,
    /// One-way throughput.
    Throughput,
}

/// `netloop bench rti-federate`.
#[derive(Args, Debug)]
pub struct RtiArgs {
    /// The federate to run.
    #[arg(value_enum)]
    role: Role,
    /// HELICS core type (`zmq`, `tcp`, `tcpss`, `ipc`, …; `inproc` for role
    /// `inproc`).
    #[arg(long, default_value = "zmq")]
    core: String,
    /// More of the core's init string (e.g. `--brokerport=23500`).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    init: String,
    /// The test.
    #[arg(long, value_enum, default_value_t = TestArg::RoundTrip)]
    test: TestArg,
    /// Bytes per message (8 at least: each starts with its number), or per
    /// value with --values.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(8..=1_000_000))]
    payload: u32,
    /// Rounds (round trip) or messages per endpoint (throughput).
    #[arg(long, default_value_t = 1000)]
    count: u64,
    /// Unmeasured round trips first.
    #[arg(long, default_value_t = 2)]
    warmup: u64,
    /// Endpoint pairs of each type (the seed's instances).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    endpoints: u32,
    /// Message types (the seed's object or interaction classes): endpoint
    /// types `t0…`, each with --endpoints pairs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    types: u32,
    /// Values per message (the seed's attributes per object), each of
    /// --payload bytes, unpacked and packed again by the returnee; default:
    /// a message is one unstructured payload.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    values: Option<u32>,
    /// Where the sender's endpoint i sends: `{to}{i}` (`ret`: the returnee
    /// directly; netloop's endpoints' prefix through netloop).
    #[arg(long, default_value = "ret")]
    to: String,
    /// Rounds per second at most (the seed's 100 Hz); default: unlimited.
    #[arg(long)]
    rate_hz: Option<f64>,
    /// Simulated seconds an echo may take before the message counts lost.
    #[arg(long, default_value_t = 1.0)]
    timeout: f64,
    /// Throughput: simulated seconds between consecutive messages' stamps.
    #[arg(long, default_value_t = 0.0)]
    spacing: f64,
    /// Role inproc: netloop's topology (with [helics] and the endpoints the
    /// sender sends to), run in this process on the inproc core.
    #[arg(long)]
    topology: Option<PathBuf>,
    /// Role inproc: a relay between sender and returnee (see role relay).
    #[arg(long, conflicts_with = "topology")]
    relay: bool,
    /// Seconds to wait for the federation to form.
    #[arg(long, default_value_t = 60)]
    wait: u64,
    /// Where to write what was measured (JSON); stdout by default.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn settings(a: &RtiArgs, name: &str, core: &str, broker: Option<String>) -> Settings {
    let mut init = a.init.clone();
    if core == "inproc" {
        // A core of its own per federate, named: created at once on three
        // threads, two federates met in one core ("multiple connect calls")
        // and the federation sometimes never started.
        init = format!("{init} --name={name}_core{}", std::process::id());
    }
    Settings {
        name: name.to_string(),
        core: core.to_string(),
        broker,
        init,
        timeout: Duration::from_secs(a.wait),
        realtime: None,
    }
}

fn plan(a: &RtiArgs) -> SenderPlan {
    SenderPlan {
        test: match a.test {
            TestArg::RoundTrip => Test::RoundTrip,
            TestArg::Throughput => Test::Throughput,
        },
        payload: a.payload as usize,
        count: a.count,
        warmup: a.warmup,
        shape: shape(a),
        to: a.to.clone(),
        rate_hz: a.rate_hz,
        timeout: a.timeout,
        spacing: a.spacing,
    }
}

fn shape(a: &RtiArgs) -> Shape {
    Shape {
        endpoints: a.endpoints as usize * a.types as usize,
        types: a.types as usize,
        values: a.values.map(|v| v as usize),
    }
}

/// Runs `netloop bench rti-federate`.
pub fn rti_federate(a: &RtiArgs) -> anyhow::Result<ExitCode> {
    if let Some(r) = a.rate_hz {
        if !(r.is_finite() && r > 0.0) {
            bail!("--rate-hz {r}: must be a positive number of rounds per second");
        }
    }
    if !(a.timeout.is_finite() && a.timeout > 0.0 && a.spacing.is_finite() && a.spacing >= 0.0) {
        bail!("--timeout must be > 0 and --spacing >= 0 (simulated seconds)");
    }
    if (a.topology.is_some() || a.relay) && a.role != Role::Inproc {
        bail!("--topology and --relay are for role inproc (run netloop, or role relay, for the other core types)");
    }
    let h = Helics::load().map_err(|e| anyhow!("{e}"))?;
    let out = match a.role {
        Role::Sender => {
            json!({"sender": rti::sender(&h, &settings(a, "rti_sender", &a.core, None), &plan(a))?})
        }
        Role::Returnee | Role::Receiver => json!({"returnee": rti::returnee(
            &h,
            &settings(a, "rti_returnee", &a.core, None),
            &shape(a),
            a.role == Role::Returnee,
        )?}),
        Role::Relay => json!({"relay": {"passed": rti::relay(
            &h,
            &settings(a, "rti_relay", &a.core, None),
            &shape(a),
        )?}}),
        Role::Inproc => inproc(a, &h)?,
    };
    let text = serde_json::to_string(&out)?;
    match &a.json {
        Some(p) => crate::run::write_json_atomic(p, &out)?,
        None => outln!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Every federate of the test as a thread of this process, on an inproc
/// broker of its own.
fn inproc(a: &RtiArgs, h: &Helics) -> anyhow::Result<serde_json::Value> {
    let net = match &a.topology {
        Some(file) => {
            let loaded = crate::run::load(file, &netloop_config::Overrides::default())
                .ok_or_else(|| anyhow!("{}: not loaded", file.display()))?;
            let mut spec = loaded
                .spec
                .helics
                .clone()
                .ok_or_else(|| anyhow!("{}: has no [helics] table", file.display()))?;
            let sim = crate::run::build(&loaded)
                .ok_or_else(|| anyhow!("{}: not built", file.display()))?;
            spec.core = "inproc".into();
            Some((sim, spec))
        }
        None => None,
    };
    let broker_name = format!("rti{}", std::process::id());
    let federates = 2 + usize::from(net.is_some() || a.relay);
    let _broker = Broker::new(
        h,
        "inproc",
        &broker_name,
        &format!("--federates={federates} --globaltime"),
    )?;
    let answer = a.test == TestArg::RoundTrip;
    let broker = &Some(broker_name.clone());
    std::thread::scope(|s| -> anyhow::Result<serde_json::Value> {
        let ret = s.spawn(move || {
            rti::returnee(
                h,
                &settings(a, "rti_returnee", "inproc", broker.clone()),
                &shape(a),
                answer,
            )
        });
        let relay = a.relay.then(|| {
            s.spawn(move || {
                rti::relay(
                    h,
                    &settings(a, "rti_relay", "inproc", broker.clone()),
                    &shape(a),
                )
            })
        });
        let snd = s.spawn(move || {
            let r = rti::sender(
                h,
                &settings(a, "rti_sender", "inproc", broker.clone()),
                &plan(a),
            );
            if r.is_err() {
                // Nobody else would leave a federation that waits for it.
                h.abort("the sender failed");
            }
            r
        });
        // netloop's federate on this thread.
        let nl = net.map(|(mut sim, mut spec)| {
            spec.broker = broker.clone();
            spec.init = format!("{} --name=netloop_core{}", spec.init, std::process::id());
            spec.timeout = netloop_core::SimDuration::from_secs(a.wait);
            netloop_helics::cosim::run(&mut sim, h, &spec, &|| false)
                .map(|r| (r, sim.results("cosim", None, None)))
        });
        let snd = joined(Some(snd), "sender")?;
        let ret = joined(Some(ret), "returnee")?;
        let mut out =
            json!({"sender": snd.context("sender")?, "returnee": ret.context("returnee")?});
        if a.relay {
            let passed = joined(relay, "relay")?.context("relay")?;
            out["relay"] = json!({ "passed": passed });
        }
        if let Some(nl) = nl {
            let (report, results) = nl.context("netloop")?;
            out["netloop"] = json!({"cosim": report, "conservation": results.conservation, "endpoints": results.endpoints});
        }
        Ok(out)
    })
}

/// The result of a federate's thread.
fn joined<T>(t: Option<std::thread::ScopedJoinHandle<'_, T>>, who: &str) -> anyhow::Result<T> {
    t.ok_or_else(|| anyhow!("the {who} did not start"))?
        .join()
        .map_err(|_| anyhow!("the {who} panicked"))
}
