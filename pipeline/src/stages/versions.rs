//! Which version of which law a document is: read before the index commit, recorded in it
//! ([`docpipe_db::works::assign`]). What the upload gave (its `version` and `regulation_type`, and
//! the work and dates of its [`VersionClaim`]) beats what the text says; the text's dates come
//! with their sources ([`docpipe_parse::version_dates`]).

use super::version_claim::{Spelling, VersionClaim};
use docpipe_db::works::Assignment;
use docpipe_db::{documents, snapshot, DbError};
use docpipe_parse::article_ref::normalize_law_name;
use docpipe_parse::version_dates::{from_blocks, Dated, VersionDates};
use tokio_postgres::GenericClient;

/// An [`Assignment`] that owns its strings, read before the commit's transaction opens.
pub(crate) struct VersionOf {
    title: String,
    title_key: String,
    level: String,
    level_source: &'static str,
    label: String,
    label_source: &'static str,
    dates: VersionDates,
}

impl VersionOf {
    pub(crate) fn assignment(&self) -> Assignment<'_> {
        let dated = |d: Option<Dated>| d.map(|d| (d.day.to_string(), d.source.as_str()));
        Assignment {
            title: &self.title,
            title_key: &self.title_key,
            level: &self.level,
            level_source: self.level_source,
            label: &self.label,
            label_source: self.label_source,
            promulgated: dated(self.dates.promulgated),
            effective_from: dated(self.dates.effective_from),
            effective_to: dated(self.dates.effective_to),
            notes: serde_json::to_value(&self.dates.notes).unwrap_or_default(),
            decisions: serde_json::to_value(&self.dates.decisions).unwrap_or_default(),
        }
    }
}

/// The version `doc_id` is, cited as `title` (normalised `title_key`); none when the document is
/// no regulation (it has no article) or nothing names or dates its version.
pub(crate) async fn read(
    c: &impl GenericClient,
    doc_id: &str,
    title: &str,
    title_key: &str,
) -> Result<Option<VersionOf>, DbError> {
    let Some(doc) = documents::get(c, doc_id).await? else {
        return Ok(None);
    };
    let blocks = snapshot::block_texts(c, doc_id).await?;
    if !blocks.iter().any(|(kind, _)| kind == "article") {
        return Ok(None);
    }
    let file_name = if doc.file_name.is_empty() {
        &doc.doc_name
    } else {
        &doc.file_name
    };
    let claim = VersionClaim::of_document(&doc.metadata).unwrap_or_default();
    let mut dates = from_blocks(
        blocks.iter().map(|(k, t)| (k.as_str(), t.as_str())),
        file_name,
    );
    // Checked when the upload was taken in; a claim kept from before the check is not trusted.
    match claim.dates(Spelling::Registration) {
        Ok(given) => dates = dates.with_given(&given),
        Err(e) => dates
            .decisions
            .push(format!("the upload's dates are ignored: {e}")),
    }
    let (title, title_key) = match claim.work.trim() {
        "" => (title.to_string(), work_key(title_key)),
        work => (work.to_string(), work_key(&normalize_law_name(work))),
    };
    let (label, label_source) = match (doc.version.trim(), dates.promulgated) {
        (given, _) if !given.is_empty() => (given.to_string(), "upload"),
        (_, Some(p)) => (p.day.to_string(), p.source.as_str()),
        _ => return Ok(None),
    };
    let (level, level_source) = match doc.regulation_type.trim() {
        "" => (level_from_title(&title).to_string(), "title"),
        given => (given.to_string(), "upload"),
    };
    Ok(Some(VersionOf {
        title,
        title_key,
        level,
        level_source,
        label,
        label_source,
        dates,
    }))
}

/// The work's key: the normalised title without a trailing date in brackets, which names a
/// version ("湿地保护法(2021-12-24)" is 湿地保护法).
pub(crate) fn work_key(title_key: &str) -> String {
    let trimmed = title_key.trim_end_matches([')', '）']);
    match trimmed.rfind(['(', '（']) {
        Some(at)
            if trimmed.len() > at
                && trimmed[at..]
                    .chars()
                    .skip(1)
                    .all(|c| c.is_ascii_digit() || c == '-')
                && trimmed.len() - at > 8 =>
        {
            trimmed[..at].to_string()
        }
        _ => title_key.to_string(),
    }
}

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

    #[test]
    fn a_date_in_brackets_is_no_part_of_the_work() {
        assert_eq!(work_key("湿地保护法(2021-12-24)"), "湿地保护法");
        assert_eq!(work_key("湿地保护法（2021-12-24）"), "湿地保护法");
        assert_eq!(work_key("关于(一)的规定"), "关于(一)的规定");
        assert_eq!(work_key("湿地保护法"), "湿地保护法");
    }
}
