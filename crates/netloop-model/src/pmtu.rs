//! A simulated host's path MTU cache (RFC 1191), with Linux's rules.
//!
//! A host learns that the path to a destination carries smaller packets than
//! its own link from ICMP fragmentation-needed (type 3 code 4), which names
//! the next-hop MTU. The cache keeps, per destination, the smallest MTU
//! learned, for [`EXPIRES`] (10 min, Linux's `mtu_expires`), after which the
//! host tries its link MTU again (RFC 1191 §6.3).
//!
//! Linux's rules, followed here (`__ip_rt_update_pmtu` in
//! `net/ipv4/route.c`):
//! - a report that does not lower the path MTU is ignored;
//! - a report below [`MIN_PMTU`] (552, `min_pmtu`) — including 0, from a
//!   router older than RFC 1191 — sets the path MTU to 552 and *locks* it:
//!   from then on the host sends to that destination with Don't Fragment
//!   clear, so routers on the path fragment instead of refusing. (RFC 1191
//!   §5 would guess from a table of plateaus instead; Linux stopped doing so
//!   in 2.6.)
//!
//! IPv6 (RFC 8201) learns from ICMPv6 Packet Too Big, whose MTU is never
//! taken below IPv6's minimum of 1280 (Linux's `rt6_do_update_pmtu`, since
//! RFC 8021 deprecated the atomic fragments older hosts sent instead); IPv6
//! has no Don't Fragment, so nothing is locked. The expiry is the same (10
//! min, `ip6_rt_mtu_expires`).
//!
//! What uses the cache lives in [`crate::host`]: datagrams larger than the
//! path MTU are fragmented by the host, smaller ones carry Don't Fragment,
//! and TCP connections to the destination lower their segment size.

use netloop_core::{SimDuration, SimTime};
use rustc_hash::FxHashMap as HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// How long a learned path MTU is kept (Linux's `mtu_expires`).
pub const EXPIRES: SimDuration = SimDuration::from_secs(600);
/// The smallest path MTU a report can set (Linux's `min_pmtu`).
pub const MIN_PMTU: u32 = 552;

/// What the cache knows about the path to one destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathMtu {
    /// The largest IP packet the path carries.
    pub mtu: u32,
    /// Whether the path MTU was clamped to [`MIN_PMTU`]: packets to this
    /// destination go without Don't Fragment.
    pub locked: bool,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    path: PathMtu,
    expires: SimTime,
}

/// Path MTUs learned by one host, per destination.
#[derive(Default)]
pub struct PmtuCache {
    entries: HashMap<IpAddr, Entry>,
}

impl PmtuCache {
    /// Whether nothing has been learned (or everything learned has expired
    /// and been looked up since).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The path MTU to `dst` at `now`, if one was learned and has not
    /// expired.
    pub fn get(&mut self, dst: impl Into<IpAddr>, now: SimTime) -> Option<PathMtu> {
        // Most hosts never learn one: no hashing per packet for them.
        if self.entries.is_empty() {
            return None;
        }
        let dst = dst.into();
        let e = self.entries.get(&dst)?;
        if e.expires <= now {
            self.entries.remove(&dst);
            return None;
        }
        Some(e.path)
    }

    /// Takes a fragmentation-needed report of next-hop MTU `reported` (0
    /// if the router did not say) about a packet to `dst`, sent when the
    /// path MTU was `current`. Returns the new path MTU if it was lowered.
    pub fn learn(
        &mut self,
        dst: Ipv4Addr,
        reported: u16,
        current: u32,
        now: SimTime,
    ) -> Option<PathMtu> {
        let path = if (reported as u32) < MIN_PMTU {
            PathMtu {
                mtu: MIN_PMTU.min(current),
                locked: true,
            }
        } else {
            PathMtu {
                mtu: reported as u32,
                locked: false,
            }
        };
        if path.mtu >= current && !(path.locked && path.mtu == current) {
            return None;
        }
        self.store(dst.into(), path, now)
    }

