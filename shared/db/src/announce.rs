//! What a change to a law's versions tells the systems downstream, recorded in the transaction of
//! the change ([`crate::outbox`]). [`crate::works`] calls these: a version indexed (the index
//! commit), released (the commit or a reviewer), and a work repealed. A release that places a
//! version after another (on the works' timeline: the answering versions by their effective day)
//! supersedes it, and says which articles changed between the two.
//!
//! Every event id is derived from what it announces, so announcing the same thing twice (a
//! release repeated, a re-drive) records one event.

use super::outbox::{self, EventType, NewEvent};
use super::{DbError, Type};
use docpipe_parse::diff::{self, Change};
use serde_json::json;
use tokio_postgres::GenericClient;

/// Article numbers an `ArticlesChanged` lists at most per kind of change (its counts are always
/// whole): keeps every event well under EventBridge's 256 KB, whatever the law.
pub const MAX_LISTED: usize = 500;

/// `doc_id` (run `run_id`) was committed as a rendition of `version_id`.
pub async fn version_indexed(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
    version_id: i64,
    released: bool,
) -> Result<(), DbError> {
    let row = c
        .query_typed_one(
            "SELECT v.work_id, v.label, w.title, w.level,
                    COALESCE(v.effective_from, v.promulgated_on)::text AS effective_from
             FROM work_versions v JOIN works w ON w.work_id = v.work_id
             WHERE v.version_id = $1",
            &[(&version_id, Type::INT8)],
        )
        .await?;
    let work_id: i64 = row.get("work_id");
    outbox::record(
        c,
        &NewEvent {
            event_id: format!("VersionIndexed:{doc_id}:{run_id}"),
            kind: EventType::VersionIndexed,
            doc_id: Some(doc_id),
            work_id: Some(work_id),
            body: json!({
                "doc_id": doc_id,
                "run_id": run_id,
                "work_id": work_id,
                "version_id": version_id,
                "label": row.get::<_, String>("label"),
                "title": row.get::<_, String>("title"),
                "level": row.get::<_, String>("level"),
                "effective_from": row.get::<_, Option<String>>("effective_from"),
                "released": released,
            }),
        },
    )
    .await?;
    Ok(())
}

/// The rendition `doc_id` of `version_id` was released with content `sha256`: announced, with
/// what the release supersedes and what changed.
pub async fn version_released(
    c: &impl GenericClient,
    work_id: i64,
    version_id: i64,
    doc_id: &str,
    sha256: &str,
    released_by: &str,
) -> Result<(), DbError> {
    let Some(place) = place_of(c, work_id, version_id).await? else {
        // The version does not answer (its rendition is not indexed): nothing was released that
        // search could see, so nothing is superseded either.
        return Ok(());
    };
    outbox::record(
        c,
        &NewEvent {
            event_id: format!("VersionReleased:{version_id}:{doc_id}:{sha256}"),
            kind: EventType::VersionReleased,
            doc_id: Some(doc_id),
            work_id: Some(work_id),
            body: json!({
                "work_id": work_id,
                "version_id": version_id,
                "label": place.label,
                "doc_id": doc_id,
                "sha256": sha256,
                "released_by": released_by,
                "effective_from": place.effective_from,
            }),
        },
    )
    .await?;
    let me = Neighbour {
        version_id,
        label: place.label.clone(),
        effective_from: place.effective_from.clone(),
    };
    if let Some(before) = &place.before {
        superseded(c, work_id, before, &me, sha256).await?;
    }
    if let Some(after) = &place.after {
        superseded(c, work_id, &me, after, sha256).await?;
    }
    Ok(())
}

