//! Vector generations: which Milvus collection search reads (with which embedder), and the one a
//! rebuild fills beside it from the stored chunks. One compare-and-set of `state` switches search;
//! the index commit reads the active generation under a share lock, so a run whose vectors went
//! to a collection that is no longer active cannot commit, and a run committed while a generation
//! is built is put on that generation's backlog in the same transaction.
//!
//! A deployment with no row reads the collection and embedder it is configured with; a rebuild's
//! start writes that pair down as the active generation.

use super::{DbError, Type};
use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio_postgres::{GenericClient, Row};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Its collection is being filled; documents indexed meanwhile reach it too.
    Building,
    /// Filled and checked, waiting for an operator's switch.
    Ready,
    /// Search reads it.
    Active,
    /// Replaced; still written to (deletes, version states) until it is dropped.
    Retired,
    Cancelled,
    Dropped,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            State::Building => "building",
            State::Ready => "ready",
            State::Active => "active",
            State::Retired => "retired",
            State::Cancelled => "cancelled",
            State::Dropped => "dropped",
        }
    }

    fn parse(s: &str) -> State {
        match s {
            "building" => State::Building,
            "ready" => State::Ready,
            "active" => State::Active,
            "retired" => State::Retired,
            "cancelled" => State::Cancelled,
            _ => State::Dropped,
        }
    }

    /// Its collection still receives what changes the library (deletes, version states).
    pub fn written(self) -> bool {
        matches!(
            self,
            State::Building | State::Ready | State::Active | State::Retired
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Generation {
    pub generation_id: i64,
    pub collection: String,
    /// The embedder's variables over the environment, as `{"DOCPIPE_EMBEDDER": "e5-small", …}`.
    pub embedder: Value,
    pub model_id: String,
    pub dimension: i32,
    pub state: State,
    pub auto_switch: bool,
    pub keep: bool,
    pub grace_secs: f64,
    pub cursor: String,
    pub walked: bool,
    pub step: i64,
    pub docs_total: i32,
    pub chunks_total: i64,
    pub docs_done: i32,
    pub chunks_done: i64,
    pub last_error: String,
    pub check_report: Option<Value>,
    pub requested_by: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub ready_at: Option<DateTime<Utc>>,
    pub switched_at: Option<DateTime<Utc>>,
    pub retired_at: Option<DateTime<Utc>>,
    pub drop_after: Option<DateTime<Utc>>,
    pub backlog: i64,
    /// A document copied in part: the rest goes first in the next step.
    pub partial: Option<Partial>,
}

/// A document a step copied in part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partial {
    pub doc_id: String,
    pub run_id: i64,
    /// The first chunk not copied yet.
    pub from: i32,
    /// It came from the walk (the cursor moves past it once whole), not the backlog.
    pub walk: bool,
}

const COLUMNS: &str = "g.generation_id, g.collection, g.embedder, g.model_id, g.dimension, g.state,
    g.auto_switch, g.keep, g.grace_secs, g.cursor, g.walked, g.step, g.docs_total, g.chunks_total, g.docs_done,
    g.chunks_done, g.last_error, g.check_report, g.requested_by, g.created_at, g.updated_at,
    g.ready_at, g.switched_at, g.retired_at, g.drop_after,
    g.partial_doc, g.partial_run, g.partial_from, g.partial_walk,
    (SELECT count(*) FROM vector_generation_backlog b
      WHERE b.generation_id = g.generation_id) AS backlog";

fn from_row(row: &Row) -> Generation {
    Generation {
        generation_id: row.get("generation_id"),
        collection: row.get("collection"),
        embedder: row.get("embedder"),
        model_id: row.get("model_id"),
        dimension: row.get("dimension"),
        state: State::parse(row.get("state")),
        auto_switch: row.get("auto_switch"),
        keep: row.get("keep"),
        grace_secs: row.get("grace_secs"),
        cursor: row.get("cursor"),
        walked: row.get("walked"),
        step: row.get("step"),
        docs_total: row.get("docs_total"),
        chunks_total: row.get("chunks_total"),
        docs_done: row.get("docs_done"),
        chunks_done: row.get("chunks_done"),
        last_error: row.get("last_error"),
        check_report: row.get("check_report"),
        requested_by: row.get("requested_by"),
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
        ready_at: row.get("ready_at"),
        switched_at: row.get("switched_at"),
        retired_at: row.get("retired_at"),
        drop_after: row.get("drop_after"),
        backlog: row.get("backlog"),
        partial: Some(row.get::<_, String>("partial_doc"))
            .filter(|d| !d.is_empty())
            .map(|doc_id| Partial {
                doc_id,
                run_id: row.get("partial_run"),
                from: row.get("partial_from"),
                walk: row.get("partial_walk"),
            }),
    }
}

/// Every generation whose collection is still written to, the active one first.
pub async fn written(c: &impl GenericClient) -> Result<Vec<Generation>, DbError> {
    let rows = c
        .query_typed(
            &format!(
                "SELECT {COLUMNS} FROM vector_generations g
                  WHERE g.state IN ('active', 'building', 'ready', 'retired')
                  ORDER BY (g.state = 'active') DESC, g.generation_id DESC"
            ),
            &[],
        )
        .await?;
    Ok(rows.iter().map(from_row).collect())
}

pub async fn get(c: &impl GenericClient, id: i64) -> Result<Option<Generation>, DbError> {
    let row = c
        .query_typed_opt(
            &format!("SELECT {COLUMNS} FROM vector_generations g WHERE g.generation_id = $1"),
            &[(&id, Type::INT8)],
        )
        .await?;
    Ok(row.as_ref().map(from_row))
}

/// The newest generations, newest first (what `GET /index` shows).
pub async fn recent(c: &impl GenericClient, limit: i64) -> Result<Vec<Generation>, DbError> {
    let rows = c
        .query_typed(
            &format!(
                "SELECT {COLUMNS} FROM vector_generations g
                  ORDER BY g.generation_id DESC LIMIT $1"
            ),
            &[(&limit, Type::INT8)],
        )
        .await?;
    Ok(rows.iter().map(from_row).collect())
}

/// A collection and the embedder that fills it.
#[derive(Debug, Clone)]
pub struct Target {
    pub collection: String,
    pub embedder: Value,
    pub model_id: String,
    pub dimension: i32,
}

/// How a rebuild ends.
#[derive(Debug, Clone, Copy)]
pub struct StartOptions {
    /// Switch as soon as the check passes (else wait, ready, for an operator).
    pub auto_switch: bool,
    /// Keep the replaced collection after the grace period.
    pub keep_old: bool,
    /// How long the replaced collection stays, still written to, after the switch.
    pub grace_secs: f64,
}

#[derive(Debug)]
pub enum Started {
    Started(Generation),
    /// Another rebuild is under way (or ready and waiting for its switch).
    Busy(Generation),
    /// The new target is what search already reads.
    Unchanged(Generation),
}

/// Starts a rebuild into `next`, writing `current` down as the active generation if no row says
/// which one is. One at a time: the table is locked against a second start for the transaction.
pub async fn start(
    tx: &impl GenericClient,
    current: &Target,
    next: &Target,
    options: &StartOptions,
    requested_by: &str,
) -> Result<Started, DbError> {
    let StartOptions {
        auto_switch,
        keep_old,
        grace_secs,
    } = *options;
    tx.batch_execute("LOCK TABLE vector_generations IN EXCLUSIVE MODE")
        .await?;
    let all = written(tx).await?;
    if let Some(busy) = all
        .iter()
        .find(|g| matches!(g.state, State::Building | State::Ready))
    {
        return Ok(Started::Busy(busy.clone()));
    }
    let active = match all.iter().find(|g| g.state == State::Active) {
        Some(a) => a.clone(),
        None => insert(tx, current, State::Active, true, keep_old, requested_by).await?,
    };
    if active.collection == next.collection || active.embedder == next.embedder {
        return Ok(Started::Unchanged(active));
    }
    if keep_old {
        tx.execute_typed(
            "UPDATE vector_generations SET keep = TRUE WHERE generation_id = $1",
            &[(&active.generation_id, Type::INT8)],
        )
        .await?;
    }
    let building = insert(tx, next, State::Building, auto_switch, false, requested_by).await?;
    tx.execute_typed(
        "UPDATE vector_generations SET grace_secs = $2 WHERE generation_id = $1",
        &[
            (&building.generation_id, Type::INT8),
            (&grace_secs.max(0.0), Type::FLOAT8),
        ],
    )
    .await?;
    tx.execute_typed(
        "UPDATE vector_generations
            SET (docs_total, chunks_total) = (SELECT count(*)::int4, COALESCE(sum(chunk_count), 0)::int8
                                               FROM documents
                                              WHERE status = 'indexed' AND deleting_at IS NULL)
          WHERE generation_id = $1",
        &[(&building.generation_id, Type::INT8)],
    )
    .await?;
    Ok(Started::Started(
        get(tx, building.generation_id)
            .await?
            .expect("inserted above"),
    ))
}

async fn insert(
    c: &impl GenericClient,
    target: &Target,
    state: State,
    auto_switch: bool,
    keep: bool,
    requested_by: &str,
) -> Result<Generation, DbError> {
    let row = c
        .query_typed_one(
            "INSERT INTO vector_generations
                    (collection, embedder, model_id, dimension, state, auto_switch, keep,
                     requested_by, switched_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
                     CASE WHEN $5 = 'active' THEN NOW() END)
             RETURNING generation_id",
            &[
                (&target.collection, Type::VARCHAR),
                (&target.embedder, Type::JSONB),
                (&super::fit(&target.model_id, 128), Type::VARCHAR),
                (&target.dimension, Type::INT4),
                (&state.as_str(), Type::VARCHAR),
                (&auto_switch, Type::BOOL),
                (&keep, Type::BOOL),
                (&super::fit(requested_by, 256), Type::VARCHAR),
            ],
        )
        .await?;
    Ok(get(c, row.get(0)).await?.expect("inserted above"))
}

/// A rebuild step's hold on its generation: taken only while the generation is building, the
/// message names its current step and no other worker holds it.
pub async fn take_step(
    c: &impl GenericClient,
    id: i64,
    step: i64,
    owner: &str,
    lease_secs: f64,
) -> Result<Option<Generation>, DbError> {
    let row = c
        .query_typed_opt(
            "UPDATE vector_generations
                SET lease_owner = $3, lease_until = NOW() + make_interval(secs => $4),
                    updated_at = NOW()
              WHERE generation_id = $1 AND state = 'building' AND step = $2
                AND (lease_until IS NULL OR lease_until < NOW())
              RETURNING generation_id",
            &[
                (&id, Type::INT8),
                (&step, Type::INT8),
                (&owner, Type::VARCHAR),
                (&lease_secs, Type::FLOAT8),
            ],
        )
        .await?;
    match row {
        Some(_) => get(c, id).await,
        None => Ok(None),
    }
}

/// Lets the next step take the generation at once.
pub async fn release(c: &impl GenericClient, id: i64, owner: &str) -> Result<(), DbError> {
    c.execute_typed(
        "UPDATE vector_generations SET lease_owner = NULL, lease_until = NULL
          WHERE generation_id = $1 AND lease_owner = $2",
        &[(&id, Type::INT8), (&owner, Type::VARCHAR)],
    )
    .await?;
    Ok(())
}

/// A document whose vectors a rebuild copies: its current run and how many chunks that run has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToCopy {
    pub doc_id: String,
    pub run_id: i64,
    pub chunks: i32,
}

