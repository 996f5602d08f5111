#!/usr/bin/env python3
"""A library of laws over time for `make scale` (scripts/scale.sh): deterministic, stdlib only.

    scripts/scale_library.py --laws 5000 --out DIR [--seed 41] [--sources corpus/laws]
    scripts/scale_library.py --corpus FOLDER --out DIR

Generated (--laws N): N works made from the Markdown laws of corpus/laws (those with articles and a
title of a regulation's form). Each work is one source law under a title of its own: the source's
title with its place taken off (中华人民共和国, 上海市, 最高人民法院…) and another place put on
(河北省节约能源条例, 大同市人才流动条例, 江西省高级人民法院关于…的规定), unique over the library, and the
old place's name replaced in the text too. A work has 1 to 8 versions (weights 16:15:15:14:12:11:9:8,
mean 4.0), a year or more apart and dated no later than 2025. Each version carries the corpus'
heading notes (corpus/versions): the first "…通过" (and, for a city, the province's "…批准"), each
later one "…修正" or "…修订", all earlier notes kept; the version's date is its last note, the date
its file is named after. The first version's effect article says it takes effect one to six months
after that; later versions keep the article, as a 修正 does, and take effect when published.
Between two versions one to three articles change (a number, 应当 → 应当依法, or a sentence added),
zero to two are added (an article of another law that names no date, 本法 → 本条例) and zero or one
is removed; the articles are numbered afresh. A version is never older than a date its preface
(the text before the first article) cites, and a source whose preface names an effect date is
left out: the pipeline reads the preface with the heading notes. About one version in twenty also comes as a rendition: the same
text as .txt (the title on the first line) or .html (h1 to h3 and paragraphs).

Real files (--corpus FOLDER): every .md, .txt, .html, .docx and .pdf under FOLDER, copied as it
is (same relative path), nothing synthesised; each file counts as one law.

The manifest (DIR/manifest.jsonl) has one JSON line per file, in upload order (work by work):
{"file": path under DIR, "law": the work's index, "work": title, "version": YYYY-MM-DD,
 "kind": "version" | "rendition" | "file", "format": md|txt|html|docx|pdf, "sha256": …,
 "articles": count}; real files have no work, version or articles. DIR/summary.json sums it up.
"""
from __future__ import annotations

import argparse
import datetime as dt
import functools
import hashlib
import html
import json
import os
import random
import re
import shutil
import sys
from pathlib import Path

# ───────────────────────────── numbers ─────────────────────────────

DIGITS = "零一二三四五六七八九"
CN_VALUE = {c: i for i, c in enumerate(DIGITS)} | {"〇": 0, "两": 2}


def cn(n: int) -> str:
    """Chinese numeral as statutes write article numbers: 十, 十一, 二十, 一百零一, 一百一十, 一千零五."""
    if n <= 0:
        return DIGITS[0]
    if n < 10:
        return DIGITS[n]
    if n < 20:
        return "十" + (DIGITS[n - 10] if n > 10 else "")
    out, zero = "", False
    for value, unit in ((1000, "千"), (100, "百"), (10, "十"), (1, "")):
        d = n // value % 10
        if d == 0:
            zero = bool(out)
            continue
        if zero:
            out += "零"
            zero = False
        out += DIGITS[d] + unit
    return out


def cn_value(s: str) -> int:
    total, current = 0, 0
    for c in s:
        if c in CN_VALUE:
            current = CN_VALUE[c]
        else:
            unit = {"十": 10, "百": 100, "千": 1000}[c]
            total += (current or 1) * unit
            current = 0
    return total + current


# ───────────────────────────── titles ─────────────────────────────

