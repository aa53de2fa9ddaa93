//! Standard output that never panics: `outln!` in place of `println!`.
//!
//! `println!` panics when stdout is gone (`netloop run FILE --json R | head
//! -1`: the reader leaves, the next line is a broken pipe), and a panic in
//! the middle of a run would lose its results. Here, once a write fails,
//! nothing more is printed and the run goes on to write its files and end
//! as it would have: silently for a broken pipe (what a reader that left
//! means), with one line on stderr for any other error.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once a write to stdout failed.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `args` (and a newline if `newline`) to stdout, unless a write
/// failed before.
pub(crate) fn write(args: std::fmt::Arguments<'_>, newline: bool) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut o = std::io::stdout().lock();
    let r = o
        .write_fmt(args)
        .and_then(|()| if newline { o.write_all(b"\n") } else { Ok(()) });
    if let Err(e) = r {
        if !CLOSED.swap(true, Ordering::Relaxed) && e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("netloop: cannot write to standard output ({e}); going on without it");
        }
    }
}

/// `println!` that never panics (see the module docs).
macro_rules! outln {
    () => {
        $crate::out::write(format_args!(""), true)
    };
    ($($t:tt)*) => {
        $crate::out::write(format_args!($($t)*), true)
    };
}
