#!/usr/bin/env bash
# The main job: `make up` (quietly), then upload laws through the
# API with the `docpipe` CLI, watch them go store → parse → index, then show a summary and two
# searches (one in Chinese, one cross-lingual in English).
#
# The set: the 8 laws of corpus/laws-formats in all four formats (md, html, docx, pdf: the same law
# must index alike in each) and 30 more laws from corpus/laws (the first 30 by file name, which are
# hashes, so an arbitrary sample, leaving out the 8 above), and the 4 scans of corpus/scanned (image-only
# PDFs, read by OCR; named "<title> (scan)"). Each document is named after the law's
# title (corpus/laws/INDEX.tsv), gets a regulation_type from the law's category (法律, 行政法规,
# 地方性法规, 司法解释, …) and the tags `demo` and `formats` or `laws`, so that filters can be shown.
#
# Idempotent: `upload --skip-existing` uploads no file whose content a document (not failed)
# already holds and prints that document instead, so a second run uploads nothing new, watches
# the same documents (already done) and prints the same summary. `make down` stops the stack;
# its data stays in .local.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"
started=$EPOCHREALTIME
# Seconds since a mark, to a tenth: `t=$EPOCHREALTIME … since "$t"`.
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# The stack and the dev runner (`make up`), with its step-by-step log kept in a file: a person
# watching the demo sees one line for it, or the log's end when it failed. Each step's seconds go
# to .local/demo-times for the table at the end.
mkdir -p .local
TIMES="$ROOT/.local/demo-times"
: > "$TIMES"
echo "== stack: make up (install what is missing, build the CLI, start the services; log: .local/demo-up.log)"
t=$EPOCHREALTIME
if ! DOCPIPE_TIMES="$TIMES" make -s up > .local/demo-up.log 2>&1; then
  tail -n 20 .local/demo-up.log >&2
  echo "make up failed; the whole log is .local/demo-up.log" >&2
  exit 1
fi
echo "up $(since "$t")" >> "$TIMES"
eval "$(bash scripts/stack.sh env)"
BIN="${CARGO_TARGET_DIR:-$HOME/.cache/docpipe/target}/debug/docpipe"
CORPUS="${DOCPIPE_CORPUS:-$ROOT/corpus}"
LAWS="${DOCPIPE_DEMO_LAWS:-30}"
[[ -d "$CORPUS/laws-formats" ]] || { echo "corpus not found at $CORPUS (set DOCPIPE_CORPUS)" >&2; exit 1; }
docpipe() { "$BIN" "$@"; }

# The dev runner serves the API; give it a moment after a (re)start.
for _ in $(seq 1 60); do docpipe ls --limit 1 >/dev/null 2>&1 && break; sleep 0.5; done
docpipe ls --limit 1 >/dev/null

