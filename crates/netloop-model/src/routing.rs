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
//!
//! The maps give a prefix's place, and the table's routes are an array in
//! that order (the index). Tables that hold the same prefixes share one
//! index ([`RoutingTable::share_indexes`], which the builder calls): with
//! routes computed to every network, every router of a topology knows the
//! same prefixes and differs only in where each goes. On a network of a thousand routers
//! each had kept its own maps of 5 996 routes, and a packet's probes of the
//! lengths it did not match went to memory at every hop (a fifth of that
//! run); the shared maps stay in cache, and a lookup reads one route of the
//! router's own.

use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::hash::Hash;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

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

/// Where each prefix of a table is: per prefix length present, longest
/// first, the place of its route by masked prefix.
#[derive(Clone, Debug)]
struct Index<K: Eq + Hash> {
    by_len: Vec<(u8, FxHashMap<K, u32>)>,
}

/// A longest-prefix-match table.
#[derive(Clone, Debug)]
pub struct RoutingTable<P: Prefix = Ipv4Cidr> {
    /// The prefixes' places in `routes`; shared with tables that hold the
    /// same prefixes (copied before a change: `Arc::make_mut`).
    index: Arc<Index<P::Key>>,
    /// The routes, in the index's order.
    routes: Vec<Route<P>>,
}

impl<P: Prefix> Default for RoutingTable<P> {
    fn default() -> Self {
        RoutingTable {
            index: Arc::new(Index { by_len: Vec::new() }),
            routes: Vec::new(),
        }
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
        let key = route.prefix.key();
        if let Some(&at) = self.place(len, key) {
            self.routes[at as usize] = route;
            return;
        }
        let at = u32::try_from(self.routes.len()).expect("fewer than 2^32 routes");
        let by_len = &mut Arc::make_mut(&mut self.index).by_len;
        let i = match by_len.binary_search_by(|(l, _)| len.cmp(l)) {
            Ok(i) => i,
            Err(i) => {
                by_len.insert(i, (len, FxHashMap::default()));
                i
            }
        };
        by_len[i].1.insert(key, at);
        self.routes.push(route);
    }

    fn place(&self, len: u8, key: P::Key) -> Option<&u32> {
        let i = self
            .index
            .by_len
            .binary_search_by(|(l, _)| len.cmp(l))
            .ok()?;
        self.index.by_len[i].1.get(&key)
    }

    /// The most specific route for `dst`.
    pub fn lookup(&self, dst: P::Addr) -> Option<&Route<P>> {
        let at = self
            .index
            .by_len
            .iter()
            .find_map(|(len, places)| places.get(&P::masked(dst, *len)))?;
        self.routes.get(*at as usize)
    }

    /// Every route, ordered by prefix (for reports).
    pub fn routes(&self) -> Vec<Route<P>> {
        let mut v = self.routes.clone();
        v.sort_by_key(|r| (r.prefix.key(), r.prefix.prefix_len()));
        v
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// Whether the table is empty.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Whether `self` and `other` share one index
    /// ([`RoutingTable::share_indexes`]).
    pub fn shares_index_with(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.index, &other.index)
    }

