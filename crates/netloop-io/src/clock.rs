//! The real-time clock: CLOCK_MONOTONIC in nanoseconds, and the mapping
//! between simulated time and it.
//!
//! Simulated time zero is pinned to a moment on CLOCK_MONOTONIC when a run
//! starts; from then on simulated time *t* happens at wall time `origin + t`.
//! CLOCK_MONOTONIC is the clock the kernel stamps packets with (after
//! conversion, see `packet`) and that `ppoll` timeouts run on; it never jumps
//! with NTP.

use netloop_core::SimTime;
use nix::time::{clock_gettime, ClockId};

/// Now on CLOCK_MONOTONIC, in nanoseconds.
#[inline]
pub fn mono_ns() -> u64 {
    let ts = clock_gettime(ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC is always available");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// Now on CLOCK_REALTIME, in nanoseconds since the epoch.
pub fn realtime_ns() -> u64 {
    let ts = clock_gettime(ClockId::CLOCK_REALTIME).expect("CLOCK_REALTIME is always available");
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// CLOCK_MONOTONIC minus CLOCK_REALTIME, in nanoseconds, measured now: the
/// realtime reading is taken between two monotonic ones and the shortest of a
/// few tries is kept, so the error is at most half that window (well under a
/// microsecond). Used to convert the kernel's CLOCK_REALTIME packet stamps.
pub fn mono_minus_realtime_ns() -> i128 {
    let mut best: Option<(u64, i128)> = None;
    for _ in 0..5 {
        let a = mono_ns();
        let r = realtime_ns();
        let b = mono_ns();
        let width = b - a;
        let off = (a as i128 + (width / 2) as i128) - r as i128;
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, off));
        }
    }
    best.expect("five tries").1
}

/// Asks the kernel to wake this thread from timed sleeps without the default
/// 50 µs of timer slack; returns the slack now in force (nanoseconds).
pub fn set_timer_slack_ns(ns: u64) -> u64 {
    // If prctl fails (it can't for this thread), the default slack stays and
    // shows in the lateness histogram.
    let _ = nix::sys::prctl::set_timerslack(ns);
    nix::sys::prctl::get_timerslack().map_or(50_000, |v| v as u64)
}

/// CPU time the hypervisor has taken from this machine's CPUs since boot
/// (the `steal` column of `/proc/stat`, summed over the CPUs), in
/// nanoseconds; `None` where the kernel does not say. On a virtual machine
/// a vCPU that the host deschedules stops for that long whatever its
/// priority: events then run late through no fault of the scheduler.
pub fn steal_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let ticks: u64 = stat
        .lines()
        .find(|l| l.starts_with("cpu "))?
        .split_whitespace()
        .nth(8)?
        .parse()
        .ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&h| h > 0)? as u64;
    Some(ticks.saturating_mul(1_000_000_000) / hz)
}

/// How long this virtual machine's idle vCPUs poll before they halt (ns),
/// where its idle driver is KVM's `haltpoll` (`guest_halt_poll_ns`, which
/// grows and shrinks as wake-ups come); `None` on other machines. At 0 a
/// vCPU halts as soon as it is idle, and a thread asleep on it waits for
/// the host to run the vCPU again when its timer fires: on this project's
/// VMs a sleep of 31 µs sometimes took milliseconds (docs/realtime.md).
pub fn guest_halt_poll_ns() -> Option<u64> {
    let driver = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver").ok()?;
    let value =
        std::fs::read_to_string("/sys/module/haltpoll/parameters/guest_halt_poll_ns").ok()?;
    halt_poll_of(&driver, &value)
}

/// [`guest_halt_poll_ns`] from the two files' contents.
fn halt_poll_of(driver: &str, value: &str) -> Option<u64> {
    if driver.trim() != "haltpoll" {
        return None;
    }
    value.trim().parse().ok()
}

/// The calling thread's scheduler statistics (`/proc/thread-self/schedstat`,
/// opened by the thread itself), read again and again without reopening.
pub struct SchedStat(std::fs::File);

impl SchedStat {
    /// Opens the calling thread's; `None` where the kernel has none
    /// (CONFIG_SCHED_INFO off).
    pub fn of_this_thread() -> Option<SchedStat> {
        std::fs::File::open("/proc/thread-self/schedstat")
            .ok()
            .map(SchedStat)
    }

