//! Glyph-garbage detection. Fonts without a usable Unicode mapping produce `(cid:12)`, glyph
//! names like `/G21/G22`, private-use code points or replacement characters; such a text layer
//! looks "ready" but would index nonsense, so it is measured per page and refused.

use std::sync::LazyLock;

use regex::Regex;

/// A page whose share of garbage characters exceeds this is treated as having no usable text.
pub(crate) const GARBLED_PAGE_RATIO: f32 = 0.3;

static CID: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\(cid:\d+\)").expect("static regex"));
static GLYPH_NAMES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:/(?:[A-Za-z]{1,2}[0-9][0-9A-Fa-f]{0,3}|uni[0-9A-Fa-f]{4}|cid\d+)\s*){2,}")
        .expect("static regex")
});

/// Share of non-space characters that are glyph garbage.
pub(crate) fn garbage_ratio(text: &str) -> f32 {
    let total = text.chars().filter(|c| !c.is_whitespace()).count();
    if total == 0 {
        return 0.0;
    }
    let mut garbage = 0usize;
    for m in CID.find_iter(text).chain(GLYPH_NAMES.find_iter(text)) {
        garbage += m.as_str().chars().filter(|c| !c.is_whitespace()).count();
    }
    garbage += text
        .chars()
        .filter(|&c| {
            c == '\u{FFFD}'
                || ('\u{E000}'..='\u{F8FF}').contains(&c)
                || (c.is_control() && !c.is_whitespace())
        })
        .count();
    (garbage as f32 / total as f32).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_garbage() {
        assert!(garbage_ratio("(cid:12)(cid:13)(cid:14)") > 0.9);
        assert!(garbage_ratio("/G21/G22/G23/G24") > 0.9);
        assert!(garbage_ratio("\u{FFFD}\u{FFFD}\u{FFFD}a") > 0.7);
        assert!(garbage_ratio("第一条 本条例适用于本市。") < 0.01);
        assert!(garbage_ratio("see /Type /Page in the spec") < GARBLED_PAGE_RATIO);
    }
}
