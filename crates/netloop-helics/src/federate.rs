//! A HELICS message federate, safe on top of [`crate::api`]: created from
//! settings, its endpoints registered, time requested, messages sent and
//! read. Every failing call becomes a [`HelicsError`] naming the call and
//! HELICS's own message; the federate disconnects when dropped.

#![allow(unsafe_code)]

use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use crate::api::{cstr, Handle, Helics, RawError, Time};

/// A HELICS call that failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("HELICS {what}: {message} (error {code})")]
pub struct HelicsError {
    /// What netloop was doing.
    pub what: String,
    /// HELICS's error code.
    pub code: i32,
    /// HELICS's message.
    pub message: String,
}

/// How a federate joins.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// The federate's name.
    pub name: String,
    /// The core type, e.g. `zmq`.
    pub core: String,
    /// The broker's address, or HELICS's default.
    pub broker: Option<String>,
    /// More of the core's init string.
    pub init: String,
    /// How long to wait for the broker before giving up.
    pub timeout: Duration,
    /// Real-time mode (`HELICS_FLAG_REALTIME`), with how far behind and
    /// ahead of the wall clock a grant may come.
    pub realtime: Option<(Duration, Duration)>,
}

/// A message read from one of the federate's endpoints.
#[derive(Clone, Debug, PartialEq)]
pub struct Received {
    /// Its bytes.
    pub data: Vec<u8>,
    /// Its HELICS time, in seconds.
    pub time: f64,
    /// The endpoint that first sent it.
    pub source: String,
}

/// A message federate.
pub struct Federate<'h> {
    h: &'h Helics,
    fed: Handle,
    endpoints: Vec<Handle>,
    names: Vec<CString>,
    done: bool,
}

/// A string for C: names and addresses never hold NUL.
fn c(s: &str, what: &str) -> Result<CString, HelicsError> {
    CString::new(s).map_err(|_| HelicsError {
        what: what.to_string(),
        code: -1,
        message: format!("{s:?} holds a NUL byte"),
    })
}

impl<'h> Federate<'h> {
    /// The version of the HELICS library it runs on.
    pub fn helics_version(&self) -> String {
        self.h.version()
    }

