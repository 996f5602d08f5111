#!/usr/bin/env bash
# Puts libpdfium.so where it is needed, taken from the PyPI wheel of pypdfium2 (the wheel ships a
# plain PDFium build as pypdfium2_raw/libpdfium.so). Idempotent: a stamp file records which wheel
# the library came from, so a second run does nothing.
#
#   bash scripts/fetch-pdfium.sh            # .local/lib/libpdfium.so, for this host (the local stack)
#   bash scripts/fetch-pdfium.sh --layer    # .local/layers/pdfium/lib/libpdfium.so, for the Lambda layer:
#                                           # always the functions' architecture (x86_64, template.yaml),
#                                           # whatever this host is
#   PDFIUM_WHEEL_VERSION=5.15.2 bash scripts/fetch-pdfium.sh
#
# Uses .local/venv's pip if present, else python3 -m pip. The layer's copy is taken from the local
# one when that is already the x86_64 build of the same wheel (no second download).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VERSION="${PDFIUM_WHEEL_VERSION:-5.15.2}"
REQ="pypdfium2==$VERSION"
# The functions' architecture (template.yaml's Globals: Architectures [x86_64]) and the wheel
# platform tag pypdfium2 publishes for it.
LAYER_ARCH=x86_64
LAYER_PLATFORM=manylinux_2_17_x86_64

LOCAL_LIB="$LOCAL/lib/libpdfium.so"
if [[ "${1:-}" == --layer ]]; then
  LIB="$LOCAL/layers/pdfium/lib/libpdfium.so"
  ARCH="$LAYER_ARCH"
  PLATFORM_ARGS=(--platform "$LAYER_PLATFORM" --python-version 3.11 --implementation cp)
else
  LIB="$LOCAL_LIB"
  ARCH="$(uname -m)"
  PLATFORM_ARGS=()
fi
LIBDIR="$(dirname "$LIB")"
# The layer's stamp stays outside the layer's directory (its ContentUri), so it is not deployed.
if [[ "$LIB" == "$LOCAL_LIB" ]]; then STAMP="$LIB.source"; else STAMP="$LOCAL/layers/.pdfium.source"; fi

PY="$(fetch_python)"

# The library must be whole and of the right architecture: on a host of that architecture it must
# load; elsewhere its ELF header must name it (a truncated or foreign copy would not do).
lib_ok() {
  "$PY" - "$1" "$ARCH" "$(uname -m)" <<'EOF' >/dev/null 2>&1
import ctypes, struct, sys
path, arch, host = sys.argv[1:]
with open(path, "rb") as f:
    head = f.read(20)
machines = {"x86_64": 0x3E, "aarch64": 0xB7}
assert head[:4] == b"\x7fELF" and head[4] == 2, "not a 64-bit ELF file"
assert struct.unpack("<H", head[18:20])[0] == machines[arch], "another architecture"
if arch == host:
    ctypes.CDLL(path).FPDF_InitLibrary
EOF
}

if [[ -f "$LIB" && -f "$STAMP" && "$(cat "$STAMP")" == "$REQ $ARCH" ]] && lib_ok "$LIB"; then
  log "libpdfium.so present ($REQ, $ARCH): $LIB"
  exit 0
fi

mkdir -p "$LIBDIR"
TMP="$(mktemp -d "$LOCAL/pdfium-dl.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

if [[ "$LIB" != "$LOCAL_LIB" && -f "$LOCAL_LIB.source" && "$(cat "$LOCAL_LIB.source")" == "$REQ $ARCH" ]] && lib_ok "$LOCAL_LIB"; then
  log "libpdfium.so for $ARCH: the local stack's copy ($REQ)"
  cp "$LOCAL_LIB" "$TMP/libpdfium.so"
else
  log "downloading $REQ wheel (${PLATFORM_ARGS[1]:-the host platform})"
  "$PY" -m pip download --disable-pip-version-check --quiet --no-deps --only-binary=:all: \
    "${PLATFORM_ARGS[@]}" -d "$TMP" "$REQ" >&2 || die "pip download $REQ failed"

  WHEEL="$(find "$TMP" -maxdepth 1 -name 'pypdfium2-*.whl' | head -n1)"
  [[ -n "$WHEEL" ]] || die "no pypdfium2 wheel in $TMP"

  # Find the .so inside the wheel (pypdfium2_raw/libpdfium.so today) and extract it atomically.
  "$PY" - "$WHEEL" "$TMP/libpdfium.so" <<'EOF' >&2
import sys, zipfile, shutil
whl, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.rsplit('/', 1)[-1] == 'libpdfium.so']
    if not names:
        sys.exit('libpdfium.so not found in ' + whl)
    with z.open(names[0]) as src, open(out, 'wb') as dst:
        shutil.copyfileobj(src, dst)
    print('[stack] extracted', names[0], 'from', whl.rsplit('/', 1)[-1])
EOF
fi
chmod 0755 "$TMP/libpdfium.so"
lib_ok "$TMP/libpdfium.so" || die "the extracted libpdfium.so is not a whole $ARCH library"
mv -f "$TMP/libpdfium.so" "$LIB"
echo "$REQ $ARCH" > "$STAMP"
log "libpdfium.so installed: $LIB ($ARCH, $(du -h "$LIB" | cut -f1))"
