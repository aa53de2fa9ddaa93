//! IPv6 end to end with real programs: `ping -6`, `traceroute -6`,
//! `tracepath -6` (which must report the smaller MTU of the link between the
//! routers), iperf3 both ways and an HTTP transfer, between two network
//! namespaces across two simulated routers of a dual-stack topology;
//! `ping -6` and `traceroute -6` to a simulated host; and an IPv6-only
//! network (`ipv4 = false`) whose namespaces have no IPv4 address.
//!
//! Needs root (it creates network namespaces) and the programs; says so and
//! returns otherwise. Addresses are all from 2001:2::/48 and 198.18.0.0/15;
//! nothing is sent anywhere else (the HTTP server is a few lines of Python
//! that does no name lookups, unlike `python3 -m http.server`).

mod common;

use common::*;
use std::time::Instant;

/// h1 — r1 ══ 10 ms, MTU 1400 ══ r2 — h2 (h2 by TAP), dual stack; the
/// automatic IPv6 addresses follow the explicit IPv4 ones: h1 2001:2::2,
/// r1 2001:2::1 and 2001:2:0:1::1, r2 2001:2:0:1::2 and 2001:2:0:2::1, h2
/// 2001:2:0:2::2.
fn topology(h1: &str, h2: &str) -> String {
    format!(
        r#"[run]
duration = "20s"
ipv6 = true

[defaults.link]
rate = "1Gbps"
delay = "10us"

[[node]]
name = "h1"
kind = "namespace"
{h1}

[[node]]
name = "r1"
kind = "router"

[[node]]
name = "r2"
kind = "router"

[[node]]
name = "h2"
kind = "namespace"
via = "tap"
{h2}

[[link]]
endpoints = ["h1", "r1"]
addresses = ["198.18.1.2/24", "198.18.1.1/24"]

[[link]]
endpoints = ["r1", "r2"]
delay = "10ms"
mtu = 1400
addresses = ["198.18.3.1/24", "198.18.3.2/24"]

[[link]]
endpoints = ["r2", "h2"]
addresses = ["198.18.2.1/24", "198.18.2.2/24"]

# A simulated host beside h2: 2001:2:0:3::2.
[[node]]
name = "h3"
kind = "host"

[[link]]
endpoints = ["r2", "h3"]
"#
    )
}

/// Serves one HTTP request for a file of `argv[1]` on h2's address, then
/// exits.
const SERVER: &str = r#"import functools, http.server, socket, socketserver, sys
class Server(socketserver.TCPServer):
    address_family = socket.AF_INET6
    allow_reuse_address = True
handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
with Server(("2001:2:0:2::2", 8000), handler) as s:
    s.handle_request()
"#;

