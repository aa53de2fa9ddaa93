//! `netloop._native`: the Python package's bridge to the Rust crates.
//!
//! It owns the crossing between Python and the core: topology text in
//! (written by the Python builder or read from a file), results out as JSON
//! text (the schema of `docs/results-schema.md`, which the Python side turns
//! into objects), errors as Python exceptions carrying the core's messages.
//! The core crates know nothing of Python.
//!
//! A live network runs on a thread of its own ([`LiveRun`]): the real-time
//! loop must never wait for the interpreter, and Python must stay free to
//! run programs on the real hosts meanwhile. Python talks to it through
//! `netloop_io::live`'s request channel. Every wait on that thread releases
//! the interpreter lock and wakes every 100 ms to let Ctrl-C through, and
//! whatever the way out — `stop()`, an exception, garbage collection — the
//! thread is told to stop and joined, so the run's namespaces and devices
//! are removed.

mod stepped;

use netloop_core::{SimDuration, SimTime};
use netloop_io::live::{remote, run_live, HostReport, LiveOptions, Reply, Request};
use netloop_io::pcap::Capture;
use netloop_io::pcapparts::PartedCaptures;
use netloop_model::partition::Cut;
use netloop_model::Simulation;
use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

create_exception!(
    _native,
    NetloopError,
    PyRuntimeError,
    "An error of netloop: setting up, running or tearing down a network."
);
create_exception!(
    _native,
    TopologyError,
    NetloopError,
    "A topology that netloop cannot load or build; the message names the item, field and value."
);

/// How long a request to a running network may take before it is an error.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

fn netloop_err(e: impl std::fmt::Display) -> PyErr {
    NetloopError::new_err(e.to_string())
}

/// Loads and builds a topology; every error as one [`TopologyError`].
fn build(
    text: &str,
    name: &str,
    duration: Option<&str>,
    seed: Option<u64>,
) -> PyResult<Simulation> {
    build_with_partitions(text, name, duration, seed).map(|(sim, _)| sim)
}

/// [`build`], with the partition of each node if the topology gives them.
fn build_with_partitions(
    text: &str,
    name: &str,
    duration: Option<&str>,
    seed: Option<u64>,
) -> PyResult<(Simulation, Option<Vec<u32>>)> {
    let mut loaded = netloop_config::parse_str(text, name).map_err(|errors| {
        TopologyError::new_err(format!(
            "{errors}\n{name}: {} error{}",
            errors.len(),
            if errors.len() == 1 { "" } else { "s" }
        ))
    })?;
    if let Some(s) = seed {
        loaded.spec.run.seed = s;
    }
    if let Some(d) = duration {
        loaded.spec.run.duration = SimDuration::parse(d)
            .map_err(|e| TopologyError::new_err(format!("duration {d:?}: {e}")))?;
    }
    let sim = Simulation::build(&loaded.spec)
        .map_err(|e| TopologyError::new_err(loaded.sources.located(&e).to_string()))?;
    Ok((sim, loaded.partitions))
}

/// The cut of `sim` into `parts` partitions (`None` for one), the nodes'
/// own partitions if the topology gives them; for a real-time run every
/// real host is in partition 0.
fn cut_for(
    sim: &Simulation,
    name: &str,
    given: Option<&[u32]>,
    parts: u32,
    realtime: bool,
) -> PyResult<Option<Cut>> {
    if parts == 0 {
        return Err(PyValueError::new_err("partitions=0: give 1 or more"));
    }
    if parts == 1 {
        return Ok(None);
    }
    let spec = sim.net.spec();
    let cut = if realtime {
        Cut::for_realtime(spec, given, parts)
    } else {
        Cut::given_or_auto(spec, given, parts)
    };
    cut.map(Some).map_err(|e| {
        TopologyError::new_err(format!("{name}: cannot cut into {parts} partitions: {e}"))
    })
}

/// What a built topology holds, before it runs: the results document of
/// time zero (nodes with their interfaces and addresses, links, flows, the
/// run's seed and duration), as JSON.
#[pyfunction]
fn check(text: &str, name: &str) -> PyResult<String> {
    let sim = build(text, name, None, None)?;
    serde_json::to_string(&sim.results("check", None, Some(name.to_string()))).map_err(netloop_err)
}