    /// Time the thread has waited runnable on a run queue (the second
    /// field, ns): while other threads of this machine had its CPU. A vCPU
    /// stopped by the hypervisor is not counted here.
    pub fn run_delay_ns(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = self.0.read_at(&mut buf, 0).ok()?;
        std::str::from_utf8(&buf[..n])
            .ok()?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    }
}

/// CLOCK_MONOTONIC read off the processor's time-stamp counter, for the
/// one reading every event takes (how late it ran).
///
/// `clock_gettime` costs about 24 ns here even through the vDSO, and it
/// fences the counter it reads (`rdtsc_ordered`): the event's loads in
/// flight must complete before it, so the next event's cannot overlap
/// them. In `perf` of a real-time run of 4 000 simulated pairs it took 7 %
/// of the event thread, about 34 ns an event. An unfenced `rdtsc` costs
/// about 10 ns and waits for nothing.
///
/// The counter is used only where the kernel itself kept time by it when
/// the clock was made (its clocksource `tsc`: the counter runs at a
/// constant rate and agrees across CPUs); anywhere else every reading is
/// `clock_gettime`. A reading is an offset from an *anchor*, a pair of
/// counter and CLOCK_MONOTONIC read together ([`FastClock::anchor`]: the
/// event loops take one with the first event of each pass and every 4 096
/// events after it). The counter's rate is measured against
/// CLOCK_MONOTONIC over a 2 ms spin when the clock is made, and measured
/// again from there at anchors at least a millisecond apart, so that it
/// follows CLOCK_MONOTONIC's own rate (which NTP may slew). A reading's
/// error is the anchor's (the width of its pair, well under a microsecond)
/// plus the rate's error over the time since the anchor; a reading more
/// than [`MAX_FROM_ANCHOR_NS`] from its anchor is `clock_gettime`'s.
#[derive(Clone, Copy, Debug)]
pub struct FastClock {
    /// `None`: no usable counter, read CLOCK_MONOTONIC.
    tsc: Option<TscRate>,
}

#[derive(Clone, Copy, Debug)]
struct TscRate {
    /// The first anchor, from which the rate is measured.
    first: (u64, u64),
    /// The last anchor: (counter, CLOCK_MONOTONIC ns).
    last: (u64, u64),
    /// CLOCK_MONOTONIC when the rate was last measured.
    rated_at: u64,
    /// Nanoseconds per tick, in 32.32 fixed point.
    ns_per_tick: u64,
    /// Ticks in [`MAX_FROM_ANCHOR_NS`].
    max_ticks: u64,
    /// A pair of readings this many ticks apart or fewer was not
    /// interrupted (see [`tsc_pair`]).
    tight: u64,
}

/// How long the rate is first measured (a spin when the clock is made).
const TSC_CALIBRATION_NS: u64 = 2_000_000;

/// How often the rate is measured again, at most.
const RATE_EVERY_NS: u64 = 1_000_000;

/// The furthest from its anchor a reading is taken off the counter.
pub const MAX_FROM_ANCHOR_NS: u64 = 10_000_000;

impl FastClock {
    /// A clock for this machine: the counter where the kernel keeps time
    /// by it, CLOCK_MONOTONIC otherwise. Where the counter is used, this
    /// spins for about 2 ms to measure its rate.
    pub fn calibrated() -> FastClock {
        let source = std::fs::read_to_string(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
        )
        .unwrap_or_default();
        FastClock {
            tsc: if source.trim() == "tsc" {
                TscRate::measure()
            } else {
                None
            },
        }
    }

    /// Takes a new anchor (one `clock_gettime`, a few if the thread was
    /// interrupted), and measures the counter's rate again from the first
    /// if the last measure is a millisecond old.
    pub fn anchor(&mut self) {
        let Some(r) = &mut self.tsc else {
            return;
        };
        let Some((tsc, ns)) = tsc_pair(r.tight) else {
            return;
        };
        if ns.saturating_sub(r.rated_at) >= RATE_EVERY_NS {
            // A counter that went backwards (it must not, where the kernel
            // keeps time by it) keeps the rate as it was.
            if let Some(rate) = rate_of(r.first, (tsc, ns)) {
                r.set_rate(rate);
                r.rated_at = ns;
            }
        }
        r.last = (tsc, ns);
    }