# Stage the files under their titles, grouped by regulation type (one upload per group).
STAGE="$ROOT/.local/demo"
rm -rf "$STAGE"
mkdir -p "$STAGE"
category() {
  case "$1" in
    DLC/*) echo 地方性法规 ;;
    行政法规/*) echo 行政法规 ;;
    司法解释/*) echo 司法解释 ;;
    部门规章/*) echo 部门规章 ;;
    案例/*) echo 案例 ;;
    *) echo 法律 ;;
  esac
}
declare -A source_of
while IFS=$'\t' read -r file source; do
  [[ "$file" == law-*.md ]] && source_of["${file%.md}"]="$source"
done < "$CORPUS/laws/INDEX.tsv"
stage() { # stage SET FILE [SUFFIX]: link FILE as .local/demo/SET/<regulation type>/<title><SUFFIX>.<ext>
  local set="$1" file="$2" suffix="${3:-}" base ext source title type
  base="$(basename "$file")"
  ext="${base##*.}"
  source="${source_of[${base%.*}]:-}"
  title="$(basename "${source:-$base}")"
  title="${title%.*}"
  type="$(category "$source")"
  mkdir -p "$STAGE/$set/$type"
  ln -s "$file" "$STAGE/$set/$type/$title$suffix.$ext"
}
declare -A in_formats
for f in "$CORPUS"/laws-formats/*/*; do
  stage formats "$f"
  b="$(basename "$f")"
  in_formats["${b%.*}"]=1
done
n=0
for f in "$CORPUS"/laws/law-*.md; do
  b="$(basename "$f")"
  [[ -n "${in_formats[${b%.md}]:-}" ]] && continue
  stage laws "$f"
  n=$((n + 1))
  [[ $n -ge $LAWS ]] && break
done

for f in "$CORPUS"/scanned/*.pdf; do
  stage scans "$f" " (scan)"
done

FILES="$(find "$STAGE" -type l | wc -l)"
echo "== upload: $FILES files through presigned URLs (docpipe upload)"
t=$EPOCHREALTIME
ids=()
for dir in "$STAGE"/*/*/; do
  set_name="$(basename "$(dirname "$dir")")"
  type="$(basename "$dir")"
  while read -r id _; do
    [[ "$id" == doc_* ]] && ids+=("$id")
  done < <(docpipe upload --skip-existing --regulation-type "$type" --tags "demo,$set_name" "$dir"*)
done
echo "   ${#ids[@]} documents: $(find "$STAGE/formats" -type l | wc -l) in four formats, $(find "$STAGE/laws" -type l | wc -l) more laws, $(find "$STAGE/scans" -type l | wc -l) scans (OCR)"

echo "upload $(since "$t")" >> "$TIMES"

echo "== watch: every document until it is indexed or failed (docpipe watch)"
t=$EPOCHREALTIME
docpipe watch "${ids[@]}"
echo "pipeline $(since "$t")" >> "$TIMES"

echo
echo "== summary (docpipe summary)"
docpipe summary

summary_json="$(docpipe summary --json)"

echo
t=$EPOCHREALTIME
q1="湿地保护规划由哪个部门编制？"
echo "== search in Chinese: docpipe search \"$q1\" --top-k 5"
docpipe search "$q1" --top-k 5

echo
q2="When does the heating season start and end?"
echo "== search across languages, local regulations only:"
echo "   docpipe search \"$q2\" --regulation-type 地方性法规 --top-k 5"
docpipe search "$q2" --regulation-type 地方性法规 --top-k 5

echo "searches $(since "$t")" >> "$TIMES"

echo
echo "== where the time went ($(since "$started") s in all)"
DOCS="${#ids[@]}" FILES="$FILES" SUMMARY="$summary_json" python3 - "$TIMES" <<'PY'
import json, os, sys
t = {}
for line in open(sys.argv[1]):
    name, secs = line.split()
    t[name] = t.get(name, 0.0) + float(secs)
def of(*names):
    return sum(t.get(n, 0.0) for n in names)
summary = json.loads(os.environ["SUMMARY"])
docs, files = os.environ["DOCS"], os.environ["FILES"]
def until(stage):
    ms = (summary.get("until_ms") or {}).get(stage)
    return (ms or 0) / 1000
rows = [
    ("install", of("stack.packages", "stack.venv", "stack.e5", "stack.pdfium", "stack.ocr", "layers"),
     "apt packages, Python venv, e5 engine, pdfium, OCR models, Lambda layers (nothing when present)"),
    ("build", of("build"), "cargo build -p docpipe-cli --features e5, beside the install and the start"),
    ("stack start", of("stack.milvus-start", "stack.postgres", "stack.pgbouncer", "stack.moto",
                       "stack.resources", "stack.milvus-ready", "runner"),
     "PostgreSQL, PgBouncer, moto, Milvus, migrations, dev runner"),
    ("make up (wall)", of("up"), "the three above, the build overlapping the others"),
    ("upload", of("upload"), f"{files} files through presigned URLs"),
    ("store", until("stored"), f"from the first upload to the last of {docs} documents stored"),
    ("parse", until("parsed"), "... to the last parsed (the scans by OCR are the longest)"),
    ("index", until("indexed"), "... to the last indexed (e5 embeddings, Milvus, keywords)"),
    ("watch (wall)", of("pipeline"), "upload done to the last document indexed, as docpipe watch saw it"),
    ("searches", of("searches"), "the two searches above"),
]
print(f"   {'step':<16} {'seconds':>8}  what")
for name, secs, what in rows:
    print(f"   {name:<16} {secs:>8.1f}  {what}")
PY

echo
echo "== demo done in $(since "$started") s. Try: docpipe ls · docpipe status <doc_id> · docpipe tree <doc_id> --depth 2 · docpipe events tail (then upload again)"