/// `work_id` was repealed from `on`, with `successor` taking its place.
pub async fn work_repealed(
    c: &impl GenericClient,
    work_id: i64,
    on: &str,
    successor: Option<i64>,
) -> Result<(), DbError> {
    outbox::record(
        c,
        &NewEvent {
            event_id: format!("WorkRepealed:{work_id}:{on}"),
            kind: EventType::WorkRepealed,
            doc_id: None,
            work_id: Some(work_id),
            body: json!({
                "work_id": work_id,
                "repealed_on": on,
                "successor_work_id": successor,
            }),
        },
    )
    .await?;
    Ok(())
}

#[derive(Debug, Clone)]
struct Neighbour {
    version_id: i64,
    label: String,
    effective_from: Option<String>,
}

/// A version on its work's timeline, with the answering versions just before and after it.
struct Place {
    label: String,
    effective_from: Option<String>,
    before: Option<Neighbour>,
    after: Option<Neighbour>,
}

/// Where `version_id` stands among its work's answering versions: the timeline's order (see
/// `works::TIMELINE`), read for this one work.
async fn place_of(
    c: &impl GenericClient,
    work_id: i64,
    version_id: i64,
) -> Result<Option<Place>, DbError> {
    let row = c
        .query_typed_opt(
            "WITH answering AS (
                 SELECT v.version_id, v.label,
                        COALESCE(v.effective_from, v.promulgated_on) AS day,
                        COALESCE(v.effective_from, v.promulgated_on, '-infinity'::date) AS eff
                 FROM work_versions v
                 WHERE v.work_id = $1 AND EXISTS (
                     SELECT 1 FROM version_documents vd JOIN documents d ON d.doc_id = vd.doc_id
                     WHERE vd.version_id = v.version_id AND d.status = 'indexed'
                       AND d.deleting_at IS NULL AND vd.released_sha256 = d.content_sha256)),
             ordered AS (
                 SELECT version_id, label, day::text AS day,
                        LAG(version_id) OVER w AS before_id, LAG(label) OVER w AS before_label,
                        LAG(day::text) OVER w AS before_day,
                        LEAD(version_id) OVER w AS after_id, LEAD(label) OVER w AS after_label,
                        LEAD(day::text) OVER w AS after_day
                 FROM answering WINDOW w AS (ORDER BY eff, version_id))
             SELECT * FROM ordered WHERE version_id = $2",
            &[(&work_id, Type::INT8), (&version_id, Type::INT8)],
        )
        .await?;
    Ok(row.map(|r| {
        let neighbour = |id: &str, label: &str, day: &str| {
            r.get::<_, Option<i64>>(id).map(|version_id| Neighbour {
                version_id,
                label: r.get(label),
                effective_from: r.get(day),
            })
        };
        Place {
            label: r.get("label"),
            effective_from: r.get("day"),
            before: neighbour("before_id", "before_label", "before_day"),
            after: neighbour("after_id", "after_label", "after_day"),
        }
    }))
}

/// `old` is superseded by `new` (the next answering version): that, and the articles that changed
/// between them. `sha256` (the released content) keys the article changes: a re-release of other
/// content is another diff.
async fn superseded(
    c: &impl GenericClient,
    work_id: i64,
    old: &Neighbour,
    new: &Neighbour,
    sha256: &str,
) -> Result<(), DbError> {
    outbox::record(
        c,
        &NewEvent {
            event_id: format!("VersionSuperseded:{}:{}", old.version_id, new.version_id),
            kind: EventType::VersionSuperseded,
            doc_id: None,
            work_id: Some(work_id),
            body: json!({
                "work_id": work_id,
                "version_id": old.version_id,
                "label": old.label,
                "superseded_by_version_id": new.version_id,
                "superseded_by_label": new.label,
                "superseded_on": new.effective_from,
            }),
        },
    )
    .await?;
    let (Some(before), Some(after)) = (
        super::works::version_articles(c, old.version_id).await?,
        super::works::version_articles(c, new.version_id).await?,
    ) else {
        return Ok(());
    };
    let before: Vec<diff::Article> = before.into_iter().map(diff::Article::from_block).collect();
    let after: Vec<diff::Article> = after.into_iter().map(diff::Article::from_block).collect();
    let mut body = articles_changed(&diff::diff(&before, &after));
    if let Some(o) = body.as_object_mut() {
        o.insert("work_id".into(), json!(work_id));
        o.insert("from_version_id".into(), json!(old.version_id));
        o.insert("from_label".into(), json!(old.label));
        o.insert("to_version_id".into(), json!(new.version_id));
        o.insert("to_label".into(), json!(new.label));
    }
    outbox::record(
        c,
        &NewEvent {
            event_id: format!(
                "ArticlesChanged:{}:{}:{sha256}",
                old.version_id, new.version_id
            ),
            kind: EventType::ArticlesChanged,
            doc_id: None,
            work_id: Some(work_id),
            body,
        },
    )
    .await?;
    Ok(())
}

