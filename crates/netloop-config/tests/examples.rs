//! Every file in `examples/` loads without error, and what it loads is what
//! its comments say.

use std::path::{Path, PathBuf};

use netloop_core::{Bytes, DataRate, SimDuration};
use netloop_model::spec::{
    CommandSpec, Direction, HostLink, JitterDistribution, LinkAction, LinkSpec, LossSpec,
    NamespaceSpec, NodeKind, ReadyProtocol, ReadySpec, TrafficKind, DEFAULT_SPIN,
};

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn load(name: &str) -> netloop_config::Loaded {
    let path = examples_dir().join(name);
    netloop_config::load(&path).unwrap_or_else(|e| panic!("{name} does not load:\n{e}"))
}

#[test]
fn every_example_loads() {
    let mut seen = 0;
    let mut entries: Vec<_> = std::fs::read_dir(examples_dir())
        .expect("examples/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    entries.sort();
    for path in entries {
        let loaded = netloop_config::load(&path)
            .unwrap_or_else(|e| panic!("{} does not load:\n{e}", path.display()));
        assert!(!loaded.spec.nodes.is_empty(), "{}", path.display());
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("# "),
            "{} needs a comment header",
            path.display()
        );
        seen += 1;
    }
    assert!(seen >= 7, "expected at least 7 examples, found {seen}");
}

fn link<'a>(l: &'a netloop_config::Loaded, name: &str) -> &'a LinkSpec {
    l.spec
        .links
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no link {name}"))
}

#[test]
fn dumbbell_has_a_bottleneck() {
    let l = load("dumbbell.toml");
    assert_eq!(l.spec.nodes.len(), 8);
    assert_eq!(l.spec.links.len(), 7);
    assert_eq!(l.spec.run.duration, SimDuration::from_secs(20));
    let b = link(&l, "bottleneck");
    for dir in [&b.a_to_b, &b.b_to_a] {
        assert_eq!(dir.rate, Some(DataRate::from_mbps(1000)));
        assert_eq!(dir.delay, SimDuration::from_millis(10));
        assert_eq!(dir.queue.packets, None);
        assert_eq!(dir.queue.bytes, Some(Bytes::new(2_500_000)));
    }
    let access = link(&l, "h1-r1");
    assert_eq!(access.a_to_b.rate, Some(DataRate::from_mbps(10_000)));
    assert_eq!(access.b_to_a.delay, SimDuration::from_micros(100));
    assert_eq!(access.a_to_b.queue.packets, Some(1000));
    let names: Vec<&str> = l.spec.traffic.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["cbr", "udp-cbr-1", "bulk"]);
    assert_eq!(l.spec.traffic[0].count, 2);
    assert_eq!(l.spec.traffic[0].stop, Some(SimDuration::from_secs(15)));
    assert_eq!(l.spec.traffic[2].kind, TrafficKind::TcpBulk { bytes: None });
}

#[test]
fn one_router_forwards_at_line_rate() {
    let l = load("one-router.toml");
    let NodeKind::Router(r) = &l.spec.nodes[1].kind else {
        panic!("r1 is a router")
    };
    assert_eq!(r.forwarding_rate, None);
    assert_eq!(l.spec.traffic.len(), 2);
}

#[test]
fn two_routers_is_the_inet_experiment() {
    let l = load("two-routers.toml");
    assert_eq!(link(&l, "r1-r2").a_to_b.delay, SimDuration::from_millis(10));
    assert_eq!(link(&l, "h1-r1").a_to_b.delay, SimDuration::ZERO);
    assert_eq!(
        l.spec.traffic[0].kind,
        TrafficKind::Ping {
            interval: SimDuration::from_millis(10),
            size: Bytes::new(56)
        }
    );
}

#[test]
fn lossy_links_resolve_per_direction() {
    let l = load("lossy-links.toml");
    assert_eq!(
        link(&l, "access").a_to_b.loss,
        LossSpec::Bernoulli { p: 0.01 }
    );
    let lh = link(&l, "long-haul");
    assert_eq!(
        lh.a_to_b.loss,
        LossSpec::GilbertElliott {
            p: 0.01,
            r: 0.25,
            loss_good: 0.0,
            loss_bad: 1.0
        }
    );
    let j = lh.a_to_b.jitter.as_ref().expect("jitter");
    assert_eq!(j.amount, SimDuration::from_millis(5));
    assert_eq!(j.distribution, JitterDistribution::Normal);
    assert!(j.reorder);
    assert_eq!(lh.a_to_b.duplicate, 0.001);
    assert_eq!(lh.b_to_a.loss, LossSpec::None);
    assert_eq!(lh.b_to_a.jitter, None);
    assert_eq!(lh.b_to_a.duplicate, 0.0);
    assert_eq!(lh.b_to_a.rate, Some(DataRate::from_mbps(20)));
    assert_eq!(lh.b_to_a.delay, SimDuration::from_millis(30));
    assert!(matches!(
        l.spec.traffic[0].kind,
        TrafficKind::UdpOnOff { .. }
    ));
    assert!(matches!(
        l.spec.traffic[1].kind,
        TrafficKind::UdpPoisson { .. }
    ));
}