    /// Creates the federate (which connects its core to the broker).
    pub fn new(h: &'h Helics, s: &Settings) -> Result<Federate<'h>, HelicsError> {
        let mut init = format!("--timeout={}ms", s.timeout.as_millis());
        if !s.init.is_empty() {
            init.push(' ');
            init.push_str(&s.init);
        }
        let (core, init_c, name) = (
            c(&s.core, "core type")?,
            c(&init, "core init string")?,
            c(&s.name, "federate name")?,
        );
        let broker = s.broker.as_deref().map(|b| c(b, "broker")).transpose()?;
        // SAFETY: every handle passed below is the one just created, every
        // string lives until the call returns, `e` is HELICS's error struct.
        unsafe {
            let mut e = (h.helicsErrorInitialize)();
            let fi = (h.helicsCreateFederateInfo)();
            let result = (|| {
                (h.helicsFederateInfoSetCoreTypeFromString)(fi, core.as_ptr(), &mut e);
                check(h, &mut e, "core type")?;
                (h.helicsFederateInfoSetCoreInitString)(fi, init_c.as_ptr(), &mut e);
                check(h, &mut e, "core init string")?;
                if let Some(b) = &broker {
                    (h.helicsFederateInfoSetBroker)(fi, b.as_ptr(), &mut e);
                    check(h, &mut e, "broker")?;
                }
                if let Some((lag, lead)) = s.realtime {
                    (h.helicsFederateInfoSetFlagOption)(fi, crate::api::FLAG_REALTIME, 1, &mut e);
                    check(h, &mut e, "real-time flag")?;
                    let props = [
                        (crate::api::PROPERTY_TIME_RT_LAG, lag),
                        (crate::api::PROPERTY_TIME_RT_LEAD, lead),
                    ];
                    for (p, v) in props {
                        (h.helicsFederateInfoSetTimeProperty)(fi, p, v.as_secs_f64(), &mut e);
                        check(h, &mut e, "real-time lag/lead")?;
                    }
                }
                let fed = (h.helicsCreateMessageFederate)(name.as_ptr(), fi, &mut e);
                check(h, &mut e, "creating the federate (is the broker running?)")?;
                Ok(fed)
            })();
            (h.helicsFederateInfoFree)(fi);
            Ok(Federate {
                h,
                fed: result?,
                endpoints: Vec::new(),
                names: Vec::new(),
                done: false,
            })
        }
    }

    /// Registers a global endpoint; returns its index.
    pub fn register_endpoint(&mut self, name: &str) -> Result<usize, HelicsError> {
        self.register_typed_endpoint(name, None)
    }

    /// Registers a global endpoint of type `ty` (HELICS's free-form type
    /// string of an endpoint's messages), if any; returns its index.
    pub fn register_typed_endpoint(
        &mut self,
        name: &str,
        ty: Option<&str>,
    ) -> Result<usize, HelicsError> {
        let n = c(name, "endpoint name")?;
        let t = ty.map(|t| c(t, "endpoint type")).transpose()?;
        // SAFETY: a live federate; the name and type outlive the call.
        let ep = unsafe {
            let mut e = (self.h.helicsErrorInitialize)();
            let ep = (self.h.helicsFederateRegisterGlobalEndpoint)(
                self.fed,
                n.as_ptr(),
                t.as_ref().map_or(std::ptr::null(), |t| t.as_ptr()),
                &mut e,
            );
            check(self.h, &mut e, &format!("registering endpoint '{name}'"))?;
            ep
        };
        self.endpoints.push(ep);
        self.names.push(n);
        Ok(self.endpoints.len() - 1)
    }

    /// Enters executing mode: waits for every federate of the federation,
    /// but no longer than `within`. HELICS itself would wait for ever for a
    /// federate that never joins (one that died starting, a broker started
    /// with `--federates` one too many); past `within` a watcher aborts
    /// HELICS in this process and the wait is an error that says why.
    /// (Not HELICS's asynchronous call: a local error or an abort while it
    /// is pending waits for it to complete, i.e. for ever.)
    pub fn enter_executing(&mut self, within: Duration) -> Result<(), HelicsError> {
        let h = self.h;
        let fed = self.fed;
        let why = format!(
            "not every federate joined within {} (the timeout): the broker still waits \
             for one that has not (not started, failed to start, or fewer federates \
             than the broker's --federates)",
            humanize(within)
        );
        let timed_out = AtomicBool::new(false);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let result = std::thread::scope(|scope| {
            let (timed_out, why) = (&timed_out, &why);
            scope.spawn(move || {
                if rx.recv_timeout(within) == Err(RecvTimeoutError::Timeout) {
                    timed_out.store(true, Ordering::SeqCst);
                    h.abort(why);
                }
            });
            // SAFETY: a live federate.
            let r = unsafe {
                let mut e = (h.helicsErrorInitialize)();
                (h.helicsFederateEnterExecutingMode)(fed, &mut e);
                check(h, &mut e, "entering executing mode")
            };
            drop(tx);
            r
        });
        if timed_out.load(Ordering::SeqCst) {
            return Err(HelicsError {
                what: "the federation did not start".into(),
                code: -1,
                message: why,
            });
        }
        result
    }

    /// Asks to advance to `t` seconds; returns the time granted (earlier
    /// when a message arrives for an earlier time).
    pub fn request_time(&mut self, t: Time) -> Result<Time, HelicsError> {
        // SAFETY: a live federate.
        unsafe {
            let mut e = (self.h.helicsErrorInitialize)();
            let g = (self.h.helicsFederateRequestTime)(self.fed, t, &mut e);
            check(self.h, &mut e, "requesting time")?;
            Ok(g)
        }
    }

    /// Sends `data` from endpoint `ep` to the endpoint named `dst`, stamped
    /// with time `at` (seconds).
    pub fn send(&mut self, ep: usize, data: &[u8], dst: &str, at: Time) -> Result<(), HelicsError> {
        let d = c(dst, "destination")?;
        let len = c_int::try_from(data.len()).map_err(|_| HelicsError {
            what: "sending".into(),
            code: -1,
            message: format!("{} bytes is too many for one message", data.len()),
        })?;
        // SAFETY: a live endpoint; `data` and `d` outlive the call.
        unsafe {
            let mut e = (self.h.helicsErrorInitialize)();
            (self.h.helicsEndpointSendBytesToAt)(
                self.endpoints[ep],
                data.as_ptr() as *const c_void,
                len,
                d.as_ptr(),
                at,
                &mut e,
            );
            check(self.h, &mut e, &format!("sending to '{dst}'"))
        }
    }

    /// The next message waiting at endpoint `ep`, if any.
    pub fn receive(&mut self, ep: usize) -> Result<Option<Received>, HelicsError> {
        // SAFETY: a live endpoint; the message is freed after its fields
        // are copied.
        unsafe {
            let h = self.h;
            let ep = self.endpoints[ep];
            if (h.helicsEndpointHasMessage)(ep) == 0 {
                return Ok(None);
            }
            let m = (h.helicsEndpointGetMessage)(ep);
            let n = (h.helicsMessageGetByteCount)(m).max(0);
            let mut data = vec![0u8; n as usize];
            let mut actual: c_int = 0;
            let mut e = (h.helicsErrorInitialize)();
            (h.helicsMessageGetBytes)(m, data.as_mut_ptr() as *mut c_void, n, &mut actual, &mut e);
            let time = (h.helicsMessageGetTime)(m);
            let source = cstr((h.helicsMessageGetOriginalSource)(m));
            (h.helicsMessageFree)(m);
            check(h, &mut e, "reading a message")?;
            data.truncate(actual.max(0) as usize);
            Ok(Some(Received { data, time, source }))
        }
    }

    /// Asks `target` (a federate, a core, `root`: the broker at the top)
    /// HELICS's `query` (e.g. `current_state`); returns its answer, JSON
    /// for most queries.
    pub fn query(&mut self, target: &str, query: &str) -> Result<String, HelicsError> {
        let (h, fed) = (self.h, self.fed);
        // SAFETY: a live federate.
        run_query(h, target, query, |qh, e| unsafe {
            (h.helicsQueryExecute)(qh, fed, e)
        })
    }

    /// The federate's core, for queries from another thread: HELICS's core
    /// is safe to call from any thread, its federate objects are not.
    pub fn core(&self) -> Result<CoreHandle<'h>, HelicsError> {
        // SAFETY: a live federate; the core object returned is freed by
        // the handle.
        unsafe {
            let mut e = (self.h.helicsErrorInitialize)();
            let core = (self.h.helicsFederateGetCore)(self.fed, &mut e);
            check(self.h, &mut e, "getting the federate's core")?;
            Ok(CoreHandle { h: self.h, core })
        }
    }