/// A diff as the event lists it: article numbers by kind of change (each list at most
/// [`MAX_LISTED`], `truncated` when one was cut), and the whole counts.
pub fn articles_changed(d: &diff::Diff) -> serde_json::Value {
    let mut modified = Vec::new();
    let mut added = Vec::new();
    let mut removed = Vec::new();
    let mut renumbered = Vec::new();
    for a in &d.articles {
        let pair = || json!({ "old_number": a.old_number, "new_number": a.new_number });
        match a.change {
            Change::Modified => modified.push(pair()),
            Change::Renumbered => renumbered.push(pair()),
            Change::Added => added.push(json!(a.new_number)),
            Change::Removed => removed.push(json!(a.old_number)),
            Change::Unchanged => {}
        }
    }
    let truncated = [&modified, &added, &removed, &renumbered]
        .iter()
        .any(|l| l.len() > MAX_LISTED);
    for list in [&mut modified, &mut added, &mut removed, &mut renumbered] {
        list.truncate(MAX_LISTED);
    }
    json!({
        "counts": d.counts,
        "modified": modified,
        "added": added,
        "removed": removed,
        "renumbered": renumbered,
        "truncated": truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn article(number: &str, text: &str) -> diff::Article {
        diff::Article {
            number: number.into(),
            chapter: String::new(),
            text: text.into(),
        }
    }

    #[test]
    fn the_event_lists_each_kind_of_change_by_number() {
        let old = [
            article("第一条", "为了规范劳动关系，制定本法。"),
            article("第二条", "用人单位应当依法订立劳动合同，明确双方权利义务。"),
            article("第三条", "本条将被删除，内容完全不同于其他任何条文。"),
        ];
        let new = [
            article("第一条", "为了规范劳动关系，制定本法。"),
            article("第二条", "新增加的条文讲述一个全新的主题，与旧文无关。"),
            article(
                "第三条",
                "用人单位应当依法订立书面劳动合同，明确双方的权利和义务。",
            ),
        ];
        let body = articles_changed(&diff::diff(&old, &new));
        assert_eq!(
            body["modified"],
            json!([{ "old_number": "第二条", "new_number": "第三条" }])
        );
        assert_eq!(body["added"], json!(["第二条"]));
        assert_eq!(body["removed"], json!(["第三条"]));
        assert_eq!(body["counts"]["unchanged"], json!(1));
        assert_eq!(body["truncated"], json!(false));
    }

    #[test]
    fn a_list_longer_than_the_bound_is_cut_and_says_so_while_its_count_stays_whole() {
        let old: Vec<diff::Article> = Vec::new();
        let new: Vec<diff::Article> = (0..MAX_LISTED + 7)
            .map(|i| {
                article(
                    &format!("第{i}条"),
                    &format!("第{i}个全新条文的独特内容{i}"),
                )
            })
            .collect();
        let body = articles_changed(&diff::diff(&old, &new));
        assert_eq!(body["added"].as_array().unwrap().len(), MAX_LISTED);
        assert_eq!(body["counts"]["added"], json!(MAX_LISTED + 7));
        assert_eq!(body["truncated"], json!(true));
    }
}
