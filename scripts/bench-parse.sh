#!/usr/bin/env bash
# Parse + chunk benchmark: docpipe-parse (release) against a Python baseline (pypdf +
# langchain RecursiveCharacterTextSplitter 500/50) on the same files, in the same run.
#
#   scripts/bench-parse.sh            # corpus at ../shared/corpus, or $DOCPIPE_CORPUS
#
# Sets: "pdf" = corpus/pdf + corpus/laws-formats/pdf + the UDHR PDFs of corpus/external;
#       "md"  = the 378 Markdown laws of corpus/laws.
# Each (engine, set) runs in its own process, so peak RSS (VmHWM) is per set.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CORPUS="${DOCPIPE_CORPUS:-$ROOT/../shared/corpus}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}"
VENV="$ROOT/.local/bench-venv"
REPEAT="${BENCH_REPEAT:-3}"

if [ -z "${DOCPIPE_PDFIUM_LIB:-}" ] && [ -f "$ROOT/.local/lib/libpdfium.so" ]; then
  export DOCPIPE_PDFIUM_LIB="$ROOT/.local/lib/libpdfium.so"
fi
if [ ! -f "${DOCPIPE_PDFIUM_LIB:-/opt/lib/libpdfium.so}" ]; then
  echo "libpdfium.so not found: run scripts/fetch-pdfium.sh or set DOCPIPE_PDFIUM_LIB" >&2
  exit 1
fi

shopt -s nullglob
PDFS=("$CORPUS"/pdf/*.pdf "$CORPUS"/laws-formats/pdf/*.pdf "$CORPUS"/external/udhr_*.pdf)
MDS=("$CORPUS"/laws/*.md)
[ ${#PDFS[@]} -gt 0 ] && [ ${#MDS[@]} -gt 0 ] || { echo "corpus not found at $CORPUS" >&2; exit 1; }

echo "building the release example..." >&2
cargo build --release -q -p docpipe-parse --example bench_parse
BIN="$CARGO_TARGET_DIR/release/examples/bench_parse"

if [ ! -x "$VENV/bin/python" ]; then
  echo "creating $VENV..." >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q -r "$ROOT/scripts/requirements-bench.txt"
fi
PY="$VENV/bin/python"

OUT="$(mktemp)"
trap 'rm -f "$OUT"' EXIT
# Best of $REPEAT runs for each: the machine is shared, the minimum is the least disturbed.
for i in $(seq "$REPEAT"); do
  "$BIN" pdf "${PDFS[@]}" >>"$OUT"
  "$BIN" md "${MDS[@]}" >>"$OUT"
  "$PY" "$ROOT/scripts/bench_parse_baseline.py" pdf "${PDFS[@]}" >>"$OUT"
  "$PY" "$ROOT/scripts/bench_parse_baseline.py" md "${MDS[@]}" >>"$OUT"
done

"$PY" - "$OUT" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
best = {}
for r in rows:
    k = (r["engine"], r["set"])
    if k not in best or r["seconds"] < best[k]["seconds"]:
        best[k] = r
rust, py = "rust docpipe-parse", "python pypdf + langchain"
print("| set | files | pages | MB | engine | seconds | MB/s | pages/s | chunks | peak RSS MB |")
print("| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
for s in ("pdf", "md"):
    for e in (rust, py):
        r = best[(e, s)]
        print(f"| {s} | {r['files']} | {r['pages']} | {r['bytes']/1e6:.2f} | {e} | {r['seconds']:.3f} | "
              f"{r['mb_per_s']:.2f} | {r['pages_per_s']:.0f} | {r['chunks']} | {r['peak_rss_mb']:.1f} |")
print()
print("| set | throughput ratio (rust / python) | memory ratio (rust / python peak RSS) | goal: ≥ 20× and ≤ 0.25 |")
print("| --- | ---: | ---: | --- |")
for s in ("pdf", "md"):
    r, p = best[(rust, s)], best[(py, s)]
    t = r["mb_per_s"] / p["mb_per_s"]
    m = r["peak_rss_mb"] / p["peak_rss_mb"]
    ok = "met" if t >= 20 and m <= 0.25 else "not met"
    print(f"| {s} | {t:.1f}× | {m:.2f} | {ok} |")
fails = sum(r.get("failures", 0) for r in best.values())
if fails:
    print(f"\n{fails} file(s) failed to parse in the Rust run (see stderr).")
print(f"\npdfium bind (once per process, excluded): {best[(rust, 'pdf')].get('pdfium_bind_ms', 0):.1f} ms")
PYEOF
