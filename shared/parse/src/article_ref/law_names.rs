//! Law names as compared: the normal form, a title line, a citation, the work a version is of.

use std::ops::Range;

use super::numerals::{chinese_numeral, fold};
use crate::normalize::{is_invisible, is_space};

const PRC: &str = "中华人民共和国";

fn is_dropped(c: char) -> bool {
    is_space(c)
        || is_invisible(c)
        || matches!(
            c,
            '《' | '》'
                | '〈'
                | '〉'
                | '「'
                | '」'
                | '“'
                | '”'
                | '"'
                | '\''
                | '‘'
                | '’'
                | '<'
                | '>'
        )
}

/// The normalised text with, for every character kept, the byte range it came from in the
/// original, so a marker found in the normalised text can be reported in the query's offsets.
pub(super) struct Normalised {
    pub(super) text: String,
    /// (byte offset in `text`, original start, original end), one per character of `text`.
    chars: Vec<(usize, usize, usize)>,
}

impl Normalised {
    pub(super) fn new(s: &str) -> Self {
        let kept: Vec<(char, usize, usize)> = s
            .char_indices()
            .filter(|(_, c)| !is_dropped(*c))
            .map(|(i, c)| (fold(c), i, i + c.len_utf8()))
            .collect();
        // str.replace("中华人民共和国", ""): one left-to-right pass over the cleaned text.
        let prc: Vec<char> = PRC.chars().collect();
        let mut text = String::with_capacity(s.len());
        let mut chars = Vec::with_capacity(kept.len());
        let mut i = 0;
        while i < kept.len() {
            if kept[i].0 == prc[0]
                && kept.len() - i >= prc.len()
                && kept[i..i + prc.len()]
                    .iter()
                    .zip(&prc)
                    .all(|(k, p)| k.0 == *p)
            {
                i += prc.len();
                continue;
            }
            let (c, start, end) = kept[i];
            chars.push((text.len(), start, end));
            text.push(c);
            i += 1;
        }
        Normalised { text, chars }
    }

    /// The original byte range of the normalised range `start..end` (both on char boundaries,
    /// `start < end`).
    pub(super) fn original(&self, start: usize, end: usize) -> Range<usize> {
        let first = self
            .chars
            .binary_search_by_key(&start, |c| c.0)
            .expect("marker starts on a character");
        let after = self
            .chars
            .binary_search_by_key(&end, |c| c.0)
            .unwrap_or_else(|i| i);
        self.chars[first].1..self.chars[after - 1].2
    }
}

/// Spaces (incl. U+3000), 《》〈〉 and quotes out, full-width digits to ASCII, every 中华人民共和国
/// out. Also, as in resolver.py, full-width brackets （） become () and 「」<> go with the quotes;
/// invisible characters (zero-width spaces, BOMs) go with the spaces. Queries and law names must
/// both pass through here for [`find_article_refs`](super::find_article_refs) to match them.
pub fn normalize_law_name(s: &str) -> String {
    Normalised::new(s).text
}

/// The endings of a regulation's name: what a title line must end with to be taken as one.
const TITLE_ENDINGS: [&str; 14] = [
    "法", "法典", "条例", "规定", "办法", "细则", "规则", "决定", "解释", "批复", "规范", "纲要",
    "章程", "准则",
];

/// The regulation's name on the first line of `text`, when that line is one: what a document
/// whose format carries no heading mark (a PDF, a text file) is cited by. The line ends at a line
/// break, or where its heading note's date begins ("中华人民共和国湿地保护法 2021年12月24日…");
/// a name is 4 to 64 characters, has no sentence punctuation, is not a chapter or an article, and
/// ends as regulations' names end.
pub fn title_line(text: &str) -> Option<&str> {
    let line = text.trim_start().lines().next()?.trim();
    let name = match line.find(|c: char| c.is_ascii_digit() || c == '（' || c == '(') {
        Some(at) => line[..at].trim_end(),
        None => line,
    };
    let chars = name.chars().count();
    let punctuated = name.contains(['，', '。', '；', '：', '、', '！', '？', ',', ';', ':']);
    let ok = (4..=64).contains(&chars)
        && !punctuated
        && !name.starts_with('第')
        && TITLE_ENDINGS.iter().any(|e| name.ends_with(e));
    ok.then_some(name)
}

/// 《中华人民共和国民法典》第一千零四十二条 from ("中华人民共和国民法典", 1042). The title is used as
/// given: trimmed, and a 《》 pair around the whole of it removed; title marks inside it (an
/// interpretation quoting a law) become 〈〉, as lawyers nest them and articles.py writes them:
/// 《最高人民法院关于适用〈中华人民共和国民法典〉婚姻家庭编的解释（一）》第五条.
pub fn citation(law_title: &str, article: u32) -> String {
    let title = law_title.trim_matches(|c: char| is_space(c) || is_invisible(c));
    let title = strip_wrapping_marks(title).unwrap_or(title);
    let name: String = title
        .chars()
        .map(|c| match c {
            '《' => '〈',
            '》' => '〉',
            _ => c,
        })
        .collect();
    format!("《{name}》第{}条", chinese_numeral(article))
}

