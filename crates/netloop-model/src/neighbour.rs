//! The neighbour cache shared by ARP (IPv4, [`crate::arp`]) and neighbour
//! discovery (IPv6, [`crate::ndp`]), in routers and hosts.
//!
//! Frames for a next hop whose MAC is unknown wait here (a bounded number per
//! neighbour) while solicitations are retried; when the answer comes they
//! leave in order, and if it never comes they are dropped as
//! `arp_unresolved` (or `arp_queue_full` when too many wait). Waiting frames
//! count as in flight for packet conservation.
//!
//! Entries follow RFC 826's merge rule (update what we have; add only when the
//! packet is for us), restricted to our own subnets; they live for `lifetime`
//! and the table is bounded. RFC 4861 asks the same of neighbour discovery
//! (§7.2.5: an unsolicited advertisement only updates an entry).
//!
//! An entry past its lifetime is *stale*, as in Linux's neighbour state
//! machine: traffic keeps using its address while solicitations re-confirm it
//! (up to `attempts`, `retry` apart); only if none is answered is it dropped.
//! A flow never stalls, and never loses frames, because its next hop's entry
//! aged out (with a hard expiry, every flow stopped once a minute for a
//! resolution round trip and lost what did not fit in the wait queue).
//!
//! What differs between the families is [`Protocol`]: the address type and
//! how a solicitation is built; what a received answer means is each
//! protocol's own module, which calls [`Neighbours::learn`].

use netloop_core::{SimDuration, SimTime};
use rustc_hash::FxHashMap as HashMap;
use smoltcp::wire::EthernetAddress;
use std::hash::Hash;

use crate::memo::{Memo, MemoKey};
use crate::node::{NodeCtx, PortInfo};
use crate::stats::{DropReason, Origin};
use crate::{Frame, PortId};

/// Timer token of the neighbour caches' retry tick; nodes route it to
/// [`Neighbours::timer`] of each cache they have (a cache ignores a tick it
/// did not ask for).
pub const NEIGHBOUR_TIMER: u64 = 1 << 63;

/// An address family's resolution protocol.
pub trait Protocol {
    /// The family's address.
    type Addr: Copy + Eq + Hash + Ord + std::fmt::Debug + MemoKey;
    /// The solicitation for `target` out of a port `info`; `None` if the
    /// port has no address of the family to send it from.
    fn solicit(info: &PortInfo, target: Self::Addr) -> Option<Frame>;
}

/// Bounds and timers of the neighbour cache.
#[derive(Clone, Debug)]
pub struct NeighbourConfig {
    /// Time between retries of an unanswered request.
    pub retry: SimDuration,
    /// Requests sent before giving up.
    pub attempts: u8,
    /// Frames that may wait for one neighbour.
    pub max_pending: usize,
    /// Frames that may wait for all neighbours together: without it, a flood
    /// towards every address of a large connected subnet could hold
    /// `max_entries × max_pending` frames (a quarter of a million).
    pub max_pending_total: usize,
    /// Neighbours that may be waiting for resolution at once: the rest of
    /// the table is kept for resolved ones, so that a sweep of a large
    /// subnet (an IPv6 /64 is always one) cannot push out the neighbours in
    /// use (RFC 6583 §6).
    pub max_pending_entries: usize,
    /// How long a learned entry lives.
    pub lifetime: SimDuration,
    /// Most entries held.
    pub max_entries: usize,
}

impl Default for NeighbourConfig {
    fn default() -> Self {
        NeighbourConfig {
            retry: SimDuration::from_secs(1),
            attempts: 3,
            max_pending: 64,
            max_pending_total: 8192,
            max_pending_entries: 2048,
            lifetime: SimDuration::from_secs(60),
            max_entries: 4096,
        }
    }
}

enum State {
    Resolved {
        mac: EthernetAddress,
        expires: SimTime,
        /// Re-confirming a stale entry in use: requests sent so far and when
        /// the next is due.
        probe: Option<(u8, SimTime)>,
    },
    Pending {
        frames: Vec<Frame>,
        tries: u8,
        next_retry: SimTime,
    },
}

struct Entry {
    port: PortId,
    state: State,
}

