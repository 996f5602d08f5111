//! Articles named in a search query: "民法典第一千零四十二条", "劳动合同法第39条",
//! "刑法 第 264 条", "《中华人民共和国民法典》第一千零四十二条" → (law, article number), so search
//! can put that article first. A port of `scripts/retrieval/resolver.py` (regex + a table of law
//! names, nothing learned):
//!
//! 1. Normalise the query ([`normalize_law_name`]): spaces (ASCII, U+3000 and other Unicode
//!    spaces) and invisible characters out, full-width digits → ASCII, full-width brackets （）
//!    → (), the title marks 《》〈〉 and quotes out, every 中华人民共和国 out.
//! 2. Find the article marker `(第)?<numerals>条(之<numerals>)?`, numerals Chinese (一千零四十二,
//!    一〇四二) or Arabic. 第 may be left out only before Arabic numerals ("劳动合同法39条"): a
//!    bare Chinese numeral + 条 is too easily ordinary text ("三条狗").
//! 3. The law is the LONGEST known name that the normalised text just before the marker ends with
//!    (a trailing 的, or a 编 name of 2–6 characters such as 婚姻家庭编, may sit in between). Longest
//!    wins, so "最高人民法院关于适用《民法典》婚姻家庭编的解释（一）第五条" is the interpretation, not
//!    the Civil Code its title quotes; and a name must touch the marker, so a law named earlier in
//!    the sentence never captures it.
//! 4. A marker with no law of its own, joined to the previous resolved marker by nothing or one of
//!    和、及与，或至 ("民法典第1042条和第1043条"), takes that marker's law; any other marker with no
//!    law before it resolves to nothing.
//! 5. 之一 resolves to the base article (docpipe keeps 第N条之一 inside 第N条).
//!
//! Whether the law actually has that article is the caller's to check (it knows the documents):
//! "民法典第二千条" comes back as (民法典, 2000).

mod law_names;
mod name_index;
mod numerals;

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

pub use law_names::{citation, normalize_law_name, title_line, work_key};
pub use numerals::article_number;
pub(crate) use numerals::{chinese_numeral, parse_numeral};

use law_names::Normalised;
use name_index::NameIndex;

// --- references in a query --------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArticleRef {
    /// Index into `known`: the first entry carrying the law's (normalised) name.
    pub law: usize,
    pub article: u32,
    /// Byte range of the marker (第…条, with any 之N) in the query as given.
    pub span: Range<usize>,
}

/// resolver.py's MARKER, on normalised text (digits already ASCII, spaces gone).
static MARKER: LazyLock<Regex> = LazyLock::new(|| {
    const CN: &str = "[零〇○一二两三四五六七八九十百千万]+";
    Regex::new(&format!(r"(?:第({CN}|[0-9]+)|([0-9]+))条(?:之({CN}))?")).expect("static regex")
});

/// What may stand between two markers for the second to take the first one's law.
const JOINERS: [&str; 9] = ["", "和", "、", "及", "与", "，", ",", "或", "至"];

/// How much of the text before a 编 a 编 name may take (婚姻家庭编: 4).
const BIAN_NAME_CHARS: std::ops::RangeInclusive<usize> = 2..=6;

struct Marker<'q> {
    start: usize,
    end: usize,
    number: Option<u32>,
    /// The texts whose longest known suffix is the law, in the order they are tried: the text
    /// before the marker, without a trailing 的, without a trailing 编 name.
    candidates: Vec<&'q str>,
}

fn candidates(prefix: &str) -> Vec<&str> {
    let mut out = vec![prefix];
    if let Some(p) = prefix.strip_suffix('的') {
        out.push(p);
    }
    if let Some(before_bian) = prefix.strip_suffix('编') {
        let mut cuts = before_bian.char_indices().rev().map(|(i, _)| i);
        for k in 1..=*BIAN_NAME_CHARS.end() {
            let Some(cut) = cuts.next() else { break };
            if BIAN_NAME_CHARS.contains(&k) {
                out.push(&before_bian[..cut]);
            }
        }
    }
    out.retain(|c| !c.is_empty());
    out
}

