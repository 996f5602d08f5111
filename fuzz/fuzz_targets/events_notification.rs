//! `events::decode_notification_str` on arbitrary text: S3, SQS-wrapped, EventBridge and MinIO
//! shapes (seeded from real events).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(body) = std::str::from_utf8(data) {
        docpipe_fuzz::check_notification_str(body);
    }
});
