#!/usr/bin/env bash
# Fuzzes docpipe's hostile-input surface with cargo-fuzz (libFuzzer): the notification and job
# decoders, the SQS batch path, and every parser followed by chunking (see fuzz/fuzz_targets/).
# Each target runs for a bounded time, seeded from corpus/ and events/ (events/clients/ are real clients') plus the
# repository's own events/ and fuzz/seeds/; the corpus it grows is kept in .local/fuzz/corpus for the next run.
# Prints a table target -> runs -> result and exits non-zero when any target crashed, hung or ran
# out of memory (the input is saved under .local/fuzz/artifacts/<target>/).
#
#   bash scripts/fuzz.sh                 # every target, 30 s each
#   bash scripts/fuzz.sh 120             # every target, 2 minutes each
#   bash scripts/fuzz.sh 60 parse_docx   # some targets
#
# cargo-fuzz wants nightly for its compiler flags (-Zsanitizer, sancov passes); this runs it on the
# stable toolchain with RUSTC_BOOTSTRAP=1 and without a sanitizer (`-s none`): the targets are
# safe Rust, so AddressSanitizer would add little, and libFuzzer's coverage, crash, timeout and
# memory checks all work without it. FUZZ_SANITIZER=address switches ASan on.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"

SECS="${1:-30}"
shift || true
CARGO_FUZZ_VERSION="0.13.2"
SANITIZER="${FUZZ_SANITIZER:-none}"
WORK="$ROOT/.local/fuzz"
TARGET_DIR="$WORK/target"
CORPUS="${DOCPIPE_CORPUS:-$ROOT/corpus}"
log() { printf '[fuzz] %s\n' "$*" >&2; }
die() { printf '[fuzz] ERROR: %s\n' "$*" >&2; exit 2; }

[[ "$SECS" =~ ^[0-9]+$ ]] && ((SECS > 0)) || die "SECONDS_PER_TARGET must be a positive integer, not '$SECS'"
[[ -d "$CORPUS/malformed" ]] || die "no seed corpus at $CORPUS (set DOCPIPE_CORPUS)"

ALL_TARGETS=(events_notification job_message sqs_batch parse_pdf parse_pdf_lopdf parse_docx
  parse_html parse_markdown parse_text)
