"""Articles (条) of the laws under corpus/questions/laws/, named the way docpipe's parser names
its `semantic_blocks`, plus Chinese numerals and the jieba tokenizer shared by the retrieval scripts.

An article, as docpipe's shared/parse/src/structure.rs recognises it in Markdown:
- a line that starts with 第 + numerals + 条 followed by a space, a bracketed heading (【…】) or the
  end of the line opens an article; "第三十条规定…" (no separator) does not;
- the article runs, with all its paragraphs and items, until the next article or heading
  (a `#` heading, or a plain 第N编/章/节 line short enough to be a heading);
- its section path is the open headings above it plus its own 第N条 title; the article number is
  the last 第N条 in that path.
- "第一百七十七条之一 …" is NOT an article to docpipe today (之 follows 条 with no separator), so
  its text stays inside 第一百七十七条. `split_zhi=True` makes it an article of its own, keyed
  (law, 177, 1), to show what recognising it would change.

The law name is the `law` column of laws/INDEX.tsv (no 中华人民共和国; the Civil Code's eight 编
files all carry 民法典, with article numbers running through the whole code), so an article's key
(law, number, zhi) is unique across files and is what a cited `<law>第<N>条` names.

    python articles.py            # counts per law, and a check that every cited article exists
"""

import os
import re
import sys
from dataclasses import dataclass, field

from split import DEFAULT_CORPUS, load_questions

# --- Chinese numerals -------------------------------------------------------------------------

CN_DIGITS = {"零": 0, "〇": 0, "○": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5,
             "六": 6, "七": 7, "八": 8, "九": 9}
CN_UNITS = {"十": 10, "百": 100, "千": 1000}
NUMERAL_CHARS = "".join(CN_DIGITS) + "".join(CN_UNITS) + "万"
FULLWIDTH = str.maketrans("０１２３４５６７８９", "0123456789")


def cn_to_int(s: str) -> int:
    """'一千零四十二' → 1042, '十二' → 12, '二十' → 20, '一〇四二' → 1042, '39'/'３９' → 39.
    Spaces are ignored. Raises ValueError on anything else."""
    s = re.sub(r"[\s\u3000]", "", s).translate(FULLWIDTH)
    if not s:
        raise ValueError("empty numeral")
    if s.isdigit():
        return int(s)
    if any(c not in NUMERAL_CHARS for c in s):
        raise ValueError(f"not a numeral: {s!r}")
    if not any(c in CN_UNITS or c == "万" for c in s):
        # digit by digit: 一〇四二
        return int("".join(str(CN_DIGITS[c]) for c in s))
    total, section, digit = 0, 0, None
    for c in s:
        if c in CN_DIGITS:
            digit = CN_DIGITS[c]
        elif c in CN_UNITS:
            section += (1 if digit is None else digit) * CN_UNITS[c]
            digit = None
        else:  # 万
            total += (section + (digit or 0)) * 10000
            section, digit = 0, None
    return total + section + (digit or 0)


def int_to_cn(n: int) -> str:
    """1042 → '一千零四十二', 12 → '十二', 110 → '一百一十', 1010 → '一千零一十' (as statutes write them)."""
    if n <= 0 or n >= 10000:
        raise ValueError(n)
    digits = "零一二三四五六七八九"
    out, zero_pending = [], False
    for value, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        d = n // value % 10
        if d == 0:
            if out:
                zero_pending = True
            continue
        if zero_pending:
            out.append("零")
            zero_pending = False
        if not (d == 1 and unit == "十" and not out):  # 十二, not 一十二; but 一百一十
            out.append(digits[d])
        out.append(unit)
    return "".join(out)


# --- articles ---------------------------------------------------------------------------------

ARTICLE_RE = re.compile(
    rf"^第[ \u3000]*([{NUMERAL_CHARS}0-9０-９][{NUMERAL_CHARS}0-9０-９ \u3000]*?)[ \u3000]*[条條](?:之([一二三四五六七八九十]+))?"
)
SEPARATORS = " \u3000\t【[［：:"
DIVISION_RE = re.compile(rf"^第[ \u3000]*[{NUMERAL_CHARS}0-9０-９ \u3000]+[编章节編節]")


