//! Boolean expressions for Milvus filters, built as text because Milvus 2.3 has no filter
//! templates (the SDK's templated forms are rejected by it).

use crate::{SearchFilters, VersionWindow};

/// A double-quoted Milvus string literal. The grammar forbids a raw `"`, `\`, CR or LF inside a
/// literal, and values such as regulation types and tags come from users, so everything that
/// could end the literal early or change its meaning is escaped.
pub(crate) fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub(crate) fn quoted_list<'a>(values: impl IntoIterator<Item = &'a String>) -> String {
    let items: Vec<String> = values.into_iter().map(|v| quote(v)).collect();
    format!("[{}]", items.join(", "))
}

pub(crate) fn doc_eq(doc_id: &str) -> String {
    format!("doc_id == {}", quote(doc_id))
}

/// `None` when no filter applies: Milvus treats an empty expression as "everything". Each value
/// is cut to its field's byte limit as an insert cuts what it stores, so a value longer than the
/// field still finds its chunks; the caller's check against PostgreSQL then compares it whole.
pub(crate) fn search_filter(filters: &SearchFilters, has_organ: bool) -> Option<String> {
    use crate::limits::{REGULATION_TYPE_BYTES, TAG_BYTES, VERSION_BYTES};
    let mut parts = Vec::new();
    // A collection made before tenants has no such field; PostgreSQL's check keeps the tenant
    // there.
    if has_organ && !filters.organ_ids.is_empty() {
        parts.push(format!("organ_id in {}", quoted_list(&filters.organ_ids)));
    }
    if !filters.doc_ids.is_empty() {
        parts.push(format!("doc_id in {}", quoted_list(&filters.doc_ids)));
    }
    if !filters.exclude_doc_ids.is_empty() {
        parts.push(format!(
            "doc_id not in {}",
            quoted_list(&filters.exclude_doc_ids)
        ));
    }
    if let Some(regulation_type) = &filters.regulation_type {
        let stored = truncate_utf8(regulation_type, REGULATION_TYPE_BYTES);
        parts.push(format!("regulation_type == {}", quote(stored)));
    }
    if let Some(version) = &filters.version {
        let stored = truncate_utf8(version, VERSION_BYTES);
        parts.push(format!("version == {}", quote(stored)));
    }
    if !filters.tags.is_empty() {
        let tags: Vec<String> = filters
            .tags
            .iter()
            .map(|t| truncate_utf8(t, TAG_BYTES).to_string())
            .collect();
        parts.push(format!("array_contains_any(tags, {})", quoted_list(&tags)));
    }
    match filters.versions {
        VersionWindow::Any => {}
        VersionWindow::Answering => parts.push("answering == true".to_string()),
        VersionWindow::InForceOn(day) => parts.push(format!(
            "answering == true and in_force_from <= {day} and in_force_to > {day}"
        )),
    }
    if parts.is_empty() {
        None
    } else {
        Some(parts.join(" and "))
    }
}

/// The longest prefix of `value` that fits in `max_bytes` without splitting a UTF-8 character
/// (Milvus measures VarChar `max_length` in bytes, and rejects the whole batch if one value
/// is over).
pub fn truncate_utf8(value: &str, max_bytes: usize) -> &str {
    if value.len() <= max_bytes {
        return value;
    }
    let mut end = max_bytes;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_and_backslashes_are_escaped() {
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(quote("line\nbreak"), r#""line\nbreak""#);
        assert_eq!(quote("法规'单引号'"), "\"法规'单引号'\"");
    }

    #[test]
    fn an_injection_attempt_stays_inside_the_literal() {
        let hostile = r#"x" or doc_id != "y"#;
        assert_eq!(
            format!("regulation_type == {}", quote(hostile)),
            r#"regulation_type == "x\" or doc_id != \"y""#
        );
    }

    #[test]
    fn filters_combine_with_and() {
        let filters = SearchFilters {
            doc_ids: vec!["d1".into(), "d2".into()],
            regulation_type: Some("law".into()),
            version: Some("2024".into()),
            tags: vec!["a".into(), "b\"".into()],
            exclude_doc_ids: vec!["d2".into()],
            versions: VersionWindow::InForceOn(19_000),
            organ_ids: vec!["acme".into(), "public".into()],
        };
        assert_eq!(
            search_filter(&filters, true).unwrap(),
            r#"organ_id in ["acme", "public"] and doc_id in ["d1", "d2"] and doc_id not in ["d2"] and regulation_type == "law" and version == "2024" and array_contains_any(tags, ["a", "b\""]) and answering == true and in_force_from <= 19000 and in_force_to > 19000"#
        );
        let released = SearchFilters {
            versions: VersionWindow::Answering,
            ..SearchFilters::default()
        };
        assert_eq!(search_filter(&released, true).unwrap(), "answering == true");
        // A collection made before tenants has no organ_id to filter on.
        assert!(!search_filter(&filters, false).unwrap().contains("organ_id"));
        assert_eq!(search_filter(&SearchFilters::default(), true), None);
    }

    #[test]
    fn filter_values_are_cut_as_the_insert_cuts_them() {
        let long = "地".repeat(50); // 150 bytes, over regulation_type's 128
        let filters = SearchFilters {
            regulation_type: Some(long.clone()),
            version: Some("版".repeat(30)),
            tags: vec!["签".repeat(30)],
            ..SearchFilters::default()
        };
        assert_eq!(
            search_filter(&filters, true).unwrap(),
            format!(
                r#"regulation_type == "{}" and version == "{}" and array_contains_any(tags, ["{}"])"#,
                "地".repeat(42),
                "版".repeat(21),
                "签".repeat(21)
            )
        );
    }

    #[test]
    fn truncation_never_splits_a_character() {
        let text = "中华人民共和国"; // 3 bytes per char
        assert_eq!(truncate_utf8(text, 7), "中华");
        assert_eq!(truncate_utf8(text, 6), "中华");
        assert_eq!(truncate_utf8(text, 2), "");
        assert_eq!(truncate_utf8("abc", 10), "abc");
        assert_eq!(truncate_utf8("a😀", 4), "a");
    }
}
