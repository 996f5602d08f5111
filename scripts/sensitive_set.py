"""Generates the labelled test set of a sensitive-data scanner: tests/fixtures/sensitive/.

200 Chinese documents (docs/001.md .. docs/200.md, 1-6 KB each) made of paragraphs of the Markdown laws
in corpus/laws/ and of sentences of the kind a compliance team must not spread (contracts, HR notices,
court judgments, complaint letters). Those sentences carry planted values (PRC resident identity numbers,
mainland mobile numbers, bank card numbers, e-mail addresses), listed in labels.json, and look-alikes
that a scanner must not flag (wrong check characters, impossible birth dates, numbers failing Luhn,
landlines, dates, article and document numbers, amounts, order numbers, obfuscated addresses, very long
numbers), which are not listed. The README of the set states the counts.

Deterministic: a fixed seed, the laws read in sorted order, no clock, no hash ordering. Running it again
over the same corpus/laws/ rewrites the folder byte for byte. It checks its own output before writing
(check characters, dates, Luhn, every planted value present once, every look-alike failing its check, and
an independent scan of every document finding exactly the labelled values) and fails loudly otherwise.

usage (from anywhere; paths are taken relative to the repository root):
    python3 scripts/sensitive_set.py
"""
import calendar
import datetime
import json
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAWS = ROOT / "corpus" / "laws"
OUT = ROOT / "tests" / "fixtures" / "sensitive"
SEED = 20240611
N_DOCS = 200
MIN_BYTES, MAX_BYTES = 1024, 6144
MAX_PLANTED_PER_DOC = 10
MAX_LOOKALIKES_PER_DOC = 10
N_EMPTY_DOCS = 8  # documents with no planted value at all (false positives only)

PLANTED_COUNTS = {"id_card": 185, "mobile": 200, "bank_card": 175, "email": 180}
LOOKALIKE_COUNTS = {
    "id_bad_check": 80,       # 18 characters, real area code and date, wrong check character
    "id_bad_date": 70,        # 18 characters, month 13 / day 32 / month 00 / 30 Feb, right check character
    "card_bad_luhn": 90,      # 16-19 digits with card prefixes, failing Luhn
    "mobile_bad_prefix": 70,  # 11 digits starting with 10, 11, 12 or 2
    "landline": 70,           # 010-12345678, 0755-8888 6666, ...
    "date": 55,               # 20240101, 2024年1月1日, 2024-01-01
    "article_number": 45,     # 第一千二百条, 第1234条
    "doc_number": 55,         # 国发〔2024〕12号, 京(2023)民初字第12345号
    "amount": 55,             # 1,234,567.89元, 12345678901234.56
    "order_number": 70,       # HT20240101000123, 202401010001234567
    "email_text": 50,         # zhang at example dot com, @某某
    "long_number": 40,        # 20-26 digits
    "credit_code": 20,        # 统一社会信用代码 (18 characters with letters)
}

# ---------------------------------------------------------------------------------------------
# checks

ID_WEIGHTS = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
ID_CHECK = "10X98765432"
PROVINCES = {11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46,
             50, 51, 52, 53, 54, 61, 62, 63, 64, 65}


def id_check_char(first17):
    return ID_CHECK[sum(int(c) * w for c, w in zip(first17, ID_WEIGHTS)) % 11]


def id_shape_ok(v):
    return len(v) == 18 and v[:17].isdigit() and (v[17].isdigit() or v[17] in "Xx")


def id_checksum_ok(v):
    return id_shape_ok(v) and v[17].upper() == id_check_char(v[:17])


def id_date_ok(v):
    try:
        d = datetime.date(int(v[6:10]), int(v[10:12]), int(v[12:14]))
    except ValueError:
        return False
    return 1940 <= d.year <= 2010


def id_valid(v):
    return id_checksum_ok(v) and id_date_ok(v) and int(v[:2]) in PROVINCES


def luhn_ok(digits):
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def luhn_digit(body):
    for d in "0123456789":
        if luhn_ok(body + d):
            return d
    raise AssertionError(body)


def digits(v):
    return re.sub(r"\D", "", v)


def card_prefix_ok(d):
    return (d.startswith("62") and len(d) in (16, 19)) or (d.startswith("4") and len(d) == 16) or \
        (d[:2] in ("51", "52", "53", "54", "55") and len(d) == 16)


# An independent scan: boundary-aware patterns plus the checks above. Every document must give exactly
# its labels. It is deliberately broader than the planted formats where that costs nothing: any 16-19
# digit run passing Luhn and any 18-character run passing the ID checks counts as a hit.
BEFORE = r"(?<![0-9A-Za-z])(?<![0-9][ -])"
AFTER = r"(?![0-9A-Za-z])(?![ -][0-9])"
RE_ID = re.compile(BEFORE + r"\d{17}[0-9Xx]" + AFTER)
RE_MOBILE = re.compile(r"(?<![0-9A-Za-z+])(?<![0-9][ -])(?:\+86[ -]?|86)?1[3-9]\d([ -]?)\d{4}\1\d{4}" + AFTER)
RE_CARD_PLAIN = re.compile(BEFORE + r"\d{16,19}" + AFTER)
RE_CARD_GROUPED = re.compile(BEFORE + r"\d{4}([ -])\d{4}(?:\1\d{4}){2}(?:\1\d{1,4})?" + AFTER)
RE_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"
                      r"(?![A-Za-z0-9-])")


def scan(text):
    hits = []
    for m in RE_ID.finditer(text):
        if id_valid(m.group()):
            hits.append((m.start(), "id_card", m.group()))
    for m in RE_MOBILE.finditer(text):
        hits.append((m.start(), "mobile", m.group()))
    for rx in (RE_CARD_PLAIN, RE_CARD_GROUPED):
        for m in rx.finditer(text):
            d = digits(m.group())
            if 16 <= len(d) <= 19 and luhn_ok(d):
                hits.append((m.start(), "bank_card", m.group()))
    for m in RE_EMAIL.finditer(text):
        hits.append((m.start(), "email", m.group()))
    return sorted(hits)


# ---------------------------------------------------------------------------------------------
# material

AREAS = [
    ("110101", "北京市东城区"), ("110105", "北京市朝阳区"), ("110108", "北京市海淀区"),
    ("120101", "天津市和平区"), ("120104", "天津市南开区"), ("130102", "河北省石家庄市长安区"),
    ("130203", "河北省唐山市路北区"), ("140105", "山西省太原市小店区"), ("150102", "内蒙古自治区呼和浩特市新城区"),
    ("210102", "辽宁省沈阳市和平区"), ("210202", "辽宁省大连市中山区"), ("220102", "吉林省长春市南关区"),
    ("230102", "黑龙江省哈尔滨市道里区"), ("310101", "上海市黄浦区"), ("310104", "上海市徐汇区"),
    ("310115", "上海市浦东新区"), ("320102", "江苏省南京市玄武区"), ("320506", "江苏省苏州市吴中区"),
    ("330102", "浙江省杭州市上城区"), ("330106", "浙江省杭州市西湖区"), ("330203", "浙江省宁波市海曙区"),
    ("340104", "安徽省合肥市蜀山区"), ("350102", "福建省福州市鼓楼区"), ("350203", "福建省厦门市思明区"),
    ("360102", "江西省南昌市东湖区"), ("370102", "山东省济南市历下区"), ("370202", "山东省青岛市市南区"),
    ("410105", "河南省郑州市金水区"), ("420106", "湖北省武汉市武昌区"), ("430104", "湖南省长沙市岳麓区"),
    ("440106", "广东省广州市天河区"), ("440305", "广东省深圳市南山区"), ("441900", "广东省东莞市"),
    ("450103", "广西壮族自治区南宁市青秀区"), ("460105", "海南省海口市秀英区"), ("500103", "重庆市渝中区"),
    ("510107", "四川省成都市武侯区"), ("520102", "贵州省贵阳市南明区"), ("530102", "云南省昆明市五华区"),
    ("540102", "西藏自治区拉萨市城关区"), ("610113", "陕西省西安市雁塔区"), ("620102", "甘肃省兰州市城关区"),
    ("630102", "青海省西宁市城东区"), ("640104", "宁夏回族自治区银川市兴庆区"), ("650102", "新疆维吾尔自治区乌鲁木齐市天山区"),
]
STREETS = ["建设路", "人民路", "解放大道", "中山路", "和平街", "文化路", "新华街", "滨江路", "长安街", "朝阳路",
           "东风路", "光明巷", "学府路", "幸福里", "花园路"]