    /// Now on CLOCK_MONOTONIC, in nanoseconds (never before the last
    /// anchor).
    #[inline]
    pub fn now_ns(&self) -> u64 {
        match (&self.tsc, crate::sys::tsc()) {
            (Some(r), Some(tsc)) => {
                let ticks = tsc.saturating_sub(r.last.0);
                if ticks > r.max_ticks {
                    return mono_ns();
                }
                r.last.1 + ((u128::from(ticks) * u128::from(r.ns_per_tick)) >> 32) as u64
            }
            _ => mono_ns(),
        }
    }
}

impl TscRate {
    /// Measures the counter's rate over about [`TSC_CALIBRATION_NS`],
    /// from the tightest of a few pairs at each end.
    fn measure() -> Option<TscRate> {
        let tightest = || {
            (0..8)
                .filter_map(|_| tsc_pair_width())
                .min_by_key(|&(w, _)| w)
        };
        let (w0, first) = tightest()?;
        while mono_ns().saturating_sub(first.1) < TSC_CALIBRATION_NS {
            std::hint::spin_loop();
        }
        let (w1, last) = tightest()?;
        let mut r = TscRate {
            first,
            last,
            rated_at: last.1,
            ns_per_tick: 0,
            max_ticks: 0,
            // Twice the tightest seen: what an uninterrupted pair takes.
            tight: 2 * w0.min(w1).max(1),
        };
        r.set_rate(rate_of(first, last)?);
        Some(r)
    }

    fn set_rate(&mut self, ns_per_tick: u64) {
        self.ns_per_tick = ns_per_tick;
        self.max_ticks =
            u64::try_from((u128::from(MAX_FROM_ANCHOR_NS) << 32) / u128::from(ns_per_tick.max(1)))
                .unwrap_or(u64::MAX);
    }
}

/// One pair of readings, the counter on both sides of CLOCK_MONOTONIC:
/// (how many ticks apart the counter's two were, (their middle, the
/// clock)).
fn tsc_pair_width() -> Option<(u64, (u64, u64))> {
    let a = crate::sys::tsc()?;
    let ns = mono_ns();
    let b = crate::sys::tsc()?;
    let width = b.saturating_sub(a);
    Some((width, (a + width / 2, ns)))
}

/// The counter and CLOCK_MONOTONIC read together: the first pair whose
/// counter readings are at most `tight` ticks apart (a wider one was
/// interrupted), or the tightest of 8.
fn tsc_pair(tight: u64) -> Option<(u64, u64)> {
    let mut best: Option<(u64, (u64, u64))> = None;
    for _ in 0..8 {
        let (width, pair) = tsc_pair_width()?;
        if width <= tight {
            return Some(pair);
        }
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, pair));
        }
    }
    best.map(|(_, pair)| pair)
}

/// Nanoseconds per tick (32.32 fixed point) from two (counter, ns) pairs;
/// `None` when either has not moved forward.
fn rate_of(a: (u64, u64), b: (u64, u64)) -> Option<u64> {
    let ticks = b.0.checked_sub(a.0).filter(|&t| t > 0)?;
    let ns = b.1.checked_sub(a.1).filter(|&n| n > 0)?;
    u64::try_from((u128::from(ns) << 32) / u128::from(ticks)).ok()
}

/// When a real-time run's simulated time starts on the wall clock.
#[derive(Clone, Copy, Debug)]
pub enum Start {
    /// The moment the scheduler is ready to run events: the queue's current
    /// time happens then. Making the scheduler's buffers, histograms and
    /// queues takes about a millisecond and a half (page faults on this
    /// machine); a clock started before that begins the run with every
    /// early event late by as much.
    WhenReady,
    /// At a clock the caller started, however long setting up takes (a
    /// test that wants a backlog at the start).
    At(RtClock),
}

/// The mapping between simulated time and CLOCK_MONOTONIC for one run.
#[derive(Clone, Copy, Debug)]
pub struct RtClock {
    /// CLOCK_MONOTONIC (ns) at simulated time zero.
    pub origin: u64,
}

impl RtClock {
    /// Simulated time zero is now.
    pub fn start_now() -> Self {
        RtClock { origin: mono_ns() }
    }

    /// Simulated time `t` is now.
    pub fn with_now_at(t: SimTime) -> Self {
        RtClock {
            origin: mono_ns().saturating_sub(t.as_nanos()),
        }
    }

    /// The simulated time it is now (zero before the origin).
    #[inline]
    pub fn now(&self) -> SimTime {
        SimTime::from_nanos(mono_ns().saturating_sub(self.origin))
    }

