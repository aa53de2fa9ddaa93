//! The `netloop` binary: the command line of [`netloop_cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    // Runs and benchmarks start again with their heap in huge pages, before
    // anything is created. Here and not in `main_with`, which Python's
    // `netloop` command runs inside the interpreter (whose program is not
    // this one).
    if netloop_cli::wants_huge_pages(std::env::args_os()) {
        netloop_io::memory::restart_with_huge_pages();
    }
    netloop_cli::main_with(std::env::args_os())
}
