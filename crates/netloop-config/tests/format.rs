//! What the format means: defaults, the layering of link parameters, default
//! names, and errors that need more than one file to show.

use netloop_config::{parse_str, ConfigErrors, Loaded};
use netloop_core::{Bytes, DataRate, PacketRate, SimDuration};
use netloop_model::spec::{
    AttachedSpec, CodelSpec, CommandSpec, DirectionSpec, FqCodelSpec, HostLink, JitterDistribution,
    JitterSpec, LinkAction, LossSpec, NamespaceSpec, NodeKind, QueueDiscipline, QueueSpec, RedSpec,
    RunSpec, TrafficKind, DEFAULT_SPIN,
};
use netloop_model::{BuildError, ItemRef};

const NODES: &str = r#"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "h2"
kind = "host"
[[node]]
name = "r1"
kind = "router"
"#;

fn ok(text: &str) -> Loaded {
    parse_str(text, "t.toml").unwrap_or_else(|e| panic!("unexpected errors:\n{e}"))
}

fn errors(text: &str) -> ConfigErrors {
    match parse_str(text, "t.toml") {
        Ok(_) => panic!("expected errors in:\n{text}"),
        Err(e) => e,
    }
}

/// The one error of `text`, printed.
fn one_error(text: &str) -> String {
    let e = errors(text);
    assert_eq!(e.len(), 1, "expected one error, got:\n{e}");
    e.to_string()
}

#[test]
fn a_file_without_nodes_is_an_error() {
    for text in ["", "# nothing yet\n", "[run]\nseed = 7\n", "node = []\n"] {
        let e = one_error(text);
        assert!(
            e.starts_with("t.toml:1:1: the topology has no nodes: add [[node]] tables"),
            "{text:?}: {e}"
        );
    }
    // A misspelt [[node]] says so, without the consequence.
    let e = one_error("[[nodes]]\nname = \"h1\"\n");
    assert!(e.contains("did you mean 'node'?"), "{e}");
}

#[test]
fn a_file_of_nodes_only_has_the_default_run() {
    let l = ok(NODES);
    assert_eq!(l.spec.run.duration, RunSpec::default().duration);
    assert_eq!(l.spec.run.seed, 1);
    assert_eq!(l.spec.address_pool, None);
    assert_eq!(l.spec.nodes.len(), 3);
}

#[test]
fn run_settings() {
    let l = ok(&format!(
        "[run]\nduration = \"1.5min\"\nseed = 7\naddress_pool = \"198.18.0.0/16\"\n{NODES}"
    ));
    assert_eq!(l.spec.run.duration, SimDuration::from_secs(90));
    assert_eq!(l.spec.run.seed, 7);
    assert_eq!(l.spec.address_pool.unwrap().to_string(), "198.18.0.0/16");
}

#[test]
fn spin_window() {
    // The run tables below come first, the nodes after them.
    let ok = |text: &str| ok(&format!("{text}{NODES}"));
    let errors = |text: &str| errors(&format!("{text}{NODES}"));
    let one_error = |text: &str| one_error(&format!("{text}{NODES}"));
    assert_eq!(ok("").spec.run.spin, DEFAULT_SPIN);
    assert_eq!(ok("[run]\nseed = 2\n").spec.run.spin, DEFAULT_SPIN);
    let spin = |text: &str| ok(&format!("[run]\nspin = {text}\n")).spec.run.spin;
    assert_eq!(spin("\"20us\""), SimDuration::from_micros(20));
    // Zero never spins; the limit itself is allowed.
    assert_eq!(spin("\"0s\""), SimDuration::ZERO);
    assert_eq!(spin("0"), SimDuration::ZERO);
    assert_eq!(spin("\"10ms\""), SimDuration::from_millis(10));
    let e = errors("[run]\nduration = \"5s\"\nspin = 50\n");
    assert_eq!(e.len(), 1, "{e}");
    let e = &e.errors()[0];
    assert_eq!((e.line, e.column), (3, 8));
    assert_eq!(
        e.to_string(),
        "t.toml:3:8: run, field 'spin': expected a duration string like '10ms', found integer 50"
    );
    let e = one_error("[run]\nspin = \"10.001ms\"\n");
    assert!(
        e.starts_with("t.toml:2:8: run, field 'spin': 10.001ms is too long a spin window"),
        "{e}"
    );
    let e = one_error("[run]\nspin = \"-1us\"\n");
    assert!(
        e.starts_with("t.toml:2:8: run, field 'spin': '-1us' is not a duration"),
        "{e}"
    );
    // A run setting outside [run] says where it belongs.
    let e = one_error("spin = \"20us\"\n");
    assert!(e.contains("'spin' belongs in the [run] table"), "{e}");
    // IPv6-only: IPv4 off needs IPv6 on, and has no IPv4 pool.
    let run = ok("[run]\nipv6 = true\nipv4 = false\n").spec.run;
    assert!(run.ipv6 && run.ipv6_only);
    assert!(!ok("[run]\nipv6 = true\nipv4 = true\n").spec.run.ipv6_only);
    let e = one_error("[run]\nipv4 = false\n");
    assert!(
        e.starts_with("t.toml:2:8: run, field 'ipv4': a network needs IPv4 or IPv6"),
        "{e}"
    );
    let e = one_error("[run]\nipv6 = true\naddress_pool = \"198.18.0.0/16\"\nipv4 = false\n");
    assert!(e.contains("an IPv4 pool in an IPv6-only network"), "{e}");
    // Static neighbour tables: off unless asked, and a boolean.
    assert!(!ok("[run]\n").spec.run.static_neighbours);
    assert!(
        ok("[run]\nstatic_neighbours = true\n")
            .spec
            .run
            .static_neighbours
    );
    let e = one_error("[run]\nstatic_neighbours = \"yes\"\n");
    assert!(
        e.starts_with("t.toml:2:21: run, field 'static_neighbours':"),
        "{e}"
    );
}

