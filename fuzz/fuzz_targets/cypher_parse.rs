#![no_main]
//! Fuzz target `cypher_parse`: see `quiver_fuzzing::cypher_parse`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| quiver_fuzzing::cypher_parse(data));
