//! Which version of which law a document is: read before the index commit, recorded in it
//! ([`docpipe_db::works::assign`]). What the upload gave (its `version` and `regulation_type`, and
//! the work and dates of its [`VersionClaim`]) beats what the text says; the text's dates come
//! with their sources ([`docpipe_parse::version_dates`]).

use super::version_claim::{Spelling, VersionClaim};
use super::work_title::{level_from_title, work_key};
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
        "" => (title.to_string(), work_key(title_key).to_string()),
        work => (
            work.to_string(),
            work_key(&normalize_law_name(work)).to_string(),
        ),
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
