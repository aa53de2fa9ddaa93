//! GSO super-frames from a real interface into a router (see
//! `netloop_fuzz` for the input format).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netloop_fuzz::{frames, Target};

fuzz_target!(|data: &[u8]| frames(Target::Super, data));
