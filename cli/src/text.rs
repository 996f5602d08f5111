//! Small formatting helpers for the tables: display width (CJK takes two columns), sizes, times.

use chrono::{DateTime, Utc};
use unicode_width::UnicodeWidthChar;

/// The text on one line: every run of whitespace (newlines included) becomes one space.
pub fn excerpt(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `width` terminal columns, with `…` when something was cut.
pub fn truncate(s: &str, width: usize) -> String {
    let total: usize = s.chars().map(|c| c.width().unwrap_or(0)).sum();
    if total <= width {
        return s.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w + 1 > width {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// At most `width` columns, cut in the middle (`head…tail`): the end of a name (a title, a date,
/// an extension) is often what tells two names apart.
pub(crate) fn truncate_middle(s: &str, width: usize) -> String {
    let total: usize = s.chars().map(|c| c.width().unwrap_or(0)).sum();
    if total <= width || width < 5 {
        return truncate(s, width);
    }
    let budget = width - 1;
    let tail_budget = budget / 2;
    let mut tail: Vec<char> = Vec::new();
    let mut used = 0;
    for c in s.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > tail_budget {
            break;
        }
        tail.push(c);
        used += w;
    }
    let mut out = String::new();
    let mut head_used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if head_used + w > budget - used {
            break;
        }
        out.push(c);
        head_used += w;
    }
    out.push('…');
    out.extend(tail.into_iter().rev());
    out
}

/// The part of `names` they all start with, ending at a separator (`_`, `-`, `/`, a space): what
/// a list of documents from one folder repeats, and a label can leave out.
pub(crate) fn common_prefix<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut names = names.into_iter();
    let Some(first) = names.next() else {
        return String::new();
    };
    let mut prefix: &str = first;
    let mut count = 1;
    for name in names {
        count += 1;
        let common = prefix
            .char_indices()
            .zip(name.chars())
            .find(|((_, a), b)| a != b)
            .map(|((i, _), _)| i)
            .unwrap_or(prefix.len().min(name.len()));
        prefix = &prefix[..common];
    }
    if count < 2 {
        return String::new();
    }
    match prefix.rfind(['_', '-', '/', ' ', '·']) {
        Some(i) => prefix[..i + 1].to_string(),
        None => String::new(),
    }
}

/// A document's label among others: its name without the prefix they share, cut in the middle.
pub fn label(name: &str, shared_prefix: &str, width: usize) -> String {
    let rest = name.strip_prefix(shared_prefix).filter(|r| !r.is_empty());
    truncate_middle(rest.unwrap_or(name), width)
}

pub(crate) fn human_bytes(n: i64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// `2026-11-30 07:11:06` in the local time zone.
pub(crate) fn local_time(t: DateTime<Utc>) -> String {
    t.with_timezone(&chrono::Local)
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// Milliseconds as `850ms`, `4.2s` or `3m07s`.
pub fn seconds(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else if ms < 60_000.0 {
        format!("{:.1}s", ms / 1000.0)
    } else {
        let s = (ms / 1000.0).round() as i64;
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_columns() {
        assert_eq!(truncate("abc", 3), "abc");
        assert_eq!(truncate("abcdef", 4), "abc…");
        // Each of these takes two columns.
        assert_eq!(truncate("中华人民共和国", 7), "中华人…");
        assert_eq!(excerpt(" a\n\n b\tc "), "a b c");
    }

    #[test]
    fn sizes_and_durations() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(12_595), "12.3 KiB");
        assert_eq!(seconds(850.0), "850ms");
        assert_eq!(seconds(4_210.0), "4.2s");
        assert_eq!(seconds(187_000.0), "3m07s");
    }
}

#[cfg(test)]
mod label_tests {
    use super::*;

    #[test]
    fn documents_from_one_folder_are_told_apart_by_what_differs() {
        let names = [
            "DLC_重庆地方法规_地方性法规_重庆市湿地保护条例.md",
            "DLC_重庆地方法规_地方性法规_重庆市大气污染防治条例.md",
            "DLC_重庆地方法规_地方性法规_重庆市水资源管理条例.md",
        ];
        let prefix = common_prefix(names);
        assert_eq!(prefix, "DLC_重庆地方法规_地方性法规_");
        let labels: Vec<String> = names.iter().map(|n| label(n, &prefix, 30)).collect();
        assert_eq!(labels[0], "重庆市湿地保护条例.md");
        assert_ne!(labels[1], labels[2]);
        // A long name keeps its end, where titles differ.
        let long = "一个非常非常非常非常长的文件名称后面才是不同的部分甲.md";
        let cut = truncate_middle(long, 20);
        assert!(cut.ends_with("甲.md") && cut.contains('…'), "{cut}");
        assert!(common_prefix(["only-one.md"]).is_empty());
    }
}