/// The indexed documents after `cursor` in doc_id order (the primary key's), at most `limit`.
pub async fn walk(
    c: &impl GenericClient,
    cursor: &str,
    limit: i64,
) -> Result<Vec<ToCopy>, DbError> {
    let rows = c
        .query_typed(
            "SELECT doc_id, current_run_id, chunk_count FROM documents
              WHERE doc_id > $1 AND status = 'indexed' AND deleting_at IS NULL
                AND current_run_id IS NOT NULL
              ORDER BY doc_id LIMIT $2",
            &[(&cursor, Type::VARCHAR), (&limit, Type::INT8)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| ToCopy {
            doc_id: r.get(0),
            run_id: r.get(1),
            chunks: r.get(2),
        })
        .collect())
}

/// What the backlog names (documents indexed behind the walk), with what each holds now: a
/// document no longer indexed has `None`, and only its vectors go.
pub async fn backlog(
    c: &impl GenericClient,
    id: i64,
    limit: i64,
) -> Result<Vec<(String, Option<ToCopy>)>, DbError> {
    let rows = c
        .query_typed(
            "SELECT b.doc_id, d.current_run_id, d.chunk_count,
                    (d.status = 'indexed' AND d.deleting_at IS NULL) AS indexed
               FROM vector_generation_backlog b
               LEFT JOIN documents d ON d.doc_id = b.doc_id
              WHERE b.generation_id = $1
              ORDER BY b.created_at, b.doc_id LIMIT $2",
            &[(&id, Type::INT8), (&limit, Type::INT8)],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| {
            let doc_id: String = r.get(0);
            let copy = match (r.get::<_, Option<bool>>(3), r.get::<_, Option<i64>>(1)) {
                (Some(true), Some(run_id)) => Some(ToCopy {
                    doc_id: doc_id.clone(),
                    run_id,
                    chunks: r.get(2),
                }),
                _ => None,
            };
            (doc_id, copy)
        })
        .collect())
}