    /// The simulated time of a CLOCK_MONOTONIC instant.
    #[inline]
    pub fn sim_of(&self, mono: u64) -> SimTime {
        SimTime::from_nanos(mono.saturating_sub(self.origin))
    }

    /// The CLOCK_MONOTONIC instant of a simulated time.
    #[inline]
    pub fn mono_of(&self, t: SimTime) -> u64 {
        self.origin.saturating_add(t.as_nanos())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn halt_polling_is_read_only_where_the_idle_driver_is_haltpoll() {
        assert_eq!(halt_poll_of("haltpoll\n", "0\n"), Some(0));
        assert_eq!(halt_poll_of("haltpoll\n", "200000\n"), Some(200_000));
        assert_eq!(halt_poll_of("intel_idle\n", "0\n"), None);
        assert_eq!(halt_poll_of("haltpoll\n", "soon\n"), None);
    }

    use super::*;

    /// Readings agree with CLOCK_MONOTONIC to within a microsecond or two
    /// plus a thousandth of the time since the anchor, between anchors and
    /// across sleeps: a rate that is wrong or inverted (ticks per
    /// nanosecond) is off by far more. (Where the kernel does not keep time
    /// by the counter, every reading is CLOCK_MONOTONIC's and this holds
    /// trivially.)
    #[test]
    fn the_fast_clock_keeps_to_the_monotonic_clock() {
        let mut c = FastClock::calibrated();
        let mut anchored = 0;
        for i in 0..30 {
            if i % 10 == 0 {
                c.anchor();
                anchored = mono_ns();
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
            // The fast reading between two monotonic ones: off by at most
            // the anchor's and the rate's error outside them.
            let a = mono_ns();
            let f = c.now_ns();
            let b = mono_ns();
            let off = if f < a { a - f } else { f.saturating_sub(b) };
            let allowed = 2_000 + (b - anchored) / 1_000;
            assert!(
                off <= allowed,
                "tsc {}: off by {off} ns, {} ns after the anchor",
                c.tsc.is_some(),
                b - anchored
            );
        }
    }

    #[test]
    fn a_rate_is_the_ns_per_tick_of_two_readings() {
        // 3 ticks a nanosecond: a third of a nanosecond per tick.
        let r = rate_of((100, 1_000), (3_100, 2_000)).expect("moved");
        assert_eq!(r, (1u64 << 32) / 3);
        assert_eq!(rate_of((100, 1_000), (100, 2_000)), None, "no ticks");
        assert_eq!(rate_of((100, 1_000), (200, 1_000)), None, "no time");
        assert_eq!(rate_of((200, 1_000), (100, 2_000)), None, "backwards");
    }

    #[test]
    fn sim_time_follows_the_monotonic_clock() {
        let c = RtClock::start_now();
        let a = c.now();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let b = c.now();
        let d = b.as_nanos() - a.as_nanos();
        assert!(d >= 5_000_000, "slept 5 ms but sim time moved {d} ns");
        assert_eq!(
            c.sim_of(c.mono_of(SimTime::from_nanos(123))),
            SimTime::from_nanos(123)
        );
    }

    #[test]
    fn steal_time_is_read_and_never_runs_backwards() {
        // Every Linux since 2.6.11 has the column; a VM's host fills it.
        let a = steal_ns().expect("/proc/stat has a steal column");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = steal_ns().unwrap();
        assert!(b >= a, "steal went from {a} to {b} ns");
    }

    #[test]
    fn a_clock_can_start_with_simulated_time_already_running() {
        let t = SimTime::from_nanos(250_000_000);
        let before = mono_ns();
        let c = RtClock::with_now_at(t);
        assert!(c.origin + t.as_nanos() >= before);
        assert!(c.now() >= t);
        assert!(c.now().as_nanos() < t.as_nanos() + 100_000_000);
    }

    #[test]
    fn realtime_offset_is_stable() {
        let a = mono_minus_realtime_ns();
        let b = mono_minus_realtime_ns();
        // Two measurements a moment apart agree to well within a millisecond
        // (NTP slews far slower than that).
        assert!((a - b).abs() < 1_000_000, "{a} vs {b}");
    }

    #[test]
    fn timer_slack_can_be_lowered() {
        let got = std::thread::spawn(|| set_timer_slack_ns(1)).join().unwrap();
        assert_eq!(got, 1);
    }
}
