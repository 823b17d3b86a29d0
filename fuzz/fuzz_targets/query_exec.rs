#![no_main]
//! Fuzz target `query_exec`: see `quiver_fuzzing::query_exec`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| quiver_fuzzing::query_exec(data));