/// Ends each capture; its files and frame counts, and errors (disk full).
fn finish_captures(caps: &[Arc<Mutex<Capture>>]) -> Value {
    let files: Vec<Value> = caps
        .iter()
        .map(|c| {
            let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
            let error = c.finish();
            json!({
                "path": c.path.display().to_string(),
                "frames": c.frames,
                "error": error,
            })
        })
        .collect();
    Value::Array(files)
}

/// The time series `simulate(stats_interval=…, stats=…)` (or `start`'s)
/// asks for, started (as `netloop run --stats-interval`'s: docs/series.md).
fn start_series(
    sim: &Simulation,
    name: &str,
    interval: Option<&str>,
    path: Option<&Path>,
) -> PyResult<Option<netloop_model::series::SeriesWriter>> {
    let (interval, path) = match (interval, path) {
        (None, None) => return Ok(None),
        (Some(i), Some(p)) => (i, p),
        (Some(_), None) => {
            return Err(TopologyError::new_err(
                "stats_interval=…: give the file too, stats=PATH",
            ))
        }
        (None, Some(_)) => {
            return Err(TopologyError::new_err(
                "stats=…: give the interval too, stats_interval=\"100ms\"",
            ))
        }
    };
    let every = SimDuration::parse(interval)
        .map_err(|e| TopologyError::new_err(format!("stats_interval {interval:?}: {e}")))?;
    if every == SimDuration::ZERO {
        return Err(TopologyError::new_err(
            "stats_interval \"0\": the interval must be longer than zero, e.g. \"100ms\"",
        ));
    }
    let file = std::fs::File::create(path)
        .map_err(|e| netloop_err(format!("creating the time series {}: {e}", path.display())))?;
    netloop_model::series::SeriesWriter::new(
        Box::new(file),
        every,
        &sim.net,
        &sim.flows,
        Some(name),
    )
    .map(Some)
    .map_err(|e| netloop_err(format!("writing the time series {}: {e}", path.display())))
}

