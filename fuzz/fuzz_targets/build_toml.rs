//! cargo-fuzz entry for [`kforge_fuzz::build_toml`] (the checks live in fuzz/src/lib.rs, shared with the replay test).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| kforge_fuzz::build_toml(data));
