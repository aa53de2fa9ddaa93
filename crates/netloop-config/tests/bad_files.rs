//! Files with mistakes, one kind of mistake per file in `tests/bad/`, and the
//! errors each must produce: exactly these, at these lines, saying these
//! things.

use std::path::Path;

/// One expected error: its line and fragments its printed form must contain.
type Expect<'a> = (usize, &'a [&'a str]);

/// Loads `tests/bad/<name>` and checks that it fails with exactly the
/// `expected` errors, in order.
fn check(name: &str, expected: &[Expect<'_>]) -> netloop_config::ConfigErrors {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/bad")
        .join(name);
    let errors = match netloop_config::load(&path) {
        Ok(_) => panic!("{name} loaded without errors"),
        Err(e) => e,
    };
    let printed = errors.to_string();
    assert_eq!(
        errors.len(),
        expected.len(),
        "{name}: expected {} errors, got:\n{printed}",
        expected.len()
    );
    for (e, (line, fragments)) in errors.iter().zip(expected) {
        let shown = e.to_string();
        assert_eq!(
            e.line, *line,
            "{name}: wrong line for\n{shown}\nall errors:\n{printed}"
        );
        assert!(e.column >= 1, "{shown}");
        assert!(
            shown.starts_with(&format!("{}:{line}:{}: ", path.display(), e.column)),
            "{shown}"
        );
        for f in *fragments {
            assert!(shown.contains(f), "{name}: '{f}' not in\n{shown}");
        }
    }
    // One error per line in the printed list, sorted by line.
    assert_eq!(printed.lines().count(), expected.len());
    assert!(errors
        .iter()
        .zip(errors.iter().skip(1))
        .all(|(a, b)| a.line <= b.line));
    errors
}

#[test]
fn ipv6_settings_are_checked() {
    check(
        "ipv6-pool.toml",
        &[
            (3, &["run, field 'ipv6'", "expected true or false"]),
            (4, &["field 'address_pool6'", "cannot hold a /64 per link"]),
        ],
    );
    check(
        "ipv6-off.toml",
        &[(3, &["field 'address_pool6'", "add 'ipv6 = true' to [run]"])],
    );
    check(
        "ipv6-host-bits.toml",
        &[(4, &["host bits set", "did you mean '2001:2::/48'?"])],
    );
}

#[test]
fn queue_disciplines_take_only_their_own_parameters() {
    check(
        "queue-disciplines.toml",
        &[
            (12, &["field 'queue.target'", "'target' is a parameter of codel, fq-codel, not of red"]),
            (
                17,
                &["'interval' is a parameter of codel, fq-codel: give the discipline in this table too (discipline = \"codel\")"],
            ),
            (22, &["max_threshold (10) must be above min_threshold (20)"]),
            (27, &["field 'queue.flows'", "0 is out of range"]),
            (27, &["field 'queue.ecn'", "expected true or false"]),
            (32, &["'pie'", "drop-tail, red, codel, fq-codel"]),
        ],
    );
}

#[test]
fn traces_are_refused_as_mahimahi_would_and_never_stop_a_link_for_ever() {
    // The trace files it names, beside it.
    let bad = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad");
    for f in ["trace-empty-line.mahimahi", "trace-ends-at-zero.rates"] {
        assert!(bad.join(f).is_file(), "{f}");
    }
    check(
        "traces.toml",
        &[
            (
                13,
                &["field 'trace'", "trace-empty-line.mahimahi: line 3: empty"],
            ),
            (
                18,
                &[
                    "field 'trace.rates'",
                    "trace-ends-at-zero.rates",
                    "can't be 0",
                ],
            ),
            (
                24,
                &["field 'trace'", "its `rate` or its `trace`, not both"],
            ),
            (29, &["field 'trace'", "`mahimahi` or `rates`, not both"]),
            (34, &["field 'trace'", "no-such-file.trace"]),
            (39, &["field 'trace.rates'", "element 0", "fast"]),
        ],
    );
}

#[test]
fn syntax_errors() {
    check(
        "syntax.toml",
        &[(3, &["invalid TOML"]), (6, &["invalid TOML"])],
    );
}

#[test]
fn no_nodes() {
    check(
        "no-nodes.toml",
        &[(
            1,
            &[
                "the topology has no nodes: add [[node]] tables",
                "docs/topology.md",
            ],
        )],
    );
}

#[test]
fn unknown_top_level_table() {
    check(
        "unknown-top-level.toml",
        &[
            (2, &["'duration' belongs in the [run] table"]),
            (
                4,
                &["unknown top-level table 'nodes'; did you mean 'node'?"],
            ),
            (
                8,
                &[
                    "unknown top-level table 'colours'",
                    "the file may have: run, defaults, node",
                ],
            ),
        ],
    );
}

#[test]
fn unknown_fields_suggest_the_closest() {
    check(
        "unknown-field.toml",
        &[
            (3, &["run: unknown field 'sed'; did you mean 'seed'?"]),
            (
                8,
                &["node 'h1': unknown field 'colour'; known fields are: name, kind"],
            ),
            (
                16,
                &["link 'h1-r1': unknown field 'dealy'; did you mean 'delay'?"],
            ),
            (
                17,
                &["unknown field 'packet' in 'queue'; did you mean 'packets'?"],
            ),
            (
                20,
                &["unknown field 'rat' in 'a_to_b'; did you mean 'rate'?"],
            ),
        ],
    );
}

#[test]
fn wrong_types_say_what_was_found() {
    check(
        "wrong-type.toml",
        &[
            (12, &["field 'delay': expected a duration string like '10ms', found integer 10"]),
            (13, &["field 'mtu': expected an integer, found string '1500'"]),
            (14, &["field 'reorder': expected true or false, found string 'yes'"]),
            (15, &["field 'rate': expected a data rate string like '100Mbps' or 'unlimited', found integer 1000000"]),
        ],
    );
}

#[test]
fn bad_units() {
    let errors = check(
        "bad-units.toml",
        &[
            (13, &[]),
            (14, &["'100 Mbs' is not a data rate: unknown unit 'Mbs'"]),
        ],
    );
    let e = &errors.errors()[0];
    assert_eq!((e.line, e.column), (13, 9));
    assert_eq!(e.item, "link 'r1-r2'");
    assert_eq!(e.field.as_deref(), Some("delay"));
    assert!(
        e.to_string().ends_with(
            "bad-units.toml:13:9: link 'r1-r2', field 'delay': '10 sm' is not a duration: unknown unit 'sm' \
             (expected a number and one of ns, us, ms, s, min, h, e.g. '10ms' or '1.5us')"
        ),
        "{e}"
    );
}

#[test]
fn missing_required_fields() {
    check(
        "missing-required.toml",
        &[
            (
                2,
                &["node 'h1': missing required field 'kind' (one of host, router, switch, namespace, attached)"],
            ),
            (5, &["node #2: missing required field 'name'"]),
            (12, &["link 'nowhere': missing required field 'endpoints'"]),
            (
                15,
                &[
                    "traffic 'no-kind': missing required field 'kind'",
                    "ping, udp-cbr",
                ],
            ),
            (20, &["traffic 'no-ends': missing required field 'from'"]),
            (20, &["traffic 'no-ends': missing required field 'to'"]),
            (
                24,
                &[
                    "traffic 'no-rate': missing required field 'rate'",
                    "udp-cbr needs a payload bit rate",
                ],
            ),
        ],
    );
}

#[test]
fn unknown_node_kind() {
    check(
        "unknown-node-kind.toml",
        &[(
            4,
            &[
                "node 'r1', field 'kind': 'rooter' is not a known node kind",
                "did you mean 'router'?",
            ],
        )],
    );
}

#[test]
fn duplicate_node_names_point_at_the_second() {
    check(
        "duplicate-node.toml",
        &[(7, &["duplicate node name 'h1'", "on line 2"])],
    );
}

#[test]
fn duplicate_link_names_including_defaults() {
    check(
        "duplicate-link.toml",
        &[
            (
                15,
                &["field 'name'", "duplicate link name 'uplink'", "on line 10"],
            ),
            (
                21,
                &[
                    "duplicate link name 'h1-r1'",
                    "line 18",
                    "give one of them a 'name'",
                ],
            ),
        ],
    );
}

#[test]
fn duplicate_traffic_names() {
    check(
        "duplicate-traffic.toml",
        &[(17, &["duplicate traffic name 'probe'", "on line 10"])],
    );
}

#[test]
fn endpoints_must_be_two() {
    check(
        "endpoints-count.toml",
        &[
            (15, &["expected exactly two node names", "found 3"]),
            (18, &["found only one"]),
        ],
    );
}

#[test]
fn unknown_nodes_are_listed() {
    check(
        "unknown-node.toml",
        &[
            (11, &["link 'h1-r9', field 'endpoints': endpoint 'r9' is not a node; did you mean 'r1'? nodes are: h1, r1"]),
            (14, &["route #1 on 'r2', field 'node': 'r2' is not a node"]),
            (21, &["field 'to': 'h9' is not a node; did you mean 'h1'?"]),
        ],
    );
}

#[test]
fn link_to_itself() {
    check("self-link.toml", &[(7, &["a link from 'r1' to itself"])]);
}

/// Loads `tests/bad/<name>`, which reads well but describes a network the
/// model refuses to build, and checks the one located error.
fn check_build(name: &str, line: usize, fragments: &[&str]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/bad")
        .join(name);
    let loaded = netloop_config::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let err = match netloop_model::Simulation::build(&loaded.spec) {
        Ok(_) => panic!("{name} built without errors"),
        Err(e) => loaded.sources.located(&e),
    };
    let shown = err.to_string();
    assert_eq!(err.line, line, "{name}: wrong line for\n{shown}");
    assert!(
        shown.starts_with(&format!("{}:{line}:", path.display())),
        "{shown}"
    );
    for f in fragments {
        assert!(shown.contains(f), "{name}: '{f}' not in\n{shown}");
    }
}

#[test]
fn a_loop_of_switches() {
    check_build(
        "switch-loop.toml",
        22,
        &[
            "link 's3-s1', field 'endpoints'",
            "closes a loop of switches (s3 - s2 - s1 - s3)",
            "no spanning tree",
        ],
    );
    check_build(
        "switch-parallel-links.toml",
        21,
        &["link 'backup', field 'endpoints'", "(s2 - s1 - s2)"],
    );
}

#[test]
fn probabilities_out_of_range() {
    check(
        "probabilities.toml",
        &[
            (
                3,
                &["defaults.link, field 'corrupt': -0.1 is not a probability"],
            ),
            (15, &["field 'loss': 1.5 is not a probability"]),
            (16, &["field 'duplicate': '150%' is outside 0%..100%"]),
            (19, &["field 'b_to_a.loss.p': 1.2 is not a probability"]),
            (
                19,
                &[
                    "field 'b_to_a.loss.loss_bad': 3 is not a probability",
                    "write '3%'",
                ],
            ),
        ],
    );
}

#[test]
fn mtu_out_of_range() {
    check(
        "mtu.toml",
        &[
            (
                12,
                &["field 'mtu': 9 is out of range: expected an MTU in bytes from 68 to 65535"],
            ),
            (15, &["field 'a_to_b.mtu': 70000 is out of range"]),
        ],
    );
}

#[test]
fn no_address_on_a_switch() {
    check(
        "switch-address.toml",
        &[(12, &["'sw1' is a switch, which has no IP address"])],
    );
}

#[test]
fn malformed_addresses_and_prefixes() {
    check(
        "malformed-address.toml",
        &[
            (
                3,
                &["run, field 'address_pool'", "length '99' is not 0..32"],
            ),
            (15, &["'198.18.0.300' is not an IPv4 address"]),
            (
                16,
                &[
                    "field 'subnet'",
                    "host bits set",
                    "did you mean '198.18.7.0/24'?",
                ],
            ),
            (21, &["'198.18.1.1' has no prefix length"]),
            (
                21,
                &["'198.18.1.0/24' is the network address of its subnet"],
            ),
            (25, &["'banana' is not an IPv4 prefix"]),
        ],
    );
}

#[test]
fn address_conflicts_name_both_links() {
    check(
        "address-conflict.toml",
        &[(20, &["link 'r1-h2'", "address conflict: 198.18.0.1 is already the address of 'h1' on link 'h1-r1' (line 16)"])],
    );
}

#[test]
fn address_outside_the_given_subnet() {
    check(
        "address-outside-subnet.toml",
        &[(
            13,
            &["'198.18.8.1/24' is not in the link's subnet 198.18.7.0/24"],
        )],
    );
}

#[test]
fn endpoints_on_different_subnets() {
    check(
        "different-subnets.toml",
        &[(
            12,
            &["'h1' (198.18.0.1/24) and 'r1' (198.18.1.1/24) are on different subnets"],
        )],
    );
}

#[test]
fn traffic_only_between_hosts() {
    check(
        "traffic-not-host.toml",
        &[
            (
                16,
                &["field 'from': 'r1' is a router: traffic runs between hosts"],
            ),
            (17, &["field 'to': 'sw1' is a switch"]),
        ],
    );
}

#[test]
fn traffic_to_itself() {
    check(
        "traffic-to-self.toml",
        &[(9, &["traffic 'tcp-bulk-1'", "traffic from 'h1' to itself"])],
    );
}

#[test]
fn udp_payload_sizes() {
    check(
        "udp-size.toml",
        &[
            (
                15,
                &[
                    "field 'size': 10B is too small",
                    "20-byte sequence number and timestamp",
                ],
            ),
            (22, &["field 'size': 70000B is too large", "65507B"]),
        ],
    );
}

#[test]
fn fields_of_another_traffic_kind() {
    check(
        "field-not-for-kind.toml",
        &[
            (
                14,
                &["'rate' does not apply to traffic of kind 'ping' (it takes: interval, size)"],
            ),
            (
                20,
                &["'max_hops' does not apply to traffic of kind 'tcp-bulk'"],
            ),
        ],
    );
}

#[test]
fn count_zero() {
    check(
        "count-zero.toml",
        &[(14, &["field 'count': 0 is out of range", "number of flows"])],
    );
}

#[test]
fn stop_before_start() {
    check(
        "stop-before-start.toml",
        &[(15, &["stop (2s) must be after start (5s)"])],
    );
}

#[test]
fn event_on_unknown_link() {
    check(
        "event-unknown-link.toml",
        &[(15, &["'r2-r1' is not a link", "links are: r1-r2"])],
    );
}

#[test]
fn event_set_with_nothing_to_set() {
    check(
        "event-set-nothing.toml",
        &[(13, &["action 'set' with nothing to set", "rate, delay"])],
    );
}

#[test]
fn event_parameters_that_do_not_belong() {
    check(
        "event-down-with-params.toml",
        &[
            (17, &["'delay' does not go with action 'down'"]),
            (23, &["'mtu' cannot be changed by an event"]),
        ],
    );
}

#[test]
fn event_after_the_end_of_the_run() {
    check(
        "event-after-end.toml",
        &[(17, &["11s is after the end of the run (10s)"])],
    );
}

#[test]
fn run_of_zero_duration() {
    check(
        "run-duration-zero.toml",
        &[
            (3, &["field 'duration': must be longer than zero"]),
            (4, &["field 'seed': -1 is out of range"]),
        ],
    );
}

#[test]
fn route_via_not_an_address() {
    check(
        "route-via.toml",
        &[
            (9, &["field 'via'", "without '/length'"]),
            (14, &["'banana' is not an IPv4 address"]),
        ],
    );
}

#[test]
fn route_on_unknown_node_or_switch() {
    check(
        "route-node.toml",
        &[
            (11, &["'sw1' is a switch, which does not route"]),
            (16, &["'r2' is not a node; did you mean 'r1'?"]),
        ],
    );
}

#[test]
fn node_settings_of_another_kind() {
    check(
        "node-wrong-kind-field.toml",
        &[
            (
                5,
                &["'forwarding_rate' applies only to nodes of kind 'router', not 'host'"],
            ),
            (
                10,
                &["'mac_aging' applies only to nodes of kind 'switch', not 'router'"],
            ),
        ],
    );
}

#[test]
fn real_node_settings_of_another_kind() {
    check(
        "real-node-wrong-kind-field.toml",
        &[
            (
                5,
                &[
                    "node 'h1', field 'interface': 'interface' applies only to nodes of kind 'attached', not 'namespace'",
                    "netloop creates a namespace host's interface itself",
                ],
            ),
            (
                6,
                &["'forwarding_rate' applies only to nodes of kind 'router', not 'namespace'"],
            ),
            (
                12,
                &["node 'nic0', field 'via': 'via' applies only to nodes of kind 'namespace', not 'attached'"],
            ),
            (
                13,
                &["'mac_aging' applies only to nodes of kind 'switch', not 'attached'"],
            ),
            (
                18,
                &["node 'r1', field 'force': 'force' applies only to nodes of kind 'attached', not 'router'"],
            ),
            (
                20,
                &["node 'r1', field 'command': 'command' applies only to nodes of kind 'namespace', not 'router'"],
            ),
            (
                26,
                &["node 'h2': unknown field 'interfce'; did you mean 'interface'?"],
            ),
            (
                28,
                &[
                    "'command' applies only to nodes of kind 'namespace', not 'host'",
                    "a simulated host sends [[traffic]]",
                ],
            ),
        ],
    );
}

#[test]
fn interface_names() {
    check(
        "interface-names.toml",
        &[
            (
                12,
                &["link 'h1-s1', field 'interfaces': 'h1-eth0-far-too-long' is not an interface name: longer than 15 bytes"],
            ),
            (12, &["'s1:1' is not an interface name: ':' is not allowed"]),
            (
                17,
                &["field 'interfaces': expected exactly two interface names (one per endpoint)", "found only one"],
            ),
        ],
    );
    check_build(
        "interface-names-twice.toml",
        19,
        &[
            "link 'r1-h2', field 'interfaces'",
            "'r1' would have two interfaces named 'eth1', on this link (its automatic name) and on link 'r1-h1'",
        ],
    );
}

#[test]
fn command_readiness() {
    check(
        "command-ready.toml",
        &[
            (
                11,
                &["field 'command.ready': 'sctp:5201' is not a readiness condition: expected \"tcp:PORT\""],
            ),
            (15, &["field 'command.ready': '70000' is not a port: expected 1 to 65535"]),
            (
                20,
                &["field 'command.ready': only a command that starts with the network (start = \"0s\""],
            ),
            (
                24,
                &["field 'command.ready_timeout': ready_timeout is how long to wait for `ready`, which this command does not have"],
            ),
            (29, &["field 'command.ready_timeout'"]),
        ],
    );
}

#[test]
fn namespace_commands() {
    let errors = check(
        "namespace-command.toml",
        &[
            (
                9,
                &["node 'h1': missing required field 'command.cmd' (the command line, run by /bin/sh -c"],
            ),
            (
                13,
                &["node 'h1', field 'command.cmd': the command line is empty"],
            ),
            (
                16,
                &["field 'command.cmd': expected a string, found integer 42"],
            ),
            (
                17,
                &["field 'command.start': expected a duration string like '10ms', found integer 5"],
            ),
            (18, &["unknown field 'wiat' in 'command'; did you mean 'wait'?"]),
            (
                22,
                &["field 'command.start': 11s is after the end of the run (10s)"],
            ),
            (
                23,
                &["field 'command.wait': expected true or false, found string 'yes'"],
            ),
            (
                28,
                &[
                    "node 'h2', field 'command': expected one [[node.command]] table per program",
                    "found string 'iperf3 -s'",
                ],
            ),
            (
                33,
                &["node 'h3', field 'command': expected a table like { cmd = \"iperf3 -s\" }, found string 'iperf3 -s'"],
            ),
        ],
    );
    // A missing field points at the command's header, a bad value at itself.
    let e = &errors.errors()[0];
    assert_eq!((e.line, e.column, e.field.as_deref()), (9, 1, None));
    let e = &errors.errors()[1];
    assert_eq!(
        (e.line, e.column, e.field.as_deref()),
        (13, 7, Some("command.cmd"))
    );
}

#[test]
fn real_node_values() {
    check(
        "real-node-values.toml",
        &[
            (
                5,
                &["node 'h1', field 'via': 'tun' is not a known namespace link: expected one of veth, tap"],
            ),
            (
                10,
                &["node 'h2', field 'via': expected namespace link: one of veth, tap, found boolean true"],
            ),
            (
                13,
                &["node 'h.3', field 'name': 'h.3' can't name a namespace host"],
            ),
            (
                16,
                &["node 'nic0': missing required field 'interface' (the name of an existing interface"],
            ),
            (
                24,
                &["field 'interface': 'enp3s0:1' is not an interface name: ':' is not allowed"],
            ),
            (
                25,
                &["node 'nic1', field 'force': expected true or false, found string 'yes'"],
            ),
            (
                30,
                &["node 'nic2', field 'interface': expected a string, found integer 0"],
            ),
            (
                35,
                &["'a-very-long-interface' is not an interface name: longer than 15 bytes"],
            ),
        ],
    );
}

#[test]
fn spin_too_long() {
    check(
        "spin.toml",
        &[(
            4,
            &[
                "run, field 'spin': 20ms is too long a spin window",
                "expected 0s (never spin) to 10ms (default 200us)",
            ],
        )],
    );
}

#[test]
fn no_simulated_traffic_on_real_nodes() {
    check(
        "traffic-real-node.toml",
        &[
            (
                13,
                &[
                    "field 'from': 'h1' is a real node (kind 'namespace'): simulated traffic runs only between simulated hosts",
                    "[[node.command]]",
                ],
            ),
            (14, &["field 'to': 'nic0' is a real node (kind 'attached')"]),
        ],
    );
}

#[test]
fn single_table_instead_of_array() {
    check(
        "not-array-of-tables.toml",
        &[(2, &["must be an array of tables, written [[node]]"])],
    );
}

#[test]
fn all_errors_are_reported_in_line_order() {
    check(
        "many-errors.toml",
        &[
            (3, &["'10 sm' is not a duration"]),
            (11, &["'rooter' is not a known node kind"]),
            (15, &["unknown field 'dealy'; did you mean 'delay'?"]),
            (16, &["2 is not a probability", "write '2%'"]),
            (21, &["traffic from 'h1' to itself"]),
        ],
    );
}

#[test]
fn every_fixture_is_tested() {
    // A fixture without a test would silently test nothing.
    let src = include_str!("bad_files.rs");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/bad");
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(
            src.contains(&format!("\"{name}\"")),
            "tests/bad/{name} has no test"
        );
    }
}
