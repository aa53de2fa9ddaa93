//! `netloop probe`: a UDP round-trip prober with nanosecond resolution, for
//! measuring what a network (simulated or not) does to delay.
//!
//! `ping` prints round trips above 10 ms to a tenth of a millisecond, too
//! coarse to show microsecond precision. The prober works like ping — the
//! send time is read from CLOCK_REALTIME just before `send`, the receive time
//! is the kernel's SO_TIMESTAMPNS stamp of the reply's arrival (also
//! CLOCK_REALTIME), so the prober's own wake-up latency is not counted — but
//! keeps nanoseconds and writes every sample as JSON.

use anyhow::{anyhow, Context};
use clap::{Args, Subcommand};
use netloop_core::SimDuration;
use nix::errno::Errno;
use nix::sys::socket::{
    recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage,
};
use nix::sys::time::TimeSpec;
use serde::Serialize;
use std::io::IoSliceMut;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// `netloop probe …`.
#[derive(Subcommand, Debug)]
pub enum ProbeCommand {
    /// Echo every UDP datagram back to its sender.
    Echo {
        /// The port to listen on (all addresses of this host).
        #[arg(long, default_value_t = 7007)]
        port: u16,
        /// Stop after this long without a datagram (e.g. `30s`).
        #[arg(long, value_parser = crate::run::parse_duration, default_value = "60s")]
        idle: SimDuration,
    },
    /// Send datagrams to an echo server and measure each round trip.
    Rtt(RttArgs),
}

/// Arguments of `netloop probe rtt`.
#[derive(Args, Debug)]
pub struct RttArgs {
    /// The echo server's address.
    pub addr: std::net::Ipv4Addr,
    /// Its port.
    #[arg(long, default_value_t = 7007)]
    pub port: u16,
    /// How many round trips.
    #[arg(long, default_value_t = 100)]
    pub count: u32,
    /// Time between sends.
    #[arg(long, value_parser = crate::run::parse_duration, default_value = "10ms")]
    pub interval: SimDuration,
    /// UDP payload size in bytes (at least 8).
    #[arg(long, default_value_t = 56)]
    pub size: usize,
    /// Replies the warm-up waits for before the counted probes start. The
    /// first packets on a cold path wait for address resolution at every
    /// hop (a round trip of each link), which is right but is not the path's
    /// delay: the warm-up sends a probe every interval until this many have
    /// been answered, and none of its probes is counted.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub warmup: u32,
    /// How long the warm-up may wait for its replies before giving up (the
    /// echo server, or the path, never answered).
    #[arg(long, value_parser = crate::run::parse_duration, default_value = "10s")]
    pub warmup_timeout: SimDuration,
    /// Write every sample as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// What `probe rtt` measured.
#[derive(Serialize, Debug)]
pub struct RttResult {
    /// Datagrams sent (counted ones, after the warm-up).
    pub sent: u32,
    /// Replies received in time.
    pub received: u32,
    /// UDP payload size.
    pub size: usize,
    /// Each round trip, nanoseconds, in send order (lost ones omitted).
    /// Every one was sent after the warm-up ended.
    pub rtt_ns: Vec<u64>,
    /// Warm-up probes sent (not counted).
    pub warmup_sent: u32,
    /// Of them, answered when the warm-up ended.
    pub warmup_answered: u32,
    /// How long the warm-up took, ns: from its first probe to the reply that
    /// ended it.
    pub warmup_ns: u64,
    /// When the first reply came, ns after the first warm-up probe: how long
    /// the cold path took.
    pub first_reply_ns: u64,
}

fn realtime_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME).expect("CLOCK_REALTIME");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// Receives one datagram into `buf` with its kernel arrival stamp.
fn recv_stamped(
    sock: &UdpSocket,
    buf: &mut [u8],
) -> std::io::Result<(usize, u64, Option<SocketAddr>)> {
    let mut cmsg = nix::cmsg_space!(TimeSpec);
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<SockaddrStorage>(
        sock.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::empty(),
    )
    .map_err(std::io::Error::from)?;
    let mut stamp = None;
    for c in msg.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmTimestampns(ts) = c {
            stamp = Some(ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64);
        }
    }
    let from = msg.address.and_then(|a| {
        a.as_sockaddr_in()
            .map(|s| SocketAddr::from((s.ip(), s.port())))
    });
    let n = msg.bytes;
    Ok((n, stamp.unwrap_or_else(realtime_ns), from))
}

/// Order statistics of a sample (nanoseconds, or anything).
pub struct Summary {
    /// Samples.
    pub n: usize,
    /// Smallest.
    pub min: f64,
    /// Median (nearest rank).
    pub p50: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest.
    pub max: f64,
    /// Population standard deviation.
    pub sd: f64,
}