# Real provinces and prefecture-level cities (short name, full name). A place whose name ends
# another's is left out (places()), so no generated title is the end of another's title.
PROVINCES = [
    ("北京", "北京市"), ("天津", "天津市"), ("上海", "上海市"), ("重庆", "重庆市"), ("河北", "河北省"),
    ("山西", "山西省"), ("内蒙古", "内蒙古自治区"), ("辽宁", "辽宁省"), ("吉林", "吉林省"),
    ("黑龙江", "黑龙江省"), ("江苏", "江苏省"), ("浙江", "浙江省"), ("安徽", "安徽省"), ("福建", "福建省"),
    ("江西", "江西省"), ("山东", "山东省"), ("河南", "河南省"), ("湖北", "湖北省"), ("湖南", "湖南省"),
    ("广东", "广东省"), ("广西", "广西壮族自治区"), ("海南", "海南省"), ("四川", "四川省"), ("贵州", "贵州省"),
    ("云南", "云南省"), ("西藏", "西藏自治区"), ("陕西", "陕西省"), ("甘肃", "甘肃省"), ("青海", "青海省"),
    ("宁夏", "宁夏回族自治区"), ("新疆", "新疆维吾尔自治区"),
]
# city -> its province (for the 批准 note)
CITIES = {
    "河北": "石家庄 唐山 秦皇岛 邯郸 邢台 保定 张家口 承德 沧州 廊坊 衡水",
    "山西": "太原 大同 阳泉 长治 晋城 朔州 晋中 运城 忻州 临汾 吕梁",
    "内蒙古": "呼和浩特 包头 乌海 赤峰 通辽 鄂尔多斯 呼伦贝尔",
    "辽宁": "沈阳 大连 鞍山 抚顺 本溪 丹东 锦州 营口 阜新 辽阳 盘锦 铁岭 朝阳 葫芦岛",
    "吉林": "长春 四平 辽源 通化 白山 松原 白城",
    "黑龙江": "哈尔滨 齐齐哈尔 鸡西 鹤岗 双鸭山 大庆 伊春 佳木斯 七台河 牡丹江 黑河 绥化",
    "江苏": "南京 无锡 徐州 常州 苏州 南通 连云港 淮安 盐城 扬州 镇江 泰州 宿迁",
    "浙江": "杭州 宁波 温州 嘉兴 湖州 绍兴 金华 衢州 舟山 台州 丽水",
    "安徽": "合肥 芜湖 蚌埠 淮南 马鞍山 淮北 铜陵 安庆 黄山 滁州 阜阳 宿州 六安 亳州 池州 宣城",
    "福建": "福州 厦门 莆田 三明 泉州 漳州 南平 龙岩 宁德",
    "江西": "南昌 景德镇 萍乡 九江 新余 鹰潭 赣州 吉安 宜春 抚州 上饶",
    "山东": "济南 青岛 淄博 枣庄 东营 烟台 潍坊 济宁 泰安 威海 日照 临沂 德州 聊城 滨州 菏泽",
    "河南": "郑州 开封 洛阳 平顶山 安阳 鹤壁 新乡 焦作 濮阳 许昌 漯河 三门峡 南阳 商丘 信阳 周口 驻马店",
    "湖北": "武汉 黄石 十堰 宜昌 襄阳 鄂州 荆门 孝感 荆州 黄冈 咸宁 随州",
    "湖南": "长沙 株洲 湘潭 衡阳 邵阳 岳阳 常德 张家界 益阳 郴州 永州 怀化 娄底",
    "广东": "广州 韶关 深圳 珠海 汕头 佛山 江门 湛江 茂名 肇庆 惠州 梅州 汕尾 河源 阳江 清远 东莞 中山 潮州 揭阳 云浮",
    "广西": "南宁 柳州 桂林 梧州 北海 防城港 钦州 贵港 玉林 百色 贺州 河池 来宾 崇左",
    "海南": "海口 三亚 儋州",
    "四川": "成都 自贡 攀枝花 泸州 德阳 绵阳 广元 遂宁 内江 乐山 南充 眉山 宜宾 广安 达州 雅安 巴中 资阳",
    "贵州": "贵阳 六盘水 遵义 安顺 毕节 铜仁",
    "云南": "昆明 曲靖 玉溪 保山 昭通 丽江 普洱 临沧",
    "西藏": "拉萨 日喀则 昌都 林芝 山南 那曲",
    "陕西": "西安 铜川 宝鸡 咸阳 渭南 延安 汉中 榆林 安康 商洛",
    "甘肃": "兰州 嘉峪关 金昌 白银 天水 武威 张掖 平凉 酒泉 庆阳 定西 陇南",
    "青海": "西宁 海东",
    "宁夏": "银川 石嘴山 吴忠 固原 中卫",
    "新疆": "乌鲁木齐 克拉玛依 吐鲁番 哈密",
}
PROVINCE_FULL = dict(PROVINCES)