/// A neighbour cache with its waiting frames, for the family of `P`.
///
/// Laid out in declaration order (`repr(C)`): the memo, whose last answer
/// is all a frame to the last neighbour reads, first, so that the answer
/// lies in the lines the scheduler's hint loads of the host that holds it
/// (a host's test checks).
#[repr(C)]
pub struct Neighbours<P: Protocol> {
    /// Neighbours frames went to lately, each with its MAC and until when
    /// its entry is fresh: most frames go where an earlier one went, and
    /// the map's lookup is a cache miss per frame with thousands of nodes
    /// (a host's one neighbour, a router's next router and the hosts of
    /// its subnets). One slot unless [`Neighbours::remembering`] says more.
    /// Forgotten whenever the map changes, so it only ever repeats what
    /// the map says; a fresh entry's use changes nothing (`use_entry`).
    memo: Memo<P::Addr, (EthernetAddress, SimTime)>,
    config: NeighbourConfig,
    origin: Origin,
    entries: HashMap<P::Addr, Entry>,
    pending_frames: u64,
    /// Entries waiting for resolution.
    pending_entries: usize,
    /// Static entries ([`Neighbours::add_static`]): they never go, so they
    /// have a bound of their own and do not take the learned entries'
    /// room (a table full of them would refuse every other neighbour).
    statics: u32,
    /// When the one retry tick that counts is due: every entry that needs a
    /// tick asks for one, and without this a flood of new neighbours would
    /// leave a tick in the event queue per neighbour, each scanning the
    /// whole table (ticks at other times are stale and ignored).
    armed: Option<SimTime>,
    /// Until when a full table certainly has no expired entry to make room
    /// with (the earliest expiry seen by the last sweep that found none): a
    /// flood of new neighbours into a table full of live ones would
    /// otherwise scan the whole table for every frame.
    no_victim_until: SimTime,
    /// Requests sent, replies sent (for reports).
    pub requests_sent: u64,
    /// Replies sent.
    pub replies_sent: u64,
    proto: std::marker::PhantomData<P>,
}

impl<P: Protocol> Neighbours<P> {
    /// Where the memo's last answer lies in a cache (a layout test's
    /// figure).
    #[cfg(test)]
    pub(crate) fn last_answer_at() -> usize {
        std::mem::offset_of!(Self, memo) + Memo::<P::Addr, (EthernetAddress, SimTime)>::last_at()
    }

    /// The size of the memo's last answer (a layout test's figure).
    #[cfg(test)]
    pub(crate) fn last_answer_size() -> usize {
        Memo::<P::Addr, (EthernetAddress, SimTime)>::last_size()
    }
}

impl<P: Protocol> Neighbours<P> {
    /// An empty cache; frames it creates (requests, replies) are recorded with
    /// `origin`.
    pub fn new(config: NeighbourConfig, origin: Origin) -> Self {
        Neighbours {
            config,
            origin,
            entries: HashMap::default(),
            memo: Memo::new(1),
            pending_frames: 0,
            pending_entries: 0,
            statics: 0,
            armed: None,
            no_victim_until: SimTime::ZERO,
            requests_sent: 0,
            replies_sent: 0,
            proto: std::marker::PhantomData,
        }
    }

    /// The cache, remembering up to `slots` recent neighbours in front of
    /// its map (one by default: a host's gateway; a router sends to many).
    pub fn remembering(mut self, slots: usize) -> Self {
        self.memo = Memo::new(slots);
        self
    }

    /// Frames waiting for resolution.
    pub fn in_flight(&self) -> u64 {
        self.pending_frames
    }

    /// Asks for the retry tick at `at` unless one is due no later.
    fn arm(&mut self, at: SimTime, ctx: &mut NodeCtx) {
        if self.armed.is_none_or(|t| at < t) {
            self.armed = Some(at);
            ctx.timer(at, NEIGHBOUR_TIMER);
        }
    }

    /// The MAC of `ip` if it is known, fresh or stale; using a stale entry
    /// starts re-confirming it (one request now, the rest from the timer).
    fn use_entry(
        &mut self,
        port: PortId,
        info: &PortInfo,
        ip: P::Addr,
        ctx: &mut NodeCtx,
    ) -> Option<EthernetAddress> {
        let now = ctx.now;
        let retry = self.config.retry;
        let Some(Entry {
            state:
                State::Resolved {
                    mac,
                    expires,
                    probe,
                },
            ..
        }) = self.entries.get_mut(&ip)
        else {
            return None;
        };
        let mac = *mac;
        if *expires <= now {
            if probe.is_none() {
                *probe = Some((1, now + retry));
                self.request(port, info, ip, ctx);
                self.arm(now + retry, ctx);
            }
        } else {
            self.memo.put(ip, (mac, *expires));
        }
        Some(mac)
    }