/// "《X》" → "X" when the first 《 closes at the very end (not "《A》和《B》").
fn strip_wrapping_marks(s: &str) -> Option<&str> {
    let inner = s.strip_prefix('《')?.strip_suffix('》')?;
    let mut depth = 1usize;
    for c in inner.chars() {
        match c {
            '《' => depth += 1,
            '》' => {
                depth -= 1;
                if depth == 0 {
                    return None;
                }
            }
            _ => {}
        }
    }
    Some(inner)
}

/// The work a normalised title names: the title without a trailing version date in brackets
/// (湿地保护法(2021-12-24) → 湿地保护法, full-width brackets too). What is in the brackets is a date
/// when it is at least eight digits and dashes (20211224, 2021-12-24), so 关于(一)的规定 stays
/// whole; so does a title that is only a date, as an empty key would make one work of them all.
pub fn work_key(title_key: &str) -> &str {
    /// 20211224 or 2021-12-24: anything shorter is taken for no date.
    const DATE_CHARS: usize = 8;
    let body = title_key.trim_end_matches([')', '）']);
    let Some(at) = body.rfind(['(', '（']) else {
        return title_key;
    };
    // The last opening bracket, so what follows it holds no other.
    let date = body[at..].trim_start_matches(['(', '（']);
    let is_date =
        date.chars().count() >= DATE_CHARS && date.chars().all(|c| c.is_ascii_digit() || c == '-');
    if at > 0 && is_date {
        &title_key[..at]
    } else {
        title_key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_line_that_names_a_regulation_is_its_title() {
        assert_eq!(
            title_line("中华人民共和国湿地保护法\n2021 年 12 月 24 日…通过"),
            Some("中华人民共和国湿地保护法")
        );
        assert_eq!(
            title_line("  中华人民共和国湿地保护法 2021年12月24日通过"),
            Some("中华人民共和国湿地保护法")
        );
        assert_eq!(
            title_line("专利法实施细则（2023年修订）"),
            Some("专利法实施细则")
        );
        assert_eq!(title_line("第一章 总则"), None);
        assert_eq!(title_line("第八条规定的，依照本法处理"), None);
        assert_eq!(title_line("为了加强湿地保护，制定本法"), None);
        assert_eq!(title_line("湿地保护工作报告"), None);
        assert_eq!(title_line(""), None);
    }

    #[test]
    fn normalises_law_names() {
        for (s, want) in [
            ("中华人民共和国民法典", "民法典"),
            ("《中华人民共和国民法典》", "民法典"),
            ("  中华人民共和国　劳动合同法 ", "劳动合同法"),
            (
                "最高人民法院关于适用《中华人民共和国民法典》婚姻家庭编的解释（一）",
                "最高人民法院关于适用民法典婚姻家庭编的解释(一)",
            ),
            (
                "最高人民法院关于适用〈中华人民共和国民法典〉婚姻家庭编的解释（一）",
                "最高人民法院关于适用民法典婚姻家庭编的解释(一)",
            ),
            ("“刑法”第２６４条", "刑法第264条"),
            ("中华 人民共和国刑法", "刑法"),
            ("中华人民共和国中华人民共和国刑法", "刑法"),
            ("刑\u{200b}法", "刑法"),
            ("", ""),
        ] {
            assert_eq!(normalize_law_name(s), want, "{s}");
        }
    }

    #[test]
    fn a_version_date_in_brackets_is_no_part_of_the_work() {
        assert_eq!(work_key("湿地保护法(2021-12-24)"), "湿地保护法");
        assert_eq!(work_key("湿地保护法（2021-12-24）"), "湿地保护法");
        assert_eq!(work_key("湿地保护法(20211224)"), "湿地保护法");
        assert_eq!(work_key("关于(一)的规定"), "关于(一)的规定");
        assert_eq!(work_key("湿地保护法"), "湿地保护法");
        assert_eq!(work_key("湿地保护法(2021)"), "湿地保护法(2021)");
        assert_eq!(work_key("细则（2023年修订）"), "细则（2023年修订）");
        assert_eq!(work_key(""), "");
        assert_eq!(work_key("(2021-12-24)"), "(2021-12-24)");
        assert_eq!(work_key("（2021-12-24）"), "（2021-12-24）");
    }

    #[test]
    fn a_work_key_is_a_slice_of_its_title() {
        let title = String::from("湿地保护法(2021-12-24)");
        let key = work_key(&title);
        assert!(std::ptr::eq(key.as_ptr(), title.as_ptr()));
        assert_eq!(
            work_key(&normalize_law_name(
                "中华人民共和国湿地保护法（2021-12-24）"
            )),
            "湿地保护法"
        );
    }
}
