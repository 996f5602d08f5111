//! The PDF path with pdfium out of the picture: lopdf is the fallback for every file pdfium
//! cannot open, so it sees the most hostile bytes. pdfium is bound from `DOCPIPE_PDFIUM_LIB`
//! once per process; pointing it at nothing forces the fallback for every input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(
    init: {
        std::env::set_var(docpipe_parse::PDFIUM_ENV, "/nonexistent/libpdfium.so");
        assert!(docpipe_parse::pdfium_status().is_err());
    },
    |data: &[u8]| {
        docpipe_fuzz::parse_and_chunk(data, "report.pdf", "application/pdf");
    }
);
