//! A session owns everything one run creates outside the process —
//! namespaces, devices, programs — and removes it when it ends, whatever the
//! end: `teardown` on a normal return, `Drop` on an error or a panic (and on
//! SIGINT/SIGTERM, which the front end turns into a normal return). Each
//! resource is recorded in the run's [`Registry`] before it is created, so
//! that `netloop clean` can finish the job after a SIGKILL.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use netloop_model::build::RealNode;
use netloop_model::spec::{NodeKind, ReadySpec};

use crate::error::{Error, Result};
use crate::netns;
use crate::packet;
use crate::proc::{self, HostInit, Proc};
use crate::registry::{self, InitEntry, ProcEntry, Registry, RunRecord};

/// How long programs get to exit after SIGTERM before SIGKILL.
pub const STOP_GRACE: Duration = Duration::from_secs(1);

/// A real host's namespace as set up.
#[derive(Clone, Debug)]
pub struct NamespaceHost {
    /// The namespace's name.
    pub namespace: String,
    /// The device netloop reads and writes, in the root namespace (the veth's
    /// root end, or the TAP device's name as created).
    pub root_device: String,
}

/// A program that exited by itself (see [`Session::poll_exits`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramExit {
    /// The host it ran on.
    pub host: String,
    /// Its command line.
    pub cmd: String,
    /// Its exit code, if it exited (rather than being killed).
    pub code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
}

/// What a tear-down removed, and what it could not.
#[derive(Debug, Default)]
pub struct TeardownReport {
    /// Programs stopped (they were still running at the end).
    pub stopped: usize,
    /// Other processes found in the network namespaces and killed once the
    /// hosts' PID namespaces had ended (processes put there from outside,
    /// e.g. with `ip netns exec`).
    pub killed: usize,
    /// Namespaces deleted.
    pub namespaces: usize,
    /// Devices deleted.
    pub devices: usize,
    /// Failures (the run's record is kept for `netloop clean` if any).
    pub failures: Vec<String>,
}

impl fmt::Display for TeardownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "removed {} namespace(s), {} device(s); stopped {} program(s)",
            self.namespaces, self.devices, self.stopped
        )?;
        for e in &self.failures {
            write!(f, "\nclean-up failed: {e}")?;
        }
        Ok(())
    }
}

/// Whether this process may create namespaces and devices: root, or
/// CAP_NET_ADMIN (bit 12) and CAP_SYS_ADMIN (bit 21, for `ip netns add`'s
/// mount) in its effective set.
pub fn check_privileges() -> Result<()> {
    if nix::unistd::geteuid().is_root() {
        return Ok(());
    }
    let caps = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0);
    if caps & (1 << 12) != 0 && caps & (1 << 21) != 0 {
        return Ok(());
    }
    Err(Error::msg(
        "netloop needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN) to create the namespaces and devices of real hosts",
    )
    .hint("run it with sudo, or as root"))
}

/// What the launcher thread shares with the session. The run's record is
/// not in it ([`Session`]'s `registry`): writing the record syncs a file,
/// which can take hundreds of milliseconds when the disk is busy, and the
/// real-time loop reads this (programs' exits, start errors) between events.
struct Shared {
    procs: Vec<Proc>,
    /// The inits of the hosts' PID namespaces: (namespace, init).
    inits: Vec<(String, InitEntry)>,
    errors: Vec<Error>,
}

/// How long the tear-down waits for a PID namespace's init to go once it is
/// killed (it goes once every process in its namespace has).
const INIT_GRACE: Duration = Duration::from_secs(5);

/// A request to the launcher thread.
enum Launch {
    /// Start the init of a network namespace's PID namespace; answer with
    /// its record entry.
    Init(String, Sender<Result<InitEntry>>),
    /// Start a program: (namespace, host, command line, log file).
    Start(String, String, String, PathBuf),
    /// Start nothing more; acknowledge once idle.
    Quiesce(Sender<()>),
}

/// Everything one run created outside the process.
///
/// Programs are started by a launcher thread of the session's own: starting
/// one forks and rewrites the run's record, milliseconds the real-time loop
/// must not spend. The thread lives until the tear-down, because a child's
/// parent-death signal fires when the *thread* that forked it exits. It
/// also starts each real host's PID namespace init ([`HostInit`]), and the
/// programs of a host start in that namespace, so that whatever they start
/// ends with the init, which ends with the thread.
pub struct Session {
    shared: Arc<Mutex<Shared>>,
    /// The run's record, under a lock of its own (see [`Shared`]).
    registry: Arc<Mutex<Registry>>,
    run_id: String,
    namespace_of: HashMap<String, String>,
    namespaces: Vec<String>,
    devices: Vec<String>,
    launcher: Option<(Sender<Launch>, JoinHandle<()>)>,
    /// RPS mask for the namespaces' interfaces, if receive work is steered.
    rps_mask: Option<String>,
    done: bool,
}