    /// Leaves the federation (also done when dropped).
    pub fn disconnect(&mut self) -> Result<(), HelicsError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        // SAFETY: a live federate.
        unsafe {
            let mut e = (self.h.helicsErrorInitialize)();
            (self.h.helicsFederateDisconnect)(self.fed, &mut e);
            check(self.h, &mut e, "disconnecting")
        }
    }
}

impl Drop for Federate<'_> {
    fn drop(&mut self) {
        let _ = self.disconnect();
        // SAFETY: the federate is not used after this.
        unsafe { (self.h.helicsFederateFree)(self.fed) };
    }
}

/// A federate's core ([`Federate::core`]), to query the federation from a
/// thread other than the federate's.
pub struct CoreHandle<'h> {
    h: &'h Helics,
    core: Handle,
}

// SAFETY: HELICS's core objects are thread-safe (every call queues an action
// for the core's own thread, or reads state behind its locks); the handle is
// freed once, by its owner.
unsafe impl Send for CoreHandle<'_> {}

impl CoreHandle<'_> {
    /// Asks `target` HELICS's `query` through the core, waiting up to the
    /// core's query timeout (then HELICS answers with a JSON error of code
    /// 504, "query timeout").
    pub fn query(&self, target: &str, query: &str) -> Result<String, HelicsError> {
        let (h, core) = (self.h, self.core);
        // SAFETY: a live core.
        run_query(h, target, query, |qh, e| unsafe {
            (h.helicsQueryCoreExecute)(qh, core, e)
        })
    }
}

