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
    /// Probes sent first and not counted: the first packet on a path waits
    /// for address resolution at every hop (one round trip of each link),
    /// which is right but is not the path's delay.
    #[arg(long, default_value_t = 3)]
    pub warmup: u32,
    /// Write every sample as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// What `probe rtt` measured.
#[derive(Serialize, Debug)]
pub struct RttResult {
    /// Datagrams sent.
    pub sent: u32,
    /// Replies received in time.
    pub received: u32,
    /// UDP payload size.
    pub size: usize,
    /// Each round trip, nanoseconds, in send order (lost ones omitted).
    pub rtt_ns: Vec<u64>,
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
        ProbeCommand::Rtt(a) => {
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
            let total = a.count + a.warmup;
            let mut sent_at = vec![0u64; total as usize];
            let mut rtt: Vec<Option<u64>> = vec![None; total as usize];
            let mut payload = vec![0u8; a.size];
            let mut buf = vec![0u8; 65536];
            let interval = Duration::from_nanos(a.interval.as_nanos());
            let start = Instant::now();
            // Collects replies until `until`, or (when `all`) until every
            // probe has been answered.
            let mut collect = |rtt: &mut Vec<Option<u64>>,
                               sent_at: &[u64],
                               until: Instant,
                               all: bool|
             -> anyhow::Result<()> {
                loop {
                    let now = Instant::now();
                    if now >= until || (all && rtt.iter().all(Option::is_some)) {
                        return Ok(());
                    }
                    sock.set_read_timeout(Some(until - now))?;
                    match recv_stamped(&sock, &mut buf) {
                        Ok((n, at, _)) if n >= 8 => {
                            let s =
                                u64::from_be_bytes(buf[..8].try_into().expect("8 bytes")) as usize;
                            if s < rtt.len() && rtt[s].is_none() {
                                rtt[s] = Some(at.saturating_sub(sent_at[s]));
                            }
                        }
                        Ok(_) => {}
                        Err(e) if quiet_error(&e) => {}
                        Err(e) => return Err(anyhow!("probing {}:{}: {e}", a.addr, a.port)),
                    }
                }
            };
            for seq in 0..total {
                collect(&mut rtt, &sent_at, start + interval * seq, false)?;
                payload[..8].copy_from_slice(&(seq as u64).to_be_bytes());
                sent_at[seq as usize] = realtime_ns();
                // A send error (e.g. no route yet) is a lost probe.
                let _ = sock.send(&payload);
            }
            // Wait for the last replies: up to a second, or ten intervals.
            let end = Instant::now() + (interval * 10).max(Duration::from_secs(1));
            collect(&mut rtt, &sent_at, end, true)?;
            let samples: Vec<u64> = rtt[a.warmup as usize..].iter().flatten().copied().collect();
            let r = RttResult {
                sent: a.count,
                received: samples.len() as u32,
                size: a.size,
                rtt_ns: samples,
            };
            let v: Vec<f64> = r.rtt_ns.iter().map(|&x| x as f64).collect();
            if let Some(st) = summarize(&v) {
                println!(
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
                println!("{} sent, 0 received", r.sent);
            }
            if let Some(p) = &a.json {
                crate::run::write_json_atomic(p, &r)?;
            }
            Ok(if r.received == 0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}
