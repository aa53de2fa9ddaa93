//! The `netloop` binary: the command line of [`netloop_cli`].

use std::process::ExitCode;

fn main() -> ExitCode {
    netloop_cli::main_with(std::env::args_os())
}
