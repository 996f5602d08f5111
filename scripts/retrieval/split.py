"""Deterministic tune/check split of train.jsonl, computed on the fly (never written anywhere).

Rule (easy to reproduce in Rust): take the question id as a decimal string, SHA-256 it, read the
first 8 bytes as a big-endian unsigned integer; the question is in `check` when that integer
mod 5 == 0 (about 20 %), else in `tune` (about 80 %). The split depends on the id alone, so it
does not move when questions are added, removed or reordered.

    python split.py            # counts of each part
    python split.py --ids check  # the ids of one part, one per line
"""

import argparse
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CORPUS = os.environ.get(
    "DOCPIPE_QUESTIONS",
    os.path.normpath(os.path.join(HERE, "..", "..", "corpus", "questions")),
)

PARTS = ("tune", "check")


def part_of(question_id) -> str:
    digest = hashlib.sha256(str(question_id).encode("utf-8")).digest()
    return "check" if int.from_bytes(digest[:8], "big") % 5 == 0 else "tune"


def load_questions(corpus=DEFAULT_CORPUS):
    with open(os.path.join(corpus, "train.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def split(questions):
    """{'tune': [...], 'check': [...]} in file order."""
    out = {p: [] for p in PARTS}
    for q in questions:
        out[part_of(q["id"])].append(q)
    return out


def unseen(parts, key=lambda ref: ref):
    """The check questions none of whose cited articles any tune question cites: the honest
    figure for questions nobody has asked yet (a method fitted or chosen on tune cannot have
    learnt their articles). `key` normalises a citation ('民法典第五十四条' → '民法典第54条')."""
    asked = {key(r) for q in parts["tune"] for r in q["relevant"]}
    return [q for q in parts["check"] if not any(key(r) in asked for r in q["relevant"])]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--ids", choices=PARTS, help="print the ids of this part")
    args = ap.parse_args()
    parts = split(load_questions(args.corpus))
    if args.ids:
        for q in parts[args.ids]:
            print(q["id"])
        return
    for p in PARTS:
        refs = sum(len(q["relevant"]) for q in parts[p])
        print(f"{p}\t{len(parts[p])} questions\t{refs} relevant articles")


if __name__ == "__main__":
    sys.exit(main())
