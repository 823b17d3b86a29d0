#![no_main]
//! Fuzz target `bolt_messages`: see `quiver_fuzzing::bolt_messages`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| quiver_fuzzing::bolt_messages(data));
