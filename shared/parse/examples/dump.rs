//! Prints what `parse` makes of a file: `cargo run -p docpipe-parse --example dump -- FILE [json|tree|blocks|chunks]`.

use docpipe_parse::{chunk, parse, ChunkConfig, Hint, Limits, ParsedDocument};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: dump FILE [summary|json|tree|blocks|chunks]");
        std::process::exit(2);
    };
    let mode = args.next().unwrap_or_else(|| "summary".into());
    let Some(doc) = parse_file(&path) else {
        return;
    };
    match mode.as_str() {
        "json" => println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default()),
        "tree" => print_tree(&doc),
        "layouts" => print_layouts(&doc),
        "blocks" => print_blocks(&doc),
        "chunks" => print_chunks(&doc),
        _ => print_summary(&doc),
    }
}

/// The parsed document, or none when parsing failed (the error is printed, as output).
fn parse_file(path: &str) -> Option<ParsedDocument> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let name = std::path::Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match parse(&bytes, &Hint::new(name, ""), &Limits::default()) {
        Ok(d) => Some(d),
        Err(e) => {
            println!("ERROR {}: {e}", e.kind());
            None
        }
    }
}

fn print_tree(doc: &ParsedDocument) {
    for n in &doc.structure_nodes {
        println!(
            "{}{} [{}] p{}",
            "  ".repeat(n.level as usize - 1),
            n.title,
            n.sub_type,
            n.page
        );
    }
}

fn print_layouts(doc: &ParsedDocument) {
    for l in &doc.layouts {
        println!(
            "{} p{} {:?} {:?} {:?} {}",
            l.id, l.page, l.kind, l.heading_level, l.bbox, l.text
        );
    }
}

fn print_blocks(doc: &ParsedDocument) {
    for b in &doc.semantic_blocks {
        println!(
            "{} {} p{}-{} {:?}\n  {}",
            b.semantic_id,
            b.block_type,
            b.page_start,
            b.page_end,
            b.section_path,
            b.text.replace('\n', "⏎")
        );
    }
}

fn print_chunks(doc: &ParsedDocument) {
    for c in chunk(doc, &ChunkConfig::default()) {
        println!(
            "{} [{}..{}] ~{} {}",
            c.chunk_key,
            c.char_start,
            c.char_end,
            c.token_estimate,
            c.text.replace('\n', "⏎")
        );
    }
}

fn print_summary(doc: &ParsedDocument) {
    let count = |t: &str| {
        doc.structure_nodes
            .iter()
            .filter(|n| n.sub_type == t)
            .count()
    };
    println!(
        "{:?} {} pages={} layouts={} nodes={} (part {} chapter {} section {} article {} numbered {} explicit {}) blocks={} warnings={:?}",
        doc.format, doc.parser_name, doc.page_count, doc.layouts.len(), doc.structure_nodes.len(),
        count("part"), count("chapter"), count("section"), count("article"), count("numbered"), count("explicit"),
        doc.semantic_blocks.len(), doc.warnings
    );
}
