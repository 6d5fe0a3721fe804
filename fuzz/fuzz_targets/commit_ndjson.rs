//! cargo-fuzz entry for [`kforge_fuzz::commit_ndjson`] (the checks live in fuzz/src/lib.rs, shared with the replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kforge_fuzz::commit_ndjson(data));
