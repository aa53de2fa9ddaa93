//! TCP message endpoints: messages as length-prefixed records on TCP
//! connections of the host's smoltcp stack.
//!
//! The framing is the simplest one a real program can speak too: each
//! message is its length as 4 bytes, big-endian, then its bytes. A real
//! program in a namespace that reads and writes such records talks to a
//! co-simulation through the simulated network; anything else on the
//! stream is a framing error (`bad_stream`), and the connection is reset.
//!
//! Connections, as a TCP program would make them:
//! - The endpoint **listens** on its port. smoltcp has no accept backlog (a
//!   listening socket becomes the connection), so a few listening sockets
//!   wait at once and one is added for each that is taken; a SYN finding
//!   none would be refused.
//! - A message to a peer goes on the first open connection with that peer
//!   (accepted or made), else on a new connection from an ephemeral port
//!   (counted down from 65535, past the ports the host's sockets hold;
//!   flows count up from 49152). So a reply to a message's `from` goes back
//!   on the connection it came on, and two endpoints that write to each
//!   other's listening ports use one connection each way.
//! - Nothing closes a connection but its peer (or TCP giving up): a
//!   co-simulation's endpoints talk for the whole run, idle as long as they
//!   like. A connection whose peer stops answering while a SYN or data
//!   waits for its acknowledgement is given up after [`GIVE_UP`], as Linux
//!   does after its retries (about two minutes for a SYN).
//! - At most [`MAX_CONNECTIONS`] per endpoint: past them its listening
//!   sockets are not replaced, and new connections are refused (a real
//!   program opening connections without end cannot grow the process
//!   without bound).
//!
//! Accounting, per message: it is queued (sent), then acknowledged by the
//! peer's TCP, then received whole at the far end. A message not yet
//! acknowledged when its connection ended (refused, reset, given up) is
//! counted `lost_connection`: TCP never tells a sender which of its bytes
//! the peer's program read, so these are the messages that may be lost.
//! The receiving side never drops a whole message: when its inbox is full
//! it stops reading and TCP's window holds the sender back; a connection
//! that ended stays until what it received is read.

use std::collections::VecDeque;
use std::net::SocketAddr;

