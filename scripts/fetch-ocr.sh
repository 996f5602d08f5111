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
#                                        .local/ocr when that is the same build), with a fallback
#                                        lib/libstdc++.so.6 (below)
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
WANT_OCR="$WANT"  # the ONNX Runtime and model files alone, as the local stack's copy records them

# libonnxruntime.so needs libstdc++.so.6 (GLIBCXX_3.4.22, CXXABI_1.3.11 at most: scripts/layer_abi.py).
# The provided.al2023 runtime is AL2023's minimal image, and AWS lists no packages for it: the layer
# carries a libstdc++.so.6 of its own beside libonnxruntime.so. libonnxruntime.so's RUNPATH is $ORIGIN,
# which the dynamic loader searches after LD_LIBRARY_PATH (Lambda's begins /lib64:/usr/lib64): the
# runtime's own libstdc++ is used where there is one, this copy only where there is none. It is
# Debian 11's (GCC 10.2: GLIBCXX_3.4.28, CXXABI_1.3.12, glibc 2.18 at most, so it loads on AL2023's
# glibc 2.34; Debian 12's needs glibc 2.36 and would not), fetched with apt-get from the Debian
# mirror this host's apt uses, and checked against its sha256.
LIBSTDCXX_DEB="libstdc++6_10.2.1-6_amd64.deb"
LIBSTDCXX_SHA256="5c155c58935870bf3b4bfe769116841c0d286a74f59eccfd5645693ac23f06b1"
debian_mirror() {
  local m="${DOCPIPE_DEBIAN_MIRROR:-}"
  [[ -n "$m" ]] || m="$(sed -n 's/^URIs: *\([^ ]*debian\)\/\{0,1\}$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)"
  [[ -n "$m" ]] || m="$(awk '$1 == "deb" && $2 ~ /debian\/?$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)"
  echo "$m"
}
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
CAN_LIBSTDCXX=""
if [[ "${1:-}" == --layer ]]; then
  if command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null && [[ -f "$KEYRING" && -n "$(debian_mirror)" ]]; then
    CAN_LIBSTDCXX=1
    WANT="$WANT + $LIBSTDCXX_DEB"
  else
    warn "no apt-get, dpkg-deb, Debian keyring or Debian mirror here: the OCR layer carries no libstdc++.so.6 and relies on the runtime's (README, \"Deploying to AWS\")"
  fi
fi

# Adds the fallback libstdc++.so.6 to $1/lib.
add_libstdcxx() {
  [[ -n "$CAN_LIBSTDCXX" ]] || return 0
  local a="$LOCAL/apt-bullseye" deb
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/dl"
  echo "deb [signed-by=$KEYRING] $(debian_mirror) bullseye main" > "$a/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$a/sources.list" -o "Dir::Etc::SourceParts=$a/none" -o "Dir::State::Lists=$a/lists"
              -o "Dir::Cache=$a/cache" -o "Dir::State::Status=/dev/null" -o "APT::Architecture=amd64" -o "Debug::NoLocking=1")
  deb="$a/dl/$LIBSTDCXX_DEB"
  if [[ ! -f "$deb" || "$(sha256sum < "$deb" | cut -d' ' -f1)" != "$LIBSTDCXX_SHA256" ]]; then
    log "apt-get download libstdc++6=10.2.1-6 (Debian 11) for the OCR layer's fallback libstdc++.so.6"
    apt-get "${opts[@]}" -qq update >&2 || die "apt-get update (Debian 11's package lists) failed"
    (cd "$a/dl" && apt-get "${opts[@]}" -qq download "libstdc++6:amd64=10.2.1-6" >&2 2>/dev/null) \
      || die "apt-get download libstdc++6=10.2.1-6 failed"
  fi
  [[ "$(sha256sum < "$deb" | cut -d' ' -f1)" == "$LIBSTDCXX_SHA256" ]] || die "$LIBSTDCXX_DEB: sha256 is not $LIBSTDCXX_SHA256"
  rm -rf "$a/x"
  dpkg-deb -x "$deb" "$a/x"
  install -m 0644 "$a/x/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.28" "$1/lib/libstdc++.so.6"
  log "OCR layer: lib/libstdc++.so.6 from $LIBSTDCXX_DEB (used only where the runtime has none)"
}

PY="$(fetch_python)"

complete() {
  [[ -f "$DIR/lib/libonnxruntime.so" && -f "$DIR/models/$DET" && -f "$DIR/models/$REC" \
     && -f "$DIR/manifest.json" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" ]] \
     && { [[ -z "$CAN_LIBSTDCXX" ]] || [[ -f "$DIR/lib/libstdc++.so.6" ]]; }
}

if complete; then
  log "OCR files present ($WANT): $DIR"
  exit 0
fi

mkdir -p "$(dirname "$DIR")"
TMP="$(mktemp -d "$LOCAL/ocr-dl.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

# The layer from the local stack's files when they are the same build.
if [[ "$DIR" != "$LOCAL_DIR" && -f "$LOCAL_DIR/.source" && "$(cat "$LOCAL_DIR/.source")" == "$WANT_OCR" \
      && -f "$LOCAL_DIR/lib/libonnxruntime.so" && -f "$LOCAL_DIR/models/$DET" && -f "$LOCAL_DIR/models/$REC" ]]; then
  mkdir -p "$TMP/out"
  cp -r "$LOCAL_DIR/lib" "$LOCAL_DIR/models" "$LOCAL_DIR/manifest.json" "$TMP/out/"
  add_libstdcxx "$TMP/out"
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
[[ "$DIR" == "$LOCAL_DIR" ]] || add_libstdcxx "$TMP/out"
rm -rf "$DIR"
mv "$TMP/out" "$DIR"
echo "$WANT" > "$STAMP"
log "OCR files installed: $DIR ($(du -sh "$DIR" | cut -f1))"
