//! Topology files: bytes into the loader, and what loads into the builder and
//! a short run.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| netloop_fuzz::topology(data));
