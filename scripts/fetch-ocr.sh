#!/usr/bin/env bash
# Puts the OCR files at .local/ocr, laid out as the Lambda layer lays them out under /opt/ocr:
#   lib/libonnxruntime.so        from the PyPI wheel of onnxruntime (a plain ONNX Runtime build)
#   models/<det>.onnx, <rec>.onnx from the PyPI wheel of rapidocr-onnxruntime (PaddleOCR's
#                                 PP-OCRv4 Chinese models; the recogniser carries its character
#                                 dictionary in its metadata)
#   manifest.json                which versions these are, read by docpipe and recorded per run
# Pinned versions; idempotent (a stamp records what is there, so a second run does nothing).
#
#   bash scripts/fetch-ocr.sh            .local/ocr, for the local stack (an x86_64 host only)
#   bash scripts/fetch-ocr.sh --layer    .local/layers/ocr/ocr, the OCR layer's contents (/opt/ocr): the
#                                        functions' x86_64 build whatever this host is (taken from
#                                        .local/ocr when that is the same build)
#   ONNXRUNTIME_VERSION=1.23.2 RAPIDOCR_VERSION=1.4.4 bash scripts/fetch-ocr.sh
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# docpipe's ort binding asks for ONNX Runtime's API 23 (ort's `api-23`): 1.23 or newer.
ORT_VERSION="${ONNXRUNTIME_VERSION:-1.23.2}"
RAPIDOCR_VERSION="${RAPIDOCR_VERSION:-1.4.4}"
DET="ch_PP-OCRv4_det_infer.onnx"
REC="ch_PP-OCRv4_rec_infer.onnx"
LOCAL_DIR="$LOCAL/ocr"
if [[ "${1:-}" == --layer ]]; then
  DIR="$LOCAL/layers/ocr/ocr"
  ARCH=x86_64
  # Outside the layer's directory (its ContentUri), so it is not deployed.
  STAMP="$LOCAL/layers/.ocr.source"
else
  DIR="$LOCAL_DIR"
  ARCH="$(uname -m)"
  STAMP="$DIR/.source"
fi
WANT="onnxruntime==$ORT_VERSION rapidocr-onnxruntime==$RAPIDOCR_VERSION $ARCH"

PY="$(fetch_python)"

complete() {
  [[ -f "$DIR/lib/libonnxruntime.so" && -f "$DIR/models/$DET" && -f "$DIR/models/$REC" \
     && -f "$DIR/manifest.json" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]]
}

if complete; then
  log "OCR files present ($WANT): $DIR"
  exit 0
fi

mkdir -p "$(dirname "$DIR")"
TMP="$(mktemp -d "$LOCAL/ocr-dl.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

# The layer from the local stack's files when they are the same build.
if [[ "$DIR" != "$LOCAL_DIR" && -f "$LOCAL_DIR/.source" && "$(cat "$LOCAL_DIR/.source")" == "$WANT" \
      && -f "$LOCAL_DIR/lib/libonnxruntime.so" && -f "$LOCAL_DIR/models/$DET" && -f "$LOCAL_DIR/models/$REC" ]]; then
  mkdir -p "$TMP/out"
  cp -r "$LOCAL_DIR/lib" "$LOCAL_DIR/models" "$LOCAL_DIR/manifest.json" "$TMP/out/"
  rm -rf "$DIR"
  mv "$TMP/out" "$DIR"
  echo "$WANT" > "$STAMP"
  log "OCR files for the layer: the local stack's copy ($WANT): $DIR"
  exit 0
fi

# The wheels are fetched for a fixed platform and Python, whatever this host runs: only the
# native library and the models are taken from them, never Python code.
# The platform is x86_64's, as the functions' (template.yaml): on another host the library would
# not load, and the stamp would claim otherwise.
[[ "$ARCH" == x86_64 ]] || die "the OCR files are fetched for x86_64 only (this host is $(uname -m)); the layer's (--layer) are x86_64 on any host"
log "downloading onnxruntime==$ORT_VERSION and rapidocr-onnxruntime==$RAPIDOCR_VERSION wheels"
"$PY" -m pip download --disable-pip-version-check --quiet --no-deps --only-binary=:all: \
  --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp \
  -d "$TMP" "onnxruntime==$ORT_VERSION" "rapidocr-onnxruntime==$RAPIDOCR_VERSION" >&2 \
  || die "pip download of the OCR wheels failed"

mkdir -p "$TMP/out/lib" "$TMP/out/models"
"$PY" - "$TMP" "$TMP/out" "$ORT_VERSION" "$RAPIDOCR_VERSION" "$DET" "$REC" <<'EOF' >&2
import glob, json, shutil, sys, zipfile
tmp, out, ort_version, rapid_version, det, rec = sys.argv[1:]
def take(wheel_glob, pick, dest):
    [whl] = glob.glob(f"{tmp}/{wheel_glob}")
    with zipfile.ZipFile(whl) as z:
        names = [n for n in z.namelist() if pick(n)]
        if len(names) != 1:
            sys.exit(f"expected one match in {whl}, found {names}")
        with z.open(names[0]) as src, open(dest, "wb") as dst:
            shutil.copyfileobj(src, dst)
        print("[stack] extracted", names[0])
take("onnxruntime-*.whl", lambda n: n.rsplit("/", 1)[-1].startswith("libonnxruntime.so."),
     f"{out}/lib/libonnxruntime.so")
for model in (det, rec):
    take("rapidocr_onnxruntime-*.whl", lambda n, m=model: n.endswith("/models/" + m),
         f"{out}/models/{model}")
json.dump({"onnxruntime": ort_version, "models_from": f"rapidocr-onnxruntime {rapid_version}",
           "det_model": det, "rec_model": rec}, open(f"{out}/manifest.json", "w"), indent=2)
EOF
chmod 0755 "$TMP/out/lib/libonnxruntime.so"
rm -rf "$DIR"
mv "$TMP/out" "$DIR"
echo "$WANT" > "$STAMP"
log "OCR files installed: $DIR ($(du -sh "$DIR" | cut -f1))"
