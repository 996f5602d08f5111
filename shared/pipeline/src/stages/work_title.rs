//! What a title says of its work, read by both the version claim an upload makes and the
//! version a parse reads: the work's key, and the issuing level its form names. One home below
//! both, so that the two readings cannot disagree.

/// The work's key: the normalised title without a trailing date in brackets, which names a
/// version ("湿地保护法(2021-12-24)" is 湿地保护法). One rule with the citation checker's.
pub(crate) use docpipe_parse::article_ref::work_key;

/// The issuing level a title's form says: a law (…法), an administrative regulation (…条例,
/// …细则, …办法, …规定), a judicial interpretation (the courts' …解释 and …规定); "" when it
/// says none.
pub(crate) fn level_from_title(title: &str) -> &'static str {
    let court = title.contains("最高人民法院") || title.contains("最高人民检察院");
    if court && (title.contains("解释") || title.contains("规定") || title.contains("批复")) {
        "司法解释"
    } else if title.ends_with("办法") {
        "行政法规"
    } else if title.ends_with('法') || title.ends_with("法典") {
        "法律"
    } else if ["条例", "细则", "规定"].iter().any(|e| title.ends_with(e)) {
        "行政法规"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_title_names_its_level() {
        assert_eq!(level_from_title("中华人民共和国保守国家秘密法"), "法律");
        assert_eq!(level_from_title("中华人民共和国民法典"), "法律");
        assert_eq!(level_from_title("中华人民共和国发票管理办法"), "行政法规");
        assert_eq!(level_from_title("专利法实施细则"), "行政法规");
        assert_eq!(
            level_from_title("最高人民法院关于审理人身损害赔偿案件适用法律若干问题的解释"),
            "司法解释"
        );
        assert_eq!(level_from_title("数据安全白皮书"), "");
    }
}
