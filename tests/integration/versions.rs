//! Laws over time on the real stack: each document of `corpus/versions` becomes a version of its
//! law with the dates `INDEX.tsv` gives, and a search as of a date answers with the version in
//! force on it, in every mode, the others left out before the top k is cut.

use docpipe_core::filters::Filters;
use docpipe_db::Type;
use docpipe_search::{Mode, SearchResult, Versions};
use helpers::{corpus_dir, Pipeline};
use std::collections::BTreeMap;

const MODES: [Mode; 3] = [Mode::Dense, Mode::Keyword, Mode::Hybrid];

/// One row of `corpus/versions/INDEX.tsv`.
#[derive(Debug, Clone)]
pub(crate) struct Version {
    file: String,
    published: String,
}

/// The laws of `corpus/versions` with exactly two versions, oldest first within each.
fn two_version_laws() -> Vec<(String, [Version; 2])> {
    let text = std::fs::read_to_string(corpus_dir().join("versions/INDEX.tsv"))
        .expect("corpus/versions/INDEX.tsv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split('\t').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (file, law, published) = (col("file"), col("law"), col("published"));
    let mut by_law: BTreeMap<String, Vec<Version>> = BTreeMap::new();
    for line in lines.filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        by_law.entry(f[law].to_string()).or_default().push(Version {
            file: f[file].to_string(),
            published: f[published].to_string(),
        });
    }
    by_law
        .into_iter()
        .filter(|(_, v)| v.len() == 2)
        .map(|(law, mut v)| {
            v.sort_by(|a, b| a.published.cmp(&b.published));
            let newer = v.pop().unwrap();
            let older = v.pop().unwrap();
            (law, [older, newer])
        })
        .collect()
}

pub(crate) async fn ingest(p: &Pipeline, v: &Version, suffix: &[u8]) -> String {
    let mut body = std::fs::read(corpus_dir().join("versions").join(&v.file)).unwrap();
    body.extend_from_slice(suffix);
    let key = format!("uploads/versions/{}{}", suffix.len(), v.file);
    let doc_id = p.ingest_indexed(&key, &body).await.doc_id;
    p.wait_searchable(&doc_id).await;
    doc_id
}

/// 保守国家秘密法 in its two versions of `corpus/versions`, oldest first.
pub(crate) fn secrets_law() -> (String, [Version; 2]) {
    two_version_laws()
        .into_iter()
        .find(|(law, _)| law == "保守国家秘密法")
        .expect("保守国家秘密法 in corpus/versions")
}

/// The content a document holds now.
async fn sha_of(p: &Pipeline, doc_id: &str) -> String {
    p.doc(doc_id).await.expect("the document").content_sha256
}

/// A document's version as recorded: (work id, label, effective from).
pub(crate) async fn version_of(p: &Pipeline, doc_id: &str) -> (i64, String, String) {
    let row =
        p.db.client()
            .await
            .query_typed_one(
                "SELECT v.work_id, v.label, COALESCE(v.effective_from::text, '') AS effective_from
             FROM version_documents vd JOIN work_versions v ON v.version_id = vd.version_id
             WHERE vd.doc_id = $1",
                &[(&doc_id, Type::VARCHAR)],
            )
            .await
            .unwrap_or_else(|e| panic!("{doc_id} has no version: {e}"));
    (
        row.get("work_id"),
        row.get("label"),
        row.get("effective_from"),
    )
}

async fn first_article(p: &Pipeline, doc_id: &str) -> String {
    p.db.client()
        .await
        .query_typed_one(
            "SELECT text FROM semantic_blocks
             WHERE doc_id = $1 AND section_title LIKE '第一条%' ORDER BY id LIMIT 1",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await
        .unwrap()
        .get("text")
}

/// One pass of the sweeper's housekeeping over the test's stack, as the dev runner makes it.
async fn housekeeping(p: &Pipeline) -> docpipe_pipeline::upkeep::housekeeping::HousekeepingReport {
    docpipe_pipeline::upkeep::housekeeping::housekeeping(
        &docpipe_pipeline::upkeep::housekeeping::HousekeepingDeps {
            db: &p.db.db,
            objects: &*p.store.objects,
            vectors: &*p.milvus,
            bucket: &p.aws.bucket,
            clock: &p.aws.clock,
        },
        200,
    )
    .await
}

/// The day before `day` (YYYY-MM-DD), far enough for these tests: the first of the month goes
/// back to the 28th of the month before.
fn day_before(day: &str) -> String {
    let (y, m, d): (i32, u32, u32) = (
        day[..4].parse().unwrap(),
        day[5..7].parse().unwrap(),
        day[8..].parse().unwrap(),
    );
    if d > 1 {
        format!("{y:04}-{m:02}-{:02}", d - 1)
    } else if m > 1 {
        format!("{y:04}-{:02}-28", m - 1)
    } else {
        format!("{:04}-12-31", y - 1)
    }
}

/// The labels of the hits from `work`.
fn labels_of(r: &SearchResult, work: i64) -> Vec<(String, String)> {
    r.hits
        .iter()
        .filter_map(|h| h.version.as_ref())
        .filter(|v| v.work_id == work)
        .map(|v| (v.version.clone(), v.status.clone()))
        .collect()
}

struct Law {
    name: String,
    work: i64,
    /// (doc id, label, effective from), older first.
    versions: [(String, String, String); 2],
    first_article: [String; 2],
}

#[tokio::test]
async fn each_law_answers_with_the_version_in_force_on_the_date_in_every_mode() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let chosen: Vec<_> = two_version_laws().into_iter().take(10).collect();
    assert_eq!(chosen.len(), 10);
    let mut laws = Vec::new();
    for (name, [older, newer]) in &chosen {
        let mut versions = Vec::new();
        let mut texts = Vec::new();
        for v in [older, newer] {
            let doc_id = ingest(&p, v, b"").await;
            let (work, label, effective) = version_of(&p, &doc_id).await;
            assert_eq!(
                label, v.published,
                "{}: the version is its publication date",
                v.file
            );
            assert!(!effective.is_empty(), "{}: an effective date", v.file);
            texts.push(first_article(&p, &doc_id).await);
            versions.push((work, (doc_id, label, effective)));
        }
        assert_eq!(
            versions[0].0, versions[1].0,
            "{name}: one work for both versions"
        );
        assert!(versions[0].1 .2 < versions[1].1 .2, "{name}: {versions:?}");
        let [(work, a), (_, b)] = <[_; 2]>::try_from(versions).unwrap();
        laws.push(Law {
            name: name.clone(),
            work,
            versions: [a, b],
            first_article: <[String; 2]>::try_from(texts).unwrap(),
        });
    }
    let none = Filters::default();
    for law in &laws {
        let [(_, old, old_from), (_, new, new_from)] = &law.versions;
        let dates = [
            (day_before(old_from), None),
            (old_from.clone(), Some(old)),
            (day_before(new_from), Some(old)),
            (new_from.clone(), Some(new)),
        ];
        for (as_of, expected) in &dates {
            for mode in MODES {
                let r = p
                    .search_as_of(
                        &law.first_article[0],
                        10,
                        mode,
                        &none,
                        Some(as_of),
                        Versions::InForce,
                    )
                    .await;
                assert_eq!(r.as_of, *as_of);
                let got = labels_of(&r, law.work);
                let what = format!("{} as of {as_of} ({mode:?})", law.name);
                match expected {
                    None => assert!(got.is_empty(), "{what}: not yet in force, got {got:?}"),
                    Some(label) => {
                        assert!(
                            got.iter().all(|(l, s)| l == *label && s == "in_force"),
                            "{what}: only {label}, got {got:?}"
                        );
                        if mode != Mode::Dense {
                            assert!(!got.is_empty(), "{what}: its first article");
                        }
                    }
                }
            }
            // The article named, as of the date: the version then in force, or nothing.
            let named = p
                .search_as_of(
                    &format!("{}第一条", law.name),
                    5,
                    Mode::Keyword,
                    &none,
                    Some(as_of),
                    Versions::InForce,
                )
                .await;
            let referenced: Vec<_> = named
                .hits
                .iter()
                .filter(|h| h.referenced)
                .filter_map(|h| h.version.as_ref().map(|v| v.version.clone()))
                .collect();
            match expected {
                None => assert!(
                    referenced.is_empty(),
                    "{} as of {as_of}: {referenced:?}",
                    law.name
                ),
                Some(label) => assert_eq!(
                    referenced,
                    [label.to_string()],
                    "{} as of {as_of}",
                    law.name
                ),
            }
        }
        // Every version, each with its status today: the older one superseded by the newer,
        // saying whether its first article changed there.
        let all = p
            .search_as_of(
                &law.first_article[0],
                20,
                Mode::Keyword,
                &none,
                None,
                Versions::All,
            )
            .await;
        let old_hit = all
            .hits
            .iter()
            .filter_map(|h| h.version.as_ref().map(|v| (h, v)))
            .find(|(h, v)| v.version == *old && h.citation.contains("第一条"));
        // The older version's first article is asked for by its own text, in every version:
        // it must be there, so that what follows is asserted, never skipped.
        let (_, v) = old_hit.unwrap_or_else(|| {
            panic!(
                "{}: the superseded version's first article is missing from versions=all: {:?}",
                law.name,
                all.hits.iter().map(|h| &h.citation).collect::<Vec<_>>()
            )
        });
        assert_eq!(v.status, "superseded", "{}", law.name);
        assert_eq!(v.replaced_by.as_deref(), Some(new.as_str()));
        assert_eq!(v.effective_to.as_deref(), Some(new_from.as_str()));
        assert_eq!(
            v.changed_in_replacement,
            Some(law.first_article[0] != law.first_article[1]),
            "{}",
            law.name
        );
    }
    // Today, without a date: no superseded article answers.
    for law in &laws {
        let r = p
            .search(&law.first_article[0], 10, Mode::Hybrid, &none)
            .await;
        let got = labels_of(&r, law.work);
        assert!(
            !got.is_empty()
                && got
                    .iter()
                    .all(|(l, s)| *l == law.versions[1].1 && s == "in_force"),
            "{}: {:?}",
            law.name,
            labels_of(&r, law.work)
        );
    }
    p.cleanup().await;
}

