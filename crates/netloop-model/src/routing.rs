//! IPv4 routing tables with longest-prefix match, shared by routers and hosts.
//!
//! One hash map per prefix length, searched from the longest length present
//! down: a lookup costs at most one hash probe per distinct prefix length in
//! the table (a handful in practice), whatever the number of routes. The
//! maps hash with FxHash: a lookup runs for every packet a router forwards,
//! and SipHash's resistance to chosen keys buys nothing here (the keys are
//! the topology's own prefixes).

use rustc_hash::FxHashMap;
use std::net::Ipv4Addr;

use crate::spec::Ipv4Cidr;
use crate::PortId;

/// Where packets for a prefix go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// Destination prefix.
    pub prefix: Ipv4Cidr,
    /// Next-hop address; `None` for a directly connected subnet (the
    /// destination itself is the next hop).
    pub via: Option<Ipv4Addr>,
    /// Outgoing port.
    pub port: PortId,
}

/// A longest-prefix-match table.
#[derive(Clone, Debug, Default)]
pub struct RoutingTable {
    /// Per prefix length present, longest first: the routes by masked
    /// prefix.
    by_len: Vec<(u8, FxHashMap<u32, Route>)>,
}

impl RoutingTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `route`, replacing any route for exactly the same prefix.
    pub fn insert(&mut self, route: Route) {
        let len = route.prefix.prefix;
        let key = u32::from(route.prefix.addr) & route.prefix.mask();
        let i = match self.by_len.binary_search_by(|(l, _)| len.cmp(l)) {
            Ok(i) => i,
            Err(i) => {
                self.by_len.insert(i, (len, FxHashMap::default()));
                i
            }
        };
        self.by_len[i].1.insert(key, route);
    }

    /// The most specific route for `dst`.
    pub fn lookup(&self, dst: Ipv4Addr) -> Option<&Route> {
        let d = u32::from(dst);
        self.by_len.iter().find_map(|(len, routes)| {
            let mask = if *len == 0 {
                0
            } else {
                u32::MAX << (32 - u32::from(*len))
            };
            routes.get(&(d & mask))
        })
    }

    /// Every route, ordered by prefix (for reports).
    pub fn routes(&self) -> Vec<Route> {
        let mut v: Vec<Route> = self
            .by_len
            .iter()
            .flat_map(|(_, m)| m.values().copied())
            .collect();
        v.sort_by_key(|r| (u32::from(r.prefix.addr), r.prefix.prefix));
        v
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.by_len.iter().map(|(_, m)| m.len()).sum()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(p: &str, port: PortId) -> Route {
        Route {
            prefix: Ipv4Cidr::parse(p).unwrap(),
            via: None,
            port,
        }
    }

    #[test]
    fn longest_prefix_wins() {
        let mut t = RoutingTable::new();
        t.insert(r("0.0.0.0/0", 0));
        t.insert(r("198.18.0.0/15", 1));
        t.insert(r("198.18.5.0/24", 2));
        t.insert(r("198.18.5.7/32", 3));
        let port = |ip: &str| t.lookup(ip.parse().unwrap()).map(|r| r.port);
        assert_eq!(port("198.18.5.7"), Some(3));
        assert_eq!(port("198.18.5.8"), Some(2));
        assert_eq!(port("198.19.0.1"), Some(1));
        assert_eq!(port("8.8.8.8"), Some(0));
        assert_eq!(t.len(), 4);
    }

    #[test]
    fn no_default_no_route() {
        let mut t = RoutingTable::new();
        t.insert(r("198.18.0.0/24", 0));
        assert!(t.lookup("198.18.1.1".parse().unwrap()).is_none());
    }
}