@dataclass
class Article:
    law: str
    file: str
    number: int
    zhi: int  # 之一 → 1, 之二 → 2; 0 for an ordinary article
    path: list = field(default_factory=list)  # headings above it, outermost first (no document title)
    lines: list = field(default_factory=list)
    doc_title: str = ""  # the file's first `#` heading, e.g. 中华人民共和国民法典

    @property
    def key(self):
        return (self.law, self.number, self.zhi)

    @property
    def text(self):
        return "\n".join(self.lines)

    @property
    def title(self):
        """How a lawyer cites it, e.g. 《中华人民共和国民法典》第一千零四十二条 (for laws; judicial
        interpretations and regulations keep their own title)."""
        name = (self.doc_title or self.law).replace("《", "〈").replace("》", "〉")  # nested title marks
        return f"《{name}》第{int_to_cn(self.number)}条" + (
            f"之{int_to_cn(self.zhi)}" if self.zhi else "")


def load_index(corpus=DEFAULT_CORPUS):
    rows = []
    with open(os.path.join(corpus, "laws", "INDEX.tsv"), encoding="utf-8") as f:
        next(f)
        for line in f:
            file, law, source = line.rstrip("\n").split("\t")
            rows.append((file, law, source))
    return rows


def _article_marker(line: str, split_zhi: bool):
    m = ARTICLE_RE.match(line)
    if not m or (line[m.end():m.end() + 1] and line[m.end()] not in SEPARATORS):
        return None
    zhi = m.group(2)
    if zhi and not split_zhi:
        return None  # docpipe: 之 right after 条 is no separator, the line stays in the previous article
    try:
        number = cn_to_int(m.group(1))
    except ValueError:
        return None
    return number, (cn_to_int(zhi) if zhi else 0)


def _division_unit(line: str):
    """编/章/节 when `line` is a plain-text division heading (short, no full stop, not a
    cross-reference like 第三章规定的), else None."""
    m = DIVISION_RE.match(line)
    if not m:
        return None
    rest = line[m.end():].strip(" \u3000")
    if rest[:1] and rest[0] in "的规之中所和或及至、，。；":
        return None
    if "。" in rest or len(rest) > 40 or (rest and rest[-1] in "。，,；;：:、"):
        return None
    return m.group(0)[-1].replace("編", "编").replace("節", "节")


def parse_law(path: str, law: str, split_zhi: bool = False):
    """The articles of one Markdown law file, in document order."""
    file = os.path.basename(path)
    articles, headings, current, title = [], [], None, ""  # headings: [(level, title)]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    for raw in text.splitlines():
        line = raw.strip().lstrip("\u200b\ufeff")
        if not line:
            continue
        md = re.match(r"^(#{1,6})\s+(.*)$", line)
        if md:
            level = len(md.group(1))
            if not title:
                title = re.sub(r"\s+", "", md.group(2))
                continue
            headings = [h for h in headings if h[0] < level] + [(level, re.sub(r"\s+", " ", md.group(2)).strip())]
            current = None
            continue
        unit = _division_unit(line)
        if unit:
            level = 10 + "编章节".index(unit)  # a plain-text 编/章/节 nests below explicit headings
            headings = [h for h in headings if h[0] < level] + [(level, line)]
            current = None
            continue
        marker = _article_marker(line, split_zhi)
        if marker:
            number, zhi = marker
            current = Article(law, file, number, zhi, [h[1] for h in headings], [line], title)
            articles.append(current)
        elif current is not None:
            current.lines.append(line)
    return articles


def load_articles(corpus=DEFAULT_CORPUS, split_zhi: bool = False):
    """Every article of every file in INDEX.tsv order. Some laws come in several versions (two
    公司法 files, three of one judicial interpretation): each version's articles are articles of
    their own with the same key, as they would be in docpipe (one document per file); a ranking
    counts distinct keys (see `distinct`)."""
    out = []
    for file, law, _ in load_index(corpus):
        out.extend(parse_law(os.path.join(corpus, "laws", file), law, split_zhi))
    return out


def distinct(keys, limit):
    """The first `limit` distinct keys of a ranked sequence of article keys."""
    seen, out = set(), []
    for k in keys:
        if k not in seen:
            seen.add(k)
            out.append(k)
            if len(out) == limit:
                break
    return out


