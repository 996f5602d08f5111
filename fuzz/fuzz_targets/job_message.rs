//! `JobMessage::decode` on arbitrary text: the body of every parse and index message.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(body) = std::str::from_utf8(data) {
        docpipe_fuzz::check_job_message(body);
    }
});
