//! pcap capture: a [`Tap`] that writes frames with their simulated timestamps.
//!
//! Files use the nanosecond-resolution pcap format (magic `0xa1b23c4d`,
//! link type Ethernet), which Wireshark and tshark read; simulated time zero
//! is the Unix epoch, so timestamps read as time since the start of the run.
//! A write error (disk full) stops that capture and is reported at the end of
//! the run; it never stops the simulation.

use netloop_core::SimTime;
use netloop_model::network::Tap;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    pub fn create(path: &Path, filter: Filter) -> anyhow::Result<(Self, Arc<Mutex<Capture>>)> {
        let file = File::create(path)
            .map_err(|e| anyhow::anyhow!("cannot create pcap file {}: {e}", path.display()))?;
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            endianness: Endianness::Little,
            snaplen: 65_535,
            ..PcapHeader::default()
        };
        let writer = PcapWriter::with_header(BufWriter::with_capacity(1 << 16, file), header)
            .map_err(|e| anyhow::anyhow!("cannot write pcap header to {}: {e}", path.display()))?;
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
