//! Format detection from the bytes. The file name and content type are only used to word a
//! mismatch and to prefer Markdown for text that says it is Markdown.

use std::io::{Cursor, Read};

use crate::error::ParseError;
use crate::model::{Format, Hint, Limits};

/// The format a file name's extension names, in the same vocabulary as `Format::as_str`.
fn format_of_extension(name: &str) -> Option<&'static str> {
    let ext = name.rsplit_once('.').map(|(_, e)| e)?;
    match ext.to_ascii_lowercase().as_str() {
        "pdf" => Some("pdf"),
        "docx" => Some("docx"),
        "html" | "htm" | "xhtml" => Some("html"),
        "md" | "markdown" => Some("markdown"),
        "txt" | "text" => Some("text"),
        _ => None,
    }
}

/// A file name without the extension of a format docpipe reads ("民法典.pdf" → "民法典"); any
/// other name as it is ("条例 v1.2" stays).
pub fn without_format_extension(name: &str) -> &str {
    match (format_of_extension(name), name.rsplit_once('.')) {
        (Some(_), Some((stem, _))) if !stem.is_empty() => stem,
        _ => name,
    }
}

/// What the hint claims, in the same vocabulary as `Format::as_str`.
pub fn claimed(hint: &Hint) -> Option<&'static str> {
    let from_ext = format_of_extension(&hint.file_name);
    let ct = hint.content_type.to_ascii_lowercase();
    let from_ct = if ct.contains("pdf") {
        Some("pdf")
    } else if ct.contains("wordprocessingml") {
        Some("docx")
    } else if ct.contains("html") {
        Some("html")
    } else if ct.contains("markdown") {
        Some("markdown")
    } else if ct.starts_with("text/plain") {
        Some("text")
    } else {
        None
    };
    from_ext.or(from_ct)
}

/// Identifies the container from its bytes. Text formats (HTML, Markdown, plain text) are
/// told apart later, after decoding, so this returns `Text` for all of them.
pub(crate) fn sniff(bytes: &[u8], hint: &Hint, limits: &Limits) -> Result<Format, ParseError> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ParseError::Empty);
    }
    let head = &bytes[..bytes.len().min(1024)];
    if memfind(head, b"%PDF-").is_some() {
        return Ok(Format::Pdf);
    }
    let found = if bytes.starts_with(b"PK\x03\x04") {
        match zip_kind(bytes, limits) {
            ZipKind::Docx => return Ok(Format::Docx),
            ZipKind::Other(what) => what,
        }
    } else if let Some(what) = binary_signature(bytes) {
        what.to_string()
    } else if looks_binary(bytes) {
        "binary data with no known signature".to_string()
    } else {
        return Ok(Format::Text);
    };
    Err(match claimed(hint) {
        Some(c) => ParseError::Mismatch {
            claimed: c.to_string(),
            found,
        },
        None => ParseError::Unsupported { found },
    })
}

enum ZipKind {
    Docx,
    Other(String),
}

fn zip_kind(bytes: &[u8], limits: &Limits) -> ZipKind {
    let Ok(mut archive) = zip::ZipArchive::new(Cursor::new(bytes)) else {
        return ZipKind::Other("a damaged zip archive".into());
    };
    let mut content_types = String::new();
    if let Ok(entry) = archive.by_name("[Content_Types].xml") {
        // Bounded read: a bomb hidden in this small entry must not be inflated whole.
        let cap = limits.max_decompressed_bytes.min(4 * 1024 * 1024);
        let _ = entry.take(cap).read_to_string(&mut content_types);
    }
    if content_types.contains("wordprocessingml.document.main")
        || content_types.contains("wordprocessingml.template.main")
    {
        return ZipKind::Docx;
    }
    let what = if content_types.contains("spreadsheetml") {
        "an Excel workbook (xlsx)"
    } else if content_types.contains("presentationml") {
        "a PowerPoint presentation (pptx)"
    } else if archive.by_name("mimetype").is_ok()
        && archive.by_name("META-INF/container.xml").is_ok()
    {
        "an EPUB or OpenDocument archive"
    } else if archive.by_name("mimetype").is_ok() {
        "an OpenDocument archive"
    } else if !content_types.is_empty() {
        "an Office Open XML package that is not a Word document"
    } else {
        "a zip archive"
    };
    ZipKind::Other(what.to_string())
}