/// Runs a topology without real nodes as fast as possible; the results as
/// JSON. `progress(sim_seconds, duration_seconds, speed)` is called about
/// four times a second; Ctrl-C (or an exception from `progress`) stops the
/// run, and the exception is raised once the results are taken. With
/// `partitions` > 1 the network is cut into that many partitions, each run
/// on a thread of its own (the same results: docs/partitions.md).
/// `stats_interval` and `stats` write the time series into a file as it
/// goes (docs/series.md). `sync` is how partitions keep in step:
/// `"windowed"` (rounds) or `"null"` (null messages).
#[pyfunction]
#[pyo3(signature = (text, name, duration=None, seed=None, pcap=Vec::new(), pcap_dir=PathBuf::from("."), progress=None, partitions=1, stats_interval=None, stats=None, sync="windowed"))]
// The keyword arguments of the Python function, one for one.
#[allow(clippy::too_many_arguments)]
fn simulate(
    py: Python<'_>,
    text: &str,
    name: &str,
    duration: Option<&str>,
    seed: Option<u64>,
    pcap: Vec<String>,
    pcap_dir: PathBuf,
    progress: Option<PyObject>,
    partitions: u32,
    stats_interval: Option<&str>,
    stats: Option<PathBuf>,
    sync: &str,
) -> PyResult<String> {
    let sync = match sync {
        "windowed" => netloop_model::partition::SyncMethod::Windowed,
        "null" => netloop_model::partition::SyncMethod::NullMessages,
        other => {
            return Err(PyValueError::new_err(format!(
                "simulate(sync={other:?}): give \"windowed\" (rounds) or \"null\" (null messages)"
            )))
        }
    };
    if sync == netloop_model::partition::SyncMethod::NullMessages && partitions <= 1 {
        return Err(PyValueError::new_err(
            "simulate(sync=\"null\"): it is how partitions keep in step: give partitions=N (N > 1)",
        ));
    }
    let (mut sim, given) = build_with_partitions(text, name, duration, seed)?;
    if !sim.real.is_empty() {
        let names: Vec<&str> = sim.real.iter().map(|r| r.name.as_str()).collect();
        return Err(TopologyError::new_err(format!(
            "{name}: real nodes ({}) need real time: start the network instead of simulating it",
            names.join(", ")
        )));
    }
    let cut = cut_for(&sim, name, given.as_deref(), partitions, false)?;
    let mut series = start_series(&sim, name, stats_interval, stats.as_deref())?;
    let duration_s = sim.net.spec().run.duration.as_secs_f64();
    // An exception from the progress callback or a signal, to raise once
    // the results are taken; `stop` ends the run (partitions look at it).
    let raised: Mutex<Option<PyErr>> = Mutex::new(None);
    let stop = AtomicBool::new(false);
    // Keeps the first exception and stops the run.
    let give_up = |e: PyErr| {
        raised
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(e);
        stop.store(true, Ordering::Relaxed);
    };
    let start = Instant::now();
    let mut last = Instant::now();
    // Called with the simulated time now and then, on the thread that runs
    // (partition 0's, with partitions); false stops the run. Signals are
    // seen only on the main thread: with partitions, the main thread looks.
    let keep_going = |now: SimTime| -> bool {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        if last.elapsed() < Duration::from_millis(250) {
            return true;
        }
        last = Instant::now();
        Python::with_gil(|py| {
            let r = py.check_signals().and_then(|()| match &progress {
                Some(cb) => {
                    let s = now.as_secs_f64();
                    let speed = s / start.elapsed().as_secs_f64().max(1e-9);
                    cb.call1(py, (s, duration_s, speed)).map(|_| ())
                }
                None => Ok(()),
            });
            match r {
                Ok(()) => true,
                Err(e) => {
                    give_up(e);
                    false
                }
            }
        })
    };
    let (results, captures) = match cut {
        None => {
            let caps = netloop_io::pcap::attach(&mut sim, &pcap, &pcap_dir).map_err(netloop_err)?;
            let mut keep_going = keep_going;
            match series.as_mut() {
                None => {
                    py.allow_threads(|| sim.run(1 << 14, |now, _| keep_going(now)));
                }
                Some(w) => py
                    .allow_threads(|| sim.run_sampled(w, 1 << 14, |now, _| keep_going(now)))
                    .map_err(|e| netloop_err(format!("{name}: writing the time series: {e}")))?,
            }
            let wall = start.elapsed().as_secs_f64();
            let results = sim.results("afap", Some(wall), Some(name.to_string()));
            (results, finish_captures(&caps))
        }
        Some(cut) => {
            // Each partition writes its parts of the captures, merged in one
            // run's order at the end (as `netloop run --partitions`).
            let all: Vec<u32> = (0..cut.parts).collect();
            let (caps, parted) =
                PartedCaptures::create(&sim, &pcap, &pcap_dir, cut.parts, &all, true)
                    .map_err(netloop_err)?;
            let taps = (0..cut.parts).map(|k| parted.taps(k)).collect();
            let until = SimTime::ZERO + sim.net.spec().run.duration;
            let run = std::thread::scope(|scope| {
                let runner = std::thread::Builder::new()
                    .name("netloop-partitions".into())
                    .spawn_scoped(scope, || {
                        let series = series.as_mut().map(|s| (s.interval(), s));
                        netloop_model::partition::run_threads_with_taps(
                            sim, &cut, until, keep_going, taps, series, sync,
                        )
                    })
                    .map_err(|e| netloop_err(format!("cannot start the partitions: {e}")))?;
                // The main thread (holding the interpreter only to look)
                // takes Ctrl-C and stops the partitions.
                while !runner.is_finished() {
                    py.allow_threads(|| std::thread::sleep(Duration::from_millis(50)));
                    if let Err(e) = py.check_signals() {
                        give_up(e);
                    }
                }
                runner
                    .join()
                    .map_err(|_| netloop_err("a partition's thread panicked"))
            })?;
            let p = run.map_err(|e| TopologyError::new_err(format!("{name}: {e}")))?;
            if let Some(e) = &p.series_error {
                return Err(netloop_err(format!("{name}: writing the time series: {e}")));
            }
            let wall = start.elapsed().as_secs_f64();
            let results = p.results(&cut, "afap", Some(wall), Some(name.to_string()));
            parted.merge_local();
            (results, finish_captures(&caps))
        }
    };
    let raised = raised.into_inner().unwrap_or_else(|e| e.into_inner());
    if let Some(e) = raised {
        return Err(e);
    }
    let mut v = serde_json::to_value(&results).map_err(netloop_err)?;
    v["pcap"] = captures;
    Ok(v.to_string())
}

