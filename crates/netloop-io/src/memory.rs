//! Memory a real-time run has touched before its clock starts.
//!
//! The first write to a page of fresh memory is a page fault: a few
//! microseconds on this kind of virtual machine, taken in the thread that
//! writes. A model grows as a run starts (each flow's statistics on its
//! first packet, queues and maps on first use), and those faults came all at
//! once: in a run of 150 simulated pairs, some 4 400 faults as the first
//! packets arrived made events up to 5 ms late at 0.155 s, with the machine
//! otherwise idle. This is the remedy real-time Linux programs use (the
//! RT wiki's "HOWTO build a simple RT application"): before the run, the
//! allocator is told to keep what is freed instead of returning it to the
//! kernel, and a reserve is allocated, written page by page, and freed, so
//! that what the model allocates later comes from pages already there.
//!
//! Only the allocator's arena of the thread that reserves is filled: the
//! event thread's, which is where the model allocates. Memory is not locked
//! (`mlockall` would also fault in every new thread's whole stack at once).
//!
//! A fork after the reserve would undo it: the kernel makes every private
//! page of the parent copy-on-write, and the parent's first write to each
//! is a page fault again, even once the child has gone. So netloop makes
//! none while a run sets up or goes on: programs start through
//! `sys::spawn_shared_vm` and each namespace host's PID-namespace init
//! shares netloop's memory (`sys::spawn_pid_namespace_init`). When the
//! inits were forks, a run of 300 simulated pairs with two namespace hosts
//! took 979 faults in the run even after the reserve was written again
//! behind them (the model's own state, built before the forks: about 3
//! pages per simulated pair); now it takes 2 or 3.

/// Bytes per block of the reserve: below the heap threshold set here, so
/// each comes from the heap (a larger block would be a mapping of its own,
/// given back on free).
const BLOCK: usize = 1 << 20;

/// Largest allocation served from the heap once a reserve is made (glibc's
/// own ceiling for its dynamic threshold).
const HEAP_UP_TO: usize = 32 << 20;

/// What [`reserve`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reserved {
    /// Bytes written and given back to the allocator.
    pub bytes: usize,
    /// Whether the allocator was told to keep them (false: not glibc, and
    /// the reserve may have gone back to the kernel).
    pub kept: bool,
}

thread_local! {
    /// Bytes this thread has reserved so far (kept in its arena: the
    /// allocator no longer trims).
    static RESERVED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Makes `bytes` (rounded up to whole mebibytes) of the calling thread's
/// heap resident and free for its next allocations. What this thread
/// reserved before counts: a second call for the same size writes nothing,
/// so a caller may reserve early (before it opens real interfaces, whose
/// frames would wait meanwhile) and [`crate::rt::run_realtime`] again.
pub fn reserve(bytes: usize) -> Reserved {
    let kept = crate::sys::keep_freed_memory(HEAP_UP_TO);
    let have = RESERVED.with(|r| r.get()) / BLOCK;
    let want = bytes.div_ceil(BLOCK);
    if want > have {
        let mut held: Vec<Vec<u8>> = Vec::with_capacity(want);
        for k in 0..want {
            let mut b = Vec::<u8>::with_capacity(BLOCK);
            // The first blocks come from what was reserved before (the
            // free top of the heap, resident): only the new ones are
            // written. Written, not zeroed by calloc: fresh memory from the
            // kernel is known to be zero, and calloc would skip the write
            // that faults the page in.
            if k >= have {
                b.resize(BLOCK, 0xa5);
            }
            held.push(b);
        }
        // Freed newest first, so each block joins the top of the heap.
        while let Some(b) = held.pop() {
            drop(std::hint::black_box(b));
        }
        RESERVED.with(|r| r.set(want * BLOCK));
    }
    Reserved {
        bytes: have.max(want) * BLOCK,
        kept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Minor page faults of this process so far.
    fn minor_faults() -> i64 {
        nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD)
            .expect("getrusage")
            .minor_page_faults()
    }

    /// Without a reserve, writing 16 MiB of new blocks faults in about
    /// 4 096 pages; after one, next to none. One test, in this order: a
    /// reserve (and the allocator settings it makes) stays with the
    /// process, and an arena with it may pass to a later thread.
    #[test]
    fn a_reserve_makes_memory_resident() {
        let _serial = crate::sys::FORKS.lock().unwrap_or_else(|e| e.into_inner());
        let write_16_mib = || {
            let before = minor_faults();
            let mut v = Vec::new();
            for _ in 0..64 {
                let mut b = Vec::<u8>::with_capacity(256 << 10);
                b.resize(256 << 10, 1);
                v.push(b);
            }
            minor_faults() - before
        };
        // Threads of their own, so that the arena is not the harness's.
        let without = std::thread::spawn(write_16_mib).join().unwrap();
        assert!(
            without > 2_000,
            "{without} page faults for 16 MiB of fresh memory"
        );
        let reserved = std::thread::spawn(move || {
            let r = reserve(32 << 20);
            assert_eq!(r.bytes, 32 << 20);
            assert!(r.kept, "glibc keeps freed memory");
            write_16_mib()
        })
        .join()
        .unwrap();
        assert!(
            reserved < 400,
            "{reserved} page faults for 16 MiB after the reserve"
        );
    }
}
