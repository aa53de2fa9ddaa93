//! `netloop run --mpi`: a simulation cut into partitions, one per MPI rank
//! (processes started by `mpirun`, on one machine or several).
//!
//! Each rank loads and builds the whole topology (deterministically the
//! same everywhere), cuts it the same way (the automatic cut for as many
//! partitions as there are ranks), runs its own partition, and keeps in
//! step with the others through MPI: an all-reduce agrees on the earliest
//! pending event and on stopping, an all-to-all moves the frames that
//! crossed (encoded by `Crossing::encode`). At the end every rank sends its
//! share of the results (serialised) to rank 0, which assembles the results
//! a single run would give and writes them; the other ranks print nothing.

use anyhow::anyhow;
use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;
use netloop_core::SimTime;
use netloop_model::network::Crossing;
use netloop_model::partition::{
    run_partition, Cut, Exchange, PartitionEnd, PartitionStats, Partitioned, Sampling,
};
use netloop_model::share::Share;
use netloop_model::Simulation;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::run::MpiOutcome;
use netloop_io::pcapparts::{whole_records, PartData, PartFailure, PartedCaptures};

/// One rank's end of the exchange.
struct MpiExchange<'a> {
    world: &'a SimpleCommunicator,
    /// Scratch: the frames for all ranks, encoded back to back.
    send: Vec<u8>,
    recv: Vec<u8>,
}

/// Offsets of consecutive chunks of the given sizes; `None` if they pass
/// MPI's 2 GiB.
fn displacements(counts: &[Count]) -> Option<Vec<Count>> {
    let mut at: Count = 0;
    let mut out = Vec::with_capacity(counts.len());
    for &c in counts {
        out.push(at);
        at = at.checked_add(c)?;
    }
    Some(out)
}

impl Exchange for MpiExchange<'_> {
    fn agree(&mut self, next: u64, stop: bool) -> (u64, bool) {
        // One reduction for both: the minimum of "not stopping" is 0 when
        // any rank stops.
        let send = [next, u64::from(!stop)];
        let mut got = [0u64; 2];
        self.world
            .all_reduce_into(&send[..], &mut got[..], SystemOperation::min());
        (got[0], got[1] == 0)
    }

    fn swap(&mut self, out: &mut [Vec<Crossing>]) -> Vec<Crossing> {
        self.send.clear();
        let mut counts = Vec::with_capacity(out.len());
        for frames in out.iter_mut() {
            let before = self.send.len();
            for c in frames.drain(..) {
                c.encode(&mut self.send);
            }
            counts.push(
                Count::try_from(self.send.len() - before).unwrap_or_else(|_| {
                    fatal(self.world, "more than 2 GiB of frames crossed in one round")
                }),
            );
        }
        let mut recv_counts = vec![0 as Count; out.len()];
        self.world
            .all_to_all_into(&counts[..], &mut recv_counts[..]);
        let (Some(send_displs), Some(recv_displs)) =
            (displacements(&counts), displacements(&recv_counts))
        else {
            fatal(self.world, "more than 2 GiB of frames crossed in one round")
        };
        let total: usize = recv_counts.iter().map(|&c| c as usize).sum();
        self.recv.clear();
        self.recv.resize(total, 0);
        {
            let sp = Partition::new(&self.send[..], &counts[..], &send_displs[..]);
            let mut rp = PartitionMut::new(&mut self.recv[..], &recv_counts[..], &recv_displs[..]);
            self.world.all_to_all_varcount_into(&sp, &mut rp);
        }
        let mut frames = Vec::new();
        let mut rest = &self.recv[..];
        while !rest.is_empty() {
            let start = total - rest.len();
            match Crossing::decode(&mut rest, start) {
                Ok(c) => frames.push(c),
                // Bytes from our own ranks: a bug, not bad input.
                Err(e) => fatal(self.world, &e.to_string()),
            }
        }
        frames
    }

    fn sum_to_first(&mut self, counts: &mut Vec<u64>) {
        let root = self.world.process_at_rank(0);
        if self.world.rank() == 0 {
            let mut sum = vec![0u64; counts.len()];
            root.reduce_into_root(&counts[..], &mut sum[..], SystemOperation::sum());
            *counts = sum;
        } else {
            root.reduce_into(&counts[..], SystemOperation::sum());
        }
    }
}

/// Ends the whole MPI job: one rank cannot go on without the others.
fn fatal(world: &SimpleCommunicator, why: &str) -> ! {
    eprintln!(
        "error: rank {} of the MPI run: {why}; stopping all ranks",
        world.rank()
    );
    world.abort(3)
}

/// What each rank sends rank 0 at the end.
#[derive(serde::Serialize, serde::Deserialize)]
struct RankEnd {
    share: Share,
    stats: PartitionStats,
    /// Where each capture's part stopped on this rank, if it did.
    pcap: Vec<Option<PartFailure>>,
}

/// The most of a part file sent in one message.
const CHUNK: usize = 4 << 20;

