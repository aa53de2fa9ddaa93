//! The record of what each run created, in `/run/netloop/<run id>.json`: the
//! netloop marker on every namespace, device and process, and what lets
//! `netloop clean` remove the leftovers of a run killed by SIGKILL — and only
//! those.
//!
//! The record is written before each resource is created (write-ahead), and
//! atomically (a temporary file, then a rename): a SIGKILL at any moment
//! leaves a record of everything that may exist. `clean` tolerates entries
//! that never came to exist. Names carry the run id (`nl-<id>-<host>`,
//! `nl<id>h<node>`), and `clean` refuses to touch anything in a record whose
//! name does not carry its run's id, so a damaged record cannot make it
//! delete someone else's namespace.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::netns;

/// Where run records live (tmpfs: gone at reboot, like what they record).
pub const RUN_DIR: &str = "/run/netloop";

/// A process netloop started.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcEntry {
    /// Its pid (and process group id: each runs in a group of its own).
    pub pid: i32,
    /// Its start time (field 22 of /proc/PID/stat), to tell a reused pid.
    pub start_time: u64,
    /// The real host it runs on.
    pub host: String,
    /// The command line.
    pub cmd: String,
}

/// A namespace netloop created for a real host.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct NsEntry {
    /// The host's name in the topology.
    pub host: String,
    /// The namespace's name.
    pub name: String,
    /// The init of the host's PID namespace, once started (`netloop exec`
    /// runs programs in that namespace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<InitEntry>,
}

/// The init of a real host's PID namespace (see `proc::HostInit`).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct InitEntry {
    /// Its pid, in netloop's PID namespace.
    pub pid: i32,
    /// Its start time, to tell a reused pid.
    pub start_time: u64,
}

/// One run's record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run id (6 hex digits).
    pub run_id: String,
    /// The netloop process that owns the run.
    pub owner_pid: i32,
    /// Its start time, to tell a reused pid.
    pub owner_start: u64,
    /// When the run started (seconds since the epoch).
    pub created_unix: u64,
    /// Namespaces (created or about to be).
    pub namespaces: Vec<NsEntry>,
    /// Devices in the root namespace (created or about to be).
    pub devices: Vec<String>,
    /// Processes started.
    pub processes: Vec<ProcEntry>,
}

impl RunRecord {
    /// The namespace of real host `host`.
    pub fn namespace_of(&self, host: &str) -> Option<&str> {
        self.namespace_entry(host).map(|n| n.name.as_str())
    }

    /// What the record says of real host `host`'s namespace.
    pub fn namespace_entry(&self, host: &str) -> Option<&NsEntry> {
        self.namespaces.iter().find(|n| n.host == host)
    }

    /// The real hosts (with namespaces).
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.namespaces.iter().map(|n| n.host.as_str())
    }

    /// Whether the owning netloop process is still running.
    pub fn owner_alive(&self) -> bool {
        start_time(self.owner_pid) == Some(self.owner_start)
    }

    /// The namespace name for `host` in run `run_id`.
    pub fn namespace_name(run_id: &str, host: &str) -> String {
        format!("nl-{run_id}-{host}")
    }

    /// The root-side device name for node index `node` in run `run_id`
    /// (at most 15 bytes: 2 + 6 + 1 + up to 6 digits).
    pub fn device_name(run_id: &str, node: usize) -> String {
        format!("nl{run_id}h{node}")
    }

    fn owns_name(&self, name: &str) -> bool {
        name.starts_with(&format!("nl-{}-", self.run_id))
            || name.starts_with(&format!("nl{}h", self.run_id))
    }
}

/// The start time of process `pid` (clock ticks since boot), if it exists.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces;
    // fields after it are plain. Field 22 is the 20th after the ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// A run's record file, kept up to date as the run creates things.
pub struct Registry {
    path: PathBuf,
    record: RunRecord,
}

fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn ensure_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::os(format!("creating {}", dir.display()), e))?;
    }
    check_private(dir)
}

