//! Which law a citation names. A law is named exactly: by its normalised title (中华人民共和国 and
//! title marks out, a version date in brackets ignored), which is also its short name (民法典,
//! 刑法), or by an alias people write (刑诉法). Never by a different law whose name ends the same:
//! 劳动合同法 is not 合同法, 社会保险法 is not 保险法, 海洋环境保护法 is not 环境保护法.
//!
//! The one loosening: free text without title marks may run a reference verb into the name
//! (另见广告法, 参见民法典). Such a run names the law after the verb, and only there.

pub use docpipe_parse::article_ref::work_key;

/// Laws repealed by a code that took their place, with the day it took effect: the Civil Code
/// (第一千二百六十条) repealed these on 2021-01-01. A citation of one names its successor even when no
/// document carries the old law. Each answers for exactly its own name.
const REPEALED: [(&str, &str, &str); 9] = [
    ("婚姻法", "中华人民共和国民法典", "2021-01-01"),
    ("继承法", "中华人民共和国民法典", "2021-01-01"),
    ("民法通则", "中华人民共和国民法典", "2021-01-01"),
    ("收养法", "中华人民共和国民法典", "2021-01-01"),
    ("担保法", "中华人民共和国民法典", "2021-01-01"),
    ("合同法", "中华人民共和国民法典", "2021-01-01"),
    ("物权法", "中华人民共和国民法典", "2021-01-01"),
    ("侵权责任法", "中华人民共和国民法典", "2021-01-01"),
    ("民法总则", "中华人民共和国民法典", "2021-01-01"),
];

/// Short names lawyers write for codes whose titles say more.
const ALIASES: [(&str, &str); 4] = [
    ("刑诉法", "刑事诉讼法"),
    ("民诉法", "民事诉讼法"),
    ("行诉法", "行政诉讼法"),
    ("个保法", "个人信息保护法"),
];

/// Verbs that free text runs into a law's name and that no law's name ends with: what follows
/// one of them is the name. (依照, 根据 and the like are cut off where the citation is read.)
const RUN_IN_VERBS: [&str; 6] = ["另见", "参见", "详见", "见", "援引", "比照"];

/// The successor and the day of a law the built-in list says was repealed; none for any other
/// name, whatever it ends with.
pub fn repealed(key: &str) -> Option<(&'static str, &'static str)> {
    REPEALED
        .iter()
        .find(|(name, _, _)| *name == key)
        .map(|(_, successor, on)| (*successor, *on))
}

/// The key of the law `key` names, given which keys are known: itself, its alias, or (unmarked
/// text only) the known name after a run-in verb. None: no known law is named.
pub fn resolve(key: &str, marked: bool, known: impl Fn(&str) -> bool) -> Option<String> {
    let key = work_key(key);
    if known(key) {
        return Some(key.to_string());
    }
    if let Some((_, full)) = ALIASES.iter().find(|(alias, _)| *alias == key) {
        if known(full) {
            return Some(full.to_string());
        }
    }
    if marked {
        return None;
    }
    RUN_IN_VERBS.iter().find_map(|verb| {
        let at = key.rfind(verb)?;
        let name = &key[at + verb.len()..];
        (!name.is_empty() && known(name)).then(|| name.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn known<'a>(keys: &'a [&'a str]) -> impl Fn(&str) -> bool + 'a {
        move |k| keys.contains(&k)
    }

    #[test]
    fn a_law_is_named_exactly_never_by_how_its_name_ends() {
        let keys = ["合同法", "保险法", "环境保护法", "广告法"];
        assert_eq!(resolve("劳动合同法", true, known(&keys)), None);
        assert_eq!(resolve("劳动合同法", false, known(&keys)), None);
        assert_eq!(resolve("社会保险法", false, known(&keys)), None);
        assert_eq!(resolve("海洋环境保护法", true, known(&keys)), None);
        assert_eq!(
            resolve("合同法", true, known(&keys)).as_deref(),
            Some("合同法")
        );
        assert_eq!(
            resolve("另见广告法", false, known(&keys)).as_deref(),
            Some("广告法")
        );
        assert_eq!(resolve("另见广告法", true, known(&keys)), None);
        assert_eq!(
            resolve("刑诉法", true, known(&["刑事诉讼法"])).as_deref(),
            Some("刑事诉讼法")
        );
        assert_eq!(
            resolve("湿地保护法(2021-12-24)", true, known(&["湿地保护法"])).as_deref(),
            Some("湿地保护法")
        );
    }

    #[test]
    fn the_repeal_list_answers_for_its_own_names_only() {
        assert_eq!(
            repealed("合同法"),
            Some(("中华人民共和国民法典", "2021-01-01"))
        );
        assert_eq!(repealed("劳动合同法"), None);
        assert_eq!(repealed("技术合同法"), None);
        assert_eq!(
            repealed("婚姻法"),
            Some(("中华人民共和国民法典", "2021-01-01"))
        );
    }

    /// Every law name the corpus holds (its files' titles, the laws its questions cite, and what
    /// its laws cite in title marks) where one name ends with another: each resolves to itself
    /// when its law is known, and to nothing when only the shorter one is.
    #[test]
    fn corpus_law_names_that_end_alike_never_cross() {
        let names = corpus_law_names();
        let pairs: Vec<(&str, &str)> = names
            .iter()
            .flat_map(|a| {
                names
                    .iter()
                    .filter(move |b| a != *b && a.ends_with(b.as_str()))
                    .map(move |b| (a.as_str(), b.as_str()))
            })
            .collect();
        assert!(pairs.len() >= 200, "only {} pairs", pairs.len());
        let longer: BTreeSet<&str> = pairs.iter().map(|(a, _)| *a).collect();
        assert!(longer.len() >= 200, "only {} names", longer.len());
        let mut crossed = Vec::new();
        for (long, short) in &pairs {
            for marked in [true, false] {
                if resolve(long, marked, known(&[short])).is_some() {
                    crossed.push(format!("{long} → {short}"));
                }
                let both = [*long, *short];
                if resolve(long, marked, known(&both)).as_deref() != Some(*long) {
                    crossed.push(format!("{long} (indexed) → not itself"));
                }
            }
        }
        assert!(
            crossed.is_empty(),
            "{} cross-resolutions: {:?}",
            crossed.len(),
            &crossed[..crossed.len().min(20)]
        );
    }

    fn corpus_law_names() -> BTreeSet<String> {
        let corpus = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
        let mut names = BTreeSet::new();
        let ends_as_law = |n: &str| {
            ["法", "法典", "条例", "规定", "办法", "细则", "解释", "决定"]
                .iter()
                .any(|e| n.ends_with(e))
        };
        for index in ["laws/INDEX.tsv", "questions/laws/INDEX.tsv"] {
            let text = std::fs::read_to_string(corpus.join(index)).expect("the corpus's index");
            for field in text.lines().flat_map(|l| l.split('\t')) {
                let stem = field.rsplit('/').next().unwrap_or(field);
                let stem = stem.strip_suffix(".md").unwrap_or(stem);
                let key = docpipe_parse::article_ref::normalize_law_name(work_key(stem));
                if ends_as_law(&key) {
                    names.insert(key);
                }
            }
        }
        for dir in ["laws", "questions/laws"] {
            for entry in std::fs::read_dir(corpus.join(dir)).expect("the corpus's laws") {
                let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
                for cited in text.split('《').skip(1).filter_map(|s| s.split_once('》')) {
                    let key = docpipe_parse::article_ref::normalize_law_name(cited.0);
                    if ends_as_law(&key) && key.chars().count() <= 40 {
                        names.insert(key);
                    }
                }
            }
        }
        names
    }
}
