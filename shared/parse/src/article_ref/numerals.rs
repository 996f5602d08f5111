//! Chinese numerals read and written as statutes write them, and the number 第N条 opens with.

use crate::normalize::{is_invisible, is_space};

/// Full-width digits and brackets as their ASCII forms, so that one reading serves both.
pub(super) fn fold(c: char) -> char {
    match c {
        '０'..='９' => char::from(b'0' + (c as u32 - '０' as u32) as u8),
        '（' => '(',
        '）' => ')',
        _ => c,
    }
}

fn cn_digit(c: char) -> Option<u32> {
    Some(match c {
        '零' | '〇' | '○' => 0,
        '一' => 1,
        '二' | '两' => 2,
        '三' => 3,
        '四' => 4,
        '五' => 5,
        '六' => 6,
        '七' => 7,
        '八' => 8,
        '九' => 9,
        _ => return None,
    })
}

fn cn_unit(c: char) -> Option<u64> {
    Some(match c {
        '十' => 10,
        '百' => 100,
        '千' => 1000,
        _ => return None,
    })
}

/// "一千零四十二" → 1042, "十二" → 12, "二十" → 20, "一〇四二" → 1042, "39"/"３９" → 39; None
/// otherwise. Spaces are ignored. Accepts what resolver.py's `cn_to_int` accepts (plus 亿), and
/// None where a value would not fit a u32.
pub(crate) fn parse_numeral(s: &str) -> Option<u32> {
    let s: String = s.chars().filter(|c| !is_space(*c)).map(fold).collect();
    if s.is_empty() {
        return None;
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().ok();
    }
    if !s
        .chars()
        .all(|c| cn_digit(c).is_some() || cn_unit(c).is_some() || c == '万' || c == '亿')
    {
        return None;
    }
    if !s
        .chars()
        .any(|c| cn_unit(c).is_some() || c == '万' || c == '亿')
    {
        // Digit by digit: 一〇四二.
        let mut n: u32 = 0;
        for c in s.chars() {
            n = n.checked_mul(10)?.checked_add(cn_digit(c)?)?;
        }
        return Some(n);
    }
    // Checked u64: at most a few characters' worth of 亿 fit, anything more is None.
    let (mut yi, mut wan, mut section, mut digit) = (0u64, 0u64, 0u64, None::<u64>);
    for c in s.chars() {
        if let Some(d) = cn_digit(c) {
            digit = Some(u64::from(d));
        } else if let Some(unit) = cn_unit(c) {
            section = section.checked_add(digit.unwrap_or(1).checked_mul(unit)?)?;
            digit = None;
        } else if c == '万' {
            let part = section.checked_add(digit.unwrap_or(0))?;
            wan = wan.checked_add(part.checked_mul(10_000)?)?;
            section = 0;
            digit = None;
        } else {
            // 亿
            let part = wan.checked_add(section)?.checked_add(digit.unwrap_or(0))?;
            yi = yi.checked_add(part.checked_mul(100_000_000)?)?;
            wan = 0;
            section = 0;
            digit = None;
        }
    }
    let total = yi
        .checked_add(wan)?
        .checked_add(section)?
        .checked_add(digit.unwrap_or(0))?;
    u32::try_from(total).ok()
}

const CN_DIGITS: [char; 10] = ['零', '一', '二', '三', '四', '五', '六', '七', '八', '九'];

/// One section below 10,000, 1..=9999. `leading`: nothing is written before it, so 十二 rather
/// than 一十二 (but 一百一十, 一万零一十).
fn cn_section(n: u32, leading: bool, out: &mut String) {
    let mut zero_pending = false;
    let mut written = false;
    for (value, unit) in [
        (1000, Some('千')),
        (100, Some('百')),
        (10, Some('十')),
        (1, None),
    ] {
        let d = n / value % 10;
        if d == 0 {
            zero_pending |= written;
            continue;
        }
        if zero_pending {
            out.push('零');
            zero_pending = false;
        }
        if !(d == 1 && unit == Some('十') && leading && !written) {
            out.push(CN_DIGITS[d as usize]);
        }
        if let Some(u) = unit {
            out.push(u);
        }
        written = true;
    }
}

/// 1042 → "一千零四十二", 10 → "十", 12 → "十二", 110 → "一百一十", 1001 → "一千零一", 20 → "二十"
/// (as statutes write them). 0 → "零"; 10,000 and above with 万 and 亿 (10010 → "一万零一十").
pub(crate) fn chinese_numeral(n: u32) -> String {
    if n == 0 {
        return "零".into();
    }
    let mut out = String::new();
    let mut zero_pending = false;
    for (section, unit) in [
        (n / 100_000_000, Some('亿')),
        (n / 10_000 % 10_000, Some('万')),
        (n % 10_000, None),
    ] {
        if section == 0 {
            zero_pending |= !out.is_empty();
            continue;
        }
        if !out.is_empty() && (zero_pending || section < 1000) {
            out.push('零');
        }
        zero_pending = false;
        cn_section(section, out.is_empty(), &mut out);
        if let Some(u) = unit {
            out.push(u);
        }
    }
    out
}