#[tokio::test]
async fn deleting_the_current_version_hands_back_to_the_one_before_and_renditions_answer_once() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (name, [older, newer]) = secrets_law();
    let old_doc = ingest(&p, &older, b"").await;
    // The same version again, as another file: a rendition, not a version of its own.
    let old_copy = ingest(&p, &older, b"\n").await;
    let new_doc = ingest(&p, &newer, b"").await;
    let (work, old_label, _) = version_of(&p, &old_doc).await;
    assert_eq!(version_of(&p, &old_copy).await.1, old_label);
    let query = first_article(&p, &old_doc).await;
    let none = Filters::default();

    let today = p.search(&query, 10, Mode::Keyword, &none).await;
    let got = labels_of(&today, work);
    assert!(
        !got.is_empty()
            && got
                .iter()
                .all(|(l, s)| *l == newer.published && s == "in_force"),
        "{name} today: {got:?}"
    );

    let then = p
        .search_as_of(
            &query,
            10,
            Mode::Keyword,
            &none,
            Some("2015-01-01"),
            Versions::InForce,
        )
        .await;
    let first: Vec<_> = then
        .hits
        .iter()
        .filter(|h| h.citation.contains("第一条"))
        .filter_map(|h| h.version.as_ref())
        .filter(|v| v.work_id == work)
        .collect();
    assert_eq!(first.len(), 1, "one hit for two renditions: {first:?}");
    let mut both = vec![old_doc.clone(), old_copy.clone()];
    both.sort();
    assert_eq!(first[0].documents, both);

    docpipe_pipeline::stages::delete::delete(&p.delete_deps(), &new_doc)
        .await
        .expect("delete");
    let after = p.search(&query, 10, Mode::Keyword, &none).await;
    let got = labels_of(&after, work);
    assert!(
        !got.is_empty() && got.iter().all(|(l, s)| *l == old_label && s == "in_force"),
        "the version before answers once the current one is deleted: {got:?}"
    );
    let (summary, timeline) =
        docpipe_db::works::timeline(&**p.db.client().await, work, "2030-01-01")
            .await
            .unwrap()
            .expect("the work");
    assert_eq!(summary.current_version.as_deref(), Some(old_label.as_str()));
    assert_eq!(timeline.len(), 1);
    assert_eq!(timeline[0].documents, both);
    p.cleanup().await;
}

/// `ReleaseMode=manual`: an indexed version waits, answering nothing, until it is released; the
/// version before it answers meanwhile; a release is one compare-and-set, so a search racing it
/// sees one version or the other, never both and never none; a document that is not indexed
/// cannot release its version.
#[tokio::test]
async fn in_the_manual_mode_a_version_answers_only_once_released_and_searches_see_it_whole() {
    use docpipe_db::works::{self, Released};
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.index.config.release = docpipe_core::config::ReleaseMode::Manual;
    let (_, [older, newer]) = secrets_law();
    let old_doc = ingest(&p, &older, b"").await;
    let (work, old_label, _) = version_of(&p, &old_doc).await;
    let query = first_article(&p, &old_doc).await;
    let none = Filters::default();
    for versions in [Versions::InForce, Versions::All] {
        let held = p
            .search_as_of(&query, 10, Mode::Keyword, &none, None, versions)
            .await;
        assert!(
            held.hits.iter().all(|h| h.doc_id != old_doc),
            "held, it answers nothing ({versions:?}): {:?}",
            held.hits.iter().map(|h| &h.citation).collect::<Vec<_>>()
        );
    }
    let (_, timeline) = works::timeline(&**p.db.client().await, work, "2030-01-01")
        .await
        .unwrap()
        .expect("a held version's work is shown");
    assert_eq!(
        timeline
            .iter()
            .map(|v| v.status.as_str())
            .collect::<Vec<_>>(),
        ["held"]
    );
    assert_eq!(
        works::release(
            &**p.db.client().await,
            work,
            &old_doc,
            "test:reviewer",
            None
        )
        .await
        .unwrap(),
        Released::Now {
            label: old_label.clone(),
            sha256: sha_of(&p, &old_doc).await,
        }
    );
    assert_eq!(
        works::release(
            &**p.db.client().await,
            work,
            &old_doc,
            "test:reviewer",
            None
        )
        .await
        .unwrap(),
        Released::Already {
            label: old_label.clone(),
            sha256: sha_of(&p, &old_doc).await,
        }
    );
    assert_eq!(
        works::release(
            &**p.db.client().await,
            work + 1,
            &old_doc,
            "test:reviewer",
            None
        )
        .await
        .unwrap(),
        Released::NotOfWork
    );

    let new_doc = ingest(&p, &newer, b"").await;
    let before = p.search(&query, 10, Mode::Keyword, &none).await;
    let got = labels_of(&before, work);
    assert!(
        !got.is_empty() && got.iter().all(|(l, _)| *l == old_label),
        "the newer version is held: the older one answers, {got:?}"
    );

    // Searches racing the release, three at a time so that the commit falls between one's
    // ranking and its check more often: each sees one version, whole.
    let search_loop = || async {
        let mut seen = Vec::new();
        for _ in 0..25 {
            let r = p.search(&query, 10, Mode::Keyword, &none).await;
            // By document, not by version: a hit of a held version carries no version at all.
            let labels: std::collections::BTreeSet<String> = r
                .hits
                .iter()
                .filter(|h| h.doc_id == old_doc || h.doc_id == new_doc)
                .map(|h| h.doc_id.clone())
                .collect();
            seen.push(labels);
        }
        seen
    };
    let searches = async {
        let (a, b, c) = tokio::join!(search_loop(), search_loop(), search_loop());
        [a, b, c].concat()
    };
    let release = async {
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
        // As the API releases: one transaction.
        let mut client = p.db.client().await;
        let tx = client.transaction().await.unwrap();
        let released = works::release(&*tx, work, &new_doc, "test:reviewer", None)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        released
    };
    let (seen, released) = tokio::join!(searches, release);
    assert_eq!(
        released,
        Released::Now {
            label: newer.published.clone(),
            sha256: sha_of(&p, &new_doc).await,
        }
    );
    assert!(
        !seen.is_empty() && seen.iter().all(|labels| labels.len() == 1),
        "one version per answer: {seen:?}"
    );
    let after = p.search(&query, 10, Mode::Keyword, &none).await;
    let got = labels_of(&after, work);
    assert!(
        !got.is_empty()
            && got
                .iter()
                .all(|(l, s)| *l == newer.published && s == "in_force"),
        "after the release: {got:?}"
    );

    // A document being processed again is not indexed: its version cannot be released through it.
    p.retry(&old_doc).await.expect("retry");
    match works::release(
        &**p.db.client().await,
        work,
        &old_doc,
        "test:reviewer",
        None,
    )
    .await
    .unwrap()
    {
        Released::NotIndexed { status, .. } => assert_ne!(status, "indexed"),
        other => panic!("a document not indexed released its version: {other:?}"),
    }
    p.cleanup().await;
}