SURNAMES = [("王", "wang"), ("李", "li"), ("张", "zhang"), ("刘", "liu"), ("陈", "chen"), ("杨", "yang"),
            ("黄", "huang"), ("赵", "zhao"), ("吴", "wu"), ("周", "zhou"), ("徐", "xu"), ("孙", "sun"),
            ("马", "ma"), ("朱", "zhu"), ("胡", "hu"), ("郭", "guo"), ("何", "he"), ("高", "gao"),
            ("林", "lin"), ("罗", "luo"), ("郑", "zheng"), ("梁", "liang"), ("谢", "xie"), ("宋", "song"),
            ("唐", "tang"), ("韩", "han"), ("冯", "feng"), ("邓", "deng"), ("曹", "cao"), ("彭", "peng"),
            ("曾", "zeng"), ("田", "tian"), ("董", "dong"), ("潘", "pan"), ("袁", "yuan"), ("蔡", "cai"),
            ("蒋", "jiang"), ("余", "yu"), ("杜", "du"), ("叶", "ye"), ("程", "cheng"), ("魏", "wei"),
            ("苏", "su"), ("丁", "ding"), ("任", "ren"), ("沈", "shen"), ("姚", "yao"), ("卢", "lu"),
            ("崔", "cui"), ("钟", "zhong"), ("谭", "tan"), ("范", "fan"), ("金", "jin"), ("石", "shi"),
            ("廖", "liao"), ("贾", "jia"), ("夏", "xia"), ("方", "fang"), ("白", "bai"), ("孟", "meng"),
            ("秦", "qin"), ("邱", "qiu"), ("薛", "xue"), ("雷", "lei"), ("侯", "hou"), ("龙", "long"),
            ("顾", "gu"), ("毛", "mao"), ("郝", "hao"), ("邵", "shao"), ("钱", "qian"), ("严", "yan")]
GIVEN = [("伟", "wei"), ("芳", "fang"), ("娜", "na"), ("敏", "min"), ("静", "jing"), ("丽", "li"),
         ("强", "qiang"), ("磊", "lei"), ("军", "jun"), ("洋", "yang"), ("勇", "yong"), ("艳", "yan"),
         ("杰", "jie"), ("娟", "juan"), ("涛", "tao"), ("明", "ming"), ("超", "chao"), ("霞", "xia"),
         ("平", "ping"), ("刚", "gang"), ("英", "ying"), ("华", "hua"), ("文", "wen"), ("辉", "hui"),
         ("鑫", "xin"), ("宇", "yu"), ("浩", "hao"), ("婷", "ting"), ("雪", "xue"), ("琳", "lin"),
         ("晨", "chen"), ("凯", "kai"), ("欣", "xin"), ("怡", "yi"), ("佳", "jia"), ("俊", "jun"),
         ("博", "bo"), ("帆", "fan"), ("颖", "ying"), ("瑞", "rui"), ("晓", "xiao"), ("建", "jian"),
         ("国", "guo"), ("志", "zhi"), ("海", "hai"), ("红", "hong"), ("玉", "yu"), ("子", "zi"),
         ("涵", "han"), ("思", "si"), ("雨", "yu"), ("嘉", "jia"), ("天", "tian"), ("振", "zhen"),
         ("宏", "hong"), ("毅", "yi"), ("亮", "liang"), ("斌", "bin"), ("鹏", "peng"), ("飞", "fei"),
         ("倩", "qian"), ("玲", "ling"), ("燕", "yan"), ("萍", "ping"), ("慧", "hui"), ("媛", "yuan")]
CITIES = ["北京", "上海", "深圳", "杭州", "成都", "武汉", "南京", "广州", "苏州", "天津", "西安", "重庆", "长沙", "厦门"]
BRANDS = [("华信", "huaxin"), ("中泰", "zhongtai"), ("金鼎", "jinding"), ("瑞丰", "ruifeng"), ("天合", "tianhe"),
          ("恒远", "hengyuan"), ("信达", "xinda"), ("博远", "boyuan"), ("国鑫", "guoxin"), ("龙腾", "longteng"),
          ("安和", "anhe"), ("正通", "zhengtong"), ("启明", "qiming"), ("远航", "yuanhang"), ("汇通", "huitong"),
          ("鼎盛", "dingsheng"), ("宏泰", "hongtai"), ("思源", "siyuan"), ("明德", "mingde"), ("嘉禾", "jiahe")]
TRADES = [("科技", "tech"), ("网络科技", "net"), ("物流", "wuliu"), ("建设工程", "jianshe"), ("商贸", "trade"),
          ("医药", "pharma"), ("置业", "zhiye"), ("人力资源服务", "hr"), ("餐饮管理", "food"), ("教育咨询", "edu")]
FREE_MAIL = ["163.com", "126.com", "qq.com", "sina.com", "sina.cn", "sohu.com", "foxmail.com", "aliyun.com"]
DEPTS = ["财务部", "人力资源部", "市场部", "技术研发中心", "行政部", "客户服务部", "法务部", "采购部", "运营部"]
JOBS = ["会计", "软件开发", "销售", "行政专员", "仓储管理", "客服", "法务专员", "采购", "产品经理"]

UNIONPAY = [("622202", "中国工商银行", 19), ("621226", "中国工商银行", 19), ("621700", "中国建设银行", 19),
            ("622700", "中国建设银行", 19), ("622848", "中国农业银行", 19), ("621661", "中国银行", 19),
            ("622260", "交通银行", 19), ("621799", "中国邮政储蓄银行", 19), ("623058", "平安银行", 19),
            ("622588", "招商银行", 16), ("621483", "招商银行", 16), ("622155", "平安银行", 16),
            ("622689", "中信银行", 16), ("622630", "华夏银行", 16), ("625965", "招商银行", 16)]
VISA = [("427020", "中国工商银行"), ("436742", "中国建设银行"), ("438088", "中国银行"), ("439225", "招商银行"),
        ("404117", "中信银行"), ("456351", "中国银行")]
MASTERCARD = [("512315", "中国工商银行"), ("524047", "招商银行"), ("552599", "中国农业银行"),
              ("518710", "中信银行"), ("545619", "交通银行"), ("532450", "中国建设银行")]
MOBILE_SEGMENTS = ["130", "131", "132", "133", "134", "135", "136", "137", "138", "139", "145", "147", "150",
                   "151", "152", "153", "155", "156", "157", "158", "159", "166", "170", "173", "175", "176",
                   "177", "178", "180", "181", "182", "183", "184", "185", "186", "187", "188", "189", "191",
                   "198", "199"]
LANDLINE_AREAS = [("010", 8), ("020", 8), ("021", 8), ("022", 8), ("023", 8), ("024", 8), ("025", 8), ("027", 8),
                  ("028", 8), ("029", 8), ("0755", 8), ("0571", 8), ("0512", 8), ("0532", 8), ("0731", 8),
                  ("0871", 8), ("0898", 8), ("0931", 7)]
PROV_ABBR = ["京", "沪", "粤", "浙", "苏", "川", "鄂", "湘", "鲁", "豫", "津", "渝", "陕", "闽"]

CN_DIGITS = "零一二三四五六七八九"