/// Asks `target` HELICS's `query` with `execute` (through a federate or a
/// core), which is given the query object and the error struct and returns
/// HELICS's answer (owned by the query object, so copied before it is
/// freed).
fn run_query(
    h: &Helics,
    target: &str,
    query: &str,
    execute: impl FnOnce(Handle, *mut RawError) -> *const std::ffi::c_char,
) -> Result<String, HelicsError> {
    let (t, q) = (c(target, "query target")?, c(query, "query")?);
    // SAFETY: the strings outlive the calls; the query object is freed once,
    // after its answer is copied; `e` is HELICS's error struct.
    unsafe {
        let qh = (h.helicsCreateQuery)(t.as_ptr(), q.as_ptr());
        let mut e = (h.helicsErrorInitialize)();
        let answer = cstr(execute(qh, &mut e));
        (h.helicsQueryFree)(qh);
        check(h, &mut e, &format!("query '{query}' of '{target}'"))?;
        Ok(answer)
    }
}

impl Drop for CoreHandle<'_> {
    fn drop(&mut self) {
        // SAFETY: the core object is not used after this (the core itself
        // lives on while its federate does).
        unsafe { (self.h.helicsCoreFree)(self.core) };
    }
}

/// A broker in this process (HELICS's `inproc` core needs one: its
/// federates are threads of one process). Disconnected when dropped.
pub struct Broker<'h> {
    h: &'h Helics,
    broker: Handle,
}

impl<'h> Broker<'h> {
    /// Starts a broker of core type `core` named `name`, with `init` (e.g.
    /// `--federates=3`).
    pub fn new(
        h: &'h Helics,
        core: &str,
        name: &str,
        init: &str,
    ) -> Result<Broker<'h>, HelicsError> {
        let (core, name, init) = (
            c(core, "core type")?,
            c(name, "broker name")?,
            c(init, "broker init string")?,
        );
        // SAFETY: the strings outlive the call; `e` is HELICS's error struct.
        unsafe {
            let mut e = (h.helicsErrorInitialize)();
            let broker =
                (h.helicsCreateBroker)(core.as_ptr(), name.as_ptr(), init.as_ptr(), &mut e);
            check(h, &mut e, "creating a broker")?;
            Ok(Broker { h, broker })
        }
    }
}

impl Drop for Broker<'_> {
    fn drop(&mut self) {
        // SAFETY: the broker is not used after this.
        unsafe {
            let mut e = (self.h.helicsErrorInitialize)();
            (self.h.helicsBrokerDisconnect)(self.broker, &mut e);
            (self.h.helicsErrorClear)(&mut e);
            (self.h.helicsBrokerFree)(self.broker);
        }
    }
}

/// `d` as a person writes it: `60 s`, `1.5 s`, `250 ms`.
fn humanize(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{} s", d.as_secs_f64())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Turns a set error into a [`HelicsError`] (and clears it).
///
/// # Safety
/// `e` is a HELICS error struct filled by a call of `h`.
unsafe fn check(h: &Helics, e: &mut RawError, what: &str) -> Result<(), HelicsError> {
    if e.error_code == 0 {
        return Ok(());
    }
    let err = HelicsError {
        what: what.to_string(),
        code: e.error_code,
        // SAFETY: by the caller.
        message: unsafe { cstr(e.message) },
    };
    // SAFETY: by the caller.
    unsafe { (h.helicsErrorClear)(e) };
    Err(err)
}