/// Summarises `v`; `None` if it is empty.
pub fn summarize(v: &[f64]) -> Option<Summary> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let q = |f: f64| s[((s.len() as f64 - 1.0) * f).round() as usize];
    let mean = s.iter().sum::<f64>() / s.len() as f64;
    let var = s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / s.len() as f64;
    Some(Summary {
        n: s.len(),
        min: s[0],
        p50: q(0.5),
        p99: q(0.99),
        max: s[s.len() - 1],
        sd: var.sqrt(),
    })
}

/// Errors that mean "no reply this time": a timeout, or an ICMP port
/// unreachable from a host whose echo server is not up yet (a lost probe).
fn quiet_error(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock
            | std::io::ErrorKind::TimedOut
            | std::io::ErrorKind::ConnectionRefused
    )
}

/// Runs a probe subcommand.
pub fn probe(cmd: ProbeCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        ProbeCommand::Echo { port, idle } => {
            let sock = UdpSocket::bind(("0.0.0.0", port))
                .with_context(|| format!("cannot listen on UDP port {port}"))?;
            sock.set_read_timeout(Some(Duration::from_nanos(idle.as_nanos().max(1))))?;
            let mut buf = vec![0u8; 65536];
            loop {
                match sock.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        let _ = sock.send_to(&buf[..n], from);
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) =>
                    {
                        return Ok(ExitCode::SUCCESS)
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        ProbeCommand::Rtt(a) => rtt(&a),
    }
}

/// One probe sent by `probe rtt`.
struct Sent {
    /// CLOCK_REALTIME just before it was sent.
    at: u64,
    /// Its round trip, once answered.
    rtt: Option<u64>,
}

/// The prober's socket and every probe it sent; probe `i` carries `i` as
/// its first 8 bytes.
struct Prober {
    sock: UdpSocket,
    payload: Vec<u8>,
    buf: Vec<u8>,
    probes: Vec<Sent>,
    answered: usize,
    /// When the first reply arrived.
    first_reply: Option<Instant>,
    /// ICMP port unreachable seen (no echo server on that port).
    refused: u32,
    /// The last send that failed (no route, …), for the warm-up's error.
    send_error: Option<std::io::Error>,
    /// The last ICMP error a router sent back (host unreachable, …).
    net_error: Option<std::io::Error>,
}

impl Prober {
    fn send(&mut self) {
        let seq = self.probes.len() as u64;
        self.payload[..8].copy_from_slice(&seq.to_be_bytes());
        let at = realtime_ns();
        // A send error (e.g. no route yet) is a lost probe.
        match self.sock.send(&self.payload) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => self.refused += 1,
            Err(e) => self.send_error = Some(e),
        }
        self.probes.push(Sent { at, rtt: None });
    }

    /// Collects replies until `until`, or until `done` says enough.
    fn collect(
        &mut self,
        until: Instant,
        done: impl Fn(&Prober) -> bool,
        a: &RttArgs,
    ) -> anyhow::Result<()> {
        loop {
            let now = Instant::now();
            if now >= until || done(self) {
                return Ok(());
            }
            self.sock.set_read_timeout(Some(until - now))?;
            match recv_stamped(&self.sock, &mut self.buf) {
                Ok((n, at, _)) if n >= 8 => {
                    let s = u64::from_be_bytes(self.buf[..8].try_into().expect("8 bytes"));
                    if let Some(p) = self.probes.get_mut(s as usize) {
                        if p.rtt.is_none() {
                            p.rtt = Some(at.saturating_sub(p.at));
                            self.answered += 1;
                            self.first_reply.get_or_insert_with(Instant::now);
                        }
                    }
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => self.refused += 1,
                Err(e) if quiet_error(&e) => {}
                // A router's ICMP error (host or network unreachable) ends
                // no probing: that probe is lost; say so if none is answered.
                Err(e)
                    if matches!(
                        e.raw_os_error().map(Errno::from_raw),
                        Some(Errno::EHOSTUNREACH | Errno::ENETUNREACH)
                    ) =>
                {
                    self.net_error = Some(e)
                }
                Err(e) => return Err(anyhow!("probing {}:{}: {e}", a.addr, a.port)),
            }
        }
    }

    /// Why the warm-up ended without the path answering.
    fn never_warm(&self, a: &RttArgs) -> anyhow::Error {
        let sent = self.probes.len();
        let within = format!(
            "within --warmup-timeout {}",
            crate::format::ns(a.warmup_timeout.as_nanos() as f64)
        );
        let what = if self.answered > 0 {
            format!(
                "the path to {}:{} never warmed up: only {} of {sent} warm-up probes were \
                 answered {within} (--warmup {} replies needed); it loses nearly everything",
                a.addr, a.port, self.answered, a.warmup
            )
        } else if self.refused > 0 {
            format!(
                "no echo server answers on {}:{}: the host said 'port unreachable' ({} times) \
                 to {sent} warm-up probes {within}; start `netloop probe echo --port {}` there",
                a.addr, a.port, self.refused, a.port
            )
        } else {
            format!(
                "{}:{} never answered: none of {sent} warm-up probes got a reply {within}{}. \
                 Check that `netloop probe echo --port {}` runs on {}, that this host has a \
                 route to it (`ip route get {}`) and that the path does not drop every probe; \
                 a long path may need a longer --warmup-timeout (its first probe waits for \
                 address resolution at every hop, a round trip of each link)",
                a.addr,
                a.port,
                match (&self.send_error, &self.net_error) {
                    (Some(e), _) => format!(" (sending failed: {e})"),
                    (None, Some(e)) => format!(" (the network answered: {e})"),
                    (None, None) => String::new(),
                },
                a.port,
                a.addr,
                a.addr
            )
        };
        anyhow!(what)
    }
}

/// `netloop probe rtt`: warms the path up until it answers, then measures
/// `count` round trips. A probe sent while the path was cold waits for
/// address resolution and is not a round trip of the path, so only probes
/// sent after the warm-up's last reply are counted.
fn rtt(a: &RttArgs) -> anyhow::Result<ExitCode> {
    if a.size < 8 {
        return Err(anyhow!(
            "--size {}: the payload carries an 8-byte sequence number; use at least 8",
            a.size
        ));
    }
    let sock = UdpSocket::bind("0.0.0.0:0")?;
    sock.connect((a.addr, a.port))
        .with_context(|| format!("cannot reach {}:{}", a.addr, a.port))?;
    setsockopt(&sock, sockopt::ReceiveTimestampns, &true)
        .map_err(|e| anyhow!("SO_TIMESTAMPNS: {e}"))?;
    let mut p = Prober {
        sock,
        payload: vec![0u8; a.size],
        buf: vec![0u8; 65536],
        probes: Vec::new(),
        answered: 0,
        first_reply: None,
        refused: 0,
        send_error: None,
        net_error: None,
    };
    let interval = Duration::from_nanos(a.interval.as_nanos());

    // The warm-up: a probe every interval (at least a millisecond apart: the
    // cold path queues them) until `warmup` replies have come back.
    let need = a.warmup as usize;
    let warm = |p: &Prober| p.answered >= need;
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_nanos(a.warmup_timeout.as_nanos());
    let spacing = interval.max(Duration::from_millis(1));
    let mut next = t0;
    loop {
        p.collect(next.min(deadline), warm, a)?;
        if warm(&p) {
            break;
        }
        if Instant::now() >= deadline {
            return Err(p.never_warm(a));
        }
        p.send();
        next += spacing;
    }
    let warm_at = Instant::now();
    let warmup_sent = p.probes.len();
    let warmup_answered = p.answered;
    let longest = p.probes.iter().filter_map(|s| s.rtt).max().unwrap_or(0);

    // The counted probes, all sent after the path answered.
    for i in 0..a.count {
        p.collect(warm_at + interval * i, |_| false, a)?;
        p.send();
    }
    // Wait for the last replies: a second, ten intervals, or twice the
    // longest round trip seen, whichever is longest.
    let all = |p: &Prober| p.probes[warmup_sent..].iter().all(|s| s.rtt.is_some());
    let wait = (interval * 10)
        .max(Duration::from_secs(1))
        .max(Duration::from_nanos(longest.saturating_mul(2)));
    p.collect(Instant::now() + wait, all, a)?;

    let samples: Vec<u64> = p.probes[warmup_sent..]
        .iter()
        .filter_map(|s| s.rtt)
        .collect();
    let r = RttResult {
        sent: a.count,
        received: samples.len() as u32,
        size: a.size,
        rtt_ns: samples,
        warmup_sent: warmup_sent as u32,
        warmup_answered: warmup_answered as u32,
        warmup_ns: (warm_at - t0).as_nanos() as u64,
        first_reply_ns: p.first_reply.map_or(0, |f| (f - t0).as_nanos() as u64),
    };
    outln!(
        "warm-up: {} probes, not counted, until {} replies came back ({}; the first after {})",
        r.warmup_sent,
        r.warmup_answered,
        crate::format::ns(r.warmup_ns as f64),
        crate::format::ns(r.first_reply_ns as f64)
    );
    let v: Vec<f64> = r.rtt_ns.iter().map(|&x| x as f64).collect();
    if let Some(st) = summarize(&v) {
        outln!(
            "{} sent, {} received; rtt min {} median {} p99 {} max {} sd {}",
            r.sent,
            r.received,
            crate::format::ns(st.min),
            crate::format::ns(st.p50),
            crate::format::ns(st.p99),
            crate::format::ns(st.max),
            crate::format::ns(st.sd)
        );
    } else {
        outln!("{} sent, 0 received", r.sent);
    }
    if let Some(path) = &a.json {
        crate::run::write_json_atomic(path, &r)?;
    }
    Ok(if r.received == 0 && a.count > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
