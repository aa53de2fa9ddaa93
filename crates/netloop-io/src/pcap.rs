//! pcap capture: a [`Tap`] that writes frames with their simulated timestamps.
//!
//! Files use the nanosecond-resolution pcap format (magic `0xa1b23c4d`,
//! link type Ethernet), which Wireshark and tshark read; simulated time zero
//! is the Unix epoch, so timestamps read as time since the start of the run.
//! A write error (disk full) stops that capture and is reported at the end of
//! the run; it never stops the simulation.
//!
//! [`attach`] turns the user's capture targets (a link name, `NODE:IFACE`,
//! `all`) into taps; the command line and the Python API both use it.

use netloop_core::SimTime;
use netloop_model::network::{Tap, TapOrder};
use netloop_model::Simulation;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, PcapError, TsResolution};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::{Error, Result};

/// Which frames of a link a capture keeps.
#[derive(Clone, Copy, Debug)]
pub enum Filter {
    /// Every frame as it starts transmission, both directions (a tap on the
    /// cable).
    Link,
    /// An interface on side `side` of the link: frames it sends (at the start
    /// of transmission) and frames it receives (on arrival).
    Interface {
        /// 0 = the link's a end, 1 = its b end.
        side: usize,
    },
}

/// A file that counts the bytes the kernel has taken, so that the frames
/// really in it are known when a write fails (the buffer in front of it
/// holds dozens).
struct Counted {
    file: File,
    written: Arc<AtomicU64>,
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// The pcap file header's length.
const PCAP_HEADER_LEN: u64 = 24;
/// A pcap record header's length.
const PCAP_RECORD_HEADER_LEN: u64 = 16;

/// The state of one capture file, shared between the tap and the report.
pub struct Capture {
    /// Where it is written.
    pub path: PathBuf,
    writer: Option<PcapWriter<BufWriter<Counted>>>,
    /// Bytes the kernel has taken (see [`Counted`]).
    written: Arc<AtomicU64>,
    /// Where each frame handed to the writer but not yet known to be in the
    /// file ends, in bytes from the start of the file.
    pending: VecDeque<u64>,
    /// Bytes handed to the writer so far.
    offset: u64,
    /// Where the last frame known to be wholly in the file ends.
    whole: u64,
    /// Frames in the file (whole records; once the capture is finished or
    /// cut short, exactly the frames a reader finds in it).
    pub frames: u64,
    /// The first write error, if any: the capture stopped there, and the
    /// file holds the frames before it.
    pub error: Option<String>,
}

impl Capture {
    /// Counts the frames that have reached the file.
    fn settle(&mut self) {
        let written = self.written.load(Ordering::Relaxed);
        while let Some(end) = self.pending.front().copied().filter(|&e| e <= written) {
            self.pending.pop_front();
            self.whole = end;
            self.frames += 1;
        }
    }

    /// After a failed write (the writer is gone): counts what reached the
    /// file and cuts off a partly written last record, so that readers see
    /// a complete capture of the first `frames` frames, not a damaged one.
    fn cut(&mut self) {
        self.settle();
        self.pending.clear();
        // Shrinking a file needs no space, also on a full disk; if even that
        // fails the file keeps its torn tail, which readers report.
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.path)
            .and_then(|f| f.set_len(self.whole));
    }

    /// Flushes the file; returns the first error met.
    pub fn finish(&mut self) -> Option<String> {
        if let Some(w) = self.writer.take() {
            if let Err(e) = w
                .into_writer()
                .into_inner()
                .map_err(|e| e.into_error())
                .and_then(|f| f.file.sync_all())
            {
                self.cut();
                self.error.get_or_insert(format!(
                    "{}: {e} (capture stopped at the end of the run; the file holds the {} frames before)",
                    self.path.display(),
                    self.frames
                ));
            }
        }
        self.settle();
        self.pending.clear();
        self.error.clone()
    }
}

/// A pcap error in words: the I/O error itself where there is one (the
/// library's own text for it is only "Error reading bytes", also when
/// writing).
fn describe(e: &PcapError) -> String {
    match e {
        PcapError::IoError(io) => io.to_string(),
        e => e.to_string(),
    }
}

