//! The packet buffer: an Ethernet frame's bytes with the metadata that
//! travels with them through the model, in buffers that are used again.
//!
//! [`Frame`] is what every part of netloop passes around — the rings of the
//! real-time edge, the model's links, queues and nodes, pcap. It owns:
//!
//! - **The bytes**, from destination MAC to the end of the payload (no
//!   preamble, no FCS). A frame dereferences to its `Vec<u8>`, so code that
//!   edits headers in place, truncates or extends works on it directly.
//! - **Metadata** ([`Meta`]): a unique id, the arrival stamp of a frame read
//!   from a real interface, GSO ([`Gso`]: a super-frame that stands for
//!   `segs` wire frames) and the state of its L4 checksum.
//! - **Reuse.** A dropped frame gives its buffer back to a pool of the
//!   thread that dropped it, and the next frame made on that thread takes it
//!   from there, so the steady state allocates nothing per frame: in a
//!   real-time run the thread that reads frames from a ring is the one that
//!   writes (and drops) the frames leaving the model. When a thread drops
//!   more than it makes (frames read on the I/O thread and consumed by a
//!   simulated host on the event thread), its surplus moves in batches to a
//!   shared spill that the other thread draws from; the spill is taken with
//!   `try_lock` only, so no thread ever waits for it (it allocates instead).
//!
//! - **What was written.** A frame knows how far into its bytes anything
//!   may have been written since they were zeroed (`dirty`), and its buffer
//!   keeps that when it goes back to the pool: a frame of zeros made from
//!   it ([`Frame::zeroed`]) zeroes only that much. A simulated host's
//!   datagram writes its headers and a few bytes of payload into zeros
//!   ([`Frame::head_mut`], [`Frame::write_head`]); routers rewrite headers
//!   the same way; so the next datagram made from its buffer writes a line
//!   or two, not every line of the payload. With thousands of hosts those
//!   lines had left the caches since the buffer's last frame was made, and
//!   zeroing them was most of what building a datagram cost. Any other
//!   mutable use of the bytes (through `DerefMut`) counts as writing all
//!   of them.
//!
//! No headroom is kept in front of the data: nothing that writes frames
//! needs it (the packet socket's TX ring and `writev` put a `virtio_net_hdr`
//! in front by themselves), and a frame that grows a header (a VLAN tag)
//! moves its bytes once, which is what a `Vec` does anyway.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A buffer that fits a frame of a standard MTU (and a VLAN tag).
pub const SMALL_BUFFER: usize = 2048;
/// A buffer that fits a jumbo frame (MTU 9000 and more).
pub const MEDIUM_BUFFER: usize = 16 * 1024;
/// A buffer that fits a GSO super-frame of up to 64 KiB.
pub const LARGE_BUFFER: usize = 65_536 + 256;

/// The pool's size classes: (buffer size, buffers a thread keeps, buffers
/// the shared spill keeps). A buffer joins a class only if its capacity is
/// at least the class's size and under twice it (a buffer grown larger is
/// freed, not kept), and a frame takes the smallest class that holds it;
/// what no class holds is allocated to size and not kept.
const CLASSES: [(usize, usize, usize); 3] = [
    (SMALL_BUFFER, 4096, 8192),
    (MEDIUM_BUFFER, 256, 512),
    (LARGE_BUFFER, 256, 512),
];
/// Buffers moved to or from the shared spill at once.
const BATCH: usize = 64;

/// How a super-frame is cut into wire frames (the kinds Linux's software
/// GSO cuts; `virtio_net_hdr.gso_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoKind {
    /// TCP over IPv4 (TSO); `ecn`: the sender used ECN, so CWR stays on
    /// the first segment only.
    TcpV4 {
        /// `VIRTIO_NET_HDR_GSO_ECN`.
        ecn: bool,
    },
    /// UDP over IPv4 (`UDP_SEGMENT`): each segment a datagram of its own.
    UdpV4,
    /// TCP over IPv6 (TSO6), as [`GsoKind::TcpV4`].
    TcpV6 {
        /// `VIRTIO_NET_HDR_GSO_ECN`.
        ecn: bool,
    },
    /// UDP over IPv6 (`UDP_SEGMENT`).
    UdpV6,
}