use netloop_core::SimTime;
use smoltcp::iface::{Context, SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::socket::AnySocket;

use crate::apps::{EndpointStats, Message, ENDPOINT_INBOX};

/// The length prefix of each message, bytes.
pub const PREFIX: usize = 4;
/// The largest message a TCP endpoint sends or accepts: 16 MiB. A length
/// beyond it on an incoming stream is a framing error.
pub const MAX_TCP_MESSAGE: usize = 16 << 20;
/// Bytes a connection holds for sending beyond its socket's buffer; a send
/// past it is refused (the peer is not reading, or the path is too slow
/// for the rate of sends).
pub const MAX_PENDING: usize = 64 << 20;
/// Listening sockets kept waiting (smoltcp has no backlog).
const BACKLOG: usize = 4;
/// How long TCP tries before giving a silent peer up (smoltcp's timeout:
/// after a connect, or with data unacknowledged).
pub const GIVE_UP: smoltcp::time::Duration = smoltcp::time::Duration::from_secs(120);
/// Connections an endpoint holds at most.
pub const MAX_CONNECTIONS: usize = 1024;
/// Lowest ephemeral port counted down to (Linux's range starts here).
const EPHEMERAL_LOW: u16 = 32_768;

/// The TCP side of a message endpoint.
pub struct TcpTransport {
    port: u16,
    buffer: usize,
    listeners: Vec<SocketHandle>,
    conns: Vec<Conn>,
    next_port: u16,
}

/// One connection and the messages on it.
struct Conn {
    handle: SocketHandle,
    peer: SocketAddr,
    /// Opened by this endpoint (else accepted).
    outgoing: bool,
    /// Framed bytes not yet in the socket's buffer.
    pending: VecDeque<u8>,
    /// Bytes handed to the socket so far.
    written: u64,
    /// Where each message not yet acknowledged ends, in the stream.
    ends: VecDeque<u64>,
    /// Received bytes not yet a whole message.
    rx: Vec<u8>,
    /// TCP ended it (its messages not acknowledged are counted lost).
    over: bool,
    /// Over and read to the end: its socket goes at the next drive.
    ended: bool,
}

impl TcpTransport {
    /// A TCP endpoint on `port`, not yet listening ([`Self::start`]).
    pub fn new(port: u16) -> Self {
        TcpTransport {
            port,
            buffer: 0,
            listeners: Vec::new(),
            conns: Vec::new(),
            next_port: u16::MAX,
        }
    }

    /// Starts listening in `sockets` (its host's), with `buffer` bytes
    /// each way on every socket.
    pub fn start(&mut self, sockets: &mut SocketSet<'static>, buffer: usize) {
        self.buffer = buffer;
        self.refill(sockets);
    }

    /// The sockets of its connections (for path-MTU updates).
    pub fn handles(&self) -> impl Iterator<Item = SocketHandle> + '_ {
        self.conns.iter().map(|c| c.handle)
    }

    /// Open connections.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Messages queued and not yet acknowledged by their peers' TCP.
    pub fn unacknowledged(&self) -> u64 {
        self.conns.iter().map(|c| c.ends.len() as u64).sum()
    }

    fn socket(&self) -> tcp::Socket<'static> {
        // Nagle off: messages are sent as they come, a co-simulation
        // waits on each.
        let mut s = crate::host::new_tcp_socket(self.buffer, true);
        // While the SYN waits for its answer (see `Conn::arm`).
        s.set_timeout(Some(GIVE_UP));
        s
    }

    /// Tops the listening sockets up to [`BACKLOG`], while the endpoint
    /// holds fewer than [`MAX_CONNECTIONS`].
    fn refill(&mut self, sockets: &mut SocketSet<'static>) {
        while self.listeners.len() < BACKLOG
            && self.conns.len() + self.listeners.len() < MAX_CONNECTIONS
        {
            let mut s = self.socket();
            // A port above 0 on a socket not yet used: cannot fail.
            let _ = s.listen(self.port);
            self.listeners.push(sockets.add(s));
        }
    }

    /// Queues `data` for `to`: on the first open connection with it, or a
    /// new one. A refusal is counted in `stats` and returned.
    pub fn send(
        &mut self,
        sockets: &mut SocketSet<'static>,
        cx: &mut Context,
        to: SocketAddr,
        data: &[u8],
        stats: &mut EndpointStats,
    ) -> Result<(), crate::apps::SendRefused> {
        if data.len() > MAX_TCP_MESSAGE {
            stats.refused_too_large += 1;
            return Err(crate::apps::SendRefused::TooLarge {
                size: data.len(),
                max: MAX_TCP_MESSAGE,
            });
        }
        // A connection still opening takes messages too: they go once it
        // is open.
        let found = self.conns.iter().position(|c| {
            !c.over
                && c.peer == to
                && matches!(
                    sockets.get::<tcp::Socket>(c.handle).state(),
                    tcp::State::SynSent
                        | tcp::State::SynReceived
                        | tcp::State::Established
                        | tcp::State::CloseWait
                )
        });
        let i = match found {
            Some(i) => i,
            None => {
                let mut s = self.socket();
                let local = self.ephemeral(sockets);
                if s.connect(cx, to, local).is_err() {
                    // Only a port of 0 or an unspecified address fail.
                    stats.refused_no_route += 1;
                    return Err(crate::apps::SendRefused::NoRoute(to.ip()));
                }
                stats.connections_opened += 1;
                self.conns.push(Conn::new(sockets.add(s), to, true));
                self.conns.len() - 1
            }
        };
        let c = &mut self.conns[i];
        if c.pending.len() + PREFIX + data.len() > MAX_PENDING {
            stats.refused_backlog += 1;
            return Err(crate::apps::SendRefused::Backlog(MAX_PENDING));
        }
        c.pending.extend((data.len() as u32).to_be_bytes());
        c.pending.extend(data);
        c.ends.push_back(c.written + c.pending.len() as u64);
        stats.sent += 1;
        stats.sent_bytes += data.len() as u64;
        Ok(())
    }

    /// An ephemeral port no TCP socket of the host holds.
    fn ephemeral(&mut self, sockets: &SocketSet<'static>) -> u16 {
        let used: std::collections::HashSet<u16> = sockets
            .iter()
            .filter_map(|(_, s)| tcp::Socket::downcast(s))
            .map(|s| {
                s.local_endpoint()
                    .map_or(s.listen_endpoint().port, |e| e.port)
            })
            .collect();
        // 32 768 ports and far fewer sockets: one is free.
        loop {
            let p = self.next_port;
            self.next_port = if p <= EPHEMERAL_LOW { u16::MAX } else { p - 1 };
            if !used.contains(&p) && p != self.port {
                return p;
            }
        }
    }

    /// Moves messages between the endpoint and its connections: takes
    /// connections its listeners accepted, writes what is pending, reads
    /// whole messages into `inbox` (while it has room), and ends the
    /// connections TCP ended. Returns whether anything moved.
    pub fn drive(
        &mut self,
        sockets: &mut SocketSet<'static>,
        now: SimTime,
        inbox: &mut VecDeque<Message>,
        stats: &mut EndpointStats,
    ) -> bool {
        let mut progressed = false;
        let mut taken = false;
        self.listeners.retain(|&h| {
            let s = sockets.get::<tcp::Socket>(h);
            if s.state() == tcp::State::Listen {
                return true;
            }
            let peer = match s.remote_endpoint().map(|e| (e.addr, e.port)) {
                Some((a, port)) => Some(SocketAddr::new(a.into(), port)),
                _ => None,
            };
            let duplicate = |p: SocketAddr| {
                self.conns
                    .iter()
                    .any(|c| !c.over && c.peer == p && !c.outgoing)
            };
            match peer {
                // A SYN sent again (its SYN-ACK was lost) that a listener
                // in a lower slot took before the connection it belongs
                // to (smoltcp offers a packet to sockets in slot order):
                // dropped without a word, the connection answers it.
                Some(p) if duplicate(p) => {
                    sockets.remove(h);
                }
                Some(p) if s.is_active() => {
                    stats.connections_accepted += 1;
                    self.conns.push(Conn::new(h, p, false));
                }
                // Cannot happen (a listener only leaves Listen for a peer):
                // the socket goes, a new one listens.
                _ => {
                    sockets.remove(h);
                }
            }
            taken = true;
            false
        });
        if taken {
            self.refill(sockets);
            progressed = true;
        }
        // Connections that ended and whose bytes were all read go now:
        // their socket was polled once more since, so an abort's reset
        // went out.
        self.conns.retain(|c| {
            if c.ended {
                sockets.remove(c.handle);
            }
            !c.ended
        });
        for c in &mut self.conns {
            let s = sockets.get_mut::<tcp::Socket>(c.handle);
            progressed |= c.write(s);
            match c.read(s, now, inbox, stats) {
                Ok(moved) => progressed |= moved,
                Err(()) => {
                    stats.bad_stream += 1;
                    s.abort();
                }
            }
            // What the peer's TCP acknowledged is off our hands.
            let acked = c.written - s.send_queue() as u64;
            while c.ends.front().is_some_and(|&e| e <= acked) {
                c.ends.pop_front();
            }
            c.arm(s);
            if s.state() == tcp::State::CloseWait && c.pending.is_empty() {
                // The peer closed: so do we, once our messages are out.
                s.close();
                progressed = true;
            }
            // Listen: an accepted connection reset before it was
            // established (smoltcp sends such a socket back to listening).
            if !c.over
                && matches!(
                    s.state(),
                    tcp::State::Closed | tcp::State::TimeWait | tcp::State::Listen
                )
            {
                if s.state() == tcp::State::Listen {
                    s.abort();
                }
                stats.lost_connection += c.ends.len() as u64;
                c.ends.clear();
                c.pending.clear();
                c.over = true;
                progressed = true;
            }
            // Over, and nothing left to read: what is left is part of a
            // message whose end never came.
            if c.over && !s.can_recv() && !c.whole() {
                if !c.rx.is_empty() {
                    stats.truncated += 1;
                }
                c.ended = true;
                progressed = true;
            }
        }
        progressed
    }
}

