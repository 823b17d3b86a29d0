#![no_main]
//! Fuzz target `import_bytes`: see `quiver_fuzzing::import_bytes`.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| quiver_fuzzing::import_bytes(data));
