//! What a compliance team must not spread, found in text: PRC resident identity numbers (with
//! their check character and a real birth date), mainland mobile numbers, bank card numbers (that
//! pass the Luhn check) and email addresses, plus the rules a deployment adds. Each finding comes
//! with a masked sample that never holds the whole value.
//!
//! One pass over the text, linear in its length: emails first (their local part may hold digits),
//! then every run of ASCII digits (with single spaces or hyphens between groups, a leading `+`, a
//! trailing `X`) that does not touch a letter or digit on either side. A run is judged whole, and
//! when it is none of the kinds, every window of its groups is, longest first: two numbers written
//! side by side ("13812345678 6222…") are two findings. A look-alike (an 18-digit number whose check
//! character is wrong, a date, an article number, a card number failing Luhn, a landline) is none.

use regex::Regex;
use serde::Serialize;

/// The version of the scanner and its built-in rules, recorded with every scan.
pub const SCANNER_VERSION: &str = "docpipe-sensitive/1";

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    IdCard,
    Mobile,
    BankCard,
    Email,
    /// A deployment's own rule, by its name.
    Custom(String),
}

impl Kind {
    pub fn as_str(&self) -> &str {
        match self {
            Kind::IdCard => "id_card",
            Kind::Mobile => "mobile",
            Kind::BankCard => "bank_card",
            Kind::Email => "email",
            Kind::Custom(name) => name,
        }
    }
}

/// A rule a deployment adds: a name and a regular expression (matched as is; its whole match is
/// the finding).
#[derive(Debug, Clone)]
pub struct CustomRule {
    pub name: String,
    pub pattern: Regex,
}

/// One value found: its kind, where it is (byte offsets into the text scanned) and a masked
/// sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
    pub masked: String,
}

/// Every sensitive value in `text`, in order.
pub fn scan(text: &str, rules: &[CustomRule]) -> Vec<Finding> {
    let mut found = emails(text);
    let taken: Vec<(usize, usize)> = found.iter().map(|f| (f.start, f.end)).collect();
    found.extend(numbers(text, &taken));
    for rule in rules {
        for m in rule.pattern.find_iter(text) {
            if m.as_str().is_empty() || overlaps(&found, m.start(), m.end()) {
                continue;
            }
            found.push(Finding {
                kind: Kind::Custom(rule.name.clone()),
                start: m.start(),
                end: m.end(),
                masked: mask_custom(m.as_str()),
            });
        }
    }
    found.sort_by_key(|f| f.start);
    found
}

/// `text` with every finding's value replaced by its masked form, which has as many characters:
/// offsets in characters into the text (a chunk's) stay right.
pub fn mask(text: &str, findings: &[Finding]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for f in findings {
        if f.start < at || f.end > text.len() {
            continue;
        }
        out.push_str(&text[at..f.start]);
        out.push_str(&f.masked);
        at = f.end;
    }
    out.push_str(&text[at..]);
    out
}

fn overlaps(found: &[Finding], start: usize, end: usize) -> bool {
    found.iter().any(|f| start < f.end && f.start < end)
}

fn is_local_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '%' | '+' | '-')
}

fn is_domain_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '-')
}

fn emails(text: &str) -> Vec<Finding> {
    let bytes = text.as_bytes();
    let mut out: Vec<Finding> = Vec::new();
    let mut resume = 0;
    for (at, _) in text.match_indices('@') {
        if at < resume {
            continue;
        }
        // ASCII only on both sides, so byte steps are char steps.
        let mut start = at;
        while start > resume && is_local_char(bytes[start - 1] as char) {
            start -= 1;
        }
        while start < at && matches!(bytes[start], b'.' | b'-' | b'+') {
            start += 1;
        }
        let mut end = at + 1;
        while end < bytes.len() && is_domain_char(bytes[end] as char) {
            end += 1;
        }
        while end > at + 1 && matches!(bytes[end - 1], b'.' | b'-') {
            end -= 1;
        }
        let local = &text[start..at];
        let domain = &text[at + 1..end];
        if local.is_empty() || local.ends_with('.') || !valid_domain(domain) {
            continue;
        }
        out.push(Finding {
            kind: Kind::Email,
            start,
            end,
            masked: mask_email(local, domain),
        });
        resume = end;
    }
    out
}