#[test]
fn a_command_can_hold_the_start_until_it_is_ready() {
    use netloop_model::spec::{ReadyProtocol, ReadySpec};
    let l = ok(r#"
[[node]]
name = "h1"
kind = "namespace"
command = [{ cmd = "iperf3 -s", ready = "tcp:5201" },
           { cmd = "python3 -u srv.py", ready = "UDP:5000", ready_timeout = "30s" },
           { cmd = "sleep 1" }]
"#);
    let NodeKind::Namespace(ns) = &l.spec.nodes[0].kind else {
        panic!("a namespace host");
    };
    let ready: Vec<_> = ns.commands.iter().map(|c| c.ready).collect();
    assert_eq!(
        ready,
        [
            Some(ReadySpec {
                protocol: ReadyProtocol::Tcp,
                port: 5201,
                timeout: ReadySpec::DEFAULT_TIMEOUT
            }),
            Some(ReadySpec {
                protocol: ReadyProtocol::Udp,
                port: 5000,
                timeout: SimDuration::from_secs(30)
            }),
            None
        ]
    );
    assert_eq!(ready[0].unwrap().to_string(), "tcp:5201");
}

#[test]
fn namespace_hosts_with_commands() {
    let l = ok(r#"
[run]
duration = "15s"

[[node]]
name = "h1"
kind = "namespace"
via = "tap"
[[node.command]]
cmd = "iperf3 -s -1"
[[node.command]]
cmd = "ping -c 20 -i 0.05 198.18.2.2"
start = "1.5s"
wait = true
[[node.command]]
cmd = "sleep 1"
start = 0
wait = false

[[node]]
name = "h2"
kind = "namespace"

[[node]]
name = "h3"
kind = "namespace"
via = "veth"
command = [{ cmd = "true" }, { cmd = "false", start = "15s" }]
"#);
    let kinds: Vec<&NodeKind> = l.spec.nodes.iter().map(|n| &n.kind).collect();
    let command = |cmd: &str, start: SimDuration, wait: bool| CommandSpec {
        cmd: cmd.to_string(),
        start,
        wait,
        ready: None,
    };
    assert_eq!(
        kinds[0],
        &NodeKind::Namespace(NamespaceSpec {
            commands: vec![
                command("iperf3 -s -1", SimDuration::ZERO, false),
                command(
                    "ping -c 20 -i 0.05 198.18.2.2",
                    SimDuration::from_millis(1500),
                    true
                ),
                command("sleep 1", SimDuration::ZERO, false),
            ],
            via: HostLink::Tap,
        })
    );
    // Defaults: a veth pair and no programs.
    assert_eq!(
        kinds[1],
        &NodeKind::Namespace(NamespaceSpec {
            commands: Vec::new(),
            via: HostLink::Veth,
        })
    );
    assert!(kinds[0].is_real() && kinds[1].is_real());
    // Inline tables are the same thing; a program may start at the very end.
    assert_eq!(
        kinds[2],
        &NodeKind::Namespace(NamespaceSpec {
            commands: vec![
                command("true", SimDuration::ZERO, false),
                command("false", SimDuration::from_secs(15), false),
            ],
            via: HostLink::Veth,
        })
    );
    // The model's name for the programs is found at the file's key.
    let e = l.sources.located(&BuildError {
        item: ItemRef::Node(0),
        what: "node 'h1'".into(),
        field: Some("commands"),
        message: "bad".into(),
    });
    assert_eq!((e.line, e.column), (9, 1));
}

#[test]
fn attached_interfaces() {
    let l = ok(r#"
[[node]]
name = "nic0"
kind = "attached"
interface = "veth-a"
[[node]]
name = "nic1"
kind = "attached"
interface = "enp3s0"
force = true
[[node]]
name = "nic2"
kind = "attached"
interface = "eth0.100"
force = false
"#);
    let kinds: Vec<&NodeKind> = l.spec.nodes.iter().map(|n| &n.kind).collect();
    let attached = |interface: &str, force: bool| {
        NodeKind::Attached(AttachedSpec {
            interface: interface.to_string(),
            force,
        })
    };
    assert_eq!(
        kinds,
        [
            &attached("veth-a", false),
            &attached("enp3s0", true),
            &attached("eth0.100", false)
        ]
    );
    let e = one_error("[[node]]\nname = \"nic0\"\nkind = \"attached\"\ninterface = \"\"\n");
    assert!(
        e.starts_with(
            "t.toml:4:13: node 'nic0', field 'interface': an interface name must not be empty"
        ),
        "{e}"
    );
    let e = one_error("[[node]]\nname = \"nic0\"\nkind = \"attached\"\ninterface = \"my nic\"\n");
    assert!(
        e.contains("'my nic' is not an interface name: ' ' is not allowed"),
        "{e}"
    );
}

#[test]
fn links_may_name_their_interfaces() {
    // Named as Mininet names them; the name is the real host's interface
    // inside its namespace, and every port's name in the built network.
    let l = ok(r#"
[[node]]
name = "h1"
kind = "namespace"
[[node]]
name = "s1"
kind = "switch"
[[node]]
name = "h2"
kind = "host"
[[link]]
endpoints = ["h1", "s1"]
interfaces = ["h1-eth0", "s1-eth1"]
[[link]]
endpoints = ["h2", "s1"]
interfaces = ["auto", "s1-eth2"]
"#);
    assert_eq!(l.spec.links[0].a.interface.as_deref(), Some("h1-eth0"));
    assert_eq!(l.spec.links[1].a.interface, None);
    let sim = netloop_model::Simulation::build(&l.spec).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sim.real[0].port.name, "h1-eth0");
    let results = sim.results("simulated", None, None);
    let ports = |node: &str| -> Vec<String> {
        let n = results.nodes.iter().find(|n| n.name == node).unwrap();
        n.interfaces.iter().map(|i| i.name.clone()).collect()
    };
    assert_eq!(ports("s1"), ["s1-eth1", "s1-eth2"]);
    assert_eq!(ports("h2"), ["eth0"]);
}

#[test]
fn real_nodes_join_simulated_ones() {
    // Real nodes are nodes like any other to links, addresses and routes;
    // the model checks the rest (one link each) when it builds.
    let l = ok(r#"
[[node]]
name = "h1"
kind = "namespace"
[[node]]
name = "r1"
kind = "router"
[[node]]
name = "nic0"
kind = "attached"
interface = "veth-a"
[[link]]
endpoints = ["h1", "r1"]
addresses = ["198.18.1.2/24", "auto"]
[[link]]
endpoints = ["r1", "nic0"]
[[route]]
node = "h1"
prefix = "198.19.0.0/24"
via = "198.18.1.1"
"#);
    let sim = netloop_model::Simulation::build(&l.spec).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = sim.real.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["h1", "nic0"]);
    assert_eq!(
        sim.real[0].port.addr.map(|a| a.to_string()).as_deref(),
        Some("198.18.1.2/24")
    );
}

#[test]
fn node_kinds_and_their_defaults() {
    let l = ok(r#"
[[node]]
name = "h1"
kind = "host"
[[node]]
name = "r1"
kind = "router"
[[node]]
name = "r2"
kind = "router"
forwarding_rate = "50kpps"
forwarding_queue = 10
[[node]]
name = "sw1"
kind = "switch"
[[node]]
name = "sw2"
kind = "switch"
mac_table_size = 16
mac_aging = "1s"
"#);
    let kinds: Vec<&NodeKind> = l.spec.nodes.iter().map(|n| &n.kind).collect();
    assert_eq!(kinds[0], &NodeKind::Host);
    let NodeKind::Router(r1) = kinds[1] else {
        panic!()
    };
    assert_eq!((r1.forwarding_rate, r1.forwarding_queue), (None, 1000));
    let NodeKind::Router(r2) = kinds[2] else {
        panic!()
    };
    assert_eq!(
        (r2.forwarding_rate, r2.forwarding_queue),
        (Some(PacketRate::from_pps(50_000)), 10)
    );
    let NodeKind::Switch(s1) = kinds[3] else {
        panic!()
    };
    assert_eq!(
        (s1.mac_table_size, s1.mac_aging),
        (8192, SimDuration::from_secs(300))
    );
    let NodeKind::Switch(s2) = kinds[4] else {
        panic!()
    };
    assert_eq!(
        (s2.mac_table_size, s2.mac_aging),
        (16, SimDuration::from_secs(1))
    );
}

#[test]
fn a_bare_link_has_the_spec_defaults() {
    let l = ok(&format!(
        "{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\n"
    ));
    let link = &l.spec.links[0];
    assert_eq!(link.name, "h1-r1");
    assert_eq!((link.a.node.as_str(), link.b.node.as_str()), ("h1", "r1"));
    assert_eq!(
        (link.a.address, link.b.address, link.subnet),
        (None, None, None)
    );
    assert_eq!(link.a_to_b, DirectionSpec::default());
    assert_eq!(link.b_to_a, DirectionSpec::default());
}

#[test]
fn queue_disciplines_come_with_their_parameters_and_defaults() {
    let l = ok(&format!(
        r#"
[defaults.link]
queue = {{ discipline = "codel", target = "2ms" }}
{NODES}
[[link]]
endpoints = ["h1", "r1"]
queue = {{ packets = 300 }}
[link.b_to_a]
queue = {{ discipline = "fq-codel", quantum = 300, ecn = false }}

[[link]]
endpoints = ["h2", "r1"]
queue = {{ discipline = "red", min_threshold = 8, max_threshold = 24.5, max_p = "5%", ecn = true }}
"#
    ));
    // The discipline and its parameters from the defaults, the packet
    // limit from the link.
    let ab = &l.spec.links[0].a_to_b;
    assert_eq!(ab.queue.packets, Some(300));
    assert_eq!(
        ab.queue.discipline,
        QueueDiscipline::Codel(CodelSpec {
            target: SimDuration::from_millis(2),
            ..CodelSpec::default()
        })
    );
    assert_eq!(
        l.spec.links[0].b_to_a.queue.discipline,
        QueueDiscipline::FqCodel(FqCodelSpec {
            quantum: 300,
            ecn: false,
            ..FqCodelSpec::default()
        })
    );
    assert_eq!(
        l.spec.links[1].a_to_b.queue.discipline,
        QueueDiscipline::Red(RedSpec {
            min_threshold: 8.0,
            max_threshold: 24.5,
            max_p: 0.05,
            ecn: true,
            ..RedSpec::default()
        })
    );
}

#[test]
fn parameters_layer_defaults_link_direction() {
    let l = ok(&format!(
        r#"
[defaults.link]
rate = "1Gbps"
delay = "1ms"
jitter_distribution = "pareto"
queue = {{ packets = 50 }}
{NODES}
[[link]]
endpoints = ["h1", "r1"]
delay = "5ms"
jitter = "1ms"
queue = {{ bytes = "64kB" }}
[link.a_to_b]
rate = "10Mbps"
[link.b_to_a]
delay = "20ms"
jitter = "none"
queue = {{ packets = "unlimited", discipline = "drop-tail" }}

[[link]]
endpoints = ["h2", "r1"]
"#
    ));
    let ab = &l.spec.links[0].a_to_b;
    assert_eq!(ab.rate, Some(DataRate::from_mbps(10)));
    assert_eq!(ab.delay, SimDuration::from_millis(5));
    assert_eq!(
        ab.jitter,
        Some(JitterSpec {
            amount: SimDuration::from_millis(1),
            distribution: JitterDistribution::Pareto,
            reorder: false
        })
    );
    // Queue keys layer one by one: packets from the defaults, bytes from
    // the link.
    assert_eq!(
        ab.queue,
        QueueSpec {
            packets: Some(50),
            bytes: Some(Bytes::new(64_000)),
            ..QueueSpec::default()
        }
    );
    let ba = &l.spec.links[0].b_to_a;
    assert_eq!(ba.rate, Some(DataRate::from_mbps(1000)));
    assert_eq!(ba.delay, SimDuration::from_millis(20));
    assert_eq!(ba.jitter, None);
    assert_eq!(ba.queue.packets, None);
    assert_eq!(ba.queue.bytes, Some(Bytes::new(64_000)));
    // The second link has only the defaults.
    let other = &l.spec.links[1].a_to_b;
    assert_eq!(
        (other.rate, other.delay, other.jitter.clone()),
        (
            Some(DataRate::from_mbps(1000)),
            SimDuration::from_millis(1),
            None
        )
    );
    assert_eq!(other.queue.packets, Some(50));
}

/// Mininet's and netem's `loss=1` is one percent; here a bare 1 would be
/// every packet, so it is refused with the ways to say either.
#[test]
fn a_bare_one_for_loss_corruption_or_duplication_is_refused() {
    for field in ["loss", "corrupt", "duplicate"] {
        for one in ["1", "1.0"] {
            let e = one_error(&format!(
                "{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\n{field} = {one}\n"
            ));
            assert!(
                e.contains(&format!("field '{field}'")) && e.contains("write '1%' (or 0.01)"),
                "{e}"
            );
        }
        let l = ok(&format!(
            "{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\n{field} = \"100%\"\n"
        ));
        let d = &l.spec.links[0].a_to_b;
        let p = match field {
            "loss" => match d.loss {
                LossSpec::Bernoulli { p } => p,
                ref other => panic!("{other:?}"),
            },
            "corrupt" => d.corrupt,
            _ => d.duplicate,
        };
        assert_eq!(p, 1.0, "{field} = \"100%\" is every packet");
    }
    // A model's own probabilities are probabilities: its bad state may lose
    // every packet.
    ok(&format!(
        "{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\nloss = {{ model = \"gilbert-elliott\", p = 0.1, r = 1, loss_bad = 1 }}\n"
    ));
}

#[test]
fn loss_forms() {
    let link = |loss: &str| {
        let l = ok(&format!(
            "{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\nloss = {loss}\n"
        ));
        l.spec.links[0].a_to_b.loss.clone()
    };
    assert_eq!(link("0.02"), LossSpec::Bernoulli { p: 0.02 });
    assert_eq!(link("\"2%\""), LossSpec::Bernoulli { p: 0.02 });
    assert_eq!(link("0"), LossSpec::None);
    assert_eq!(link("\"none\""), LossSpec::None);
    assert_eq!(
        link("{ model = \"bernoulli\", p = 0.1 }"),
        LossSpec::Bernoulli { p: 0.1 }
    );
    assert_eq!(link("{ model = \"none\" }"), LossSpec::None);
    assert_eq!(
        link("{ model = \"gilbert-elliott\", p = \"1%\", r = 0.5 }"),
        LossSpec::GilbertElliott {
            p: 0.01,
            r: 0.5,
            loss_good: 0.0,
            loss_bad: 1.0
        }
    );
    let e = one_error(&format!("{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\nloss = {{ model = \"gilbert-elliott\", p = 0.1 }}\n"));
    assert!(e.contains("missing required field 'loss.r'"), "{e}");
    let e = one_error(&format!("{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\nloss = {{ model = \"bernoulli\", p = 0.1, r = 0.2 }}\n"));
    assert!(
        e.contains("'r' applies only to loss model 'gilbert-elliott'"),
        "{e}"
    );
    let e = one_error(&format!("{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\nloss = {{ model = \"gilbert\", p = 0.1 }}\n"));
    assert!(e.contains("'gilbert' is not a known loss model"), "{e}");
}

#[test]
fn addresses() {
    let l = ok(&format!(
        "{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\nsubnet = \"198.18.7.0/24\"\naddresses = [\"198.18.7.10\", \"auto\"]\n"
    ));
    // A bare address takes the subnet's length.
    assert_eq!(
        l.spec.links[0].a.address.unwrap().to_string(),
        "198.18.7.10/24"
    );
    assert_eq!(l.spec.links[0].b.address, None);
    let e = one_error(&format!(
        "{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\naddresses = [\"198.18.0.1/24\", \"198.18.0.1/24\"]\n"
    ));
    assert!(
        e.contains("both endpoints have the address 198.18.0.1"),
        "{e}"
    );
    let e = one_error(&format!(
        "{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\naddresses = [\"198.18.0.255/24\", \"auto\"]\n"
    ));
    assert!(e.contains("broadcast address"), "{e}");
    let e = one_error(&format!(
        "{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\naddresses = [\"auto\"]\n"
    ));
    assert!(e.contains("found only one"), "{e}");
    let e = one_error(&format!(
        "{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\nsubnet = \"198.18.0.0/32\"\n"
    ));
    assert!(e.contains("no room for two addresses"), "{e}");
}

#[test]
fn traffic_defaults_per_kind() {
    let l = ok(&format!(
        r#"{NODES}
[[traffic]]
kind = "ping"
from = "h1"
to = "h2"
[[traffic]]
kind = "udp-cbr"
from = "h1"
to = "h2"
rate = "1Mbps"
[[traffic]]
kind = "udp-onoff"
from = "h1"
to = "h2"
rate = "1Mbps"
on = "1s"
off = "2s"
[[traffic]]
kind = "tcp-bulk"
from = "h1"
to = "h2"
bytes = "10MB"
[[traffic]]
kind = "tcp-rr"
from = "h1"
to = "h2"
[[traffic]]
kind = "traceroute"
from = "h1"
to = "h2"
"#
    ));
    let t = &l.spec.traffic;
    assert_eq!(
        t[0].kind,
        TrafficKind::Ping {
            interval: SimDuration::from_secs(1),
            size: Bytes::new(56)
        }
    );
    assert_eq!(
        (t[0].start, t[0].stop, t[0].count),
        (SimDuration::ZERO, None, 1)
    );
    assert_eq!(
        t[1].kind,
        TrafficKind::UdpCbr {
            rate: DataRate::from_mbps(1),
            size: Bytes::new(1000)
        }
    );
    assert_eq!(
        t[2].kind,
        TrafficKind::UdpOnOff {
            rate: DataRate::from_mbps(1),
            size: Bytes::new(1000),
            on: SimDuration::from_secs(1),
            off: SimDuration::from_secs(2)
        }
    );
    assert_eq!(
        t[3].kind,
        TrafficKind::TcpBulk {
            bytes: Some(Bytes::new(10_000_000))
        }
    );
    assert_eq!(
        t[4].kind,
        TrafficKind::TcpRr {
            request: Bytes::new(100),
            response: Bytes::new(1000),
            interval: None
        }
    );
    assert_eq!(t[5].kind, TrafficKind::Traceroute { max_hops: 30 });
    let names: Vec<&str> = t.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ping-1",
            "udp-cbr-1",
            "udp-onoff-1",
            "tcp-bulk-1",
            "tcp-rr-1",
            "traceroute-1"
        ]
    );
}

#[test]
fn default_traffic_names_skip_explicit_ones() {
    let flow =
        |name: &str| format!("[[traffic]]\n{name}kind = \"ping\"\nfrom = \"h1\"\nto = \"h2\"\n");
    let l = ok(&format!(
        "{NODES}{}{}{}",
        flow(""),
        flow("name = \"ping-2\"\n"),
        flow("")
    ));
    let names: Vec<&str> = l.spec.traffic.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["ping-1", "ping-2", "ping-3"]);
}

#[test]
fn traffic_timing_errors() {
    let flow = |extra: &str| {
        format!("{NODES}[run]\nduration = \"10s\"\n[[traffic]]\nkind = \"tcp-bulk\"\nfrom = \"h1\"\nto = \"h2\"\n{extra}")
    };
    // [run] after the nodes is still the run table.
    assert_eq!(
        ok(&flow("start = \"9s\"\n")).spec.traffic[0].start,
        SimDuration::from_secs(9)
    );
    let e = one_error(&flow("start = \"10s\"\n"));
    assert!(e.contains("starts at 10s, but the run ends at 10s"), "{e}");
    let e = one_error(&flow("start = \"1s\"\nstop = \"1s\"\n"));
    assert!(e.contains("stop (1s) must be after start (1s)"), "{e}");
    let e = one_error(&flow("interval = \"1s\"\n"));
    assert!(
        e.contains("'interval' does not apply to traffic of kind 'tcp-bulk'"),
        "{e}"
    );
}

#[test]
fn a_duration_given_outside_the_file_is_checked_with_it() {
    let text = format!(
        "{NODES}[run]\nduration = \"20s\"\n[[link]]\nendpoints = [\"h1\", \"r1\"]\n\
         [[link]]\nendpoints = [\"r1\", \"h2\"]\n[[traffic]]\nkind = \"tcp-bulk\"\n\
         from = \"h1\"\nto = \"h2\"\nstart = \"5s\"\n"
    );
    let start_line = text.lines().position(|l| l == "start = \"5s\"").unwrap() + 1;
    let with = |d: SimDuration| netloop_config::Overrides {
        duration: Some((d, "--duration".to_string())),
    };
    let l = netloop_config::parse_str_with(&text, "t.toml", &with(SimDuration::from_secs(6)))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(l.spec.run.duration, SimDuration::from_secs(6));
    // `netloop run --duration 3s`: the traffic (no `stop`: it stops at the
    // end of the run) would stop before it starts. The error says that the
    // option did it, at the traffic's start, not at a `stop` it doesn't have.
    let e = match netloop_config::parse_str_with(&text, "t.toml", &with(SimDuration::from_secs(3)))
    {
        Ok(_) => panic!("--duration 3s before a start at 5s was accepted"),
        Err(e) => e,
    };
    assert_eq!(e.len(), 1, "{e}");
    let e = &e.errors()[0];
    assert_eq!(
        (e.line, e.field.as_deref()),
        (start_line, Some("start")),
        "{e}"
    );
    assert!(
        e.message.contains("--duration 3s ends the run")
            && e.message.contains("before it starts")
            && e.message.contains("expected a --duration longer than 5s"),
        "{e}"
    );
    // Programs and events after the end say what set the end too.
    let e = one_error_with(
        &format!("{NODES}[[link]]\nendpoints = [\"h1\", \"r1\"]\n[[event]]\nat = \"4s\"\nlink = \"h1-r1\"\naction = \"down\"\n"),
        &with(SimDuration::from_secs(3)),
    );
    assert!(
        e.contains("field 'at': 4s is after the end of the run (3s, set by --duration 3s)"),
        "{e}"
    );

    // A spec whose duration was changed after loading (as a front end that
    // does not pass it to the loader would) still fails at the start, not at
    // a `stop` the traffic does not have.
    let mut l = ok(&text);
    l.spec.run.duration = SimDuration::from_secs(3);
    let err = match netloop_model::Simulation::build(&l.spec) {
        Ok(_) => panic!("built a traffic that starts after the run's end"),
        Err(e) => e,
    };
    let e = l.sources.located(&err);
    assert_eq!(
        (e.line, e.field.as_deref()),
        (start_line, Some("start")),
        "{e}"
    );
    assert!(
        e.message
            .contains("starts at 5s, but the run ends at 3s, where traffic without 'stop' stops"),
        "{e}"
    );
}

/// The one error of `text` loaded with `overrides`, printed.
fn one_error_with(text: &str, overrides: &netloop_config::Overrides) -> String {
    match netloop_config::parse_str_with(text, "t.toml", overrides) {
        Ok(_) => panic!("expected an error in:\n{text}"),
        Err(e) => {
            assert_eq!(e.len(), 1, "expected one error, got:\n{e}");
            e.to_string()
        }
    }
}

#[test]
fn events() {
    let base = format!("{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\n[[event]]\nat = \"1s\"\nlink = \"h1-r1\"\n");
    let l = ok(&format!("{base}action = \"set\"\njitter = \"2ms\"\njitter_distribution = \"normal\"\nloss = 0\nrate = \"unlimited\"\n"));
    let LinkAction::Set(c) = &l.spec.events[0].action else {
        panic!()
    };
    assert_eq!(
        c.jitter,
        Some(Some(JitterSpec {
            amount: SimDuration::from_millis(2),
            distribution: JitterDistribution::Normal,
            reorder: false
        }))
    );
    assert_eq!(c.loss, Some(LossSpec::None));
    assert_eq!(c.rate, Some(None));
    assert_eq!((c.delay, c.corrupt, c.duplicate), (None, None, None));
    let e = one_error(&format!("{base}action = \"set\"\nreorder = true\n"));
    assert!(
        e.contains("'reorder' needs 'jitter' in the same event"),
        "{e}"
    );
    let e = one_error(&format!("{base}action = \"up\"\ndirection = \"a-to-b\"\n"));
    assert!(e.contains("did you mean 'a_to_b'?"), "{e}");
    let e = one_error(&format!("{base}action = \"flap\"\n"));
    assert!(
        e.contains("'flap' is not a known action: expected one of down, up, set"),
        "{e}"
    );
    // An event exactly at the end of the run is allowed.
    ok(&format!("{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\n[[event]]\nat = \"10s\"\nlink = \"h1-r1\"\naction = \"down\"\n"));
}

#[test]
fn routes() {
    let route = "[[route]]\nnode = \"r1\"\nprefix = \"198.19.0.0/24\"\nvia = \"198.18.0.2\"\n";
    let l = ok(&format!("{NODES}{route}"));
    assert_eq!(l.spec.routes[0].prefix.to_string(), "198.19.0.0/24");
    assert_eq!(l.spec.routes[0].via.to_string(), "198.18.0.2");
    let e = one_error(&format!("{NODES}{route}{route}"));
    assert!(
        e.contains("'r1' already has a route to 198.19.0.0/24 (line"),
        "{e}"
    );
    let e = one_error(&format!(
        "{NODES}[[route]]\nnode = \"r1\"\nprefix = \"198.19.0.1/24\"\nvia = \"198.18.0.2\"\n"
    ));
    assert!(e.contains("host bits set"), "{e}");
    // IPv6: the next hop of the prefix's family.
    let v6 = "[[route]]\nnode = \"r1\"\nprefix = \"2001:2:9::/48\"\nvia = \"2001:2::2\"\n";
    let l = ok(&format!("{NODES}{v6}"));
    assert_eq!(l.spec.routes[0].prefix.to_string(), "2001:2:9::/48");
    assert_eq!(l.spec.routes[0].via.to_string(), "2001:2::2");
    let e = one_error(&format!(
        "{NODES}[[route]]\nnode = \"r1\"\nprefix = \"198.19.0.0/24\"\nvia = \"2001:2::2\"\n"
    ));
    assert!(e.contains("an IPv6 next hop for the IPv4 prefix"), "{e}");
    let e = one_error(&format!(
        "{NODES}[[route]]\nnode = \"r1\"\nprefix = \"2001:2:9::/48\"\nvia = \"198.18.0.2\"\n"
    ));
    assert!(e.contains("is not an IPv6 address"), "{e}");
}

#[test]
fn ipv6_addresses_of_links() {
    let link = |extra: &str| format!("{NODES}[[link]]\nendpoints = [\"h1\", \"r1\"]\n{extra}");
    let l = ok(&link(
        "addresses6 = [\"2001:2:9::5\", \"auto\"]\nsubnet6 = \"2001:2:9::/64\"\n",
    ));
    assert_eq!(
        l.spec.links[0].a.address6.unwrap().to_string(),
        "2001:2:9::5/64"
    );
    assert_eq!(l.spec.links[0].b.address6, None);
    assert_eq!(
        l.spec.links[0].subnet6.unwrap().to_string(),
        "2001:2:9::/64"
    );
    for (extra, says) in [
        (
            "addresses6 = [\"2001:2:9::/64\", \"auto\"]",
            "subnet-router anycast",
        ),
        (
            "addresses6 = [\"2001:2:9::1/64\", \"2001:2:8::2/64\"]",
            "different subnets",
        ),
        (
            "addresses6 = [\"2001:2:9::1\", \"auto\"]",
            "no prefix length",
        ),
        (
            "addresses6 = [\"ff02::1/64\", \"auto\"]",
            "not a unicast address",
        ),
        (
            "addresses6 = [\"198.18.0.1/24\", \"auto\"]",
            "not an IPv6 prefix",
        ),
        ("subnet6 = \"2001:2:9::/128\"", "no room for two addresses"),
        ("subnet6 = \"2001:2:9::1/64\"", "host bits set"),
    ] {
        let e = one_error(&link(&format!("{extra}\n")));
        assert!(e.contains(says), "{extra}: {e}");
    }
}

#[test]
fn names_are_checked() {
    let e = one_error("[[node]]\nname = \"h 1\"\nkind = \"host\"\n");
    assert!(
        e.contains("'h 1' is not a valid name: ' ' is not allowed"),
        "{e}"
    );
    let e = one_error(&format!(
        "{NODES}[[traffic]]\nname = 5\nkind = \"ping\"\nfrom = \"h1\"\nto = \"h2\"\n"
    ));
    assert!(
        e.contains("field 'name': expected a string, found integer 5"),
        "{e}"
    );
    let e = one_error(&format!(
        "{NODES}[[traffic]]\nname = \"a#1\"\nkind = \"ping\"\nfrom = \"h1\"\nto = \"h2\"\n"
    ));
    assert!(e.contains("'#' is not allowed"), "{e}");
    let e = one_error("[[node]]\nname = \"\"\nkind = \"host\"\n");
    assert!(e.contains("must not be empty"), "{e}");
}

#[test]
fn build_errors_are_located_at_the_field() {
    let text = format!("{NODES}\n[[link]]\nendpoints = [\"h1\", \"r1\"]\naddresses = [\"198.18.0.1/24\", \"auto\"]\n");
    let l = ok(&text);
    let err = BuildError {
        item: ItemRef::Link(0),
        what: "link 'h1-r1'".into(),
        field: Some("address"),
        message: "198.18.0.1 is also assigned automatically".into(),
    };
    let e = l.sources.located(&err);
    let line = text
        .lines()
        .position(|l| l.starts_with("addresses"))
        .unwrap()
        + 1;
    assert_eq!((e.line, e.column), (line, 13));
    assert_eq!(
        e.to_string(),
        format!("t.toml:{line}:13: link 'h1-r1', field 'address': 198.18.0.1 is also assigned automatically")
    );
    // One endpoint's address points at its entry.
    let e = l.sources.located(&BuildError {
        field: Some("b.address"),
        ..err.clone()
    });
    assert_eq!((e.line, e.column), (line, 31));
    // A field the file doesn't set points at the item's header.
    let e = l.sources.located(&BuildError {
        field: Some("mtu"),
        ..err.clone()
    });
    let header = text.lines().position(|l| l == "[[link]]").unwrap() + 1;
    assert_eq!((e.line, e.column), (header, 1));
    // Run settings without a [run] table point at the start.
    let e = l.sources.located(&BuildError {
        item: ItemRef::Run,
        field: Some("duration"),
        ..err
    });
    assert_eq!((e.line, e.column), (1, 1));
}

#[test]
fn unreadable_input() {
    let e = netloop_config::load(std::path::Path::new("/nonexistent/x.toml")).unwrap_err();
    assert_eq!(e.len(), 1);
    assert!(
        e.to_string()
            .starts_with("/nonexistent/x.toml: cannot read the file"),
        "{e}"
    );
    let e = netloop_config::parse_bytes(b"[run]\nseed = \xff\n", "b.toml").unwrap_err();
    assert_eq!(
        e.to_string(),
        "b.toml:2:8: the file is not valid UTF-8 text (TOML files must be UTF-8)"
    );
}

#[test]
fn nodes_may_name_their_partition_all_or_none() {
    let two = |pa: &str, pb: &str| {
        format!(
            "[[node]]\nname = \"a\"\nkind = \"host\"\n{pa}\n[[node]]\nname = \"b\"\nkind = \"host\"\n{pb}\n\
             [[link]]\nendpoints = [\"a\", \"b\"]\ndelay = \"1ms\"\n"
        )
    };
    assert_eq!(ok(&two("", "")).partitions, None);
    assert_eq!(
        ok(&two("partition = 1", "partition = 0")).partitions,
        Some(vec![1, 0])
    );
    let e = one_error(&two("partition = 1", ""));
    assert!(
        e.starts_with("t.toml:5:1: node 'b', field 'partition': missing, but node 'a' (line 1) has one: give every node a partition, or none for an automatic cut"),
        "{e}"
    );
    for (bad, want) in [
        ("partition = -1", "t.toml:4:13: node 'a', field 'partition'"),
        (
            "partition = \"0\"",
            "t.toml:4:13: node 'a', field 'partition'",
        ),
        (
            "partition = 70000",
            "t.toml:4:13: node 'a', field 'partition'",
        ),
    ] {
        let e = one_error(&two(bad, "partition = 0"));
        assert!(e.starts_with(want), "{bad}: {e}");
    }
}

#[test]
fn endpoints_and_helics_settings() {
    use netloop_model::spec::{EndpointTarget, HelicsSpec, MessageEndpointSpec, Transport};
    let text = format!(
        r#"{NODES}
[[endpoint]]
name = "pmu"
host = "h1"
port = 4000
to = "ctrl"
federate = "grid/pmu"
[[endpoint]]
name = "ctrl"
host = "h2"
port = 5000
to = "198.18.9.9:6000"
[[endpoint]]
name = "rel"
host = "h1"
port = 4000
protocol = "tcp"
[helics]
core = "tcp"
broker = "127.0.0.1:24000"
"#
    );
    let l = ok(&text);
    assert_eq!(
        l.spec.endpoints[0],
        MessageEndpointSpec {
            name: "pmu".into(),
            node: "h1".into(),
            port: 4000,
            protocol: Transport::Udp,
            to: Some(EndpointTarget::Endpoint("ctrl".into())),
            federate: Some("grid/pmu".into()),
        }
    );
    // TCP port 4000 of h1 is not its UDP port 4000.
    assert_eq!(l.spec.endpoints[2].protocol, Transport::Tcp);
    assert_eq!(
        l.spec.endpoints[1].to,
        Some(EndpointTarget::Address("198.18.9.9:6000".parse().unwrap()))
    );
    assert_eq!(
        l.spec.helics,
        Some(HelicsSpec {
            name: "netloop".into(),
            core: "tcp".into(),
            broker: Some("127.0.0.1:24000".into()),
            init: String::new(),
            timeout: SimDuration::from_secs(30),
            step: SimDuration::from_millis(1),
        })
    );
    assert_eq!(ok(NODES).spec.helics, None);
}

#[test]
fn bad_endpoints_name_the_line_and_field() {
    let cases = [
        (
            "host = \"r1\"\nport = 1",
            "t.toml:14:8: endpoint 'e', field 'host': 'r1' is a router, not a simulated host",
        ),
        (
            "host = \"h1\"\nport = 0",
            "t.toml:15:8: endpoint 'e', field 'port'",
        ),
        (
            "host = \"h1\"\nport = 1\nto = \"ctlr\"",
            "'ctlr' is neither an endpoint nor an address and port",
        ),
        (
            "host = \"h1\"\nport = 1\nto = \"198.18.0.1:99999\"",
            "is not an address and port",
        ),
        (
            "host = \"h1\"\nport = 1\nto = \"2001:2::2:5000\"",
            "is not an address and port (e.g. \"198.18.0.2:5000\" or \"[2001:2::2]:5000\")",
        ),

        ("host = \"h9\"\nport = 1", "'h9' is not a node"),
        (
            "host = \"h1\"\nport = 1\nprotocol = \"sctp\"",
            "t.toml:16:12: endpoint 'e', field 'protocol': 'sctp' is not a known endpoint protocol: expected one of udp, tcp",
        ),
    ];
    for (fields, want) in cases {
        let text = format!("{NODES}\n[[endpoint]]\nname = \"e\"\n{fields}\n");
        let e = one_error(&text);
        assert!(e.contains(want), "{fields}: {e}");
    }
    let twice = format!(
        "{NODES}\n[[endpoint]]\nname = \"e\"\nhost = \"h1\"\nport = 7\n[[endpoint]]\nname = \"f\"\nhost = \"h1\"\nport = 7\n"
    );
    let e = one_error(&twice);
    assert!(
        e.contains("'h1' already has endpoint 'e' (line 12) on UDP port 7"),
        "{e}"
    );
    let mixed = format!(
        "{NODES}\n[[endpoint]]\nname = \"e\"\nhost = \"h1\"\nport = 7\nto = \"f\"\n[[endpoint]]\nname = \"f\"\nhost = \"h2\"\nport = 7\nprotocol = \"tcp\"\n"
    );
    let e = one_error(&mixed);
    assert!(
        e.contains("field 'to': 'f' (line 17) is a TCP endpoint and this one is UDP"),
        "{e}"
    );
    let e = one_error(&format!("{NODES}\n[helics]\ncore = \"smoke\"\n"));
    assert!(e.contains("field 'core'"), "{e}");
}

#[test]
fn traffic_may_say_ipv6() {
    let ping = "[[traffic]]\nkind = \"ping\"\nfrom = \"h1\"\nto = \"h2\"\n";
    let l = ok(&format!("{NODES}{ping}ipv6 = true\n"));
    assert!(l.spec.traffic[0].ipv6);
    let l = ok(&format!("{NODES}{ping}"));
    assert!(!l.spec.traffic[0].ipv6, "IPv4 unless said");
    let e = one_error(&format!("{NODES}{ping}ipv6 = \"yes\"\n"));
    assert!(
        e.contains("field 'ipv6'") && e.contains("expected true or false"),
        "{e}"
    );
}
