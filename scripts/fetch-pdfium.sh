#!/usr/bin/env bash
# Puts libpdfium.so at .local/lib/libpdfium.so, taken from the PyPI wheel of pypdfium2
# (the wheel ships a plain PDFium build as pypdfium2_raw/libpdfium.so). Idempotent: a stamp file
# records which wheel the library came from, so a second run does nothing.
#
#   bash scripts/fetch-pdfium.sh            # uses .local/venv's pip if present, else python3 -m pip
#   PDFIUM_WHEEL_VERSION=5.15.2 bash scripts/fetch-pdfium.sh
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VERSION="${PDFIUM_WHEEL_VERSION:-5.15.2}"
REQ="pypdfium2==$VERSION"
LIBDIR="$LOCAL/lib"
LIB="$LIBDIR/libpdfium.so"
STAMP="$LIB.source"

PY="$(fetch_python)"

# The library must load, not only exist (a truncated copy would not).
lib_loads() {
  "$PY" - "$1" <<'EOF' >/dev/null 2>&1
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.FPDF_InitLibrary
EOF
}

if [[ -f "$LIB" && -f "$STAMP" && "$(cat "$STAMP")" == "$REQ $(uname -m)" ]] && lib_loads "$LIB"; then
  log "libpdfium.so present ($REQ): $LIB"
  exit 0
fi

mkdir -p "$LIBDIR"
TMP="$(mktemp -d "$LOCAL/pdfium-dl.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

log "downloading $REQ wheel"
"$PY" -m pip download --disable-pip-version-check --quiet --no-deps --only-binary=:all: \
  -d "$TMP" "$REQ" >&2 || die "pip download $REQ failed"

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
chmod 0755 "$TMP/libpdfium.so"
lib_loads "$TMP/libpdfium.so" || die "extracted libpdfium.so does not load"
mv -f "$TMP/libpdfium.so" "$LIB"
echo "$REQ $(uname -m)" > "$STAMP"
log "libpdfium.so installed: $LIB ($(du -h "$LIB" | cut -f1))"