/// A repeal (set through the API; the dates cannot give it): from its day the law's versions
/// answer as repealed, never as in force, naming the law that took its place; before it nothing
/// changes; undone, the law answers again.
#[tokio::test]
async fn a_repealed_law_stops_answering_from_its_repeal_and_names_its_successor() {
    use docpipe_db::works::{self, Repealed};
    let p = Pipeline::new(Pipeline::hash()).await;
    let laws = two_version_laws();
    let (_, [_, secrets]) = laws
        .iter()
        .find(|(law, _)| law == "保守国家秘密法")
        .expect("保守国家秘密法");
    let (_, [_, antitrust]) = laws
        .iter()
        .find(|(law, _)| law == "反垄断法")
        .expect("反垄断法");
    let repealed_doc = ingest(&p, secrets, b"").await;
    let successor_doc = ingest(&p, antitrust, b"").await;
    let (work, label, _) = version_of(&p, &repealed_doc).await;
    let (successor, _, _) = version_of(&p, &successor_doc).await;
    let query = first_article(&p, &repealed_doc).await;
    let none = Filters::default();
    let db = p.db.client().await;
    assert_eq!(
        works::repeal(&**db, work, Some("2025-01-01"), Some(successor))
            .await
            .unwrap(),
        Repealed::Done
    );
    assert_eq!(
        works::repeal(&**db, work, Some("2025-01-01"), Some(999_999))
            .await
            .unwrap(),
        Repealed::NoSuchSuccessor
    );
    assert_eq!(
        works::repeal(&**db, 999_999, None, None).await.unwrap(),
        Repealed::NoSuchWork
    );

    let before = p
        .search_as_of(
            &query,
            10,
            Mode::Keyword,
            &none,
            Some("2024-12-31"),
            Versions::InForce,
        )
        .await;
    let got = labels_of(&before, work);
    assert!(
        !got.is_empty() && got.iter().all(|(l, s)| *l == label && s == "in_force"),
        "{got:?}"
    );

    let after = p
        .search_as_of(
            &query,
            10,
            Mode::Keyword,
            &none,
            Some("2025-01-01"),
            Versions::InForce,
        )
        .await;
    assert!(
        labels_of(&after, work).is_empty(),
        "repealed: nothing in force"
    );
    let all = p
        .search_as_of(
            &query,
            10,
            Mode::Keyword,
            &none,
            Some("2025-01-01"),
            Versions::All,
        )
        .await;
    let versions: Vec<_> = all
        .hits
        .iter()
        .filter_map(|h| h.version.as_ref())
        .filter(|v| v.work_id == work)
        .collect();
    assert!(!versions.is_empty());
    assert!(versions.iter().all(|v| v.status == "repealed"
        && v.successor.as_deref() == Some("中华人民共和国反垄断法")
        && v.effective_to.as_deref() == Some("2025-01-01")));

    assert_eq!(
        works::repeal(&**db, work, None, None).await.unwrap(),
        Repealed::Done
    );
    let again = p.search(&query, 10, Mode::Keyword, &none).await;
    assert!(
        !labels_of(&again, work).is_empty(),
        "undone, it answers again"
    );
    drop(db);
    p.cleanup().await;
}

/// The version recorded for `doc_id`, as the timeline would name its sources.
async fn recorded(p: &Pipeline, doc_id: &str) -> serde_json::Value {
    p.db.client()
        .await
        .query_typed_one(
            "SELECT json_build_object('title', w.title, 'level', w.level,
                    'level_source', w.level_source, 'label', v.label,
                    'label_source', v.label_source, 'promulgated', v.promulgated_on::text,
                    'promulgated_source', v.promulgated_source,
                    'effective_from', v.effective_from::text,
                    'effective_from_source', v.effective_from_source,
                    'effective_to', v.effective_to::text,
                    'effective_to_source', v.effective_to_source,
                    'decisions', v.decisions, 'work_id', w.work_id)::text
             FROM version_documents vd JOIN work_versions v ON v.version_id = vd.version_id
             JOIN works w ON w.work_id = v.work_id WHERE vd.doc_id = $1",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await
        .map(|r| serde_json::from_str(r.get::<_, &str>(0)).unwrap())
        .unwrap_or_else(|e| panic!("{doc_id} has no version: {e}"))
}

#[tokio::test]
async fn object_metadata_names_the_work_and_version_and_bad_or_colliding_metadata_is_refused() {
    use docpipe_pipeline::stages::store::StoreOutcome;
    let p = Pipeline::new(Pipeline::hash()).await;
    let (_, [older, newer]) = two_version_laws().into_iter().next().unwrap();
    let read = |v: &Version| std::fs::read(corpus_dir().join("versions").join(&v.file)).unwrap();
    // 示范条例 in RFC 2047's B encoding, 地方性法规 in its Q encoding: S3 keeps non-ASCII
    // metadata so.
    let work = "=?UTF-8?B?56S66IyD5p2h5L6L?=";
    let key = "uploads/claimed/older.md";
    p.aws
        .put_with_metadata(
            key,
            &read(&older),
            &[
                ("work", work),
                ("version", "v1-claimed"),
                (
                    "regulation-type",
                    "=?UTF-8?Q?=E5=9C=B0=E6=96=B9=E6=80=A7=E6=B3=95=E8=A7=84?=",
                ),
                ("promulgated", "2030-01-01"),
                ("effective-from", "2030-06-01"),
                ("effective-to", "2035-01-01"),
            ],
        )
        .await;
    assert!(matches!(p.deliver(key).await, StoreOutcome::Stored { .. }));
    let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, key);
    p.drive(&doc_id).await;
    let doc = p.doc(&doc_id).await.unwrap();
    assert_eq!(
        doc.status,
        docpipe_core::model::DocStatus::Indexed,
        "{}",
        doc.error_message
    );
    assert_eq!(
        (doc.version.as_str(), doc.regulation_type.as_str()),
        ("v1-claimed", "地方性法规")
    );
    let v = recorded(&p, &doc_id).await;
    for (field, want) in [
        ("title", "示范条例"),
        ("level", "地方性法规"),
        ("level_source", "upload"),
        ("label", "v1-claimed"),
        ("label_source", "upload"),
        ("promulgated", "2030-01-01"),
        ("promulgated_source", "upload"),
        ("effective_from", "2030-06-01"),
        ("effective_from_source", "upload"),
        ("effective_to", "2035-01-01"),
        ("effective_to_source", "upload"),
    ] {
        assert_eq!(v[field], want, "{field}: {v}");
    }
    let decisions = v["decisions"].to_string();
    assert!(
        decisions.contains("the upload gives promulgated 2030-01-01, the text ")
            && decisions.contains("the upload gives effective_from 2030-06-01, the text "),
        "the text's date is recorded as overruled: {decisions}"
    );
    let work_id = v["work_id"].as_i64().unwrap();
    for (as_of, status) in [
        ("2029-12-31", "not_yet_in_force"),
        ("2032-01-01", "in_force"),
        ("2035-01-01", "repealed"),
    ] {
        let (_, versions) = docpipe_db::works::timeline(&**p.db.client().await, work_id, as_of)
            .await
            .unwrap()
            .expect("the work");
        assert_eq!(versions.len(), 1);
        assert_eq!(versions[0].status, status, "as of {as_of}");
        assert_eq!(versions[0].effective_to.as_deref(), Some("2035-01-01"));
        assert_eq!(versions[0].effective_to_source, "upload");
    }

    let newer = read(&newer);
    let level = "=?UTF-8?Q?=E5=9C=B0=E6=96=B9=E6=80=A7=E6=B3=95=E8=A7=84?=";
    let wide = "v".repeat(65);
    type Case<'a> = (&'a str, Vec<(&'a str, &'a str)>, Vec<&'a str>);
    let cases: [Case; 5] = [
        (
            "collides",
            vec![
                ("work", work),
                ("version", "v1-claimed"),
                ("regulation-type", level),
                ("effective-from", "2031-01-01"),
            ],
            vec![
                "already recorded",
                "effective_from 2030-06-01",
                "2031-01-01",
                &doc_id,
            ],
        ),
        (
            "contradicts",
            vec![
                ("promulgated", "2030-05-01"),
                ("effective-from", "2030-01-01"),
            ],
            vec!["x-amz-meta-effective-from", "contradict"],
        ),
        (
            "encoding",
            vec![("work", "=?UTF-8?B?56S6")],
            vec!["x-amz-meta-work", "RFC 2047"],
        ),
        (
            "wide",
            vec![("version", &wide)],
            vec!["x-amz-meta-version", "at most 64"],
        ),
        (
            "date",
            vec![("effective-to", "2030-02-30")],
            vec!["x-amz-meta-effective-to", "not a date"],
        ),
    ];
    for (name, metadata, expect) in cases {
        let key = format!("uploads/claimed/{name}.md");
        p.aws.put_with_metadata(&key, &newer, &metadata).await;
        let StoreOutcome::Rejected { doc_id, reason, .. } = p.deliver(&key).await else {
            panic!("{key} is refused");
        };
        for part in expect {
            assert!(reason.contains(part), "{key}: {reason:?} names {part:?}");
        }
        let doc = p.doc(&doc_id).await.unwrap();
        assert_eq!(doc.status, docpipe_core::model::DocStatus::Failed, "{key}");
        assert_eq!(doc.error_message, reason, "{key}");
    }
}