/// Refuses a run directory that is not a directory of ours closed to
/// others' writes (every reader of records checks, not only the writer).
fn check_private(dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    // Records decide what `netloop clean` deletes and which processes it
    // ends: a directory someone else owns or may write to could hand it a
    // forged record. Refuse it rather than trust it.
    let meta = std::fs::symlink_metadata(dir)
        .map_err(|e| Error::os(format!("reading {}", dir.display()), e))?;
    let me = nix::unistd::geteuid().as_raw();
    match refusal(dir, meta.is_dir(), meta.uid(), meta.mode(), me) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Why the run directory `dir` (a directory or not, its owner and mode) may
/// not be used by user `me`, if it may not.
fn refusal(dir: &Path, is_dir: bool, owner: u32, mode: u32, me: u32) -> Option<Error> {
    let closed = mode & 0o022 == 0;
    if is_dir && owner == me && closed {
        return None;
    }
    if is_dir && owner == 0 && closed {
        // The directory is right: it is root's, and this is not root. Its
        // records (root's runs) are not ours to read, and the fix is to be
        // root, not to touch the directory.
        return Some(
            Error::msg(format!(
                "this needs root: {} holds the records of root's netloop runs, which only \
                 root may read",
                dir.display()
            ))
            .hint(
                "run it as root (sudo): real-time runs, `netloop exec` and `netloop clean` \
                 need root",
            ),
        );
    }
    Some(
        Error::msg(format!(
            "{} is not a private directory: it is {} owned by uid {owner} with mode {:o}",
            dir.display(),
            if is_dir {
                "a directory"
            } else {
                "not a directory"
            },
            mode & 0o7777
        ))
        .hint(format!(
            "netloop keeps its run records only in a directory owned by uid {me} and not \
             writable by group or others; remove it or fix its owner and mode"
        )),
    )
}

impl Registry {
    /// Starts the record of a new run owned by this process, with a fresh id.
    pub fn create() -> Result<Registry> {
        let dir = Path::new(RUN_DIR);
        ensure_dir(dir)?;
        let pid = std::process::id() as i32;
        let mut seed = (pid as u64) << 20 ^ crate::clock::realtime_ns();
        loop {
            // A 24-bit id from the pid and the time; retry on a clash with a
            // record (or namespace) that exists.
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let id = format!("{:06x}", (seed >> 40) & 0xff_ffff);
            let path = dir.join(format!("{id}.json"));
            if path.exists() {
                continue;
            }
            let record = RunRecord {
                run_id: id,
                owner_pid: pid,
                owner_start: start_time(pid).unwrap_or(0),
                created_unix: now_unix(),
                namespaces: Vec::new(),
                devices: Vec::new(),
                processes: Vec::new(),
            };
            let r = Registry { path, record };
            r.save()?;
            return Ok(r);
        }
    }

    /// The record as it stands.
    pub fn record(&self) -> &RunRecord {
        &self.record
    }

    /// The run id.
    pub fn run_id(&self) -> &str {
        &self.record.run_id
    }

    fn save(&self) -> Result<()> {
        write_atomic(&self.path, &self.record)
    }

    /// Records a namespace about to be created.
    pub fn add_namespace(&mut self, host: &str, name: &str) -> Result<()> {
        self.record.namespaces.push(NsEntry {
            host: host.into(),
            name: name.into(),
            init: None,
        });
        self.save()
    }

    /// Records the init of namespace `name`'s PID namespace, just started.
    pub fn set_init(&mut self, name: &str, init: InitEntry) -> Result<()> {
        if let Some(n) = self.record.namespaces.iter_mut().find(|n| n.name == name) {
            n.init = Some(init);
        }
        self.save()
    }

    /// Records a root-namespace device about to be created.
    pub fn add_device(&mut self, name: &str) -> Result<()> {
        self.record.devices.push(name.into());
        self.save()
    }

    /// Records a process just started.
    pub fn add_process(&mut self, p: ProcEntry) -> Result<()> {
        self.record.processes.push(p);
        self.save()
    }

    /// Removes the record (at the end of a clean tear-down).
    pub fn remove_file(&self) -> Result<()> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::os(format!("removing {}", self.path.display()), e)),
        }
    }
}

