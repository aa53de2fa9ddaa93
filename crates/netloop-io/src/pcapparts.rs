//! pcap capture of a partitioned run (threads, MPI ranks, real time).
//!
//! A partition shows a capture's link only the frames it sends there and
//! the frames it receives there: a link cut between two partitions is seen
//! half by each. So each partition writes what it shows into a part file
//! of its own, each frame with its [`TapOrder`] (simulated time, the key of
//! the event that showed it, its place among that event's frames), and at
//! the end the parts merge in that order into the capture's file. A run of
//! one partition writes its frames in the same order (events run in key
//! order, and events of different partitions have different sources, which
//! decide between them), so the merged file is byte for byte the one a
//! single run writes: the same file and seed give the same capture with 1,
//! 2, 4 or 8 partitions, on threads or on ranks (issue 17).
//!
//! Part files lie beside the capture (`.NAME.pcap.partN`, in `--pcap-dir`),
//! where the user has room for the capture itself; they are removed once
//! merged, and also when the run ends early. A write error stops a part at
//! one frame: the merged file then holds every frame before that one (from
//! all parts), and the capture reports the error, as a single run's
//! capture does when its disk fills.

use netloop_core::SimTime;
use netloop_model::network::{Tap, TapOrder};
use netloop_model::partition::PartitionTaps;
use netloop_model::Simulation;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::pcap::{create_dir, resolve, Capture, Filter};

/// A part record's header: time, key (u64 each), sub and length (u32
/// each), little-endian; the frame's bytes follow.
const RECORD_HEADER: usize = 24;

/// How much a part buffers before writing (the buffer is written whole, so
/// that a failure is known to the frame: see [`Part::push`]).
const FLUSH_AT: usize = 1 << 20;

/// Where a part stopped, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartFailure {
    /// Simulated time of the first frame not written (ns).
    pub time_ns: u64,
    /// Its event key.
    pub key: u64,
    /// Its place in the event.
    pub sub: u32,
    /// The error.
    pub why: String,
}

impl PartFailure {
    fn order(&self) -> TapOrder {
        TapOrder {
            time: SimTime::from_nanos(self.time_ns),
            key: self.key,
            sub: self.sub,
        }
    }
}

/// One partition's part of one capture.
pub struct Part {
    path: PathBuf,
    file: Option<File>,
    buf: Vec<u8>,
    /// The first frame in `buf`.
    first: Option<TapOrder>,
    /// Frames written (or buffered).
    pub frames: u64,
    failed: Option<PartFailure>,
}

