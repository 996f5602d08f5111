"""Resolve a query that names an article ("民法典第一千零四十二条", "劳动合同法第39条",
"刑法 第 264 条", "《中华人民共和国民法典》第一千零四十二条") to that article.

The rule (regex + a table of law names, nothing learned):
1. Normalise the query: drop spaces (ASCII and 　), full-width digits → ASCII, drop the title marks
   《》〈〉 and quotes, drop every 中华人民共和国, full-width brackets （） → ().
2. Find the article marker: (第)?<numerals>条(之<numerals>)? where numerals are Chinese
   (一千零四十二, 一〇四二) or Arabic. 第 may be left out only before Arabic numerals
   ("劳动合同法39条"); a bare Chinese numeral + 条 is too easily ordinary text.
3. The law is the LONGEST known law name, normalised the same way, that the text just before
   the marker ends with (a trailing 的 or a 编 name such as 婚姻家庭编 may sit in between). Longest
   wins, so "最高人民法院关于适用《民法典》婚姻家庭编的解释（一）第五条" is the interpretation, not
   the Civil Code its title quotes, and a law name must touch the marker, so a name quoted earlier
   in the sentence never captures it. "民法典第1042条和第1043条": a marker joined to the previous
   one by 和、及与，或至 takes its law.
4. A law name stands for every document that carries it: the Civil Code's eight 编 files, or
   two versions of one law. The article number picks the document(s) holding that article (one
   编 for the Civil Code); among versions the newest (date in the source path) comes first. A
   number the law does not have resolves to nothing.
5. docpipe has no article for 第N条之一 (it is part of 第N条), so 之一 resolves to 第N条.

    python resolver.py "民法典第一千零四十二条"     # resolve one query
    python resolver.py --test                      # the generated accuracy test (200 articles × 8 ways)
"""

import argparse
import os
import random
import re
import sys

from articles import NUMERAL_CHARS, cn_to_int, int_to_cn, load_articles, load_index
from split import DEFAULT_CORPUS, load_questions

CN_NUM = f"[{NUMERAL_CHARS}]+"
MARKER = re.compile(rf"(?:第({CN_NUM}|\d+)|(\d+))条(?:之({CN_NUM}))?")


def normalise(s: str) -> str:
    s = s.translate(str.maketrans("０１２３４５６７８９（）", "0123456789()"))
    s = re.sub(r"[\s\u3000《》〈〉「」“”\"'‘’<>]", "", s)
    return s.replace("中华人民共和国", "")


class Resolver:
    def __init__(self, corpus=DEFAULT_CORPUS, articles=None):
        articles = articles if articles is not None else load_articles(corpus)
        version = {f: src for f, _, src in load_index(corpus)}  # source path carries (YYYY-MM-DD)
        self.by_key = {}
        for a in articles:
            self.by_key.setdefault((a.law, a.number), []).append(a)
        for arts in self.by_key.values():
            arts.sort(key=lambda a: version.get(a.file, ""), reverse=True)  # newest version first
        self.names = {}  # normalised name -> law (INDEX name); both the INDEX name and the title
        for a in articles:
            for n in (a.law, a.doc_title):
                self.names.setdefault(normalise(n), a.law)
        self.longest_first = sorted(self.names, key=len, reverse=True)

    def law_before(self, prefix: str):
        candidates = [prefix, re.sub(r"的$", "", prefix)]
        if prefix.endswith("编"):  # 民法典婚姻家庭编第1042条: a 编 name of 2-6 characters in between
            candidates += [prefix[: -(k + 1)] for k in range(2, 7)]
        for candidate in candidates:
            for name in self.longest_first:
                if candidate.endswith(name):
                    return self.names[name]
        return None

    def resolve(self, query: str):
        """[(Article, ...)] for each article the query names (first one first), newest version
        first within one; [] when it names none. A marker right after another one's
        (和、及与，或至 between) takes that one's law."""
        q = normalise(query)
        out, last_law, last_end = [], None, -1
        for m in MARKER.finditer(q):
            number = m.group(1) or m.group(2)
            law = self.law_before(q[: m.start()])
            if not law and last_law and q[last_end: m.start()] in ("", "和", "、", "及", "与", "，", ",", "或", "至"):
                law = last_law  # 民法典第1042条和第1043条: the second one is the same law's
            if not law:
                continue
            last_law, last_end = law, m.end()
            try:
                n = cn_to_int(number)
            except ValueError:
                continue
            arts = self.by_key.get((law, n))
            if arts:
                out.append(arts)
        return out


