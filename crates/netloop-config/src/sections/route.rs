//! `[[route]]`: static routes, added to the automatic shortest-path ones.
//!
//! Whether the next hop is on a subnet the node is attached to can only be
//! known once addresses are assigned, so that check is
//! `netloop_model::Network::build`'s (reported through
//! [`crate::SourceMap::located`]).

use std::collections::HashMap;
use std::ops::Range;

use netloop_model::spec::{IpPrefix, Ipv4Cidr, Ipv6Cidr, RouteSpec};
use std::net::IpAddr;
use toml::de::DeTable;

use super::{peek_str, Kind, Loader};
use crate::reader::{record_locations, Table};
use crate::value::{self, quote};

const KEYS: &[&str] = &["node", "prefix", "via"];

pub(crate) fn read(l: &mut Loader<'_, '_>, index: usize, table: &DeTable<'_>, span: Range<usize>) {
    l.map.routes.push(record_locations(l.d, &span, table));
    let what = match peek_str(table, "node") {
        Some(node) => format!("route #{} on '{}'", index + 1, quote(node)),
        None => format!("route #{}", index + 1),
    };
    let mut t = Table::new(what, table, span.clone());
    t.check_keys(l.d, KEYS, |_| None);

    let node = t.req(
        l.d,
        "node",
        "the router or host it is installed on",
        value::string,
    );
    if let Some(name) = &node {
        match l.node(name).map(|n| n.kind) {
            None => {
                let message = l.node_list(name);
                t.error(l.d, "node", message);
            }
            Some(Some(Kind::Switch)) => {
                t.error(l.d, "node", format!("'{name}' is a switch, which does not route: routes go on routers and hosts"));
            }
            Some(_) => {}
        }
    }
    // Either family; the next hop must be of the prefix's (checked here),
    // and IPv6 needs a dual-stack network (checked when it is built).
    let prefix = t.req(
        l.d,
        "prefix",
        "the destination, e.g. \"198.19.0.0/24\" or \"2001:2:9::/48\"",
        |v| {
            Ok(if value::is_ipv6(v) {
                IpPrefix::V6(value::network::<Ipv6Cidr>(v)?)
            } else {
                IpPrefix::V4(value::network::<Ipv4Cidr>(v)?)
            })
        },
    );
    let via = t.req(
        l.d,
        "via",
        "the next-hop address, e.g. \"198.18.0.2\"",
        |v| {
            Ok(match (prefix, value::is_ipv6(v)) {
                (Some(IpPrefix::V6(_)), _) => IpAddr::V6(value::ipv6(v)?),
                (Some(IpPrefix::V4(p)), true) => {
                    return Err(format!(
                        "an IPv6 next hop for the IPv4 prefix {p}: a route's next hop is of its prefix's family"
                    ))
                }
                (_, true) => IpAddr::V6(value::ipv6(v)?),
                _ => IpAddr::V4(value::ipv4(v)?),
            })
        },
    );

    if let (Some(node), Some(prefix)) = (&node, prefix) {
        let line = l.line(&span);
        let (start, first_line) = *l
            .route_keys
            .entry((node.clone(), prefix))
            .or_insert((span.start, line));
        if start != span.start {
            let message = format!("'{node}' already has a route to {prefix} (line {first_line})");
            t.error(l.d, "prefix", message);
        }
    }
    if let (Some(node), Some(prefix), Some(via), false) = (node, prefix, via, t.failed) {
        l.spec.routes.push(RouteSpec { node, prefix, via });
    }
}

/// Routes seen so far, by node and destination: where each starts (its
/// identity) and its line.
pub(crate) type RouteKeys = HashMap<(String, IpPrefix), (usize, usize)>;