/// A GSO super-frame: one buffer that stands for `segs` wire frames, each
/// with a copy of the first `hdr_len` bytes (Ethernet to the end of the TCP
/// or UDP header) and `size` bytes of payload (the last one the rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gso {
    /// The kind of segmentation.
    pub kind: GsoKind,
    /// Header bytes repeated in every segment.
    pub hdr_len: u16,
    /// Payload bytes per segment (the MSS for TCP).
    pub size: u16,
    /// Wire frames the super-frame stands for (at least 2).
    pub segs: u16,
}

impl Gso {
    /// The length of wire frame `i` (of [`Gso::segs`]) cut from a
    /// super-frame of `len` bytes.
    pub fn seg_len(&self, len: usize, i: usize) -> usize {
        let (h, s) = (usize::from(self.hdr_len), usize::from(self.size));
        if i + 1 < usize::from(self.segs) {
            h + s
        } else {
            len.saturating_sub(s * usize::from(self.segs.saturating_sub(1)))
        }
    }

    /// The bytes of all its wire frames together.
    pub fn wire_len(&self, len: usize) -> u64 {
        len as u64 + u64::from(self.segs.saturating_sub(1)) * u64::from(self.hdr_len)
    }
}

/// The state of a frame's TCP/UDP checksum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Checksum {
    /// As on the wire: complete (or none at all).
    #[default]
    Complete,
    /// Partial, as a sender with checksum offload leaves it: the field holds
    /// the pseudo-header's sum, for the device (or the kernel's GSO, or
    /// netloop's cutting) to complete. Only super-frames are carried so.
    Partial,
}

/// What travels with a frame's bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// Unique within the process: a thread's number in the top 16 bits and
    /// its count of frames made below. A copy (a link's duplicate) is a new
    /// frame with a new id. Not part of any result: simulated results do
    /// not depend on it.
    pub id: u64,
    /// When the frame arrived from a real interface (CLOCK_MONOTONIC ns, the
    /// kernel's stamp where there is one); 0 for frames made in the model.
    pub stamp: u64,
    /// `Some` for a super-frame.
    pub gso: Option<Gso>,
    /// Its L4 checksum's state.
    pub csum: Checksum,
}

/// An Ethernet frame (or a GSO super-frame) and its metadata; see the
/// module's documentation.
pub struct Frame {
    data: Vec<u8>,
    /// Every byte of `data` from here to its length is zero (see the
    /// module's documentation); `u32::MAX`: nothing is known.
    dirty: u32,
    /// The metadata.
    pub meta: Meta,
}

/// A buffer in a pool: its bytes, still at the length of its last frame,
/// and how far into them that frame may have written (`Frame::dirty`).
struct Buf {
    data: Vec<u8>,
    dirty: u32,
}

/// A frame's `dirty` when anything may have been written.
const ALL_DIRTY: u32 = u32::MAX;

impl Frame {
    /// An empty frame whose buffer holds at least `cap` bytes.
    pub fn with_capacity(cap: usize) -> Frame {
        let mut data = take_buffer(cap).data;
        data.clear();
        Frame::of(data, 0)
    }

    fn of(data: Vec<u8>, dirty: u32) -> Frame {
        Frame {
            data,
            dirty,
            meta: Meta {
                id: next_id(),
                ..Meta::default()
            },
        }
    }

    /// A frame holding a copy of `bytes`.
    pub fn copy_from(bytes: &[u8]) -> Frame {
        let mut f = Frame::with_capacity(bytes.len());
        f.data.extend_from_slice(bytes);
        f.dirty = ALL_DIRTY;
        f
    }

    /// A frame of `len` zero bytes. Of a buffer used before, only what its
    /// last frame wrote is zeroed again (see the module's documentation).
    pub fn zeroed(len: usize) -> Frame {
        let Buf { mut data, dirty } = take_buffer(len);
        let kept = data.len().min(len);
        let written = (dirty as usize).min(kept);
        data[..written].fill(0);
        debug_assert!(
            data[written..kept].iter().all(|&b| b == 0),
            "a frame wrote past what it declared (dirty {dirty})"
        );
        if len <= data.len() {
            data.truncate(len);
        } else {
            data.resize(len, 0);
        }
        Frame::of(data, 0)
    }