#[test]
fn ping_traceroute_tracepath_iperf3_and_http_over_ipv6_across_two_routers() {
    let _serial = serial();
    if !have_root()
        || !have(&[
            "ping",
            "traceroute",
            "tracepath",
            "iperf3",
            "curl",
            "python3",
        ])
    {
        return;
    }
    let t0 = Instant::now();
    let s = Scratch::new("ipv6");
    let body: Vec<u8> = (0..1_000_000u32).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::create_dir_all(s.path("www")).unwrap();
    std::fs::write(s.path("www/f"), &body).unwrap();
    let server = s.write("serve.py", SERVER);
    let dst = "2001:2:0:2::2";
    let h1 = cmd(&format!("ping -6 -c 5 -i 0.2 {dst}"), "200ms", true)
        + &cmd(
            &format!("traceroute -6 -n -q 1 -w 1 -N 1 -m 6 {dst}"),
            "1500ms",
            true,
        )
        + &cmd(&format!("tracepath -6 -n {dst}"), "3s", true)
        + &cmd("ping -6 -n -c 3 -i 0.2 2001:2:0:3::2", "4s", true)
        + &cmd("traceroute -6 -n -q 1 -w 1 -m 6 2001:2:0:3::2", "4s", true)
        + &cmd(&format!("iperf3 -6 -c {dst} -t 2 -J"), "5s", true)
        + &cmd(&format!("iperf3 -6 -c {dst} -t 1 -R -J"), "8s", true)
        + &cmd(
            &format!(
                "curl -6 -sS -o {} -w %{{http_code}}:%{{size_download}} http://[{dst}]:8000/f",
                s.path("got")
            ),
            "10s",
            true,
        );
    let h2 = cmd("iperf3 -s", "0s", false)
        + &cmd(&format!("python3 {server} {}", s.path("www")), "0s", false);
    let topo = s.write("t.toml", &topology(&h1, &h2));
    let (r, id) = run_to_end(&s, &topo);
    check_realtime_results(&r, &id);
    assert_eq!(
        r["realtime"]["end"], "control",
        "ends when h1's programs have"
    );
    let iface6 = |n: &str| node(&r, n)["interfaces"][0]["address6"].clone();
    assert_eq!(iface6("h2"), "2001:2:0:2::2/64");
    assert_eq!(iface6("h1"), "2001:2::2/64");

    // ping -6: five replies, each a little over 2 × 10 ms (the first also
    // resolves neighbours). A run that fell behind real time delays a reply
    // by up to its worst lateness, which it reports: the ping starts at
    // 0.2 s, while the servers of this topology start too, and on a loaded
    // 2-core machine the first reply came 40 ms late twice in CI.
    let log = read_log(&r, "h1", 0);
    assert_eq!(ping_summary(&log), Some((5, 5)), "{log}");
    let late_ms = r["realtime"]["event_lateness"]["max_ns"]
        .as_f64()
        .unwrap_or(0.0)
        / 1e6;
    for (seq, rtt) in ping_replies(&log) {
        assert!(
            (19.9..60.0 + late_ms).contains(&rtt),
            "icmp_seq={seq}: {rtt} ms (the run's worst lateness {late_ms} ms)\n{log}"
        );
    }

    // traceroute -6: each router from the interface facing h1, then h2.
    assert_eq!(command(&r, "h1", 1)["exit_code"], 0);
    let log = read_log(&r, "h1", 1);
    let hops: Vec<String> = log
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.first()?.parse::<u32>().ok()?;
            Some(w.get(1)?.to_string())
        })
        .collect();
    assert_eq!(hops, ["2001:2::1", "2001:2:0:1::2", dst], "{log}");

    // tracepath -6: the path MTU is the WAN's, learned from r1's Packet
    // Too Big, and the destination is reached in three hops.
    assert_eq!(command(&r, "h1", 2)["exit_code"], 0);
    let log = read_log(&r, "h1", 2);
    assert!(
        log.contains("Resume: pmtu 1400 hops 3 back 3"),
        "tracepath -6:\n{log}"
    );
    let r1 = &node(&r, "r1")["stats"];
    assert!(u(&r1["icmpv6_sent"]["packet_too_big"]) >= 1, "{r1}");
    assert!(u(&r1["icmpv6_sent"]["time_exceeded"]) >= 2, "{r1}");

    // A simulated host answers ping -6, and traceroute -6 ends at it
    // (port unreachable: nothing listens on the probes' ports).
    let log = read_log(&r, "h1", 3);
    assert_eq!(ping_summary(&log), Some((3, 3)), "{log}");
    assert_eq!(command(&r, "h1", 4)["exit_code"], 0);
    let log = read_log(&r, "h1", 4);
    assert!(
        log.lines()
            .any(|l| l.trim_start().starts_with("3  2001:2:0:3::2 ")),
        "traceroute -6 to the simulated host:\n{log}"
    );
    assert!(u(&node(&r, "h3")["stats"]["echo_replies"]) >= 3);

    // iperf3 -6 both ways: TCP over IPv6 with the hosts' offloads on; their
    // super-frames (TSO over IPv6) are read whole and cut, none refused.
    let mut rates = Vec::new();
    for k in [5, 6] {
        assert_eq!(command(&r, "h1", k)["exit_code"], 0);
        let log = read_log(&r, "h1", k);
        let (j, mbps) = iperf3_report(&log);
        let received = j["end"]["sum_received"]["bytes"].as_f64().unwrap_or(0.0);
        assert!(received > 1e6, "iperf3 received {received} bytes\n{log}");
        assert!(mbps < 1000.0, "faster than the links: {mbps} Mbit/s");
        rates.push(mbps);
    }
    for h in ["h1", "h2"] {
        let p = port(&r, h);
        assert!(u(&p["rx_gso_frames"]) > 10, "{h} sent no super-frames: {p}");
        assert_eq!(u(&p["rx_gso_refused"]), 0, "{p}");
        assert_eq!(u(&p["rx_malformed"]), 0, "{p}");
    }

    // HTTP: the whole file, unchanged.
    let c = command(&r, "h1", 7);
    assert_eq!(c["exit_code"], 0, "{c}");
    let log = read_log(&r, "h1", 7);
    assert_eq!(log.trim(), "200:1000000", "{log}");
    assert_eq!(std::fs::read(s.path("got")).unwrap(), body);

    // Nothing dropped for want of IPv6 support; what the routers dropped
    // is PMTU discovery's and the hosts' MLD reports.
    let dropped = counts(&r["conservation"]["dropped"]);
    assert!(!dropped.contains_key("unsupported"), "{dropped:?}");
    assert!(!dropped.contains_key("malformed"), "{dropped:?}");
    println!(
        "iperf3 over IPv6: {:.0} Mbit/s h1→h2, {:.0} Mbit/s h2→h1; drops {dropped:?}; kept up: {}; test took {:.1} s",
        rates[0],
        rates[1],
        r["realtime"]["kept_up"],
        t0.elapsed().as_secs_f64()
    );
}

