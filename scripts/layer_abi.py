#!/usr/bin/env python3
"""The layers' native libraries against Amazon Linux 2023, the provided.al2023 runtime's OS.

Every ELF shared object under the given directories (default .local/layers) is read for the symbol
versions it needs (.gnu.version_r) and the libraries it names (DT_NEEDED). Any need newer than what
AL2023 ships fails the check (`make layers` runs it):

  glibc 2.34           GLIBC_2.34 at most
  libstdc++ (GCC 11)   GLIBCXX_3.4.29, CXXABI_1.3.13 at most
  libgcc_s (GCC 11)    GCC_7.0.0 at most

A library the layer names and neither carries itself nor finds in AL2023's glibc is listed with the
layer that relies on the runtime for it (libstdc++.so.6, libgcc_s.so.1). Pure Python: no readelf.

  python3 scripts/layer_abi.py [DIR ...]
"""
from __future__ import annotations

import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The newest version of each symbol-version family that AL2023 provides (glibc 2.34, GCC 11.4).
AL2023 = {"GLIBC": (2, 34), "GLIBCXX": (3, 4, 29), "CXXABI": (1, 3, 13), "GCC": (7, 0, 0)}
GLIBC_SONAMES = {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "ld-linux-x86-64.so.2",
                 "libresolv.so.2", "libutil.so.1"}


def read_elf(path: str) -> tuple[list[str], dict[str, set[str]]] | None:
    """(DT_NEEDED sonames, {file: {version names needed}}) of a 64-bit little-endian ELF, else None."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = []
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        name, typ, flags, addr, offset, size, link, info, align, entsize = struct.unpack_from("<IIQQQQIIQQ", data, off)
        sections.append({"type": typ, "offset": offset, "size": size, "link": link, "info": info})

    def string(sec, at):
        start = sec["offset"] + at
        return data[start:data.index(b"\0", start)].decode()

    needed: list[str] = []
    versions: dict[str, set[str]] = {}
    for sec in sections:
        if sec["type"] == 6:  # SHT_DYNAMIC
            strtab = sections[sec["link"]]
            for j in range(sec["size"] // 16):
                tag, val = struct.unpack_from("<qQ", data, sec["offset"] + j * 16)
                if tag == 1:  # DT_NEEDED
                    needed.append(string(strtab, val))
        if sec["type"] == 0x6FFFFFFE:  # SHT_GNU_verneed
            strtab = sections[sec["link"]]
            at = sec["offset"]
            for _ in range(sec["info"]):
                vn_version, vn_cnt, vn_file, vn_aux, vn_next = struct.unpack_from("<HHIII", data, at)
                file = string(strtab, vn_file)
                aux = at + vn_aux
                for _ in range(vn_cnt):
                    vna_hash, vna_flags, vna_other, vna_name, vna_next = struct.unpack_from("<IHHII", data, aux)
                    versions.setdefault(file, set()).add(string(strtab, vna_name))
                    aux += vna_next
                    if not vna_next:
                        break
                at += vn_next
                if not vn_next:
                    break
    return needed, versions


def parse_version(name: str) -> tuple[str, tuple[int, ...]] | None:
    family, _, number = name.partition("_")
    if family not in AL2023 or not number:
        return None
    try:
        return family, tuple(int(x) for x in number.split("."))
    except ValueError:
        return None


def check(dirs: list[str]) -> int:
    problems, checked = [], 0
    carried = set()
    files = []
    for d in dirs:
        for base, _, names in os.walk(d):
            for n in sorted(names):
                p = os.path.join(base, n)
                if ".so" in n and os.path.isfile(p) and not os.path.islink(p):
                    files.append(p)
                    carried.add(n)
                    if ".so." in n:
                        carried.add(n.split(".so.")[0] + ".so." + n.split(".so.")[1].split(".")[0])
    for p in files:
        elf = read_elf(p)
        if elf is None:
            continue
        checked += 1
        needed, versions = elf
        newest: dict[str, tuple[int, ...]] = {}
        for names in versions.values():
            for v in names:
                parsed = parse_version(v)
                if parsed:
                    fam, num = parsed
                    newest[fam] = max(newest.get(fam, ()), num)
        over = [f"{fam}_{'.'.join(map(str, num))} (AL2023 has {fam}_{'.'.join(map(str, AL2023[fam]))})"
                for fam, num in sorted(newest.items()) if num > AL2023[fam]]
        from_runtime = [n for n in needed if n not in GLIBC_SONAMES and n not in carried]
        rel = os.path.relpath(p, ROOT)
        shown = ", ".join(f"{fam}_{'.'.join(map(str, num))}" for fam, num in sorted(newest.items()))
        print(f"[layer-abi] {rel}: needs {shown or 'no versioned symbols'}"
              + (f"; from the runtime: {', '.join(from_runtime)}" if from_runtime else ""))
        if over:
            problems.append(f"{rel} needs {', '.join(over)}: it does not load on provided.al2023")
    for p in problems:
        print(f"[layer-abi] FAIL {p}")
    if not checked:
        print(f"[layer-abi] FAIL no shared object under {', '.join(dirs)}")
        return 1
    print(f"[layer-abi] {checked} shared object(s), {len(problems)} needing more than AL2023 (glibc 2.34, GCC 11's "
          "libstdc++ and libgcc_s) provides")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(check(sys.argv[1:] or [os.path.join(ROOT, ".local", "layers")]))