/// A tap writing to a shared [`Capture`].
pub struct PcapTap {
    capture: Arc<Mutex<Capture>>,
    filter: Filter,
}

impl PcapTap {
    /// Creates `path` and a tap writing to it.
    pub fn create(path: &Path, filter: Filter) -> Result<(Self, Arc<Mutex<Capture>>)> {
        let capture = Capture::create(path)?;
        Ok((
            PcapTap {
                capture: capture.clone(),
                filter,
            },
            capture,
        ))
    }
}

impl Capture {
    /// Creates the capture file `path` and writes its header.
    pub fn create(path: &Path) -> Result<Arc<Mutex<Capture>>> {
        let file = File::create(path)
            .map_err(|e| Error::os(format!("creating pcap file {}", path.display()), e))?;
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::Little,
            snaplen: 65_535,
            ..PcapHeader::default()
        };
        let written = Arc::new(AtomicU64::new(0));
        let file = Counted {
            file,
            written: written.clone(),
        };
        let writer = PcapWriter::with_header(BufWriter::with_capacity(1 << 16, file), header)
            .map_err(|e| {
                Error::msg(format!(
                    "writing the pcap header to {}: {}",
                    path.display(),
                    describe(&e)
                ))
            })?;
        Ok(Arc::new(Mutex::new(Capture {
            path: path.to_path_buf(),
            writer: Some(writer),
            written,
            pending: VecDeque::new(),
            offset: PCAP_HEADER_LEN,
            whole: PCAP_HEADER_LEN,
            frames: 0,
            error: None,
        })))
    }
}

impl Filter {
    /// Whether a frame the tap shows (on direction `dir`, sent or received)
    /// belongs in the capture.
    pub fn keeps(self, dir: usize, rx: bool) -> bool {
        match self {
            Filter::Link => !rx,
            // Our side sends on direction `side` and receives on the other.
            Filter::Interface { side } => (!rx && dir == side) || (rx && dir != side),
        }
    }
}

impl Capture {
    /// Appends one frame at simulated `time`. After a write error the
    /// capture is stopped (and the file cut after its last whole frame):
    /// later frames are not written, and `error` says where it stopped.
    pub fn write(&mut self, time: SimTime, data: &[u8]) {
        let Some(w) = self.writer.as_mut() else {
            return;
        };
        let pkt = PcapPacket::new(
            Duration::from_nanos(time.as_nanos()),
            data.len() as u32,
            data,
        );
        match w.write_packet(&pkt) {
            Ok(_) => {
                self.offset += PCAP_RECORD_HEADER_LEN + data.len() as u64;
                let end = self.offset;
                self.pending.push_back(end);
                self.settle();
            }
            Err(e) => {
                // The buffered frames that did not reach the file are lost
                // with the writer (dropping it tries to write them once
                // more); the file is cut after the last whole frame.
                self.writer = None;
                self.cut();
                let msg = format!(
                    "{}: {} (capture stopped at {time} simulated; the file holds the {} frames before)",
                    self.path.display(),
                    describe(&e),
                    self.frames
                );
                self.error = Some(msg);
            }
        }
    }

    /// Stops the capture for a reason of its own (`why`, at simulated
    /// `time`): the file keeps the frames written so far, and `error` says
    /// where and why it stopped (unless it had already stopped on an error
    /// of its own).
    pub fn stop(&mut self, time: SimTime, why: &str) {
        if self.finish().is_none() {
            self.error = Some(format!(
                "{}: {why} (capture stopped at {time} simulated; the file holds the {} frames before)",
                self.path.display(),
                self.frames
            ));
        }
    }
}

impl Tap for PcapTap {
    fn frame(&mut self, at: TapOrder, dir: usize, rx: bool, data: &[u8]) {
        if self.filter.keeps(dir, rx) {
            self.capture
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .write(at.time, data);
        }
    }
}