#[tokio::test]
async fn a_pdf_is_cited_by_its_title_line_and_answers_with_its_markdown_as_one_version() {
    helpers::ensure_pdfium_env();
    let p = Pipeline::new(Pipeline::hash()).await;
    let law = "law-15978a0e"; // 中华人民共和国湿地保护法
    let mut docs = Vec::new();
    for ext in ["md", "pdf"] {
        let body =
            std::fs::read(corpus_dir().join(format!("laws-formats/{ext}/{law}.{ext}"))).unwrap();
        let doc = p
            .ingest_indexed(&format!("uploads/formats/{law}.{ext}"), &body)
            .await;
        p.wait_searchable(&doc.doc_id).await;
        docs.push(doc.doc_id);
    }
    // The PDF marks no heading: its first line names the law, as the Markdown's `#` does.
    let (pdf_work, pdf_label, _) = version_of(&p, &docs[1]).await;
    assert_eq!(version_of(&p, &docs[0]).await.0, pdf_work);
    assert_eq!(pdf_label, "2021-12-24");
    let result = p
        .search("湿地保护法第十五条", 5, Mode::Keyword, &Filters::default())
        .await;
    let top = result.hits.first().expect("the named article");
    assert_eq!(
        top.citation, "《中华人民共和国湿地保护法》第十五条",
        "{result:?}"
    );
    let version = top.version.as_ref().expect("a version");
    let mut both = docs.clone();
    both.sort();
    assert_eq!(version.documents, both, "one hit for both renditions");
    assert_eq!(
        result
            .hits
            .iter()
            .filter(|h| h.citation == top.citation)
            .count(),
        1,
        "the article answers once"
    );
}

async fn api_get(http: &reqwest::Client, url: String) -> (u16, serde_json::Value) {
    let r = http.get(url).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(serde_json::Value::Null))
}

/// Every read of one law's text goes through the authority, as search does: a version held for
/// its release answers no citation (not even as a fallback), serves no article, and is no side
/// of a diff; a superseded version serves no article either. Each fails on the code before the
/// one authority check.
#[tokio::test]
async fn held_and_superseded_text_is_served_by_no_read_path() {
    use docpipe_db::works;
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.index.config.release = docpipe_core::config::ReleaseMode::Manual;
    let (_, [older, newer]) = secrets_law();
    let old_doc = ingest(&p, &older, b"").await;
    let (work, _, _) = version_of(&p, &old_doc).await;
    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();
    let resolve = |citation: &'static str| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let r = http
                .post(format!("{base}/citations/resolve"))
                .json(&serde_json::json!({ "citation": citation }))
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<serde_json::Value>().await.unwrap())
        }
    };

    // Held: no citation finds it, its articles are not served.
    let (status, r) = resolve("《保守国家秘密法》第一条").await;
    assert_eq!(status, 404, "a held version answered a citation: {r}");
    let (status, a) = api_get(&http, format!("{base}/documents/{old_doc}/articles/1")).await;
    assert_eq!(status, 409, "a held version's article was served: {a}");
    assert!(
        a["type"].as_str().unwrap_or("").ends_with("version-held"),
        "{a}"
    );
    for read in ["blocks", "structure", "download", "artifacts"] {
        let (status, r) = api_get(&http, format!("{base}/documents/{old_doc}/{read}")).await;
        assert_eq!(status, 409, "a held version's {read} was served: {r}");
    }

    // Released: both answer.
    works::release(
        &**p.db.client().await,
        work,
        &old_doc,
        "test:reviewer",
        None,
    )
    .await
    .unwrap();
    let (status, r) = resolve("《保守国家秘密法》第一条").await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["resolved"]["doc_id"], old_doc.as_str(), "{r}");
    let (status, a) = api_get(&http, format!("{base}/documents/{old_doc}/articles/1")).await;
    assert_eq!(status, 200, "{a}");
    for read in ["blocks", "structure", "download", "artifacts"] {
        let (status, r) = api_get(&http, format!("{base}/documents/{old_doc}/{read}")).await;
        assert_eq!(status, 200, "{read}: {r}");
    }

    // A newer version, held: the diff's default side is the released one, never the held one,
    // and naming the held one is refused.
    let new_doc = ingest(&p, &newer, b"").await;
    let (new_work, new_label, _) = version_of(&p, &new_doc).await;
    assert_eq!(new_work, work);
    let (status, d) = api_get(&http, format!("{base}/works/{work}/diff")).await;
    assert_ne!(status, 200, "a diff compared against the held version: {d}");
    let (status, d) = api_get(
        &http,
        format!("{base}/works/{work}/diff?to={}", encode_query(&new_label)),
    )
    .await;
    assert_eq!(status, 409, "the held version was a side of a diff: {d}");
    let (status, _) = api_get(&http, format!("{base}/documents/{new_doc}/articles/1")).await;
    assert_eq!(status, 409, "a held version's article was served");
    let (_, r) = resolve("《保守国家秘密法》第一条").await;
    assert_eq!(r["resolved"]["doc_id"], old_doc.as_str(), "{r}");

    // Released in turn: the older one is superseded and serves no article; the diff compares.
    works::release(
        &**p.db.client().await,
        work,
        &new_doc,
        "test:reviewer",
        None,
    )
    .await
    .unwrap();
    let (status, d) = api_get(&http, format!("{base}/works/{work}/diff")).await;
    assert_eq!(status, 200, "{d}");
    let (status, a) = api_get(&http, format!("{base}/documents/{old_doc}/articles/1")).await;
    assert_eq!(
        status, 409,
        "a superseded version's article was served: {a}"
    );
    assert!(
        a["type"]
            .as_str()
            .unwrap_or("")
            .ends_with("version-not-in-force"),
        "{a}"
    );
    let (status, _) = api_get(&http, format!("{base}/documents/{new_doc}/articles/1")).await;
    assert_eq!(status, 200);
}

