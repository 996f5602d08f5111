//! Renders each page of a PDF and prints what OCR reads on it, with timings.
//!
//!   DOCPIPE_OCR_DIR=.local/ocr DOCPIPE_PDFIUM_LIB=.local/lib/libpdfium.so \
//!     cargo run --release -p docpipe-parse --example ocr_probe -- file.pdf [first_page] [pages]
use std::time::Instant;

use docpipe_parse::ocr::{engine, Gray};
use pdfium_render::prelude::*;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bytes = std::fs::read(&args[1]).expect("read");
    let first: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let count: usize = args
        .get(3)
        .and_then(|s| s.parse().ok())
        .unwrap_or(usize::MAX);
    let t = Instant::now();
    let ocr = engine().expect("ocr");
    eprintln!("engine {:?} loaded in {:?}", ocr.info, t.elapsed());
    let pdfium =
        Pdfium::new(Pdfium::bind_to_library(docpipe_parse::pdfium_library_path()).expect("pdfium"));
    let doc = pdfium.load_pdf_from_byte_slice(&bytes, None).expect("pdf");
    for (i, page) in doc.pages().iter().enumerate().skip(first - 1).take(count) {
        let t = Instant::now();
        let cfg = PdfRenderConfig::new().scale_page_by_factor(200.0 / 72.0);
        let bitmap = page.render_with_config(&cfg).expect("render");
        let (w, h) = (bitmap.width() as usize, bitmap.height() as usize);
        let raw = bitmap.as_raw_bytes();
        let stride = raw.len() / h;
        let mut pixels = Vec::with_capacity(w * h);
        for y in 0..h {
            for x in 0..w {
                let p = &raw[y * stride + x * 4..];
                pixels.push(((p[0] as u32 * 29 + p[1] as u32 * 150 + p[2] as u32 * 77) >> 8) as u8);
            }
        }
        let rendered = t.elapsed();
        let lines = ocr
            .read_page(&Gray {
                width: w,
                height: h,
                pixels,
            })
            .expect("ocr");
        println!(
            "--- page {} ({w}×{h}) render {:?} total {:?}",
            i + 1,
            rendered,
            t.elapsed()
        );
        for l in lines {
            println!(
                "{:.3} [{:.0},{:.0}] {}",
                l.confidence, l.corners[0].x, l.corners[0].y, l.text
            );
        }
    }
}