/// An IPv6-only network: h1 — r1 — h2 namespaces with no IPv4 address, and
/// simulated hosts h3 and h4 beside them whose TCP flow goes over IPv6
/// without being told to.
const IPV6_ONLY: &str = r#"[run]
duration = "20s"
ipv6 = true
ipv4 = false

[defaults.link]
rate = "100Mbps"
delay = "5ms"

[[node]]
name = "h1"
kind = "namespace"
{h1}

[[node]]
name = "r1"
kind = "router"

[[node]]
name = "h2"
kind = "namespace"

[[node]]
name = "h3"
kind = "host"

[[node]]
name = "h4"
kind = "host"

[[link]]
endpoints = ["h1", "r1"]
addresses6 = ["2001:2::2/64", "2001:2::1/64"]

[[link]]
endpoints = ["r1", "h2"]
addresses6 = ["2001:2:0:1::1/64", "2001:2:0:1::2/64"]

[[link]]
endpoints = ["h3", "r1"]

[[link]]
endpoints = ["r1", "h4"]
addresses6 = ["2001:2:0:3::1/64", "2001:2:0:3::2/64"]

[[traffic]]
name = "bulk"
kind = "tcp-bulk"
from = "h3"
to = "h4"
bytes = "1MB"
"#;

#[test]
fn an_ipv6_only_network_has_no_ipv4_and_carries_real_and_simulated_traffic() {
    let _serial = serial();
    if !have_root() || !have(&["ping", "ip"]) {
        return;
    }
    let s = Scratch::new("ipv6-only");
    let h1 = cmd("ip -o addr show scope global", "0s", true)
        + &cmd("ping -6 -n -c 3 -i 0.2 2001:2:0:1::2", "200ms", true)
        + &cmd("ping -6 -n -c 2 -i 0.2 2001:2:0:3::2", "1s", true);
    let topo = s.write("t.toml", &IPV6_ONLY.replace("{h1}", &h1));
    let (r, id) = run_to_end(&s, &topo);
    check_realtime_results(&r, &id);
    // No IPv4 address anywhere; IPv6 ones from the pool.
    for n in ["h1", "r1", "h2", "h3"] {
        let i = &node(&r, n)["interfaces"][0];
        assert!(i["address"].is_null(), "{n}: {i}");
        assert!(i["address6"].is_string(), "{n}: {i}");
    }
    let log = read_log(&r, "h1", 0);
    assert!(!log.contains(" inet "), "an IPv4 address in h1:\n{log}");
    assert!(log.contains("inet6 2001:2::2/64"), "{log}");
    // h1 reaches h2 and the simulated host h4 over IPv6.
    let log = read_log(&r, "h1", 1);
    assert_eq!(ping_summary(&log), Some((3, 3)), "{log}");
    let log = read_log(&r, "h1", 2);
    assert_eq!(ping_summary(&log), Some((2, 2)), "{log}");
    // The simulated flow went over IPv6 and arrived whole.
    let f = &r["flows"][0];
    assert_eq!(u(&f["received_bytes"]), 1_000_000, "{f}");
    assert_eq!(u(&r["conservation"]["unaccounted"]), 0);
}
