//! Text clean-up shared by every format: invisible characters out, letter-spacing undone.

use std::borrow::Cow;

/// Characters that carry no text: zero-width joiners and spaces, BOMs, the replacement character
/// (a decoding failure, never content) and C0/C1 controls other than line breaks and tabs.
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200B}'..='\u{200F}' | '\u{2060}' | '\u{FEFF}' | '\u{FFFD}' | '\u{00AD}' | '\u{FFFE}'
    ) || (c.is_control() && c != '\n' && c != '\t')
}

pub(crate) fn is_space(c: char) -> bool {
    c.is_whitespace() || c == '\u{3000}' || c == '\u{00A0}'
}

/// CJK ideographs, kana, hangul and CJK/full-width punctuation: the scripts written without
/// spaces between words.
pub(crate) fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{3000}'..='\u{303F}'   // CJK punctuation
        | '\u{3040}'..='\u{30FF}' // kana
        | '\u{3400}'..='\u{4DBF}'
        | '\u{4E00}'..='\u{9FFF}'
        | '\u{AC00}'..='\u{D7AF}'
        | '\u{F900}'..='\u{FAFF}'
        | '\u{FF00}'..='\u{FFEF}' // full-width forms
        | '\u{20000}'..='\u{2FA1F}')
}

/// What stands for the gap between two pieces of text that stood apart on one printed line (two
/// boxes OCR cut from one row, two characters far apart in one box): a full-width space beside
/// Chinese, an ASCII space between other words.
pub(crate) fn gap_between(before: &str, after: &str) -> char {
    let cjk_end = before.chars().next_back().is_some_and(is_cjk);
    if cjk_end || after.chars().next().is_some_and(is_cjk) {
        '\u{3000}'
    } else {
        ' '
    }
}

pub(crate) fn is_ideograph(c: char) -> bool {
    matches!(c,
        '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{F900}'..='\u{FAFF}'
        | '\u{20000}'..='\u{2FA1F}' | '\u{3040}'..='\u{30FF}' | '\u{AC00}'..='\u{D7AF}')
}

/// Drops invisible characters; keeps line breaks.
pub(crate) fn strip_invisible(s: &str) -> String {
    s.chars().filter(|c| !is_invisible(*c)).collect()
}

/// One line ready for heading recognition: invisible characters out, outer spaces (ASCII and
/// full-width) trimmed.
pub(crate) fn normalize_line(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_invisible) {
        return Cow::Borrowed(s.trim_matches(is_space));
    }
    let cleaned: String = s.chars().filter(|c| !is_invisible(*c)).collect();
    Cow::Owned(cleaned.trim_matches(is_space).to_string())
}

/// Runs of any whitespace become one ASCII space, then spaces between two CJK characters go:
/// those are layout artefacts (letter-spaced PDFs, `##  第一章  总则`), never word separators.
pub(crate) fn compact_title(s: &str) -> String {
    let mut collapsed = String::with_capacity(s.len());
    let mut pending_space = false;
    for c in s.chars().filter(|c| !is_invisible(*c)) {
        if is_space(c) {
            pending_space = !collapsed.is_empty();
            continue;
        }
        if pending_space {
            collapsed.push(' ');
            pending_space = false;
        }
        collapsed.push(c);
    }
    remove_spaces_between_cjk(&collapsed)
}

fn remove_spaces_between_cjk(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    for (i, &c) in chars.iter().enumerate() {
        if c == ' ' && i > 0 && i + 1 < chars.len() {
            let (prev, next) = (chars[i - 1], chars[i + 1]);
            if is_cjk(prev) && is_cjk(next) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// Letter-spaced CJK text ("人 人 生 而 自 由") comes out of some PDFs; a line is treated as
/// letter-spaced when most of its ideographs are followed by a single space.
pub(crate) fn undo_letter_spacing(line: &str) -> String {
    let chars: Vec<char> = line.chars().collect();
    let ideographs = chars.iter().filter(|c| is_ideograph(**c)).count();
    if ideographs < 4 {
        // Too short to judge from its own content; markers like "第 一 条" are still compacted
        // by heading recognition.
        return line.to_string();
    }
    let spaced = chars
        .windows(2)
        .filter(|w| is_ideograph(w[0]) && w[1] == ' ')
        .count();
    if spaced * 2 < ideographs {
        return line.to_string();
    }
    let mut out = String::with_capacity(line.len());
    for (i, &c) in chars.iter().enumerate() {
        if c == ' ' && i > 0 && i + 1 < chars.len() {
            let (prev, next) = (chars[i - 1], chars[i + 1]);
            // Keep the space between CJK and Latin/digits ("第217A 号" stays readable).
            if (is_cjk(prev) || prev.is_ascii_punctuation())
                && (is_cjk(next) || next.is_ascii_punctuation())
            {
                continue;
            }
            if is_cjk(prev) && is_cjk(next) {
                continue;
            }
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compacts_titles() {
        assert_eq!(
            compact_title("数据  安全 Data  Security"),
            "数据安全 Data Security"
        );
        assert_eq!(compact_title("第 一 章 总 则"), "第一章总则");
        assert_eq!(
            compact_title("\u{200B}1.1　数据 Security"),
            "1.1 数据 Security"
        );
    }

    #[test]
    fn undoes_letter_spacing_only_when_spaced() {
        assert_eq!(
            undo_letter_spacing("人 人 生 而 自 由, 在 尊 严"),
            "人人生而自由,在尊严"
        );
        assert_eq!(
            undo_letter_spacing("2019 年 10 月 30 日 漯河市第七届人民代表大会"),
            "2019 年 10 月 30 日 漯河市第七届人民代表大会"
        );
    }
}