    /// The first `n` bytes to write (`n` at most the frame's length); only
    /// they count as written (the slice holds no more).
    #[inline]
    pub fn head_mut(&mut self, n: usize) -> &mut [u8] {
        self.mark(n);
        &mut self.data[..n]
    }

    /// Lets `write` write into the bytes from `at` on (at most the frame's
    /// length); it returns how many of them, from the first, it may have
    /// written: it must leave the rest as they were. In debug builds, zeros
    /// it was given past that and found non-zero after it panic. (Should
    /// `write` panic, the frame dropped while unwinding counts all its
    /// bytes as written: see `Drop`.)
    #[inline]
    pub fn write_head(&mut self, at: usize, write: impl FnOnce(&mut [u8]) -> usize) -> usize {
        // The zeros known before (from here to the end).
        let zeros_from = (self.dirty as usize).clamp(at, self.data.len());
        let n = write(&mut self.data[at..]);
        let end = at.saturating_add(n).min(self.data.len());
        debug_assert!(
            self.data[end.max(zeros_from)..].iter().all(|&b| b == 0),
            "wrote past the {n} bytes it declared"
        );
        self.mark(end);
        n
    }

    /// Shortens the frame to `len` bytes (as `Vec::truncate`, which it
    /// stands in front of), which writes nothing: a frame of zeros cut to
    /// its datagram's length keeps its zeros known.
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        self.data.truncate(len);
    }

    #[inline]
    fn mark(&mut self, n: usize) {
        let n = u32::try_from(n).unwrap_or(ALL_DIRTY);
        self.dirty = self.dirty.max(n);
    }

    /// The wire frames it stands for: 1, or a super-frame's segments.
    #[inline]
    pub fn segs(&self) -> u64 {
        self.meta.gso.map_or(1, |g| u64::from(g.segs))
    }

    /// The bytes of the wire frames it stands for (headers repeated per
    /// segment for a super-frame).
    #[inline]
    pub fn wire_len(&self) -> u64 {
        match self.meta.gso {
            None => self.data.len() as u64,
            Some(g) => g.wire_len(self.data.len()),
        }
    }

    /// Whether it is a super-frame.
    #[inline]
    pub fn is_super(&self) -> bool {
        self.meta.gso.is_some()
    }

    /// Its bytes as a `Vec`, taken out of the pool's reach.
    pub fn into_vec(mut self) -> Vec<u8> {
        std::mem::take(&mut self.data)
    }
}

impl Deref for Frame {
    type Target = Vec<u8>;
    #[inline]
    fn deref(&self) -> &Vec<u8> {
        &self.data
    }
}

impl DerefMut for Frame {
    /// The bytes to change in any way: all of them count as written (see
    /// [`Frame::head_mut`] for writing only the first few).
    #[inline]
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        self.dirty = ALL_DIRTY;
        &mut self.data
    }
}

impl Clone for Frame {
    /// A copy in a buffer of the pool, with a new id and the same stamp,
    /// GSO and checksum state.
    fn clone(&self) -> Frame {
        let mut f = Frame::copy_from(&self.data);
        f.meta = Meta {
            id: f.meta.id,
            ..self.meta
        };
        f
    }
}

impl From<Vec<u8>> for Frame {
    /// Wraps bytes made elsewhere (the buffer joins the pool when the
    /// frame is dropped).
    fn from(data: Vec<u8>) -> Frame {
        Frame::of(data, ALL_DIRTY)
    }
}

impl Drop for Frame {
    fn drop(&mut self) {
        give_back(Buf {
            data: std::mem::take(&mut self.data),
            // A frame dropped while a panic unwinds may have been in a
            // writer's hands (`write_head`), which had not said how far it
            // wrote: none of its bytes pass for zeros.
            dirty: if std::thread::panicking() {
                ALL_DIRTY
            } else {
                self.dirty
            },
        });
    }
}

