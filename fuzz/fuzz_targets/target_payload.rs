#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| wal_fuzz::target_payload(data));