    /// Makes the tables that hold the same set of prefixes share one index
    /// (see the module docs): each table's routes are put in the order of
    /// its prefixes sorted, and the index of that order is made once per
    /// distinct set. Lookups give what they gave before; sharing a table
    /// twice changes nothing.
    ///
    /// The builder shares all its tables at its end. Sharing each as soon
    /// as it was complete took the 1 000-router wan's peak memory from 313
    /// to 277 MB but its building from about 2 to 3.5 s (two runs each),
    /// which is not understood yet.
    pub fn share_indexes<'a>(tables: impl IntoIterator<Item = &'a mut Self>)
    where
        P: 'a,
    {
        /// A set of prefixes, as (length, key), sorted.
        type Prefixes<K> = Vec<(u8, K)>;
        let mut made: HashMap<Prefixes<P::Key>, Arc<Index<P::Key>>> = HashMap::new();
        for t in tables {
            t.routes
                .sort_by_key(|r| (r.prefix.prefix_len(), r.prefix.key()));
            let prefixes: Prefixes<P::Key> = t
                .routes
                .iter()
                .map(|r| (r.prefix.prefix_len(), r.prefix.key()))
                .collect();
            debug_assert!(
                prefixes.windows(2).all(|w| w[0] != w[1]),
                "a table holds one route per prefix"
            );
            t.index = made
                .entry(prefixes)
                .or_insert_with_key(|prefixes| {
                    let mut by_len: Vec<(u8, FxHashMap<P::Key, u32>)> = Vec::new();
                    // Shortest first, as sorted; reversed below.
                    for (at, &(len, key)) in prefixes.iter().enumerate() {
                        if by_len.last().is_none_or(|(l, _)| *l != len) {
                            by_len.push((len, FxHashMap::default()));
                        }
                        let last = by_len.len() - 1;
                        by_len[last].1.insert(key, at as u32);
                    }
                    by_len.reverse();
                    Arc::new(Index { by_len })
                })
                .clone();
        }
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

    /// Tables with the same prefixes share one index and still answer as
    /// before, whatever order their routes were inserted in; a table with
    /// other prefixes keeps its own; a route added to one afterwards
    /// changes that table only.
    #[test]
    fn tables_with_the_same_prefixes_share_one_index() {
        let prefixes = [
            "0.0.0.0/0",
            "198.18.0.0/15",
            "198.18.5.0/24",
            "198.18.6.0/24",
            "198.18.5.4/30",
            "198.18.5.7/32",
            "198.19.0.0/16",
        ];
        // Three tables of the same prefixes, each port its own, inserted in
        // three orders; one table with a prefix fewer.
        let make = |order: &[usize], shift: usize| {
            let mut t = RoutingTable::new();
            for &i in order {
                t.insert(r(prefixes[i], (i + shift) % 7));
            }
            t
        };
        let mut tables = vec![
            make(&[0, 1, 2, 3, 4, 5, 6], 0),
            make(&[6, 5, 4, 3, 2, 1, 0], 3),
            make(&[3, 0, 6, 1, 5, 2, 4], 5),
            make(&[0, 1, 2, 3, 4, 5], 1),
        ];
        let probes: Vec<Ipv4Addr> = [
            "198.18.5.7",
            "198.18.5.5",
            "198.18.5.9",
            "198.18.6.1",
            "198.18.200.1",
            "198.19.3.3",
            "10.0.0.1",
            "198.18.5.4",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        let answers = |ts: &[RoutingTable]| -> Vec<Vec<Option<Route>>> {
            ts.iter()
                .map(|t| probes.iter().map(|&a| t.lookup(a).copied()).collect())
                .collect()
        };
        let before = answers(&tables);
        let routes_before: Vec<_> = tables.iter().map(RoutingTable::routes).collect();
        RoutingTable::share_indexes(tables.iter_mut());
        assert_eq!(answers(&tables), before);
        assert_eq!(
            tables.iter().map(RoutingTable::routes).collect::<Vec<_>>(),
            routes_before
        );
        assert!(Arc::ptr_eq(&tables[0].index, &tables[1].index));
        assert!(Arc::ptr_eq(&tables[0].index, &tables[2].index));
        assert!(!Arc::ptr_eq(&tables[0].index, &tables[3].index));
        // The ports differ per table: the same index, not the same routes.
        assert_ne!(before[0], before[1]);

        tables[1].insert(r("198.18.5.6/31", 6));
        tables[2].insert(r("198.18.5.0/24", 6));
        assert!(
            !Arc::ptr_eq(&tables[0].index, &tables[1].index),
            "a new prefix copies"
        );
        assert!(
            Arc::ptr_eq(&tables[0].index, &tables[2].index),
            "a replaced route does not"
        );
        let after = answers(&tables);
        assert_eq!(after[0], before[0], "another table's route changed table 0");
        assert_eq!(
            tables[1]
                .lookup("198.18.5.6".parse().unwrap())
                .unwrap()
                .port,
            6
        );
        assert_eq!(
            tables[2]
                .lookup("198.18.5.9".parse().unwrap())
                .unwrap()
                .port,
            6
        );
        assert_eq!(tables[2].len(), 7, "a replaced route is not a new one");
    }
}