fn encode_query(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.' {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Search's final check reads the version state again, in the statement that vouches for the
/// hits: a version held, released or repealed after the exclusion list was read is judged as it
/// is now. (Before, the final check read only the document's status, so a list read before a
/// change let the change through.)
#[tokio::test]
async fn the_final_check_of_a_search_reads_the_version_state_again() {
    use docpipe_db::articles::live_blocks;
    use docpipe_db::works;
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.index.config.release = docpipe_core::config::ReleaseMode::Manual;
    let (_, [older, _]) = secrets_law();
    let doc = ingest(&p, &older, b"").await;
    let (work, _, _) = version_of(&p, &doc).await;
    let ids: Vec<i64> =
        p.db.client()
            .await
            .query_typed(
                "SELECT id FROM semantic_blocks WHERE doc_id = $1",
                &[(&doc, Type::VARCHAR)],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get("id"))
            .collect();
    assert!(!ids.is_empty());
    // The exclusion list a search read before the change: empty.
    let stale_list = Filters::default();
    let today = docpipe_search::today();
    let vouched = |in_force_only: bool| {
        let (db, ids, stale_list, today) = (&p.db, &ids, &stale_list, &today);
        async move {
            live_blocks(&**db.client().await, ids, stale_list, today, in_force_only)
                .await
                .unwrap()
                .len()
        }
    };
    assert_eq!(
        vouched(true).await,
        0,
        "a held version's blocks were vouched for"
    );
    assert_eq!(
        vouched(false).await,
        0,
        "a held version's blocks were vouched for"
    );
    works::release(&**p.db.client().await, work, &doc, "test:reviewer", None)
        .await
        .unwrap();
    assert_eq!(vouched(true).await, ids.len(), "released, in force");
    works::repeal(&**p.db.client().await, work, Some("2000-01-01"), None)
        .await
        .unwrap();
    assert_eq!(
        vouched(true).await,
        0,
        "a repealed law's blocks were vouched for as in force"
    );
    assert_eq!(
        vouched(false).await,
        ids.len(),
        "all versions: repealed text answers"
    );
}

/// An overwrite of a key is read afresh: the version its old object claimed goes with that
/// object, the new text's own version is recorded; an overwrite with an undated text leaves the
/// old version and shows the document as unassigned. Before, the claims were merged (the
/// overwrite kept `v1-claimed`) and `version_documents` kept the old assignment.
#[tokio::test]
async fn an_overwrite_moves_the_version_and_an_undated_one_unassigns_it() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (_, [older, newer]) = secrets_law();
    let read = |v: &Version| std::fs::read(corpus_dir().join("versions").join(&v.file)).unwrap();
    let key = "uploads/overwrite/law.md";
    p.aws
        .put_with_metadata(key, &read(&older), &[("version", "v1-claimed")])
        .await;
    p.deliver(key).await;
    let doc_id = docpipe_core::ids::derived_doc_id(&p.aws.bucket, key);
    p.drive(&doc_id).await;
    assert_eq!(version_of(&p, &doc_id).await.1, "v1-claimed");

    // The newer text, with no metadata: its own version, not the old object's claim.
    p.aws.put(key, &read(&newer)).await;
    p.deliver(key).await;
    p.drive(&doc_id).await;
    let doc = p.doc(&doc_id).await.unwrap();
    assert_eq!(
        doc.status,
        docpipe_core::model::DocStatus::Indexed,
        "{}",
        doc.error_message
    );
    assert_eq!(doc.version, "", "the old object's version claim stayed");
    assert!(
        doc.metadata.get("version_of").is_none(),
        "the old object's claim stayed: {}",
        doc.metadata
    );
    assert_eq!(version_of(&p, &doc_id).await.1, newer.published);

    // An undated text: no version at all.
    let undated = "# 中华人民共和国保守国家秘密法\n\n第一条 为了保守国家秘密，制定本法。\n\n第二条 国家秘密受法律保护。\n";
    p.aws.put(key, undated.as_bytes()).await;
    p.deliver(key).await;
    p.drive(&doc_id).await;
    let doc = p.doc(&doc_id).await.unwrap();
    assert_eq!(
        doc.status,
        docpipe_core::model::DocStatus::Indexed,
        "{}",
        doc.error_message
    );
    let assigned = p
        .count_for(
            "SELECT count(*) FROM version_documents WHERE doc_id = $1",
            &doc_id,
        )
        .await;
    assert_eq!(
        assigned, 0,
        "an undated overwrite kept the old version's assignment"
    );
    p.cleanup().await;
}

/// A release is a reviewer's act and approves content: an uploader's call is refused (403) and
/// changes nothing; a release names the document and its sha256 (a stale sha256 is refused), and
/// the audit names who released what. In the manual mode an overwrite of a released rendition,
/// and a new rendition of a released version, answer only once released in turn. Before, any
/// caller could release, and a release of the version let every later rendition and overwrite
/// of it publish at its index commit, unreviewed.
#[tokio::test]
async fn a_release_is_a_reviewers_act_on_content_and_new_content_waits_for_its_own() {
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.index.config.release = docpipe_core::config::ReleaseMode::Manual;
    let (_, [older, _]) = secrets_law();
    let body = std::fs::read(corpus_dir().join("versions").join(&older.file)).unwrap();
    let key = "uploads/review/law.md";
    p.aws.put(key, &body).await;
    p.deliver(key).await;
    let doc = docpipe_core::ids::derived_doc_id(&p.aws.bucket, key);
    p.drive(&doc).await;
    p.wait_searchable(&doc).await;
    let (work, label, _) = version_of(&p, &doc).await;
    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();
    let post = |path: String, body: serde_json::Value, reviewer: bool| {
        let http = http.clone();
        let url = format!("{base}{path}");
        async move {
            let mut req = http.post(url).json(&body);
            if reviewer {
                req = req.header("x-docpipe-role", "reviewer");
            }
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            (
                status,
                r.json::<serde_json::Value>().await.unwrap_or_default(),
            )
        }
    };
    let article = |doc: String| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            api_get(&http, format!("{base}/documents/{doc}/articles/1"))
                .await
                .0
        }
    };
    let release = format!("/works/{work}/versions/{doc}/release");

    // An uploader: refused, and nothing moves.
    let (status, r) = post(release.clone(), serde_json::json!({}), false).await;
    assert_eq!(status, 403, "an uploader released a version: {r}");
    assert!(
        r["type"]
            .as_str()
            .unwrap_or("")
            .ends_with("reviewer-required"),
        "{r}"
    );
    let (status, _) = post(
        format!("/works/{work}/repeal"),
        serde_json::json!({ "repealed_on": "2020-01-01" }),
        false,
    )
    .await;
    assert_eq!(status, 403, "an uploader repealed a work");
    assert_eq!(article(doc.clone()).await, 409, "still held");
    // A reviewer reads the held text, marked as such, to review it.
    let seen = http
        .get(format!("{base}/documents/{doc}/articles/1"))
        .header("x-docpipe-role", "reviewer")
        .send()
        .await
        .unwrap();
    assert_eq!(seen.status().as_u16(), 200);
    assert!(
        seen.headers().get("x-docpipe-held").is_some(),
        "held text served without saying so"
    );

    // A reviewer who read other content: refused.
    let (status, r) = post(
        release.clone(),
        serde_json::json!({ "sha256": "0".repeat(64) }),
        true,
    )
    .await;
    assert_eq!(status, 409, "{r}");
    assert!(
        r["type"]
            .as_str()
            .unwrap_or("")
            .ends_with("content-changed"),
        "{r}"
    );

    // A reviewer who read this content: released, and the audit says who and what.
    let sha = sha_of(&p, &doc).await;
    let (status, r) = post(release.clone(), serde_json::json!({ "sha256": sha }), true).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (r["sha256"].as_str(), r["version"].as_str()),
        (Some(sha.as_str()), Some(label.as_str()))
    );
    assert_eq!(article(doc.clone()).await, 200);
    let audited =
        p.db.client()
            .await
            .query_typed_one(
                "SELECT actor_type, actor_id, detail->>'sha256' AS sha FROM audit_log
             WHERE action = 'release' AND target_id = $1 AND result = 'succeeded'",
                &[(&doc, Type::VARCHAR)],
            )
            .await
            .expect("the release is audited");
    assert_eq!(audited.get::<_, String>("actor_type"), "local");
    assert_eq!(
        audited.get::<_, Option<String>>("sha").as_deref(),
        Some(sha.as_str())
    );

    // An overwrite of the released rendition: the same version, new content, held again.
    let mut changed = body.clone();
    changed.extend_from_slice("\n\n附：本文件经审核后发布。\n".as_bytes());
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    p.aws.put(key, &changed).await;
    p.deliver(key).await;
    p.drive(&doc).await;
    assert_eq!(
        version_of(&p, &doc).await.1,
        label,
        "the overwrite is the same version"
    );
    assert_ne!(sha_of(&p, &doc).await, sha);
    assert_eq!(
        article(doc.clone()).await,
        409,
        "an overwrite published unreviewed"
    );
    let (status, r) = post(release.clone(), serde_json::json!({}), true).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["already"], false, "{r}");
    assert_eq!(article(doc.clone()).await, 200);

    // A new rendition of the released version: held until released in turn.
    let copy_key = "uploads/review/law-copy.md";
    let mut copy = body.clone();
    copy.extend_from_slice(b"\n");
    p.aws.put(copy_key, &copy).await;
    p.deliver(copy_key).await;
    let copy_doc = docpipe_core::ids::derived_doc_id(&p.aws.bucket, copy_key);
    p.drive(&copy_doc).await;
    assert_eq!(
        version_of(&p, &copy_doc).await.1,
        label,
        "a rendition of the same version"
    );
    assert_eq!(
        article(copy_doc.clone()).await,
        409,
        "a new rendition published unreviewed"
    );
    assert_eq!(
        article(doc.clone()).await,
        200,
        "the released rendition still answers"
    );
    let (status, r) = post(
        format!("/works/{work}/versions/{copy_doc}/release"),
        serde_json::json!({}),
        true,
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(article(copy_doc).await, 200);
    p.cleanup().await;
}

