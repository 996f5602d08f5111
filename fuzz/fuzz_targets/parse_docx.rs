//! `docpipe_parse::parse` with a docx hint (`report.docx`, `application/vnd.openxmlformats-officedocument.wordprocessingml.document`), then chunking of whatever
//! parses. The bytes decide the format (a mismatch is a clear error or a warning), so every
//! parser is reachable from here; the hint steers the seeds and the sniffing.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    docpipe_fuzz::parse_and_chunk(
        data,
        "report.docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    );
});