/// Removes what runs killed with SIGKILL left behind (`netloop clean`);
/// the report as text.
#[pyfunction]
fn clean(py: Python<'_>) -> PyResult<String> {
    py.allow_threads(netloop_io::registry::clean)
        .map(|r| r.to_string())
        .map_err(netloop_err)
}

/// Whether this process may create namespaces (root or the capabilities);
/// `None` if it may, else why not.
#[pyfunction]
fn privileges_missing() -> Option<String> {
    netloop_io::session::check_privileges()
        .err()
        .map(|e| e.to_string())
}

type Outcome = Result<String, String>;

/// A network running in real time on its own thread.
#[pyclass(module = "netloop._native")]
struct LiveRun {
    handle: netloop_io::live::RemoteHandle,
    stop_flag: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<Outcome>>>,
    outcome: Mutex<Option<Outcome>>,
    hosts: String,
    links: Vec<String>,
}

impl LiveRun {
    /// Joins the run's thread (the caller has asked it to end), keeping the
    /// outcome; the interpreter lock is released meanwhile.
    fn join(&self, py: Python<'_>) -> Outcome {
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        let mut outcome = self.outcome.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = handle {
            let r = py.allow_threads(|| h.join());
            *outcome = Some(r.unwrap_or_else(|_| {
                Err("the network's thread panicked (its namespaces and devices were removed as it unwound)".into())
            }));
        }
        outcome
            .clone()
            .unwrap_or_else(|| Err("the network never ran".into()))
    }

    fn call(&self, py: Python<'_>, req: Request) -> PyResult<Reply> {
        let h = self.handle.clone();
        py.allow_threads(move || h.call(req, CALL_TIMEOUT))
            .map_err(netloop_err)
    }
}

