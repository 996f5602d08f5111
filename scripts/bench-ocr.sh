#!/usr/bin/env bash
# OCR on corpus/scanned (`make bench` runs it): docpipe's parse of each scan (release; render,
# recognise, heading tree) against the Python pipeline rapidocr-onnxruntime ships (same PP-OCRv4
# models, same ONNX Runtime version, pages rendered by pypdfium2 at the same 200 dpi), one process
# each, in the same run. Prints pages/s, peak RSS and the ratio, and each one's character accuracy
# against the text layer of the scan's source PDF (corpus/scanned/README.md names them).
#
#   bash scripts/bench-ocr.sh            # BENCH_OCR_JSON=path also writes the figures as JSON
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
LOG_TAG=bench-ocr
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
cd "$ROOT"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"
CORPUS="${DOCPIPE_CORPUS:-$ROOT/corpus}"
export DOCPIPE_PDFIUM_LIB="${DOCPIPE_PDFIUM_LIB:-$ROOT/.local/lib/libpdfium.so}"
export DOCPIPE_OCR_DIR="${DOCPIPE_OCR_DIR:-$ROOT/.local/ocr}"
[[ -f "$DOCPIPE_OCR_DIR/manifest.json" ]] || { echo "OCR files missing: bash scripts/fetch-ocr.sh" >&2; exit 1; }
# The baseline's pins (scripts/requirements-bench.txt): the ONNX Runtime version docpipe loads.
PY="$(bench_python)"

cargo build --release -q -p docpipe-parse --example bench_ocr
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
FILES=("$CORPUS"/scanned/*.pdf)
echo "[bench] OCR: docpipe on ${#FILES[@]} scans" >&2
"$CARGO_TARGET_DIR/release/examples/bench_ocr" "${FILES[@]}" >"$OUT/rust.jsonl"
echo "[bench] OCR: rapidocr-onnxruntime on the same pages" >&2
"$PY" scripts/bench_ocr_baseline.py "${FILES[@]}" >"$OUT/python.jsonl" 2>"$OUT/python.err" \
  || { cat "$OUT/python.err" >&2; exit 1; }

"$PY" - "$OUT" "$CORPUS" "${BENCH_OCR_JSON:-}" <<'PYEOF'
import json, os, sys
import pypdfium2 as pdfium
out, corpus, json_path = sys.argv[1], sys.argv[2], sys.argv[3]
SOURCES = {"reg_data_security.pdf": "pdf/reg_data_security.pdf"}

def source_of(scan):
    name = os.path.basename(scan)
    return os.path.join(corpus, SOURCES.get(name, "laws-formats/pdf/" + name))

def squeeze(text):
    return "".join(ch for ch in text if not ch.isspace())

def distance(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
        prev = cur
    return prev[-1]

def load(name):
    rows = [json.loads(l) for l in open(os.path.join(out, name))]
    return rows[:-1], rows[-1]

truth = {}
def pages_of(scan):
    if scan not in truth:
        pdf = pdfium.PdfDocument(source_of(scan))
        truth[scan] = [squeeze(p.get_textpage().get_text_range()) for p in pdf]
    return truth[scan]

figures = {}
for label, name in (("docpipe", "rust.jsonl"), ("rapidocr", "python.jsonl")):
    files, tail = load(name)
    pages = sum(f["pages"] for f in files)
    seconds = sum(f["ms"] for f in files) / 1000
    errors = chars = 0
    for f in files:
        for got, want in zip(f["texts"], pages_of(f["file"])):
            errors += distance(squeeze(got), want)
            chars += len(want)
    figures[label] = {
        "pages": pages, "seconds": seconds, "pages_per_s": pages / seconds,
        "peak_rss_mb": tail["peak_rss_kb"] / 1024, "engine_load_ms": tail["engine_load_ms"],
        "char_accuracy": 1 - errors / chars, "chars": chars,
    }
d, p = figures["docpipe"], figures["rapidocr"]
print("| OCR, corpus/scanned | pages | s | pages/s | peak RSS | char accuracy |")
print("|---|---:|---:|---:|---:|---:|")
for label, f in (("docpipe-parse (release), whole parse", d), ("rapidocr-onnxruntime 1.4.4 (Python)", p)):
    print(f"| {label} | {f['pages']} | {f['seconds']:.1f} | {f['pages_per_s']:.3f} | "
          f"{f['peak_rss_mb']:.0f} MB | {f['char_accuracy']:.4f} |")
print(f"| **ratio** | | | **{d['pages_per_s'] / p['pages_per_s']:.2f}×** | "
      f"**{d['peak_rss_mb'] / p['peak_rss_mb']:.2f}×** | {d['char_accuracy'] - p['char_accuracy']:+.4f} |")
print(f"\nAccuracy: 1 − edit distance / characters, whitespace removed, against each page of the source PDF's "
      f"text layer ({d['chars']} characters). Engines loaded before the clock: docpipe {d['engine_load_ms']:.0f} ms, "
      f"rapidocr {p['engine_load_ms']:.0f} ms.")
if json_path:
    json.dump(figures, open(json_path, "w"), indent=2)
PYEOF