fn write_atomic(path: &Path, record: &RunRecord) -> Result<()> {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let write = || -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        // Only root (the owner) reads records: they name processes and
        // devices of the run.
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::os(format!("writing the run record {}", path.display()), e)
    })
}

/// Every run record on this machine (unreadable files are skipped).
pub fn list_runs() -> Result<Vec<(PathBuf, RunRecord)>> {
    let mut out: Vec<(PathBuf, RunRecord)> = run_dir_entries()?
        .into_iter()
        .filter_map(|p| read_record(&p).map(|r| (p, r)))
        .collect();
    out.sort_by_key(|a| a.1.created_unix);
    Ok(out)
}

/// The paths in the run directory, once the directory is known to be
/// private (none when it does not exist).
fn run_dir_entries() -> Result<Vec<PathBuf>> {
    let dir = Path::new(RUN_DIR);
    if !dir.exists() {
        return Ok(Vec::new());
    }
    check_private(dir)?;
    let entries =
        std::fs::read_dir(dir).map_err(|e| Error::os(format!("reading {}", dir.display()), e))?;
    Ok(entries.flatten().map(|e| e.path()).collect())
}

/// The run record at `p`: a regular file of ours (not a link, not someone
/// else's) named `*.json` that parses.
fn read_record(p: &Path) -> Option<RunRecord> {
    use std::os::unix::fs::MetadataExt;
    if p.extension().and_then(|x| x.to_str()) != Some("json") {
        return None;
    }
    let meta = std::fs::symlink_metadata(p).ok()?;
    if !meta.is_file() || meta.uid() != nix::unistd::geteuid().as_raw() {
        return None;
    }
    serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
}

/// Files in the run directory that are not readable run records: damaged
/// records, files that are not ours, and temporary files of a write that a
/// SIGKILL interrupted.
pub fn unreadable_records() -> Result<Vec<PathBuf>> {
    Ok(run_dir_entries()?
        .into_iter()
        .filter(|p| read_record(p).is_none())
        .collect())
}

/// The running run named `run`, or the only running one.
pub fn find_running(run: Option<&str>) -> Result<RunRecord> {
    let live: Vec<RunRecord> = list_runs()?
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| r.owner_alive())
        .collect();
    choose_running(live, run)
}

/// Of the running runs `live`, the one named `run`, or the only one.
fn choose_running(live: Vec<RunRecord>, run: Option<&str>) -> Result<RunRecord> {
    if let Some(id) = run {
        return live
            .into_iter()
            .find(|r| r.run_id == id)
            .ok_or_else(|| Error::msg(format!("no netloop run with id '{id}' is running")));
    }
    match live.len() {
        0 => Err(Error::msg(
            "no netloop run is running (start one with `netloop run FILE`)",
        )),
        1 => Ok(live.into_iter().next().expect("one")),
        _ => {
            let ids: Vec<&str> = live.iter().map(|r| r.run_id.as_str()).collect();
            Err(Error::msg(format!(
                "several netloop runs are running (ids {}); choose one with --run",
                ids.join(", ")
            )))
        }
    }
}

/// What `clean` did.
#[derive(Debug, Default)]
pub struct CleanReport {
    /// Runs whose leftovers were removed.
    pub runs: Vec<String>,
    /// Processes killed.
    pub processes: usize,
    /// Namespaces deleted.
    pub namespaces: Vec<String>,
    /// Devices deleted.
    pub devices: Vec<String>,
    /// Runs left alone because their netloop is still running.
    pub running: Vec<(String, i32)>,
    /// What could not be removed, and why.
    pub failures: Vec<String>,
}

impl fmt::Display for CleanReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.runs.is_empty() {
            write!(f, "nothing to clean")?;
        } else {
            write!(
                f,
                "cleaned {} run(s) ({}): {} namespace(s), {} device(s), {} process(es)",
                self.runs.len(),
                self.runs.join(", "),
                self.namespaces.len(),
                self.devices.len(),
                self.processes
            )?;
        }
        for (id, pid) in &self.running {
            write!(
                f,
                "\nrun {id} is still running (netloop pid {pid}): left alone"
            )?;
        }
        for e in &self.failures {
            write!(f, "\nfailed: {e}")?;
        }
        Ok(())
    }
}