@functools.lru_cache(maxsize=1)
def places() -> list[tuple[str, str, str | None]]:
    """(short, full, province short or None for a province) for every place, checked: no full
    name ends another's, so one title can never be the tail of another."""
    out = [(s, f, None) for s, f in PROVINCES]
    for prov, names in CITIES.items():
        out += [(c, c + "市", prov) for c in names.split()]
    fulls = [f for _, f, _ in out]
    assert len(set(fulls)) == len(fulls), "a place is listed twice"
    # 鞍山市 ends 马鞍山市: such a place is left out.
    return [p for p in out if not any(b != p[1] and b.endswith(p[1]) for b in fulls)]


TITLE_ENDINGS = ("法", "法典", "条例", "规定", "办法", "细则", "规则", "决定", "解释", "批复", "规范", "纲要",
                 "章程", "准则")
SENTENCE_PUNCT = set("，。；：、！？,;:")


def title_line_ok(title: str) -> bool:
    """What the pipeline's title reader takes whole from a text file's first line
    (docpipe_parse::article_ref::title_line): 4 to 64 characters, no digit or bracket (the line
    would be cut there), no sentence punctuation, not 第…, a regulation's ending."""
    return (4 <= len(title) <= 64 and not any(c.isdigit() or c in "（(" for c in title)
            and not SENTENCE_PUNCT & set(title) and not title.startswith("第")
            and title.endswith(TITLE_ENDINGS) and "《" not in title and "〈" not in title)


OLD_PLACE = re.compile(r"^(.{2,7}?(?:省|市|自治区|经济特区))(?=.{4})")


def title_base(title: str) -> tuple[str, str, str | None] | None:
    """(kind, base, old place) of a source title: kind "court" (base after 最高人民法院), "government"
    (base after 国务院), "local" (base without its place); None for what cannot take a place."""
    if "、" in title or "《" in title:
        return None
    if title.startswith("最高人民法院"):
        return "court", title[len("最高人民法院"):], None
    if title.startswith("最高人民检察院"):
        return "procuratorate", title[len("最高人民检察院"):], None
    if title.startswith("国务院"):
        return "government", title[len("国务院"):], None
    if title.startswith("中华人民共和国"):
        base = title[len("中华人民共和国"):]
        if base.endswith("法典"):
            return None
        if base.endswith("法"):  # a statute becomes a local regulation of the same matter
            stem = base[:-1]
            if len(stem) < 3:
                return None
            base = stem + "条例"
        return "local", base, None
    m = OLD_PLACE.match(title)
    if m and not title.startswith(("中国", "全国")):
        return "local", title[m.end():], m.group(1)
    for short, full, _ in places():  # 上海口岸服务条例, 北京国际…: a place named short
        if title.startswith(short) and len(title) - len(short) >= 4:
            return "local", title[len(short):], full
    return "local", title, None


def new_title(kind: str, base: str, place: tuple[str, str, str | None]) -> str | None:
    short, full, prov = place
    if kind == "court":
        return full + ("高级人民法院" if prov is None else "中级人民法院") + base
    if kind == "procuratorate":
        return full + "人民检察院" + base
    if kind == "government":
        return full + "人民政府" + base
    return full + base


# ───────────────────────────── one law, parsed ─────────────────────────────

ARTICLE = re.compile(r"^第([零〇一二三四五六七八九十百千两]+)条(?:之[一二三四五六七八九十]+)?[\s\u3000]*")
HEADING = re.compile(r"^(#{2,4})\s+(.*)$")


