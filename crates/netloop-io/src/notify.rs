//! Waking a thread that sleeps in `ppoll` when another thread has put work
//! in a lock-free queue for it, without a system call per item.
//!
//! The sleeper announces that it is about to sleep, looks at its queue once
//! more, and sleeps only if the queue is still empty; the producer, after
//! pushing, writes the eventfd only if the sleeper announced a sleep. Both
//! sides put a sequentially consistent fence between their write and their
//! read (the store-load pattern of Dekker's algorithm), so either the
//! sleeper sees the item or the producer sees the announcement: a wake-up is
//! never lost, and a busy consumer costs the producer one atomic swap.

use nix::sys::eventfd::{EfdFlags, EventFd};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};

/// One sleeper's doorbell.
#[derive(Debug)]
pub struct Notifier {
    fd: EventFd,
    sleeping: AtomicBool,
}

impl Notifier {
    /// A new doorbell (a non-blocking eventfd).
    pub fn new() -> io::Result<Notifier> {
        let fd = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map_err(io::Error::from)?;
        Ok(Notifier {
            fd,
            sleeping: AtomicBool::new(false),
        })
    }

    /// The descriptor the sleeper waits on (readable once rung).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The sleeper: about to sleep. Look at the queue once more after this,
    /// and sleep only if it is still empty; call [`Notifier::woke`] after.
    pub fn prepare_sleep(&self) {
        self.sleeping.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }

    /// The sleeper: awake again (or did not sleep after all). Clears the
    /// doorbell, so that the next sleep is not cut short by an old ring.
    pub fn woke(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
        // EAGAIN: it was not rung.
        let _ = self.fd.read();
    }

    /// Whether the sleeper has announced a sleep (and not woken since).
    pub fn is_sleeping(&self) -> bool {
        self.sleeping.load(Ordering::Relaxed)
    }

    /// The producer, after pushing: wakes the sleeper if it is asleep or
    /// about to be.
    pub fn notify(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.swap(false, Ordering::Relaxed) {
            self.ring();
        }
    }

    /// Wakes the sleeper whatever it announced (to tell it to stop).
    pub fn ring(&self) {
        // Only fails when the counter would overflow, i.e. it is rung.
        let _ = self.fd.write(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    fn readable(n: &Notifier, ms: u16) -> bool {
        let mut fds = [PollFd::new(n.fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::from(ms)).unwrap() == 1
    }

    #[test]
    fn only_a_sleeper_is_rung() {
        let n = Notifier::new().unwrap();
        n.notify();
        assert!(!readable(&n, 0), "rung although nobody slept");
        n.prepare_sleep();
        n.notify();
        assert!(readable(&n, 0));
        n.woke();
        assert!(!readable(&n, 0), "woke() did not clear the ring");
        n.ring();
        assert!(readable(&n, 0));
    }

    /// A producer and a sleeper trade a counter 100 000 times; the sleeper
    /// sleeps whenever it sees nothing new. A lost wake-up would leave it
    /// asleep for the whole second of its timeout and fail the test.
    #[test]
    fn no_wake_up_is_lost() {
        let n = Arc::new(Notifier::new().unwrap());
        let sent = Arc::new(AtomicU64::new(0));
        const N: u64 = 100_000;
        let (n2, sent2) = (n.clone(), sent.clone());
        let producer = std::thread::spawn(move || {
            for i in 1..=N {
                sent2.store(i, Ordering::Release);
                n2.notify();
                if i % 64 == 0 {
                    std::thread::yield_now();
                }
            }
        });
        let mut seen = 0;
        let start = std::time::Instant::now();
        while seen < N {
            let now = sent.load(Ordering::Acquire);
            if now > seen {
                seen = now;
                continue;
            }
            n.prepare_sleep();
            if sent.load(Ordering::Acquire) == seen {
                assert!(readable(&n, 1000), "a wake-up was lost at {seen}");
            }
            n.woke();
        }
        producer.join().unwrap();
        assert!(start.elapsed() < std::time::Duration::from_secs(20));
    }
}