    /// Sends `frame` (an Ethernet frame whose destination MAC will be filled
    /// in) to next hop `ip` out of `port`, resolving `ip` first if needed.
    pub fn send(
        &mut self,
        port: PortId,
        info: &PortInfo,
        ip: P::Addr,
        mut frame: Frame,
        ctx: &mut NodeCtx,
    ) {
        if let Some((mac, fresh_until)) = self.memo.get(ip) {
            if ctx.now < fresh_until {
                frame.head_mut(6).copy_from_slice(mac.as_bytes());
                ctx.send(port, frame);
                return;
            }
        }
        if let Some(mac) = self.use_entry(port, info, ip, ctx) {
            frame.head_mut(6).copy_from_slice(mac.as_bytes());
            ctx.send(port, frame);
            return;
        }
        if frame.is_super() {
            // Frames wait for resolution one by one, within the queue's
            // bound per neighbour.
            crate::gso::cut(frame, &mut |seg| self.send(port, info, ip, seg, ctx));
            return;
        }
        let now = ctx.now;
        let entry = self.entries.get(&ip);
        let is_new = !matches!(
            entry,
            Some(Entry {
                state: State::Pending { .. },
                ..
            })
        );
        if is_new {
            if self.pending_entries >= self.config.max_pending_entries
                || (self.learned() >= self.config.max_entries
                    && !self.entries.contains_key(&ip)
                    && !self.evict_one(now))
            {
                ctx.drop_frame(DropReason::ArpQueueFull);
                return;
            }
            self.pending_entries += 1;
            self.memo.clear();
            self.entries.insert(
                ip,
                Entry {
                    port,
                    state: State::Pending {
                        frames: Vec::new(),
                        tries: 1,
                        next_retry: now + self.config.retry,
                    },
                },
            );
            self.request(port, info, ip, ctx);
            self.arm(now + self.config.retry, ctx);
        }
        let Some(Entry {
            state: State::Pending { frames, .. },
            ..
        }) = self.entries.get_mut(&ip)
        else {
            unreachable!("entry was just made pending")
        };
        if frames.len() >= self.config.max_pending
            || self.pending_frames >= self.config.max_pending_total as u64
        {
            ctx.drop_frame(DropReason::ArpQueueFull);
        } else {
            frames.push(frame);
            self.pending_frames += 1;
        }
    }

    /// Makes room in a full table by removing every expired entry that is
    /// not being re-confirmed for traffic in flight (as Linux's forced
    /// garbage collection does); false if none could go. A sweep that finds
    /// none remembers the earliest expiry, and until then the answer is no
    /// without a scan: an entry resolved later expires later still, so no
    /// victim can appear sooner (a stale entry learned meanwhile lowers the
    /// mark, [`Neighbours::learn_stale`]).
    fn evict_one(&mut self, now: SimTime) -> bool {
        if now < self.no_victim_until {
            return false;
        }
        let before = self.entries.len();
        self.memo.clear();
        let mut earliest = now + self.config.lifetime;
        self.entries.retain(|_, e| match e.state {
            State::Resolved {
                expires,
                probe: None,
                ..
            } if expires <= now => false,
            State::Resolved {
                expires,
                probe: None,
                ..
            } => {
                earliest = earliest.min(expires);
                true
            }
            State::Resolved { probe: Some(_), .. } | State::Pending { .. } => true,
        });
        if self.entries.len() < before {
            return true;
        }
        self.no_victim_until = earliest;
        false
    }

    fn request(&mut self, port: PortId, info: &PortInfo, ip: P::Addr, ctx: &mut NodeCtx) {
        let Some(frame) = P::solicit(info, ip) else {
            return;
        };
        ctx.create(self.origin);
        self.requests_sent += 1;
        ctx.send(port, frame);
    }

    /// Whether `ip` has an entry (resolved or pending): RFC 826's merge
    /// rule (and RFC 4861's for unsolicited advertisements) updates only
    /// what the cache already has.
    pub fn knows(&self, ip: P::Addr) -> bool {
        self.entries.contains_key(&ip)
    }

    /// The origin of the frames this cache creates.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// The MAC of `ip` if it is resolved (fresh or stale).
    pub fn resolved_mac(&self, ip: P::Addr) -> Option<EthernetAddress> {
        match self.entries.get(&ip)?.state {
            State::Resolved { mac, .. } => Some(mac),
            State::Pending { .. } => None,
        }
    }

    /// Records that `ip` is at `mac` behind `port` for good: an entry that
    /// never expires, never needs confirming, and that nothing learned
    /// later replaces (a static entry, `ip neigh add ... nud permanent`).
    /// Static entries have a bound of their own, as many as learned ones
    /// ([`NeighbourConfig::max_entries`]); false past it, or for an address
    /// that has an entry already (the neighbour then resolves as usual).
    pub fn add_static(&mut self, port: PortId, ip: P::Addr, mac: EthernetAddress) -> bool {
        if self.statics as usize >= self.config.max_entries || self.entries.contains_key(&ip) {
            return false;
        }
        self.statics += 1;
        let old = self.put_resolved(port, ip, mac, SimTime::MAX);
        debug_assert!(old.is_none(), "checked above");
        true
    }

    /// Puts `ip` at `mac` behind `port` until `expires` (forgetting the
    /// memo, as every change to the map does); returns what it replaced.
    fn put_resolved(
        &mut self,
        port: PortId,
        ip: P::Addr,
        mac: EthernetAddress,
        expires: SimTime,
    ) -> Option<Entry> {
        self.memo.clear();
        self.entries.insert(
            ip,
            Entry {
                port,
                state: State::Resolved {
                    mac,
                    expires,
                    probe: None,
                },
            },
        )
    }