if (($#)); then TARGETS=("$@"); else TARGETS=("${ALL_TARGETS[@]}"); fi

# --- cargo-fuzz, into the project's own folder ---------------------------------------------
CARGO_FUZZ="$ROOT/.local/cargo-fuzz/bin/cargo-fuzz"
if [[ "$("$CARGO_FUZZ" --version 2>/dev/null)" != *"$CARGO_FUZZ_VERSION"* ]]; then
  log "installing cargo-fuzz $CARGO_FUZZ_VERSION into .local/cargo-fuzz"
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked --root "$ROOT/.local/cargo-fuzz" --quiet
fi
export RUSTC_BOOTSTRAP=1
FUZZ_FLAGS=(-s "$SANITIZER" --codegen-units 16 --target-dir "$TARGET_DIR")

# pdfium, as the parse function uses it (parse_pdf_lopdf switches it off for itself).
if [[ -z "${DOCPIPE_PDFIUM_LIB:-}" && -f "$ROOT/.local/lib/libpdfium.so" ]]; then
  export DOCPIPE_PDFIUM_LIB="$ROOT/.local/lib/libpdfium.so"
fi
[[ -n "${DOCPIPE_PDFIUM_LIB:-}" ]] || log "pdfium not found (scripts/fetch-pdfium.sh): parse_pdf fuzzes the lopdf fallback only"

log "building ${#TARGETS[@]} target(s) (sanitizer: $SANITIZER)"
(cd fuzz && "$CARGO_FUZZ" build "${FUZZ_FLAGS[@]}" 2>&1 | grep -vE '^\s*(Compiling|Finished|Running)' >&2 || true)
(cd fuzz && "$CARGO_FUZZ" build "${FUZZ_FLAGS[@]}" >/dev/null 2>&1) || die "the fuzz targets do not build"

# --- seeds ---------------------------------------------------------------------------------
# copy_seeds DEST FILE_OR_DIR...: regular files only, missing sources skipped.
copy_seeds() {
  local dest="$1"; shift
  local src
  for src in "$@"; do
    if [[ -d "$src" ]]; then
      find "$src" -maxdepth 1 -type f -exec cp -f {} "$dest/" \;
    elif [[ -f "$src" ]]; then
      cp -f "$src" "$dest/"
    fi
  done
}
JOB='{"v":1,"doc_id":"doc_0123456789abcdef0123456789abcdef","run_id":42}'
make_seeds() {
  local t="$1" dest="$WORK/seeds/$1"
  rm -rf "$dest"; mkdir -p "$dest"
  local c="$CORPUS"
  case "$t" in
    events_notification)
      copy_seeds "$dest" "$ROOT/events/clients" "$ROOT"/events/store-*.json ;;
    job_message)
      printf '%s' "$JOB" >"$dest/job.json"
      printf '%s' '{"v":2,"doc_id":"doc_0123456789abcdef0123456789abcdef","run_id":-1}' >"$dest/v2.json"
      copy_seeds "$dest" "$ROOT"/events/*-sqs-job.json ;;
    sqs_batch)
      # First byte 0: the rest is the whole Lambda event; 1: the rest is one message body.
      local f i=0
      for f in "$ROOT"/events/clients/*.json "$ROOT"/events/*sqs*.json "$ROOT"/events/store-*.json; do
        [[ -f "$f" ]] || continue
        { printf '\0'; cat "$f"; } >"$dest/event-$i"; i=$((i + 1))
        { printf '\1'; cat "$f"; } >"$dest/body-$i"; i=$((i + 1))
      done
      { printf '\1'; printf '%s' "$JOB"; } >"$dest/body-job" ;;
    parse_pdf | parse_pdf_lopdf)
      copy_seeds "$dest" "$c/malformed" "$c/pdf" "$c/sample-pdfs" "$c/laws-formats/pdf"
      find "$c/external" -maxdepth 1 -name '*.pdf' -exec cp -f {} "$dest/" \; 2>/dev/null || true ;;
    parse_docx)
      copy_seeds "$dest" "$c/docx" "$c/laws-formats/docx" ;;
    parse_html)
      copy_seeds "$dest" "$c/html" "$c/laws-formats/html" ;;
    parse_markdown)
      copy_seeds "$dest" "$c/md" "$c/laws-formats/md"
      find "$c/laws" -maxdepth 1 -name '*.md' -size -64k 2>/dev/null | sort | head -n 20 | xargs -r cp -t "$dest/" ;;
    parse_text)
      copy_seeds "$dest" "$c/txt"
      find "$c/laws" -maxdepth 1 -name '*.md' -size -64k 2>/dev/null | sort | tail -n 10 | xargs -r cp -t "$dest/" ;;
    *) die "unknown target $t" ;;
  esac
  # The repository's own seeds: inputs that once broke a parser's bounds (fuzz/seeds/README.md).
  local own="$t"
  [[ "$t" == parse_pdf_lopdf ]] && own=parse_pdf
  copy_seeds "$dest" "$ROOT/fuzz/seeds/$own"
  echo "$dest"
}

max_len() {
  case "$1" in
    parse_pdf | parse_pdf_lopdf | parse_docx) echo 524288 ;;
    parse_*) echo 131072 ;;
    *) echo 65536 ;;
  esac
}

# --- run -----------------------------------------------------------------------------------
declare -a ROWS=()
failed=0
for t in "${TARGETS[@]}"; do
  seeds="$(make_seeds "$t")"
  corpus="$WORK/corpus/$t"
  artifacts="$WORK/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  out="$WORK/logs/$t.log"
  mkdir -p "$(dirname "$out")"
  log "$t: ${SECS}s, $(find "$seeds" -type f | wc -l) seed(s), $(find "$corpus" -type f | wc -l) in the kept corpus"
  set +e
  (cd fuzz && "$CARGO_FUZZ" run "${FUZZ_FLAGS[@]}" "$t" "$corpus" "$seeds" -- \
    -max_total_time="$SECS" -max_len="$(max_len "$t")" -timeout=20 -rss_limit_mb=3072 \
    -print_final_stats=1 -artifact_prefix="$artifacts/") >"$out" 2>&1
  rc=$?
  set -e
  # stat_of PATTERN: the last number after PATTERN in the log, or nothing.
  stat_of() { { grep -oE "$1 *[0-9]+" "$out" || true; } | tail -n1 | grep -oE '[0-9]+$' || true; }
  runs="$(stat_of 'stat::number_of_executed_units:')"
  per_sec="$(stat_of 'stat::average_exec_per_sec:')"
  cov="$(stat_of ' cov:')"
  if ((rc == 0)); then
    result="ok"
  else
    failed=1
    artifact="$({ grep -oE "Test unit written to [^ ]+" "$out" || true; } | tail -n1 | sed 's/Test unit written to //')"
    kind="$({ grep -oE 'panicked at [^ ]+|ERROR: libFuzzer: [a-z-]+' "$out" || true; } | head -n1)"
    result="FAILED (${kind:-exit $rc}) ${artifact:-see $out}"
  fi
  ROWS+=("$(printf '%-20s %12s %9s %7s  %s' "$t" "${runs:-?}" "${per_sec:-?}" "${cov:-?}" "$result")")
done

printf '\n%-20s %12s %9s %7s  %s\n' "target" "runs" "runs/s" "cov" "result"
printf '%s\n' "${ROWS[@]}"
printf '\n(%ss per target; logs in .local/fuzz/logs; reproduce a crash from fuzz/ with\n' "$SECS"
printf ' RUSTC_BOOTSTRAP=1 ../.local/cargo-fuzz/bin/cargo-fuzz run -s none --codegen-units 16 --target-dir ../.local/fuzz/target TARGET ARTIFACT)\n'
exit "$failed"