/// Every article the query names, in query order. `known` holds law names ALREADY normalised
/// with [`normalize_law_name`] (document titles; several documents may share one name, the first
/// index carrying it is returned and the caller maps it back to its documents). Rule, as in
/// resolver.py: find `(第)?<numerals>条(之<numerals>)?` (第 may be missing only before Arabic
/// digits); the law is the LONGEST known name that the normalised text just before the marker
/// ends with (a 的 or a 编 name like 婚姻家庭编 may sit between); "第1042条和第1043条" gives the
/// second marker the previous marker's law; a marker with no law before it resolves to nothing.
/// 之一 resolves to the base article (article = N). Whether the law has that article is not
/// checked here.
///
/// Cost: one regex pass over the query; when it has a marker, one pass over `known` testing each
/// name's length and last 24 bytes against a bit table of the candidates' suffixes, hashing only
/// the few names that pass; then per marker at most one lookup per distinct length of those.
pub fn find_article_refs(query: &str, known: &[String]) -> Vec<ArticleRef> {
    let norm = Normalised::new(query);
    let q = norm.text.as_str();
    let markers: Vec<Marker> = MARKER
        .captures_iter(q)
        .map(|c| {
            let whole = c.get(0).expect("group 0");
            let number = c.get(1).or_else(|| c.get(2)).expect("one number group");
            Marker {
                start: whole.start(),
                end: whole.end(),
                number: parse_numeral(number.as_str()),
                candidates: candidates(&q[..whole.start()]),
            }
        })
        .collect();
    if markers.is_empty() {
        return Vec::new();
    }
    let index = NameIndex::new(
        known,
        markers.iter().flat_map(|m| m.candidates.iter().copied()),
    );

    let mut out = Vec::new();
    let mut previous: Option<(usize, usize)> = None; // (law, end of its marker)
    for m in &markers {
        let own = m.candidates.iter().find_map(|c| index.longest_suffix(c));
        let law = own.or_else(|| {
            previous
                .filter(|(_, end)| JOINERS.contains(&&q[*end..m.start]))
                .map(|(law, _)| law)
        });
        let Some(law) = law else { continue };
        previous = Some((law, m.end));
        let Some(article) = m.number.filter(|n| *n > 0) else {
            continue;
        };
        out.push(ArticleRef {
            law,
            article,
            span: norm.original(m.start, m.end),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::numerals::is_numeral_char;
    use super::*;

    use std::collections::{BTreeMap, BTreeSet};
    use std::path::PathBuf;

    /// (INDEX name, document title) of a few documents, the way the corpus has them.
    const DOCS: &[(&str, &str)] = &[
        ("民法典", "中华人民共和国民法典"),
        ("民法典", "中华人民共和国民法典"), // another 编 file of the same code
        ("劳动合同法", "中华人民共和国劳动合同法"),
        ("合同法", "中华人民共和国合同法"),
        ("刑法", "中华人民共和国刑法"),
        ("民事诉讼法", "中华人民共和国民事诉讼法"),
        (
            "最高人民法院关于适用《民法典》婚姻家庭编的解释（一）",
            "最高人民法院关于适用《中华人民共和国民法典》婚姻家庭编的解释（一）",
        ),
        (
            "最高人民法院关于适用《民事诉讼法》的解释",
            "最高人民法院关于适用《中华人民共和国民事诉讼法》的解释",
        ),
        (
            "最高人民法院关于审理人身损害赔偿案件适用法律若干问题的解释",
            "最高人民法院关于审理人身损害赔偿案件适用法律若干问题的解释",
        ),
        ("个体工商户条例", "促进个体工商户发展条例"),
    ];

    /// What search would build: both names of every document, normalised, and which law each is.
    fn table(docs: &[(&str, &str)]) -> (Vec<String>, Vec<String>) {
        let mut known = Vec::new();
        let mut law_of = Vec::new();
        for (law, title) in docs {
            for name in [law, title] {
                known.push(normalize_law_name(name));
                law_of.push(law.to_string());
            }
        }
        (known, law_of)
    }

    /// (law, article, marker text) of every reference.
    fn resolve(query: &str) -> Vec<(String, u32, String)> {
        let (known, law_of) = table(DOCS);
        find_article_refs(query, &known)
            .into_iter()
            .map(|r| (law_of[r.law].clone(), r.article, query[r.span].to_string()))
            .collect()
    }

    fn first(query: &str) -> Option<(String, u32)> {
        resolve(query).into_iter().next().map(|(l, n, _)| (l, n))
    }

    fn key(law: &str, n: u32) -> Option<(String, u32)> {
        Some((law.to_string(), n))
    }

    // --- titles -------------------------------------------------------------------------------

    #[test]
    fn cites_like_lawyers() {
        assert_eq!(
            citation("中华人民共和国民法典", 1042),
            "《中华人民共和国民法典》第一千零四十二条"
        );
        assert_eq!(
            citation(" 《中华人民共和国劳动合同法》 ", 39),
            "《中华人民共和国劳动合同法》第三十九条"
        );
        assert_eq!(citation("刑法", 10), "《刑法》第十条");
        assert_eq!(
            citation(
                "最高人民法院关于适用《中华人民共和国民法典》婚姻家庭编的解释（一）",
                5
            ),
            "《最高人民法院关于适用〈中华人民共和国民法典〉婚姻家庭编的解释（一）》第五条"
        );
        assert_eq!(
            citation("《甲法》和《乙法》", 1),
            "《〈甲法〉和〈乙法〉》第一条"
        );
        // A citation is itself a query that resolves back to its article.
        assert_eq!(
            first(&citation(
                "最高人民法院关于适用《中华人民共和国民法典》婚姻家庭编的解释（一）",
                5
            )),
            key("最高人民法院关于适用《民法典》婚姻家庭编的解释（一）", 5)
        );
    }

    // --- references ---------------------------------------------------------------------------

    /// README "Articles named in the query": the 8 ways of writing one article.
    fn written_ways(law: &str, title: &str, n: u32) -> Vec<(&'static str, String)> {
        let cn = chinese_numeral(n);
        let fw: String = n
            .to_string()
            .chars()
            .map(|c| char::from_u32(c as u32 - '0' as u32 + '０' as u32).unwrap())
            .collect();
        vec![
            ("law + 第Chinese条", format!("{law}第{cn}条")),
            (
                "中华人民共和国 + law + 第Chinese条",
                format!("{title}第{cn}条"),
            ),
            ("law + 第Arabic条", format!("{law}第{n}条")),
            ("law 第 Arabic 条 (spaces)", format!("{law} 第 {n} 条")),
            (
                "lawyer citation 《full title》第Chinese条",
                citation(title, n),
            ),
            ("law + Arabic条 (no 第)", format!("{law}{n}条")),
            ("in a sentence", format!("请问{law}第{cn}条是怎么规定的？")),
            ("full-width digits", format!("{law}第{fw}条")),
        ]
    }

    #[test]
    fn eight_ways_of_writing_an_article() {
        let cases = [
            ("民法典", "中华人民共和国民法典", 1042),
            ("劳动合同法", "中华人民共和国劳动合同法", 39),
            ("刑法", "中华人民共和国刑法", 264),
            ("民事诉讼法", "中华人民共和国民事诉讼法", 122),
            (
                "最高人民法院关于适用《民法典》婚姻家庭编的解释（一）",
                "最高人民法院关于适用《中华人民共和国民法典》婚姻家庭编的解释（一）",
                5,
            ),
            (
                "最高人民法院关于适用《民事诉讼法》的解释",
                "最高人民法院关于适用《中华人民共和国民事诉讼法》的解释",
                1,
            ),
            (
                "最高人民法院关于审理人身损害赔偿案件适用法律若干问题的解释",
                "最高人民法院关于审理人身损害赔偿案件适用法律若干问题的解释",
                20,
            ),
            ("个体工商户条例", "促进个体工商户发展条例", 2),
        ];
        for (law, title, n) in cases {
            for (way, q) in written_ways(law, title, n) {
                let got = resolve(&q);
                assert_eq!(got.len(), 1, "{way}: {q} → {got:?}");
                assert_eq!((got[0].0.as_str(), got[0].1), (law, n), "{way}: {q}");
                let marker = &got[0].2;
                assert!(
                    marker.ends_with('条') && marker.chars().any(is_numeral_char),
                    "{way}: {q} → marker {marker:?}"
                );
            }
        }
    }

    /// resolver.py `--test` edge cases.
    #[test]
    fn resolver_py_edge_cases() {
        let interp = "最高人民法院关于适用《民法典》婚姻家庭编的解释（一）";
        assert_eq!(
            first("最高人民法院关于适用《中华人民共和国民法典》婚姻家庭编的解释（一）第五条"),
            key(interp, 5)
        );
        assert_eq!(first("民法典婚姻家庭编第1042条"), key("民法典", 1042));
        assert_eq!(
            resolve("刑法第一百七十七条之一"),
            vec![("刑法".into(), 177, "第一百七十七条之一".into())]
        );
        assert_eq!(
            resolve("依照民法典的规定，劳动合同法第39条怎么理解"),
            vec![("劳动合同法".into(), 39, "第39条".into())]
        );
        assert_eq!(
            resolve("中华人民共和国刑法 第 264 条"),
            vec![("刑法".into(), 264, "第 264 条".into())]
        );
        assert_eq!(first("民法典第一〇四二条"), key("民法典", 1042));
        // The number comes back; that the Civil Code has no article 2000 is the caller's check
        // (resolver.py then resolves it to nothing).
        assert_eq!(first("民法典第二千条"), key("民法典", 2000));
        assert_eq!(
            resolve("民法典第1042条和第1043条"),
            vec![
                ("民法典".into(), 1042, "第1042条".into()),
                ("民法典".into(), 1043, "第1043条".into())
            ]
        );
        assert_eq!(first("婚姻法第三条"), None); // repealed, not a known name
        assert_eq!(first("第二十条规定"), None);
    }

    #[test]
    fn more_edge_cases() {
        // A law named earlier in the sentence never captures a marker that has its own law.
        assert_eq!(
            resolve("民法典第1042条和劳动合同法第39条"),
            vec![
                ("民法典".into(), 1042, "第1042条".into()),
                ("劳动合同法".into(), 39, "第39条".into())
            ]
        );
        assert_eq!(
            first("根据民法典，劳动合同法第三十九条"),
            key("劳动合同法", 39)
        );
        assert_eq!(first("民法典和刑法第264条"), key("刑法", 264));
        assert_eq!(
            first("最高人民法院关于适用《民法典》婚姻家庭编的解释（一）第五条和民法典"),
            key("最高人民法院关于适用《民法典》婚姻家庭编的解释（一）", 5)
        );
        // Nor one that does not touch the marker.
        assert_eq!(first("民法典规定第1042条"), None);
        assert_eq!(first("民法典中第1042条"), None);
        // Longest known name wins: 劳动合同法, not 合同法.
        assert_eq!(first("劳动合同法第39条"), key("劳动合同法", 39));
        assert_eq!(first("合同法第39条"), key("合同法", 39));
        assert_eq!(first("《中华人民共和国合同法》第52条"), key("合同法", 52));
        // 的 and 编 names in between.
        assert_eq!(first("民法典的第1042条"), key("民法典", 1042));
        assert_eq!(first("民法典总则编第十条"), key("民法典", 10));
        assert_eq!(first("民法典物权编第二百零九条"), key("民法典", 209));
        // As in resolver.py, any 2-6 characters before 编 go, 第五编 too.
        assert_eq!(first("民法典第五编第1042条"), key("民法典", 1042));
        // Chains: 和、及与，或至 and nothing; any other gap breaks the chain.
        assert_eq!(
            resolve("劳动合同法第39条、第40条及第四十一条")
                .iter()
                .map(|r| (r.0.as_str(), r.1))
                .collect::<Vec<_>>(),
            vec![("劳动合同法", 39), ("劳动合同法", 40), ("劳动合同法", 41)]
        );
        assert_eq!(
            resolve("刑法第264条至第266条").len(),
            2,
            "至 joins two markers"
        );
        assert_eq!(
            resolve("民法典第1042条第1043条").len(),
            2,
            "nothing between joins"
        );
        assert_eq!(
            resolve("民法典第1042条规定的第1043条")
                .iter()
                .map(|r| r.1)
                .collect::<Vec<_>>(),
            vec![1042]
        );
        // A marker without a law does not start a chain.
        assert_eq!(first("第1042条和第1043条"), None);
        // 第 may be left out only before Arabic numerals.
        assert_eq!(first("民法典三十九条"), None);
        assert_eq!(first("劳动合同法39条"), key("劳动合同法", 39));
        assert_eq!(first("劳动合同法 ３９ 条"), key("劳动合同法", 39));
        // Zero is not an article; the marker still passes its law on.
        assert_eq!(
            resolve("刑法第0条和第1条")
                .iter()
                .map(|r| r.1)
                .collect::<Vec<_>>(),
            vec![1]
        );
        // Quotes and brackets.
        assert_eq!(first("“劳动合同法”第39条"), key("劳动合同法", 39));
        assert_eq!(first("〈刑法〉第264条"), key("刑法", 264));
        // A 条 that is not an article marker.
        assert_eq!(first("劳动合同法第39款"), None);
        assert_eq!(first("劳动合同法第三十九"), None);
    }

    #[test]
    fn spans_are_byte_ranges_of_the_query() {
        for (q, marker) in [
            (
                "请问民法典第一千零四十二条是怎么规定的？",
                "第一千零四十二条",
            ),
            ("民法典 第 1042 条", "第 1042 条"),
            ("民法典第１０４２条", "第１０４２条"),
            ("民法典1042条", "1042条"),
            (
                "《中华人民共和国民法典》第一千零四十二条",
                "第一千零四十二条",
            ),
            ("刑法第一百七十七条之一怎么理解", "第一百七十七条之一"),
            ("民法典　第　１０４２　条 ", "第　１０４２　条"),
        ] {
            let (known, _) = table(DOCS);
            let refs = find_article_refs(q, &known);
            assert_eq!(refs.len(), 1, "{q}");
            assert_eq!(&q[refs[0].span.clone()], marker, "{q}");
        }
    }

    #[test]
    fn law_index_is_the_first_entry_with_the_name() {
        let known: Vec<String> = ["刑法", "民法典", "民法典", "", "刑法"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let refs = find_article_refs("民法典第1条，刑法第2条", &known);
        assert_eq!(
            refs.iter().map(|r| (r.law, r.article)).collect::<Vec<_>>(),
            vec![(1, 1), (0, 2)]
        );
        // An empty name matches nothing.
        assert!(find_article_refs("第1条", &known).is_empty());
        assert!(find_article_refs("民法典第1条", &[]).is_empty());
    }

    #[test]
    fn everyday_questions_name_no_article() {
        for q in [
            "公司不给交社保怎么办",
            "离婚后孩子的抚养权归谁？",
            "试用期可以随时辞退吗",
            "我家养了三条狗，邻居投诉怎么办",
            "第一条鱼是谁钓的",
            "合同里写的第3条违约金过高怎么办",
            "劳动法规定加班费怎么算",
            "民法典规定的诉讼时效是几年",
            "刑法里盗窃罪判几年",
            "100条短信被骗了怎么办",
            "",
        ] {
            assert_eq!(resolve(q), vec![], "{q}");
        }
    }

    // --- scale --------------------------------------------------------------------------------

    /// Brute force: the longest name each candidate ends with, scanning every name.
    fn naive(query: &str, known: &[String]) -> Vec<ArticleRef> {
        let norm = Normalised::new(query);
        let q = norm.text.as_str();
        let mut out = Vec::new();
        let mut previous: Option<(usize, usize)> = None;
        for c in MARKER.captures_iter(q) {
            let whole = c.get(0).unwrap();
            let mut own = None;
            for cand in candidates(&q[..whole.start()]) {
                let best = known
                    .iter()
                    .enumerate()
                    .filter(|(_, n)| !n.is_empty() && cand.ends_with(n.as_str()))
                    .max_by_key(|(i, n)| (n.len(), std::cmp::Reverse(*i)));
                if let Some((i, _)) = best {
                    own = Some(i);
                    break;
                }
            }
            let law = own.or_else(|| {
                previous
                    .filter(|(_, end)| JOINERS.contains(&&q[*end..whole.start()]))
                    .map(|(l, _)| l)
            });
            let Some(law) = law else { continue };
            previous = Some((law, whole.end()));
            let n = parse_numeral(c.get(1).or_else(|| c.get(2)).unwrap().as_str());
            if let Some(article) = n.filter(|n| *n > 0) {
                out.push(ArticleRef {
                    law,
                    article,
                    span: norm.original(whole.start(), whole.end()),
                });
            }
        }
        out
    }

    /// 10,000 synthetic names, many of them suffixes of others (甲乙法 and 丙甲乙法): the hashed
    /// lookup must agree with a scan of every name, and a long query stays cheap.
    #[test]
    fn ten_thousand_names() {
        const SYL: [char; 16] = [
            '甲', '乙', '丙', '丁', '戊', '己', '庚', '辛', '壬', '癸', '子', '丑', '寅', '卯',
            '辰', '巳',
        ];
        const ENDS: [&str; 5] = ["法", "条例", "规定", "办法", "的解释(二)"];
        let word = |mut i: usize, len: usize| -> String {
            (0..len)
                .map(|_| {
                    let c = SYL[i % SYL.len()];
                    i /= SYL.len();
                    c
                })
                .collect()
        };
        let mut known = Vec::new();
        for i in 0..5_000 {
            let base = format!("{}{}", word(i, 3), ENDS[i % ENDS.len()]);
            known.push(format!("关于{}{}", word(i * 7 + 1, 2), base)); // ends with `base`
            known.push(base);
        }
        known.push("民法典".into());
        known.push("法".into()); // one character: the last resort for anything ending in 法
        assert_eq!(known.len(), 10_002);
        let set: BTreeSet<&String> = known.iter().collect();
        assert_eq!(set.len(), known.len(), "synthetic names are distinct");

        // Each short name alone, and behind text that does not complete its long name.
        for i in (0..5_000).step_by(37) {
            let base = &known[2 * i + 1];
            let long = &known[2 * i];
            let refs = find_article_refs(&format!("{base}第{}条", i + 1), &known);
            assert_eq!(refs.len(), 1, "{base}");
            assert_eq!((refs[0].law, refs[0].article), (2 * i + 1, i as u32 + 1));
            let refs = find_article_refs(&format!("请问{long}第{}条", i + 1), &known);
            assert_eq!((refs[0].law, refs[0].article), (2 * i, i as u32 + 1));
            let refs = find_article_refs(&format!("请问关于{base}第1条"), &known);
            assert_eq!(
                refs[0].law,
                2 * i + 1,
                "关于 alone does not make the long name"
            );
        }

        // A 2,000-character query with markers scattered in filler text, long and short names.
        let mut query = String::new();
        let mut i = 0;
        while query.chars().count() < 2_000 {
            let name = &known[(i * 613) % known.len()];
            query.push_str("在这种情况下，根据");
            query.push_str(name);
            query.push_str(&format!(
                "第{}条和第{}条",
                i + 1,
                chinese_numeral(i as u32 + 2)
            ));
            query.push_str("的规定，应当如何处理？民法典的规定第三条");
            i += 1;
        }
        let fast = find_article_refs(&query, &known);
        assert_eq!(fast, naive(&query, &known));
        assert_eq!(fast.len(), 2 * i, "two per name, none for the bare 第三条");
        for (k, r) in fast.iter().enumerate() {
            assert_eq!(r.law, ((k / 2) * 613) % known.len());
        }
        for q in [
            "某某法第1条",
            "法第2条",
            "丙法第3条",
            "关于甲法第4条",
            "民法典第5条",
        ] {
            assert_eq!(find_article_refs(q, &known), naive(q, &known), "{q}");
        }
        assert_eq!(find_article_refs("某某法第1条", &known)[0].law, 10_001);

        // Timing, printed only (debug builds are an order of magnitude slower than release).
        let typical = format!(
            "{}请问{}第三十九条和第四十条是怎么规定的？",
            "公司不给交社保，我想解除劳动合同，".repeat(120),
            known[2 * 1234]
        );
        assert_eq!(find_article_refs(&typical, &known).len(), 2);
        let everyday = "公司不给交社保怎么办".repeat(200);
        let rounds = 20;
        let time = |q: &str| {
            let started = std::time::Instant::now();
            for _ in 0..rounds {
                std::hint::black_box(find_article_refs(std::hint::black_box(q), &known));
            }
            started.elapsed() / rounds
        };
        eprintln!(
            "{} names; per query: {} chars with {} refs {:?}; {} chars with 2 refs {:?}; {} chars without a marker {:?}",
            known.len(),
            query.chars().count(),
            fast.len(),
            time(&query),
            typical.chars().count(),
            time(&typical),
            everyday.chars().count(),
            time(&everyday),
        );
    }

    // --- the questions corpus -----------------------------------------------------------------

    /// The questions corpus: `$DOCPIPE_CORPUS/questions`, else the repository's.
    fn corpus() -> PathBuf {
        std::env::var_os("DOCPIPE_CORPUS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus"))
            .join("questions")
    }

    struct LawDoc {
        law: String,
        title: String,
        articles: BTreeSet<u32>,
    }

    /// The documents of laws/INDEX.tsv with the articles docpipe's heading recogniser finds in
    /// them (articles.py's `parse_law`, reduced to the numbers).
    fn load_laws(dir: &std::path::Path) -> Vec<LawDoc> {
        let index = std::fs::read_to_string(dir.join("laws/INDEX.tsv")).unwrap();
        let mut docs = Vec::new();
        for row in index.lines().skip(1).filter(|l| !l.trim().is_empty()) {
            let cols: Vec<&str> = row.split('\t').collect();
            let text = std::fs::read_to_string(dir.join("laws").join(cols[0])).unwrap();
            let mut uncommented = String::new();
            let mut rest = text.as_str();
            while let Some(open) = rest.find("<!--") {
                uncommented.push_str(&rest[..open]);
                rest = rest[open..]
                    .find("-->")
                    .map_or("", |e| &rest[open + e + 3..]);
            }
            uncommented.push_str(rest);
            let mut title = String::new();
            let mut articles = BTreeSet::new();
            for line in uncommented.lines() {
                let line = line.trim().trim_start_matches(['\u{200b}', '\u{feff}']);
                if let Some(h) = line.strip_prefix('#') {
                    if title.is_empty() {
                        title = h.trim_start_matches('#').split_whitespace().collect();
                    }
                    continue;
                }
                if let Some(("article", t)) = crate::recognise_heading(line) {
                    articles.extend(article_number(&t));
                }
            }
            docs.push(LawDoc {
                law: cols[1].to_string(),
                title,
                articles,
            });
        }
        docs
    }

    /// 200 articles of the corpus, spread evenly over its distinct (law, number) keys, each
    /// written the 8 ways, all resolve (resolver.py: 1600/1600); and none of the everyday
    /// questions of train.jsonl names an article the corpus has (resolver.py: 0 of 1231).
    #[test]
    fn corpus_articles_resolve() {
        let dir = corpus();
        let docs = load_laws(&dir);
        let mut known = Vec::new();
        let mut law_of = Vec::new();
        for d in docs.iter().filter(|d| !d.articles.is_empty()) {
            for name in [&d.law, &d.title] {
                known.push(normalize_law_name(name));
                law_of.push(d.law.as_str());
            }
        }
        let mut keys: BTreeMap<(&str, u32), &LawDoc> = BTreeMap::new();
        for d in &docs {
            for n in &d.articles {
                keys.entry((d.law.as_str(), *n)).or_insert(d);
            }
        }
        assert!(keys.len() >= 200, "{} articles", keys.len());
        let step = keys.len() / 200;
        let sample: Vec<_> = keys.iter().step_by(step).take(200).collect();
        let mut wrong = Vec::new();
        for ((law, n), doc) in &sample {
            for (way, q) in written_ways(law, &doc.title, *n) {
                let got = find_article_refs(&q, &known);
                let first = got.first().map(|r| (law_of[r.law], r.article));
                if first != Some((law, *n)) {
                    wrong.push(format!("{way}: {q} → {first:?}"));
                }
            }
        }
        assert!(
            wrong.is_empty(),
            "{} of {} wrong, e.g. {:?}",
            wrong.len(),
            sample.len() * 8,
            &wrong[..wrong.len().min(10)]
        );

        let questions = std::fs::read_to_string(dir.join("train.jsonl")).unwrap();
        let mut named = Vec::new();
        let mut count = 0;
        for line in questions.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let q = v["question"].as_str().unwrap();
            count += 1;
            let hits: Vec<_> = find_article_refs(q, &known)
                .into_iter()
                .filter(|r| keys.contains_key(&(law_of[r.law], r.article)))
                .collect();
            if !hits.is_empty() {
                named.push(q.to_string());
            }
        }
        assert!(count > 0);
        assert!(named.is_empty(), "{} of {count}: {named:?}", named.len());
        eprintln!(
            "{} documents, {} articles; {} sampled × 8 ways resolved; 0 of {count} questions name one",
            docs.len(),
            keys.len(),
            sample.len()
        );
    }
}
