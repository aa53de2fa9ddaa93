//! A simulation the caller steps ([`Stepped`]): the network is built in
//! this object, and Python advances its simulated time (`run_until`), sends
//! messages from its endpoints and reads what reached them, in between. This
//! is how a Python co-simulation drives netloop without HELICS: it is its
//! own time master. The model runs on the caller's thread, the interpreter
//! lock released while events run.

use netloop_core::{SimDuration, SimTime};
use netloop_model::Simulation;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::time::Instant;

use crate::{build, netloop_err, NetloopError, TopologyError};

/// A network whose simulated time the caller advances.
#[pyclass(module = "netloop._native", unsendable)]
pub struct Stepped {
    sim: Simulation,
    name: String,
    /// Wall-clock time spent running events.
    wall: f64,
}

/// A time given from Python: seconds (a number) or a quantity (`"1.5s"`).
#[derive(FromPyObject)]
pub enum When {
    /// Seconds.
    Seconds(f64),
    /// A duration as the topology files write it.
    Text(String),
}

impl When {
    fn to_time(&self, what: &str) -> PyResult<SimTime> {
        let d = match self {
            When::Seconds(s) if s.is_finite() && *s >= 0.0 => {
                SimDuration::from_nanos((s * 1e9).round() as u64)
            }
            When::Seconds(s) => {
                return Err(PyValueError::new_err(format!(
                    "{what}: {s} is not a time (expected seconds >= 0, or e.g. \"1.5s\")"
                )))
            }
            When::Text(t) => SimDuration::parse(t)
                .map_err(|e| PyValueError::new_err(format!("{what}: {t:?}: {e}")))?,
        };
        Ok(SimTime::ZERO + d)
    }
}

impl Stepped {
    /// Runs the events up to `t` (not before now), the interpreter free.
    fn advance(&mut self, py: Python<'_>, t: SimTime) -> u64 {
        let start = Instant::now();
        let sim = &mut self.sim;
        let stats = py.allow_threads(|| sim.run_until(t, u64::MAX, |_, _| true));
        self.wall += start.elapsed().as_secs_f64();
        stats.events
    }

    /// The endpoint named `name`, or an error listing them.
    fn endpoint(&self, name: &str, call: &str) -> PyResult<netloop_model::build::EndpointInfo> {
        self.sim
            .endpoints
            .iter()
            .find(|e| e.name == name)
            .cloned()
            .ok_or_else(|| {
                let names: Vec<&str> = self.sim.endpoints.iter().map(|e| e.name.as_str()).collect();
                PyValueError::new_err(format!(
                    "{call}: {name:?} is not an endpoint of {} (endpoints: {})",
                    self.name,
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ))
            })
    }
}

#[pymethods]
impl Stepped {
    /// Builds the topology `text` at simulated time zero.
    #[new]
    #[pyo3(signature = (text, name, duration=None, seed=None))]
    fn new(text: &str, name: &str, duration: Option<&str>, seed: Option<u64>) -> PyResult<Self> {
        let sim = build(text, name, duration, seed)?;
        if !sim.real.is_empty() {
            let names: Vec<&str> = sim.real.iter().map(|r| r.name.as_str()).collect();
            return Err(TopologyError::new_err(format!(
                "{name}: real nodes ({}) need real time: a network stepped from Python runs in \
                 simulated time only",
                names.join(", ")
            )));
        }
        Ok(Stepped {
            sim,
            name: name.to_string(),
            wall: 0.0,
        })
    }

    /// Simulated time now, in nanoseconds.
    fn now_ns(&self) -> u64 {
        self.sim.queue.now().as_nanos()
    }

    /// The time of the next event, in nanoseconds (`None`: nothing left).
    fn next_event_ns(&self) -> Option<u64> {
        self.sim.queue.peek_time().map(|t| t.as_nanos())
    }

    /// Runs every event up to and including time `until`; simulated time
    /// then stands at `until`. Returns the number of events run.
    fn run_until(&mut self, py: Python<'_>, until: When) -> PyResult<u64> {
        let t = until.to_time("run_until")?;
        let now = self.sim.queue.now();
        if t < now {
            return Err(PyValueError::new_err(format!(
                "run_until({t}): simulated time is already {now}; it never goes back"
            )));
        }
        Ok(self.advance(py, t))
    }

    /// Runs every event up to and including `duration` past now.
    fn run_for(&mut self, py: Python<'_>, duration: When) -> PyResult<u64> {
        let d = duration.to_time("run_for")? - SimTime::ZERO;
        let until = self.sim.queue.now() + d;
        Ok(self.advance(py, until))
    }

    /// Sends `data` from endpoint `endpoint` now, to `to` (`"address:port"`
    /// or another endpoint's name) or the endpoint's own `to`.
    #[pyo3(signature = (endpoint, data, to=None))]
    fn send(&mut self, endpoint: &str, data: &[u8], to: Option<&str>) -> PyResult<()> {
        let call = format!("send({endpoint:?})");
        let e = self.endpoint(endpoint, &call)?;
        let dst = match to {
            None => None,
            Some(t) => Some(match t.parse::<std::net::SocketAddr>() {
                Ok(a) => a,
                Err(_) => self.endpoint(t, &format!("{call}, to={t:?}"))?.addr,
            }),
        };
        self.sim
            .net
            .endpoint_send(&mut self.sim.queue, e.node, e.app, dst, data)
            .map_err(|r| NetloopError::new_err(format!("{call}: refused: {r}")))
    }

    /// Takes the messages that reached endpoint `endpoint` so far:
    /// `(arrival_ns, "address:port" of the sender, bytes)`, oldest first.
    fn receive<'py>(
        &mut self,
        py: Python<'py>,
        endpoint: &str,
    ) -> PyResult<Vec<(u64, String, Bound<'py, PyBytes>)>> {
        let e = self.endpoint(endpoint, &format!("receive({endpoint:?})"))?;
        let sim = &mut self.sim;
        Ok(sim
            .net
            .take_endpoint(&mut sim.queue, e.node, e.app)
            .into_iter()
            .map(|m| {
                (
                    m.at.as_nanos(),
                    m.from.to_string(),
                    PyBytes::new(py, &m.data),
                )
            })
            .collect())
    }

    /// The endpoints: `(name, host, "address:port")`.
    fn endpoints(&self) -> Vec<(String, String, String)> {
        let names = self.sim.net.node_names();
        self.sim
            .endpoints
            .iter()
            .map(|e| (e.name.clone(), names[e.node].clone(), e.addr.to_string()))
            .collect()
    }

    /// The results as of now, as JSON (mode `"stepped"`).
    fn results(&self) -> PyResult<String> {
        let r = self
            .sim
            .results("stepped", Some(self.wall), Some(self.name.clone()));
        serde_json::to_string(&r).map_err(netloop_err)
    }
}