class Law:
    """A source law: its title, and its body as headings and articles (paragraph lists)."""

    def __init__(self, path: Path):
        text = path.read_text(encoding="utf-8")
        lines = text.split("\n")
        self.path = path
        self.title = lines[0].lstrip("#").strip()
        body = text.split("<!-- INFO END -->", 1)[1] if "<!-- INFO END -->" in text else "\n".join(lines[1:])
        self.items: list[tuple[str, object]] = []  # ("heading", (level, text)) | ("article", [paras])
        for raw in body.split("\n"):
            line = raw.strip()
            if not line:
                continue
            h = HEADING.match(line)
            if h:
                self.items.append(("heading", (len(h.group(1)), h.group(2).strip())))
                continue
            a = ARTICLE.match(line)
            if a:
                self.items.append(("article", [line[a.end():].strip()]))
            elif self.items and self.items[-1][0] == "article":
                self.items[-1][1].append(line)
            else:  # text before the first article (a preface): kept as an unnumbered paragraph
                self.items.append(("text", line))

    def articles(self) -> list[list[str]]:
        return [v for k, v in self.items if k == "article"]


# ───────────────────────────── versions ─────────────────────────────

WEIGHTS = [16, 15, 15, 14, 12, 11, 9, 8]  # versions 1..8: mean 4.0
LAST_DAY = dt.date(2025, 12, 31)
EFFECT = re.compile(r"自(\d{4})年(\d{1,2})月(\d{1,2})日起施行")
NUMBER_UNIT = re.compile(r"([一二三四五六七八九十百]+)(日|个工作日|个月|年|万元|元|人)")


def day_cn(d: dt.date) -> str:
    return f"{d.year}年{d.month}月{d.day}日"


def session(rng: random.Random, year: int) -> str:
    """第十一届…第十四次: the congress's term from the year (five-year terms from 1988's 7th)."""
    return f"第{cn(max(5, (year - 1988) // 5 + 7))}届人民代表大会常务委员会第{cn(rng.randint(2, 38))}次会议"


def notes_for(kind, place, d: dt.date, act: str, rng: random.Random) -> list[str]:
    """The heading note(s) of one act on day d; a city's acts end with the province's 批准."""
    short, full, prov = place
    if kind == "court":
        court = full + ("高级人民法院" if prov is None else "中级人民法院")
        return [f"{day_cn(d)} {court}审判委员会第{cn(rng.randint(1, 60))}次会议{act}"]
    if kind == "procuratorate":
        return [f"{day_cn(d)} {full}人民检察院检察委员会第{cn(rng.randint(1, 60))}次会议{act}"]
    if kind == "government":
        word = {"通过": "公布", "修正": "修正", "修订": "修订"}[act]
        return [f"{day_cn(d)} {full}人民政府令第{rng.randint(1, 300)}号{word}"]
    if prov is None:
        return [f"{day_cn(d)} {full}{session(rng, d.year)}{act}"]
    # A city's regulation: its congress acts, the province approves a month or two later; the
    # version is dated by the approval (the last note).
    passed = d - dt.timedelta(days=rng.randint(30, 75))
    return [f"{day_cn(passed)} {full}{session(rng, passed.year)}{act}",
            f"{day_cn(d)} {PROVINCE_FULL[prov]}{session(rng, d.year)}批准"]


