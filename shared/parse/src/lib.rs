//! Parsing: bytes in, structure out. Pure logic: no network, no database, no files (except
//! binding `libpdfium.so` once per process, see [`pdfium_library_path`]).
//!
//! [`parse`] detects the format from the bytes, extracts layout blocks, recognises the heading
//! tree (explicit headings plus 编/章/节/条 and numbered headings found in the text) and groups
//! the text into section-scoped semantic blocks; [`chunk`] cuts those blocks into token-bounded
//! chunks that never cross a block boundary.

pub mod article_ref;
mod blocks;
mod chunk;
mod detect;
/// What changed between two versions of a law, article by article: read by search (the diff
/// route, what replaced an article) and by the index commit (the `ArticlesChanged` event).
pub mod diff;
mod docx;
mod error;
mod html;
mod markdown;
mod model;
mod normalize;
pub mod ocr;
mod pdf;
mod quality;
mod raw;
pub mod references;
/// Sensitive values (identity, mobile and card numbers, emails, a deployment's own rules) in
/// text, each with a masked sample.
pub mod sensitive;
mod structure;
mod text;
pub mod version_dates;

use std::panic::{catch_unwind, AssertUnwindSafe};

pub use blocks::MAX_BLOCK_CHARS;
pub use chunk::{chunk_text, chunk_within, estimate_tokens};
pub use detect::without_format_extension;
pub use error::ParseError;
pub use model::{
    BlockKind, ChunkConfig, Format, Hint, LayoutBlock, Limits, OcrReport, ParsedDocument,
    SemanticBlock, StructureNode, VectorChunk, ARTIFACT_SCHEMA_VERSION, DEFAULT_MAX_CHUNKS,
};
pub use pdf::{
    pdfium_library_path, pdfium_status, process_pdfium, PDFIUM_DEFAULT_PATH, PDFIUM_ENV,
};
pub use pdf::{MAX_OCR_PIXELS, MIN_OCR_DPI, OCR_DPI};
pub use structure::{recognise_heading, MAX_TREE_DEPTH};

use raw::RawDoc;

/// Parsers that recurse (pdfium on object graphs, XML and HTML trees) run on their own thread with
/// this much stack: recursive descent inside a library must never overflow the caller's (often
/// small, e.g. tokio worker) stack and abort the process.
const PARSER_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Parses one document. Every error is permanent: the same bytes will fail the same way.
pub fn parse(bytes: &[u8], hint: &Hint, limits: &Limits) -> Result<ParsedDocument, ParseError> {
    let format = detect::sniff(bytes, hint, limits)?;
    let (format, raw) = extract(bytes, hint, limits, format)?;
    if raw.blocks.iter().all(|b| b.text.trim().is_empty()) {
        return Err(ParseError::Empty);
    }
    Ok(finish(format, raw, hint))
}

/// Cuts every semantic block into chunks of at most `cfg.max_tokens` estimated tokens.
pub fn chunk(doc: &ParsedDocument, cfg: &ChunkConfig) -> Vec<VectorChunk> {
    chunk::chunk(doc, cfg)
}

fn on_big_stack<T: Send>(
    f: impl FnOnce() -> Result<T, ParseError> + Send,
) -> Result<T, ParseError> {
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("docpipe-parse".into())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(s, || catch_unwind(AssertUnwindSafe(f)));
        match handle {
            Ok(h) => match h.join() {
                Ok(Ok(result)) => result,
                Ok(Err(panic)) | Err(panic) => Err(ParseError::ParserPanic(panic_message(&panic))),
            },
            Err(_) => Err(ParseError::ParserPanic(
                "could not start the parser thread".into(),
            )),
        }
    })
}

/// For the parsers that never recurse (pulldown-cmark keeps its tree in an arena, plain text is
/// a line loop): a panic still becomes a failed document, without the cost of a thread per call,
/// which was a tenth of the Markdown set's time. The nesting-bomb test runs them on a 512 KiB
/// stack.
fn on_this_stack<T>(f: impl FnOnce() -> Result<T, ParseError>) -> Result<T, ParseError> {
    catch_unwind(AssertUnwindSafe(f))
        .unwrap_or_else(|panic| Err(ParseError::ParserPanic(panic_message(&panic))))
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

fn extract(
    bytes: &[u8],
    hint: &Hint,
    limits: &Limits,
    format: Format,
) -> Result<(Format, RawDoc), ParseError> {
    match format {
        Format::Pdf => on_big_stack(|| Ok((Format::Pdf, pdf::parse(bytes, limits)?))),
        Format::Docx => on_big_stack(|| Ok((Format::Docx, docx::parse(bytes, limits)?))),
        Format::Html | Format::Markdown | Format::Text => {
            let (decoded, encoding) = on_this_stack(|| Ok(text::decode(bytes)))?;
            let suffixed = |mut doc: RawDoc| {
                if encoding != "UTF-8" {
                    doc.parser_name =
                        format!("{}-{}", doc.parser_name, text::parser_suffix(encoding));
                }
                doc
            };
            if detect::looks_like_html(&decoded, hint) {
                let scan = html::prescan(&decoded);
                if scan.depth > limits.max_nesting.saturating_mul(4) {
                    return Err(ParseError::TooLarge(format!(
                        "HTML elements nested {} deep (limit {})",
                        scan.depth,
                        limits.max_nesting.saturating_mul(4)
                    )));
                }
                if scan.attributes > html::MAX_ATTRIBUTES {
                    return Err(ParseError::TooLarge(format!(
                        "an HTML tag with {} attributes (limit {})",
                        scan.attributes,
                        html::MAX_ATTRIBUTES
                    )));
                }
                let doc = on_big_stack(|| Ok(html::parse(&decoded)))?;
                Ok((Format::Html, suffixed(doc)))
            } else if detect::looks_like_markdown(&decoded, hint) {
                let doc = on_this_stack(|| Ok(markdown::parse(&decoded)))?;
                Ok((Format::Markdown, suffixed(doc)))
            } else {
                Ok((Format::Text, on_this_stack(|| text::parse(bytes))?))
            }
        }
    }
}

fn finish(format: Format, raw: RawDoc, hint: &Hint) -> ParsedDocument {
    let mut warnings = raw.warnings;
    if let Some(claimed) = detect::claimed(hint) {
        let family = |f: &str| matches!(f, "html" | "markdown" | "text");
        let agrees = claimed == format.as_str() || (family(claimed) && family(format.as_str()));
        if !agrees {
            warnings.push(format!(
                "the name or content type says {claimed}, the bytes are {}; parsed as {}",
                format.as_str(),
                format.as_str()
            ));
        }
    }
    let mut layouts: Vec<LayoutBlock> = raw
        .blocks
        .into_iter()
        .filter(|b| !b.text.trim().is_empty())
        .enumerate()
        .map(|(i, b)| LayoutBlock {
            id: model::padded_id("L", i + 1, 6),
            page: b.page.max(1),
            order: i as u32,
            kind: b.kind,
            heading_level: b.heading_level,
            text: b.text,
            bbox: b.bbox,
            confidence: b.confidence,
        })
        .collect();
    let tree = structure::build(&mut layouts);
    let semantic_blocks = blocks::build(&layouts, &tree);
    ParsedDocument {
        format,
        parser_name: raw.parser_name,
        page_count: raw.page_count.max(1),
        layouts,
        structure_nodes: tree.nodes,
        semantic_blocks,
        warnings,
        ocr: raw.ocr,
    }
}