def written_ways(a):
    law, n, cn = a.law, a.number, int_to_cn(a.number)
    full = a.doc_title  # 中华人民共和国劳动合同法, or an interpretation's own title
    fw = str(n).translate(str.maketrans("0123456789", "０１２３４５６７８９"))
    return {
        "law + 第Chinese条": f"{law}第{cn}条",
        "中华人民共和国 + law + 第Chinese条": f"{full}第{cn}条",
        "law + 第Arabic条": f"{law}第{n}条",
        "law 第 Arabic 条 (spaces)": f"{law} 第 {n} 条",
        "lawyer citation 《full title》第Chinese条": a.title,
        "law + Arabic条 (no 第)": f"{law}{n}条",
        "in a sentence": f"请问{law}第{cn}条是怎么规定的？",
        "full-width digits": f"{law}第{fw}条",
    }


def test(n=200, seed=13):
    articles = load_articles()
    r = Resolver(articles=articles)
    keys = sorted({(a.law, a.number) for a in articles})
    sample = random.Random(seed).sample(keys, n)
    first = {k: r.by_key[k][0] for k in sample}
    ways = list(written_ways(first[sample[0]]))
    right = {w: 0 for w in ways}
    wrong = []
    for k in sample:
        for way, q in written_ways(first[k]).items():
            got = r.resolve(q)
            if got and (got[0][0].law, got[0][0].number) == k:
                right[way] += 1
            else:
                wrong.append((way, q, got[0][0].title if got else None))
    civil = sum(1 for k in sample if k[0] == "民法典")
    interp = sum(1 for k in sample if "《" in k[0])
    print(f"{n} distinct articles sampled (seed {seed}; {civil} from the Civil Code, {interp} from interpretations "
          f"whose title quotes another law in 《》), each written {len(ways)} ways:\n")
    print("| written as | example | resolved correctly |\n| --- | --- | ---: |")
    example = written_ways(r.by_key[("民法典", 1042)][0])
    for w in ways:
        print(f"| {w} | {example[w]} | {right[w]}/{n} |")
    total = sum(right.values())
    print(f"| **all** | | **{total}/{n * len(ways)}** |")
    for w, q, got in wrong[:10]:
        print(f"  wrong: {w}: {q!r} -> {got}")

    # The other direction: everyday questions that name no article should resolve to nothing.
    hits = [(q["question"], [g[0].title for g in r.resolve(q["question"])]) for q in load_questions()]
    hits = [h for h in hits if h[1]]
    print(f"\ntrain.jsonl questions that resolve to an article: {len(hits)} of 1231")
    for qtext, got in hits[:10]:
        print(f"  {qtext[:60]} -> {got}")

    hard = [
        ("最高人民法院关于适用《中华人民共和国民法典》婚姻家庭编的解释（一）第五条", ("最高人民法院关于适用《民法典》婚姻家庭编的解释（一）", 5)),
        ("民法典婚姻家庭编第1042条", ("民法典", 1042)),
        ("刑法第一百七十七条之一", ("刑法", 177)),
        ("依照民法典的规定，劳动合同法第39条怎么理解", ("劳动合同法", 39)),
        ("中华人民共和国刑法 第 264 条", ("刑法", 264)),
        ("民法典第一〇四二条", ("民法典", 1042)),
        ("民法典第二千条", None),
        ("民法典第1042条和第1043条", ("民法典", 1042)),
        ("婚姻法第三条", None),  # repealed, not in the corpus
        ("第二十条规定", None),
    ]
    print("\nedge cases:")
    for q, want in hard:
        got = r.resolve(q)
        key = (got[0][0].law, got[0][0].number) if got else None
        print(f"  {'ok ' if key == want else 'BAD'} {q} -> {got[0][0].title + ' (' + got[0][0].file + ')' if got else None}")
    return total, n * len(ways)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("query", nargs="*")
    ap.add_argument("--test", action="store_true")
    args = ap.parse_args()
    if args.test:
        total, n = test()
        return 0 if total == n else 1
    r = Resolver()
    for q in args.query:
        got = r.resolve(q)
        print(q, "->", [[f"{a.title} ({a.file})" for a in arts] for arts in got] or "nothing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
