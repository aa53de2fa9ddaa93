//! pcap capture of a partitioned run (threads, MPI ranks, real time).
//!
//! A partition shows a capture's link only the frames it sends there and
//! the frames it receives there: a link cut between two partitions is seen
//! half by each. So each partition writes what it shows into a part of its
//! own, each frame with its [`TapOrder`], and at the end the parts merge by
//! that order into the capture's file. Each partition's orders only grow,
//! and sorting all partitions' frames by them gives the order in which a
//! run of one partition shows the same frames (the model's `TapOrder` says
//! why), so the merged file is byte for byte the one a single run writes:
//! the same file and seed give the same capture with 1, 2, 4 or 8
//! partitions, on threads or on ranks (issue 17).
//!
//! A part is an unnamed file in `--pcap-dir` (where the user has room for
//! the capture itself), made when its partition shows its first frame: it
//! is removed as it is made and vanishes when closed, so nothing is left
//! behind whatever ends the run (an error, a panic, an MPI abort, SIGKILL).
//! If writing a part fails (a full disk), the part keeps its frames before
//! the failed one, and the merged capture stops at that frame: it holds
//! every frame before it, from all partitions, and the capture reports the
//! error, as a single run's capture does when its disk fills.

use netloop_core::SimTime;
use netloop_model::network::{Tap, TapOrder};
use netloop_model::partition::PartitionTaps;
use netloop_model::Simulation;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::pcap::{create_dir, resolve, Capture, Filter};

/// A part record's header: time (u64), key (u128), sub and length (u32
/// each), little-endian; the frame's bytes follow.
const RECORD_HEADER: usize = 32;

/// How much a part buffers before writing.
const FLUSH_AT: usize = 1 << 20;

/// Where a part stopped, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PartFailure {
    /// Frames the part holds whole (those before the failure).
    pub records: u64,
    /// The first frame lost, where known (time ns, key, sub): the merged
    /// capture stops there. Unknown (a part that arrived short from
    /// another process): it stops where the part's last whole frame is.
    pub lost: Option<(u64, u128, u32)>,
    /// The error.
    pub why: String,
}