#[test]
fn link_flap_events() {
    let l = load("link-flap.toml");
    let e = &l.spec.events;
    assert_eq!(e.len(), 4);
    assert_eq!(e[0].action, LinkAction::Down);
    assert_eq!(e[0].at, SimDuration::from_secs(10));
    assert_eq!(e[1].action, LinkAction::Up);
    assert_eq!(e[2].direction, Direction::AToB);
    let LinkAction::Set(change) = &e[2].action else {
        panic!("set")
    };
    assert_eq!(change.rate, Some(Some(DataRate::from_mbps(10))));
    assert_eq!(change.delay, Some(SimDuration::from_millis(50)));
    assert_eq!(change.loss, None);
    let LinkAction::Set(change) = &e[3].action else {
        panic!("set")
    };
    assert_eq!(change.jitter, Some(None));
    assert_eq!(change.loss, Some(LossSpec::Bernoulli { p: 0.005 }));
    assert_eq!(e[3].direction, Direction::Both);
}

#[test]
fn switched_lan_addresses() {
    let l = load("switched-lan.toml");
    let NodeKind::Switch(s) = &l.spec.nodes[4].kind else {
        panic!("sw1 is a switch")
    };
    assert_eq!(s.mac_table_size, 1024);
    let lan = link(&l, "h1-sw1");
    assert_eq!(
        lan.a.address.map(|a| a.to_string()).as_deref(),
        Some("198.18.10.1/24")
    );
    assert_eq!(lan.b.address, None);
    assert_eq!(
        link(&l, "r1-h4").subnet.map(|s| s.to_string()).as_deref(),
        Some("198.18.20.0/24")
    );
    assert_eq!(
        l.spec.traffic[0].kind,
        TrafficKind::Traceroute { max_hops: 8 }
    );
}

#[test]
fn real_hosts_run_iperf_across_two_routers() {
    let l = load("real-hosts.toml");
    assert_eq!(l.spec.run.duration, SimDuration::from_secs(15));
    assert_eq!(l.spec.run.spin, DEFAULT_SPIN);
    let node = |name: &str| {
        &l.spec
            .nodes
            .iter()
            .find(|n| n.name == name)
            .unwrap_or_else(|| panic!("no node {name}"))
            .kind
    };
    let command = |cmd: &str, start: u64, wait: bool| CommandSpec {
        cmd: cmd.to_string(),
        start: SimDuration::from_secs(start),
        wait,
        ready: None,
    };
    assert_eq!(
        node("h1"),
        &NodeKind::Namespace(NamespaceSpec {
            commands: vec![
                command("ping -c 20 -i 0.05 198.18.2.2", 1, true),
                command("iperf3 -c 198.18.2.2 -t 3", 3, true),
            ],
            via: HostLink::Veth,
        })
    );
    assert_eq!(
        node("h2"),
        &NodeKind::Namespace(NamespaceSpec {
            commands: vec![CommandSpec {
                ready: Some(ReadySpec {
                    protocol: ReadyProtocol::Tcp,
                    port: 5201,
                    timeout: ReadySpec::DEFAULT_TIMEOUT,
                }),
                ..command("iperf3 -s -1", 0, false)
            }],
            via: HostLink::Veth,
        })
    );
    assert!(matches!(node("r1"), NodeKind::Router(_)));
    for dir in [&link(&l, "r1-r2").a_to_b, &link(&l, "r1-r2").b_to_a] {
        assert_eq!(dir.rate, Some(DataRate::from_mbps(1000)));
        assert_eq!(dir.delay, SimDuration::from_millis(10));
    }
    for name in ["h1-r1", "r2-h2"] {
        let access = &link(&l, name).a_to_b;
        assert_eq!(access.rate, Some(DataRate::from_mbps(10_000)));
        assert_eq!(access.delay, SimDuration::from_micros(10));
    }
    // It builds, and the address the commands name is h2's.
    let sim = netloop_model::Simulation::build(&l.spec)
        .unwrap_or_else(|e| panic!("real-hosts.toml does not build:\n{}", l.sources.located(&e)));
    let addr = |name: &str| {
        let real = sim
            .real
            .iter()
            .find(|r| r.name == name)
            .expect("a real node");
        real.port.addr.map(|a| a.addr.to_string())
    };
    assert_eq!(addr("h2").as_deref(), Some("198.18.2.2"));
    assert_eq!(addr("h1").as_deref(), Some("198.18.1.2"));
    assert_eq!(sim.real.len(), 2);
    // h1 reaches h2 through r1.
    let h1 = sim.real.iter().find(|r| r.name == "h1").unwrap();
    assert!(
        h1.routes
            .iter()
            .any(|r| r.prefix.contains("198.18.2.2".parse().unwrap())
                && r.via.map(|v| v.to_string()).as_deref() == Some("198.18.1.1")),
        "{:?}",
        h1.routes
    );
}

