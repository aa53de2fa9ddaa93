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
use netloop_model::network::Tap;
use netloop_model::Simulation;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
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

/// The state of one capture file, shared between the tap and the report.
pub struct Capture {
    /// Where it is written.
    pub path: PathBuf,
    writer: Option<PcapWriter<BufWriter<File>>>,
    /// Frames written.
    pub frames: u64,
    /// The first write error, if any.
    pub error: Option<String>,
}

impl Capture {
    /// Flushes the file; returns the first error met.
    pub fn finish(&mut self) -> Option<String> {
        if let Some(w) = self.writer.take() {
            if let Err(e) = w
                .into_writer()
                .into_inner()
                .map_err(|e| e.into_error())
                .and_then(|f| f.sync_all())
            {
                self.error
                    .get_or_insert(format!("{}: {e}", self.path.display()));
            }
        }
        self.error.clone()
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
        let file = File::create(path)
            .map_err(|e| Error::os(format!("creating pcap file {}", path.display()), e))?;
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::Little,
            snaplen: 65_535,
            ..PcapHeader::default()
        };
        let writer = PcapWriter::with_header(BufWriter::with_capacity(1 << 16, file), header)
            .map_err(|e| {
                Error::msg(format!(
                    "writing the pcap header to {}: {e}",
                    path.display()
                ))
            })?;
        let capture = Arc::new(Mutex::new(Capture {
            path: path.to_path_buf(),
            writer: Some(writer),
            frames: 0,
            error: None,
        }));
        Ok((
            PcapTap {
                capture: capture.clone(),
                filter,
            },
            capture,
        ))
    }
}

impl Tap for PcapTap {
    fn frame(&mut self, time: SimTime, dir: usize, rx: bool, data: &[u8]) {
        let keep = match self.filter {
            Filter::Link => !rx,
            // Our side sends on direction `side` and receives on the other.
            Filter::Interface { side } => (!rx && dir == side) || (rx && dir != side),
        };
        if !keep {
            return;
        }
        let mut c = self.capture.lock().unwrap_or_else(|e| e.into_inner());
        let Some(w) = c.writer.as_mut() else { return };
        let pkt = PcapPacket::new(
            Duration::from_nanos(time.as_nanos()),
            data.len() as u32,
            data,
        );
        match w.write_packet(&pkt) {
            Ok(_) => c.frames += 1,
            Err(e) => {
                let msg = format!("{}: {e} (capture stopped)", c.path.display());
                c.error = Some(msg);
                c.writer = None;
            }
        }
    }
}

/// Captures what `targets` name into files in `dir` (`<link>.pcap`,
/// `<node>-<iface>.pcap`): each target is a link name, `NODE:IFACE` for one
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
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::os(format!("creating pcap directory {}", dir.display()), e))?;
    let mut wanted: Vec<(usize, Filter, String)> = Vec::new();
    for t in targets {
        if t == "all" {
            for (i, l) in sim.net.links().iter().enumerate() {
                wanted.push((i, Filter::Link, l.name.clone()));
            }
        } else if let Some(link) = sim.net.link_id(t) {
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
                "pcap target {t}: not a link, NODE:IFACE or 'all' (links: {})",
                names.join(", ")
            )));
        }
    }
    for (link, filter, name) in wanted {
        let path = dir.join(format!("{name}.pcap"));
        let (tap, cap) = PcapTap::create(&path, filter)?;
        sim.net.add_tap(link, Box::new(tap));
        caps.push(cap);
    }
    Ok(caps)
}