/// Two uploads that claim one version with different dates, both stored before either is
/// indexed (so the store's check saw neither): one commits, the other fails with
/// `version-collides`, under a lock at the index commit. Before, both were indexed and the second
/// silently rewrote the version's dates.
#[tokio::test]
async fn two_uploads_claiming_one_version_with_other_dates_one_wins_the_other_collides() {
    use docpipe_core::model::DocStatus;
    let p = Pipeline::new(Pipeline::hash()).await;
    let (_, [older, _]) = two_version_laws().into_iter().next().unwrap();
    let body = std::fs::read(corpus_dir().join("versions").join(&older.file)).unwrap();
    let mut keys = Vec::new();
    for (i, day) in ["2031-01-01", "2032-02-02"].iter().enumerate() {
        let key = format!("uploads/collide/{i}.md");
        let mut text = body.clone();
        text.extend_from_slice(format!("\n附{i}\n").as_bytes());
        p.aws
            .put_with_metadata(
                &key,
                &text,
                // 示范条例, as S3 keeps non-ASCII metadata (RFC 2047).
                &[
                    ("work", "=?UTF-8?B?56S66IyD5p2h5L6L?="),
                    ("version", "v-collide"),
                    ("effective-from", day),
                ],
            )
            .await;
        p.deliver(&key).await;
        keys.push(key);
    }
    let docs: Vec<String> = keys
        .iter()
        .map(|k| docpipe_core::ids::derived_doc_id(&p.aws.bucket, k))
        .collect();
    for doc in &docs {
        p.drive(doc).await;
    }
    let mut indexed = 0;
    let mut collided = Vec::new();
    for doc in &docs {
        let d = p.doc(doc).await.unwrap();
        match d.status {
            DocStatus::Indexed => indexed += 1,
            DocStatus::Failed => collided.push(d.error_message.clone()),
            other => panic!("{doc}: {other:?}"),
        }
    }
    assert_eq!(indexed, 1, "one wins: {collided:?}");
    assert_eq!(collided.len(), 1, "the other fails");
    assert!(collided[0].contains("version-collides"), "{}", collided[0]);
    assert_eq!(
        p.count_for(
            "SELECT count(*) FROM version_documents vd JOIN work_versions v USING (version_id)
             WHERE v.label = $1",
            "v-collide"
        )
        .await,
        1
    );
}

/// Renditions of one version that disagree on a date: a known date is never blanked by a
/// rendition that gives none, and a date one rendition's text replaces is a decision on record.
/// Before, the last rendition's dates overwrote the version's, blanks included.
#[tokio::test]
async fn renditions_that_disagree_on_a_date_never_blank_it_and_say_so() {
    let p = Pipeline::new(Pipeline::hash()).await;
    let (_, [older, newer]) = secrets_law();
    // 保守国家秘密法, as S3 keeps non-ASCII metadata (RFC 2047).
    let claim = [
        ("work", "=?UTF-8?B?5L+d5a6I5Zu95a6256eY5a+G5rOV?="),
        ("version", "v-renditions"),
    ];
    let put = |key: &'static str, body: Vec<u8>| {
        let p = &p;
        async move {
            p.aws.put_with_metadata(key, &body, &claim).await;
            p.deliver(key).await;
            let doc = docpipe_core::ids::derived_doc_id(&p.aws.bucket, key);
            p.drive(&doc).await;
            doc
        }
    };
    let read = |v: &Version| std::fs::read(corpus_dir().join("versions").join(&v.file)).unwrap();
    let first = put("uploads/renditions/a.md", read(&older)).await;
    let v = recorded(&p, &first).await;
    let promulgated = v["promulgated"]
        .as_str()
        .expect("the text dates it")
        .to_string();

    // A rendition whose text gives no date at all: the version keeps its dates.
    let undated = "# 中华人民共和国保守国家秘密法\n\n第一条 为了保守国家秘密，制定本法。\n\n第二条 国家秘密受法律保护。\n";
    let second = put("uploads/renditions/b.md", undated.as_bytes().to_vec()).await;
    assert_eq!(version_of(&p, &second).await.1, "v-renditions");
    let v = recorded(&p, &second).await;
    assert_eq!(
        v["promulgated"].as_str(),
        Some(promulgated.as_str()),
        "a known date was blanked: {v}"
    );

    // A rendition whose text gives another date: taken, and the disagreement recorded.
    let third = put("uploads/renditions/c.md", read(&newer)).await;
    let v = recorded(&p, &third).await;
    let now = v["promulgated"].as_str().unwrap().to_string();
    assert_ne!(now, promulgated);
    let decisions = v["decisions"].to_string();
    assert!(
        decisions.contains(&format!("where the version had {promulgated}")),
        "the disagreement is not on record: {decisions}"
    );
}

