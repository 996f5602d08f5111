//! pdfium with no fonts of the host. Left to itself, pdfium enumerates the system's fonts and
//! loads one for every font a PDF names without embedding it (and for CJK CID fonts): on a host
//! with `fonts-noto-cjk`, text extraction of such files took twice as long and 26 MB more than
//! on a Lambda host, which has no fonts at all. Extraction needs no glyph shapes, only the
//! character codes and their Unicode mapping, so docpipe gives pdfium an empty font directory
//! everywhere and every host behaves as Lambda does. (Rendering for OCR draws page images; a
//! page rendered for its glyphs alone, a garbage text layer in a font not embedded, gets
//! pdfium's built-in fallback font, as in Lambda.)

use std::os::raw::{c_char, c_int, c_uchar, c_uint, c_ulong, c_void};

use pdfium_render::prelude::*;

unsafe extern "C" fn enum_fonts(_: *mut FPDF_SYSFONTINFO, _: *mut c_void) {}

unsafe extern "C" fn map_font(
    _: *mut FPDF_SYSFONTINFO,
    _weight: c_int,
    _italic: c_int,
    _charset: c_int,
    _pitch_family: c_int,
    _face: *const c_char,
    _exact: *mut c_int,
) -> *mut c_void {
    std::ptr::null_mut()
}

unsafe extern "C" fn get_font(_: *mut FPDF_SYSFONTINFO, _face: *const c_char) -> *mut c_void {
    std::ptr::null_mut()
}

unsafe extern "C" fn get_font_data(
    _: *mut FPDF_SYSFONTINFO,
    _font: *mut c_void,
    _table: c_uint,
    _buffer: *mut c_uchar,
    _size: c_ulong,
) -> c_ulong {
    0
}

unsafe extern "C" fn get_face_name(
    _: *mut FPDF_SYSFONTINFO,
    _font: *mut c_void,
    _buffer: *mut c_char,
    _size: c_ulong,
) -> c_ulong {
    0
}

unsafe extern "C" fn get_charset(_: *mut FPDF_SYSFONTINFO, _font: *mut c_void) -> c_int {
    0
}

unsafe extern "C" fn delete_font(_: *mut FPDF_SYSFONTINFO, _font: *mut c_void) {}

/// Installs the empty font directory. Called once, right after pdfium is bound and before any
/// document is opened; pdfium keeps the pointer for the life of the process.
pub(crate) fn hide_host_fonts(pdfium: &Pdfium) {
    let info: &'static mut FPDF_SYSFONTINFO = Box::leak(Box::new(FPDF_SYSFONTINFO {
        version: 1,
        Release: None,
        EnumFonts: Some(enum_fonts),
        MapFont: Some(map_font),
        GetFont: Some(get_font),
        GetFontData: Some(get_font_data),
        GetFaceName: Some(get_face_name),
        GetFontCharset: Some(get_charset),
        DeleteFont: Some(delete_font),
    }));
    // SAFETY: the structure is leaked, so it outlives pdfium's use of it, and every callback
    // ignores its arguments.
    unsafe { pdfium.bindings().FPDF_SetSystemFontInfo(info) };
}
