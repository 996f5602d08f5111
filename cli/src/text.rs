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

pub fn human_bytes(n: i64) -> String {
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
pub fn local_time(t: DateTime<Utc>) -> String {
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