#[test]
fn sources_point_into_the_example() {
    let l = load("two-routers.toml");
    let text = std::fs::read_to_string(examples_dir().join("two-routers.toml")).unwrap();
    let at = l
        .sources
        .field(netloop_model::ItemRef::Link(1), "delay")
        .expect("delay is in the file");
    let line = text.lines().nth(at.line - 1).unwrap();
    assert!(line.starts_with("delay = \"10ms\""), "{line}");
    assert_eq!(at.column, 9);
    assert!(l.sources.file().ends_with("two-routers.toml"));
}

/// The fenced blocks of `docs/topology.md` whose info string is `info`.
fn doc_blocks(info: &str) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/topology.md");
    let text = std::fs::read_to_string(path).expect("docs/topology.md exists");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.strip_prefix("```")) {
            (None, Some(tag)) if tag.trim() == info => current = Some(String::new()),
            (Some(block), Some(_)) => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), None) => {
                block.push_str(line);
                block.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

#[test]
fn the_documented_example_loads() {
    let blocks = doc_blocks("toml");
    assert!(
        !blocks.is_empty(),
        "docs/topology.md has a complete example"
    );
    for block in blocks {
        let l = netloop_config::parse_str(&block, "docs/topology.md")
            .unwrap_or_else(|e| panic!("the example in docs/topology.md does not load:\n{e}"));
        // It shows every kind of item.
        assert!(!l.spec.nodes.is_empty() && !l.spec.links.is_empty() && !l.spec.routes.is_empty());
        assert!(!l.spec.traffic.is_empty() && !l.spec.events.is_empty());
        let kinds: std::collections::HashSet<_> = l
            .spec
            .traffic
            .iter()
            .map(|t| std::mem::discriminant(&t.kind))
            .collect();
        assert_eq!(kinds.len(), 7, "every traffic kind is shown");
    }
}

#[test]
fn the_documented_real_nodes_load_and_build() {
    let blocks = doc_blocks("toml real-time");
    assert!(!blocks.is_empty(), "docs/topology.md shows real nodes");
    for block in blocks {
        let l = netloop_config::parse_str(&block, "docs/topology.md")
            .unwrap_or_else(|e| panic!("the real nodes in docs/topology.md do not load:\n{e}"));
        let sim = netloop_model::Simulation::build(&l.spec)
            .unwrap_or_else(|e| panic!("{}", l.sources.located(&e)));
        let kinds: Vec<_> = sim
            .real
            .iter()
            .map(|r| std::mem::discriminant(&r.kind))
            .collect();
        assert!(
            kinds.len() == 2 && kinds[0] != kinds[1],
            "both real kinds are shown"
        );
    }
}

#[test]
fn the_documented_ipv6_example_numbers_as_it_says() {
    let blocks = doc_blocks("toml ipv6");
    assert_eq!(blocks.len(), 1, "docs/topology.md shows one IPv6 example");
    let l = netloop_config::parse_str(&blocks[0], "docs/topology.md").unwrap();
    let sim = netloop_model::Simulation::build(&l.spec)
        .unwrap_or_else(|e| panic!("{}", l.sources.located(&e)));
    let v6 = |name: &str| {
        let r = sim.real.iter().find(|r| r.name == name).unwrap();
        (r.port.addr6.unwrap().to_string(), r.routes6.clone())
    };
    let (h1, h1_routes) = v6("h1");
    let (h2, _) = v6("h2");
    assert_eq!(h1, "2001:2::1/64");
    assert_eq!(h2, "2001:2:0:1::2/64", "the address the example pings");
    assert_eq!(h1_routes.len(), 1);
    assert_eq!(h1_routes[0].prefix.prefix, 0, "a default route");
    assert_eq!(
        h1_routes[0].via,
        Some("2001:2::2".parse().unwrap()),
        "via r1"
    );
}

#[test]
fn documented_fragments_are_valid_link_parameters() {
    let fragments = doc_blocks("toml fragment");
    assert!(!fragments.is_empty());
    for line in fragments
        .iter()
        .flat_map(|b| b.lines())
        .filter(|l| !l.trim().is_empty())
    {
        let text = format!(
            "[[node]]\nname = \"a\"\nkind = \"host\"\n[[node]]\nname = \"b\"\nkind = \"host\"\n\
             [[link]]\nendpoints = [\"a\", \"b\"]\n{line}\n"
        );
        if let Err(e) = netloop_config::parse_str(&text, "fragment.toml") {
            panic!("documented fragment '{line}' does not load:\n{e}");
        }
    }
}