def cn_number(n):
    """1..9999 in Chinese numerals as used in article numbers (十五, 一百一十, 一千零一十, 一千二百)."""
    assert 1 <= n <= 9999
    if n < 10:
        return CN_DIGITS[n]
    if n < 20:
        return "十" + (CN_DIGITS[n % 10] if n % 10 else "")
    out, zero = "", False
    for unit, value in (("千", 1000), ("百", 100), ("十", 10), ("", 1)):
        d = n // value % 10
        if d:
            if zero and out:
                out += "零"
            out += CN_DIGITS[d] + unit
            zero = False
        else:
            zero = True
    return out


# ---------------------------------------------------------------------------------------------
# the laws

def load_laws():
    laws = []
    for path in sorted(LAWS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        title = text.split("\n", 1)[0].lstrip("# ").strip()
        body = text.split("<!-- INFO END -->", 1)[-1]
        paras = []
        for line in body.split("\n"):
            line = line.strip()
            if not line or line.startswith(("#", "<", "|", ">")):
                continue
            # nothing that could itself look like a value: no Latin letters, no '@', no long digit runs
            if re.search(r"[A-Za-z@]|\d{5,}", line) or len(line) > 500:
                continue
            paras.append(line)
        starts = [i for i, p in enumerate(paras) if re.match(r"第[零一二三四五六七八九十百千]+条", p)]
        if len(paras) >= 8 and starts:
            laws.append((title, paras, starts))
    assert len(laws) > 100, f"expected the Markdown laws under {LAWS.relative_to(ROOT)}"
    return laws


# ---------------------------------------------------------------------------------------------
# generators of values

class Gen:
    def __init__(self, rng):
        self.rng = rng
        self.used = set()

    def fresh(self, make):
        for _ in range(1000):
            v = make()
            if v not in self.used and digits(v) not in self.used:
                self.used.add(v)
                if len(digits(v)) >= 8:
                    self.used.add(digits(v))
                return v
        raise AssertionError("no fresh value")

    # people and places
    def person(self):
        r = self.rng
        s = r.choice(SURNAMES)
        g = [r.choice(GIVEN) for _ in range(r.choice([1, 2, 2, 2]))]
        return {"name": s[0] + "".join(x[0] for x in g), "sur": s[1], "given": "".join(x[1] for x in g),
                "ini": "".join(x[1][0] for x in g)}

    def company(self):
        r = self.rng
        b, t = r.choice(BRANDS), r.choice(TRADES)
        name = r.choice(CITIES) + b[0] + t[0] + "有限公司"
        domain = r.choice([b[1] + "-" + t[1], b[1] + t[1], b[1], b[1] + "group"])
        tld = r.choice([".com", ".com", ".cn", ".com.cn", ".com.cn", ".org"])
        return {"name": name, "domain": domain + tld, "brand": b[1]}

    # identity numbers
    def birth(self):
        r = self.rng
        y, m = r.randint(1940, 2010), r.randint(1, 12)
        return y, m, r.randint(1, calendar.monthrange(y, m)[1])

    def id_card(self, want_x=False):
        r = self.rng

        def make():
            area = r.choice(AREAS)[0]
            y, m, d = self.birth()
            while True:
                first = f"{area}{y:04d}{m:02d}{d:02d}{r.randint(1, 999):03d}"
                c = id_check_char(first)
                v = first + c
                if (c == "X") == want_x and not (v.isdigit() and luhn_ok(v)):
                    return v
        return self.fresh(make)

    def id_bad_check(self):
        r = self.rng

        def make():
            while True:
                first = f"{r.choice(AREAS)[0]}{'%04d%02d%02d' % self.birth()}{r.randint(1, 999):03d}"
                c = r.choice([x for x in "0123456789X" if x != id_check_char(first)])
                v = first + c
                if not (v.isdigit() and luhn_ok(v)):
                    return v
        return self.fresh(make)

    def id_bad_date(self):
        r = self.rng

        def make():
            while True:
                y = r.randint(1940, 2010)
                m, d = r.choice([(13, r.randint(1, 28)), (r.randint(1, 12), 32), (0, r.randint(1, 28)),
                                 (2, 30), (r.randint(1, 12), 0), (r.choice([4, 6, 9, 11]), 31)])
                first = f"{r.choice(AREAS)[0]}{y:04d}{m:02d}{d:02d}{r.randint(1, 999):03d}"
                v = first + id_check_char(first)
                if not (v.isdigit() and luhn_ok(v)):
                    return v
        return self.fresh(make)

    # cards
    def card_digits(self, brand, valid, length=None):
        r = self.rng
        if brand == "unionpay":
            prefix, bank, n = r.choice([u for u in UNIONPAY if length in (None, u[2])] or UNIONPAY)
        elif brand == "visa":
            (prefix, bank), n = r.choice(VISA), 16
        else:
            (prefix, bank), n = r.choice(MASTERCARD), 16
        n = length or n
        while True:
            body = prefix + "".join(r.choice("0123456789") for _ in range(n - len(prefix) - 1))
            good = luhn_digit(body)
            v = body + (good if valid else r.choice([d for d in "0123456789" if d != good]))
            if len(v) == 18 and id_checksum_ok(v):
                continue
            return v, bank

    @staticmethod
    def group(d, sep):
        return sep.join(d[i:i + 4] for i in range(0, len(d), 4))

    def card(self, valid, brand, style, length=None):
        holder = {}

        def make():
            d, holder["bank"] = self.card_digits(brand, valid, length)
            return d if style == "plain" else self.group(d, " " if style == "space" else "-")
        return self.fresh(make), holder["bank"]

    # phones
    def mobile(self, style):
        r = self.rng

        def make():
            seg = r.choice(MOBILE_SEGMENTS)
            a, b = f"{r.randint(0, 9999):04d}", f"{r.randint(0, 9999):04d}"
            plain = seg + a + b
            return {"plain": plain, "hyphen": f"{seg}-{a}-{b}", "space": f"{seg} {a} {b}",
                    "+86 plain": "+86 " + plain, "+86- plain": "+86-" + plain, "86 plain": "86" + plain,
                    "+86 space": f"+86 {seg} {a} {b}", "+86- hyphen": f"+86-{seg}-{a}-{b}"}[style]

        def make_new():
            while True:
                v = make()
                if digits(v)[-11:] not in self.used:
                    return v
        v = self.fresh(make_new)
        self.used.add(digits(v)[-11:])
        return v

    def mobile_bad_prefix(self):
        r = self.rng

        def make():
            head = r.choice(["10", "11", "12", "2"])
            d = head + "".join(r.choice("0123456789") for _ in range(11 - len(head)))
            return d if r.random() < 0.8 else f"{d[:3]}-{d[3:7]}-{d[7:]}"
        return self.fresh(make)

    def landline(self):
        r = self.rng

        def make():
            area, n = r.choice(LANDLINE_AREAS)
            local = str(r.randint(2, 8)) + "".join(r.choice("0123456789") for _ in range(n - 1))
            style = r.choice(["hyphen", "hyphen", "hyphen", "split", "paren", "ext"])
            if style == "split" and n == 8:
                return f"{area}-{local[:4]} {local[4:]}"
            if style == "paren":
                return f"（{area}）{local}"
            if style == "ext":
                return f"{area}-{local}转{r.randint(100, 8999)}"
            return f"{area}-{local}"
        return self.fresh(make)

    # e-mail
    def email(self, person, company):
        r = self.rng

        def make():
            s, g, i = person["sur"], person["given"], person["ini"]
            year = r.randint(1970, 2005)
            local = r.choice([s + g, s + "." + g, g + "." + s, s + i, i + s, s + g + str(r.randint(1, 99)),
                              s[0] + i + str(year), s + g + "+" + r.choice(["hr", "work", "invoice", "legal"]),
                              s + "_" + g, (s + g).capitalize(), s + "." + g + str(r.randint(1, 9))])
            if r.random() < 0.1:
                return f"{r.randint(10**7, 10**10 - 1)}@qq.com"
            if r.random() < 0.5:
                return f"{local}@{company['domain']}"
            if r.random() < 0.2:
                return f"{r.choice(['hr', 'legal', 'service', 'kefu', 'tousu', 'finance'])}@{company['domain']}"
            return f"{local}@{r.choice(FREE_MAIL)}"
        return self.fresh(make)

    # look-alikes of other shapes
    def date(self):
        r = self.rng
        y, m = r.randint(2000, 2025), r.randint(1, 12)
        d = r.randint(1, calendar.monthrange(y, m)[1])
        return r.choice([f"{y}{m:02d}{d:02d}", f"{y}年{m}月{d}日", f"{y}-{m:02d}-{d:02d}", f"{y}{m:02d}{d:02d}"])

    def article(self):
        r = self.rng
        n = r.choice([r.randint(1, 99), r.randint(100, 1260), r.randint(1000, 9999)])
        return f"第{cn_number(n)}条" if r.random() < 0.5 else f"第{n}条"

    def doc_number(self):
        r = self.rng
        y = r.randint(2005, 2024)
        p = r.choice(PROV_ABBR)
        return r.choice([
            f"国发〔{y}〕{r.randint(1, 60)}号", f"国办发〔{y}〕{r.randint(1, 90)}号",
            f"{p}政办发〔{y}〕{r.randint(1, 120)}号", f"{p}人社规〔{y}〕{r.randint(1, 30)}号",
            f"{p}({y}){r.choice(['民初', '民终', '刑初', '行初'])}字第{r.randint(100, 99999)}号",
            f"（{y}）{p}{r.randint(101, 9999):04d}{r.choice(['民初', '民终', '执'])}{r.randint(100, 99999)}号",
        ])

    def amount(self):
        r = self.rng
        style = r.choice(["grouped", "grouped", "plain", "yuan_plain", "cny"])
        if style == "plain":
            whole = str(r.randint(10**11, 10**15 - 1))  # 12-15 digits, below any card length
            return f"{whole}.{r.randint(0, 99):02d}"
        whole = r.randint(1000, 10**10)
        if style == "yuan_plain":
            return f"{whole}.{r.randint(0, 99):02d}元"
        g = f"{whole:,}.{r.randint(0, 99):02d}"
        return f"{g}元" if style == "grouped" else f"人民币{g}元"

    def order_number(self):
        r = self.rng

        def make():
            y, m = r.randint(2018, 2024), r.randint(1, 12)
            day = f"{y}{m:02d}{r.randint(1, 28):02d}"
            style = r.choice(["HT", "letters", "d18", "d18", "d16", "d19"])
            while True:
                if style == "HT":
                    v = f"HT{day}{r.randint(0, 999999):06d}"
                elif style == "letters":
                    v = f"{r.choice(['DD', 'PO', 'BX', 'SO', 'JY'])}{day}{r.randint(0, 10**8 - 1):08d}"
                else:
                    v = day + "".join(r.choice("0123456789") for _ in range(int(style[1:]) - 8))
                d = digits(v)
                if not (16 <= len(d) <= 19 and luhn_ok(d)) and not id_checksum_ok(d):
                    return v
        return self.fresh(make)

    def long_number(self):
        r = self.rng
        return self.fresh(lambda: str(r.randint(1, 9)) + "".join(r.choice("0123456789")
                                                                    for _ in range(r.randint(19, 25))))

    def credit_code(self):
        r = self.rng
        alnum = "0123456789ABCDEFGHJKLMNPQRTUWXY"
        return self.fresh(lambda: r.choice(["91", "92", "52", "12"]) + r.choice(AREAS)[0] + "MA"
                          + "".join(r.choice(alnum) for _ in range(7)) + r.choice(alnum[10:]))

    def email_text(self, person, company):
        r = self.rng
        s, g = person["sur"], person["given"]
        return r.choice([
            f"{s} at example dot com", f"{s}{g} at {company['brand']} dot com",
            f"{s}.{g}[at]{company['domain']}", f"{s}{g}（at）{r.choice(FREE_MAIL)}",
            f"{s}{g} AT {r.choice(FREE_MAIL).replace('.', ' DOT ')}",
            "@某某", "@" + person["name"], "@" + person["name"][0] + r.choice(["经理", "总", "律师", "老师"]),
        ])


# ---------------------------------------------------------------------------------------------
# sentences

ROLES = {
    "contract": ["乙方", "甲方联系人", "担保人", "紧急联系人"],
    "lease": ["出租人", "承租人", "借款人", "出借人", "保证人"],
    "hr": ["员工", "新入职员工", "离职员工", "经办人"],
    "judgment": ["原告", "被告", "第三人", "委托诉讼代理人"],
    "complaint": ["投诉人", "被投诉人", "联系人"],
}

# Templates carry the kinds of document they fit: c contract, l lease/loan, h HR notice, j judgment,
# p complaint letter.
PLANTED_TEMPLATES = {
    "id_card": [
        ("cljp", "{role}：{name}，{sex}，{birth}出生，汉族，住{addr}，公民身份号码{v}。"),
        ("cl", "保证人{name}（身份证号：{v}）自愿为本合同项下全部债务提供连带责任保证。"),
        ("cljhp", "姓名：{name}；身份证号：{v}；住址：{addr}。"),
        ("jhp", "经查，{name}（{v}）于{year}年入职{company}，担任{job}。"),
        ("h", "请{name}携带身份证原件（号码{v}）到人力资源部办理相关手续。"),
        ("h", "新入职员工{name}，身份证号{v}，入职部门为{dept}。"),
        ("jlc", "{role}：{name}，公民身份号码：{v}，住所地{addr}。"),
        ("clh", "证件号码 {v} 的持有人{name}已在本页签字确认。"),
        ("p", "投诉人{name}，身份证号码{v}，现就以下事项提出投诉。"),
        ("h", "核对结果：{name}的身份证号{v}与档案记载一致。"),
        ("clp", "{role}：{name}，居民身份证号码：{v}，联系地址：{addr}。"),
        ("jhp", "{name}(身份证号{v})于当日到场。"),
        ("cljhp", "身份证号：{v}"),
        ("jpl", "被保险人{name}，公民身份号码{v}，与投保人系{rel}关系。"),
    ],
    "mobile": [
        ("cljhp", "{role}{name}，联系电话：{v}。"),
        ("hpc", "如有疑问，请致电{name}（手机{v}）。"),
        ("h", "请于收到本通知后回电{v}确认。"),
        ("cljhp", "{name}的手机号码为{v}，微信同号。"),
        ("p", "投诉人联系方式：{v}；"),
        ("ph", "本人手机 {v} 可随时联系。"),
        ("ch", "紧急联系人：{name}，电话{v}。"),
        ("jl", "送达地址确认书载明的联系电话为{v}。"),
        ("p", "对方发来的短信验证码已发送至{v}，本人并未申请。"),
        ("hlc", "经办人：{name}，{v}。"),
        ("jp", "{role}{name}称其手机{v}于案发当日收到多条催款短信。"),
        ("cljhp", "手机：{v}"),
    ],
    "bank_card": [
        ("ch", "工资发放账户：{bank}，卡号{v}。"),
        ("cl", "{role}指定收款账户为{name}在{bank}开立的银行卡（卡号：{v}）。"),
        ("p", "请将退款汇入本人{bank}借记卡{v}，谢谢。"),
        ("jp", "{role}{name}通过其名下银行卡{v}向对方转账。"),
        ("pl", "信用卡号：{v}；持卡人：{name}。"),
        ("lcpj", "收款卡号 {v}，户名{name}。"),
        ("clh", "开户行：{bank}{city}分行，账号：{v}。"),
        ("j", "原告向被告名下卡号为{v}的{bank}账户转账共计人民币五万元。"),
        ("h", "报销款项将打入员工本人工资卡（{v}）。"),
        ("cljhp", "银行卡号：{v}"),
    ],
    "email": [
        ("cljhp", "电子邮箱：{v}。"),
        ("hpc", "请将材料扫描后发送至{v}，并注明姓名。"),
        ("hcl", "{name}（邮箱：{v}）负责对接。"),
        ("cljhp", "联系人{name}，邮箱{v}；"),
        ("h", "如有异议，请于收到本通知之日起七日内发邮件至{v}说明理由。"),
        ("jlc", "{role}确认的电子送达地址为{v}。"),
        ("p", "投诉人邮箱{v}，请以书面形式答复。"),
        ("h", "简历请投递至 {v} ，邮件标题注明应聘岗位。"),
        ("jp", "{name}于当晚将合同扫描件发送至{v}。"),
        ("cljhp", "邮箱：{v}"),
    ],
}

TABLE_LABELS = {"id_card": "身份证号", "mobile": "手机", "bank_card": "工资卡号", "email": "邮箱",
                "landline": "办公电话", "mobile_bad_prefix": "员工编号", "card_bad_luhn": "饭卡卡号",
                "order_number": "报销单号", "date": "入职日期", "amount": "报销金额", "long_number": "电子凭证号",
                "id_bad_date": "档案编号", "credit_code": "所属单位信用代码"}

LOOKALIKE_TEMPLATES = {
    "id_bad_check": [("cljhp", "系统提示号码{v}校验未通过，已退回补正。"), ("cljhp", "档案编号：{v}。"),
                     ("cljhp", "原登记号码{v}经核对有误，以更正后的为准。"), ("cljhp", "批次号{v}项下材料已归档。"),
                     ("cljhp", "（录入错误的号码{v}已作废）")],
    "id_bad_date": [("cljhp", "样本编号{v}，留存备查。"), ("cljhp", "申请编号：{v}。"), ("cljhp", "（登记序号{v}）"),
                    ("cljhp", "备案号{v}已注销。"), ("hp", "测试账号{v}仅用于系统联调。")],
    "card_bad_luhn": [("cljhp", "会员卡号：{v}。"), ("cljhp", "储值卡{v}已停用。"), ("pj", "加油卡号{v}，余额不足。"),
                      ("cljhp", "旧卡号{v}校验失败，系统未予登记。"), ("pj", "购物卡编号 {v} 已挂失。"),
                      ("hc", "食堂饭卡卡号为{v}。")],
    "mobile_bad_prefix": [("hp", "工单号{v}，请跟进处理。"), ("cljhp", "服务编号：{v}。"), ("p", "查询码{v}仅当日有效。"),
                          ("cljhp", "客户编号{v}已录入系统。"), ("hc", "员工编号：{v}；")],
    "landline": [("cljhp", "联系电话：{v}。"), ("hc", "总机{v}转人事部。"), ("cljhp", "传真：{v}；"),
                 ("cljhp", "（办公电话{v}）"), ("hp", "值班电话 {v}，全天有人接听。"), ("cljhp", "咨询电话{v}。")],
    "date": [("cl", "本合同自{v}起生效。"), ("cljhp", "请于{v}前提交书面材料。"), ("cljhp", "落款日期：{v}。"),
             ("cljp", "该款项已于{v}到账。"), ("ch", "入职日期{v}，试用期三个月。")],
    "article_number": [("cljhp", "依照{v}的规定处理。"), ("cl", "参照合同{v}执行。"), ("cl", "违反{v}约定的，承担违约责任。"),
                       ("cljhp", "详见{v}。")],
    "doc_number": [("cljhp", "根据{v}文件精神，"), ("cljhp", "按照{v}执行。"), ("hc", "（参见{v}）")],
    "case_number": [("jpl", "参见{v}判决书。"), ("j", "本院作出{v}裁定。"), ("jp", "案号：{v}。"),
                    ("cljhp", "该争议已由{v}案件审结。")],
    "amount": [("cljhp", "合计{v}。"), ("jpl", "涉案金额为{v}，"), ("jl", "截至起诉之日尚欠{v}。"),
               ("ch", "年度预算{v}，已执行过半。")],
    "order_number": [("cl", "合同编号：{v}。"), ("pj", "订单号{v}，"), ("cljhp", "交易流水号：{v}。"),
                     ("h", "报销单号{v}已审批。"), ("cljhp", "（编号{v}）")],
    "email_text": [("cljhp", "其邮箱写作{v}，以防被自动抓取。"), ("cljhp", "联系方式：{v}（请自行替换符号）。"),
                   ("hp", "邮箱 {v}（发送时请替换为标准格式）。")],
    "email_mention": [("hp", "微信群中{v}已确认收到。"), ("hp", "{v} 请尽快处理此事。"),
                      ("jp", "其在群聊中{v}并称“马上转账”。"), ("cljhp", "沟通记录显示，{v}已于当日回复。")],
    "long_number": [("cljhp", "电子凭证号{v}。"), ("cljhp", "票据追踪码：{v}，"), ("cljhp", "系统日志编号{v}。"),
                    ("pj", "快递单号{v}已签收。")],
    "credit_code": [("cljhp", "统一社会信用代码：{v}。"), ("cljhp", "（统一社会信用代码{v}）")],
}
GENRE_TAG = {"contract": "c", "lease": "l", "hr": "h", "judgment": "j", "complaint": "p"}


def pick(rng, templates, genre):
    return rng.choice([t for tags, t in templates if GENRE_TAG[genre] in tags])


FILLERS = {
    "contract": ["甲方根据工作需要，安排乙方在{dept}从事{job}工作。",
                 "乙方应当按照甲方的要求，按时完成规定的工作数量，达到规定的质量标准。",
                 "甲方每月以货币形式支付乙方工资，不得克扣或者无故拖欠。",
                 "甲方依法为乙方缴纳社会保险费，乙方个人应缴部分由甲方代扣代缴。",
                 "乙方在合同期内享受国家规定的法定节假日、年休假、婚丧假、产假等假期。",
                 "双方解除或者终止劳动合同，应当按照国家有关规定办理相关手续。",
                 "本合同未尽事宜，双方可另行协商签订补充协议。",
                 "乙方对在工作中知悉的甲方商业秘密和个人信息负有保密义务。"],
    "lease": ["出租人应当按照约定将房屋交付承租人，并保证房屋符合约定的用途。",
              "借款期限届满，借款人应当一次性归还全部借款本息。",
              "承租人应当按时足额支付租金，逾期支付的，应当支付违约金。",
              "保证人自愿承担连带保证责任，保证期间为主债务履行期限届满之日起三年。",
              "因本合同发生的争议，由双方协商解决；协商不成的，向合同签订地人民法院起诉。",
              "本合同经双方签字或者盖章后生效。"],
    "hr": ["请各部门于本周五前汇总报送。", "个人信息仅用于办理社会保险和工资发放，请勿外传。",
           "逾期未报送的，由本人承担相应后果。", "如信息有变更，请及时告知人力资源部。",
           "本通知所附名单仅限内部传阅，不得截图转发。", "相关材料请由{dept}统一收取后交人力资源部。"],
    "judgment": ["本院于立案后，依法适用简易程序，公开开庭进行了审理。",
                 "原告向本院提出诉讼请求：判令被告偿还借款本金及利息。",
                 "被告经本院合法传唤，无正当理由拒不到庭参加诉讼。",
                 "当事人对自己提出的诉讼请求所依据的事实，有责任提供证据加以证明。",
                 "如不服本判决，可以在判决书送达之日起十五日内向本院递交上诉状。",
                 "案件受理费减半收取，由被告负担。"],
    "complaint": ["本人多次与对方沟通，对方均以各种理由推诿。", "上述行为严重侵害了本人的合法权益。",
                  "恳请贵单位依法调查处理，并书面答复处理结果。", "随信附上相关证据材料复印件。",
                  "对方客服人员态度恶劣，拒不提供书面说明。"],
}

SECTIONS = {
    "contract": ["一、合同双方", "二、工作内容和工作地点", "三、劳动报酬", "四、社会保险和福利待遇",
                 "五、合同的变更、解除和终止", "六、其他约定"],
    "lease": ["一、当事人", "二、标的与期限", "三、付款方式", "四、违约责任", "五、争议解决"],
    "hr": ["一、核对范围", "二、报送要求", "三、注意事项"],
    "judgment": ["当事人", "原告诉称", "本院查明", "本院认为", "判决如下"],
    "complaint": ["一、基本情况", "二、投诉事项", "三、诉求"],
}


def render(template, ctx, v):
    return template.format_map(dict(ctx, v=v))


# ---------------------------------------------------------------------------------------------
# documents

def assign(rng, pool, n_docs, cap, excluded=()):
    """Spreads a pool of kinds over the documents at random, at most cap per document."""
    per_doc = [[] for _ in range(n_docs)]
    for kind in pool:
        doc = rng.choice([i for i in range(n_docs) if i not in excluded and len(per_doc[i]) < cap])
        per_doc[doc].append(kind)
    return per_doc


def make_pool(rng, counts):
    pool = [k for k, n in counts.items() for _ in range(n)]
    rng.shuffle(pool)
    return pool


def planted_value(gen, rng, kind, ctx, stats):
    if kind == "id_card":
        want_x = rng.random() < 0.16
        v = gen.id_card(want_x)
        n_x = stats.get(kind, {}).get("ends in X", 0) + stats.get(kind, {}).get("ends in x", 0)
        if want_x and n_x % 5 == 4:  # every fifth one written with a lowercase x
            gen.used.add(v[:17] + "x")
            v = v[:17] + "x"
        area = next(a for a in AREAS if a[0] == v[:6])
        ctx.update(addr=area[1] + rng.choice(STREETS) + f"{rng.randint(1, 300)}号",
                   birth=f"{int(v[6:10])}年{int(v[10:12])}月{int(v[12:14])}日",
                   sex="男" if int(v[16]) % 2 else "女")
        fmt = "ends in x" if v.endswith("x") else "ends in X" if v.endswith("X") else "digits only"
    elif kind == "mobile":
        fmt = rng.choices(["plain", "hyphen", "space", "+86 plain", "+86- plain", "86 plain", "+86 space",
                           "+86- hyphen"], [34, 15, 14, 10, 8, 7, 6, 6])[0]
        v = gen.mobile(fmt)
    elif kind == "bank_card":
        brand, length = rng.choices([("unionpay", 16), ("unionpay", 19), ("visa", 16), ("mastercard", 16)],
                                    [25, 35, 20, 20])[0]
        style = rng.choices(["plain", "space", "hyphen"], [45, 35, 20])[0]
        v, bank = gen.card(True, brand, style, length)
        ctx["bank"] = bank
        fmt = f"{brand} {length} {style}"
    else:
        v = gen.email(ctx["person"], ctx["company_d"])
        tld = ".com.cn" if v.endswith(".com.cn") else "." + v.rsplit(".", 1)[1]
        fmt = tld
    stats.setdefault(kind, {}).setdefault(fmt, 0)
    stats[kind][fmt] += 1
    return v


def lookalike_value(gen, rng, kind, ctx):
    if kind == "id_bad_check":
        return gen.id_bad_check()
    if kind == "id_bad_date":
        return gen.id_bad_date()
    if kind == "card_bad_luhn":
        brand = rng.choice(["unionpay", "unionpay", "visa", "mastercard"])
        length = rng.choice([16, 17, 18, 19]) if brand == "unionpay" else rng.choice([16, 16, 16, 17, 18, 19])
        return gen.card(False, brand, rng.choices(["plain", "space", "hyphen"], [50, 30, 20])[0], length)[0]
    if kind == "mobile_bad_prefix":
        return gen.mobile_bad_prefix()
    if kind == "landline":
        return gen.landline()
    if kind == "date":
        return gen.date()
    if kind == "article_number":
        return gen.article()
    if kind == "doc_number":
        return gen.doc_number()
    if kind == "amount":
        return gen.amount()
    if kind == "order_number":
        return gen.order_number()
    if kind == "email_text":
        return gen.email_text(ctx["person"], ctx["company_d"])
    if kind == "long_number":
        return gen.long_number()
    if kind == "credit_code":
        return gen.credit_code()
    raise AssertionError(kind)


def lookalike_ok(kind, v):
    """The look-alike fails the check that would make it a value."""
    d = digits(v)
    if kind == "id_bad_check":
        return id_shape_ok(v) and not id_checksum_ok(v) and id_date_ok(v) and int(v[:2]) in PROVINCES
    if kind == "id_bad_date":
        return id_checksum_ok(v) and not id_date_ok(v)
    if kind == "card_bad_luhn":
        return 16 <= len(d) <= 19 and not luhn_ok(d) and not id_valid(d)
    if kind == "mobile_bad_prefix":
        return len(d) == 11 and (d[:2] in ("10", "11", "12") or d[0] == "2")
    if kind == "landline":
        return v.lstrip("（").startswith("0") and not RE_MOBILE.search(v)
    if kind == "order_number":
        return not (16 <= len(d) <= 19 and luhn_ok(d)) and not id_checksum_ok(d)
    if kind == "long_number":
        return v.isdigit() and len(v) >= 20
    if kind == "amount":
        return len(digits(v.split(".")[0])) < 16
    if kind == "email_text":
        return not RE_EMAIL.search(v)
    if kind == "credit_code":
        return not id_shape_ok(v) and not re.search(r"\d{11}", v)
    return not re.search(r"\d{11}", v)


def bounded(text, v):
    """Occurrences of v not glued to further digits, letters or value characters."""
    out = []
    for m in re.finditer(re.escape(v), text):
        a, b = m.start(), m.end()
        before = text[a - 1] if a else ""
        after = text[b] if b < len(text) else ""
        if before and (before.isascii() and (before.isalnum() or before in "+-._@%")):
            continue
        if after and (after.isascii() and (after.isalnum() or after in "-._@")):
            continue
        if before in (" ", "-") and a >= 2 and text[a - 2].isdigit():
            continue
        if after in (" ", "-") and b + 1 < len(text) and text[b + 1].isdigit():
            continue
        out.append(a)
    return out


def build_doc(index, rng, gen, laws, planted_kinds, lookalike_kinds, stats):
    genre = rng.choices(["contract", "lease", "hr", "judgment", "complaint"], [22, 16, 24, 20, 18])[0]
    company = gen.company()
    people = [gen.person() for _ in range(6)]
    area = rng.choice(AREAS)
    base_ctx = {"company": company["name"], "dept": rng.choice(DEPTS), "job": rng.choice(JOBS),
                "city": rng.choice(CITIES), "rel": rng.choice(["配偶", "父子", "母女", "本人"]),
                "year": rng.randint(2008, 2023)}

    def ctx_for():
        p = rng.choice(people)
        return dict(base_ctx, name=p["name"], role=rng.choice(ROLES[genre]), person=p, company_d=company)

    items = []  # (sentence, planted [(kind, value)], look-alikes [(kind, value)], table row or None)
    for kind in planted_kinds:
        ctx = ctx_for()
        v = planted_value(gen, rng, kind, ctx, stats)
        sentence = render(pick(rng, PLANTED_TEMPLATES[kind], genre), ctx, v)
        items.append((sentence, [(kind, v)], [], (ctx["name"], TABLE_LABELS[kind], v)))
    for kind in lookalike_kinds:
        ctx = ctx_for()
        v = lookalike_value(gen, rng, kind, ctx)
        tkind = "email_mention" if kind == "email_text" and v.startswith("@") else \
            "case_number" if kind == "doc_number" and "〔" not in v else kind
        sentence = render(pick(rng, LOOKALIKE_TEMPLATES[tkind], genre), ctx, v)
        row = (ctx["name"], TABLE_LABELS[kind], v) if kind in TABLE_LABELS else None
        items.append((sentence, [], [(kind, v)], row))
    fillers = [render(f, ctx_for(), "") for f in rng.sample(FILLERS[genre], rng.randint(2, len(FILLERS[genre])))]
    rng.shuffle(items)

    # an HR notice sometimes lists the values in a table instead of sentences
    table = []
    if genre == "hr" and rng.random() < 0.5:
        keep = []
        for it in items:
            (table if it[3] is not None and rng.random() < 0.8 else keep).append(it)
        items = keep

    units = [it[0] for it in items] + fillers
    rng.shuffle(units)
    paragraphs = []
    while units:
        k = rng.randint(1, 3)
        chunk, units = units[:k], units[k:]
        # field lines ("身份证号：...") stand alone; everything else is joined as running text
        if any(not c.endswith(("。", "；", "，", "）")) for c in chunk):
            paragraphs.extend(chunk)
        else:
            paragraphs.append("".join(chunk))

    lead = people[0]["name"]
    titles = {
        "contract": [f"劳动合同（{company['name']}）", "劳动合同书", f"{company['name']}劳动合同（节选）"],
        "lease": ["房屋租赁合同", "借款合同", "个人借款及保证合同", "房屋租赁合同（补充协议）"],
        "hr": ["关于核对员工个人信息的通知", "关于变更工资发放银行账户的通知", "关于办理新员工入职手续的通知",
               "关于离职人员工作交接的通知", "关于补录社会保险信息的通知"],
        "judgment": [f"{area[1]}人民法院民事判决书", f"{area[1]}人民法院民事裁定书"],
        "complaint": ["投诉信", f"关于{company['name']}侵害消费者权益的投诉", "实名举报信"],
    }
    head = [f"# {rng.choice(titles[genre])}"]
    opening = {
        "contract": f"甲方（用人单位）：{company['name']}\n\n乙方（劳动者）：{lead}",
        "lease": f"甲方：{lead}\n\n乙方：{people[1]['name']}",
        "hr": "各部门、各位同事：",
        "judgment": f"原告{lead}与被告{company['name']}{rng.choice(['劳动争议', '民间借贷纠纷', '房屋租赁合同纠纷', '网络侵权责任纠纷'])}一案，本院依法进行了审理，现已审理终结。",
        "complaint": f"尊敬的{rng.choice(['市场监督管理局', '消费者协会', '劳动保障监察大队', '银行保险监督管理局'])}：",
    }[genre]
    closing = {
        "contract": f"甲方（盖章）：{company['name']}\n\n乙方（签字）：{lead}",
        "lease": f"甲方（签字）：{lead}\n\n乙方（签字）：{people[1]['name']}",
        "hr": f"{company['name']}人力资源部",
        "judgment": f"审判员　{people[2]['name']}\n\n书记员　{people[3]['name']}",
        "complaint": f"投诉人：{lead}",
    }[genre]

    sections = SECTIONS[genre]
    n_sec = min(len(sections), max(1, (len(paragraphs) + 1) // 2))
    sec_names = sections[:n_sec]
    blocks = []  # list of lists of paragraphs, one per section
    per = [[] for _ in range(n_sec)]
    for i, p in enumerate(paragraphs):
        per[min(n_sec - 1, i * n_sec // max(1, len(paragraphs)))].append(p)
    for name, ps in zip(sec_names, per):
        blocks.append([f"## {name}"] + ps)
    if table:
        rows = ["| 姓名 | 项目 | 登记内容 |", "| --- | --- | --- |"] + [f"| {a} | {b} | {c} |" for _, _, _, (a, b, c) in table]
        blocks.append(["## 附表：信息核对清单", "\n".join(rows)])

    law_style = rng.choice(["section", "quote", "inline"])
    law_at = rng.randint(0, len(blocks))

    title = ""  # the law's, chosen below once the size of the rest is known

    def assemble(law_chunk):
        if law_style == "section":
            law_block = [f"## 附：相关规定（摘自《{title}》）"] + law_chunk
        elif law_style == "quote":
            law_block = [f"根据《{title}》的有关规定：", "\n>\n".join("> " + p for p in law_chunk)]
        else:
            law_block = [f"《{title}》相关条文如下："] + law_chunk
        parts = head + [opening]
        for i, b in enumerate(blocks):
            if i == law_at:
                parts += law_block
            parts += b
        if law_at == len(blocks):
            parts += law_block
        parts += [closing]
        return "\n\n".join(parts) + "\n"

    target = rng.randint(1200, 5900)
    base = len(assemble([]).encode("utf-8")) + 150  # with room for the law's title
    need = target - base
    while True:  # a law with enough text after an article to fill the document
        title, law_paras, law_starts = rng.choice(laws)
        starts = [i for i in law_starts if sum(len(p.encode("utf-8")) + 2 for p in law_paras[i:]) >= need
                  and len(law_paras[i].encode("utf-8")) + base <= MAX_BYTES - 200]
        if starts:
            break
    start = rng.choice(starts)
    chunk = []
    for p in law_paras[start:]:
        size = len(assemble(chunk + [p]).encode("utf-8"))
        if size > target:
            # overshooting the target is fine while it keeps the document within bounds and the
            # document is still short
            if size <= MAX_BYTES - 200 and (not chunk or len(assemble(chunk).encode("utf-8")) < MIN_BYTES + 100):
                chunk.append(p)
            break
        chunk.append(p)
    assert chunk, (index, "no law paragraph")
    text = assemble(chunk)
    size = len(text.encode("utf-8"))
    assert MIN_BYTES <= size <= MAX_BYTES, (index, size)

    planted = [pv for it in items + table for pv in it[1]]
    lookalikes = [lv for it in items + table for lv in it[2]]
    return text, planted, lookalikes, genre


def check_doc(name, text, planted, lookalikes):
    """Returns the labels (in the order of the text); raises if the document is not what they say."""
    labels = []
    for kind, v in planted:
        assert text.count(v) == 1, (name, v, text.count(v))
        pos = bounded(text, v)
        assert len(pos) == 1, (name, v, "not bounded")
        if kind == "id_card":
            assert id_valid(v) and not (v.isdigit() and luhn_ok(v)), (name, v)
        elif kind == "bank_card":
            d = digits(v)
            assert luhn_ok(d) and card_prefix_ok(d), (name, v)
            assert re.fullmatch(r"\d{16,19}|\d{4}([ -])\d{4}(\1\d{4}){2}(\1\d{3})?", v), (name, v)
        elif kind == "mobile":
            assert re.fullmatch(r"(\+86[ -]|86)?1[3-9]\d([ -]?)\d{4}\2\d{4}", v), (name, v)
        elif kind == "email":
            assert RE_EMAIL.fullmatch(v), (name, v)
        labels.append((pos[0], kind, v))
    labels.sort()
    found = scan(text)
    assert found == labels, (name, [x for x in found if x not in labels], [x for x in labels if x not in found])
    # an 18-character run passing the check character is a planted number or an impossible-date look-alike
    bad_dates = {v for k, v in lookalikes if k == "id_bad_date"}
    for m in RE_ID.finditer(text):
        if id_checksum_ok(m.group()) and (m.start(), "id_card", m.group()) not in labels:
            assert m.group() in bad_dates, (name, m.group())
    for kind, v in lookalikes:
        assert v in text, (name, v)
        assert lookalike_ok(kind, v), (name, kind, v)
        if kind not in ("email_text",):
            assert bounded(text, v), (name, kind, v, "not bounded")
    return [{"kind": k, "value": v} for _, k, v in labels]


def main():
    rng = random.Random(SEED)
    laws = load_laws()
    gen = Gen(rng)
    empty = set(rng.sample(range(N_DOCS), N_EMPTY_DOCS))
    planted_per_doc = assign(rng, make_pool(rng, PLANTED_COUNTS), N_DOCS, MAX_PLANTED_PER_DOC, empty)
    lookalikes_per_doc = assign(rng, make_pool(rng, LOOKALIKE_COUNTS), N_DOCS, MAX_LOOKALIKES_PER_DOC)

    stats, docs, labels = {}, [], []
    la_counts = {k: 0 for k in LOOKALIKE_COUNTS}
    genres = {}
    for i in range(N_DOCS):
        name = f"{i + 1:03d}.md"
        text, planted, lookalikes, genre = build_doc(i, rng, gen, laws, planted_per_doc[i],
                                                     lookalikes_per_doc[i], stats)
        entry = check_doc(name, text, planted, lookalikes)
        for k, _ in lookalikes:
            la_counts[k] += 1
        genres[genre] = genres.get(genre, 0) + 1
        docs.append((name, text))
        labels.append({"file": name, "planted": entry})

    planted_counts = {k: sum(1 for d in labels for p in d["planted"] if p["kind"] == k) for k in PLANTED_COUNTS}
    assert planted_counts == PLANTED_COUNTS, planted_counts
    assert la_counts == LOOKALIKE_COUNTS, la_counts
    assert 600 <= sum(planted_counts.values()) <= 900 and min(planted_counts.values()) >= 120

    labels_text = "[\n" + ",\n".join(json.dumps(d, ensure_ascii=False) for d in labels) + "\n]\n"
    assert json.loads(labels_text) == labels
    sizes = [len(t.encode("utf-8")) for _, t in docs]
    readme = make_readme(planted_counts, stats, la_counts, genres, sizes, labels)

    docs_dir = OUT / "docs"
    docs_dir.mkdir(parents=True, exist_ok=True)
    for old in docs_dir.glob("*.md"):
        old.unlink()
    for name, text in docs:
        (docs_dir / name).write_bytes(text.encode("utf-8"))
    (OUT / "labels.json").write_bytes(labels_text.encode("utf-8"))
    (OUT / "README.md").write_bytes(readme.encode("utf-8"))
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    assert total < 1_500_000, total
    print(f"wrote {len(docs)} documents, {sum(planted_counts.values())} planted values, "
          f"{sum(la_counts.values())} look-alikes, {total:,} bytes in {OUT.relative_to(ROOT)}/")


LOOKALIKE_DOC = {
    "id_bad_check": "18 characters, real area code and birth date, wrong check character (never passing Luhn)",
    "id_bad_date": "18 characters with month 13 or 00, day 32 or 00, 30 February or 31 of a short month, "
                   "and the check character computed over them",
    "card_bad_luhn": "16-19 digits with UnionPay, Visa or MasterCard prefixes, plain or in groups of four, "
                     "failing Luhn",
    "mobile_bad_prefix": "11 digits starting with 10, 11, 12 or 2 (some as 3-4-4 with hyphens)",
    "landline": "010-12345678, 0755-8888 6666, （020）12345678, 021-12345678转801",
    "date": "20240101, 2024年1月1日, 2024-01-01",
    "article_number": "第一千二百条, 第1234条",
    "doc_number": "国发〔2024〕12号, 京(2023)民初字第12345号, （2023）沪0115民初12345号",
    "amount": "1,234,567.89元, 人民币1,234.00元, 12345678901234.56 (at most 15 digits before the point)",
    "order_number": "HT20240101000123, DD2024010112345678, and pure 16/18/19-digit numbers starting with a "
                    "date that fail Luhn and the ID check character",
    "email_text": "zhang at example dot com, wang.fang[at]huaxin.cn, liwei（at）163.com, @某某, @张经理",
    "long_number": "20-26 digits, longer than any card",
    "credit_code": "统一社会信用代码: 18 characters with letters",
}


def make_readme(planted_counts, stats, la_counts, genres, sizes, labels):
    n_planted = sum(planted_counts.values())
    n_look = sum(la_counts.values())
    empty = sum(1 for d in labels if not d["planted"])
    out = [
        "# Sensitive-data scanner test set",
        "",
        f"{N_DOCS} Chinese documents (`docs/001.md` .. `docs/{N_DOCS:03d}.md`, {min(sizes):,}-{max(sizes):,} bytes "
        f"each) for measuring a scanner of personal data: contracts, HR notices, court judgments and complaint "
        f"letters built around paragraphs of the Markdown laws in `corpus/laws/`. They carry {n_planted} planted "
        f"values, listed in `labels.json`, and {n_look} look-alikes that must not be flagged, which are not "
        f"listed. {empty} documents have no planted value at all. Every value is made up: the identity numbers, "
        "cards, phones and addresses are random and belong to nobody.",
        "",
        "`labels.json` is an array with one object per document, in file order: "
        "`{\"file\": \"001.md\", \"planted\": [{\"kind\": K, \"value\": V}, ...]}`, the values in the order they "
        "appear, each exactly as written in the text (spaces, hyphens, `+86` prefixes included) and occurring "
        "exactly once in its document. K is one of `id_card`, `mobile`, `bank_card`, `email`. A scanner is "
        "right on a document when it reports these (kind, value) pairs and nothing else.",
        "",
        "Generated by `scripts/sensitive_set.py` (fixed seed, standard library only); "
        "`python3 scripts/sensitive_set.py` regenerates this folder byte for byte as long as `corpus/laws/` is "
        "unchanged. The generator checks its output before writing it: the check character, area code and "
        "birth date of every planted identity number, Luhn and prefix of every card, that every planted value "
        "occurs once and not glued to other digits or letters, that every look-alike fails its check, and that "
        "an independent boundary-aware scan of each document (any 16-19 digit run passing Luhn, any 18-character "
        "identity number passing all checks, any mobile, any e-mail) finds exactly the labels.",
        "",
        "## Planted values",
        "",
        "| kind | count | formats |",
        "| --- | ---: | --- |",
    ]
    what = {
        "id_card": "18 characters: real 6-digit area code, birth date 1940-2010, sequence, ISO 7064 MOD 11-2 "
                   "check character; after 身份证号：/公民身份号码, in parentheses, in tables, plain",
        "mobile": "1[3-9]X XXXX XXXX on real segments",
        "bank_card": "Luhn-valid; UnionPay 62 (16 and 19 digits), Visa 4 (16), MasterCard 51-55 (16)",
        "email": "pinyin names, company and free-mail domains; dots, plus signs, underscores, digits",
    }
    for k in PLANTED_COUNTS:
        fmts = ", ".join(f"{f}: {n}" for f, n in sorted(stats[k].items(), key=lambda x: (-x[1], x[0])))
        out.append(f"| `{k}` | {planted_counts[k]} | {what[k]} ({fmts}) |")
    out.append(f"| total | {n_planted} | |")
    out += [
        "",
        "Values sit next to Chinese text and full-width punctuation (`身份证号：…，`, `（…）`, `至…说明`) or in "
        "Markdown table cells, sometimes with spaces around them.",
        "",
        "## Look-alikes (not labelled)",
        "",
        "| type | count | examples |",
        "| --- | ---: | --- |",
    ]
    for k, n in la_counts.items():
        out.append(f"| {k} | {n} | {LOOKALIKE_DOC[k]} |")
    out += [
        f"| total | {n_look} | |",
        "",
        "These counts are of the inserted look-alikes only; the law paragraphs and the document frames carry "
        "further ordinary dates and article numbers.",
        "",
        "Documents by kind: " + ", ".join(f"{k} {genres[k]}" for k in sorted(genres)) + ".",
        "",
    ]
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