fn valid_domain(domain: &str) -> bool {
    let labels: Vec<&str> = domain.split('.').collect();
    labels.len() >= 2
        && labels
            .iter()
            .all(|l| !l.is_empty() && !l.starts_with('-') && !l.ends_with('-') && l.len() <= 63)
        && labels
            .last()
            .is_some_and(|tld| tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_alphabetic()))
}

/// A run of digit groups: each group's byte span.
struct Run {
    plus: bool,
    groups: Vec<(usize, usize)>,
    /// The separator after each group but the last: a space may part two numbers written side by
    /// side, a hyphen never does (it joins one number's groups).
    seps: Vec<u8>,
    /// The byte offset of a trailing `X`/`x` right after the last group.
    check_x: Option<usize>,
}

fn numbers(text: &str, taken: &[(usize, usize)]) -> Vec<Finding> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_number = bytes[i].is_ascii_digit()
            || (bytes[i] == b'+' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit));
        let touches = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if !starts_number || touches {
            i += 1;
            // Skip the rest of a token a letter started (an order number like HT2024…).
            if touches && starts_number {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
            }
            continue;
        }
        let (run, end) = read_run(bytes, i);
        i = end;
        let after = bytes.get(end).copied();
        if after.is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'@') {
            continue;
        }
        if taken.iter().any(|&(s, e)| run.groups[0].0 < e && s < end) {
            continue;
        }
        judge(text, &run, &mut out);
    }
    out
}

fn read_run(bytes: &[u8], start: usize) -> (Run, usize) {
    let plus = bytes[start] == b'+';
    let mut i = if plus { start + 1 } else { start };
    let mut groups = Vec::new();
    let mut seps = Vec::new();
    loop {
        let g = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        groups.push((g, i));
        // One space or hyphen, then a digit: the number goes on.
        if i + 1 < bytes.len() && matches!(bytes[i], b' ' | b'-') && bytes[i + 1].is_ascii_digit() {
            seps.push(bytes[i]);
            i += 1;
            continue;
        }
        break;
    }
    let check_x = (i < bytes.len()
        && matches!(bytes[i], b'X' | b'x')
        && !bytes.get(i + 1).is_some_and(u8::is_ascii_alphanumeric))
    .then_some(i);
    let end = if check_x.is_some() { i + 1 } else { i };
    (
        Run {
            plus,
            groups,
            seps,
            check_x,
        },
        end,
    )
}

/// The run whole, else its windows of groups (parted at spaces only), longest first, left to
/// right, none overlapping.
fn judge(text: &str, run: &Run, out: &mut Vec<Finding>) {
    let n = run.groups.len();
    let mut covered = vec![false; n];
    let parted = |after: usize| run.seps.get(after) == Some(&b' ');
    for len in (1..=n).rev() {
        for first in 0..=(n - len) {
            let last = first + len - 1;
            let whole_number = (first == 0 || parted(first - 1)) && (last == n - 1 || parted(last));
            if !whole_number || covered[first..=last].iter().any(|&c| c) {
                continue;
            }
            let groups = &run.groups[first..=last];
            let plus = run.plus && first == 0;
            let x = run.check_x.filter(|_| last == n - 1);
            if let Some(f) = classify(text, groups, plus, x) {
                covered[first..=last].iter_mut().for_each(|c| *c = true);
                out.push(f);
            }
        }
    }
}