impl Conn {
    fn new(handle: SocketHandle, peer: SocketAddr, outgoing: bool) -> Self {
        Conn {
            handle,
            peer,
            outgoing,
            pending: VecDeque::new(),
            written: 0,
            ends: VecDeque::new(),
            rx: Vec::new(),
            over: false,
            ended: false,
        }
    }

    /// Gives the connection up after [`GIVE_UP`] without an answer only
    /// while something waits for one (a SYN, or data not acknowledged):
    /// smoltcp's timeout would also end a connection merely idle.
    fn arm(&self, s: &mut tcp::Socket<'static>) {
        let waiting = s.send_queue() > 0
            || matches!(s.state(), tcp::State::SynSent | tcp::State::SynReceived);
        s.set_timeout(waiting.then_some(GIVE_UP));
    }

    /// Whether `rx` holds a whole message (held back by a full inbox).
    fn whole(&self) -> bool {
        if self.rx.len() < PREFIX {
            return false;
        }
        let mut prefix = [0; PREFIX];
        prefix.copy_from_slice(&self.rx[..PREFIX]);
        self.rx.len() - PREFIX >= u32::from_be_bytes(prefix) as usize
    }

    /// Writes what is pending into the socket's buffer, as far as it has
    /// room.
    fn write(&mut self, s: &mut tcp::Socket<'static>) -> bool {
        let mut moved = false;
        while !self.pending.is_empty() && s.can_send() {
            let (front, _) = self.pending.as_slices();
            let n = s.send_slice(front).unwrap_or(0);
            if n == 0 {
                break;
            }
            self.pending.drain(..n);
            self.written += n as u64;
            moved = true;
        }
        moved
    }