def edit_paragraph(p: str, rng: random.Random, place_full: str) -> str | None:
    """One sentence of a paragraph changed, or None when this paragraph offers no edit."""
    choices = []
    m = list(NUMBER_UNIT.finditer(p))
    if m:
        choices.append("number")
    if "应当" in p and "应当依法" not in p:
        choices.append("lawfully")
    if p.endswith("。") and len(p) > 20:
        choices.append("sentence")
    if not choices:
        return None
    how = rng.choice(choices)
    if how == "number":
        hit = rng.choice(m)
        old = cn_value(hit.group(1))
        new = old + rng.choice([n for n in (-5, -2, -1, 1, 2, 5, 10) if old + n > 0])
        return p[:hit.start(1)] + cn(new) + p[hit.end(1):]
    if how == "lawfully":
        at = rng.choice([i.start() for i in re.finditer("应当", p) if not p.startswith("应当依法", i.start())])
        return p[:at] + "应当依法" + p[at + 2:]
    extras = [e for e in (f"具体办法由{place_full}人民政府另行制定。", "有关部门应当加强监督检查。",
                          "相关信息应当及时向社会公布。", "法律、法规另有规定的，从其规定。") if e not in p]
    return p + rng.choice(extras) if extras else None


def revise(items, rng: random.Random, donors: list[list[str]], place_full: str):
    """The next version's body: articles changed, added and removed. Returns (items, changes)."""
    items = [(k, list(v) if k == "article" else v) for k, v in items]
    art_at = [i for i, (k, _) in enumerate(items) if k == "article"]
    changes = {"modified": 0, "added": 0, "removed": 0}
    tries, target = 0, rng.randint(1, 3)
    while changes["modified"] < target and tries < 50:
        tries += 1
        i = rng.choice(art_at)
        paras = items[i][1]
        j = rng.randrange(len(paras))
        new = edit_paragraph(paras[j], rng, place_full)
        if new and new != paras[j]:
            paras[j] = new
            changes["modified"] += 1
    if len(art_at) > 4 and rng.random() < 0.4:  # one removed (never the first or the last)
        i = rng.choice(art_at[1:-1])
        del items[i]
        changes["removed"] += 1
    for _ in range(rng.choice([0, 0, 1, 1, 2])):  # added: another law's article
        donor = [p.replace("本法", "本条例") for p in rng.choice(donors)]
        art_at = [i for i, (k, _) in enumerate(items) if k == "article"]
        at = rng.choice(art_at[1:] or art_at)
        items.insert(at, ("article", donor))
        changes["added"] += 1
    return items, changes


def render(fmt: str, title: str, notes: list[str], items, old_place, new_place) -> tuple[str, int]:
    """The version's text in md, txt or html; the articles numbered afresh. (text, articles)."""
    def fix(s: str) -> str:
        if old_place:
            s = s.replace(old_place[1], new_place[1]).replace(old_place[0], new_place[0])
        return s

    body, n = [], 0
    for kind, v in items:
        if kind == "heading":
            level, text = v
            body.append(("h", level, fix(text)))
        elif kind == "text":
            body.append(("p", 0, fix(v)))
        else:
            n += 1
            body.append(("p", 0, f"第{cn(n)}条 {fix(v[0])}"))
            body += [("p", 0, fix(p)) for p in v[1:]]
    if fmt == "md":
        out = [f"# {title}", ""] + [x for note in notes for x in (note, "")] + ["<!-- INFO END -->", ""]
        for kind, level, text in body:
            out += [("#" * level + " " + text) if kind == "h" else text, ""]
        return "\n".join(out), n
    if fmt == "txt":
        # One paragraph a line, a blank line between, as text files of regulations are written.
        return "\n\n".join([title] + notes + [text for _, _, text in body]) + "\n", n
    e = html.escape
    out = ['<html><head><meta charset="utf-8"></head><body>', f"<h1>{e(title)}</h1>"]
    out += [f"<p>{e(note)}</p>" for note in notes]
    for kind, level, text in body:
        out.append(f"<h{level}>{e(text)}</h{level}>" if kind == "h" else f"<p>{e(text)}</p>")
    out.append("</body></html>")
    return "\n".join(out) + "\n", n


def set_effect(items, day: dt.date):
    """The last 施行 article names `day` (the first version takes effect then)."""
    for k, v in reversed(items):
        if k == "article":
            for j, p in enumerate(v):
                if EFFECT.search(p):
                    v[j] = EFFECT.sub(f"自{day_cn(day)}起施行", p)
                    return