fn classify(
    text: &str,
    groups: &[(usize, usize)],
    plus: bool,
    check_x: Option<usize>,
) -> Option<Finding> {
    let start = groups[0].0 - usize::from(plus);
    let digits: String = groups.iter().map(|&(s, e)| &text[s..e]).collect();
    let sizes: Vec<usize> = groups.iter().map(|&(s, e)| e - s).collect();
    if let Some(x) = check_x {
        // Only an identity number ends with X.
        let end = x + 1;
        return (groups.len() == 1 && !plus && digits.len() == 17 && id_card(&digits, 'X')).then(
            || Finding {
                kind: Kind::IdCard,
                start,
                end,
                masked: mask_digits(&text[start..end], 3, 1),
            },
        );
    }
    let end = groups[groups.len() - 1].1;
    let span = &text[start..end];
    let finding = |kind: Kind, masked: String| Finding {
        kind,
        start,
        end,
        masked,
    };
    if groups.len() == 1 && !plus && digits.len() == 18 {
        let (body, check) = digits.split_at(17);
        if id_card(body, check.chars().next().unwrap_or('?')) {
            return Some(finding(Kind::IdCard, mask_digits(span, 3, 1)));
        }
    }
    if let Some(national) = mobile_digits(&digits, &sizes, plus) {
        if is_mobile(national) {
            return Some(finding(Kind::Mobile, mask_mobile(span)));
        }
    }
    if !plus
        && (16..=19).contains(&digits.len())
        && card_groups(&sizes)
        && card_prefix(&digits)
        && luhn(&digits)
    {
        return Some(finding(Kind::BankCard, mask_digits(span, 4, 4)));
    }
    None
}

/// The 11 national digits of a mobile number written as a whole, grouped 3-4-4, or after 86.
fn mobile_digits<'a>(digits: &'a str, sizes: &[usize], plus: bool) -> Option<&'a str> {
    match (digits.len(), sizes) {
        (11, [11]) | (11, [3, 4, 4]) if !plus => Some(digits),
        (13, [13]) | (13, [2, 11]) | (13, [2, 3, 4, 4]) if digits.starts_with("86") => {
            Some(&digits[2..])
        }
        _ => None,
    }
}

fn is_mobile(d: &str) -> bool {
    let b = d.as_bytes();
    b.len() == 11 && b[0] == b'1' && (b'3'..=b'9').contains(&b[1])
}

fn card_groups(sizes: &[usize]) -> bool {
    sizes.len() == 1 || sizes[..sizes.len() - 1].iter().all(|&s| s == 4)
}

/// Issuers' prefixes: UnionPay 62 (and 60, 65, 9 domestic), Visa 4, Mastercard 51–55 and 22–27,
/// JCB 35.
fn card_prefix(d: &str) -> bool {
    let two = &d[..2];
    d.starts_with('4')
        || d.starts_with('9')
        || matches!(
            two,
            "51" | "52" | "53" | "54" | "55" | "62" | "60" | "65" | "35"
        )
        || ("22".."28").contains(&two)
}

fn luhn(d: &str) -> bool {
    let mut sum = 0u32;
    for (i, c) in d.bytes().rev().enumerate() {
        let mut v = u32::from(c - b'0');
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum % 10 == 0
}

/// GB 11643: a province code, a real birth date, and the ISO 7064 MOD 11-2 check character.
fn id_card(body: &str, check: char) -> bool {
    const PROVINCES: [&str; 34] = [
        "11", "12", "13", "14", "15", "21", "22", "23", "31", "32", "33", "34", "35", "36", "37",
        "41", "42", "43", "44", "45", "46", "50", "51", "52", "53", "54", "61", "62", "63", "64",
        "65", "71", "81", "82",
    ];
    const WEIGHTS: [u32; 17] = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2];
    const CHECKS: [char; 11] = ['1', '0', 'X', '9', '8', '7', '6', '5', '4', '3', '2'];
    if body.len() != 17 || !PROVINCES.contains(&&body[..2]) || !birth_date(&body[6..14]) {
        return false;
    }
    let sum: u32 = body
        .bytes()
        .zip(WEIGHTS)
        .map(|(c, w)| u32::from(c - b'0') * w)
        .sum();
    CHECKS[(sum % 11) as usize] == check.to_ascii_uppercase()
}

