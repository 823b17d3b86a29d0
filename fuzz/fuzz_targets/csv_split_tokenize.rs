#![no_main]
//! Fuzz target `csv_split_tokenize`: see `quiver_fuzzing::csv_split_tokenize`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| quiver_fuzzing::csv_split_tokenize(data));
