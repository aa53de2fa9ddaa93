//! Routing tables with longest-prefix match, for IPv4 and IPv6, shared by
//! routers and hosts.
//!
//! One hash map per prefix length, searched from the longest length present
//! down: a lookup costs at most one hash probe per distinct prefix length in
//! the table (a handful in practice), whatever the number of routes. The
//! maps hash with FxHash: a lookup runs for every packet a router forwards,
//! and SipHash's resistance to chosen keys buys nothing here (the keys are
//! the topology's own prefixes). The two families share the code through
//! [`Prefix`]: a key is the address as an integer (`u32` or `u128`).

use rustc_hash::FxHashMap;
use std::hash::Hash;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::spec::{Ipv4Cidr, Ipv6Cidr};
use crate::PortId;

/// An address family's prefix, as a routing table keys it.
pub trait Prefix: Copy + std::fmt::Debug + PartialEq + Eq {
    /// The family's address.
    type Addr: Copy + std::fmt::Debug + PartialEq + Eq;
    /// The address as an integer.
    type Key: Copy + Eq + Hash + Ord + std::fmt::Debug;
    /// The prefix length.
    fn prefix_len(self) -> u8;
    /// The prefix's network, as a key.
    fn key(self) -> Self::Key;
    /// `addr` masked to `len` bits, as a key.
    fn masked(addr: Self::Addr, len: u8) -> Self::Key;
}

impl Prefix for Ipv4Cidr {
    type Addr = Ipv4Addr;
    type Key = u32;
    fn prefix_len(self) -> u8 {
        self.prefix
    }
    fn key(self) -> u32 {
        u32::from(self.addr) & self.mask()
    }
    fn masked(addr: Ipv4Addr, len: u8) -> u32 {
        Ipv4Cidr { addr, prefix: len }.key()
    }
}

impl Prefix for Ipv6Cidr {
    type Addr = Ipv6Addr;
    type Key = u128;
    fn prefix_len(self) -> u8 {
        self.prefix
    }
    fn key(self) -> u128 {
        u128::from(self.addr) & self.mask()
    }
    fn masked(addr: Ipv6Addr, len: u8) -> u128 {
        Ipv6Cidr { addr, prefix: len }.key()
    }
}

/// Where packets for a prefix go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route<P: Prefix = Ipv4Cidr> {
    /// Destination prefix.
    pub prefix: P,
    /// Next-hop address; `None` for a directly connected subnet (the
    /// destination itself is the next hop).
    pub via: Option<P::Addr>,
    /// Outgoing port.
    pub port: PortId,
}

/// An IPv6 route.
pub type Route6 = Route<Ipv6Cidr>;
/// An IPv6 routing table.
pub type RoutingTable6 = RoutingTable<Ipv6Cidr>;

/// The routes of one prefix length, by masked prefix.
type ByPrefix<P> = FxHashMap<<P as Prefix>::Key, Route<P>>;

/// A longest-prefix-match table.
#[derive(Clone, Debug)]
pub struct RoutingTable<P: Prefix = Ipv4Cidr> {
    /// Per prefix length present, longest first: the routes by masked
    /// prefix.
    by_len: Vec<(u8, ByPrefix<P>)>,
}

impl<P: Prefix> Default for RoutingTable<P> {
    fn default() -> Self {
        RoutingTable { by_len: Vec::new() }
    }
}

impl<P: Prefix> RoutingTable<P> {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `route`, replacing any route for exactly the same prefix.
    pub fn insert(&mut self, route: Route<P>) {
        let len = route.prefix.prefix_len();
        let i = match self.by_len.binary_search_by(|(l, _)| len.cmp(l)) {
            Ok(i) => i,
            Err(i) => {
                self.by_len.insert(i, (len, FxHashMap::default()));
                i
            }
        };
        self.by_len[i].1.insert(route.prefix.key(), route);
    }

    /// The most specific route for `dst`.
    pub fn lookup(&self, dst: P::Addr) -> Option<&Route<P>> {
        self.by_len
            .iter()
            .find_map(|(len, routes)| routes.get(&P::masked(dst, *len)))
    }

    /// Every route, ordered by prefix (for reports).
    pub fn routes(&self) -> Vec<Route<P>> {
        let mut v: Vec<Route<P>> = self
            .by_len
            .iter()
            .flat_map(|(_, m)| m.values().copied())
            .collect();
        v.sort_by_key(|r| (r.prefix.key(), r.prefix.prefix_len()));
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
    fn ipv6_longest_prefix_wins() {
        let mut t = RoutingTable6::new();
        let r6 = |p: &str, port| Route6 {
            prefix: Ipv6Cidr::parse(p).unwrap(),
            via: None,
            port,
        };
        t.insert(r6("::/0", 0));
        t.insert(r6("2001:2::/48", 1));
        t.insert(r6("2001:2:0:5::/64", 2));
        t.insert(r6("2001:2:0:5::7/128", 3));
        let port = |ip: &str| t.lookup(ip.parse().unwrap()).map(|r| r.port);
        assert_eq!(port("2001:2:0:5::7"), Some(3));
        assert_eq!(port("2001:2:0:5::8"), Some(2));
        assert_eq!(port("2001:2:0:6::1"), Some(1));
        assert_eq!(port("2001:3::1"), Some(0));
        assert_eq!(t.routes()[0].prefix.prefix, 0);
    }

    #[test]
    fn no_default_no_route() {
        let mut t = RoutingTable::new();
        t.insert(r("198.18.0.0/24", 0));
        assert!(t.lookup("198.18.1.1".parse().unwrap()).is_none());
    }
}
