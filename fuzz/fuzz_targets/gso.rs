//! GSO super-frames from a real host, cut into wire frames (see
//! `netloop_fuzz::gso` for the input format).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| netloop_fuzz::gso(data));
