//! Partitions on MPI ranks (`mpirun -np N netloop run FILE --mpi`): results
//! equal to one partition's on 2, 4 and 8 ranks (more ranks than this
//! machine's cores: `--oversubscribe`), the command of docs/partitions.md,
//! and the errors. Built only with the `mpi` feature (scripts/test's MPI
//! stage; CI installs Open MPI).
#![cfg(feature = "mpi")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("netloop-mpi-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A command run as the docs show it, with Open MPI allowed to run as root
/// (CI runs as root; Open MPI refuses that unless told).
fn command(program: &str) -> Command {
    let mut c = Command::new(program);
    c.current_dir(repo())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    c
}

fn mpirun(ranks: u32, args: &[&str]) -> Output {
    command("mpirun")
        .args(["--oversubscribe", "-np", &ranks.to_string()])
        .arg(env!("CARGO_BIN_EXE_netloop"))
        .args(args)
        .output()
        .expect("mpirun runs (Open MPI or MPICH installed)")
}

/// The results JSON at `path`, without `wall`, and `wall.partitions`.
fn results(path: &Path) -> (serde_json::Value, serde_json::Value) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let parts = v["wall"]["partitions"].clone();
    v.as_object_mut().unwrap().remove("wall");
    (v, parts)
}

/// Asserts `out` is a success, showing what it printed if not.
fn succeeded(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asserts `out` failed saying `want`.
fn refused(out: &Output, want: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "succeeded where {want:?} was due");
    assert!(err.contains(want), "{err}");
}

/// The time series' interval in these runs: not a divisor of the runs'
/// durations (their last sample is off the grid).
const EVERY: &str = "70ms";

fn alone(file: &str, json: &Path, pcaps: &Path) {
    let out = command(env!("CARGO_BIN_EXE_netloop"))
        .args(["run", file, "--quiet", "--json", json.to_str().unwrap()])
        .args(["--pcap", "all", "--pcap-dir", pcaps.to_str().unwrap()])
        .args(["--stats-interval", EVERY])
        .output()
        .unwrap();
    succeeded(&out, file);
}