/// What Milvus lets through before ranking (the projection on each document's vectors) and what
/// PostgreSQL answers (the authority's standing) agree, document by document and day by day,
/// after each act that changes a law's timeline: a release, a newer version held then released
/// (a supersede), a repeal, a repeal undone and a delete. Each act goes through the API, which
/// carries the change to the vectors before it answers; nothing here runs the sweeper.
#[tokio::test]
async fn the_milvus_projection_and_the_postgres_answer_agree_after_each_act_on_a_law() {
    use docpipe_db::authority::{self, Standing};
    use docpipe_db::projection::{day_number, VersionWindow};
    use docpipe_vector::{MilvusOptions, ReadConsistency, SearchFilters, VectorIndex};
    let mut p = Pipeline::new(Pipeline::hash()).await;
    p.index.config.release = docpipe_core::config::ReleaseMode::Manual;
    let base = helpers::serve_api(&p).await;
    let http = reqwest::Client::new();
    // Reads of what was just written: this test's own client, with Strong consistency.
    let milvus = docpipe_vector::MilvusIndex::connect_with(
        &helpers::milvus_url(),
        None,
        p.milvus.collection(),
        MilvusOptions {
            search_consistency: ReadConsistency::Strong,
            ..MilvusOptions::default()
        },
    )
    .await
    .unwrap();
    let as_reviewer = |path: String, body: serde_json::Value| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let r = http
                .post(format!("{base}{path}"))
                .header("x-docpipe-role", "reviewer")
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let body: serde_json::Value = r.json().await.unwrap_or_default();
            assert_eq!(status, 200, "{path}: {body}");
        }
    };

    let (_, [older, newer]) = secrets_law();
    let old_doc = ingest(&p, &older, b"").await;
    let (work, _, old_from) = version_of(&p, &old_doc).await;
    let query = p
        .index
        .embedder
        .embed_query(&first_article(&p, &old_doc).await)
        .await
        .unwrap();
    let mut docs = vec![old_doc.clone()];
    let mut days: Vec<String> = vec![day_before(&old_from), old_from.clone()];
    let today = chrono::Utc::now().date_naive().to_string();
    days.push(today.clone());

    // The days asked about, and on each the documents either side lets through.
    let agree = |step: &'static str, docs: Vec<String>, days: Vec<String>| {
        let (p, milvus, query, today) = (&p, &milvus, &query, &today);
        async move {
            let standing = authority::standing(&**p.db.client().await, &docs, today, &[])
                .await
                .unwrap();
            let mut windows = vec![("any day".to_string(), VersionWindow::Answering, None)];
            for day in &days {
                let window = VersionWindow::InForceOn(day_number(day).unwrap());
                windows.push((day.clone(), window, Some(day.clone())));
            }
            let mut answered = Vec::new();
            for (label, window, day) in windows {
                let on_day = match &day {
                    Some(day) => authority::standing(&**p.db.client().await, &docs, day, &[])
                        .await
                        .unwrap(),
                    None => standing.clone(),
                };
                for doc in &docs {
                    // In force on the day: live. On any day: live or in force on another.
                    let postgres = matches!(
                        (on_day.get(doc), day.is_some()),
                        (Some(Standing::Live), _) | (Some(Standing::NotInForce), false)
                    );
                    let filters = SearchFilters {
                        doc_ids: vec![doc.clone()],
                        versions: window,
                        ..Default::default()
                    };
                    let hits = milvus.search(query, 16, &filters).await.unwrap();
                    let milvus_lets_through = !hits.is_empty();
                    assert_eq!(
                        milvus_lets_through,
                        postgres,
                        "after {step}, {doc} on {label}: Milvus lets it through: \
                         {milvus_lets_through}, PostgreSQL answers: {postgres} ({:?})",
                        on_day.get(doc)
                    );
                    answered.push(postgres);
                }
            }
            answered
        }
    };

    // Held: neither side answers on any day.
    let answered = agree("an upload held for its release", docs.clone(), days.clone()).await;
    assert!(answered.iter().all(|a| !a), "a held version answered");

    as_reviewer(
        format!("/works/{work}/versions/{old_doc}/release"),
        serde_json::json!({}),
    )
    .await;
    let answered = agree("a release", docs.clone(), days.clone()).await;
    assert!(answered.iter().any(|a| *a), "released, it answers");

    let new_doc = ingest(&p, &newer, b"").await;
    let (_, _, new_from) = version_of(&p, &new_doc).await;
    docs.push(new_doc.clone());
    days.extend([day_before(&new_from), new_from.clone()]);
    agree("a newer version, held", docs.clone(), days.clone()).await;

    as_reviewer(
        format!("/works/{work}/versions/{new_doc}/release"),
        serde_json::json!({}),
    )
    .await;
    agree("a supersede", docs.clone(), days.clone()).await;
    // The supersede moved the older version's end: it answers before the newer one, not after.
    let ended = authority::standing(&**p.db.client().await, &docs, &new_from, &[])
        .await
        .unwrap();
    assert_eq!(ended[&old_doc], Standing::NotInForce);
    assert_eq!(ended[&new_doc], Standing::Live);

    let repeal_on = format!("{}-01-01", new_from[..4].parse::<i32>().unwrap() + 1);
    days.extend([day_before(&repeal_on), repeal_on.clone()]);
    as_reviewer(
        format!("/works/{work}/repeal"),
        serde_json::json!({ "repealed_on": repeal_on }),
    )
    .await;
    agree("a repeal", docs.clone(), days.clone()).await;
    as_reviewer(
        format!("/works/{work}/repeal"),
        serde_json::json!({ "repealed_on": null }),
    )
    .await;
    agree("a repeal undone", docs.clone(), days.clone()).await;

    // The current version deleted: the older one is in force again from the newer one's day.
    let r = http
        .delete(format!("{base}/documents/{new_doc}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    agree("a delete", docs.clone(), days.clone()).await;
    let back = authority::standing(&**p.db.client().await, &docs, &new_from, &[])
        .await
        .unwrap();
    assert_eq!(back.get(&old_doc), Some(&Standing::Live));
    assert_eq!(back.get(&new_doc), None);

    // A row gone astray, its clean-up lost and the vectors written to match it: the sweeper's
    // audit recomputes the row and carries it in the same pass.
    let wrong = docpipe_vector::Projection {
        answering: false,
        in_force_from: 0,
        in_force_to: 1,
    };
    {
        let db = p.db.client().await;
        db.execute_typed(
            "UPDATE search_projection SET answering = false, in_force_from = 0, in_force_to = 1
             WHERE doc_id = $1",
            &[(&old_doc, Type::VARCHAR)],
        )
        .await
        .unwrap();
        db.execute_typed("DELETE FROM cleanups WHERE kind = 'projection'", &[])
            .await
            .unwrap();
    }
    let run = p.doc(&old_doc).await.unwrap().current_run_id.unwrap();
    assert!(
        p.milvus
            .set_projection(&old_doc, run, wrong, docpipe_vector::ReadBack::Wait)
            .await
            .unwrap()
            > 0
    );
    let filters = SearchFilters {
        doc_ids: vec![old_doc.clone()],
        versions: VersionWindow::Answering,
        ..Default::default()
    };
    assert!(
        milvus
            .search(&query, 16, &filters)
            .await
            .unwrap()
            .is_empty(),
        "astray, the vectors answer nothing"
    );
    let report = housekeeping(&p).await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.projection_changed, 1, "{report:?}");
    agree("the sweeper's audit", docs.clone(), days.clone()).await;

    // The vectors alone gone astray (a write lost in Milvus, PostgreSQL right, nothing recorded):
    // the sweeper compares them with PostgreSQL and carries the row again in the same pass.
    assert!(
        p.milvus
            .set_projection(&old_doc, run, wrong, docpipe_vector::ReadBack::Wait)
            .await
            .unwrap()
            > 0
    );
    assert!(
        milvus
            .search(&query, 16, &filters)
            .await
            .unwrap()
            .is_empty(),
        "astray, the vectors answer nothing"
    );
    let report = housekeeping(&p).await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.projection_changed, 0, "{report:?}");
    assert_eq!(report.projection_drifted, 1, "{report:?}");
    agree(
        "the sweeper's check of the vectors",
        docs.clone(),
        days.clone(),
    )
    .await;
    p.cleanup().await;
}

/// An index commit carries the version state of its own work only: another work's change that is
/// due stays for its own carrier (or the sweeper), so that index workers never carry each other's
/// on the ingest path; a commit of the same work carries it.
#[tokio::test]
async fn an_index_commit_carries_the_version_state_of_its_own_work_only() {
    use docpipe_db::cleanups::{self, Kind};
    let p = Pipeline::new(Pipeline::hash()).await;
    let mut laws = two_version_laws().into_iter();
    let (_, [first_older, first_newer]) = laws.next().expect("a law in two versions");
    let (_, [other_law, _]) = laws.next().expect("a second law in two versions");
    let first = ingest(&p, &first_older, b"").await;
    let waiting = |doc: String| {
        let p = &p;
        async move {
            p.db.client()
                .await
                .query_one(
                    "SELECT count(*) FROM cleanups WHERE kind = 'projection' AND doc_id = $1",
                    &[&doc],
                )
                .await
                .unwrap()
                .get::<_, i64>(0)
        }
    };
    // A change of the first law's state, due now, that nobody has carried yet.
    cleanups::record(
        &**p.db.client().await,
        Kind::Projection,
        &first,
        None,
        "its version state changed",
    )
    .await
    .unwrap();
    assert_eq!(waiting(first.clone()).await, 1);

    let other = ingest(&p, &other_law, b"").await;
    assert_eq!(waiting(other).await, 0, "a commit carries its own document");
    assert_eq!(
        waiting(first.clone()).await,
        1,
        "another work's commit left the first law's change to its own carrier"
    );

    let newer = ingest(&p, &first_newer, b"").await;
    assert_eq!(waiting(newer).await, 0);
    assert_eq!(
        waiting(first).await,
        0,
        "a commit of the same work carries the version it supersedes"
    );
}

/// The index stage writes its commit's version state onto the vectors it just inserted from
/// memory: a read of what was just written waits for Milvus to catch up (200 to 400 ms a
/// document), which made that read the index stage's longest step. A version that supersedes
/// another still reads the older one's vectors back, which it never held.
#[tokio::test]
async fn an_index_delivery_writes_the_version_state_onto_its_own_vectors_without_reading_them() {
    use docpipe_db::authority::{self, Standing};
    use docpipe_db::projection::{day_number, VersionWindow};
    use docpipe_pipeline::stages::index::{index_job, IndexOutcome};
    use docpipe_vector::{MilvusOptions, ReadConsistency, SearchFilters, VectorIndex};
    use std::sync::atomic::Ordering;
    let p = Pipeline::new(Pipeline::hash()).await;
    let hooked = helpers::HookedVectorIndex::new(p.milvus.clone());
    let mut deps = p.index.deps();
    deps.vectors = &hooked;
    let (_, [older, newer]) = secrets_law();
    let index = |v: &Version| {
        let (p, deps) = (&p, &deps);
        let file = v.file.clone();
        async move {
            let body = std::fs::read(corpus_dir().join("versions").join(&file)).unwrap();
            let job = p.parsed(&format!("uploads/versions/{file}"), &body).await;
            let outcome = index_job(deps, &job).await.unwrap();
            assert!(
                matches!(outcome, IndexOutcome::Indexed { .. }),
                "{outcome:?}"
            );
            job.doc_id
        }
    };
    let old_doc = index(&older).await;
    assert_eq!(
        hooked.projections_read.load(Ordering::SeqCst),
        0,
        "the first version's vectors were written from memory"
    );
    let new_doc = index(&newer).await;
    assert_eq!(
        hooked.projections_read.load(Ordering::SeqCst),
        1,
        "only the superseded version's vectors were read back"
    );
    assert_eq!(
        hooked.projections_waited.load(Ordering::SeqCst),
        0,
        "the index delivery waited for Milvus to catch up with its writes"
    );
    // A read that could not tell at once that it found the whole run left the write to the
    // sweeper, which may wait: one pass carries it.
    let report = housekeeping(&p).await;
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    // What Milvus holds says what PostgreSQL does, on the day each took effect.
    let milvus = docpipe_vector::MilvusIndex::connect_with(
        &helpers::milvus_url(),
        None,
        p.milvus.collection(),
        MilvusOptions {
            search_consistency: ReadConsistency::Strong,
            ..MilvusOptions::default()
        },
    )
    .await
    .unwrap();
    let query = p
        .index
        .embedder
        .embed_query(&first_article(&p, &old_doc).await)
        .await
        .unwrap();
    let (_, _, old_from) = version_of(&p, &old_doc).await;
    let (_, _, new_from) = version_of(&p, &new_doc).await;
    let docs = vec![old_doc.clone(), new_doc.clone()];
    for day in [old_from, new_from] {
        let standing = authority::standing(&**p.db.client().await, &docs, &day, &[])
            .await
            .unwrap();
        for doc in &docs {
            let filters = SearchFilters {
                doc_ids: vec![doc.clone()],
                versions: VersionWindow::InForceOn(day_number(&day).unwrap()),
                ..Default::default()
            };
            let hits = milvus.search(&query, 4, &filters).await.unwrap();
            assert_eq!(
                !hits.is_empty(),
                standing.get(doc) == Some(&Standing::Live),
                "{doc} on {day}: Milvus and PostgreSQL disagree"
            );
        }
    }
    p.cleanup().await;
}