    /// Entries that are not static: those [`NeighbourConfig::max_entries`]
    /// bounds.
    fn learned(&self) -> usize {
        self.entries.len() - self.statics as usize
    }

    /// Whether `ip` has a static entry ([`Neighbours::add_static`]).
    fn is_static(&self, ip: &P::Addr) -> bool {
        matches!(
            self.entries.get(ip),
            Some(Entry {
                state: State::Resolved { expires, .. },
                ..
            }) if *expires == SimTime::MAX
        )
    }

    /// Records that `ip` is at `mac` behind `port`, confirmed (an answer to
    /// our solicitation), sending the frames that waited for it.
    pub fn learn(&mut self, port: PortId, ip: P::Addr, mac: EthernetAddress, ctx: &mut NodeCtx) {
        self.update(port, ip, mac, true, ctx);
    }

    /// Records that `ip` is at `mac` behind `port` without confirmation
    /// (RFC 4861's STALE: learned from its solicitation or an unsolicited
    /// advertisement): the frames that waited for it leave, the first use
    /// re-confirms it, and it may be reclaimed at once when the table is
    /// full. An entry that already has this MAC is left as it is.
    pub fn learn_stale(
        &mut self,
        port: PortId,
        ip: P::Addr,
        mac: EthernetAddress,
        ctx: &mut NodeCtx,
    ) {
        if self.resolved_mac(ip) == Some(mac) {
            return;
        }
        self.update(port, ip, mac, false, ctx);
    }

    fn update(
        &mut self,
        port: PortId,
        ip: P::Addr,
        mac: EthernetAddress,
        fresh: bool,
        ctx: &mut NodeCtx,
    ) {
        if self.is_static(&ip) {
            // What a neighbour says does not replace what the topology
            // fixed (Linux keeps a permanent entry too).
            return;
        }
        let expires = if fresh {
            ctx.now + self.config.lifetime
        } else {
            ctx.now
        };
        if !self.entries.contains_key(&ip)
            && self.learned() >= self.config.max_entries
            && !self.evict_one(ctx.now)
        {
            return;
        }
        let old = self.put_resolved(port, ip, mac, expires);
        if !fresh {
            self.no_victim_until = self.no_victim_until.min(ctx.now);
        }
        if let Some(Entry {
            port: wport,
            state: State::Pending { frames, .. },
        }) = old
        {
            self.pending_entries -= 1;
            self.pending_frames -= frames.len() as u64;
            for mut f in frames {
                f[0..6].copy_from_slice(mac.as_bytes());
                ctx.send(wport, f);
            }
        }
    }

    /// The retry tick: re-sends requests that are due and gives up on
    /// neighbours that never answered. `ports` are the node's ports.
    pub fn timer(&mut self, ports: &[PortInfo], ctx: &mut NodeCtx) {
        let now = ctx.now;
        if self.armed != Some(now) {
            return; // superseded by an earlier tick
        }
        self.armed = None;
        self.memo.clear();
        let mut retry = Vec::new();
        let mut give_up = Vec::new();
        let mut next: Option<SimTime> = None;
        for (ip, e) in &mut self.entries {
            // Pending entries and stale ones being re-confirmed retry alike.
            let (tries, next_retry) = match &mut e.state {
                State::Pending {
                    tries, next_retry, ..
                } => (tries, next_retry),
                State::Resolved {
                    probe: Some((tries, next_retry)),
                    ..
                } => (tries, next_retry),
                State::Resolved { probe: None, .. } => continue,
            };
            if *next_retry > now {
                next = Some(next.map_or(*next_retry, |n: SimTime| n.min(*next_retry)));
            } else if *tries >= self.config.attempts {
                give_up.push(*ip);
            } else {
                *tries += 1;
                *next_retry = now + self.config.retry;
                next = Some(next.map_or(*next_retry, |n: SimTime| n.min(*next_retry)));
                retry.push((*ip, e.port));
            }
        }
        // Deterministic order regardless of the hash map's.
        retry.sort();
        give_up.sort();
        for (ip, port) in retry {
            self.request(port, &ports[port], ip, ctx);
        }
        for ip in give_up {
            // A stale entry nobody confirmed is simply forgotten; frames that
            // were waiting for a new one are dropped.
            if let Some(Entry {
                state: State::Pending { frames, .. },
                ..
            }) = self.entries.remove(&ip)
            {
                self.pending_entries -= 1;
                self.pending_frames -= frames.len() as u64;
                for _ in frames {
                    ctx.drop_frame(DropReason::ArpUnresolved);
                }
            }
        }
        if let Some(t) = next {
            self.arm(t, ctx);
        }
    }
}