fn birth_date(d: &str) -> bool {
    let (Ok(y), Ok(m), Ok(day)) = (
        d[..4].parse::<u32>(),
        d[4..6].parse::<u32>(),
        d[6..8].parse::<u32>(),
    ) else {
        return false;
    };
    (1900..=2100).contains(&y) && crate::version_dates::Day::new(y, m, day).is_some()
}

/// The digits (and an X) of `span` starred but the first `keep_head` and the last `keep_tail`;
/// separators kept.
fn mask_digits(span: &str, keep_head: usize, keep_tail: usize) -> String {
    let total = span
        .chars()
        .filter(|c| c.is_ascii_digit() || matches!(c, 'X' | 'x'))
        .count();
    let mut seen = 0;
    span.chars()
        .map(|c| {
            if c.is_ascii_digit() || matches!(c, 'X' | 'x') {
                seen += 1;
                if seen <= keep_head || seen > total - keep_tail.min(total) {
                    c
                } else {
                    '*'
                }
            } else {
                c
            }
        })
        .collect()
}

/// 138****5678: the operator's prefix and the last four, as Chinese services show a number.
fn mask_mobile(span: &str) -> String {
    let digits = span.chars().filter(char::is_ascii_digit).count();
    // A country code (86) stays as written; of the 11 national digits, 3 and 4 stay.
    let head = if digits == 13 { 5 } else { 3 };
    mask_digits(span, head, 4)
}

/// The local part's first character, a star for each other (the length kept, so that masking a
/// text keeps every offset into it), and the domain.
fn mask_email(local: &str, domain: &str) -> String {
    let first = local.chars().next().unwrap_or('*');
    let stars = "*".repeat(local.chars().count().saturating_sub(1));
    format!("{first}{stars}@{domain}")
}

/// A custom rule's match: its first and last character at most, a star for each other.
fn mask_custom(value: &str) -> String {
    let n = value.chars().count();
    value
        .chars()
        .enumerate()
        .map(|(i, c)| {
            if n > 4 && (i == 0 || i == n - 1) {
                c
            } else {
                '*'
            }
        })
        .collect()
}

/// Precision and recall of the scanner on one kind, over a labelled set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Score {
    pub planted: usize,
    pub found: usize,
    pub correct: usize,
}

impl Score {
    pub fn precision(&self) -> f64 {
        if self.found == 0 {
            1.0
        } else {
            self.correct as f64 / self.found as f64
        }
    }

    pub fn recall(&self) -> f64 {
        if self.planted == 0 {
            1.0
        } else {
            self.correct as f64 / self.planted as f64
        }
    }
}