impl fmt::Debug for Frame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Frame")
            .field("len", &self.data.len())
            .field("meta", &self.meta)
            .field("data", &self.data)
            .finish()
    }
}

impl PartialEq for Frame {
    /// Frames are equal when their bytes and GSO are (ids differ by
    /// construction, stamps by when they were read).
    fn eq(&self, other: &Frame) -> bool {
        self.data == other.data && self.meta.gso == other.meta.gso
    }
}

impl Eq for Frame {}

impl PartialEq<Vec<u8>> for Frame {
    fn eq(&self, other: &Vec<u8>) -> bool {
        &self.data == other
    }
}

impl PartialEq<[u8]> for Frame {
    fn eq(&self, other: &[u8]) -> bool {
        self.data == other
    }
}

impl AsRef<[u8]> for Frame {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

/// What one thread's pool has done so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PoolStats {
    /// Buffers allocated because the pool (and the spill) had none.
    pub allocated: u64,
    /// Buffers taken from the pool or the spill.
    pub reused: u64,
    /// Buffers freed because the pool and the spill were full.
    pub freed: u64,
}

impl PoolStats {
    /// What happened since `earlier` (counters of the same thread).
    pub fn since(&self, earlier: &PoolStats) -> PoolStats {
        PoolStats {
            allocated: self.allocated.saturating_sub(earlier.allocated),
            reused: self.reused.saturating_sub(earlier.reused),
            freed: self.freed.saturating_sub(earlier.freed),
        }
    }

    /// Both together (two threads' counters).
    pub fn plus(&self, other: &PoolStats) -> PoolStats {
        PoolStats {
            allocated: self.allocated + other.allocated,
            reused: self.reused + other.reused,
            freed: self.freed + other.freed,
        }
    }
}

/// The calling thread's pool counters.
pub fn pool_stats() -> PoolStats {
    POOL.with(|p| p.borrow().stats)
}

#[derive(Default)]
struct Pool {
    classes: [Vec<Buf>; CLASSES.len()],
    stats: PoolStats,
}

thread_local! {
    static POOL: RefCell<Pool> = RefCell::new(Pool::default());
    static IDS: Cell<u64> = const { Cell::new(0) };
}
static SPILL: Mutex<[Vec<Buf>; CLASSES.len()]> = Mutex::new([Vec::new(), Vec::new(), Vec::new()]);
static THREADS: AtomicU64 = AtomicU64::new(1);

fn next_id() -> u64 {
    IDS.with(|c| {
        let mut v = c.get();
        if v == 0 {
            v = THREADS.fetch_add(1, Ordering::Relaxed) << 48;
        }
        v += 1;
        c.set(v);
        v
    })
}

/// The class whose buffers hold `cap` bytes, if one does.
fn class_for(cap: usize) -> Option<usize> {
    CLASSES.iter().position(|&(size, _, _)| cap <= size)
}

/// The class a buffer of capacity `cap` joins, if any.
fn class_of(cap: usize) -> Option<usize> {
    CLASSES
        .iter()
        .position(|&(size, _, _)| cap >= size && cap < 2 * size)
}

/// A buffer with room for `cap` bytes (holding its last frame's bytes, if
/// it had one): from this thread's pool, else from the spill (without
/// waiting for it), else newly allocated.
fn take_buffer(cap: usize) -> Buf {
    let new = |cap| Buf {
        data: Vec::with_capacity(cap),
        dirty: 0,
    };
    let Some(k) = class_for(cap) else {
        return new(cap);
    };
    let got = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        let p = &mut *p;
        let local = &mut p.classes[k];
        if local.is_empty() {
            if let Ok(mut s) = SPILL.try_lock() {
                let shared = &mut s[k];
                let n = shared.len().min(BATCH);
                local.extend(shared.drain(shared.len() - n..));
            }
        }
        match local.pop() {
            Some(b) => {
                p.stats.reused += 1;
                Some(b)
            }
            None => {
                p.stats.allocated += 1;
                None
            }
        }
    });
    match got {
        Ok(Some(b)) => b,
        _ => new(CLASSES[k].0),
    }
}