def version_dates(rng: random.Random, count: int, floor: dt.date) -> list[dt.date]:
    """`count` dates a year to five apart, the first after `floor`, the last by LAST_DAY (fewer
    when that many do not fit after `floor`)."""
    while True:
        gaps = [rng.randint(365, 5 * 365) for _ in range(count - 1)]
        latest_start = LAST_DAY - dt.timedelta(days=sum(gaps))
        if latest_start >= floor or count == 1:
            break
        count -= 1
    first = max(floor, dt.date(max(1985, latest_start.year - 25), 1, 1))
    start = first + dt.timedelta(days=rng.randint(0, max(0, (latest_start - first).days)))
    out = [start]
    for g in gaps:
        out.append(out[-1] + dt.timedelta(days=g))
    return out


DAY_IN_TEXT = re.compile(r"(\d{4})年(\d{1,2})月(\d{1,2})日")


def preface(law: "Law") -> str:
    """The text between the heading notes and the first article (the pipeline reads its dates
    with the notes)."""
    out = []
    for kind, v in law.items:
        if kind == "article":
            break
        if kind == "text":
            out.append(v)
    return "\n".join(out)


def preface_floor(law: "Law") -> dt.date:
    """The day after which a version of this law may be dated: past every date of its preface,
    which the pipeline reads with the notes; a version older than what its preface cites would
    not be real."""
    floor = dt.date(1985, 1, 1)
    for v in preface(law).split("\n"):
        if v:
            for y, m, d in DAY_IN_TEXT.findall(v):
                try:
                    floor = max(floor, dt.date(int(y), int(m), int(d)) + dt.timedelta(days=30))
                except ValueError:
                    pass
    return floor


def generate(laws: int, out: Path, sources: Path, seed: int, rendition_share: float) -> dict:
    rng = random.Random(seed)
    pool = []
    for path in sorted(sources.glob("*.md")):
        law = Law(path)
        base = title_base(law.title)
        if (base is None or len(law.articles()) < 5 or not law.title.endswith(TITLE_ENDINGS)
                or preface_floor(law) > LAST_DAY - dt.timedelta(days=365)
                # A preface that names another act's effect date ("2013年1月1日起施行") would give
                # every version that date (the pipeline takes it for a 施行 note): left out.
                or (DAY_IN_TEXT.search(preface(law)) and "施行" in preface(law))):
            continue
        pool.append((law, base))
    if not pool:
        sys.exit(f"scale_library: no usable law under {sources}")
    # Articles to add: another law's, but never one that says when it takes effect, what it
    # repeals, or any date (the pipeline would read the version's dates from it).
    donors = [a for law, _ in pool for a in law.articles() if 20 <= sum(map(len, a)) <= 300
              and not any("施行" in p or "废止" in p or DAY_IN_TEXT.search(p) for p in a)]
    all_places = places()
    # Every (source, place) pair whose title reads whole, shuffled: the library takes the first N
    # with distinct titles.
    pairs = [(s, p) for s in range(len(pool)) for p in range(len(all_places))]
    rng.shuffle(pairs)
    titles: dict[str, tuple[int, int]] = {}
    for s, p in pairs:
        if len(titles) == laws:
            break
        kind, base, _ = pool[s][1]
        t = new_title(kind, base, all_places[p])
        if t and title_line_ok(t) and t not in titles:
            titles[t] = (s, p)
    if len(titles) < laws:
        sys.exit(f"scale_library: only {len(titles)} distinct titles can be made, {laws} asked")
    out.mkdir(parents=True, exist_ok=True)
    manifest, seen = [], {}
    totals = {"laws": laws, "versions": 0, "renditions": 0, "files": 0, "modified": 0, "added": 0,
              "removed": 0, "articles": 0}
    for w, (title, (s, p)) in enumerate(titles.items()):
        law, (kind, _, old) = pool[s]
        place = all_places[p]
        old_place = None
        if old:
            old_short = re.sub(r"(省|市|自治区|经济特区)$", "", old)
            old_place = (old_short, old)
        wrng = random.Random(f"{seed}:{w}")
        count = wrng.choices(range(1, 9), weights=WEIGHTS)[0]
        dates = version_dates(wrng, count, preface_floor(law))
        items = [(k, list(v) if k == "article" else v) for k, v in law.items]
        set_effect(items, dates[0] + dt.timedelta(days=wrng.randint(30, 180)))
        notes: list[str] = []
        folder = f"w{w // 100:03d}"
        for n, day in enumerate(dates):
            if n == 0:
                notes += notes_for(kind, place, day, "通过", wrng)
            else:
                items, ch = revise(items, wrng, donors, place[1])
                for k in ch:
                    totals[k] += ch[k]
                act = "修订" if wrng.random() < 0.3 else "修正"
                notes += notes_for(kind, place, day, act, wrng)
            formats = ["md"]
            if wrng.random() < rendition_share:
                formats.append(wrng.choice(["txt", "txt", "html"]))
            for fmt in formats:
                text, articles = render(fmt, title, notes, items, old_place, place)
                name = f"{folder}/{title}({day.isoformat()}).{fmt}"
                data = text.encode("utf-8")
                sha = hashlib.sha256(data).hexdigest()
                if sha in seen:
                    sys.exit(f"scale_library: {name} has the content of {seen[sha]}")
                seen[sha] = name
                (out / folder).mkdir(exist_ok=True)
                (out / name).write_bytes(data)
                kind_of = "version" if fmt == "md" else "rendition"
                manifest.append({"file": name, "law": w, "work": title, "version": day.isoformat(),
                                 "kind": kind_of, "format": fmt, "sha256": sha, "articles": articles})
                totals["files"] += 1
                totals["renditions" if kind_of == "rendition" else "versions"] += 1
                if kind_of == "version":
                    totals["articles"] += articles
    write_manifest(out, manifest, totals)
    return totals


