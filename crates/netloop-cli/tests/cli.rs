//! End-to-end tests of the `netloop` command: determinism of JSON and pcap,
//! seeds, errors and exit codes, pcap files readable by a pcap reader (and by
//! tshark when it is installed).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn netloop(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_netloop"))
        .current_dir(repo())
        .args(args)
        .output()
        .expect("netloop runs")
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("netloop-cli-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The results JSON without its wall-clock block.
fn results(path: &Path) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    assert!(
        v["wall"]["seconds"].as_f64().is_some(),
        "wall block present"
    );
    v.as_object_mut().unwrap().remove("wall");
    v
}

fn run_to(dir: &Path, tag: &str, file: &str, extra: &[&str]) -> (serde_json::Value, Vec<u8>) {
    let json = dir.join(format!("{tag}.json"));
    let pcaps = dir.join(tag);
    let mut args = vec![
        "run",
        file,
        "--quiet",
        "--json",
        json.to_str().unwrap(),
        "--pcap",
        "all",
        "--pcap-dir",
        pcaps.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = netloop(&args);
    assert!(
        out.status.success(),
        "netloop run failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut all = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&pcaps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in files {
        all.extend(std::fs::read(f).unwrap());
    }
    (results(&json), all)
}

#[test]
fn same_seed_gives_identical_json_and_pcap_and_another_seed_changes_losses() {
    let d = tmpdir("determinism");
    let file = "examples/lossy-links.toml";
    let (j1, p1) = run_to(&d, "a", file, &[]);
    let (j2, p2) = run_to(&d, "b", file, &[]);
    assert_eq!(j1, j2, "JSON differs between identical runs");
    assert!(p1.len() > 1000);
    assert!(p1 == p2, "pcap differs between identical runs");
    let (j3, p3) = run_to(&d, "c", file, &["--seed", "12345"]);
    assert_ne!(
        j1["conservation"]["dropped"], j3["conservation"]["dropped"],
        "a different seed gives different losses"
    );
    assert!(p1 != p3);
    assert_eq!(j1["conservation"]["unaccounted"], 0);
    assert_eq!(j3["conservation"]["unaccounted"], 0);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn pcap_files_are_readable_with_simulated_timestamps() {
    let d = tmpdir("pcap");
    let pcaps = d.join("p");
    let out = netloop(&[
        "run",
        "examples/two-routers.toml",
        "--quiet",
        "--duration",
        "1s",
        "--pcap",
        "r1-r2",
        "--pcap",
        "h1:eth0",
        "--pcap-dir",
        pcaps.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for name in ["r1-r2.pcap", "h1-eth0.pcap"] {
        let path = pcaps.join(name);
        let mut reader =
            pcap_file::pcap::PcapReader::new(std::fs::File::open(&path).unwrap()).unwrap();
        assert_eq!(reader.header().datalink, pcap_file::DataLink::ETHERNET);
        let mut n = 0;
        let mut last = std::time::Duration::ZERO;
        while let Some(p) = reader.next_packet() {
            let p = p.unwrap();
            assert!(p.timestamp >= last, "timestamps in order");
            assert!(
                p.timestamp <= std::time::Duration::from_secs(1),
                "simulated time, not wall time"
            );
            last = p.timestamp;
            n += 1;
        }
        assert!(n > 10, "{name}: {n} frames");
        // If tshark is installed, it must open the file too.
        if let Ok(o) = Command::new("tshark")
            .args(["-r", path.to_str().unwrap(), "-c", "5"])
            .output()
        {
            assert!(
                o.status.success(),
                "tshark failed on {name}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_files_give_located_errors_and_exit_code_2() {
    let d = tmpdir("bad");
    let f = d.join("bad.toml");
    std::fs::write(&f, "[run]\nduration = \"1s\"\n\n[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n\n[[link]]\nendpoints = [\"a\", \"b\"]\ndelay = \"10 sm\"\n").unwrap();
    for cmd in ["check", "run"] {
        let out = netloop(&[cmd, f.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("bad.toml:13:9") && err.contains("'10 sm' is not a duration"),
            "{err}"
        );
    }
    let out = netloop(&["run", d.join("missing.toml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
    let out = netloop(&["run", "examples/two-routers.toml", "--pcap", "nosuch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a link"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn every_example_checks() {
    for e in std::fs::read_dir(repo().join("examples")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let out = netloop(&["check", p.to_str().unwrap()]);
            assert!(
                out.status.success(),
                "{}: {}",
                p.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// `netloop` run as a user who is not root: this user if it is not root,
/// else `nobody` (through setpriv); `None` if root has no setpriv.
fn netloop_not_root() -> Option<Command> {
    let bin = env!("CARGO_BIN_EXE_netloop");
    if !nix::unistd::geteuid().is_root() {
        return Some(Command::new(bin));
    }
    Command::new("setpriv").arg("--version").output().ok()?;
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--",
        bin,
    ]);
    Some(c)
}

/// `netloop exec` and `netloop clean` run by a user who is not root say that
/// root is needed, not that /run/netloop (root's, and right as it is)
/// should be removed or changed. Run as root, the test runs them as `nobody`,
/// after making sure /run/netloop exists as root's runs leave it.
#[test]
fn exec_and_clean_without_root_say_that_root_is_needed() {
    if nix::unistd::geteuid().is_root() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create("/run/netloop")
            .unwrap();
    }
    for (args, says) in [
        (&["exec", "h1", "--", "true"][..], "netloop exec needs root"),
        (&["clean"][..], "netloop clean needs root"),
    ] {
        let Some(mut c) = netloop_not_root() else {
            println!("skipped: runs as root and needs setpriv to become another user");
            return;
        };
        let out = c.args(args).output().expect("netloop runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(err.contains("sudo"), "{args:?}: {err}");
        assert!(!err.contains("remove it"), "{args:?}: {err}");
    }
}

/// `--duration` shorter than a traffic's start: the error says that the
/// option makes the traffic stop before it starts, at the traffic's start
/// (not at a `stop` the file does not set).
#[test]
fn a_duration_that_ends_the_run_before_a_traffic_starts_says_so() {
    let out = netloop(&["run", "examples/dumbbell.toml", "--duration", "3s"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let start = std::fs::read_to_string(repo().join("examples/dumbbell.toml"))
        .unwrap()
        .lines()
        .position(|l| l.starts_with("start = \"5s\""))
        .unwrap()
        + 1;
    assert!(
        err.contains(&format!(
            "examples/dumbbell.toml:{start}:9: traffic 'udp-cbr-1', field 'start': starts at 5s, \
             but --duration 3s ends the run, and so stops this traffic, at 3s: before it starts"
        )),
        "{err}"
    );
    assert!(!err.contains("field 'stop'"), "{err}");
}

/// A topology without nodes (an empty file, or only a [run] table) is an
/// error for `check` and `run`, not "ok — 0 nodes".
#[test]
fn a_topology_without_nodes_is_an_error() {
    let d = tmpdir("empty");
    for (name, text) in [
        ("empty.toml", ""),
        ("run-only.toml", "[run]\nduration = \"1s\"\n"),
    ] {
        let f = d.join(name);
        std::fs::write(&f, text).unwrap();
        for cmd in ["check", "run"] {
            let out = netloop(&[cmd, f.to_str().unwrap()]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{cmd} {name}: {err}");
            assert!(
                err.contains(&format!("{name}:1:1: the topology has no nodes")),
                "{cmd} {name}: {err}"
            );
            assert!(out.stdout.is_empty(), "{cmd} {name}: {out:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A run whose flows deliver nothing says so in its summary, with the drops
/// that explain it, instead of ending as if all were well (a path with a
/// link that loses everything; a run where every flow delivers prints no
/// such line).
#[test]
fn a_run_whose_flows_deliver_nothing_says_so() {
    let d = tmpdir("idle");
    let topo = |loss: &str| {
        format!(
            "[run]\nduration = \"2s\"\n\
             [[node]]\nname = \"a\"\nkind = \"host\"\n\
             [[node]]\nname = \"r1\"\nkind = \"router\"\n\
             [[node]]\nname = \"b\"\nkind = \"host\"\n\
             [[link]]\nendpoints = [\"a\", \"r1\"]\nrate = \"100Mbps\"\n\
             [[link]]\nendpoints = [\"r1\", \"b\"]\nrate = \"100Mbps\"\nloss = {loss}\n\
             [[traffic]]\nname = \"bulk\"\nkind = \"tcp-bulk\"\nfrom = \"a\"\nto = \"b\"\nbytes = \"1MB\"\n\
             [[traffic]]\nname = \"cbr\"\nkind = \"udp-cbr\"\nfrom = \"a\"\nto = \"b\"\nrate = \"1Mbps\"\n"
        )
    };
    let f = d.join("dead.toml");
    std::fs::write(&f, topo("\"100%\"")).unwrap();
    let out = netloop(&["run", f.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("*** 2 of 2 flows delivered nothing: bulk (a → b), cbr (a → b) ***"),
        "{stdout}"
    );
    // Its own loss, and the ARP requests that loss left unanswered.
    assert!(stdout.contains("drops in the run: "), "{stdout}");
    assert!(stdout.contains("random_loss 2"), "{stdout}");
    std::fs::write(&f, topo("0.0")).unwrap();
    let out = netloop(&["run", f.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("delivered nothing"), "{stdout}");
    let _ = std::fs::remove_dir_all(&d);
}

/// A link the file names (`bottleneck`, between r1 and r2) is captured by
/// its name or by its ends in either order, and all three files are the
/// same; parallel links make the ends ambiguous, and the error names them.
/// (The README's own example, `--pcap r1-r2` on dumbbell.toml, failed.)
#[test]
fn a_named_link_is_captured_by_its_ends_too() {
    let d = tmpdir("pcap-ends");
    let pcaps = d.join("p");
    let out = netloop(&[
        "run",
        "examples/dumbbell.toml",
        "--quiet",
        "--duration",
        "6s",
        "--pcap",
        "bottleneck",
        "--pcap",
        "r1-r2",
        "--pcap",
        "r2-r1",
        "--pcap-dir",
        pcaps.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let by_name = std::fs::read(pcaps.join("bottleneck.pcap")).unwrap();
    assert!(by_name.len() > 10_000, "{} bytes", by_name.len());
    for ends in ["r1-r2.pcap", "r2-r1.pcap"] {
        assert!(
            std::fs::read(pcaps.join(ends)).unwrap() == by_name,
            "{ends} is not the bottleneck's capture"
        );
    }

    let topo = d.join("parallel.toml");
    std::fs::write(
        &topo,
        r#"[run]
duration = "1s"
[[node]]
name = "r1"
kind = "router"
[[node]]
name = "r2"
kind = "router"
[[link]]
name = "upper"
endpoints = ["r1", "r2"]
[[link]]
name = "lower"
endpoints = ["r2", "r1"]
"#,
    )
    .unwrap();
    let out = netloop(&[
        "run",
        topo.to_str().unwrap(),
        "--quiet",
        "--pcap",
        "r1-r2",
        "--pcap-dir",
        pcaps.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(
            "pcap target r1-r2: 2 links join these two nodes; name one of them: upper, lower"
        ),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// `--partitions N` runs the network cut into N partitions on threads and
/// writes the results of one partition, apart from `wall` (which says how
/// the run was cut); what partitions cannot do yet is refused by name.
#[test]
fn partitions_give_the_results_of_one_and_say_how_they_were_cut() {
    let dir = tmpdir("partitions");
    let run_with = |n: &str, sync: &str| {
        let json = dir.join(format!("p{n}-{sync}.json"));
        let out = netloop(&[
            "run",
            "examples/link-flap.toml",
            "--quiet",
            "--partitions",
            n,
            "--sync",
            sync,
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let full: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        (results(&json), full["wall"]["partitions"].clone())
    };
    let run = |n: &str| run_with(n, "windowed");
    let (one, none) = run("1");
    assert!(none.is_null(), "one partition reports no cut: {none}");
    // Null messages give the same results, and say they were used.
    let (null, report) = run_with("2", "null");
    assert!(one == null, "null messages changed the results");
    assert_eq!(report["sync"], "null");
    assert!(
        report["per_partition"][0]["null_messages"]
            .as_u64()
            .unwrap()
            > 0
    );
    for n in ["2", "3"] {
        let (many, report) = run(n);
        assert!(one == many, "{n} partitions changed the results");
        assert_eq!(report["sync"], "windowed");
        assert_eq!(report["count"], n.parse::<u64>().unwrap());
        assert!(report["rounds"].as_u64().unwrap() > 0);
        assert!(!report["cut_links"].as_array().unwrap().is_empty());
        let events: u64 = report["per_partition"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["events"].as_u64().unwrap())
            .sum();
        // Each partition ran the link changes; the results count them once.
        assert!(events >= one["meta"]["events_processed"].as_u64().unwrap());
    }
    let fails = |args: &[&str], want: &str| {
        let out = netloop(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(want), "{args:?}: {err}");
    };
    // In real time every real host is in one partition (checked before
    // anything real is made: no root needed).
    let split = dir.join("split.toml");
    std::fs::write(
        &split,
        "[[node]]\nname = \"a\"\nkind = \"namespace\"\npartition = 0\n\
         [[node]]\nname = \"r\"\nkind = \"router\"\npartition = 0\n\
         [[node]]\nname = \"b\"\nkind = \"namespace\"\npartition = 1\n\
         [[link]]\nendpoints = [\"a\", \"r\"]\n\
         [[link]]\nendpoints = [\"r\", \"b\"]\ndelay = \"5ms\"\n",
    )
    .unwrap();
    fails(
        &["run", split.to_str().unwrap(), "--partitions", "2"],
        "are in different partitions",
    );
    fails(
        &["run", "examples/link-flap.toml", "--mpi", "--realtime"],
        "--mpi runs simulations as fast as possible only",
    );
    fails(
        &["run", "examples/link-flap.toml", "--partitions", "0"],
        "--partitions",
    );
    // Null messages are for partitions on threads, as fast as possible.
    for (args, want) in [
        (vec!["--sync", "null"], "add --partitions N"),
        (
            vec!["--sync", "null", "--partitions", "2", "--realtime"],
            "in real time each partition keeps to the wall clock",
        ),
        (
            vec!["--sync", "null", "--mpi"],
            "MPI ranks keep in step by rounds only",
        ),
    ] {
        let mut all = vec!["run", "examples/link-flap.toml"];
        all.extend(args);
        fails(&all, want);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The pcap files of a partitioned run are, byte for byte, those of one
/// partition: each partition writes its part, and the parts merge in the
/// order a single run shows the frames (link captures and an interface's
/// view, on links cut and not, with link changes on a cut link); no part
/// file is left behind.
#[test]
fn partitions_write_the_captures_of_one_partition_byte_for_byte() {
    let dir = tmpdir("partitions-pcap");
    // link-flap.toml's changes, sooner and at a lower rate (smaller files).
    let flap = dir.join("flap.toml");
    let text = std::fs::read_to_string(repo().join("examples/link-flap.toml")).unwrap();
    let mut short = text.replace("duration = \"40s\"", "duration = \"4s\"");
    short = short.replace("rate = \"100Mbps\"", "rate = \"5Mbps\"");
    short = short.replace("start = \"1s\"", "start = \"0.5s\"");
    for (from, to) in [("10s", "1s"), ("20s", "2s"), ("25s", "2.5s"), ("30s", "3s")] {
        let (from, to) = (format!("at = \"{from}\""), format!("at = \"{to}\""));
        assert!(short.contains(&from));
        short = short.replace(&from, &to);
    }
    std::fs::write(&flap, short).unwrap();
    let flap = flap.to_str().unwrap().to_string();
    // Links of no delay inside each partition: at one instant an event
    // schedules another for the same instant with a lower key, so the
    // events' keys go down (the merge must still give one run's order).
    let zero = dir.join("zero.toml");
    std::fs::write(
        &zero,
        "[run]\nduration = \"0.3s\"\n\
         [[node]]\nname = \"r0\"\nkind = \"router\"\npartition = 0\n\
         [[node]]\nname = \"ra\"\nkind = \"router\"\npartition = 0\n\
         [[node]]\nname = \"rb\"\nkind = \"router\"\npartition = 1\n\
         [[node]]\nname = \"h1\"\nkind = \"host\"\npartition = 0\n\
         [[node]]\nname = \"h2\"\nkind = \"host\"\npartition = 1\n\
         [[link]]\nendpoints = [\"r0\", \"ra\"]\n\
         [[link]]\nendpoints = [\"h2\", \"rb\"]\n\
         [[link]]\nendpoints = [\"ra\", \"rb\"]\ndelay = \"5ms\"\n\
         [[link]]\nendpoints = [\"h1\", \"r0\"]\n\
         [[traffic]]\nkind = \"ping\"\nfrom = \"h1\"\nto = \"h2\"\ninterval = \"10ms\"\n\
         [[traffic]]\nkind = \"ping\"\nfrom = \"h2\"\nto = \"h1\"\ninterval = \"7ms\"\n",
    )
    .unwrap();
    let zero = zero.to_str().unwrap().to_string();
    for (file, iface, duration, counts) in [
        (flap.as_str(), "r2:eth0", "4s", &["2", "3"][..]),
        ("examples/given-cut.toml", "r2:eth1", "2s", &["2", "3"][..]),
        (
            "examples/lossy-links.toml",
            "r1:eth0",
            "2s",
            &["2", "3"][..],
        ),
        (zero.as_str(), "ra:eth1", "0.3s", &["2"][..]),
    ] {
        let run = |n: &str| {
            let pcaps = dir.join(format!("pcap{n}"));
            let _ = std::fs::remove_dir_all(&pcaps);
            let json = dir.join(format!("p{n}.json"));
            let out = netloop(&[
                "run",
                file,
                "--quiet",
                "--duration",
                duration,
                "--partitions",
                n,
                "--pcap",
                "all",
                "--pcap",
                iface,
                "--pcap-dir",
                pcaps.to_str().unwrap(),
                "--json",
                json.to_str().unwrap(),
            ]);
            assert!(
                out.status.success(),
                "{file}, {n} partitions: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let full: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
            let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&pcaps)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    let name = e.file_name().to_string_lossy().into_owned();
                    (name, std::fs::read(e.path()).unwrap())
                })
                .collect();
            files.sort();
            (files, full["pcap"].clone())
        };
        let (one, one_report) = run("1");
        let links = one.len() - 1;
        assert!(links >= 3, "{file}: a file per link and one for {iface}");
        assert!(one.iter().all(|(name, _)| name.ends_with(".pcap")));
        let frames: u64 = one_report
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["frames"].as_u64().unwrap())
            .sum();
        assert!(frames > 100, "{file}: {one_report}");
        for &n in counts {
            let (many, report) = run(n);
            let names = |v: &[(String, Vec<u8>)]| v.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
            // Also: no part file is left (they would be listed here).
            assert_eq!(names(&many), names(&one), "{file}, {n} partitions");
            for ((name, a), (_, b)) in one.iter().zip(&many) {
                assert!(a == b, "{file}, {n} partitions: {name} differs");
            }
            assert_eq!(report, one_report, "{file}, {n} partitions");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Spinning before deadlines has an allowance: with events closer together
/// than the spin window (pairs of hosts sending a datagram every 45 µs
/// between them), a real-time thread would spin from one to the next; it
/// spins at most a tenth of each 10 ms window, and each partition's thread
/// reports its own share.
#[test]
fn a_real_time_thread_spins_within_its_allowance() {
    let dir = tmpdir("spin-allowance");
    let mut topo = String::from("[run]\nduration = \"1s\"\nseed = 1\nstatic_neighbours = true\n");
    for i in 0..100 {
        topo.push_str(&format!(
            "[[node]]\nname = \"b{i}a\"\nkind = \"host\"\n[[node]]\nname = \"b{i}b\"\nkind = \"host\"\n\
             [[link]]\nendpoints = [\"b{i}a\", \"b{i}b\"]\nrate = \"2Mbps\"\ndelay = \"5ms\"\n\
             [[traffic]]\nkind = \"udp-cbr\"\nfrom = \"b{i}a\"\nto = \"b{i}b\"\nrate = \"1.8Mbps\"\n\
             size = \"1000B\"\nstart = \"{}us\"\n",
            i * 44
        ));
    }
    let file = dir.join("pairs.toml");
    std::fs::write(&file, topo).unwrap();
    let json = dir.join("rt.json");
    let out = netloop(&[
        "run",
        file.to_str().unwrap(),
        "--realtime",
        "--partitions",
        "2",
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rt = results(&json);
    let per = rt["realtime"]["partitions"]["per_partition"]
        .as_array()
        .unwrap();
    assert_eq!(per.len(), 2);
    // A tenth of each window, and a little for the spin that crosses into
    // the next window before it is counted there.
    for (k, p) in per.iter().enumerate() {
        let spin = p["spin_share"].as_f64().unwrap();
        assert!((0.0..=0.11).contains(&spin), "partition {k}: {p}");
        assert!(
            spin <= p["cpu_share"].as_f64().unwrap(),
            "partition {k}: {p}"
        );
        assert!(p["demotions"].is_u64(), "partition {k}: {p}");
    }
    // Each sleep ends some microseconds before the next datagram, and the
    // thread spins through them.
    assert!(
        per.iter().any(|p| p["spin_share"].as_f64().unwrap() > 0.0),
        "{per:?}"
    );
    assert_eq!(rt["realtime"]["spin_share"], per[0]["spin_share"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--partitions N` in real time: each partition keeps to the wall clock
/// on a thread of its own, frames cross the cut both ways, and a run whose
/// frames all crossed in time gives the flows of the same run as fast as
/// possible (the model is the same; only who runs it, and when, differs).
#[test]
fn real_time_partitions_exchange_frames_and_give_the_simulated_results() {
    let dir = tmpdir("rt-partitions");
    let go = |tag: &str, extra: &[&str]| {
        let json = dir.join(format!("{tag}.json"));
        let mut args = vec![
            "run",
            "examples/given-cut.toml",
            "--quiet",
            "--duration",
            "1s",
            "--partitions",
            "2",
            "--json",
            json.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = netloop(&args);
        assert!(
            out.status.success(),
            "{tag}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&json).unwrap()).unwrap()
    };
    let sim = go("afap", &[]);
    let pcaps = dir.join("pcap");
    let rt = go(
        "rt",
        &[
            "--realtime",
            "--pcap",
            "r2-h2",
            "--pcap-dir",
            pcaps.to_str().unwrap(),
        ],
    );
    // The capture of the cut link holds what both partitions sent on it
    // (each direction's transmitter is in another partition), in time
    // order, and no part file is left.
    let names: Vec<String> = std::fs::read_dir(&pcaps)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["r2-h2.pcap"]);
    let link = rt["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "r2-h2")
        .unwrap();
    let (ab, ba) = (
        link["a_to_b"]["sent_packets"].as_u64().unwrap(),
        link["b_to_a"]["sent_packets"].as_u64().unwrap(),
    );
    assert!(ab > 0 && ba > 0, "{link}");
    let mut reader =
        pcap_file::pcap::PcapReader::new(std::fs::File::open(pcaps.join("r2-h2.pcap")).unwrap())
            .unwrap();
    let mut stamps = Vec::new();
    while let Some(p) = reader.next_packet() {
        stamps.push(p.unwrap().timestamp);
    }
    assert_eq!(stamps.len() as u64, ab + ba);
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "in time order");
    assert_eq!(rt["pcap"][0]["frames"], ab + ba);
    let parts = &rt["realtime"]["partitions"];
    assert_eq!(parts["count"], 2, "{parts}");
    assert_eq!(parts["cut_links"], serde_json::json!(["r2-h2"]));
    let per = parts["per_partition"].as_array().unwrap();
    assert_eq!(per.len(), 2);
    // Late events put down to a thread held off its CPU: each partition's
    // among its own, and the run's are theirs summed.
    let held: u64 = per
        .iter()
        .map(|p| p["late_held_off"].as_u64().unwrap())
        .sum();
    assert_eq!(rt["realtime"]["late_held_off"], held);
    for (k, p) in per.iter().enumerate() {
        assert!(
            p["late_held_off"].as_u64().unwrap() <= p["late_events"].as_u64().unwrap(),
            "partition {k}: {p}"
        );
        assert!(p["held_off_ns"].is_u64(), "partition {k}: {p}");
        assert!(p["events"].as_u64().unwrap() > 0, "partition {k}: {p}");
        assert!(p["frames_in"].as_u64().unwrap() > 0, "partition {k}: {p}");
        assert!(p["frames_out"].as_u64().unwrap() > 0, "partition {k}: {p}");
    }
    assert_eq!(rt["conservation"]["unaccounted"], 0);
    assert_eq!(
        rt["conservation"]["created_total"], sim["conservation"]["created_total"],
        "the same frames were made"
    );
    let kept = rt["realtime"]["kept_up"].as_bool().unwrap();
    let late_in: u64 = per
        .iter()
        .map(|p| p["late_frames_in"].as_u64().unwrap())
        .sum();
    assert_eq!(kept, late_in == 0 && rt["realtime"]["late_events"] == 0);
    if late_in == 0 {
        // Every frame crossed before it was due: the model ran as it does
        // as fast as possible (an event that ran late still ran at its
        // simulated time, in its order).
        assert_eq!(rt["flows"], sim["flows"]);
        assert_eq!(rt["conservation"], sim["conservation"]);
    } else {
        eprintln!("frames crossed the cut late (a busy machine): results not compared");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A topology file may say which partition each node runs in: the cut
/// follows it (not the automatic one, which would cut the longest link
/// r1-r2), the results are one partition's, and a cut the file makes
/// impossible is refused by name.
#[test]
fn the_file_can_give_each_nodes_partition() {
    let dir = tmpdir("given-partitions");
    let run = |text: &str, n: &str| {
        // One file per text: the results name it.
        let file = dir.join(format!("t{}.toml", text.len()));
        std::fs::write(&file, text).unwrap();
        let json = dir.join(format!("t{n}.json"));
        let out = netloop(&[
            "run",
            file.to_str().unwrap(),
            "--quiet",
            "--partitions",
            n,
            "--json",
            json.to_str().unwrap(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        if !out.status.success() {
            return Err(err);
        }
        let full: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        Ok((results(&json), full["wall"]["partitions"].clone()))
    };
    // One partition ignores the fields, and says so.
    let out = netloop(&["run", "examples/given-cut.toml", "--no-progress"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("gives each node a partition; they are used with --partitions N"),
        "{err}"
    );
    let text = std::fs::read_to_string(repo().join("examples/given-cut.toml")).unwrap();
    let (one, _) = run(&text, "1").unwrap();
    let (two, report) = run(&text, "2").unwrap();
    assert!(one == two, "the given cut changed the results");
    assert_eq!(report["cut_links"], serde_json::json!(["r2-h2"]));
    // A partition number the run does not have.
    let r2 = "name = \"r2\"\nkind = \"router\"\npartition = 0";
    assert!(text.contains(r2));
    let err = run(&text.replace(r2, &r2.replace('0', "2")), "2").unwrap_err();
    assert!(
        err.contains("node 'r2': partition 2 is not below the 2 partitions of the run"),
        "{err}"
    );
    // A cut through a link that gives no lookahead.
    let err = run(&text.replace("delay = \"2ms\"", "delay = \"0s\""), "2").unwrap_err();
    assert!(
        err.contains("link 'r2-h2' cannot be cut: its least delay is 0"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A netloop built without MPI says how to get it when asked for `--mpi`.
#[cfg(not(feature = "mpi"))]
#[test]
fn mpi_without_the_feature_says_how_to_build_it() {
    let out = netloop(&["run", "examples/path-mtu.toml", "--mpi"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("built without MPI") && err.contains("--features mpi"),
        "{err}"
    );
}

/// Runs netloop with `args` (in the repository) into a reader that takes
/// its first line of output and leaves (`| head -1`); asserts that netloop
/// still ended with success and without a panic, and returns that line.
fn first_line_then_close(args: &[&str]) -> String {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_netloop"))
        .current_dir(repo())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("netloop runs");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is dropped here: everything after the first line meets a
    // closed pipe.
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    first
}

/// `netloop check --verbose | head`: the reader stops early, and netloop
/// ends quietly with success instead of panicking on the closed pipe.
#[test]
fn check_verbose_into_a_reader_that_stops_early_ends_quietly() {
    let dir = tmpdir("check-head");
    // A router with 3 000 hosts: far more output than a pipe holds.
    let mut topo = String::from("[[node]]\nname = \"r\"\nkind = \"router\"\n");
    for i in 0..3000 {
        topo += &format!("[[node]]\nname = \"h{i}\"\nkind = \"host\"\n");
        topo += &format!("[[link]]\nendpoints = [\"r\", \"h{i}\"]\n");
    }
    let file = dir.join("big.toml");
    std::fs::write(&file, topo).unwrap();
    let first = first_line_then_close(&["check", file.to_str().unwrap(), "--verbose"]);
    assert!(first.contains(": ok — 3001 nodes"), "{first}");
}

/// `netloop run FILE --json R | head -1`: once the reader has left, netloop
/// runs to the end, writes its results and exits with success, where its
/// next line used to panic on the closed pipe (and lose the results). The
/// pipe's reader is closed before netloop starts, so that every line it
/// prints meets a closed pipe however fast it prints.
#[test]
fn a_run_into_a_reader_that_stops_early_still_writes_its_results() {
    let dir = tmpdir("run-head");
    let json = dir.join("r.json");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_netloop"))
        .current_dir(repo())
        .args([
            "run",
            "examples/link-flap.toml",
            "--json",
            json.to_str().unwrap(),
        ])
        .stdout(writer)
        .output()
        .expect("netloop runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
    let r = results(&json);
    assert_eq!(r["conservation"]["unaccounted"], 0, "{}", r["conservation"]);
}

/// `netloop run` and `bench` put their heap in transparent huge pages where
/// the kernel gives them to memory that asks (`madvise`), unless
/// `NETLOOP_HUGE_PAGES=0`; the benchmark reports how much was in them.
#[test]
fn a_benchmark_runs_with_its_heap_in_huge_pages_unless_told_not_to() {
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if !thp.contains("[madvise]") {
        eprintln!("skipped: transparent huge pages are not `madvise` here ({thp:?})");
        return;
    }
    let dir = tmpdir("huge-pages");
    let huge_kb = |off: bool| {
        let json = dir.join(format!("off-{off}.json"));
        let mut c = Command::new(env!("CARGO_BIN_EXE_netloop"));
        c.args(["bench", "speed", "--flows", "1000", "--duration", "1"])
            .args(["--repeats", "1", "--no-ns3", "--json"])
            .arg(&json)
            .env_remove("GLIBC_TUNABLES");
        if off {
            c.env("NETLOOP_HUGE_PAGES", "0");
        } else {
            c.env_remove("NETLOOP_HUGE_PAGES");
        }
        let out = c.output().expect("netloop runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        v["rows"][0]["netloop"]["samples"][0]["huge_pages_kb"]
            .as_u64()
            .expect("huge_pages_kb reported")
    };
    let on = huge_kb(false);
    assert!(on >= 2048, "{on} KiB in huge pages with them asked for");
    assert_eq!(huge_kb(true), 0, "NETLOOP_HUGE_PAGES=0");
}

/// `bench speed --baseline BIN` runs an earlier build beside this one,
/// interleaved, and reports its runs and the ratio; a missing or failing
/// baseline is an error naming it. (This build stands in for the earlier
/// one: they take the same options.)
#[test]
fn a_benchmark_measures_an_earlier_build_beside_this_one() {
    let dir = tmpdir("baseline");
    let json = dir.join("speed.json");
    let me = env!("CARGO_BIN_EXE_netloop");
    let out = Command::new(me)
        .args(["bench", "speed", "--flows", "1", "--duration", "1"])
        .args(["--repeats", "2", "--no-ns3", "--baseline", me, "--json"])
        .arg(&json)
        .output()
        .expect("netloop runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("vs baseline (target ≥ 5×)"), "{stdout}");
    assert_eq!(stderr.matches("run 2/2: baseline").count(), 1, "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let row = &v["rows"][0];
    let base = row["baseline"]["samples"]
        .as_array()
        .expect("baseline runs");
    assert_eq!(base.len(), 2, "{}", row["baseline"]);
    for s in base {
        assert_eq!(
            s["packets_received"], row["netloop"]["samples"][0]["packets_received"],
            "the same network, the same packets"
        );
        assert!(s["wall_s"].as_f64().unwrap() > 0.0);
    }
    let ratio = row["baseline"]["median_wall_s"].as_f64().unwrap()
        / row["netloop"]["median_wall_s"].as_f64().unwrap();
    let reported = row["vs_baseline"].as_f64().expect("vs_baseline");
    assert!((reported - ratio).abs() < 1e-9, "{reported} vs {ratio}");

    // A bare name is the file in the working directory, not a program on
    // PATH (which has no `nl-base`).
    std::os::unix::fs::symlink(me, dir.join("nl-base")).unwrap();
    let out = Command::new(me)
        .current_dir(&dir)
        .args(["bench", "speed", "--flows", "1", "--duration", "1"])
        .args([
            "--repeats",
            "1",
            "--no-ns3",
            "--baseline",
            "nl-base",
            "--json",
        ])
        .arg(dir.join("bare.json"))
        .output()
        .expect("netloop runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for (bin, says) in [
        (
            "/nonexistent/netloop",
            "--baseline /nonexistent/netloop: no such file",
        ),
        (
            "/bin/false",
            "--baseline /bin/false: its bench speed failed",
        ),
    ] {
        let out = Command::new(me)
            .args(["bench", "speed", "--flows", "1", "--duration", "1"])
            .args(["--repeats", "1", "--no-ns3", "--baseline", bin, "--json"])
            .arg(dir.join("no.json"))
            .output()
            .expect("netloop runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bin}: {stderr}");
        assert!(stderr.contains(says), "{bin}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