    /// Reads the stream into whole messages while the inbox has room.
    /// `Err` on a framing error.
    fn read(
        &mut self,
        s: &mut tcp::Socket<'static>,
        now: SimTime,
        inbox: &mut VecDeque<Message>,
        stats: &mut EndpointStats,
    ) -> Result<bool, ()> {
        // Whole messages left over when the inbox was full come first.
        let mut moved = self.split(now, inbox, stats)?;
        while inbox.len() < ENDPOINT_INBOX && s.can_recv() {
            let n = s
                .recv(|buf| {
                    self.rx.extend_from_slice(buf);
                    (buf.len(), buf.len())
                })
                .unwrap_or(0);
            if n == 0 {
                break;
            }
            moved = true;
            self.split(now, inbox, stats)?;
        }
        Ok(moved)
    }

    /// Moves the whole messages at the front of the received bytes into
    /// `inbox` while it has room. `Err` on a length past the largest.
    fn split(
        &mut self,
        now: SimTime,
        inbox: &mut VecDeque<Message>,
        stats: &mut EndpointStats,
    ) -> Result<bool, ()> {
        let mut at = 0;
        while inbox.len() < ENDPOINT_INBOX && self.rx.len() - at >= PREFIX {
            let mut prefix = [0; PREFIX];
            prefix.copy_from_slice(&self.rx[at..at + PREFIX]);
            let len = u32::from_be_bytes(prefix) as usize;
            if len > MAX_TCP_MESSAGE {
                self.rx.clear();
                return Err(());
            }
            if self.rx.len() - at - PREFIX < len {
                break;
            }
            let data = self.rx[at + PREFIX..at + PREFIX + len].to_vec();
            at += PREFIX + len;
            stats.received += 1;
            stats.received_bytes += len as u64;
            inbox.push_back(Message {
                at: now,
                from: self.peer,
                data,
            });
        }
        self.rx.drain(..at);
        Ok(at > 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Conn {
        Conn::new(
            SocketHandle::default(),
            "198.18.0.1:9".parse().unwrap(),
            false,
        )
    }

    /// A stream cut anywhere gives its messages whole, in order, once
    /// their last byte came; a length past the largest is an error.
    #[test]
    fn records_are_split_wherever_the_stream_is_cut() {
        let mut stream = Vec::new();
        for m in [&b"one"[..], b"", b"three three"] {
            stream.extend((m.len() as u32).to_be_bytes());
            stream.extend(m);
        }
        for cut in 0..stream.len() {
            let (mut c, mut inbox, mut stats) = (conn(), VecDeque::new(), EndpointStats::default());
            c.rx.extend_from_slice(&stream[..cut]);
            c.split(SimTime::ZERO, &mut inbox, &mut stats).unwrap();
            c.rx.extend_from_slice(&stream[cut..]);
            c.split(SimTime::ZERO, &mut inbox, &mut stats).unwrap();
            let got: Vec<Vec<u8>> = inbox.into_iter().map(|m| m.data).collect();
            assert_eq!(got, [&b"one"[..], b"", b"three three"], "cut at {cut}");
            assert!(c.rx.is_empty());
            assert_eq!((stats.received, stats.received_bytes), (3, 14));
        }
        let mut c = conn();
        c.rx.extend(((MAX_TCP_MESSAGE + 1) as u32).to_be_bytes());
        let mut inbox = VecDeque::new();
        assert!(c
            .split(SimTime::ZERO, &mut inbox, &mut EndpointStats::default())
            .is_err());
        assert!(inbox.is_empty());
    }

    /// A full inbox stops the split, and what is left comes later.
    #[test]
    fn a_full_inbox_holds_the_rest() {
        let mut c = conn();
        for _ in 0..3 {
            c.rx.extend(1u32.to_be_bytes());
            c.rx.push(7);
        }
        let mut inbox: VecDeque<Message> = (0..ENDPOINT_INBOX - 1)
            .map(|_| Message {
                at: SimTime::ZERO,
                from: c.peer,
                data: vec![],
            })
            .collect();
        let mut stats = EndpointStats::default();
        c.split(SimTime::ZERO, &mut inbox, &mut stats).unwrap();
        assert_eq!(
            (inbox.len(), stats.received, c.rx.len()),
            (ENDPOINT_INBOX, 1, 10)
        );
        inbox.clear();
        c.split(SimTime::ZERO, &mut inbox, &mut stats).unwrap();
        assert_eq!((inbox.len(), stats.received, c.rx.len()), (2, 3, 0));
    }
}