FORMATS = (".md", ".txt", ".html", ".docx", ".pdf")


def copy_corpus(folder: Path, out: Path) -> dict:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in FORMATS)
    if not files:
        sys.exit(f"scale_library: no .md, .txt, .html, .docx or .pdf under {folder}")
    manifest = []
    out.mkdir(parents=True, exist_ok=True)
    for i, src in enumerate(files):
        rel = src.relative_to(folder).as_posix()
        dest = out / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        sha = hashlib.sha256(dest.read_bytes()).hexdigest()
        manifest.append({"file": rel, "law": i, "work": None, "version": None, "kind": "file",
                         "format": src.suffix.lower().lstrip("."), "sha256": sha, "articles": None})
    totals = {"laws": len(files), "files": len(files),
              "distinct_contents": len({m["sha256"] for m in manifest})}
    write_manifest(out, manifest, totals)
    return totals


def write_manifest(out: Path, manifest: list[dict], totals: dict) -> None:
    with open(out / "manifest.jsonl", "w", encoding="utf-8") as f:
        for m in manifest:
            f.write(json.dumps(m, ensure_ascii=False) + "\n")
    (out / "summary.json").write_text(json.dumps(totals, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--laws", type=int, help="works to generate")
    ap.add_argument("--corpus", type=Path, help="a folder of real files, copied as they are")
    ap.add_argument("--out", type=Path, required=True, help="the library's folder (emptied first)")
    ap.add_argument("--seed", type=int, default=41)
    ap.add_argument("--sources", type=Path, default=Path(__file__).resolve().parent.parent / "corpus" / "laws")
    ap.add_argument("--renditions", type=float, default=0.05, help="share of versions with a second rendition")
    a = ap.parse_args()
    if (a.laws is None) == (a.corpus is None):
        ap.error("give --laws N or --corpus FOLDER")
    if a.out.exists():
        shutil.rmtree(a.out)
    totals = copy_corpus(a.corpus, a.out) if a.corpus else generate(a.laws, a.out, a.sources, a.seed, a.renditions)
    print(json.dumps(totals, ensure_ascii=False))


if __name__ == "__main__":
    main()