    /// Takes a Packet Too Big report of MTU `reported` about a packet to
    /// `dst`, sent when the path MTU was `current`. Returns the new path
    /// MTU if it was lowered.
    pub fn learn6(
        &mut self,
        dst: Ipv6Addr,
        reported: u32,
        current: u32,
        now: SimTime,
    ) -> Option<PathMtu> {
        let path = PathMtu {
            mtu: reported.max(crate::ipv6::MIN_MTU as u32),
            locked: false,
        };
        if path.mtu >= current {
            return None;
        }
        self.store(dst.into(), path, now)
    }

    /// Keeps `path` for `dst` unless what is known is as low already.
    fn store(&mut self, dst: IpAddr, path: PathMtu, now: SimTime) -> Option<PathMtu> {
        if self
            .get(dst, now)
            .is_some_and(|p| p.mtu < path.mtu || p == path)
        {
            return None;
        }
        self.entries.insert(
            dst,
            Entry {
                path,
                expires: now + EXPIRES,
            },
        );
        Some(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 9);

    fn t(s: u64) -> SimTime {
        SimTime::ZERO + SimDuration::from_secs(s)
    }

    #[test]
    fn a_report_lowers_the_path_mtu_until_it_expires() {
        let mut c = PmtuCache::default();
        assert_eq!(c.get(D, t(0)), None);
        let p = c.learn(D, 1400, 1500, t(0)).unwrap();
        assert_eq!(
            p,
            PathMtu {
                mtu: 1400,
                locked: false
            }
        );
        // Reports that don't lower it change nothing.
        assert_eq!(c.learn(D, 1400, 1400, t(1)), None);
        assert_eq!(c.learn(D, 1450, 1400, t(1)), None);
        assert_eq!(c.learn(D, 1600, 1500, t(1)), None);
        let p = c.learn(D, 1280, 1400, t(2)).unwrap();
        assert_eq!(p.mtu, 1280);
        let just_before = SimTime::from_nanos((t(2) + EXPIRES).as_nanos() - 1);
        assert_eq!(c.get(D, just_before), Some(p));
        assert_eq!(c.get(D, t(2) + EXPIRES), None);
        assert!(c.is_empty());
        assert_eq!(c.get(Ipv4Addr::new(198, 18, 0, 10), t(3)), None);
    }

    #[test]
    fn packet_too_big_lowers_an_ipv6_path_but_never_below_1280() {
        let d6: Ipv6Addr = "2001:2:0:3::2".parse().unwrap();
        let mut c = PmtuCache::default();
        assert_eq!(c.learn6(d6, 1500, 1500, t(0)), None);
        assert_eq!(c.learn6(d6, 1400, 1500, t(0)).unwrap().mtu, 1400);
        // A report below the minimum is taken as the minimum, unlocked.
        let p = c.learn6(d6, 600, 1400, t(1)).unwrap();
        assert_eq!(
            p,
            PathMtu {
                mtu: 1280,
                locked: false
            }
        );
        assert_eq!(c.learn6(d6, 0, 1280, t(2)), None);
        // IPv4 and IPv6 destinations are apart.
        assert_eq!(c.get(D, t(2)), None);
        assert_eq!(c.get(d6, t(2)), Some(p));
    }

    #[test]
    fn a_report_below_552_or_of_0_locks_the_path_mtu_at_552() {
        let mut c = PmtuCache::default();
        let p = c.learn(D, 0, 1500, t(0)).unwrap();
        assert_eq!(
            p,
            PathMtu {
                mtu: 552,
                locked: true
            }
        );
        assert_eq!(c.learn(D, 300, 552, t(1)), None);
        let mut c = PmtuCache::default();
        // A link already below 552: the MTU stays, DF goes.
        let p = c.learn(D, 400, 500, t(0)).unwrap();
        assert_eq!(
            p,
            PathMtu {
                mtu: 500,
                locked: true
            }
        );
    }
}