/// The files in `dir`, by name, with their bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn ranks_give_the_results_of_one_partition() {
    let dir = tmpdir("ranks");
    for (file, ranks) in [
        ("examples/path-mtu.toml", &[2u32, 4, 8][..]),
        // Link changes on a link that the cut crosses.
        ("examples/link-flap.toml", &[2][..]),
        // A cut the file gives (`partition` on each node).
        ("examples/given-cut.toml", &[2][..]),
    ] {
        let one = dir.join("one.json");
        let one_pcaps = dir.join("pcap-one");
        let _ = std::fs::remove_dir_all(&one_pcaps);
        alone(file, &one, &one_pcaps);
        let (want, none) = results(&one);
        assert!(none.is_null());
        let want_pcaps = files(&one_pcaps);
        assert!(!want_pcaps.is_empty());
        let want_series = std::fs::read(one.with_extension("series.jsonl")).unwrap();
        assert!(want_series.len() > 1000, "{file}: a series");
        for &n in ranks {
            let json = dir.join(format!("mpi{n}.json"));
            let pcaps = dir.join(format!("pcap{n}"));
            let _ = std::fs::remove_dir_all(&pcaps);
            let out = mpirun(
                n,
                &[
                    "run",
                    file,
                    "--quiet",
                    "--mpi",
                    "--json",
                    json.to_str().unwrap(),
                    "--pcap",
                    "all",
                    "--pcap-dir",
                    pcaps.to_str().unwrap(),
                    "--stats-interval",
                    EVERY,
                ],
            );
            succeeded(&out, &format!("{file} on {n} ranks"));
            let (got, parts) = results(&json);
            assert!(got == want, "{file}: {n} ranks changed the results");
            // Rank 0 wrote the time series, from every rank's counts: the
            // one partition's, byte for byte.
            let series = std::fs::read(json.with_extension("series.jsonl")).unwrap();
            assert!(
                series == want_series,
                "{file}: {n} ranks changed the time series"
            );
            // Each rank's part of each capture went to rank 0, which
            // merged them into the files of one partition, byte for byte,
            // and left no part behind.
            let got_pcaps = files(&pcaps);
            let names = |v: &[(String, Vec<u8>)]| v.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
            assert_eq!(names(&got_pcaps), names(&want_pcaps), "{file} on {n} ranks");
            for ((name, a), (_, b)) in want_pcaps.iter().zip(&got_pcaps) {
                assert!(a == b, "{file} on {n} ranks: {name} differs");
            }
            assert_eq!(parts["transport"], "mpi");
            assert_eq!(parts["count"], u64::from(n));
            assert!(!parts["cut_links"].as_array().unwrap().is_empty());
            if file.ends_with("given-cut.toml") {
                assert_eq!(parts["cut_links"], serde_json::json!(["r2-h2"]));
            }
            let per = parts["per_partition"].as_array().unwrap();
            assert_eq!(per.len(), n as usize);
            let sent: u64 = per.iter().map(|p| p["frames_out"].as_u64().unwrap()).sum();
            let got_in: u64 = per.iter().map(|p| p["frames_in"].as_u64().unwrap()).sum();
            assert!(sent > 0);
            assert_eq!(sent, got_in, "every frame sent to a rank arrived");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `mpirun` commands of docs/partitions.md, as written (`netloop` is
/// this build's binary, on `PATH`).
#[test]
fn the_docs_mpirun_commands_work_as_written() {
    let doc = std::fs::read_to_string(repo().join("docs/partitions.md")).unwrap();
    let commands: Vec<&str> = doc
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("mpirun "))
        .collect();
    assert!(
        !commands.is_empty(),
        "docs/partitions.md shows an mpirun command"
    );
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_netloop")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let scratch = tmpdir("docs");
    std::os::unix::fs::symlink(repo().join("examples"), scratch.join("examples")).unwrap();
    for c in commands {
        let out = command("bash")
            .current_dir(&scratch)
            .env("PATH", &path)
            .args(["-c", c])
            .output()
            .unwrap();
        succeeded(&out, c);
        let json = c
            .split_whitespace()
            .skip_while(|w| *w != "--json")
            .nth(1)
            .expect("the command writes JSON");
        let (_, parts) = results(&scratch.join(json));
        assert_eq!(parts["transport"], "mpi", "{c}");
    }
    let _ = std::fs::remove_dir_all(&scratch);
}

#[test]
fn partitions_that_are_not_the_ranks_and_real_hosts_are_refused() {
    let out = mpirun(
        2,
        &[
            "run",
            "examples/path-mtu.toml",
            "--mpi",
            "--partitions",
            "3",
        ],
    );
    refused(&out, "--partitions 3 with --mpi on 2 ranks");
    let out = mpirun(2, &["run", "examples/real-hosts.toml", "--mpi"]);
    refused(&out, "is a real host");
}

/// `bench speed --mpi-ranks` runs the benchmark's network on ranks beside
/// threads, and fails unless every run's results equal one partition's.
#[test]
fn the_benchmark_runs_on_ranks_and_checks_the_results() {
    let dir = tmpdir("bench");
    let json = dir.join("speed.json");
    let out = command(env!("CARGO_BIN_EXE_netloop"))
        .args([
            "bench",
            "speed",
            "--scenario",
            "wan",
            "--sites",
            "8",
            "--flows",
            "40",
        ])
        .args([
            "--duration",
            "1",
            "--load",
            "200",
            "--repeats",
            "1",
            "--no-ns3",
        ])
        .args(["--partitions", "2", "--mpi-ranks", "2", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    succeeded(&out, "bench speed --mpi-ranks 2");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let rows = v["rows"][0]["partitioned"].as_array().unwrap();
    let ways: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r["partitions"].as_u64().unwrap(),
                r["transport"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(ways, [(2, "threads"), (2, "mpi")]);
    assert!(rows.iter().all(|r| r["identical"] == true));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bench sync` times idle rounds on threads and on ranks; every rank must
/// receive every frame sent to it (the rank part fails the job if not) and
/// each case's figures are in the JSON.
#[test]
fn the_sync_benchmark_times_rounds_on_threads_and_ranks() {
    let dir = tmpdir("sync");
    let json = dir.join("sync.json");
    let out = command(env!("CARGO_BIN_EXE_netloop"))
        .args(["bench", "sync", "--partitions", "1,2", "--mpi-ranks", "2,3"])
        .args([
            "--rounds",
            "300",
            "--frames",
            "0,3",
            "--repeats",
            "2",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    succeeded(&out, "bench sync");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let cases: Vec<_> = v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let secs = c["round_seconds"].as_array().unwrap();
            assert_eq!(secs.len(), 2, "{c}");
            assert!(
                secs.iter().all(|s| s.as_f64().unwrap() > 0.0),
                "a round takes time: {c}"
            );
            (
                c["transport"].as_str().unwrap().to_string(),
                c["partitions"].as_u64().unwrap(),
                c["frames_per_round"].as_u64().unwrap(),
            )
        })
        .collect();
    let want: Vec<_> = [0u64, 3]
        .iter()
        .flat_map(|&f| {
            [("threads", 1), ("threads", 2), ("mpi", 2), ("mpi", 3)]
                .map(|(t, p)| (t.to_string(), p, f))
        })
        .collect();
    assert_eq!(cases, want);
    assert!(String::from_utf8_lossy(&out.stdout).contains("per round (median)"));
    let _ = std::fs::remove_dir_all(&dir);
}