pub(super) fn is_numeral_char(c: char) -> bool {
    cn_digit(c).is_some()
        || cn_unit(c).is_some()
        || c == '万'
        || c.is_ascii_digit()
        || ('０'..='９').contains(&c)
}

/// The article number of a section title that starts with 第N条: "第一千零四十二条",
/// "第三十九条 【解除】", "第 39 条" → Some; "第三章 总则" → None. Only the opening is read
/// (whatever follows 条 is ignored); 第零条 is None.
pub fn article_number(title: &str) -> Option<u32> {
    let body = title
        .trim_start_matches(|c: char| is_space(c) || is_invisible(c))
        .strip_prefix('第')?;
    let mut number = String::new();
    for c in body.chars() {
        match c {
            '条' | '條' if !number.is_empty() => {
                return parse_numeral(&number).filter(|n| *n > 0);
            }
            _ if is_space(c) => {}
            _ if is_numeral_char(c) => number.push(c),
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numerals() {
        for (s, n) in [
            ("一千零四十二", 1042),
            ("十二", 12),
            ("二十", 20),
            ("十", 10),
            ("一百一十", 110),
            ("一千零一", 1001),
            ("一千零一十", 1010),
            ("两百", 200),
            ("一〇四二", 1042),
            ("一○四二", 1042),
            ("二六四", 264),
            ("一千〇四十二", 1042),
            ("39", 39),
            ("３９", 39),
            (" 3 9 ", 39),
            ("一 千 零 四 十 二", 1042),
            ("一万零一十", 10_010),
            ("十万", 100_000),
            ("一亿零一", 100_000_001),
            ("零", 0),
        ] {
            assert_eq!(parse_numeral(s), Some(n), "{s}");
        }
        for s in [
            "",
            "  ",
            "第三条",
            "三条",
            "abc",
            "1二",
            "十a",
            "-1",
            "4294967296",
            "九九九九九九九九九九九",
            "一千亿亿",
        ] {
            assert_eq!(parse_numeral(s), None, "{s}");
        }
        assert_eq!(parse_numeral("4294967295"), Some(u32::MAX));
    }

    #[test]
    fn writes_numerals_as_statutes_do() {
        for (n, s) in [
            (1, "一"),
            (10, "十"),
            (12, "十二"),
            (20, "二十"),
            (39, "三十九"),
            (100, "一百"),
            (101, "一百零一"),
            (110, "一百一十"),
            (264, "二百六十四"),
            (1001, "一千零一"),
            (1010, "一千零一十"),
            (1042, "一千零四十二"),
            (1100, "一千一百"),
            (2000, "二千"),
            (10_000, "一万"),
            (10_010, "一万零一十"),
            (100_000, "十万"),
            (1_000_100, "一百万零一百"),
            (100_000_001, "一亿零一"),
            (0, "零"),
        ] {
            assert_eq!(chinese_numeral(n), s, "{n}");
        }
    }

    #[test]
    fn numerals_round_trip() {
        for n in 1..=2000 {
            let cn = chinese_numeral(n);
            assert_eq!(parse_numeral(&cn), Some(n), "{n} → {cn}");
            assert_eq!(parse_numeral(&n.to_string()), Some(n));
            assert_eq!(article_number(&format!("第{cn}条")), Some(n));
        }
        let mut n: u32 = 1;
        while let Some(next) = n.checked_mul(7).and_then(|m| m.checked_add(3)) {
            assert_eq!(parse_numeral(&chinese_numeral(n)), Some(n), "{n}");
            n = next;
        }
        assert_eq!(parse_numeral(&chinese_numeral(u32::MAX)), Some(u32::MAX));
    }

    #[test]
    fn reads_article_numbers_from_titles() {
        for (t, n) in [
            ("第一千零四十二条", Some(1042)),
            ("第三十九条 【解除】", Some(39)),
            ("第三十九条【解除】", Some(39)),
            ("第 39 条", Some(39)),
            ("第３９条", Some(39)),
            ("  第二条", Some(2)),
            ("第一百七十七条之一", Some(177)),
            ("第一〇四二条", Some(1042)),
            ("第二十條", Some(20)),
            ("第三章 总则", None),
            ("第一编 总则", None),
            ("第一节", None),
            ("第条", None),
            ("第零条", None),
            ("第1二条", None),
            ("总则", None),
            ("一、一般规定", None),
            ("第三十九", None),
            ("", None),
        ] {
            assert_eq!(article_number(t), n, "{t}");
        }
    }
}