impl Part {
    /// Creates the part file `path`.
    pub fn create(path: &Path) -> Result<Arc<Mutex<Part>>> {
        let file = File::create(path)
            .map_err(|e| Error::os(format!("creating pcap part file {}", path.display()), e))?;
        Ok(Arc::new(Mutex::new(Part {
            path: path.to_path_buf(),
            file: Some(file),
            buf: Vec::with_capacity(FLUSH_AT + 2048),
            first: None,
            frames: 0,
            failed: None,
        })))
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends a frame shown at `at`.
    fn push(&mut self, at: TapOrder, data: &[u8]) {
        if self.file.is_none() {
            return;
        }
        self.first.get_or_insert(at);
        self.buf
            .extend_from_slice(&at.time.as_nanos().to_le_bytes());
        self.buf.extend_from_slice(&at.key.to_le_bytes());
        self.buf.extend_from_slice(&at.sub.to_le_bytes());
        self.buf
            .extend_from_slice(&(data.len() as u32).to_le_bytes());
        self.buf.extend_from_slice(data);
        self.frames += 1;
        if self.buf.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Writes the buffer. On an error the part stops at the buffer's first
    /// frame: everything before it is in the file whole.
    fn flush(&mut self) {
        let (Some(f), Some(first)) = (self.file.as_mut(), self.first) else {
            return;
        };
        if let Err(e) = f.write_all(&self.buf) {
            self.file = None;
            self.failed = Some(PartFailure {
                time_ns: first.time.as_nanos(),
                key: first.key,
                sub: first.sub,
                why: format!("writing {}: {e}", self.path.display()),
            });
        }
        self.buf.clear();
        self.first = None;
    }

    /// Writes what is buffered and closes the file; returns where the part
    /// stopped, if it did.
    pub fn finish(&mut self) -> Option<PartFailure> {
        self.flush();
        self.file = None;
        self.failed.clone()
    }
}

/// A tap that writes a partition's frames of one capture into its part.
struct PartTap {
    filter: Filter,
    part: Arc<Mutex<Part>>,
}

impl Tap for PartTap {
    fn frame(&mut self, at: TapOrder, dir: usize, rx: bool, data: &[u8]) {
        if self.filter.keeps(dir, rx) {
            self.part
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(at, data);
        }
    }
}

/// Reads a part file record by record, up to where it stopped.
struct PartReader {
    r: BufReader<File>,
    stop: Option<TapOrder>,
}

impl PartReader {
    /// The next frame, `None` at the end (or where the part stopped).
    fn next(&mut self) -> std::io::Result<Option<(TapOrder, Vec<u8>)>> {
        let mut h = [0u8; RECORD_HEADER];
        // A clean end of file falls between records.
        match self.r.read(&mut h[..1])? {
            0 => return Ok(None),
            _ => self.r.read_exact(&mut h[1..])?,
        }
        let u64_at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        let at = TapOrder {
            time: SimTime::from_nanos(u64_at(0)),
            key: u64_at(8),
            sub: u32_at(16),
        };
        if self.stop.is_some_and(|s| at >= s) {
            return Ok(None);
        }
        let mut data = vec![0u8; u32_at(20) as usize];
        self.r.read_exact(&mut data)?;
        Ok(Some((at, data)))
    }
}

/// Merges part files (each with where it stopped, if it did) into
/// `capture`, in the order of their frames. If a part stopped, the capture
/// holds the frames before its first lost one, from every part, and stops
/// there with that part's error.
pub fn merge(capture: &mut Capture, parts: &[(PathBuf, Option<PartFailure>)]) {
    let failed = parts
        .iter()
        .filter_map(|(_, f)| f.as_ref())
        .min_by_key(|f| f.order())
        .cloned();
    let stop = failed.as_ref().map(PartFailure::order);
    let mut readers = Vec::with_capacity(parts.len());
    for (path, _) in parts {
        match File::open(path) {
            Ok(f) => readers.push(PartReader {
                r: BufReader::with_capacity(1 << 16, f),
                stop,
            }),
            Err(e) => {
                capture.stop(
                    SimTime::ZERO,
                    &format!("opening pcap part file {}: {e}", path.display()),
                );
                return;
            }
        }
    }
    let mut heads: Vec<Option<Vec<u8>>> = vec![None; readers.len()];
    let mut heap = BinaryHeap::new();
    let advance = |i: usize,
                   readers: &mut Vec<PartReader>,
                   heads: &mut Vec<Option<Vec<u8>>>,
                   heap: &mut BinaryHeap<Reverse<(TapOrder, usize)>>|
     -> std::result::Result<(), String> {
        match readers[i].next() {
            Ok(Some((at, data))) => {
                heads[i] = Some(data);
                heap.push(Reverse((at, i)));
                Ok(())
            }
            Ok(None) => Ok(()),
            Err(e) => Err(format!(
                "reading pcap part file {}: {e}",
                parts[i].0.display()
            )),
        }
    };
    for i in 0..readers.len() {
        if let Err(why) = advance(i, &mut readers, &mut heads, &mut heap) {
            capture.stop(SimTime::ZERO, &why);
            return;
        }
    }
    while let Some(Reverse((at, i))) = heap.pop() {
        let data = heads[i].take().expect("a head for each entry");
        capture.write(at.time, &data);
        if let Err(why) = advance(i, &mut readers, &mut heads, &mut heap) {
            capture.stop(at.time, &why);
            return;
        }
    }
    if let Some(f) = failed {
        capture.stop(f.order().time, &f.why);
    }
}

/// A part file's name beside capture file `name` (without `.pcap`).
pub fn part_path(dir: &Path, name: &str, tag: &str) -> PathBuf {
    dir.join(format!(".{name}.pcap.{tag}"))
}

/// One capture of a partitioned run.
struct Parted {
    /// The capture file (`None` in a process that only sends its parts).
    capture: Option<Arc<Mutex<Capture>>>,
    link: usize,
    filter: Filter,
    /// Each partition's part, where this process writes it (`None`: another
    /// process's, received by [`Parted::received`]).
    parts: Vec<Option<Arc<Mutex<Part>>>>,
    /// Part files this process holds, removed when dropped.
    files: Vec<PathBuf>,
    /// Where the capture's files go, and its name (without `.pcap`).
    dir: PathBuf,
    name: String,
}

/// The captures of a partitioned run: the capture files, and a part of
/// each for each partition this process runs. Part files left when it is
/// dropped (a run that ended early) are removed.
pub struct PartedCaptures {
    caps: Vec<Parted>,
}

impl PartedCaptures {
    /// Captures what `targets` name (as [`crate::pcap::attach`]) for a run
    /// of `parts` partitions, of which this process runs those in `mine`.
    /// With `files` the capture files themselves are created here (in a
    /// run on threads, and on MPI rank 0); otherwise only this process's
    /// parts are (the other ranks). Returns the captures (empty without
    /// `files`) and their parts.
    pub fn create(
        sim: &Simulation,
        targets: &[String],
        dir: &Path,
        parts: u32,
        mine: &[u32],
        files: bool,
    ) -> Result<(Vec<Arc<Mutex<Capture>>>, PartedCaptures)> {
        let mut out = PartedCaptures { caps: Vec::new() };
        let mut captures = Vec::new();
        if targets.is_empty() {
            return Ok((captures, out));
        }
        let wanted = resolve(sim, targets)?;
        create_dir(dir)?;
        for (link, filter, name) in wanted {
            let capture = if files {
                Some(Capture::create(&dir.join(format!("{name}.pcap")))?)
            } else {
                None
            };
            if let Some(c) = &capture {
                captures.push(c.clone());
            }
            let mut parted = Parted {
                capture,
                link,
                filter,
                parts: (0..parts).map(|_| None).collect(),
                files: Vec::new(),
                dir: dir.to_path_buf(),
                name: name.clone(),
            };
            for &p in mine {
                let path = part_path(dir, &name, &format!("part{p}"));
                parted.files.push(path.clone());
                parted.parts[p as usize] = Some(Part::create(&path)?);
            }
            out.caps.push(parted);
        }
        Ok((captures, out))
    }

    /// The taps partition `p` needs (one per capture).
    pub fn taps(&self, p: u32) -> PartitionTaps {
        let mut taps: PartitionTaps = Vec::new();
        for c in &self.caps {
            if let Some(part) = &c.parts[p as usize] {
                taps.push((
                    c.link,
                    Box::new(PartTap {
                        filter: c.filter,
                        part: part.clone(),
                    }),
                ));
            }
        }
        taps
    }

    /// Adds partition `p`'s taps to `sim`.
    pub fn add_taps(&self, p: u32, sim: &mut Simulation) {
        for (link, tap) in self.taps(p) {
            sim.net.add_tap(link, tap);
        }
    }

    /// Finishes this process's parts: per capture, each part's file and
    /// where it stopped, in partition order (parts of other processes
    /// left out).
    pub fn finish_parts(&mut self) -> Vec<Vec<(u32, PathBuf, Option<PartFailure>)>> {
        self.caps
            .iter()
            .map(|c| {
                c.parts
                    .iter()
                    .enumerate()
                    .filter_map(|(p, part)| {
                        let mut part = part.as_ref()?.lock().unwrap_or_else(|e| e.into_inner());
                        let failed = part.finish();
                        Some((p as u32, part.path().to_path_buf(), failed))
                    })
                    .collect()
            })
            .collect()
    }

    /// How many captures there are.
    pub fn len(&self) -> usize {
        self.caps.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.caps.is_empty()
    }

    /// Where capture `i`'s part from process `from` (another process's
    /// partition) is to be kept here; the file is removed with the others.
    pub fn received(&mut self, i: usize, from: u32) -> PathBuf {
        let c = &mut self.caps[i];
        let path = part_path(&c.dir, &c.name, &format!("from{from}"));
        c.files.push(path.clone());
        path
    }

    /// Merges each capture's parts (`parts[i]`, for capture `i`: each
    /// partition's part file and where it stopped, in partition order) into
    /// its file, and removes the part files.
    pub fn merge(mut self, parts: &[Vec<(PathBuf, Option<PartFailure>)>]) {
        for (c, parts) in self.caps.iter().zip(parts) {
            if let Some(capture) = &c.capture {
                merge(
                    &mut capture.lock().unwrap_or_else(|e| e.into_inner()),
                    parts,
                );
            }
        }
        self.remove_files();
    }

    /// Merges the parts of a run whose partitions all ran in this process.
    pub fn merge_local(mut self) {
        let parts: Vec<Vec<(PathBuf, Option<PartFailure>)>> = self
            .finish_parts()
            .into_iter()
            .map(|v| v.into_iter().map(|(_, path, f)| (path, f)).collect())
            .collect();
        self.merge(&parts);
    }

    fn remove_files(&mut self) {
        for c in &mut self.caps {
            for part in c.parts.iter().flatten() {
                // Closes the file before it is removed.
                part.lock().unwrap_or_else(|e| e.into_inner()).file = None;
            }
            for f in c.files.drain(..) {
                let _ = std::fs::remove_file(f);
            }
        }
    }
}

impl Drop for PartedCaptures {
    fn drop(&mut self) {
        self.remove_files();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of its own for one test, removed at its end.
    struct TestDir(PathBuf);
    impl TestDir {
        fn new(name: &str) -> TestDir {
            let p = std::env::temp_dir()
                .join(format!("netloop-pcapparts-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TestDir(p)
        }
        fn path(&self) -> &Path {
            &self.0
        }
    }
    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn order(t: u64, key: u64, sub: u32) -> TapOrder {
        TapOrder {
            time: SimTime::from_nanos(t),
            key,
            sub,
        }
    }

    fn frames_of(path: &Path) -> Vec<(u64, Vec<u8>)> {
        let mut r = pcap_file::pcap::PcapReader::new(File::open(path).unwrap()).unwrap();
        let mut out = Vec::new();
        while let Some(p) = r.next_packet() {
            let p = p.unwrap();
            out.push((p.timestamp.as_nanos() as u64, p.data.into_owned()));
        }
        out
    }

    /// Parts interleave by time, then by event key, then by place in the
    /// event; frames of one part keep their order.
    #[test]
    fn parts_merge_in_the_order_of_their_frames() {
        let dir = TestDir::new("order");
        let a = Part::create(&dir.path().join("a")).unwrap();
        let b = Part::create(&dir.path().join("b")).unwrap();
        {
            let (mut a, mut b) = (a.lock().unwrap(), b.lock().unwrap());
            a.push(order(10, 5, 0), b"a1");
            b.push(order(10, 3, 0), b"b1");
            b.push(order(10, 3, 1), b"b2");
            a.push(order(10, 5, 1), b"a2");
            a.push(order(20, 1, 0), b"a3");
            b.push(order(30, 0, 0), b"b3");
        }
        let parts: Vec<_> = [a, b]
            .iter()
            .map(|p| {
                let mut p = p.lock().unwrap();
                let f = p.finish();
                (p.path().to_path_buf(), f)
            })
            .collect();
        let cap = Capture::create(&dir.path().join("out.pcap")).unwrap();
        let mut cap = cap.lock().unwrap();
        merge(&mut cap, &parts);
        assert_eq!(cap.finish(), None);
        let got: Vec<(u64, Vec<u8>)> = frames_of(&dir.path().join("out.pcap"));
        let want: Vec<(u64, Vec<u8>)> = [
            (10, "b1"),
            (10, "b2"),
            (10, "a1"),
            (10, "a2"),
            (20, "a3"),
            (30, "b3"),
        ]
        .iter()
        .map(|(t, d)| (*t, d.as_bytes().to_vec()))
        .collect();
        assert_eq!(got, want);
        assert_eq!(cap.frames, 6);
    }

    /// A part that stopped (its disk filled) stops the whole capture at
    /// its first lost frame: frames before it from every part are kept,
    /// none after, and the capture reports the part's error.
    #[test]
    fn a_part_that_stopped_stops_the_capture_there() {
        let dir = TestDir::new("stopped");
        let a = Part::create(&dir.path().join("a")).unwrap();
        let b = Part::create(&dir.path().join("b")).unwrap();
        {
            let (mut a, mut b) = (a.lock().unwrap(), b.lock().unwrap());
            a.push(order(10, 1, 0), b"a1");
            b.push(order(15, 2, 0), b"b1");
            a.push(order(20, 1, 0), b"a2");
            b.push(order(25, 2, 0), b"b2");
        }
        let mut parts: Vec<_> = [a, b]
            .iter()
            .map(|p| {
                let mut p = p.lock().unwrap();
                let f = p.finish();
                (p.path().to_path_buf(), f)
            })
            .collect();
        // As if b's write of its frame at 25 had failed and a's at 20 too:
        // the earlier failure decides.
        parts[1].1 = Some(PartFailure {
            time_ns: 25,
            key: 2,
            sub: 0,
            why: "disk full (b)".into(),
        });
        parts[0].1 = Some(PartFailure {
            time_ns: 20,
            key: 1,
            sub: 0,
            why: "disk full (a)".into(),
        });
        let cap = Capture::create(&dir.path().join("out.pcap")).unwrap();
        let mut cap = cap.lock().unwrap();
        merge(&mut cap, &parts);
        let err = cap.finish().expect("the capture reports the part's error");
        assert!(err.contains("disk full (a)"), "{err}");
        assert!(err.contains("2 frames before"), "{err}");
        let got: Vec<Vec<u8>> = frames_of(&dir.path().join("out.pcap"))
            .into_iter()
            .map(|(_, d)| d)
            .collect();
        assert_eq!(got, vec![b"a1".to_vec(), b"b1".to_vec()]);
    }
}