fn binary_signature(b: &[u8]) -> Option<&'static str> {
    let sigs: &[(&[u8], &str)] = &[
        (b"\x89PNG\r\n\x1a\n", "a PNG image"),
        (b"\xFF\xD8\xFF", "a JPEG image"),
        (b"GIF87a", "a GIF image"),
        (b"GIF89a", "a GIF image"),
        (b"II*\0", "a TIFF image"),
        (b"MM\0*", "a TIFF image"),
        (b"BM", "a BMP image"),
        (
            b"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1",
            "a legacy Office document (doc/xls/ppt)",
        ),
        (b"{\\rtf", "an RTF document"),
        (b"\x1F\x8B", "gzip data"),
        (b"7z\xBC\xAF\x27\x1C", "a 7-Zip archive"),
        (b"Rar!", "a RAR archive"),
        (b"\x7FELF", "an executable"),
        (b"AT&TFORM", "a DjVu document"),
    ];
    if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        return Some("a WebP image");
    }
    if b.len() >= 12 && &b[4..8] == b"ftyp" {
        return Some("an MP4/HEIC media file");
    }
    sigs.iter()
        .find(|(sig, _)| b.starts_with(sig))
        .map(|(_, what)| *what)
}

/// NUL bytes or many C0 controls in the first 8 KiB mean binary, unless a UTF-16 BOM explains
/// the NULs.
fn looks_binary(b: &[u8]) -> bool {
    if b.starts_with(b"\xFF\xFE") || b.starts_with(b"\xFE\xFF") {
        return false;
    }
    let head = &b[..b.len().min(8192)];
    if head.contains(&0) {
        return true;
    }
    let controls = head
        .iter()
        .filter(|&&c| c < 0x20 && !matches!(c, b'\n' | b'\r' | b'\t' | 0x0C | 0x1B))
        .count();
    controls * 100 > head.len() * 2
}

/// Decoded text that is HTML: a doctype or an `<html>`, `<head>` or `<body>` tag near the start,
/// or any leading tag when the hint says HTML.
pub(crate) fn looks_like_html(text: &str, hint: &Hint) -> bool {
    let start = text.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{FEFF}');
    let end = start
        .char_indices()
        .nth(2048)
        .map_or(start.len(), |(i, _)| i);
    let head = start[..end].to_ascii_lowercase();
    head.starts_with("<!doctype html")
        || head.starts_with("<html")
        || head.contains("<html")
        || head.contains("<body")
        || (head.starts_with("<head"))
        || (claimed(hint) == Some("html") && head.starts_with('<'))
}

/// Markdown when the hint says so, or when the text has ATX headings or pipe tables. Plain
/// regulation text has neither.
pub(crate) fn looks_like_markdown(text: &str, hint: &Hint) -> bool {
    match claimed(hint) {
        Some("markdown") => return true,
        // A .txt file stays text even when it contains a pipe table or a "#" line.
        Some("text") => return false,
        _ => {}
    }
    let mut headings = 0;
    let mut tables = 0;
    for line in text.lines().take(2000) {
        let l = line.trim_start();
        let hashes = l.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && l[hashes..].starts_with(' ') {
            headings += 1;
        }
        if l.starts_with("|---") || l.starts_with("| ---") || l.starts_with("|:--") {
            tables += 1;
        }
    }
    headings >= 1 || tables >= 1
}

fn memfind(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_name_loses_only_the_extension_of_a_format_docpipe_reads() {
        for (name, stem) in [
            ("民法典.pdf", "民法典"),
            ("劳动合同法.DOCX", "劳动合同法"),
            ("law.xhtml", "law"),
            ("notes.text", "notes"),
            ("a.b.md", "a.b"),
            ("条例 v1.2", "条例 v1.2"),
            ("no-extension", "no-extension"),
            (".pdf", ".pdf"),
        ] {
            assert_eq!(without_format_extension(name), stem, "{name}");
        }
    }

    use super::*;

    #[test]
    fn sniffs() {
        let l = Limits::default();
        let h = Hint::new("a.pdf", "application/pdf");
        assert_eq!(sniff(b"%PDF-1.7\n", &h, &l), Ok(Format::Pdf));
        assert_eq!(sniff(b"", &h, &l), Err(ParseError::Empty));
        assert!(matches!(
            sniff(b"\x89PNG\r\n\x1a\n\0\0", &h, &l),
            Err(ParseError::Mismatch { .. })
        ));
        assert_eq!(
            sniff("第一条".as_bytes(), &Hint::default(), &l),
            Ok(Format::Text)
        );
        assert!(matches!(
            sniff(&[0u8, 1, 2, 3, 0, 9], &Hint::default(), &l),
            Err(ParseError::Unsupported { .. })
        ));
    }
}