/// Keeps `b` for a later frame, unless no class takes it or the pools are
/// full.
fn give_back(b: Buf) {
    let Some(k) = class_of(b.data.capacity()) else {
        return;
    };
    if k == 0 {
        // The next frame made on this thread takes this buffer (the pool
        // is last in, first out) and, if a simulated host's datagram,
        // zeroes what its last frame wrote: all of it if that was not a
        // datagram written only at its head. A frame that reached its sink
        // had only its headers read, and with thousands of hosts the rest
        // has long left the caches. Loading it now, while the event that
        // dropped the frame finishes, spares the next event a wait per
        // line (2 000 simulated pairs ran 1.13x as fast when all was
        // zeroed; writing the IP header after the zeroing had been a fifth
        // of that run in `perf`, stalled behind the zeroing's stores).
        let written = b.data.len().min(b.dirty as usize);
        for i in (0..written).step_by(64) {
            crate::sched::prefetch(&b.data[i], 1);
        }
    }
    let _ = POOL.try_with(|p| {
        let mut p = p.borrow_mut();
        let p = &mut *p;
        let (_, keep, spill_max) = CLASSES[k];
        let local = &mut p.classes[k];
        local.push(b);
        if local.len() > keep {
            let mut spilled = false;
            if let Ok(mut s) = SPILL.try_lock() {
                let shared = &mut s[k];
                let n = BATCH.min(spill_max.saturating_sub(shared.len()));
                shared.extend(local.drain(local.len() - n..));
                spilled = n > 0;
            }
            if !spilled {
                local.pop();
                p.stats.freed += 1;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_frame_s_buffer_is_used_by_the_next_frame_on_the_thread() {
        std::thread::spawn(|| {
            let warm: Vec<Frame> = (0..10).map(|_| Frame::zeroed(1500)).collect();
            drop(warm);
            let before = pool_stats();
            for i in 0..10_000 {
                let f = Frame::copy_from(&[i as u8; 1514]);
                assert_eq!(f.len(), 1514);
                let big = Frame::zeroed(32_000);
                drop((f, big));
            }
            let after = pool_stats();
            // Only the first large buffer is new: every other frame reused.
            assert!(
                after.allocated - before.allocated <= 1,
                "{before:?} {after:?}"
            );
            assert!(after.reused - before.reused >= 19_999);
        })
        .join()
        .unwrap();
    }

    /// Whether `f` (taken from the pool) got the buffer at `ptr`.
    fn same_buffer(f: &Frame, ptr: *const u8) -> bool {
        std::ptr::eq(f.as_ptr(), ptr)
    }

    #[test]
    fn a_frame_of_zeros_is_all_zeros_whatever_its_buffer_s_last_frame_wrote() {
        std::thread::spawn(|| {
            // Written at its head only: the next frame zeroes that much.
            let mut f = Frame::zeroed(1000);
            let ptr = f.as_ptr();
            f.head_mut(40).fill(0xaa);
            f.truncate(990);
            let n = f.write_head(40, |b| {
                b[..20].fill(0xbb);
                20
            });
            assert_eq!(n, 20);
            drop(f);
            let g = Frame::zeroed(1200);
            assert!(same_buffer(&g, ptr), "the pool gave another buffer");
            assert!(g.iter().all(|&b| b == 0), "{g:?}");
            drop(g);
            // Written anywhere (`DerefMut`), shortened and made longer:
            // all of it counts.
            let mut f = Frame::zeroed(1000);
            f[900] = 1;
            f.truncate(950);
            f.extend_from_slice(&[2; 50]);
            drop(f);
            let g = Frame::zeroed(1500);
            assert!(same_buffer(&g, ptr));
            assert!(g.iter().all(|&b| b == 0), "{g:?}");
            drop(g);
            // A frame of copied bytes, then a shorter frame of zeros.
            drop(Frame::copy_from(&[3; 1400]));
            let g = Frame::zeroed(100);
            assert!(same_buffer(&g, ptr));
            assert!(g.iter().all(|&b| b == 0), "{g:?}");
        })
        .join()
        .unwrap();
    }

    /// What a dropped frame's buffer says its frame wrote (the next frame
    /// of zeros from it zeroes that much): only what was written at the
    /// head, through a truncation; everything once `DerefMut` was used.
    #[test]
    fn a_buffer_remembers_only_what_its_frame_wrote() {
        std::thread::spawn(|| {
            let dirty_of_next = || {
                let b = take_buffer(1000);
                let d = b.dirty;
                give_back(b);
                d
            };
            let mut f = Frame::zeroed(1000);
            f.head_mut(34);
            f.write_head(42, |_| 20);
            f.truncate(900);
            drop(f);
            assert_eq!(dirty_of_next(), 62, "head writes and a truncation");
            let mut f = Frame::zeroed(1000);
            f.push(0);
            drop(f);
            assert_eq!(dirty_of_next(), ALL_DIRTY, "through DerefMut");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_writer_that_panics_leaves_its_bytes_counted_as_written() {
        std::thread::spawn(|| {
            let ptr = std::cell::Cell::new(std::ptr::null());
            // As in the model: the frame is the writer's caller's, and goes
            // with the unwinding.
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut f = Frame::zeroed(500);
                ptr.set(f.as_ptr());
                f.write_head(14, |b| {
                    b[300] = 9;
                    panic!("a writer's bug");
                });
            }));
            assert!(caught.is_err());
            let ptr = ptr.get();
            let g = Frame::zeroed(500);
            assert!(same_buffer(&g, ptr));
            assert!(g.iter().all(|&b| b == 0), "{g:?}");
        })
        .join()
        .unwrap();
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "wrote past")]
    fn a_write_past_what_it_declares_is_caught_in_debug_builds() {
        let mut f = Frame::zeroed(100);
        f.write_head(14, |b| {
            b[50] = 1;
            10
        });
    }

    #[test]
    fn buffers_go_back_only_to_the_class_they_fit() {
        assert_eq!(class_for(1514), Some(0));
        assert_eq!(class_for(9018), Some(1), "a jumbo frame: 16 KiB, not 64");
        assert_eq!(class_for(65_000), Some(2));
        assert_eq!(class_for(200_000), None);
        assert_eq!(class_of(2048), Some(0));
        assert_eq!(class_of(3000), Some(0), "under twice the class: kept");
        assert_eq!(class_of(5000), None, "grown past its class: freed");
        assert_eq!(class_of(1000), None);
        std::thread::spawn(|| {
            let mut f = Frame::zeroed(1500);
            f.resize(60_000, 0);
            drop(f);
            let before = pool_stats();
            let g = Frame::zeroed(1500);
            assert!(g.capacity() < 4096, "not the grown buffer");
            assert_eq!(pool_stats().allocated, before.allocated + 1);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn ids_are_unique_across_threads_and_copies_get_new_ones() {
        let a = Frame::zeroed(60);
        let b = a.clone();
        assert_ne!(a.meta.id, b.meta.id);
        assert_eq!(a, b);
        let other = std::thread::spawn(|| Frame::zeroed(60).meta.id)
            .join()
            .unwrap();
        assert_ne!(other >> 48, a.meta.id >> 48);
    }

    #[test]
    fn a_super_frame_counts_its_wire_frames_and_their_bytes() {
        let mut f = Frame::zeroed(54 + 3000);
        f.meta.gso = Some(Gso {
            kind: GsoKind::TcpV4 { ecn: false },
            hdr_len: 54,
            size: 1448,
            segs: 3,
        });
        assert_eq!(f.segs(), 3);
        // 1448 + 1448 + 104 bytes of payload, each behind 54 bytes.
        assert_eq!(f.wire_len(), 3 * 54 + 3000);
        let g = f.meta.gso.unwrap();
        assert_eq!(g.seg_len(f.len(), 0), 54 + 1448);
        assert_eq!(g.seg_len(f.len(), 2), 54 + 104);
        assert_eq!(Frame::zeroed(60).segs(), 1);
    }
}