/// An in-force keyword search checks the version window on its scored candidates, best first,
/// and stops once `limit` pass: it looks up no block for each posting it reads. Before, it looked
/// up every posting's block and projection row until `POSTINGS_PER_TERM` passed, so with one
/// version in four in force it read four postings for each kept one, two lookups each (440 ms
/// at p50 at 2,000 laws against 41 ms at 150). The answer is the one the per-posting filter gives.
#[tokio::test]
async fn an_in_force_keyword_search_checks_its_scored_candidates_not_each_posting() {
    use docpipe_core::analyzer::Analyzer;
    use docpipe_db::keyword::{self, SearchStatement, WINDOW_OVERFETCH};
    use docpipe_db::projection::{day_number, VersionWindow};
    use docpipe_search::{MAX_QUERY_TERMS, POSTINGS_PER_TERM};
    let p = Pipeline::new(Pipeline::hash()).await;
    let (_, [older, newer]) = secrets_law();
    let old_doc = ingest(&p, &older, b"").await;
    let new_doc = ingest(&p, &newer, b"").await;
    let client = p.db.db.client().await.unwrap();
    // The two versions share most articles, so every candidate scores as its copy in the
    // other version does, and the statement must pass over the superseded one's.
    let terms = Analyzer::shared().query_terms(&first_article(&p, &new_doc).await);
    let ids: Vec<i64> = terms.iter().map(|(t, _)| *t).collect();
    let postings: i64 = client
        .query_typed_one(
            "SELECT count(*) FROM keyword_postings WHERE term = ANY($1)",
            &[(&ids, Type::INT8_ARRAY)],
        )
        .await
        .unwrap()
        .get(0);
    let limit = 5;
    assert!(
        postings > 8 * limit,
        "{postings} postings of the query's terms"
    );
    let n = keyword::block_count(&**client, &[]).await.unwrap();
    let today = chrono::Utc::now().date_naive().to_string();
    let in_force = VersionWindow::InForceOn(day_number(&today).unwrap());
    let statement = SearchStatement::new(
        &terms,
        n,
        POSTINGS_PER_TERM,
        MAX_QUERY_TERMS,
        limit,
        &Filters::default(),
        in_force,
    );
    let plan = &crate::search::plan_of(&**client, &statement.sql, &statement.params()).await;
    for relation in ["keyword_blocks", "search_projection"] {
        let read = crate::search::rows_read(plan, relation);
        assert!(
            read <= (4 * limit) as f64,
            "{relation}: {read} rows read for {limit} results ({postings} postings; the bound \
             is {} candidates)",
            limit * WINDOW_OVERFETCH
        );
    }
    let search = |filters: Filters| {
        let (client, terms) = (&client, &terms);
        async move {
            keyword::search(
                &***client,
                terms,
                n,
                POSTINGS_PER_TERM,
                MAX_QUERY_TERMS,
                limit,
                &filters,
                in_force,
            )
            .await
            .unwrap()
        }
    };
    let hits = search(Filters::default()).await;
    // The same statement filtered by document checks each posting: the answer to match.
    let per_posting = search(Filters {
        doc_ids: vec![old_doc.clone(), new_doc.clone()],
        ..Filters::default()
    })
    .await;
    assert_eq!(hits.len(), limit as usize);
    // The same blocks in the same order; the sums may differ in their last bits (another order).
    let ids = |h: &[keyword::ScoredBlock]| h.iter().map(|b| b.block_id).collect::<Vec<i64>>();
    assert_eq!(ids(&hits), ids(&per_posting));
    for (a, b) in hits.iter().zip(&per_posting) {
        assert!(
            (a.score - b.score).abs() < 1e-9 * a.score.abs(),
            "{a:?} {b:?}"
        );
    }
    let owners: Vec<String> = client
        .query_typed(
            "SELECT DISTINCT doc_id FROM keyword_blocks WHERE block_id = ANY($1)",
            &[(
                &hits.iter().map(|h| h.block_id).collect::<Vec<i64>>(),
                Type::INT8_ARRAY,
            )],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        owners,
        vec![new_doc.clone()],
        "only the version in force answers"
    );
}

/// A page of works reads the page's works and their versions, not the library's. Before, the
/// planner found every answering version of the library (a hash over every document and version
/// link) for each page, then kept the page's: 4.5 ms a page at 150 laws, 35 ms at 2,000.
#[tokio::test]
async fn a_page_of_works_reads_its_own_works_not_the_library() {
    use docpipe_db::works;
    let p = Pipeline::new(Pipeline::hash()).await;
    let client = p.db.client().await;
    // A library of 3,000 works in two versions, one indexed document each, released: the rows
    // the pipeline leaves, written directly (ingesting 6,000 documents would take an hour).
    client
        .batch_execute(
            "INSERT INTO documents (doc_id, doc_name, status, content_sha256)
             SELECT 'doc_lib_' || g, 'law ' || g || '.md', 'indexed', 'sha' || g
             FROM generate_series(1, 6000) g;
             INSERT INTO works (title, title_key)
             SELECT '第' || g || '号法', 'law' || g FROM generate_series(1, 3000) g;
             INSERT INTO work_versions (work_id, label, label_source, effective_from)
             SELECT w.work_id, v::text, 'upload', date '2000-01-01' + v * 365
             FROM works w CROSS JOIN generate_series(1, 2) v;
             INSERT INTO version_documents (doc_id, version_id, run_id, released_sha256)
             SELECT 'doc_lib_' || n, version_id, 1, 'sha' || n
             FROM (SELECT version_id, row_number() OVER (ORDER BY version_id) AS n
                   FROM work_versions) v;
             ANALYZE;",
        )
        .await
        .unwrap();
    let today = chrono::Utc::now().date_naive().to_string();
    let (level, name): (Option<&str>, Option<&str>) = (None, None);
    let (after, page) = (1_000i64, 50i64);
    let everyone: Vec<String> = Vec::new();
    let params: [(&(dyn tokio_postgres::types::ToSql + Sync), Type); 6] = [
        (&today, Type::TEXT),
        (&after, Type::INT8),
        (&level, Type::VARCHAR),
        (&name, Type::VARCHAR),
        (&page, Type::INT8),
        (&everyone, Type::VARCHAR_ARRAY),
    ];
    let plan = &crate::search::plan_of(&**client, &works::list_sql(), &params).await;
    // The page's 50 works have 100 versions; each is looked up a few times over.
    for relation in ["documents", "version_documents", "work_versions"] {
        let read = crate::search::rows_read(plan, relation);
        assert!(
            read <= (8 * page) as f64,
            "{relation}: {read} rows read for a page of {page} works (the library has 3,000)"
        );
    }
    let listed = works::list(&**client, &today, level, name, after, page, &[])
        .await
        .unwrap();
    assert_eq!(listed.len(), page as usize);
    assert!(listed.windows(2).all(|w| w[0].work_id < w[1].work_id));
    assert!(listed.iter().all(|w| w.work_id > after
        && w.versions == 2
        && w.current_version.as_deref() == Some("2")));
}
