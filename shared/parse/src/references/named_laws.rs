//! The law an article reference names without title marks (民法典第…): where its name begins.

use std::sync::LazyLock;

use regex::Regex;

use super::forms::{touches, Atom, AtomKind};

/// A law named without title marks just before 第…条 (民法典第一千零七十九条, 刑法第264条): the run
/// of Han characters before it, ending as a law's name ends.
static NAMED_LAW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?P<name>[\p{Han}]{1,30}(?:法典|法|条例|规定|办法|细则|解释|决定|通则|规则))$")
        .expect("static regex")
});

/// Verbs and particles that end a law name's run on its left ("依照民法典" → 民法典, "应当认定为刑法" →
/// 刑法): the name is what follows the last of them that leaves a name.
const NAME_STOPS: [&str; 40] = [
    "依照", "按照", "依据", "根据", "适用", "违反", "参照", "对照", "符合", "属于", "以及", "或者",
    "具有", "达到", "虚开", "运输", "通过", "认定", "规定", "制造", "和", "及", "与", "或", "为",
    "的", "在", "向", "将", "把", "被", "从", "于", "是", "即", "并", "有", "因", "以", "由",
];

/// The codes people cite by their short name, alone, in running text ("擅自制造刑法第二百零九条"): a
/// run ending with one is that code.
const CODES: [&str; 8] = [
    "民法典",
    "刑法",
    "宪法",
    "刑事诉讼法",
    "民事诉讼法",
    "行政诉讼法",
    "行政处罚法",
    "行政许可法",
];

/// Words ending like a law's name that name none (依法第…: by law).
const NOT_LAW_NAMES: [&str; 8] = [
    "依法", "违法", "合法", "方法", "办法", "立法", "执法", "司法",
];

/// The two-character laws (most names are longer; 刑法第…, 宪法第…).
const SHORT_LAW_NAMES: [&str; 3] = ["刑法", "宪法", "民法"];

/// The law an article reference names on its left: none (this regulation), a title in marks, or
/// a name without them (民法典第…).
pub(super) fn law_on_the_left(text: &str, start: usize, previous: Option<&Atom>) -> Option<String> {
    if let Some(p) = previous {
        if touches(
            text,
            p,
            &Atom {
                kind: AtomKind::Own,
                range: start..start,
                name: None,
                more: Vec::new(),
            },
        ) {
            return match p.kind {
                AtomKind::Title => p.name.clone(),
                _ => None,
            };
        }
    }
    let before = &text[..start];
    let run_start = before
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_alphabetic() && !c.is_ascii())
        .last()
        .map(|(i, _)| i)?;
    let run = &before[run_start..];
    let name = NAMED_LAW.captures(run)?.name("name")?.as_str();
    let code = CODES
        .iter()
        .filter(|c| name.ends_with(*c))
        .max_by_key(|c| c.len());
    let name = match name.find("中华人民共和国") {
        Some(i) => &name[i..],
        None if code.is_some() => &name[name.len() - code.map_or(0, |c| c.len())..],
        // The last stop word in the run that leaves a name ends it on the left (国有 is no 有).
        None => {
            let cut = NAME_STOPS
                .iter()
                .flat_map(|s| name.match_indices(s).map(move |(i, _)| (i, s.len())))
                .filter(|(i, _)| !(name[..*i].ends_with('国') && name[*i..].starts_with('有')))
                .map(|(i, len)| i + len)
                .filter(|cut| {
                    let rest = &name[*cut..];
                    let chars = rest.chars().count();
                    (chars >= 3 || SHORT_LAW_NAMES.contains(&rest)) && NAMED_LAW.is_match(rest)
                })
                .max()
                .unwrap_or(0);
            &name[cut..]
        }
    };
    let chars = name.chars().count();
    let plausible = (chars >= 3 || SHORT_LAW_NAMES.contains(&name))
        && !NOT_LAW_NAMES
            .iter()
            .any(|w| name.ends_with(w) && chars <= 3)
        && NAMED_LAW.is_match(name)
        && !name.starts_with('本');
    plausible.then(|| name.to_string())
}
