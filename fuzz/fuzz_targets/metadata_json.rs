//! cargo-fuzz entry for [`kforge_fuzz::metadata_json`] (the checks live in fuzz/src/lib.rs, shared with the replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kforge_fuzz::metadata_json(data));