/// Scores the scanner on documents with the values planted in each, as (kind, value as written):
/// a finding is correct when its kind and its text are a planted value's (each counted once).
pub fn score<'a>(
    documents: impl IntoIterator<Item = (&'a str, &'a [(String, String)])>,
) -> std::collections::BTreeMap<String, Score> {
    let mut scores: std::collections::BTreeMap<String, Score> = Default::default();
    for (text, planted) in documents {
        let mut left: Vec<(&str, &str)> = planted
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        for (kind, _) in planted {
            scores.entry(kind.clone()).or_default().planted += 1;
        }
        for f in scan(text, &[]) {
            let kind = f.kind.as_str();
            let entry = scores.entry(kind.to_string()).or_default();
            entry.found += 1;
            if let Some(i) = left
                .iter()
                .position(|&(k, v)| k == kind && v == &text[f.start..f.end])
            {
                left.swap_remove(i);
                entry.correct += 1;
            }
        }
    }
    scores
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(String, String)> {
        scan(text, &[])
            .into_iter()
            .map(|f| {
                (
                    f.kind.as_str().to_string(),
                    text[f.start..f.end].to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn each_kind_is_found_beside_chinese_text() {
        let text = "甲方身份证号：11010519491231002X，手机13812345678；乙方电话+86 139-1234-5678，\
                    账号6222 0212 3456 7894，邮箱zhang.san+hr@example.com.cn。";
        assert_eq!(
            kinds(text),
            vec![
                ("id_card".into(), "11010519491231002X".into()),
                ("mobile".into(), "13812345678".into()),
                ("mobile".into(), "+86 139-1234-5678".into()),
                ("bank_card".into(), "6222 0212 3456 7894".into()),
                ("email".into(), "zhang.san+hr@example.com.cn".into()),
            ]
        );
    }

    #[test]
    fn look_alikes_are_not_findings() {
        for text in [
            "身份证号11010519491231002Y以及110105194912310021",
            "日期20240101，第1234条，国发〔2024〕12号，金额1,234,567.89元",
            "座机010-12345678和0755-8888 6666，号码12345678901",
            "卡号6222021234567890（校验不符），订单HT20240101000123",
            "zhang at example dot com，@某某",
            "流水号123456789012345678901234",
        ] {
            assert_eq!(kinds(text), vec![], "{text}");
        }
    }

    #[test]
    fn a_hyphen_joins_one_number_whose_part_is_never_a_finding() {
        // 19 digits in hyphened groups failing Luhn, whose first 16 pass it by chance.
        assert_eq!(kinds("食堂饭卡卡号为5240-4740-3817-0748-516。"), vec![]);
    }

    #[test]
    fn two_numbers_side_by_side_are_two_findings() {
        let text = "联系 13812345678 6222021234567894 即可";
        assert_eq!(
            kinds(text),
            vec![
                ("mobile".into(), "13812345678".into()),
                ("bank_card".into(), "6222021234567894".into()),
            ]
        );
    }

    #[test]
    fn a_masked_sample_never_holds_the_whole_value() {
        let text = "11010519491231002X 13812345678 6222021234567894 li.si@corp.cn";
        let found = scan(text, &[]);
        let masked: Vec<&str> = found.iter().map(|f| f.masked.as_str()).collect();
        assert_eq!(
            masked,
            [
                "110**************X",
                "138****5678",
                "6222********7894",
                "l****@corp.cn"
            ]
        );
        for f in &found {
            assert_ne!(f.masked, text[f.start..f.end]);
        }
        assert_eq!(
            mask(text, &found),
            "110**************X 138****5678 6222********7894 l****@corp.cn"
        );
    }

    /// The labelled set of `tests/fixtures/sensitive` (200 real-looking documents, 740 planted
    /// values, 770 look-alikes; `scripts/sensitive_set.py` makes it).
    pub(crate) fn labelled_set() -> Vec<(String, Vec<(String, String)>)> {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/sensitive");
        let labels: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("labels.json")).expect("the labelled set"),
        )
        .unwrap();
        labels
            .as_array()
            .unwrap()
            .iter()
            .map(|doc| {
                let text =
                    std::fs::read_to_string(dir.join("docs").join(doc["file"].as_str().unwrap()))
                        .unwrap();
                let planted = doc["planted"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| {
                        (
                            p["kind"].as_str().unwrap().to_string(),
                            p["value"].as_str().unwrap().to_string(),
                        )
                    })
                    .collect();
                (text, planted)
            })
            .collect()
    }

    #[test]
    fn on_the_labelled_set_each_kind_has_precision_and_recall_of_at_least_0_99() {
        let set = labelled_set();
        let scores = score(set.iter().map(|(t, p)| (t.as_str(), p.as_slice())));
        for kind in ["id_card", "mobile", "bank_card", "email"] {
            let s = scores[kind];
            assert!(s.planted >= 100, "{kind}: {s:?}");
            assert!(
                s.precision() >= 0.99 && s.recall() >= 0.99,
                "{kind}: precision {:.4}, recall {:.4} ({s:?})",
                s.precision(),
                s.recall()
            );
        }
        assert_eq!(scores.len(), 4, "no other kind is found: {scores:?}");
    }

    #[test]
    fn a_deployments_rule_finds_its_own_kind() {
        let rules = [CustomRule {
            name: "contract_number".into(),
            pattern: Regex::new(r"HT\d{14}").unwrap(),
        }];
        let found = scan("合同HT20240101000123号", &rules);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, Kind::Custom("contract_number".into()));
        assert_eq!(found[0].masked, "H**************3");
    }
}