/// Puts documents on a generation's backlog (the check found them missing or wrong).
pub async fn add_backlog(
    c: &impl GenericClient,
    id: i64,
    doc_ids: &[String],
) -> Result<(), DbError> {
    c.execute_typed(
        "INSERT INTO vector_generation_backlog (generation_id, doc_id)
         SELECT $1, unnest($2::varchar[]) ON CONFLICT DO NOTHING",
        &[(&id, Type::INT8), (&doc_ids, Type::VARCHAR_ARRAY)],
    )
    .await?;
    Ok(())
}

/// What one step did.
#[derive(Debug, Default, Clone)]
pub struct Progress {
    /// The walk's new cursor (`None`: this step took from the backlog only).
    pub cursor: Option<String>,
    pub walked: bool,
    pub docs: i32,
    pub chunks: i64,
    /// Backlog entries this step copied (or found gone).
    pub backlog_done: Vec<String>,
    /// The document this step left in part, if any (the next step goes on with it).
    pub partial: Option<Partial>,
}

/// Records a step and moves the generation to its next one; false when the lease was lost (the
/// step's work stays, harmless: copies are idempotent, and the next step redoes what it needs).
pub async fn advance(
    tx: &impl GenericClient,
    id: i64,
    owner: &str,
    progress: &Progress,
) -> Result<bool, DbError> {
    let moved = tx
        .execute_typed(
            "UPDATE vector_generations
                SET cursor = COALESCE($3, cursor), walked = walked OR $4,
                    docs_done = docs_done + $5, chunks_done = chunks_done + $6,
                    step = step + 1, last_error = '', updated_at = NOW(),
                    partial_doc = $7, partial_run = $8, partial_from = $9, partial_walk = $10
              WHERE generation_id = $1 AND lease_owner = $2 AND state = 'building'",
            &[
                (&id, Type::INT8),
                (&owner, Type::VARCHAR),
                (&progress.cursor, Type::VARCHAR),
                (&progress.walked, Type::BOOL),
                (&progress.docs, Type::INT4),
                (&progress.chunks, Type::INT8),
                (
                    &progress.partial.as_ref().map_or("", |p| p.doc_id.as_str()),
                    Type::VARCHAR,
                ),
                (
                    &progress.partial.as_ref().map_or(0, |p| p.run_id),
                    Type::INT8,
                ),
                (&progress.partial.as_ref().map_or(0, |p| p.from), Type::INT4),
                (
                    &progress.partial.as_ref().is_some_and(|p| p.walk),
                    Type::BOOL,
                ),
            ],
        )
        .await?
        == 1;
    if moved && !progress.backlog_done.is_empty() {
        tx.execute_typed(
            "DELETE FROM vector_generation_backlog
              WHERE generation_id = $1 AND doc_id = ANY($2::varchar[])",
            &[
                (&id, Type::INT8),
                (&progress.backlog_done, Type::VARCHAR_ARRAY),
            ],
        )
        .await?;
    }
    Ok(moved)
}