REF_RE = re.compile(r"^(.+?)第([一二三四五六七八九十百千零〇两0-9]+)条(?:之([一二三四五六七八九十]+))?$")


def parse_ref(ref: str):
    """'民法典第五十四条' → ('民法典', 54, 0); '刑法第一百七十七条之一' → ('刑法', 177, 1)."""
    m = REF_RE.match(ref)
    if not m:
        raise ValueError(ref)
    return m.group(1), cn_to_int(m.group(2)), (cn_to_int(m.group(3)) if m.group(3) else 0)


# --- tokenizer --------------------------------------------------------------------------------

_jieba = None


def jieba():
    global _jieba
    if _jieba is None:
        import logging

        import jieba as j

        j.setLogLevel(logging.WARNING)
        j.initialize()
        _jieba = j
    return _jieba


def tokenize(text: str, mode: str = "search"):
    """jieba tokens. mode 'search' = jieba.lcut_for_search (the baseline's), 'default' = jieba.lcut
    (accurate mode, HMM on), 'nohmm' = jieba.lcut(HMM=False), 'rs_search' / 'rs_default' = the
    same through jieba-rs (rjieba). Tokens are returned as jieba gives
    them, punctuation and spaces included (the baseline keeps them)."""
    j = jieba()
    if mode == "search":
        return j.lcut_for_search(text)
    if mode == "default":
        return j.lcut(text)
    if mode == "nohmm":
        return j.lcut(text, HMM=False)
    if mode == "search_nohmm":
        return j.lcut_for_search(text, HMM=False)
    if mode == "rs_search":  # jieba-rs (the Rust crate) through its Python binding rjieba
        return rjieba().cut_for_search(text, True)
    if mode == "rs_default":
        return rjieba().cut(text, True)
    raise ValueError(mode)


_rjieba = None


def rjieba():
    """jieba-rs's own segmenter (PyPI rjieba, which bundles the jieba-rs crate): what a Rust
    implementation would tokenise with."""
    global _rjieba
    if _rjieba is None:
        import rjieba as r

        _rjieba = r.Jieba()
    return _rjieba


def main():
    for split_zhi in (False, True):
        arts = load_articles(split_zhi=split_zhi)
        keys = {a.key for a in arts}
        by_file = {}
        for a in arts:
            by_file.setdefault(a.file, set())
            if a.key in by_file[a.file]:
                print("  repeated within one file:", a.file, a.key)
            by_file[a.file].add(a.key)
        missing, refs = [], 0
        for q in load_questions():
            for r in q["relevant"]:
                refs += 1
                if parse_ref(r) not in keys:
                    missing.append(r)
        laws = {a.law for a in arts}
        print(f"split_zhi={split_zhi}: {len(arts)} articles ({len(keys)} distinct law+number) in "
              f"{len(by_file)} files, {len(laws)} laws; cited articles not found: {len(missing)} of {refs}"
              + (f" e.g. {sorted(set(missing))[:6]}" if missing else ""))


if __name__ == "__main__":
    sys.exit(main())


# --- cached tokenisation ----------------------------------------------------------------------

CACHE_DIR = os.environ.get(
    "DOCPIPE_RETRIEVAL_CACHE", os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".local", "retrieval-cache"))
)


def tokenize_all(texts, mode="search"):
    """tokenize() over many texts, cached on disk (.local/retrieval-cache) by the texts' digest,
    the mode and jieba's version: jieba takes tens of seconds over the whole corpus."""
    import hashlib
    import pickle

    if mode.startswith("rs_"):
        from importlib.metadata import version

        tag = "rjieba-" + version("rjieba")
    else:
        tag = getattr(jieba(), "__version__", "?")
    h = hashlib.sha256(f"{mode}\0{tag}\0".encode())
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\0")
    path = os.path.join(CACHE_DIR, f"tokens-{h.hexdigest()[:24]}.pickle")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return pickle.load(f)
    out = [tokenize(t, mode) for t in texts]
    os.makedirs(CACHE_DIR, exist_ok=True)
    with open(path + ".tmp", "wb") as f:
        pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(path + ".tmp", path)
    return out
