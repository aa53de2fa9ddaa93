//! End-to-end tests of the real-time mode with real hosts: real programs
//! (ping, iperf3, traceroute, a raw-socket frame injector) in network
//! namespaces that `netloop run` creates, talking through simulated routers.
//!
//! Every test needs root (it creates network namespaces) and says so and
//! returns when it is not root; a test that needs a program that is not
//! installed says which and returns. The tests run one at a time (a global
//! lock), each identifies its run by the run id netloop prints
//! (`h1: namespace nl-<id>-h1, …`), and each checks at its end that the run
//! left nothing behind: no namespace `nl-<id>-*`, no device `nl<id>h*`, no
//! record `/run/netloop/<id>.json`. Processes are only ever signalled by pid:
//! the netloop child a test spawned.
//!
//! Addresses are all from 198.18.0.0/15; nothing is sent anywhere else.
//! Timing assertions are loose: they catch gross errors (a delay missing or
//! applied twice), not microseconds.

mod common;

use common::*;
use nix::sys::signal::Signal;
use serde_json::Value;
use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// 1. ping and TCP through two simulated routers
// ---------------------------------------------------------------------------

#[test]
fn ping_and_tcp_between_two_real_hosts_through_two_simulated_routers() {
    let _serial = serial();
    if !have_root() || !have(&["ping", "iperf3"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("ping-tcp");
    let topo = s.write(
        "t.toml",
        &two_routers(
            "15s",
            "10ms",
            &(cmd("ping -c 5 -i 0.2 198.18.2.2", "200ms", true)
                + &cmd("iperf3 -c 198.18.2.2 -t 2 -J", "1500ms", true)),
            &cmd("iperf3 -s -1", "0s", false),
            "",
        ),
    );
    let (r, id) = run_to_end(&s, &topo);
    check_realtime_results(&r, &id);
    let rt = &r["realtime"];
    assert_eq!(rt["end"], "control", "ends when h1's programs have exited");

    // ping: five replies, each a little over 2 × 10 ms.
    let ping = command(&r, "h1", 0);
    assert_eq!(ping["exit_code"], 0, "{ping}");
    assert_eq!(ping["wait"], true);
    assert!(ping["started_s"].as_f64().unwrap() >= 0.2);
    let log = read_log(&r, "h1", 0);
    assert_eq!(ping_summary(&log), Some((5, 5)), "{log}");
    let rtts = ping_replies(&log);
    assert_eq!(rtts.len(), 5, "{log}");
    for (seq, rtt) in &rtts {
        assert!(
            (19.9..60.0).contains(rtt),
            "icmp_seq={seq}: RTT {rtt} ms, expected about 20 ms\n{log}"
        );
    }

    // iperf3: more than a megabyte across.
    let iperf = command(&r, "h1", 1);
    assert_eq!(iperf["exit_code"], 0, "{iperf}");
    let log = read_log(&r, "h1", 1);
    let (j, mbps) = iperf3_report(&log);
    let received = j["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0);
    assert!(received > 1e6, "iperf3 received {received} bytes\n{log}");
    assert!(
        mbps < 1000.0,
        "faster than the 1 Gbit/s links: {mbps} Mbit/s"
    );

    // The model's side of it.
    assert_eq!(u(&link(&r, "r1-r2")["a_to_b"]["delay_ns"]), 10_000_000);
    let r1 = &node(&r, "r1")["stats"];
    assert!(u(&r1["forwarded"]) > 1000, "{r1}");
    assert_eq!(node(&r, "h1")["kind"], "namespace");
    assert!(node(&r, "h1")["stats"].is_null());
    assert!(
        u(&rt["rx_frames"]) > 1000 && u(&rt["tx_frames"]) > 1000,
        "{rt}"
    );
    for h in ["h1", "h2"] {
        let p = port(&r, h);
        assert!(u(&p["rx_frames"]) > 0 && u(&p["tx_frames"]) > 0, "{p}");
        assert_eq!(u(&p["rx_malformed"]), 0, "{p}");
        assert_eq!(u(&p["rx_truncated"]), 0, "{p}");
        assert_eq!(u(&p["rx_gso_refused"]), 0, "{p}");
    }
    // The hosts keep their offloads: iperf3's sender hands over TSO
    // super-frames, read whole and cut into the frames the model carried
    // (each at most the link's MTU: none was dropped for it).
    let sender = port(&r, "h1");
    assert!(
        u(&sender["rx_gso_frames"]) > 10,
        "h1's TCP sends came as no super-frames: {sender}"
    );
    assert!(
        r["conservation"]["dropped"]["mtu_exceeded"].is_null(),
        "{}",
        r["conservation"]["dropped"]
    );
    let hosts = rt["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 2);
    assert_eq!(hosts[0]["namespace"], format!("nl-{id}-h1"));
    assert_eq!(hosts[0]["address"], "198.18.1.2/24");
    assert_eq!(hosts[1]["address"], "198.18.2.2/24");
    println!(
        "ping RTTs {:?} ms; iperf3 {mbps:.0} Mbit/s; kept up: {}, lateness max {} ns; boundary lost {}; test took {:.1} s",
        rtts.values().collect::<Vec<_>>(),
        rt["kept_up"],
        rt["event_lateness"]["max_ns"],
        rt["boundary_lost"],
        t0.elapsed().as_secs_f64()
    );
}

/// Linux's TCP with ECN on (`net.ipv4.tcp_ecn = 1` in the sender's
/// namespace) through a CoDel queue that marks: the bottleneck marks
/// Congestion Experienced on the sender's ECT packets instead of dropping
/// them, the receiver echoes it, and the sender slows down with next to no
/// loss; the marks are counted apart from drops.
#[test]
fn codel_marks_linux_tcp_with_ecn_instead_of_dropping() {
    let _serial = serial();
    if !have_root() || !have(&["iperf3", "sysctl"]) {
        return;
    }
    let s = Scratch::new("ecn");
    let topo = s.write(
        "t.toml",
        &two_routers(
            "15s",
            "10ms",
            &cmd(
                "sysctl -qw net.ipv4.tcp_ecn=1 && iperf3 -c 198.18.2.2 -t 4 -J",
                "500ms",
                true,
            ),
            &cmd("iperf3 -s -1", "0s", false),
            // r2 → h2: the bottleneck, CoDel marking.
            "rate = \"10Mbps\"\nqueue = { discipline = \"codel\", ecn = true }\n",
        ),
    );
    let (r, id) = run_to_end(&s, &topo);
    check_realtime_results(&r, &id);
    let iperf = command(&r, "h1", 0);
    assert_eq!(iperf["exit_code"], 0, "{iperf}\n{}", read_log(&r, "h1", 0));
    let (_, mbps) = iperf3_report(&read_log(&r, "h1", 0));
    let bottleneck = &link(&r, "r2-h2")["a_to_b"];
    let marked = u(&bottleneck["ecn_marked"]);
    let drops = counts(&bottleneck["drops"]);
    println!("iperf3 {mbps:.2} Mbit/s, {marked} marked, drops {drops:?}");
    // CoDel acted, by marking: Linux's ECT packets were marked, not
    // dropped (a drop-only CoDel drops tens of packets in such a run). A
    // packet that is not ECN-capable is still dropped when CoDel is in its
    // dropping state: a retransmission (Linux sends those without ECT, RFC
    // 3168 §6.1.5) or the handshake; seen once in a run (1 drop beside 409
    // marks), so a few are allowed, far fewer than the marks.
    assert!(marked >= 5, "{bottleneck}");
    let aqm_drops = drops.get("aqm_drop").copied().unwrap_or(0);
    assert!(aqm_drops * 20 <= marked, "{bottleneck}");
    // The sender answered the marks: the line stayed busy, and the
    // queue did not fill.
    assert!(mbps > 7.0, "{mbps} Mbit/s");
    assert_eq!(
        drops.get("queue_full").copied().unwrap_or(0),
        0,
        "{bottleneck}"
    );
    assert_eq!(r["conservation"]["unaccounted"], 0);
}

/// Real hosts on one partition, a simulated router on another: ping
/// crosses the cut twice each way, both partitions keep to the wall clock,
/// and the report gives each one's figures.
#[test]
fn real_hosts_ping_across_a_router_in_another_partition() {
    let _serial = serial();
    if !have_root() || !have(&["ping"]) {
        return;
    }
    let s = Scratch::new("rt-partitions");
    let topo = s.write(
        "t.toml",
        &format!(
            r#"[run]
duration = "15s"

[[node]]
name = "h1"
kind = "namespace"
partition = 0
{ping}
[[node]]
name = "r1"
kind = "router"
partition = 0

[[node]]
name = "r2"
kind = "router"
partition = 1

[[node]]
name = "r3"
kind = "router"
partition = 0

[[node]]
name = "h2"
kind = "namespace"
partition = 0

[[link]]
endpoints = ["h1", "r1"]
addresses = ["198.18.1.2/24", "198.18.1.1/24"]

[[link]]
endpoints = ["r1", "r2"]
delay = "5ms"
addresses = ["198.18.3.1/24", "198.18.3.2/24"]

[[link]]
endpoints = ["r2", "r3"]
delay = "5ms"
addresses = ["198.18.4.1/24", "198.18.4.2/24"]

[[link]]
endpoints = ["r3", "h2"]
addresses = ["198.18.2.1/24", "198.18.2.2/24"]
"#,
            ping = cmd("ping -c 5 -i 0.2 198.18.2.2", "200ms", true)
        ),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let (run, id, st) = LiveRun::start(&[
        "run",
        &topo,
        "--partitions",
        "2",
        "--json",
        &json,
        "--log-dir",
        &logs,
    ])
    .finish(Duration::from_secs(40));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(0), "{}", run.output());
    let r = load_json(&json);
    check_realtime_results(&r, &id);
    let log = read_log(&r, "h1", 0);
    assert_eq!(ping_summary(&log), Some((5, 5)), "{log}");
    for (seq, rtt) in ping_replies(&log) {
        assert!(
            (19.9..60.0).contains(&rtt),
            "icmp_seq={seq}: RTT {rtt} ms, expected about 20 ms\n{log}"
        );
    }
    let parts = &r["realtime"]["partitions"];
    assert_eq!(parts["count"], 2, "{parts}");
    assert_eq!(u(&parts["lookahead_ns"]), 5_000_000);
    let per = parts["per_partition"].as_array().unwrap();
    assert_eq!(u(&per[0]["nodes"]), 4);
    assert_eq!(u(&per[1]["nodes"]), 1);
    // r2 forwarded every echo and reply (ARP and neighbours' frames too).
    assert!(u(&per[1]["frames_in"]) >= 10, "{parts}");
    assert!(u(&per[1]["frames_out"]) >= 10, "{parts}");
    assert!(u(&node(&r, "r2")["stats"]["forwarded"]) >= 10);
    // The run ended when ping exited: every partition stands at that
    // moment, none ran past it.
    let end = r["realtime"]["sim_seconds"].as_f64().unwrap();
    for (k, p) in per.iter().enumerate() {
        assert_eq!(p["end_s"].as_f64(), Some(end), "partition {k}: {parts}");
    }
    assert_eq!(r["realtime"]["end"], "control");
}

// ---------------------------------------------------------------------------
// 2. traceroute sees each simulated router
// ---------------------------------------------------------------------------

/// traceroute's hops: (hop, address or "*", RTT in ms if any).
fn traceroute_hops(log: &str) -> Vec<(u32, String, Option<f64>)> {
    log.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let hop = w.first()?.parse().ok()?;
            let addr = w.get(1)?.to_string();
            let rtt = w.get(2).and_then(|t| t.parse().ok());
            Some((hop, addr, rtt))
        })
        .collect()
}

#[test]
fn traceroute_lists_each_simulated_router_then_the_host() {
    let _serial = serial();
    if !have_root() || !have(&["traceroute"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("traceroute");
    let topo = s.write(
        "t.toml",
        &two_routers(
            "15s",
            "10ms",
            &(cmd(
                "traceroute -n -q 1 -w 1 -N 1 -m 6 198.18.2.2",
                "100ms",
                true,
            ) + &cmd(
                "traceroute -I -n -q 1 -w 1 -N 1 -m 6 198.18.2.2",
                "100ms",
                true,
            )),
            "",
            "",
        ),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let (run, id, st) = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs])
        .finish(Duration::from_secs(40));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(0), "{}", run.output());
    let r = load_json(&json);
    check_realtime_results(&r, &id);
    assert_eq!(r["realtime"]["boundary_lost"], 0);
    for (k, how) in [(0, "UDP"), (1, "ICMP")] {
        assert_eq!(command(&r, "h1", k)["exit_code"], 0);
        let log = read_log(&r, "h1", k);
        let hops = traceroute_hops(&log);
        let addrs: Vec<&str> = hops.iter().map(|h| h.1.as_str()).collect();
        // r1 and r2 answer from the interfaces facing h1, then h2 itself.
        assert_eq!(
            addrs,
            ["198.18.1.1", "198.18.3.2", "198.18.2.2"],
            "traceroute ({how}):\n{log}"
        );
        let rtt = |i: usize| hops[i].2.unwrap_or_else(|| panic!("no RTT:\n{log}"));
        assert!(rtt(0) < 10.0, "hop 1 is 20 us away:\n{log}");
        for i in [1, 2] {
            assert!(
                (19.9..60.0).contains(&rtt(i)),
                "hop {} is behind the 10 ms link:\n{log}",
                i + 1
            );
        }
    }
    for router in ["r1", "r2"] {
        let st = &node(&r, router)["stats"];
        assert!(
            u(&st["icmp_sent"]["time_exceeded"]) >= 2,
            "{router} sent time-exceeded for both traceroutes: {st}"
        );
    }
    println!("test took {:.1} s", t0.elapsed().as_secs_f64());
}

// ---------------------------------------------------------------------------
// 2a. probe rtt on a cold, long path
// ---------------------------------------------------------------------------

/// `netloop probe rtt` across a cold 300 ms link, no traffic before it: its
/// first probes wait for address resolution at every hop (about 1.2 s here).
/// The warm-up must wait for replies, so that every reported round trip is
/// the path's (600 ms and a little), and the report must say what the
/// warm-up took. Probes nobody answers end in an error that says why.
#[test]
fn probe_rtt_waits_out_a_cold_path_and_reports_only_warm_round_trips() {
    let _serial = serial();
    if !have_root() {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("probe-cold");
    let json = s.path("probe.json");
    let h1 = cmd(
        &format!("{NETLOOP} probe rtt 198.18.2.2 --count 30 --interval 10ms --json {json}"),
        "0s",
        true,
    ) + &cmd(
        // A port with no echo server: h2 says port unreachable.
        &format!("{NETLOOP} probe rtt 198.18.2.2 --port 7999 --count 3 --warmup-timeout 1s"),
        "3s",
        true,
    ) + &cmd(
        // An address with no host: nothing ever answers.
        &format!("{NETLOOP} probe rtt 198.18.2.9 --count 3 --warmup-timeout 1s"),
        "3s",
        true,
    );
    let h2 = cmd(&format!("{NETLOOP} probe echo --idle 20s"), "0s", false);
    let topo = s.write("t.toml", &two_routers("20s", "300ms", &h1, &h2, ""));
    let out = s.path("out.json");
    let logs = s.path("logs");
    let (run, id, st) = LiveRun::start(&["run", &topo, "--json", &out, "--log-dir", &logs])
        .finish(Duration::from_secs(40));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(0), "{}", run.output());
    let r = load_json(&out);
    check_realtime_results(&r, &id);
    let log = read_log(&r, "h1", 0);
    assert_eq!(command(&r, "h1", 0)["exit_code"], 0, "{log}");

    // The model's round trip: 2 × 300 ms, 4 × 10 us, and a few microseconds
    // of serialisation at 1 Gbit/s. A reported sample that waited for
    // address resolution is up to 1.2 s.
    let model_ns = 600_040_000u64;
    let margin_ns = 50_000_000u64;
    let p = load_json(&json);
    let rtts: Vec<u64> = p["rtt_ns"].as_array().unwrap().iter().map(u).collect();
    assert_eq!(rtts.len(), 30, "every counted probe answered: {p}\n{log}");
    for (i, &rtt) in rtts.iter().enumerate() {
        assert!(
            (model_ns..model_ns + margin_ns).contains(&rtt),
            "sample {i}: {rtt} ns, the path's round trip is {model_ns} ns: \
             a probe sent before the path was warm was reported\n{log}"
        );
    }
    assert_eq!((u(&p["sent"]), u(&p["received"])), (30, 30), "{p}");
    // The warm-up: it lasted until replies came back (at least one round
    // trip of the cold path), and says so.
    assert!(u(&p["warmup_answered"]) >= 3, "{p}");
    assert!(u(&p["warmup_sent"]) >= u(&p["warmup_answered"]), "{p}");
    assert!(u(&p["first_reply_ns"]) >= model_ns, "{p}");
    assert!(u(&p["warmup_ns"]) >= u(&p["first_reply_ns"]), "{p}");
    assert!(
        log.contains(&format!("warm-up: {} probes", p["warmup_sent"])),
        "{log}"
    );

    // Nobody answers: an error that says why, and exit status 1.
    let refused = read_log(&r, "h1", 1);
    assert_eq!(command(&r, "h1", 1)["exit_code"], 1, "{refused}");
    assert!(
        refused.contains("no echo server answers on 198.18.2.2:7999")
            && refused.contains("port unreachable"),
        "{refused}"
    );
    let silent = read_log(&r, "h1", 2);
    assert_eq!(command(&r, "h1", 2)["exit_code"], 1, "{silent}");
    assert!(
        silent.contains("198.18.2.9:7007 never answered") && silent.contains("--warmup-timeout"),
        "{silent}"
    );
    println!(
        "warm-up {} probes, first reply after {} ms; rtt {}..{} ns; test took {:.1} s",
        p["warmup_sent"],
        u(&p["first_reply_ns"]) / 1_000_000,
        rtts.iter().min().unwrap(),
        rtts.iter().max().unwrap(),
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 2b. programs' output goes to the run's own directory
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// A server that is slow to start holds the run's clock (`ready`)
// ---------------------------------------------------------------------------

/// A UDP echo server that takes 1.5 s to bind (a slow interpreter on a
/// loaded machine), and a client that sends at 0.2 s and waits 2 s for its
/// echo. With `ready = "udp:7000"` the clock starts once the server is
/// bound, so the echo comes back; without it the datagram would meet a
/// closed port (the kernel answers port unreachable) and the client exit 1.
/// A server that exits before it is ready, or is not ready in time, fails
/// the run with its log named and leaves nothing behind.
#[test]
fn a_ready_condition_holds_the_clock_until_the_server_listens() {
    let _serial = serial();
    if !have_root() || !have(&["python3"]) {
        return;
    }
    let s = Scratch::new("ready");
    let server = s.write(
        "echo.py",
        "import socket, time\ntime.sleep(1.5)\n\
         s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.bind(('0.0.0.0', 7000))\n\
         while True:\n    d, a = s.recvfrom(2048)\n    s.sendto(d, a)\n",
    );
    let client = s.write(
        "client.py",
        "import socket, sys\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.settimeout(2.0)\ns.sendto(b'hello', ('198.18.2.2', 7000))\n\
         try:\n    print('echo', s.recv(2048).decode())\nexcept OSError as e:\n    \
         print('no echo:', e)\n    sys.exit(1)\n",
    );
    let topo = |ready: &str| {
        one_router(
            "10s",
            "veth",
            &cmd(&format!("python3 -u {client}"), "200ms", true),
            &format!("[[node.command]]\ncmd = \"python3 -u {server}\"\n{ready}\n"),
        )
    };
    let (r, _) = run_to_end(&s, &s.write("ready.toml", &topo("ready = \"udp:7000\"")));
    let log = read_log(&r, "h1", 0);
    assert!(log.contains("echo hello"), "the client's echo: {log}");
    assert_eq!(command(&r, "h1", 0)["exit_code"], 0, "{log}");
    let srv = command(&r, "h2", 0);
    assert_eq!(srv["started_s"], 0.0, "{srv}");
    let waited = srv["ready_after_s"].as_f64().expect("ready_after_s");
    assert!(
        (1.4..8.0).contains(&waited),
        "the clock waited {waited} s for the server"
    );
    assert!(command(&r, "h1", 0)["ready_after_s"].is_null());

    // Without `ready`, the same run loses the first datagram: what the
    // condition fixes is real.
    let (r, _) = run_to_end(&s, &s.write("unready.toml", &topo("")));
    assert_eq!(
        command(&r, "h1", 0)["exit_code"],
        1,
        "{}",
        read_log(&r, "h1", 0)
    );

    // Failures before the clock starts, each at once, naming h2's program
    // and its log, and leaving nothing behind: a server that exits before
    // it is ready; one not ready within its timeout; and one ready already
    // that dies while h1's still starts (its exit was once lost: reported
    // once, and looked at only for the programs not ready yet).
    let quick = s.write(
        "quick.py",
        "import socket, time\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n\
         s.bind(('0.0.0.0', 7002))\ntime.sleep(0.5)\nraise SystemExit(5)\n",
    );
    let slow_h1 =
        "[[node.command]]\ncmd = \"sleep 30\"\nready = \"tcp:7003\"\nready_timeout = \"8s\"\n";
    for (name, h1, h2, want) in [
        (
            "exits",
            "",
            "cmd = \"exit 3\"\nready = \"tcp:7001\"".to_string(),
            "exited (with code 3) before it was ready (tcp:7001)",
        ),
        (
            "slow",
            "",
            "cmd = \"sleep 30\"\nready = \"tcp:7001\"\nready_timeout = \"300ms\"".to_string(),
            "was not ready (tcp:7001: no socket listening on that TCP port) within its ready_timeout of 300ms",
        ),
        (
            "dies",
            slow_h1,
            format!("cmd = \"python3 {quick}\"\nready = \"udp:7002\""),
            "exited (with code 5) before the run's clock started",
        ),
    ] {
        let before = snapshot();
        let topo = s.write(
            &format!("{name}.toml"),
            &one_router("10s", "veth", h1, &format!("[[node.command]]\n{h2}\n")),
        );
        let t0 = Instant::now();
        let out = netloop(&["run", &topo, "--log-dir", &s.path("logs")]);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{name}: {}", text(&out.stdout));
        assert!(
            err.contains("real host 'h2'") && err.contains(want) && err.contains("h2.0.log"),
            "{name}: {err}"
        );
        // Before h1's 8 s timeout: the failure is h2's, when it happens.
        assert!(t0.elapsed() < Duration::from_secs(6), "{name}: it failed at once");
        let left = appeared_since(&before);
        assert!(left.is_empty(), "{name}: a failed start left something: {left:?}");
    }
}

/// Without --log-dir, programs' logs go to the run's own directory under the
/// system's temporary directory (`$TMPDIR/netloop-<run id>/`), which the run
/// prints at the end, and nothing is left in the current directory (it was
/// `./netloop-logs/`: the README's example left it in the repository).
/// Runs netloop as `c` says to its end: its standard output and run id,
/// having checked that it succeeded and left nothing behind.
fn run_that_ends_well(c: &mut Command) -> (String, String) {
    let out = c
        .stdin(std::process::Stdio::null())
        .output()
        .expect("netloop runs");
    ended_well(&out)
}

/// A run's output, once it has ended: it succeeded, left nothing behind,
/// and printed its id. Its stdout and id.
fn ended_well(out: &std::process::Output) -> (String, String) {
    let stdout = text(&out.stdout);
    let id = stdout
        .lines()
        .find_map(run_id_in)
        .unwrap_or_else(|| panic!("no run id:\n{stdout}{}", text(&out.stderr)));
    assert_nothing_left(&id);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    (stdout, id)
}

#[test]
fn programs_output_goes_to_the_runs_own_temporary_directory() {
    let _serial = serial();
    if !have_root() {
        return;
    }
    let s = Scratch::new("log-dir");
    let topo = s.write(
        "t.toml",
        &one_router("10s", "veth", &cmd("echo hello from h1", "0s", true), ""),
    );
    let cwd = s.dir.join("cwd");
    let tmp = s.dir.join("tmp");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    let (stdout, id) = run_that_ends_well(
        Command::new(NETLOOP)
            .args(["run", &topo])
            .current_dir(&cwd)
            .env("TMPDIR", &tmp),
    );
    let left: Vec<_> = std::fs::read_dir(&cwd).unwrap().flatten().collect();
    assert!(
        left.is_empty(),
        "the run left {left:?} in the current directory"
    );
    let dir = tmp.join(format!("netloop-{id}"));
    let log = std::fs::read_to_string(dir.join("h1.0.log"))
        .unwrap_or_else(|e| panic!("{}: {e}\n{stdout}", dir.display()));
    assert_eq!(log, "hello from h1\n");
    assert!(
        stdout.contains(&format!("programs' output: {}/", dir.display())),
        "the run says where the logs went:\n{stdout}"
    );
}

/// A real-time run starts itself again with glibc's huge-page tunable
/// (`netloop_io::memory::restart_with_huge_pages`: its environment as
/// exec'd, in `/proc/PID/environ`, has it), and the programs it starts see
/// the user's `GLIBC_TUNABLES`, not netloop's.
#[test]
fn a_real_time_run_has_huge_pages_and_its_programs_the_users_glibc_tunables() {
    let _serial = serial();
    if !have_root() {
        return;
    }
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    let madvise = thp.contains("[madvise]");
    if !madvise {
        eprintln!(
            "huge pages not checked: transparent huge pages are not `madvise` here ({thp:?})"
        );
    }
    for user in [None, Some("glibc.malloc.arena_max=8")] {
        let s = Scratch::new("tunables");
        let topo = s.write(
            "t.toml",
            &one_router(
                "10s",
                "veth",
                &cmd(
                    "printenv GLIBC_TUNABLES NETLOOP_HUGE_PAGES_RESTARTED; sleep 2",
                    "0s",
                    true,
                ),
                "",
            ),
        );
        let logs = s.path("logs");
        let mut c = Command::new(NETLOOP);
        c.args(["run", &topo, "--log-dir", &logs])
            .env_remove("NETLOOP_HUGE_PAGES")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        match user {
            Some(t) => c.env("GLIBC_TUNABLES", t),
            None => c.env_remove("GLIBC_TUNABLES"),
        };
        let child = c.spawn().expect("netloop runs");
        // The same PID after the restart: its environment as exec'd holds
        // the tunable (after the user's, which glibc, parsing them in
        // place, may have cut off with a NUL) and the restart's mark.
        let environ = format!("/proc/{}/environ", child.id());
        let mark = format!("NETLOOP_HUGE_PAGES_RESTARTED={}", child.id());
        let restarted = |env: &str| {
            env.split('\0').any(|l| l.starts_with(&mark))
                && env
                    .split(['\0', ':', '='])
                    .collect::<Vec<_>>()
                    .windows(2)
                    .any(|w| w == ["glibc.malloc.hugetlb", "1"])
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = String::new();
        while Instant::now() < deadline {
            // (Empty once it has ended: the last environment read stays.)
            if let Ok(b) = std::fs::read(&environ).map(|b| String::from_utf8_lossy(&b).into_owned())
            {
                if !b.is_empty() {
                    seen = b;
                }
            }
            if restarted(&seen) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output().expect("netloop ends");
        let (stdout, _) = ended_well(&out);
        if madvise {
            assert!(
                restarted(&seen),
                "with GLIBC_TUNABLES {user:?}, netloop was not started again with huge pages: {:?}",
                seen.replace('\0', "\n")
            );
        }
        let log = std::fs::read_to_string(Path::new(&logs).join("h1.0.log"))
            .unwrap_or_else(|e| panic!("h1's log: {e}\n{stdout}"));
        let want = user.map_or(String::new(), |t| format!("{t}\n"));
        assert_eq!(log, want, "with GLIBC_TUNABLES {user:?}");
    }
}

// ---------------------------------------------------------------------------
// 3. an attached interface (one end of a veth pair) works like a host
// ---------------------------------------------------------------------------

/// The test's own namespace `nlt-<pid>-a` holding `nltv<pid>b`, the peer of
/// `nltv<pid>a` in the root namespace (marker `nlt`: not netloop's), with
/// 198.18.50.2/24 and a default route via 198.18.50.1; removed on drop.
struct TestNetns {
    ns: String,
    root_end: String,
}

impl TestNetns {
    /// Creates it, with every offload off on both ends if `offloads_off`
    /// (else as the kernel makes a veth: checksum and segmentation offloads
    /// on).
    fn create(offloads_off: bool) -> TestNetns {
        let pid = std::process::id();
        let ns = format!("nlt-{pid}-a");
        let a = format!("nltv{pid}a");
        let b = format!("nltv{pid}b");
        TestNetns::delete(&ns, &a);
        must("ip", &["netns", "add", &ns]);
        let guard = TestNetns {
            ns: ns.clone(),
            root_end: a.clone(),
        };
        must(
            "ip",
            &["link", "add", &a, "type", "veth", "peer", "name", &b],
        );
        if offloads_off {
            for end in [&a, &b] {
                netloop_io::packet::disable_offloads(end)
                    .unwrap_or_else(|e| panic!("disabling offloads on {end}: {e}"));
            }
        }
        // No IPv6 chatter on either end (it would be dropped as unsupported).
        let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{a}/disable_ipv6"), "1");
        must(
            "ip",
            &[
                "netns",
                "exec",
                &ns,
                "/bin/sh",
                "-c",
                "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; \
                 echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6",
            ],
        );
        must("ip", &["link", "set", &b, "netns", &ns]);
        must("ip", &["-n", &ns, "link", "set", "lo", "up"]);
        must(
            "ip",
            &["-n", &ns, "addr", "add", "198.18.50.2/24", "dev", &b],
        );
        must("ip", &["-n", &ns, "link", "set", &b, "up"]);
        must(
            "ip",
            &["-n", &ns, "route", "add", "default", "via", "198.18.50.1"],
        );
        must("ip", &["link", "set", &a, "up"]);
        guard
    }

    fn delete(ns: &str, root_end: &str) {
        if namespaces().contains(ns) {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        if Path::new("/sys/class/net").join(root_end).exists() {
            let _ = Command::new("ip").args(["link", "del", root_end]).output();
        }
    }
}

impl Drop for TestNetns {
    fn drop(&mut self) {
        TestNetns::delete(&self.ns, &self.root_end);
    }
}

/// a1 (attached: `interface`, 198.18.50.2) — r1 — h2 (a TAP host,
/// 198.18.51.2).
fn attached_topology(interface: &str, h2: &str) -> String {
    format!(
        r#"[run]
duration = "30s"

[[node]]
name = "a1"
kind = "attached"
interface = "{interface}"

[[node]]
name = "r1"
kind = "router"

[[node]]
name = "h2"
kind = "namespace"
via = "tap"
{h2}

[[link]]
endpoints = ["a1", "r1"]
addresses = ["198.18.50.2/24", "198.18.50.1/24"]

[[link]]
endpoints = ["r1", "h2"]
addresses = ["198.18.51.1/24", "198.18.51.2/24"]
"#
    )
}

#[test]
fn an_attached_veth_interface_reaches_a_tap_host_through_a_router() {
    let _serial = serial();
    if !have_root() || !have(&["ping"]) {
        return;
    }
    let t0 = Instant::now();
    let guard = TestNetns::create(true);
    let (ns, a) = (guard.ns.clone(), guard.root_end.clone());
    let s = Scratch::new("attached");
    let topo = s.write(
        "t.toml",
        &attached_topology(&a, &cmd("ping -c 3 -i 0.2 198.18.50.2", "200ms", false)),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let mut run = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs]);
    let id = run.wait_running();
    assert!(
        run.stdout()
            .contains(&format!("a1: interface {a} attached (198.18.50.2/24)")),
        "{}",
        run.output()
    );
    // From behind the attached interface, through r1, to the TAP host.
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns,
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "3",
            "198.18.51.2",
        ])
        .output()
        .unwrap();
    let ping_log = text(&out.stdout);
    // And h2's own ping of the host behind the interface: wait for it to end.
    let h2_log = Path::new(&logs).join("h2.0.log");
    let until = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&h2_log).is_ok_and(|l| l.contains("packets transmitted"))
        && Instant::now() < until
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    run.signal(Signal::SIGINT);
    let st = run.wait_exit(Duration::from_secs(15));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(130), "{}", run.output());
    assert!(
        Path::new("/sys/class/net").join(&a).exists(),
        "netloop removed the attached interface {a}, which is not its own"
    );
    assert!(
        out.status.success(),
        "ping from the attached side failed: {ping_log}{}",
        text(&out.stderr)
    );
    assert_eq!(ping_summary(&ping_log), Some((3, 3)), "{ping_log}");

    let r = load_json(&json);
    check_realtime_results(&r, &id);
    let rt = &r["realtime"];
    assert_eq!(rt["end"], "interrupted");
    let h2_ping = command(&r, "h2", 0);
    let log = read_log(&r, "h2", 0);
    assert_eq!(h2_ping["exit_code"], 0, "{h2_ping}\n{log}");
    assert_eq!(ping_summary(&log), Some((3, 3)), "{log}");
    let hosts = rt["hosts"].as_array().unwrap();
    let a1 = hosts.iter().find(|h| h["name"] == "a1").unwrap();
    assert_eq!(a1["kind"], "attached");
    assert_eq!(a1["interface"], a.as_str());
    assert!(a1["namespace"].is_null());
    let h2 = hosts.iter().find(|h| h["name"] == "h2").unwrap();
    assert_eq!(h2["via"], "tap");
    for h in ["a1", "h2"] {
        let p = port(&r, h);
        assert!(u(&p["rx_frames"]) >= 6 && u(&p["tx_frames"]) >= 6, "{p}");
    }
    assert_eq!(node(&r, "a1")["kind"], "attached");
    drop(guard);
    assert!(!namespaces().contains(&ns));
    assert!(!Path::new("/sys/class/net").join(&a).exists());
    println!(
        "ping from behind {a}: {:?} ms; test took {:.1} s",
        ping_replies(&ping_log).values().collect::<Vec<_>>(),
        t0.elapsed().as_secs_f64()
    );
}

/// The same with the veth pair as the kernel makes it except for
/// segmentation (checksum offload on, TSO/GSO off as docs/realtime.md asks):
/// the peer's stack sends TCP segments with partial checksums
/// (TP_STATUS_CSUMNOTREADY in the RX ring), which netloop must complete, or
/// the receiving kernel drops every one (TcpInCsumErrors) and TCP never
/// connects.
#[test]
fn tcp_through_an_attached_veth_with_default_offloads() {
    let _serial = serial();
    if !have_root() || !have(&["iperf3", "ethtool"]) {
        return;
    }
    let guard = TestNetns::create(false);
    let peer = format!("nltv{}b", std::process::id());
    must(
        "ip",
        &[
            "netns", "exec", &guard.ns, "ethtool", "-K", &peer, "tso", "off", "gso", "off",
        ],
    );
    let s = Scratch::new("attached-offloads");
    let topo = s.write(
        "t.toml",
        &attached_topology(&guard.root_end, &cmd("iperf3 -s -1", "0s", false)),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let mut run = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs]);
    let id = run.wait_running();
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &guard.ns,
            "iperf3",
            "-c",
            "198.18.51.2",
            "-t",
            "1",
            "--connect-timeout",
            "2000",
            "-J",
        ])
        .output()
        .unwrap();
    let log = text(&out.stdout);
    let csum_errors = Command::new("ip")
        .args([
            "netns",
            "exec",
            &format!("nl-{id}-h2"),
            "nstat",
            "-az",
            "TcpInCsumErrors",
        ])
        .output()
        .map(|o| text(&o.stdout))
        .unwrap_or_default();
    run.signal(Signal::SIGINT);
    let st = run.wait_exit(Duration::from_secs(15));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(130), "{}", run.output());
    let j: Value = serde_json::from_str(&log).unwrap_or(Value::Null);
    let received = j["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0);
    assert!(
        out.status.success() && received > 1e6,
        "iperf3 from behind the attached veth received {received} bytes: {}\nh2's kernel: {csum_errors}",
        j["error"]
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let completed: u64 = r["realtime"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rx_checksums_completed"].as_u64().unwrap_or(0))
        .sum();
    assert!(
        completed > 100,
        "netloop completed only {completed} checksums"
    );
}

/// The same with the veth pair exactly as the kernel makes it, TSO and GSO
/// on: the peer's stack hands over TCP super-frames of up to 64 KB, which
/// netloop reads whole from the attached (virtual) interface and carries
/// through the model as the segments they stand for (before, they were
/// larger than a ring slot, counted as truncated and lost, and TCP crawled).
#[test]
fn tcp_through_an_attached_veth_whose_far_side_keeps_tso() {
    let _serial = serial();
    if !have_root() || !have(&["iperf3"]) {
        return;
    }
    let guard = TestNetns::create(false);
    let s = Scratch::new("attached-tso");
    let topo = s.write(
        "t.toml",
        &attached_topology(&guard.root_end, &cmd("iperf3 -s -1", "0s", false)),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let mut run = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs]);
    let id = run.wait_running();
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &guard.ns,
            "iperf3",
            "-c",
            "198.18.51.2",
            "-t",
            "1",
            "--connect-timeout",
            "2000",
            "-J",
        ])
        .output()
        .unwrap();
    let log = text(&out.stdout);
    run.signal(Signal::SIGINT);
    let st = run.wait_exit(Duration::from_secs(15));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(130), "{}", run.output());
    let j: Value = serde_json::from_str(&log).unwrap_or(Value::Null);
    let received = j["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0);
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let ports = r["realtime"]["ports"].as_array().unwrap();
    let a1 = ports.iter().find(|p| p["host"] == "a1").expect("a1's port");
    assert!(
        out.status.success() && received > 5e6,
        "iperf3 from behind the attached veth received {received} bytes: {}; a1: {a1}",
        j["error"]
    );
    let u = |v: &Value| v.as_u64().unwrap_or(0);
    assert!(
        u(&a1["rx_gso_frames"]) > 10,
        "super-frames read whole: {a1}"
    );
    assert_eq!(u(&a1["rx_truncated"]), 0, "{a1}");
    assert_eq!(u(&a1["rx_gso_refused"]), 0, "{a1}");
    assert_eq!(r["conservation"]["unaccounted"], 0, "{}", r["conservation"]);
}

