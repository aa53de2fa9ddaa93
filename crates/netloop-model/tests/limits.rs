//! Networks larger than netloop tells apart are refused at build, naming
//! what is too large and where, rather than built with addresses that
//! repeat.

mod common;

use common::*;
use netloop_model::node::{mac_for, MAX_PORTS};
use netloop_model::Simulation;

/// A port's MAC address holds its number in 16 bits: the last port that
/// fits differs from the first, the next would repeat it.
#[test]
fn port_numbers_fit_the_mac_address_up_to_the_limit() {
    assert_ne!(mac_for(7, MAX_PORTS - 1), mac_for(7, 0));
    assert_eq!(mac_for(7, MAX_PORTS), mac_for(7, 0));
}

/// A switch with one port more than that is refused at the link that adds
/// it (before it, the build would have given that port port 0's address).
#[test]
fn a_node_with_more_ports_than_its_addresses_tell_apart_is_refused() {
    let mut nodes = vec![switch("sw")];
    let mut links = Vec::new();
    for i in 0..=MAX_PORTS {
        let h = format!("h{i}");
        nodes.push(host(&h));
        links.push(link("sw", &h, dir(Some(1000), ms(1))));
    }
    let s = spec(ms(10), 1, nodes, links, vec![]);
    let e = Simulation::build(&s).err().expect("refused").to_string();
    assert!(e.contains("'sw' would have more than 65536 ports"), "{e}");
    // The link that adds port 65 536 (the 65 537th), named as such.
    assert!(e.contains(&s.links[MAX_PORTS].name), "{e}");
}