/// Kills every process inside namespace `ns` (they can only be ours: the
/// namespace is ours) and waits briefly for them to go.
pub(crate) fn kill_namespace_pids(ns: &str) -> usize {
    let mut killed = std::collections::HashSet::new();
    for _ in 0..50 {
        let pids = netns::pids(ns).unwrap_or_default();
        if pids.is_empty() {
            break;
        }
        for pid in pids {
            if nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            )
            .is_ok()
            {
                killed.insert(pid);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    killed.len()
}

/// Removes the leftovers of every run whose netloop is gone: its processes
/// (if their start time still matches), anything inside its namespaces, the
/// namespaces, its devices, and the record. Running runs are left alone.
pub fn clean() -> Result<CleanReport> {
    let mut report = CleanReport::default();
    for p in unreadable_records()? {
        // A temporary file of an interrupted write is stale once its writer
        // is gone; anything else is reported, not guessed at.
        let writer = p
            .extension()
            .and_then(|x| x.to_str())
            .and_then(|x| x.strip_prefix("tmp"))
            .and_then(|pid| pid.parse::<i32>().ok());
        match writer {
            Some(pid) if start_time(pid).is_none() => {
                let _ = std::fs::remove_file(&p);
            }
            Some(_) => {}
            None => report.failures.push(format!(
                "{} is not a readable run record: remove it by hand if nothing of its run is left",
                p.display()
            )),
        }
    }
    for (path, r) in list_runs()? {
        let failures_before = report.failures.len();
        if r.owner_alive() {
            report.running.push((r.run_id.clone(), r.owner_pid));
            continue;
        }
        for p in &r.processes {
            if start_time(p.pid) == Some(p.start_time) {
                let pid = nix::unistd::Pid::from_raw(p.pid);
                let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
                report.processes += 1;
            }
        }
        for ns in &r.namespaces {
            if !r.owns_name(&ns.name) {
                report.failures.push(format!(
                    "record {} lists namespace '{}', which does not carry its run id: not touched",
                    path.display(),
                    ns.name
                ));
                continue;
            }
            if netns::exists(&ns.name) {
                report.processes += kill_namespace_pids(&ns.name);
                match netns::del(&ns.name) {
                    Ok(()) => report.namespaces.push(ns.name.clone()),
                    Err(e) => report.failures.push(e.to_string()),
                }
            }
        }
        for d in &r.devices {
            if !r.owns_name(d) {
                report.failures.push(format!(
                    "record {} lists device '{d}', which does not carry its run id: not touched",
                    path.display()
                ));
                continue;
            }
            if netns::link_exists(d) {
                match netns::ip(&["link", "del", d]) {
                    Ok(()) => report.devices.push(d.clone()),
                    // Deleting a namespace removes a veth's far end and with
                    // it this one, a moment later: gone is what we wanted.
                    Err(_) if !netns::link_exists(d) => {}
                    Err(e) => report.failures.push(e.to_string()),
                }
            }
        }
        // Keep the record while anything of the run is left, so that a
        // later `clean` can still find it.
        if report.failures.len() > failures_before {
            continue;
        }
        match std::fs::remove_file(&path) {
            Ok(()) => report.runs.push(r.run_id.clone()),
            Err(e) => report
                .failures
                .push(format!("removing {}: {e}", path.display())),
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_directory_others_may_write_to_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::temp_dir().join(format!("netloop-regdir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let dir = base.join("run");
        ensure_dir(&dir).expect("a fresh directory is made private");
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = ensure_dir(&dir).expect_err("a world-writable directory is refused");
        assert!(e.to_string().contains("not a private directory"), "{e}");
        assert!(e.to_string().contains("mode 777"), "{e}");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_dir(&dir).expect("readable by others is fine");
        let file = base.join("file");
        std::fs::write(&file, b"").unwrap();
        let e = ensure_dir(&file).expect_err("a file is not a directory");
        assert!(e.to_string().contains("not a directory"), "{e}");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn root_s_run_directory_seen_by_another_user_asks_for_root() {
        let dir = Path::new(RUN_DIR);
        let e = refusal(dir, true, 0, 0o40700, 1000)
            .expect("root's directory is not another user's to read")
            .to_string();
        assert!(e.contains("this needs root"), "{e}");
        assert!(e.contains("run it as root (sudo)"), "{e}");
        assert!(
            !e.contains("remove it"),
            "advice that would break root's runs: {e}"
        );
        // Root's own directory is fine for root; one others may write to is
        // refused for everyone, as before.
        assert!(refusal(dir, true, 0, 0o40700, 0).is_none());
        assert!(refusal(dir, true, 1000, 0o40755, 1000).is_none());
        let e = refusal(dir, true, 0, 0o40777, 1000).unwrap().to_string();
        assert!(e.contains("not a private directory"), "{e}");
        let e = refusal(dir, true, 1000, 0o40700, 0).unwrap().to_string();
        assert!(
            e.contains("not a private directory") && e.contains("remove it"),
            "{e}"
        );
    }

    fn run(id: &str) -> RunRecord {
        RunRecord {
            run_id: id.into(),
            owner_pid: 1,
            owner_start: 0,
            created_unix: 0,
            namespaces: vec![],
            devices: vec![],
            processes: vec![],
        }
    }

    /// What `netloop exec` says with no run, one, several, and a run id that
    /// is not among them (the running runs are given, so the machine's own
    /// runs do not matter).
    #[test]
    fn the_running_run_is_chosen_or_the_choice_explained() {
        let e = choose_running(vec![], None).unwrap_err().to_string();
        assert!(e.contains("no netloop run is running"), "{e}");
        let e = choose_running(vec![], Some("a1b2c3"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no netloop run with id 'a1b2c3' is running"),
            "{e}"
        );
        let one = choose_running(vec![run("a1b2c3")], None).unwrap();
        assert_eq!(one.run_id, "a1b2c3");
        let e = choose_running(vec![run("a1b2c3"), run("d4e5f6")], None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "several netloop runs are running (ids a1b2c3, d4e5f6); choose one with --run"
            ),
            "{e}"
        );
        let chosen = choose_running(vec![run("a1b2c3"), run("d4e5f6")], Some("d4e5f6")).unwrap();
        assert_eq!(chosen.run_id, "d4e5f6");
        let e = choose_running(vec![run("a1b2c3")], Some("ffffff"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no netloop run with id 'ffffff' is running"),
            "{e}"
        );
    }

    #[test]
    fn a_record_without_init_still_reads() {
        let r: RunRecord = serde_json::from_str(
            r#"{"run_id":"a1b2c3","owner_pid":1,"owner_start":0,"created_unix":0,
                "namespaces":[{"host":"h1","name":"nl-a1b2c3-h1"}],"devices":[],"processes":[]}"#,
        )
        .expect("a record of a netloop without PID namespaces");
        assert_eq!(r.namespace_entry("h1").unwrap().init, None);
    }

    #[test]
    fn start_time_of_self_is_stable_and_of_nonsense_is_none() {
        let pid = std::process::id() as i32;
        let a = start_time(pid).expect("our own stat");
        assert_eq!(start_time(pid), Some(a));
        assert_eq!(start_time(-5), None);
    }

    #[test]
    fn names_carry_the_run_id_and_fit_ifnamsiz() {
        assert_eq!(RunRecord::namespace_name("a1b2c3", "h1"), "nl-a1b2c3-h1");
        let d = RunRecord::device_name("a1b2c3", 123_456);
        assert!(d.len() <= 15, "{d}");
        let r = RunRecord {
            run_id: "a1b2c3".into(),
            owner_pid: 1,
            owner_start: 0,
            created_unix: 0,
            namespaces: vec![],
            devices: vec![],
            processes: vec![],
        };
        assert!(r.owns_name("nl-a1b2c3-h1"));
        assert!(r.owns_name("nla1b2c3h0"));
        assert!(!r.owns_name("nl-ffffff-h1"));
        assert!(!r.owns_name("eth0"));
    }
}