/// Sends a part to rank 0: its length in bytes, then chunks, then an empty
/// message. A read error ends it early (rank 0 then finds it short, and
/// says so).
fn send_part(world: &SimpleCommunicator, file: Option<&mut File>) {
    let root = world.process_at_rank(0);
    let len = file
        .as_ref()
        .and_then(|f| f.metadata().ok())
        .map_or(0, |m| m.len());
    root.send(&len);
    let mut buf = vec![0u8; CHUNK];
    if let Some(f) = file {
        loop {
            match f.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => root.send(&buf[..n]),
                Err(e) => {
                    eprintln!(
                        "error: rank {}: reading its part of a capture: {e}",
                        world.rank()
                    );
                    break;
                }
            }
        }
    }
    root.send(&buf[..0]);
}

/// Receives a part from rank `from` (see [`send_part`]) into `file`
/// (`Err`: it could not be made); returns the part as the merge reads it,
/// stopped where the part stopped on its rank (`failed`) or where it
/// arrived short.
fn receive_part(
    world: &SimpleCommunicator,
    from: i32,
    file: std::io::Result<File>,
    failed: Option<PartFailure>,
) -> PartData {
    let src = world.process_at_rank(from);
    let (len, _) = src.receive::<u64>();
    let mut out = file.map_err(|e| e.to_string());
    let mut got = 0u64;
    loop {
        let (chunk, _) = src.receive_vec::<u8>();
        if chunk.is_empty() {
            break;
        }
        got += chunk.len() as u64;
        if let Ok(f) = &mut out {
            if let Err(e) = f.write_all(&chunk) {
                out = Err(e.to_string());
            }
        }
    }
    let short = match &mut out {
        Ok(f) if got == len => {
            return match f.seek(SeekFrom::Start(0)) {
                Ok(_) => (out.ok(), failed),
                Err(e) => (
                    None,
                    Some(PartFailure {
                        records: 0,
                        lost: None,
                        why: format!("the part of rank {from}: {e}"),
                    }),
                ),
            };
        }
        Ok(f) => whole_records(f).map(|n| {
            (
                n,
                format!("the part of rank {from} arrived short: {got} of {len} bytes"),
            )
        }),
        Err(e) => Ok((0, format!("keeping the part of rank {from}: {e}"))),
    };
    let (records, why) = short.unwrap_or_else(|e| (0, format!("the part of rank {from}: {e}")));
    // Whichever stops it first: the rank's own failure, or the bytes that
    // did not arrive.
    let failure = match failed {
        Some(f) if f.records <= records => f,
        _ => PartFailure {
            records,
            lost: None,
            why,
        },
    };
    (out.ok(), Some(failure))
}