/// A step failed on something that will pass (Milvus away, the embedder busy): said on the
/// generation for `GET /index`.
pub async fn record_error(
    c: &impl GenericClient,
    id: i64,
    owner: &str,
    error: &str,
) -> Result<(), DbError> {
    c.execute_typed(
        "UPDATE vector_generations SET last_error = $3, updated_at = NOW()
          WHERE generation_id = $1 AND lease_owner = $2",
        &[
            (&id, Type::INT8),
            (&owner, Type::VARCHAR),
            (&super::fit(error, 2000), Type::TEXT),
        ],
    )
    .await?;
    Ok(())
}

/// The indexed documents after `cursor` with their current run and chunk count (the check's
/// page of PostgreSQL's side).
pub async fn live_page(
    c: &impl GenericClient,
    cursor: &str,
    limit: i64,
) -> Result<Vec<ToCopy>, DbError> {
    walk(c, cursor, limit).await
}

/// The shortest a replaced collection stays after a switch, whatever the request asked: longer
/// than any function's idea of the generations may be stale, so no reader finds it gone.
pub const MIN_GRACE_SECS: f64 = 10.0;

/// How the switch went.
#[derive(Debug)]
pub enum Switched {
    Switched {
        from: Option<Box<Generation>>,
        to: Box<Generation>,
    },
    /// Not switchable now, and why (not complete, not checked, cancelled, another state).
    Refused(String),
}

