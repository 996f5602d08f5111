//! libpdfium, bound once per process without the host's fonts, and its errors told in words.

use std::path::PathBuf;
use std::sync::OnceLock;

use pdfium_render::prelude::*;

use super::fonts;

pub const PDFIUM_ENV: &str = "DOCPIPE_PDFIUM_LIB";
pub const PDFIUM_DEFAULT_PATH: &str = "/opt/lib/libpdfium.so";

/// Where libpdfium is looked for: `$DOCPIPE_PDFIUM_LIB`, else the Lambda layer path.
pub fn pdfium_library_path() -> PathBuf {
    std::env::var_os(PDFIUM_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(PDFIUM_DEFAULT_PATH))
}

// pdfium can be bound once per process (a second bind fails), so the outcome, success or the
// reason for failure, is kept for the life of the process.
static PDFIUM: OnceLock<Result<Pdfium, String>> = OnceLock::new();

/// The process's pdfium, as docpipe runs it: bound once, with no font of the host (see
/// [`fonts`]). Anything that measures pdfium against docpipe must use this one, or it measures a
/// pdfium that loads the host's fonts.
pub fn process_pdfium() -> Result<&'static Pdfium, &'static str> {
    pdfium()
}

pub(super) fn pdfium() -> Result<&'static Pdfium, &'static str> {
    PDFIUM
        .get_or_init(|| {
            let path = pdfium_library_path();
            let pdfium = Pdfium::bind_to_library(&path)
                .map(Pdfium::new)
                .map_err(|e| format!("cannot load {}: {}", path.display(), pdfium_reason(&e)))?;
            fonts::hide_host_fonts(&pdfium);
            Ok(pdfium)
        })
        .as_ref()
        .map_err(String::as_str)
}

/// A pdfium error as words. pdfium-render's `Display` is its `Debug` (a multi-line
/// `PdfiumLibraryInternalError(\n    Unknown,\n)`), which must not reach a run's error message.
pub(crate) fn pdfium_reason(e: &PdfiumError) -> String {
    match e {
        PdfiumError::PdfiumLibraryInternalError(internal) => match internal {
            PdfiumInternalError::FileError => "pdfium could not read the file".into(),
            PdfiumInternalError::FormatError => {
                "pdfium could not make sense of its structure: not a well-formed PDF".into()
            }
            PdfiumInternalError::PasswordError => "it needs a password".into(),
            PdfiumInternalError::SecurityError => {
                "pdfium does not support its security handler".into()
            }
            PdfiumInternalError::PageError => "pdfium could not load the page".into(),
            PdfiumInternalError::Unknown => "pdfium reported a failure without a reason".into(),
        },
        PdfiumError::LoadLibraryError(e) => format!("the library could not be loaded: {e}"),
        PdfiumError::IoError(e) => format!("an I/O error: {e}"),
        // Every other variant is a plain name ("PageIndexOutOfBounds"): its words.
        other => {
            let name = format!("{other:?}");
            let name = name.split(['(', ' ', '{']).next().unwrap_or_default();
            let mut words = String::from("pdfium: ");
            for (i, c) in name.chars().enumerate() {
                if c.is_uppercase() && i > 0 {
                    words.push(' ');
                }
                words.extend(c.to_lowercase());
            }
            words
        }
    }
}

/// Binds pdfium now (if not yet) and says whether it is usable. Lets a process fail fast at cold
/// start, and lets tests insist on pdfium rather than silently testing the fallback.
pub fn pdfium_status() -> Result<(), String> {
    pdfium().map(|_| ()).map_err(str::to_string)
}