// ---------------------------------------------------------------------------
// 4. link events at run time
// ---------------------------------------------------------------------------

#[test]
fn link_delay_change_and_down_period_take_effect_at_run_time() {
    let _serial = serial();
    if !have_root() || !have(&["ping"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("events");
    // Ping every 200 ms from 0.3 s: request k (1-based) leaves at about
    // 0.3 + 0.2 (k - 1) s. The r1-r2 delay goes from 5 ms to 50 ms at 2 s;
    // the link is down from 3.5 s to 4.3 s.
    let events = r#"
[[event]]
at = "2s"
link = "r1-r2"
action = "set"
delay = "50ms"

[[event]]
at = "3500ms"
link = "r1-r2"
action = "down"

[[event]]
at = "4300ms"
link = "r1-r2"
action = "up"
"#;
    let topo = s.write(
        "t.toml",
        &two_routers(
            "8s",
            "5ms",
            &cmd("ping -i 0.2 -c 25 198.18.2.2", "300ms", true),
            "",
            events,
        ),
    );
    let json = s.path("out.json");
    let logs = s.path("logs");
    let (run, id, st) = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs])
        .finish(Duration::from_secs(40));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(0), "{}", run.output());
    let r = load_json(&json);
    check_realtime_results(&r, &id);
    let log = read_log(&r, "h1", 0);
    let replies = ping_replies(&log);
    let sent_at = |seq: u32| 0.3 + 0.2 * f64::from(seq - 1);
    let mut before = Vec::new();
    let mut after = Vec::new();
    for seq in 1..=25u32 {
        let t = sent_at(seq);
        let rtt = replies.get(&seq).copied();
        if t <= 1.85 {
            // Old delay: 2 × 5 ms.
            let rtt = rtt.unwrap_or_else(|| panic!("no reply to icmp_seq={seq}\n{log}"));
            assert!(
                (9.9..40.0).contains(&rtt),
                "icmp_seq={seq} (sent at {t:.1} s): RTT {rtt} ms, expected about 10 ms\n{log}"
            );
            before.push(rtt);
        } else if (2.15..=3.2).contains(&t) || t >= 4.45 {
            // New delay: 2 × 50 ms.
            let rtt = rtt.unwrap_or_else(|| panic!("no reply to icmp_seq={seq}\n{log}"));
            assert!(
                (99.9..150.0).contains(&rtt),
                "icmp_seq={seq} (sent at {t:.1} s): RTT {rtt} ms, expected about 100 ms\n{log}"
            );
            after.push(rtt);
        } else if (3.55..=4.2).contains(&t) {
            assert!(
                rtt.is_none(),
                "icmp_seq={seq} (sent at {t:.1} s, link down) got a reply\n{log}"
            );
        }
    }
    let (sent, received) = ping_summary(&log).unwrap_or_else(|| panic!("{log}"));
    assert_eq!(sent, 25, "{log}");
    assert!(
        (19..=22).contains(&received),
        "{received} replies: 3 to 6 requests fall in the down period\n{log}"
    );
    let wan = link(&r, "r1-r2");
    for dir in ["a_to_b", "b_to_a"] {
        assert_eq!(u(&wan[dir]["delay_ns"]), 50_000_000, "{wan}");
        assert_eq!(wan[dir]["up"], true, "{wan}");
    }
    let link_down = wan["a_to_b"]["drops"]["link_down"].as_u64().unwrap_or(0)
        + wan["b_to_a"]["drops"]["link_down"].as_u64().unwrap_or(0);
    assert!(link_down >= 3, "link_down drops on r1-r2: {wan}");
    assert_eq!(
        r["conservation"]["dropped"]["link_down"]
            .as_u64()
            .unwrap_or(0),
        link_down
    );
    println!(
        "RTTs before {before:?} ms, after {after:?} ms; {} of 25 replies; {link_down} link_down drops; test took {:.1} s",
        received,
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 5. SIGINT and SIGTERM end a run cleanly
// ---------------------------------------------------------------------------

#[test]
fn sigint_and_sigterm_end_the_run_and_leave_nothing_behind() {
    let _serial = serial();
    if !have_root() || !have(&["ping"]) {
        return;
    }
    let s = Scratch::new("signals");
    let topo = long_run(&s, "veth");
    for sig in [Signal::SIGINT, Signal::SIGTERM] {
        let t0 = Instant::now();
        let json = s.path(&format!("{sig}.json"));
        let logs = s.path(&format!("{sig}-logs"));
        let (mut run, id, recorded, inside) = start_long_run(&topo, &json, &logs);
        // Let the ping run a little.
        std::thread::sleep(Duration::from_millis(500));
        let sent = Instant::now();
        run.signal(sig);
        let st = run.wait_exit(Duration::from_secs(15));
        let took = sent.elapsed();
        assert_nothing_left(&id);
        assert_processes_gone(&inside, &recorded);
        assert_eq!(st.code(), Some(130), "{sig}: {}", run.output());
        assert!(
            took < Duration::from_secs(6),
            "{sig}: netloop took {took:?} to exit"
        );
        assert!(run.stderr().contains("interrupted at"), "{}", run.output());
        let r = load_json(&json);
        check_realtime_results(&r, &id);
        assert_eq!(r["realtime"]["end"], "interrupted");
        assert!(u(&r["meta"]["sim_time_reached_ns"]) < u(&r["meta"]["duration_ns"]));
        let sleep = command(&r, "h1", 0);
        assert!(sleep["started_s"].is_f64(), "{sleep}");
        assert!(
            sleep["exited_s"].is_null() && sleep["exit_code"].is_null(),
            "sleep 1000 was stopped at the end: {sleep}"
        );
        let log = read_log(&r, "h2", 0);
        assert!(
            !ping_replies(&log).is_empty(),
            "h2's ping got no reply\n{log}"
        );
        println!(
            "{sig}: exit 130 after {took:?}; {} processes in the namespaces, all gone; test part took {:.1} s",
            inside.len(),
            t0.elapsed().as_secs_f64()
        );
    }
}

// ---------------------------------------------------------------------------
// 6. netloop clean after SIGKILL, leaving a running run alone
// ---------------------------------------------------------------------------

#[test]
fn clean_removes_what_a_killed_run_left_and_nothing_of_a_running_one() {
    let _serial = serial();
    if !have_root() || !have(&["ping"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("clean");
    let topo = long_run(&s, "veth");
    let (json_a, logs_a) = (s.path("a.json"), s.path("a-logs"));
    let (json_b, logs_b) = (s.path("b.json"), s.path("b-logs"));
    let (mut a, id_a, recorded_a, inside_a) = start_long_run(&topo, &json_a, &logs_a);
    let (mut b, id_b, _, _) = start_long_run(&topo, &json_b, &logs_b);
    assert_ne!(id_a, id_b);

    // If an assertion fails from here on, `netloop clean` still removes
    // what the killed run left.
    let _clean = CleanOnPanic;
    a.signal(Signal::SIGKILL);
    let st = a.wait_exit(Duration::from_secs(10));
    assert_eq!(st.signal(), Some(9), "{st}");
    // SIGKILL leaves everything behind, and the record says what.
    let left = leftovers(&id_a);
    for h in ["h1", "h2"] {
        assert!(
            left.contains(&format!("namespace nl-{id_a}-{h}")),
            "after SIGKILL: {left:?}"
        );
    }
    assert!(
        left.iter()
            .any(|l| l.starts_with(&format!("device nl{id_a}h"))),
        "after SIGKILL the veths' root ends remain: {left:?}"
    );
    assert!(
        left.contains(&format!("record /run/netloop/{id_a}.json")),
        "{left:?}"
    );
    let rec = record(&id_a);
    assert_eq!(rec["namespaces"].as_array().unwrap().len(), 2, "{rec}");
    assert_eq!(rec["devices"].as_array().unwrap().len(), 2, "{rec}");
    let survivors: Vec<_> = inside_a.iter().filter(|p| p.alive()).collect();

    let out = netloop(&["clean"]);
    let report = text(&out.stdout);
    assert!(
        out.status.success(),
        "netloop clean: {report}{}",
        text(&out.stderr)
    );
    assert!(
        report.contains("cleaned") && report.contains(&id_a),
        "clean's report: {report}"
    );
    assert!(
        report.contains(&format!("run {id_b} is still running")),
        "clean's report: {report}"
    );
    assert_nothing_left(&id_a);
    assert_processes_gone(&inside_a, &recorded_a);

    // The running run is untouched by clean.
    let left_b = leftovers(&id_b);
    for h in ["h1", "h2"] {
        assert!(
            left_b.contains(&format!("namespace nl-{id_b}-{h}")),
            "clean touched the running run {id_b}: {left_b:?}"
        );
    }
    assert!(
        left_b.contains(&format!("record /run/netloop/{id_b}.json")),
        "{left_b:?}"
    );
    assert!(
        recorded_processes(&record(&id_b)).iter().all(ProcId::alive),
        "clean killed programs of the running run"
    );
    assert!(b.is_running(), "run {id_b} died");

    b.signal(Signal::SIGINT);
    let st = b.wait_exit(Duration::from_secs(15));
    assert_nothing_left(&id_b);
    assert_eq!(st.code(), Some(130), "{}", b.output());
    // The interrupted run wrote complete results; the killed one none at all
    // (not even a temporary file).
    let r = load_json(&json_b);
    check_realtime_results(&r, &id_b);
    assert_eq!(r["realtime"]["end"], "interrupted");
    let in_dir: Vec<String> = std::fs::read_dir(&s.dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("a.json"))
        .collect();
    assert!(in_dir.is_empty(), "the killed run left {in_dir:?}");
    let out = netloop(&["clean"]);
    assert!(out.status.success());
    println!(
        "after SIGKILL {} of {} processes outlived netloop (clean removed them); clean said: {}; test took {:.1} s",
        survivors.len(),
        inside_a.len(),
        report.trim().replace('\n', " / "),
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 7. malformed frames from a TAP host are dropped and counted
// ---------------------------------------------------------------------------

/// Sends hand-made bad frames from an AF_PACKET socket on an interface;
/// prints what it sent and the drop reason the model should give each.
const INJECT_PY: &str = r#"
import json, random, socket, struct, sys

ifname, r1_mac = sys.argv[1], bytes.fromhex(sys.argv[2].replace("-", "").replace(":", ""))
src_ip, dst_ip = socket.inet_aton(sys.argv[3]), socket.inet_aton(sys.argv[4])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((ifname, 0))
my_mac = s.getsockname()[4]
sent = []

def csum(b):
    if len(b) % 2:
        b += b"\0"
    t = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while t >> 16:
        t = (t & 0xFFFF) + (t >> 16)
    return ~t & 0xFFFF

def eth(ethertype, payload, dst=None):
    return (dst or r1_mac) + my_mac + struct.pack("!H", ethertype) + payload

def ipv4(ver_ihl=0x45, total=46, good_csum=True, length=46):
    # A 20-byte header (UDP, TTL 64, h1 -> h2), then zeros up to `length`.
    h = bytearray(struct.pack("!BBHHHBBH4s4s", ver_ihl, 0, total, 1, 0, 64, 17, 0, src_ip, dst_ip))
    c = csum(bytes(h))
    h[10:12] = struct.pack("!H", c if good_csum else c ^ 0x5A5A)
    return bytes(h) + bytes(length - 20)

def send(label, reason, frame):
    n = s.send(frame)
    assert n == len(frame), (label, n, len(frame))
    sent.append({"label": label, "reason": reason, "len": len(frame)})

send("ipv4 bad checksum", "bad_checksum", eth(0x0800, ipv4(good_csum=False)))
send("ipv4 bad version, IHL, checksum and total length", "bad_checksum",
     eth(0x0800, ipv4(0x73, total=1400, good_csum=False)))
send("ipv4 version 6", "malformed", eth(0x0800, ipv4(0x65)))
send("ipv4 IHL 3", "malformed", eth(0x0800, ipv4(0x43)))
send("ipv4 IHL 15, beyond the frame", "malformed", eth(0x0800, ipv4(0x4F)))
send("ipv4 total length beyond the frame", "malformed", eth(0x0800, ipv4(total=1400)))
send("ipv4 total length below the header", "malformed", eth(0x0800, ipv4(total=10)))
send("ipv4 header cut at 10 bytes", "malformed", eth(0x0800, ipv4()[:10]))
send("ethernet header only, ipv4", "malformed", eth(0x0800, b""))
send("arp with hardware length 7, protocol length 3", "malformed",
     eth(0x0806, struct.pack("!HHBBH", 1, 0x0800, 7, 3, 1) + bytes(38)))
send("arp cut after its fixed header", "malformed",
     eth(0x0806, struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1)))
send("unknown ethertype 0x88b5", "unsupported", eth(0x88B5, bytes(46)))
send("ethernet header only, unknown ethertype", "unsupported", eth(0x88B5, b""))
rng = random.Random(7)
for i in range(3):
    dst = bytes([rng.randrange(256) & 0xFE | 0x02]) + bytes(rng.randrange(256) for _ in range(5))
    assert dst != r1_mac
    body = bytes(rng.randrange(256) for _ in range(rng.randrange(8, 200)))
    send("random bytes to another MAC #%d" % i, "not_for_us", dst + body)
for i in range(3):
    et = rng.choice([t for t in range(0x0600, 0x10000, 0x0101) if t not in (0x0800, 0x0806)])
    body = bytes(rng.randrange(256) for _ in range(rng.randrange(6, 200)))
    send("random bytes to r1, ethertype %#06x #%d" % (et, i), "unsupported",
         r1_mac + body[:6] + struct.pack("!H", et) + body[6:])
# Larger than the link's MTU (eth0's MTU was raised to let it out): the
# link h1-r1 drops it, not the router.
big = ipv4(total=4000 - 14, length=4000 - 14)
send("ipv4 of 4000 bytes, over the link's MTU", "mtu_exceeded@h1-r1", eth(0x0800, big))
try:
    s.send(r1_mac[:5])
    runt = "sent"
except OSError as e:
    runt = "refused: " + e.strerror
print(json.dumps({"sent": sent, "runt": runt}))
"#;

#[test]
fn malformed_frames_from_a_tap_host_are_dropped_and_counted() {
    let _serial = serial();
    if !have_root() || !have(&["ping", "python3"]) {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("malformed");
    let topo = s.write("t.toml", &one_router("6s", "tap", "", ""));
    let script = s.write("inject.py", INJECT_PY);
    // r1's MAC on h1's link, from `netloop check --verbose`.
    let out = netloop(&["check", &topo, "--verbose"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let check = text(&out.stdout);
    let r1_mac = check
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("r1: eth0 "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("r1's MAC in:\n{check}"))
        .to_string();

    let json = s.path("out.json");
    let logs = s.path("logs");
    let mut run = LiveRun::start(&["run", &topo, "--json", &json, "--log-dir", &logs]);
    let id = run.wait_running();
    let h1 = format!("nl-{id}-h1");
    // Let a frame larger than the link's MTU out of h1's interface.
    must(
        "ip",
        &["-n", &h1, "link", "set", "dev", "eth0", "mtu", "9000"],
    );
    let inject = Command::new("ip")
        .args([
            "netns",
            "exec",
            &h1,
            "python3",
            &script,
            "eth0",
            &r1_mac,
            "198.18.1.2",
            "198.18.2.2",
        ])
        .output()
        .unwrap();
    assert!(
        inject.status.success(),
        "injector: {}{}",
        text(&inject.stdout),
        text(&inject.stderr)
    );
    let injected: Value = serde_json::from_slice(&inject.stdout).unwrap();
    // The run still works: ping through netloop exec.
    let ping = Command::new(NETLOOP)
        .args([
            "exec",
            "--run",
            &id,
            "h1",
            "--",
            "ping",
            "-c",
            "3",
            "-i",
            "0.2",
            "-W",
            "3",
            "198.18.2.2",
        ])
        .output()
        .unwrap();
    let ping_log = text(&ping.stdout);
    let ping_done = Instant::now();
    let st = run.wait_exit(Duration::from_secs(20));
    assert_nothing_left(&id);
    assert_eq!(st.code(), Some(0), "{}", run.output());
    assert!(!run.stderr().contains("panic"), "{}", run.output());
    assert!(
        ping.status.success(),
        "ping after the garbage failed: {ping_log}{}",
        text(&ping.stderr)
    );
    assert_eq!(ping_summary(&ping_log), Some((3, 3)), "{ping_log}");
    assert!(
        ping_done.elapsed() > Duration::from_millis(500),
        "the run ended too soon after the ping: the test's steps did not fit in its duration"
    );

    let r = load_json(&json);
    check_realtime_results(&r, &id);
    let rt = &r["realtime"];
    assert_eq!(rt["end"], "duration", "the run went on to its end");
    let sent = injected["sent"].as_array().unwrap();
    // Drops by the router ("reason"), and by the link h1-r1
    // ("reason@h1-r1").
    let mut at_r1: BTreeMap<String, u64> = BTreeMap::new();
    let mut on_link: BTreeMap<String, u64> = BTreeMap::new();
    let mut everywhere: BTreeMap<String, u64> = BTreeMap::new();
    for f in sent {
        let reason = f["reason"].as_str().unwrap();
        match reason.split_once('@') {
            Some((reason, "h1-r1")) => *on_link.entry(reason.into()).or_default() += 1,
            Some(other) => panic!("unexpected place {other:?}"),
            None => *at_r1.entry(reason.into()).or_default() += 1,
        }
        let reason = reason.split('@').next().unwrap();
        *everywhere.entry(reason.into()).or_default() += 1;
    }
    // Every bad frame crossed the boundary (nothing there checks more than
    // the length) and was dropped by the router or the link for the expected
    // reason; nothing else was dropped anywhere.
    let r1 = &node(&r, "r1")["stats"];
    assert_eq!(counts(&r1["drops"]), at_r1, "r1's drops; sent {sent:#?}");
    let access = link(&r, "h1-r1");
    assert_eq!(counts(&access["a_to_b"]["drops"]), on_link, "{access}");
    assert_eq!(
        counts(&r["conservation"]["dropped"]),
        everywhere,
        "conservation.dropped"
    );
    let expected = everywhere;
    let p = port(&r, "h1");
    assert!(
        u(&p["rx_frames"]) >= sent.len() as u64 + 3,
        "h1's port read {p}, {} bad frames were sent",
        sent.len()
    );
    // The kernel refuses frames shorter than an Ethernet header, so none
    // reached netloop's runt counter.
    assert_eq!(
        injected["runt"].as_str().unwrap().starts_with("refused"),
        u(&p["rx_malformed"]) == 0,
        "{injected} / {p}"
    );
    assert_eq!(u(&p["rx_truncated"]), 0, "{p}");
    assert!(
        u(&r1["received"]) >= sent.len() as u64 - 1 + 6,
        "r1 received every bad frame but the oversized one, and the pings: {r1}"
    );
    println!(
        "sent {} bad frames; dropped (r1 and link h1-r1) {:?}; rx_malformed {} (runt of 5 bytes: {}); test took {:.1} s",
        sent.len(),
        expected,
        p["rx_malformed"],
        injected["runt"],
        t0.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------
// 8. clear errors, before anything is created
// ---------------------------------------------------------------------------

#[test]
fn errors_are_clear_and_come_before_anything_is_created() {
    let _serial = serial();
    if !have_root() {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("errors");

    // A program that is not installed: refused before any namespace exists.
    let before = snapshot();
    let topo = s.write(
        "missing-program.toml",
        &one_router(
            "5s",
            "veth",
            &cmd("definitely-not-installed-xyz --flag", "0s", true),
            "",
        ),
    );
    let out = netloop(&["run", &topo, "--log-dir", &s.path("logs")]);
    let err = text(&out.stderr);
    assert!(
        !out.status.success() && out.status.code() != Some(130),
        "{}",
        out.status
    );
    assert!(
        err.contains("'definitely-not-installed-xyz'") && err.contains("'h1'"),
        "the error names the program and the host: {err}"
    );
    assert!(
        !text(&out.stdout).contains("namespace nl-"),
        "{}",
        text(&out.stdout)
    );
    let left = appeared_since(&before);
    assert!(
        left.is_empty(),
        "a failed start created something: {left:?}"
    );

    // An attached interface that does not exist.
    let ifname = format!("nltx{}", std::process::id());
    let topo = s.write(
        "missing-interface.toml",
        &format!(
            r#"[[node]]
name = "nic"
kind = "attached"
interface = "{ifname}"

[[node]]
name = "r1"
kind = "router"

[[node]]
name = "h2"
kind = "namespace"

[[link]]
endpoints = ["nic", "r1"]

[[link]]
endpoints = ["r1", "h2"]
"#
        ),
    );
    let out = netloop(&["run", &topo, "--log-dir", &s.path("logs")]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{}", out.status);
    assert!(
        err.contains("does not exist") && err.contains(&ifname),
        "the error names the interface: {err}"
    );
    let left = appeared_since(&before);
    assert!(
        left.is_empty(),
        "a failed start created something: {left:?}"
    );

    // `netloop exec` with a run id that does not exist, whatever else runs
    // on the machine; and with none, an error whichever it is (no run, or
    // several, or one without that host: other runs may be running — the
    // choice itself is tested in registry.rs without the machine's runs).
    let out = netloop(&["exec", "--run", "ffffff", "h1", "--", "true"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no netloop run with id 'ffffff' is running"),
        "{err}"
    );
    let out = netloop(&["exec", "nosuchhost", "--", "true"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("no netloop run is running")
            || err.contains("several netloop runs are running")
            || err.contains("has no real host 'nosuchhost'"),
        "{err}"
    );
    println!("test took {:.1} s", t0.elapsed().as_secs_f64());
}
