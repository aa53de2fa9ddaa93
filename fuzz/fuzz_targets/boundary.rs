//! Frames as an AF_PACKET ring hands them over, made back into what was on
//! the wire (see `netloop_fuzz::boundary` for the input format).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| netloop_fuzz::boundary(data));