fn lock<T>(shared: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves consistent data (plain pushes),
    // and the tear-down must go on regardless.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

impl Session {
    /// Checks privileges and tools, and starts the run's record.
    pub fn new() -> Result<Session> {
        check_privileges()?;
        netns::check_ip()?;
        let registry = Registry::create()?;
        let run_id = registry.run_id().to_string();
        let registry = Arc::new(Mutex::new(registry));
        let shared = Arc::new(Mutex::new(Shared {
            procs: Vec::new(),
            inits: Vec::new(),
            errors: Vec::new(),
        }));
        let (tx, rx) = channel::<Launch>();
        let sh = Arc::clone(&shared);
        let reg = Arc::clone(&registry);
        let handle = std::thread::Builder::new()
            .name("netloop-launcher".into())
            .spawn(move || {
                let mut closed = false;
                // The inits this thread started (their PID namespaces, which
                // programs start in), by network namespace.
                let mut inits: HashMap<String, HostInit> = HashMap::new();
                for req in rx {
                    let (ns, host, cmd, log) = match req {
                        Launch::Quiesce(ack) => {
                            closed = true;
                            let _ = ack.send(());
                            continue;
                        }
                        Launch::Init(ns, reply) => {
                            let _ = reply.send(start_init(&sh, &reg, &mut inits, &ns));
                            continue;
                        }
                        Launch::Start(..) if closed => continue,
                        Launch::Start(ns, host, cmd, log) => (ns, host, cmd, log),
                    };
                    let Some(init) = inits.get(&ns) else {
                        lock(&sh).errors.push(Error::msg(format!(
                            "starting `{cmd}` on real host '{host}': its PID namespace was not started"
                        )));
                        continue;
                    };
                    match proc::spawn(&ns, init, &host, &cmd, &log) {
                        Ok(p) => {
                            let entry = ProcEntry {
                                pid: p.pid,
                                start_time: p.start_time,
                                host: host.clone(),
                                cmd: cmd.clone(),
                            };
                            // Seen by the loop's polls at once; recorded
                            // (slow) after, under the record's own lock.
                            lock(&sh).procs.push(p);
                            let recorded = lock(&reg).add_process(entry);
                            if let Err(e) = recorded {
                                lock(&sh).errors.push(e);
                            }
                        }
                        Err(e) => lock(&sh).errors.push(e),
                    }
                }
            })
            .map_err(|e| Error::os("starting the program launcher thread", e))?;
        Ok(Session {
            shared,
            registry,
            run_id,
            namespace_of: HashMap::new(),
            namespaces: Vec::new(),
            devices: Vec::new(),
            launcher: Some((tx, handle)),
            rps_mask: None,
            done: false,
        })
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The run's record as it stands.
    pub fn record(&self) -> RunRecord {
        lock(&self.registry).record().clone()
    }

    /// Steers the receive processing of every namespace interface created
    /// from now on to CPUs other than `cpu` (Receive Packet Steering), so
    /// that the kernel work of delivering a frame to a real host runs there,
    /// not inside the real-time loop's `send`.
    pub fn steer_receive_away_from(&mut self, cpu: usize, ncpu: usize) {
        let mask: u128 = ((1u128 << ncpu.min(127)) - 1) & !(1u128 << cpu);
        if mask != 0 {
            self.rps_mask = Some(format!("{mask:x}"));
        }
    }

    /// The root-namespace device name for a real node.
    pub fn device_name(&self, r: &RealNode) -> String {
        RunRecord::device_name(self.run_id(), r.node)
    }

    /// Records that a device (e.g. a TAP device about to be created by the
    /// caller) belongs to this run.
    pub fn record_device(&mut self, name: &str) -> Result<()> {
        lock(&self.registry).add_device(name)
    }

    fn new_namespace(&mut self, r: &RealNode) -> Result<String> {
        let ns = RunRecord::namespace_name(self.run_id(), &r.name);
        if netns::exists(&ns) {
            // Refuse before recording it: it is not ours to delete.
            netns::add(&ns)?;
        }
        lock(&self.registry).add_namespace(&r.name, &ns)?;
        netns::add(&ns)?;
        self.namespaces.push(ns.clone());
        self.namespace_of.insert(r.name.clone(), ns.clone());
        // The host's PID namespace, which its programs will start in.
        let (tx, _) = self
            .launcher
            .as_ref()
            .ok_or_else(|| Error::msg("the run is being torn down"))?;
        let (reply_tx, reply_rx) = channel();
        tx.send(Launch::Init(ns.clone(), reply_tx))
            .map_err(|_| Error::msg("the program launcher thread has stopped"))?;
        reply_rx
            .recv()
            .map_err(|_| Error::msg("the program launcher thread has stopped"))??;
        if Path::new("/proc/sys/net/ipv6").exists() {
            netns::sh_in(&ns, ipv6_sysctls(r.port.addr6.is_some()))?;
        }
        netns::ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// Gives the namespace's interface (already inside it, named `dev`) the
    /// real node's name, MAC, MTU, address and routes, and brings it up.
    fn configure_inside(&self, ns: &str, dev: &str, r: &RealNode) -> Result<()> {
        let name = r.port.name.as_str();
        if dev != name {
            netns::ip(&["-n", ns, "link", "set", "dev", dev, "name", name])?;
        }
        let mac = r
            .port
            .mac
            .as_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":");
        let mtu = r.port.mtu.to_string();
        netns::ip(&[
            "-n", ns, "link", "set", "dev", name, "address", &mac, "mtu", &mtu,
        ])?;
        if let Some(a) = r.port.addr {
            netns::ip(&["-n", ns, "addr", "add", &a.to_string(), "dev", name])?;
        }
        if let Some(a) = r.port.addr6 {
            // No duplicate address detection: the model numbered the link,
            // and DAD would hold the address back for a second.
            let a = a.to_string();
            netns::ip(&["-n", ns, "-6", "addr", "add", &a, "dev", name, "nodad"])?;
        }
        netns::ip(&["-n", ns, "link", "set", "dev", name, "up"])?;
        if let Some(mask) = &self.rps_mask {
            // Best effort: without RPS the work stays on the loop's CPU,
            // which is slower but just as correct.
            let _ = netns::sh_in(
                ns,
                &format!("echo {mask} > /sys/class/net/{name}/queues/rx-0/rps_cpus"),
            );
        }
        let v4 = r.routes.iter().filter_map(|rt| {
            let via = rt.via?;
            Some((rt.prefix.prefix, rt.prefix.to_string(), via.to_string()))
        });
        let v6 = r.routes6.iter().filter_map(|rt| {
            let via = rt.via?;
            Some((rt.prefix.prefix, rt.prefix.to_string(), via.to_string()))
        });
        for (len, prefix, via) in v4.chain(v6) {
            let prefix = if len == 0 { "default".into() } else { prefix };
            netns::ip(&["-n", ns, "route", "add", &prefix, "via", &via, "dev", name])?;
        }
        Ok(())
    }

    /// Creates a namespace host joined by a veth pair: the namespace holds
    /// one end (named and configured as the node's port), netloop reads and
    /// writes the other (returned) through a packet socket. The namespace's
    /// end keeps the offloads a Linux user has (TSO, GSO, checksum offload):
    /// netloop reads its super-frames whole and cuts them
    /// ([`packet::PacketOptions::gso`]), which saves the host's stack a pass
    /// per segment; their size is capped at what a ring slot holds
    /// ([`packet::GSO_MAX_SIZE`]). Netloop's end must not merge what it
    /// receives, and keeps its transmit offloads so that super-frames the
    /// model hands on whole reach the host whole
    /// ([`packet::offloads_for_super_frames`]).
    pub fn add_namespace_host(&mut self, r: &RealNode) -> Result<NamespaceHost> {
        if !matches!(r.kind, NodeKind::Namespace(_)) {
            return Err(Error::msg(format!("'{}' is not a namespace host", r.name)));
        }
        let ns = self.new_namespace(r)?;
        let dev = self.device_name(r);
        // The far end lives in the root namespace only until it moves; its
        // name has the same length as `dev` (IFNAMSIZ).
        let peer = format!("nl{}p{}", self.run_id, r.node);
        lock(&self.registry).add_device(&dev)?;
        netns::ip(&["link", "add", &dev, "type", "veth", "peer", "name", &peer])?;
        self.devices.push(dev.clone());
        packet::offloads_for_super_frames(&dev)?;
        netns::ip(&[
            "link",
            "set",
            "dev",
            &peer,
            "gso_max_size",
            &packet::GSO_MAX_SIZE.to_string(),
        ])?;
        // The root end carries no address; keep the root kernel from sending
        // IPv6 router solicitations into the model through it.
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"), "1");
        let mtu = r.port.mtu.to_string();
        netns::ip(&["link", "set", "dev", &dev, "mtu", &mtu, "up"])?;
        netns::ip(&["link", "set", "dev", &peer, "netns", &ns])?;
        self.configure_inside(&ns, &peer, r)?;
        Ok(NamespaceHost {
            namespace: ns,
            root_device: dev,
        })
    }

    /// Creates a namespace host joined by a TAP device that the caller has
    /// created (named `tap`, recorded with [`Session::record_device`]) and
    /// holds open: the device moves into the namespace and is configured
    /// there.
    pub fn add_tap_host(&mut self, r: &RealNode, tap: &str) -> Result<NamespaceHost> {
        let ns = self.new_namespace(r)?;
        netns::ip(&["link", "set", "dev", tap, "netns", &ns])?;
        self.configure_inside(&ns, tap, r)?;
        Ok(NamespaceHost {
            namespace: ns,
            root_device: tap.to_string(),
        })
    }

    /// Asks for `cmd` to be started on real host `host` now, output to
    /// `log`; returns at once (the launcher thread starts it). A failure to
    /// start shows in [`Session::take_errors`].
    pub fn start_command(&mut self, host: &str, cmd: &str, log: &Path) -> Result<()> {
        let ns = self
            .namespace_of
            .get(host)
            .ok_or_else(|| Error::msg(format!("'{host}' is not a namespace host of this run")))?
            .clone();
        let (tx, _) = self
            .launcher
            .as_ref()
            .ok_or_else(|| Error::msg("the run is being torn down"))?;
        tx.send(Launch::Start(
            ns,
            host.into(),
            cmd.into(),
            log.to_path_buf(),
        ))
        .map_err(|_| Error::msg("the program launcher thread has stopped"))
    }

    /// Whether real host `host` has a socket as `ready` asks (see
    /// [`crate::ready`]); read through the init of its PID namespace, which
    /// shares its network namespace.
    pub fn is_ready(&self, host: &str, ready: &ReadySpec) -> Result<bool> {
        crate::ready::has_socket(self.init_pid(host)?, ready)
    }

    /// The pid (in netloop's PID namespace) of the init of real host
    /// `host`'s PID namespace: what programs started beside netloop's own
    /// join to end with the run (the Python package's `Host.popen`).
    pub fn init_pid(&self, host: &str) -> Result<i32> {
        let ns = self
            .namespace_of
            .get(host)
            .ok_or_else(|| Error::msg(format!("'{host}' is not a namespace host of this run")))?;
        lock(&self.shared)
            .inits
            .iter()
            .find(|(n, _)| n == ns)
            .map(|(_, init)| init.pid)
            .ok_or_else(|| Error::msg(format!("real host '{host}' has no PID namespace yet")))
    }

    /// Errors from starting programs since the last call. Never waits: if
    /// the launcher holds the lock this moment, the errors come with the
    /// next call (the real-time loop calls this between events).
    pub fn take_errors(&mut self) -> Vec<Error> {
        self.try_shared()
            .map(|mut g| std::mem::take(&mut g.errors))
            .unwrap_or_default()
    }

    /// What the launcher shares, unless it holds it this moment: the
    /// real-time loop's calls never wait for the launcher (a normal-class
    /// thread, which may be preempted while it holds the lock); the next
    /// poll, 20 ms later, catches up.
    fn try_shared(&self) -> Option<MutexGuard<'_, Shared>> {
        match self.shared.try_lock() {
            Ok(g) => Some(g),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    /// Asks the launcher to start nothing more and waits (up to 10 s)
    /// until it has done what it was asked before.
    fn quiesce(launcher: Option<&(Sender<Launch>, JoinHandle<()>)>) {
        if let Some((tx, _)) = launcher {
            let (ack_tx, ack_rx) = channel();
            if tx.send(Launch::Quiesce(ack_tx)).is_ok() {
                let _ = ack_rx.recv_timeout(Duration::from_secs(10));
            }
        }
    }

    /// Starts no more programs, waits (up to 10 s) for the launcher to
    /// finish what it was asked, and returns the start errors not taken
    /// yet: for the end of a run, where a program asked for at its last
    /// instant may not have been started when the loop last looked.
    pub fn finish_launches(&mut self) -> Vec<Error> {
        Session::quiesce(self.launcher.as_ref());
        std::mem::take(&mut lock(&self.shared).errors)
    }

    /// Programs that have exited since the last call: (host, command, exit
    /// code — `None` if killed by a signal).
    pub fn poll_commands(&mut self) -> Vec<(String, String, Option<i32>)> {
        self.poll_exits()
            .into_iter()
            .map(|e| (e.host, e.cmd, e.code))
            .collect()
    }

    /// Programs that have exited since the last call, with the signal that
    /// killed each one that was killed.
    pub fn poll_exits(&mut self) -> Vec<ProgramExit> {
        let mut out = Vec::new();
        let Some(mut g) = self.try_shared() else {
            return out;
        };
        for p in g.procs.iter_mut() {
            if p.exited.is_none() && p.try_reap() {
                out.push(ProgramExit {
                    host: p.host.clone(),
                    cmd: p.cmd.clone(),
                    code: p.exited.flatten(),
                    signal: p.signal,
                });
            }
        }
        out
    }

    /// Removes everything, in reverse order of creation. Idempotent; never
    /// panics. If anything could not be removed, the run's record stays for
    /// `netloop clean`.
    pub fn teardown(&mut self) -> TeardownReport {
        let mut rep = TeardownReport::default();
        if self.done {
            return rep;
        }
        self.done = true;
        // No more launches: once the launcher acknowledges, every program it
        // started is in `procs`. It stays alive until they are stopped (its
        // exit would SIGKILL them through their parent-death signal, with no
        // chance to exit cleanly).
        let launcher = self.launcher.take();
        Session::quiesce(launcher.as_ref());
        let mut g = lock(&self.shared);
        rep.stopped = g
            .procs
            .iter_mut()
            .map(|p| !p.try_reap())
            .filter(|&running| running)
            .count();
        proc::stop_all(&mut g.procs, STOP_GRACE);
        let inits = std::mem::take(&mut g.inits);
        drop(g);
        // Whatever the programs left running (a daemon in a session of its
        // own, a child that left their process group) ends with its host's
        // PID namespace.
        for (_, init) in &inits {
            proc::kill_init(init.pid, INIT_GRACE);
        }
        if let Some((tx, handle)) = launcher {
            drop(tx);
            let _ = handle.join();
        }
        for ns in self.namespaces.iter().rev() {
            rep.killed += registry::kill_namespace_pids(ns);
            match netns::del(ns) {
                Ok(()) => rep.namespaces += 1,
                Err(e) => rep.failures.push(e.to_string()),
            }
        }
        for d in self.devices.iter().rev() {
            if netns::link_exists(d) {
                match netns::ip(&["link", "del", d]) {
                    Ok(()) => rep.devices += 1,
                    // Deleting the namespace took the veth's far end and
                    // with it this one, a moment later.
                    Err(_) if !netns::link_exists(d) => rep.devices += 1,
                    Err(e) => rep.failures.push(e.to_string()),
                }
            } else {
                rep.devices += 1;
            }
        }
        if rep.failures.is_empty() {
            if let Err(e) = lock(&self.registry).remove_file() {
                rep.failures.push(e.to_string());
            }
        }
        rep
    }
}

/// Starts the init of network namespace `ns`'s PID namespace (on the
/// launcher thread, whose end it must not outlive) and records it.
fn start_init(
    shared: &Mutex<Shared>,
    registry: &Mutex<Registry>,
    inits: &mut HashMap<String, HostInit>,
    ns: &str,
) -> Result<InitEntry> {
    let init = HostInit::start(ns)?;
    let entry = init.entry();
    inits.insert(ns.to_string(), init);
    lock(shared).inits.push((ns.to_string(), entry));
    lock(registry).set_init(ns, entry)?;
    Ok(entry)
}

impl Drop for Session {
    fn drop(&mut self) {
        let rep = self.teardown();
        if !rep.failures.is_empty() {
            eprintln!("netloop: {rep}\n(run `netloop clean` to retry)");
        }
    }
}

/// The IPv6 settings of a new namespace, as a shell command. Without IPv6
/// in the topology it is off: the model would drop a kernel's router
/// solicitations and DAD probes as unsupported. With it, on, but without
/// what netloop does for the host instead: duplicate address detection
/// (the model numbered the link), router solicitations and advertisements
/// (its address and routes come from the topology). Link-local addresses
/// are made from the MAC (EUI-64, `addr_gen_mode` 0), as the model's are.
fn ipv6_sysctls(on: bool) -> &'static str {
    if on {
        "for c in all default; do \
           echo 0 > /proc/sys/net/ipv6/conf/$c/disable_ipv6; \
           echo 0 > /proc/sys/net/ipv6/conf/$c/accept_dad; \
           echo 0 > /proc/sys/net/ipv6/conf/$c/accept_ra; \
           echo 0 > /proc/sys/net/ipv6/conf/$c/router_solicitations; \
         done; \
         echo 0 > /proc/sys/net/ipv6/conf/default/addr_gen_mode 2>/dev/null || true"
    } else {
        "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; \
         echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netloop_model::node::{mac_for, PortInfo};
    use netloop_model::spec::{HostLink, Ipv4Cidr, NamespaceSpec};
    use std::net::Ipv4Addr;
    use std::time::Instant;

    /// While the run's record is being written (its lock held here, as a
    /// slow sync of the file holds it), a program's exit still reaches the
    /// loop's polls, and the polls (exits and start errors) return at once:
    /// the real-time loop calls them between events. (When the record shared
    /// the launcher's lock, a ping started in a real-time test waited 330 ms
    /// behind a sync on a busy disk, and every event with it.)
    #[test]
    fn polls_do_not_wait_for_the_record_to_be_written() {
        if !root() {
            return;
        }
        let mut s = Session::new().expect("session");
        s.add_namespace_host(&host_h1()).expect("namespace host");
        let held = Arc::clone(&s.registry);
        let record = lock(&held);
        s.start_command("h1", "exit 7", Path::new("/dev/null"))
            .expect("start");
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut exits = Vec::new();
        while exits.is_empty() && Instant::now() < deadline {
            let t = Instant::now();
            assert!(s.take_errors().is_empty());
            exits = s.poll_exits();
            assert!(
                t.elapsed() < Duration::from_millis(100),
                "a poll took {:?} while the record was being written",
                t.elapsed()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            exits.len(),
            1,
            "the exit was not seen while the record was held"
        );
        assert_eq!(exits[0].code, Some(7));
        drop(record);
        let rep = s.teardown();
        assert!(rep.failures.is_empty(), "{rep}");
    }

    /// A program that cannot start, asked for just before the end, is
    /// reported by `finish_launches` (the loop's non-blocking polls may
    /// have looked before the launcher got to it).
    #[test]
    fn the_end_of_a_run_collects_a_late_start_error() {
        if !root() {
            return;
        }
        let mut s = Session::new().expect("session");
        s.add_namespace_host(&host_h1()).expect("namespace host");
        // Its log cannot be created: the launcher fails to start it.
        s.start_command("h1", "true", Path::new("/nonexistent-netloop-dir/h1.log"))
            .expect("asked");
        let errors = s.finish_launches();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].to_string().contains("nonexistent-netloop-dir"),
            "{}",
            errors[0]
        );
        let rep = s.teardown();
        assert!(rep.failures.is_empty(), "{rep}");
    }

    /// Whether the test can run (it creates a network namespace).
    fn root() -> bool {
        if crate::sys::is_root() {
            return true;
        }
        assert!(
            std::env::var_os("NETLOOP_REQUIRE_REAL").is_none(),
            "NETLOOP_REQUIRE_REAL is set, but this test needs root"
        );
        println!("skipped: needs root (creates a network namespace)");
        false
    }

    /// Real host h1 on 198.18.211.2/24, as the model would export it.
    fn host_h1() -> RealNode {
        RealNode {
            node: 3,
            name: "h1".into(),
            kind: NodeKind::Namespace(NamespaceSpec {
                commands: vec![],
                via: HostLink::Veth,
            }),
            port: PortInfo {
                mac: mac_for(3, 0),
                addr: Some(Ipv4Cidr {
                    addr: Ipv4Addr::new(198, 18, 211, 2),
                    prefix: 24,
                }),
                addr6: None,
                mtu: 1500,
                link: 0,
                name: "eth0".into(),
            },
            routes: vec![],
            routes6: vec![],
        }
    }
}