#[pymethods]
impl LiveRun {
    /// Builds the topology, sets up its real nodes and starts it in real
    /// time; returns once the network is up (programs of the topology start
    /// then), or raises why it could not start.
    #[staticmethod]
    #[pyo3(signature = (text, name, log_dir, duration=None, pcap=Vec::new(), pcap_dir=PathBuf::from("."), priority=None, steer=false, late_threshold="1ms", partitions=1, stats_interval=None, stats=None))]
    #[allow(clippy::too_many_arguments)]
    fn start(
        py: Python<'_>,
        text: &str,
        name: &str,
        log_dir: PathBuf,
        duration: Option<&str>,
        pcap: Vec<String>,
        pcap_dir: PathBuf,
        priority: Option<i32>,
        steer: bool,
        late_threshold: &str,
        partitions: u32,
        stats_interval: Option<&str>,
        stats: Option<PathBuf>,
    ) -> PyResult<Self> {
        let late_threshold_ns = SimDuration::parse(late_threshold)
            .map_err(|e| TopologyError::new_err(format!("late_threshold {late_threshold:?}: {e}")))?
            .as_nanos();
        let (mut sim, given) = build_with_partitions(text, name, duration, None)?;
        if !sim.real.is_empty() {
            netloop_io::session::check_privileges().map_err(netloop_err)?;
        }
        // Cut into partitions, each on a thread kept to the wall clock (every
        // real host in partition 0); captures are then written in parts.
        let cut = cut_for(&sim, name, given.as_deref(), partitions, true)?;
        let mut series = start_series(&sim, name, stats_interval, stats.as_deref())?;
        let (caps, parted) = match &cut {
            None => (
                netloop_io::pcap::attach(&mut sim, &pcap, &pcap_dir).map_err(netloop_err)?,
                None,
            ),
            Some(c) => {
                let all: Vec<u32> = (0..c.parts).collect();
                let (caps, p) = PartedCaptures::create(&sim, &pcap, &pcap_dir, c.parts, &all, true)
                    .map_err(netloop_err)?;
                (caps, Some(p))
            }
        };
        let taps = match (&cut, &parted) {
            (Some(c), Some(p)) => (0..c.parts).map(|k| p.taps(k)).collect(),
            _ => Vec::new(),
        };
        let links: Vec<String> = sim.net.links().iter().map(|l| l.name.clone()).collect();
        let (handle, remote) = remote().map_err(netloop_err)?;
        let stop_flag = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = mpsc::sync_channel::<String>(1);
        let flag = stop_flag.clone();
        let topology = name.to_string();
        // The run's threads (this one and those it starts) leave signals
        // to Python's main thread, which alone runs their handlers.
        let signals = netloop_io::sys::block_async_signals();
        let thread = std::thread::Builder::new()
            .name(format!("netloop {name}"))
            .spawn(move || -> Outcome {
                let spin_ns = sim.net.spec().run.spin.as_nanos();
                let mut on_ready = |hosts: &[HostReport]| {
                    let _ = ready_tx.send(serde_json::to_string(hosts).unwrap_or_default());
                };
                let started = Instant::now();
                let report = run_live(
                    &mut sim,
                    LiveOptions {
                        log_dir: Some(log_dir),
                        spin_ns,
                        late_threshold_ns,
                        stop: &flag,
                        priority,
                        steer,
                        on_ready: &mut on_ready,
                        remote: Some(remote),
                        cut: cut.as_ref(),
                        taps,
                        series: series.as_mut(),
                    },
                );
                if let Some(p) = parted {
                    p.merge_local();
                }
                let captures = finish_captures(&caps);
                let report = report.map_err(|e| e.to_string())?;
                let wall = started.elapsed().as_secs_f64();
                let mut results = match (&report.partitions, &cut) {
                    (Some(p), Some(cut)) => netloop_model::partition::merged_results(
                        &sim,
                        cut,
                        &p.shares,
                        report.realtime.events,
                        "realtime",
                        Some(wall),
                        Some(topology),
                    ),
                    _ => sim.results("realtime", Some(wall), Some(topology)),
                };
                results.realtime = Some(serde_json::to_value(&report).map_err(|e| e.to_string())?);
                let mut v = serde_json::to_value(&results).map_err(|e| e.to_string())?;
                v["pcap"] = captures;
                Ok(v.to_string())
            });
        drop(signals);
        let thread =
            thread.map_err(|e| netloop_err(format!("cannot start the network's thread: {e}")))?;
        let mut run = LiveRun {
            handle,
            stop_flag,
            thread: Mutex::new(Some(thread)),
            outcome: Mutex::new(None),
            hosts: String::new(),
            links,
        };
        // Wait for "up" — or for the thread to end, which means it failed.
        // (A receiver may not be shared across threads; a mutex makes it so.)
        let ready_rx = Mutex::new(ready_rx);
        loop {
            let next = py.allow_threads(|| {
                ready_rx
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .recv_timeout(Duration::from_millis(100))
            });
            match next {
                Ok(hosts) => {
                    run.hosts = hosts;
                    return Ok(run);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(match run.join(py) {
                        Err(e) => netloop_err(e),
                        Ok(_) => netloop_err("the network ended before it was up"),
                    });
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Err(e) = py.check_signals() {
                        run.stop_flag.store(true, Ordering::SeqCst);
                        let _ = run.join(py);
                        return Err(e);
                    }
                }
            }
        }
    }

    /// The real nodes as set up: name, namespace, interface, address (JSON).
    fn hosts(&self) -> String {
        self.hosts.clone()
    }

    /// The link names.
    fn links(&self) -> Vec<String> {
        self.links.clone()
    }