/// The compare-and-set: the generation becomes active only if it is still `expected_state`, its
/// walk is done and its backlog empty, under the rows' locks, which an index commit's share lock
/// orders against; the active one retires with `grace` before it may be dropped.
pub async fn switch(
    tx: &impl GenericClient,
    id: i64,
    expected: &[State],
) -> Result<Switched, DbError> {
    let locked = tx
        .query_typed(
            "SELECT generation_id, state FROM vector_generations
              WHERE state = 'active' OR generation_id = $1 FOR UPDATE",
            &[(&id, Type::INT8)],
        )
        .await?;
    let Some(target) = locked.iter().find(|r| r.get::<_, i64>(0) == id) else {
        return Ok(Switched::Refused(format!("no generation {id}")));
    };
    let state = State::parse(target.get(1));
    if !expected.contains(&state) {
        return Ok(Switched::Refused(format!(
            "generation {id} is {}, not {}",
            state.as_str(),
            expected
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(" or ")
        )));
    }
    let g = get(tx, id).await?.expect("locked above");
    if !g.walked || g.backlog > 0 || g.partial.is_some() || g.check_report.is_none() {
        return Ok(Switched::Refused(format!(
            "generation {id} is not complete: walked {}, backlog {}, checked {}",
            g.walked,
            g.backlog,
            g.check_report.is_some()
        )));
    }
    let from = written(tx)
        .await?
        .into_iter()
        .find(|g| g.state == State::Active);
    tx.execute_typed(
        "UPDATE vector_generations
            SET state = 'retired', retired_at = NOW(),
                drop_after = NOW() + make_interval(secs => $1), updated_at = NOW()
          WHERE state = 'active'",
        &[(&g.grace_secs.max(MIN_GRACE_SECS), Type::FLOAT8)],
    )
    .await?;
    tx.execute_typed(
        "UPDATE vector_generations
            SET state = 'active', switched_at = NOW(), lease_owner = NULL, lease_until = NULL,
                updated_at = NOW()
          WHERE generation_id = $1",
        &[(&id, Type::INT8)],
    )
    .await?;
    let to = get(tx, id).await?.expect("locked above");
    Ok(Switched::Switched {
        from: from.map(Box::new),
        to: Box::new(to),
    })
}

/// The walk and backlog are done and the check passed: a generation that switches by itself is
/// switched (in the same transaction), another waits `ready`. False when the check found work
/// left (it went on the backlog) or the lease was lost.
pub async fn mark_checked(
    tx: &impl GenericClient,
    id: i64,
    owner: &str,
    report: &Value,
) -> Result<bool, DbError> {
    Ok(tx
        .execute_typed(
            "UPDATE vector_generations
                SET check_report = $3, updated_at = NOW(),
                    state = CASE WHEN auto_switch THEN state ELSE 'ready' END,
                    ready_at = NOW()
              WHERE generation_id = $1 AND lease_owner = $2 AND state = 'building'
                AND walked AND partial_doc = ''
                AND NOT EXISTS (SELECT 1 FROM vector_generation_backlog b
                                 WHERE b.generation_id = $1)",
            &[
                (&id, Type::INT8),
                (&owner, Type::VARCHAR),
                (report, Type::JSONB),
            ],
        )
        .await?
        == 1)
}