/// The link that capture target `t` names: a link's name, or its two ends
/// `A-B` (either order), which is how a user names a link the file gave a
/// name of its own (`bottleneck` between r1 and r2 is also `r1-r2`). A name
/// wins over ends; ends shared by parallel links are ambiguous and an error
/// that lists their names.
fn link_named(sim: &Simulation, t: &str) -> Result<Option<usize>> {
    if let Some(link) = sim.net.link_id(t) {
        return Ok(Some(link));
    }
    let names = sim.net.node_names();
    let between: Vec<usize> = sim
        .net
        .links()
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            let (a, b) = (&names[l.ends[0].0], &names[l.ends[1].0]);
            t == format!("{a}-{b}") || t == format!("{b}-{a}")
        })
        .map(|(i, _)| i)
        .collect();
    match between.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(*one)),
        many => {
            let names: Vec<&str> = many
                .iter()
                .map(|&i| sim.net.links()[i].name.as_str())
                .collect();
            Err(Error::msg(format!(
                "pcap target {t}: {} links join these two nodes; name one of them: {}",
                many.len(),
                names.join(", ")
            )))
        }
    }
}

/// What one capture target asks for: a link, which of its frames, and the
/// name of its file (without `.pcap`).
pub type Wanted = (usize, Filter, String);

/// The captures that `targets` name (see [`attach`]), checked against
/// `sim`'s links and nodes.
pub fn resolve(sim: &Simulation, targets: &[String]) -> Result<Vec<Wanted>> {
    let mut wanted: Vec<Wanted> = Vec::new();
    for t in targets {
        if t == "all" {
            for (i, l) in sim.net.links().iter().enumerate() {
                wanted.push((i, Filter::Link, l.name.clone()));
            }
        } else if let Some(link) = link_named(sim, t)? {
            wanted.push((link, Filter::Link, t.clone()));
        } else if let Some((node, iface)) = t.split_once(':') {
            let id = sim
                .net
                .node_id(node)
                .ok_or_else(|| Error::msg(format!("pcap target {t}: '{node}' is not a node")))?;
            let port = sim
                .net
                .ports(id)
                .iter()
                .position(|p| p.name == iface)
                .ok_or_else(|| {
                    let names: Vec<_> = sim.net.ports(id).iter().map(|p| p.name.as_str()).collect();
                    Error::msg(format!(
                        "pcap target {t}: '{node}' has no interface '{iface}' (it has: {})",
                        names.join(", ")
                    ))
                })?;
            let link = sim.net.ports(id)[port].link;
            let side = if sim.net.links()[link].ends[0] == (id, port) {
                0
            } else {
                1
            };
            wanted.push((link, Filter::Interface { side }, format!("{node}-{iface}")));
        } else {
            let names: Vec<_> = sim
                .net
                .links()
                .iter()
                .map(|l| l.name.as_str())
                .take(10)
                .collect();
            return Err(Error::msg(format!(
                "pcap target {t}: not a link (its name or its two ends, as in 'r1-r2'), \
                 NODE:IFACE or 'all' (links: {})",
                names.join(", ")
            )));
        }
    }
    Ok(wanted)
}

/// Creates `dir` for captures, if there are any.
pub(crate) fn create_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::os(format!("creating pcap directory {}", dir.display()), e))
}

/// Captures what `targets` name into files in `dir` (`<link>.pcap`,
/// `<node>-<iface>.pcap`): each target is a link (its name, or its two ends
/// `A-B`, see [`link_named`]), `NODE:IFACE` for one
/// interface's view, or `all` for every link.
pub fn attach(
    sim: &mut Simulation,
    targets: &[String],
    dir: &Path,
) -> Result<Vec<Arc<Mutex<Capture>>>> {
    let mut caps = Vec::new();
    if targets.is_empty() {
        return Ok(caps);
    }
    let wanted = resolve(sim, targets)?;
    create_dir(dir)?;
    for (link, filter, name) in wanted {
        let path = dir.join(format!("{name}.pcap"));
        let (tap, cap) = PcapTap::create(&path, filter)?;
        sim.net.add_tap(link, Box::new(tap));
        caps.push(cap);
    }
    Ok(caps)
}