    /// Whether the run is still going.
    fn running(&self) -> bool {
        self.thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|h| !h.is_finished())
    }

    /// Applies a change to a link now: `text` is one `[[event]]` table of a
    /// topology file, without `at`.
    fn change_link(&self, py: Python<'_>, text: &str) -> PyResult<()> {
        // The text was written by the Python side: its line numbers mean
        // nothing to the user, the item and field do.
        let ev = netloop_config::parse_link_change(text, "link change", &self.links).map_err(
            |errors| {
                let lines: Vec<String> = errors
                    .iter()
                    .map(|e| match &e.field {
                        Some(f) => format!("{}, field '{f}': {}", e.item, e.message),
                        None if e.item.is_empty() => e.message.clone(),
                        None => format!("{}: {}", e.item, e.message),
                    })
                    .collect();
                TopologyError::new_err(lines.join("\n"))
            },
        )?;
        match self.call(py, Request::ChangeLink(ev))? {
            Reply::Failed(why) => Err(netloop_err(why)),
            _ => Ok(()),
        }
    }

    /// The results and the self-report so far (JSON with `results`,
    /// `realtime` and `window_lateness`); `new_window` starts a new lateness
    /// window.
    #[pyo3(signature = (new_window = true))]
    fn snapshot(&self, py: Python<'_>, new_window: bool) -> PyResult<String> {
        match self.call(py, Request::Snapshot { new_window })? {
            Reply::Snapshot(s) => Ok(json!({
                "results": s.results,
                "realtime": s.realtime,
                "window_lateness": s.window_lateness,
                "partitions": s.partitions,
            })
            .to_string()),
            Reply::Failed(why) => Err(netloop_err(why)),
            _ => Err(netloop_err("the network did not answer with a snapshot")),
        }
    }

    /// Simulated seconds reached.
    fn now(&self, py: Python<'_>) -> PyResult<f64> {
        match self.call(py, Request::Now)? {
            Reply::Now(t) => Ok(t.as_secs_f64()),
            _ => Err(netloop_err("the network did not report its time")),
        }
    }

    /// Ends the run (if it is still going), tears the network down and
    /// returns the results as JSON, the self-report under `realtime`.
    /// Calling it again returns the same results.
    fn stop(&self, py: Python<'_>) -> PyResult<String> {
        if self.running() && self.call(py, Request::Stop).is_err() {
            // Far behind or already ending: the flag stops it at its next turn.
            self.stop_flag.store(true, Ordering::SeqCst);
        }
        self.join(py).map_err(netloop_err)
    }

    /// Waits up to `timeout` seconds (forever if `None`) for the run to end
    /// by itself (its duration, or every awaited program exited); true if
    /// it has ended. Ctrl-C is let through.
    #[pyo3(signature = (timeout=None))]
    fn wait(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let deadline = timeout.map(|t| Instant::now() + Duration::from_secs_f64(t.max(0.0)));
        loop {
            if !self.running() {
                return Ok(true);
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(false);
            }
            py.allow_threads(|| std::thread::sleep(Duration::from_millis(20)));
            py.check_signals()?;
        }
    }
}

impl Drop for LiveRun {
    fn drop(&mut self) {
        // Garbage-collected while running: end it and wait for the
        // tear-down, so nothing is left behind.
        let handle = self
            .thread
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(h) = handle {
            self.stop_flag.store(true, Ordering::SeqCst);
            let _ = h.join();
        }
    }
}

/// The `netloop` command (`netloop.__main__`): runs the command line
/// `argv` (the program's name first) as the netloop binary would, and
/// returns its exit status. The interpreter's lock is let go meanwhile.
#[pyfunction]
fn cli(py: Python<'_>, argv: Vec<String>) -> u8 {
    py.allow_threads(|| {
        netloop_cli::exit_status(netloop_cli::main_with(argv.into_iter().map(Into::into)))
    })
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("NetloopError", m.py().get_type::<NetloopError>())?;
    m.add("TopologyError", m.py().get_type::<TopologyError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(simulate, m)?)?;
    m.add_function(wrap_pyfunction!(clean, m)?)?;
    m.add_function(wrap_pyfunction!(privileges_missing, m)?)?;
    m.add_function(wrap_pyfunction!(cli, m)?)?;
    m.add_class::<LiveRun>()?;
    m.add_class::<stepped::Stepped>()?;
    Ok(())
}