/// An operator's switch of a ready generation that has documents to copy first: it goes back to
/// building, switching by itself once they are copied. Returns its step to send.
pub async fn resume_to_switch(c: &impl GenericClient, id: i64) -> Result<Option<i64>, DbError> {
    let row = c
        .query_typed_opt(
            "UPDATE vector_generations
                SET state = 'building', auto_switch = TRUE, check_report = NULL, step = step + 1,
                    updated_at = NOW()
              WHERE generation_id = $1 AND state = 'ready'
              RETURNING step",
            &[(&id, Type::INT8)],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}

/// Cancels the rebuild under way (building or ready); the collection is dropped by the sweeper.
pub async fn cancel(c: &impl GenericClient, id: i64) -> Result<Option<Generation>, DbError> {
    let row = c
        .query_typed_opt(
            "UPDATE vector_generations
                SET state = 'cancelled', drop_after = NOW(), updated_at = NOW(),
                    lease_owner = NULL, lease_until = NULL
              WHERE generation_id = $1 AND state IN ('building', 'ready')
              RETURNING generation_id",
            &[(&id, Type::INT8)],
        )
        .await?;
    match row {
        Some(_) => get(c, id).await,
        None => Ok(None),
    }
}

/// Building generations whose chain of steps went quiet (a step message lost after its commit,
/// or never sent): no lease held and no progress for `quiet_secs`.
pub async fn stalled(c: &impl GenericClient, quiet_secs: f64) -> Result<Vec<Generation>, DbError> {
    let rows = c
        .query_typed(
            &format!(
                "SELECT {COLUMNS} FROM vector_generations g
                  WHERE g.state = 'building'
                    AND (g.lease_until IS NULL OR g.lease_until < NOW())
                    AND g.updated_at < NOW() - make_interval(secs => $1)"
            ),
            &[(&quiet_secs, Type::FLOAT8)],
        )
        .await?;
    Ok(rows.iter().map(from_row).collect())
}

/// Marks that a stalled chain was sent again (so the next sweep waits as long again).
pub async fn touched(c: &impl GenericClient, id: i64) -> Result<(), DbError> {
    c.execute_typed(
        "UPDATE vector_generations SET updated_at = NOW() WHERE generation_id = $1",
        &[(&id, Type::INT8)],
    )
    .await?;
    Ok(())
}

/// Collections whose time is up: cancelled ones, and retired ones past their grace and not kept.
pub async fn due_drops(c: &impl GenericClient) -> Result<Vec<Generation>, DbError> {
    let rows = c
        .query_typed(
            &format!(
                "SELECT {COLUMNS} FROM vector_generations g
                  WHERE (g.state = 'cancelled' OR (g.state = 'retired' AND NOT g.keep))
                    AND g.drop_after <= NOW()"
            ),
            &[],
        )
        .await?;
    Ok(rows.iter().map(from_row).collect())
}

pub async fn mark_dropped(c: &impl GenericClient, id: i64) -> Result<(), DbError> {
    c.execute_typed(
        "UPDATE vector_generations SET state = 'dropped', dropped_at = NOW(), updated_at = NOW()
          WHERE generation_id = $1 AND state IN ('cancelled', 'retired')",
        &[(&id, Type::INT8)],
    )
    .await?;
    Ok(())
}

/// In the index commit's transaction: the run's vectors went to `collection`. An error string when
/// another collection is active now (the run is written again, to that one); else every
/// generation being built gets the document on its backlog.
pub async fn committing_into(
    tx: &impl GenericClient,
    collection: &str,
    doc_id: &str,
) -> Result<Result<(), String>, DbError> {
    let rows = tx
        .query_typed(
            "SELECT generation_id, collection, state FROM vector_generations
              WHERE state IN ('active', 'building', 'ready') FOR SHARE",
            &[],
        )
        .await?;
    for row in &rows {
        let (state, name): (&str, &str) = (row.get(2), row.get(1));
        if state == "active" && name != collection {
            return Ok(Err(format!(
                "search switched to collection {name} while this run was written to {collection}"
            )));
        }
    }
    for row in rows.iter().filter(|r| r.get::<_, &str>(2) != "active") {
        tx.execute_typed(
            "INSERT INTO vector_generation_backlog (generation_id, doc_id) VALUES ($1, $2)
             ON CONFLICT DO NOTHING",
            &[
                (&row.get::<_, i64>(0), Type::INT8),
                (&doc_id, Type::VARCHAR),
            ],
        )
        .await?;
    }
    Ok(Ok(()))
}