/// Runs `sim` as partition (rank) of an MPI job; returns the results and
/// whether the run was interrupted on rank 0, `None` on the other ranks.
/// `partitions`, if more than 1, must be the number of ranks; `given` is
/// the topology file's partition of each node, if it gives them.
pub fn execute(
    mut sim: Simulation,
    partitions: u32,
    given: Option<&[u32]>,
    topology: &str,
    (targets, pcap_dir): (&[String], &Path),
    series: Option<&(netloop_core::SimDuration, std::path::PathBuf)>,
) -> anyhow::Result<MpiOutcome> {
    // The same on every rank: a bad target ends them all alike.
    netloop_io::pcap::resolve(&sim, targets).map_err(|e| anyhow!("{e}"))?;
    let universe =
        mpi::initialize().ok_or_else(|| anyhow!("MPI was initialised twice in this process"))?;
    let world = universe.world();
    let (rank, size) = (world.rank() as u32, world.size() as u32);
    if partitions > 1 && partitions != size {
        return Err(anyhow!(
            "--partitions {partitions} with --mpi on {size} ranks: under MPI each rank is a \
             partition (leave --partitions out, or start {partitions} ranks)"
        ));
    }
    let spec = sim.net.spec().clone();
    let cut = Cut::given_or_auto(&spec, given, size)
        .map_err(|e| anyhow!("{topology}: cannot cut into {size} partitions: {e}"))?;
    let interrupted = crate::live::interrupted();
    let mut stop = move |_: SimTime| !interrupted.load(Ordering::SeqCst);
    let end = SimTime::ZERO + spec.run.duration;
    // Both buffers allocated from the start: empty `Vec`s share one
    // dangling address, and Open MPI refuses an all-to-all whose send and
    // receive buffers are the same (MPI_ERR_ARG).
    let mut x = MpiExchange {
        world: &world,
        send: Vec::with_capacity(4096),
        recv: Vec::with_capacity(4096),
    };
    // Each rank writes its part of each capture; rank 0 also the files,
    // into which it merges all parts at the end. From here on every rank
    // must reach the collective calls: one that returned an error instead
    // would leave the others waiting, so a failure ends the job.
    let (captures, mut parted) =
        PartedCaptures::create(&sim, targets, pcap_dir, size, &[rank], rank == 0)
            .unwrap_or_else(|e| fatal(&world, &e.to_string()));
    sim.net.add_taps(parted.taps(rank));
    // The time series: rank 0 writes it (every rank samples what it owns).
    let mut writer = match series {
        Some(plan) if rank == 0 => Some(
            crate::run::open_series(plan, &sim, topology)
                .unwrap_or_else(|e| fatal(&world, &format!("{e:#}"))),
        ),
        _ => None,
    };
    let sampling = series.map(|(interval, _)| Sampling {
        interval: *interval,
        writer: writer.as_mut(),
    });
    let start = Instant::now();
    let progress: Option<&mut (dyn FnMut(SimTime) -> bool + Send)> =
        (rank == 0).then_some(&mut stop);
    let mine: PartitionEnd = run_partition(sim, &cut, rank, end, &mut x, progress, sampling);
    let series_error = mine.series_error.as_ref().map(|e| e.to_string());
    // Per capture, this rank's part (one: this rank runs one partition).
    let mut my_parts: Vec<PartData> = parted
        .finish_parts()
        .into_iter()
        .map(|mut v| v.pop().unwrap_or((None, None)))
        .collect();
    let bytes = serde_json::to_vec(&RankEnd {
        share: mine.share(&cut, rank),
        stats: mine.stats.clone(),
        pcap: my_parts.iter().map(|(_, f)| f.clone()).collect(),
    })
    .unwrap_or_else(|e| fatal(&world, &format!("its share of the results: {e}")));
    let len = Count::try_from(bytes.len())
        .unwrap_or_else(|_| fatal(&world, "its share of the results is over 2 GiB"));
    let root = world.process_at_rank(0);
    if rank != 0 {
        root.gather_into(&len);
        root.gather_varcount_into(&bytes[..]);
        for (file, _) in &mut my_parts {
            send_part(&world, file.as_mut());
        }
        return Ok(None);
    }
    let mut lens = vec![0 as Count; size as usize];
    root.gather_into_root(&len, &mut lens[..]);
    let displs = displacements(&lens)
        .unwrap_or_else(|| fatal(&world, "the shares of the results are over 2 GiB"));
    let mut all = vec![0u8; lens.iter().map(|&c| c as usize).sum()];
    {
        let mut rp = PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
        root.gather_varcount_into_root(&bytes[..], &mut rp);
    }
    let wall = start.elapsed().as_secs_f64();
    let mut ends = Vec::with_capacity(size as usize);
    for (r, (&at, &n)) in displs.iter().zip(&lens).enumerate() {
        // Unreadable: a bug (our own bytes), and the other ranks are about
        // to send their parts, which only a job that ends can ignore.
        let end: RankEnd = serde_json::from_slice(&all[at as usize..(at + n) as usize])
            .unwrap_or_else(|e| {
                fatal(
                    &world,
                    &format!("rank {r}'s share of the results is unreadable: {e}"),
                )
            });
        ends.push(end);
    }
    // Per capture, each rank's part, in rank (partition) order.
    let mut parts: Vec<Vec<PartData>> = my_parts.into_iter().map(|p| vec![p]).collect();
    for (i, parts) in parts.iter_mut().enumerate() {
        for (r, end) in ends.iter().enumerate().skip(1) {
            let file = parted.received(i, r as u32);
            let failed = end.pcap.get(i).cloned().flatten();
            parts.push(receive_part(&world, r as i32, file, failed));
        }
    }
    let mut shares = Vec::with_capacity(size as usize);
    for end in ends {
        shares.push((end.share, end.stats));
    }
    parted.merge(parts);
    if let Some(e) = series_error {
        return Err(anyhow!("writing the time series: {e}"));
    }
    let p = Partitioned::assemble(mine, shares);
    let mut results = p.results(&cut, "afap", Some(wall), Some(topology.to_string()));
    if let Some(w) = &mut results.wall {
        if let Some(r) = &mut w.partitions {
            r.transport = "mpi".into();
        }
    }
    Ok(Some((
        results,
        crate::live::interrupted().load(Ordering::SeqCst),
        captures,
    )))
}

/// `bench sync-rank`: `rounds` idle rounds of this MPI job's exchange
/// ([`netloop_model::partition::idle_rounds`]); rank 0 gets every rank's
/// wall seconds (in rank order), the others `None`.
pub fn idle_rounds(rounds: u64, frames: usize, len: usize) -> anyhow::Result<Option<Vec<f64>>> {
    let universe =
        mpi::initialize().ok_or_else(|| anyhow!("MPI was initialised twice in this process"))?;
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let mut x = MpiExchange {
        world: &world,
        send: Vec::with_capacity(4096),
        recv: Vec::with_capacity(4096),
    };
    // A first round apart: the job's connections are set up on first use.
    netloop_model::partition::idle_rounds(&mut x, rank, size, 1, frames, len);
    let (took, received) =
        netloop_model::partition::idle_rounds(&mut x, rank, size, rounds, frames, len);
    let expected = if size > 1 { rounds * frames as u64 } else { 0 };
    if received != expected {
        fatal(
            &world,
            &format!("received {received} frames in idle rounds, not {expected}"),
        );
    }
    let secs = took.as_secs_f64();
    let root = world.process_at_rank(0);
    if rank != 0 {
        root.gather_into(&secs);
        return Ok(None);
    }
    let mut all = vec![0f64; size];
    root.gather_into_root(&secs, &mut all[..]);
    Ok(Some(all))
}