/// An unnamed file in `dir` for reading and writing: removed as soon as it
/// is made, so that it vanishes when closed, however the process ends.
pub fn unnamed_file(dir: &Path, name: &str) -> std::io::Result<File> {
    let path = dir.join(format!(".{name}.{}.part", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(f)
}

/// One partition's part of one capture.
pub struct Part {
    dir: PathBuf,
    /// The capture's name, and this part's partition (for the file's
    /// temporary name and for errors).
    name: String,
    partition: u32,
    /// The file, once a frame came (or `None` after a failure).
    file: Option<File>,
    buf: Vec<u8>,
    /// The order of the first frame in `buf`.
    first: Option<TapOrder>,
    /// Frames written to the file whole.
    written: u64,
    /// Frames buffered.
    buffered: u64,
    failed: Option<PartFailure>,
}

impl Part {
    /// A part of capture `name` for `partition`, whose file will be made
    /// in `dir` when it is first needed.
    pub fn new(dir: &Path, name: &str, partition: u32) -> Arc<Mutex<Part>> {
        Arc::new(Mutex::new(Part {
            dir: dir.to_path_buf(),
            name: name.to_string(),
            partition,
            file: None,
            buf: Vec::new(),
            first: None,
            written: 0,
            buffered: 0,
            failed: None,
        }))
    }

    /// Appends a frame shown at `at`.
    fn push(&mut self, at: TapOrder, data: &[u8]) {
        if self.failed.is_some() {
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
        self.buffered += 1;
        if self.buf.len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Writes the buffer (making the file first if need be). On an error
    /// the part stops at the buffer's first frame; the file is cut back to
    /// the frames before it.
    fn flush(&mut self) {
        let Some(first) = self.first.take() else {
            return;
        };
        let r = (|| -> std::io::Result<()> {
            if self.file.is_none() {
                let tag = format!("{}.part{}", self.name, self.partition);
                self.file = Some(unnamed_file(&self.dir, &tag)?);
            }
            let f = self.file.as_mut().expect("made above");
            let whole = f.stream_position()?;
            if let Err(e) = f.write_all(&self.buf) {
                // A partly written frame would read as a damaged one.
                let _ = f.set_len(whole);
                return Err(e);
            }
            Ok(())
        })();
        match r {
            Ok(()) => self.written += self.buffered,
            Err(e) => {
                self.failed = Some(PartFailure {
                    records: self.written,
                    lost: Some((first.time.as_nanos(), first.key, first.sub)),
                    why: format!(
                        "writing partition {}'s part of it in {}: {e}",
                        self.partition,
                        self.dir.display()
                    ),
                });
            }
        }
        self.buf = Vec::new();
        self.buffered = 0;
    }

    /// Writes what is buffered; returns the part's file (rewound; `None`
    /// if it holds no frame) and where it stopped, if it did.
    pub fn finish(&mut self) -> (Option<File>, Option<PartFailure>) {
        self.flush();
        let mut file = self.file.take();
        if let Some(f) = &mut file {
            if let Err(e) = f.seek(SeekFrom::Start(0)) {
                self.failed.get_or_insert(PartFailure {
                    records: 0,
                    lost: None,
                    why: format!("reading partition {}'s part back: {e}", self.partition),
                });
            }
        }
        (file, self.failed.clone())
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

/// One part as the merge reads it: its file (`None`: no frames) and where
/// it stopped, if it did.
pub type PartData = (Option<File>, Option<PartFailure>);

/// Reads a part record by record, up to its last whole one.
struct PartReader {
    r: Option<BufReader<File>>,
    /// Records left to read (`u64::MAX`: to the end).
    left: u64,
}

impl PartReader {
    /// The next frame, `None` at the end.
    fn next(&mut self) -> std::io::Result<Option<(TapOrder, Vec<u8>)>> {
        let Some(r) = self.r.as_mut().filter(|_| self.left > 0) else {
            return Ok(None);
        };
        let mut h = [0u8; RECORD_HEADER];
        // A clean end of file falls between records.
        match r.read(&mut h[..1])? {
            0 => return Ok(None),
            _ => r.read_exact(&mut h[1..])?,
        }
        let u64_at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        let at = TapOrder {
            time: SimTime::from_nanos(u64_at(0)),
            key: u128::from_le_bytes(h[8..24].try_into().expect("16 bytes")),
            sub: u32_at(24),
        };
        let mut data = vec![0u8; u32_at(28) as usize];
        r.read_exact(&mut data)?;
        self.left -= 1;
        Ok(Some((at, data)))
    }
}

/// What the merge holds for a part: its next frame, or where the merge
/// must stop (a part that stopped: its first lost frame's place).
enum Head {
    Frame(Vec<u8>),
    Stop,
}

/// Merges `parts` into `capture` by the frames' orders. A part that
/// stopped stops the capture where its first lost frame would have come:
/// the capture holds every frame before it, from all parts, and reports
/// the part's error.
pub fn merge(capture: &mut Capture, parts: Vec<PartData>) {
    let mut readers = Vec::with_capacity(parts.len());
    let mut failures = Vec::with_capacity(parts.len());
    for (file, failed) in parts {
        readers.push(PartReader {
            r: file.map(|f| BufReader::with_capacity(1 << 16, f)),
            left: failed.as_ref().map_or(u64::MAX, |f| f.records),
        });
        failures.push(failed);
    }
    let mut heads: Vec<Option<Head>> = (0..readers.len()).map(|_| None).collect();
    let mut last: Vec<Option<TapOrder>> = vec![None; readers.len()];
    let mut heap: BinaryHeap<Reverse<(TapOrder, usize)>> = BinaryHeap::new();
    // Puts part `i`'s next frame (or its stop) in the heap.
    let mut advance = |i: usize,
                       heads: &mut Vec<Option<Head>>,
                       heap: &mut BinaryHeap<Reverse<(TapOrder, usize)>>|
     -> std::result::Result<(), String> {
        match readers[i].next() {
            Ok(Some((at, data))) => {
                last[i] = Some(at);
                heads[i] = Some(Head::Frame(data));
                heap.push(Reverse((at, i)));
            }
            Ok(None) => {
                if let Some(f) = &failures[i] {
                    // The first lost frame's place; unknown, the place of
                    // the last whole one (the lost ones come at or after
                    // it: a part's orders only grow).
                    let at = f
                        .lost
                        .map(|(t, key, sub)| TapOrder {
                            time: SimTime::from_nanos(t),
                            key,
                            sub,
                        })
                        .or(last[i])
                        .unwrap_or_default();
                    heads[i] = Some(Head::Stop);
                    heap.push(Reverse((at, i)));
                }
            }
            Err(e) => return Err(format!("reading a part of it back: {e}")),
        }
        Ok(())
    };
    for i in 0..heads.len() {
        if let Err(why) = advance(i, &mut heads, &mut heap) {
            capture.stop(SimTime::ZERO, &why);
            return;
        }
    }
    while let Some(Reverse((at, i))) = heap.pop() {
        match heads[i].take().expect("a head for each entry") {
            Head::Frame(data) => capture.write(at.time, &data),
            Head::Stop => {
                let why = failures[i].as_ref().map_or("", |f| f.why.as_str());
                capture.stop(at.time, why);
                return;
            }
        }
        if let Err(why) = advance(i, &mut heads, &mut heap) {
            capture.stop(at.time, &why);
            return;
        }
    }
}

/// One capture of a partitioned run.
struct Parted {
    /// The capture file (`None` in a process that only sends its parts).
    capture: Option<Arc<Mutex<Capture>>>,
    link: usize,
    filter: Filter,
    /// The part of each partition this process runs.
    parts: Vec<Option<Arc<Mutex<Part>>>>,
    /// Where its files go, and its name (without `.pcap`).
    dir: PathBuf,
    name: String,
}

/// The captures of a partitioned run: the capture files, and a part of
/// each for each partition this process runs.
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
                dir: dir.to_path_buf(),
                name: name.clone(),
            };
            for &p in mine {
                parted.parts[p as usize] = Some(Part::new(dir, &name, p));
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

    /// Finishes this process's parts: per capture, the parts in partition
    /// order (parts of other processes left out).
    pub fn finish_parts(&mut self) -> Vec<Vec<PartData>> {
        self.caps
            .iter()
            .map(|c| {
                c.parts
                    .iter()
                    .flatten()
                    .map(|part| part.lock().unwrap_or_else(|e| e.into_inner()).finish())
                    .collect()
            })
            .collect()
    }

    /// An unnamed file for capture `i`'s part from another process.
    pub fn received(&self, i: usize, from: u32) -> std::io::Result<File> {
        let c = &self.caps[i];
        unnamed_file(&c.dir, &format!("{}.from{from}", c.name))
    }

    /// Merges each capture's parts (`parts[i]`, for capture `i`, in
    /// partition order) into its file.
    pub fn merge(self, parts: Vec<Vec<PartData>>) {
        for (c, parts) in self.caps.iter().zip(parts) {
            if let Some(capture) = &c.capture {
                merge(
                    &mut capture.lock().unwrap_or_else(|e| e.into_inner()),
                    parts,
                );
            }
        }
    }

    /// Merges the parts of a run whose partitions all ran in this process.
    pub fn merge_local(mut self) {
        let parts = self.finish_parts();
        self.merge(parts);
    }
}

/// Counts the whole frames at the start of a part file (one that arrived
/// short from another process), and rewinds it.
pub fn whole_records(f: &mut File) -> std::io::Result<u64> {
    f.seek(SeekFrom::Start(0))?;
    let len = f.metadata()?.len();
    let mut r = BufReader::new(&mut *f);
    let (mut at, mut n) = (0u64, 0u64);
    let mut h = [0u8; RECORD_HEADER];
    while at + RECORD_HEADER as u64 <= len {
        r.read_exact(&mut h)?;
        let size = u32::from_le_bytes(h[28..32].try_into().expect("4 bytes")) as u64;
        let end = at + RECORD_HEADER as u64 + size;
        if end > len {
            break;
        }
        r.seek_relative(size as i64)?;
        at = end;
        n += 1;
    }
    drop(r);
    f.seek(SeekFrom::Start(0))?;
    Ok(n)
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

    fn order(t: u64, key: u128, sub: u32) -> TapOrder {
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

    /// Two parts of capture `name` holding a1, b1, a2, b2, a3 at 10, 15,
    /// 20, 25 and 30 ns (a's key 1, b's key 2).
    fn two_parts(dir: &Path, name: &str) -> Vec<Arc<Mutex<Part>>> {
        let parts: Vec<_> = (0..2).map(|p| Part::new(dir, name, p)).collect();
        {
            let (mut a, mut b) = (parts[0].lock().unwrap(), parts[1].lock().unwrap());
            a.push(order(10, 1, 0), b"a1");
            b.push(order(15, 2, 0), b"b1");
            a.push(order(20, 1, 0), b"a2");
            b.push(order(25, 2, 0), b"b2");
            a.push(order(30, 1, 0), b"a3");
        }
        parts
    }

    fn finished(parts: &[Arc<Mutex<Part>>]) -> Vec<PartData> {
        parts.iter().map(|p| p.lock().unwrap().finish()).collect()
    }

    /// Parts interleave by their frames' orders; a part's frames keep
    /// theirs; a part with no frame has no file; nothing is left in the
    /// directory (the parts' files are unnamed).
    #[test]
    fn parts_merge_in_the_order_of_their_frames() {
        let dir = TestDir::new("order");
        let parts: Vec<_> = (0..3).map(|p| Part::new(dir.path(), "x", p)).collect();
        {
            let (mut a, mut b) = (parts[0].lock().unwrap(), parts[1].lock().unwrap());
            a.push(order(10, 5, 0), b"a1");
            b.push(order(10, 3, 0), b"b1");
            b.push(order(10, 3, 1), b"b2");
            a.push(order(10, 5, 1), b"a2");
            a.push(order(20, 1, 0), b"a3");
            b.push(order(30, 0, 0), b"b3");
        }
        let data = finished(&parts);
        assert!(data[2].0.is_none(), "no frame, no file");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let out = dir.path().join("out.pcap");
        let cap = Capture::create(&out).unwrap();
        let mut cap = cap.lock().unwrap();
        merge(&mut cap, data);
        assert_eq!(cap.finish(), None);
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
        assert_eq!(frames_of(&out), want);
        assert_eq!(cap.frames, 6);
    }

    /// A part that stopped (its disk filled) stops the whole capture at
    /// its first lost frame: frames before it from every part are kept,
    /// none after, and the capture reports the part's error. A part that
    /// arrived short stops it at its last whole frame.
    #[test]
    fn a_part_that_stopped_stops_the_capture_there() {
        let dir = TestDir::new("stopped");
        let parts = two_parts(dir.path(), "x");
        let mut data = finished(&parts);
        // As if a's write of its frame at 20 had failed: a holds a1 only.
        data[0].1 = Some(PartFailure {
            records: 1,
            lost: Some((20, 1, 0)),
            why: "disk full (a)".into(),
        });
        let out = dir.path().join("out.pcap");
        let cap = Capture::create(&out).unwrap();
        let mut cap = cap.lock().unwrap();
        merge(&mut cap, data);
        let err = cap.finish().expect("the capture reports the part's error");
        assert!(err.contains("disk full (a)"), "{err}");
        assert!(err.contains("the file holds the 2 frames before"), "{err}");
        let got: Vec<Vec<u8>> = frames_of(&out).into_iter().map(|(_, d)| d).collect();
        assert_eq!(got, vec![b"a1".to_vec(), b"b1".to_vec()]);

        // Arrived short: a's first two frames whole, the rest unknown.
        let parts = two_parts(dir.path(), "y");
        let mut data = finished(&parts);
        let f = data[0].0.as_mut().unwrap();
        let len = f.metadata().unwrap().len();
        f.set_len(len - 1).unwrap();
        assert_eq!(whole_records(f).unwrap(), 2);
        data[0].1 = Some(PartFailure {
            records: 2,
            lost: None,
            why: "arrived short".into(),
        });
        let cap = Capture::create(&out).unwrap();
        let mut cap = cap.lock().unwrap();
        merge(&mut cap, data);
        let err = cap.finish().expect("reported");
        assert!(err.contains("arrived short"), "{err}");
        let got: Vec<Vec<u8>> = frames_of(&out).into_iter().map(|(_, d)| d).collect();
        assert_eq!(got, vec![b"a1".to_vec(), b"b1".to_vec(), b"a2".to_vec()]);
    }

    /// A key is a source above bit 64 and an event's number below: at one
    /// moment the lower source's frame comes first, whatever the numbers
    /// (read back with the low half only, this would put b's first). A
    /// failure's place keeps the whole key through the JSON the ranks send.
    #[test]
    fn keys_keep_their_source_above_64_bits() {
        let dir = TestDir::new("wide");
        let parts: Vec<_> = (0..2).map(|p| Part::new(dir.path(), "w", p)).collect();
        let (a_key, b_key) = ((1u128 << 64) | 9, (2u128 << 64) | 1);
        parts[0].lock().unwrap().push(order(10, a_key, 0), b"a");
        parts[1].lock().unwrap().push(order(10, b_key, 0), b"b");
        let out = dir.path().join("out.pcap");
        let cap = Capture::create(&out).unwrap();
        let mut cap = cap.lock().unwrap();
        merge(&mut cap, finished(&parts));
        assert_eq!(cap.finish(), None);
        let got: Vec<Vec<u8>> = frames_of(&out).into_iter().map(|(_, d)| d).collect();
        assert_eq!(got, vec![b"a".to_vec(), b"b".to_vec()]);

        let f = PartFailure {
            records: 0,
            lost: Some((10, b_key, 3)),
            why: "x".into(),
        };
        let back: PartFailure = serde_json::from_slice(&serde_json::to_vec(&f).unwrap()).unwrap();
        assert_eq!(back, f);
    }

    /// A part whose file cannot be made (no such directory) stops at its
    /// first frame, with the reason.
    #[test]
    fn a_part_that_cannot_be_made_fails_at_its_first_frame() {
        let p = Part::new(Path::new("/nonexistent/netloop-test"), "x", 1);
        let mut p = p.lock().unwrap();
        p.push(order(5, 7, 0), b"x");
        let (file, failed) = p.finish();
        assert!(file.is_none());
        let f = failed.expect("failed");
        assert_eq!((f.records, f.lost), (0, Some((5, 7, 0))));
        assert!(f.why.contains("partition 1"), "{}", f.why);
    }
}
