//! What happens when the queues give up on a message (it reached the DLQ after the maximum receive
//! count): its run, if still running, fails with "gave up after N attempts: <last error>". The
//! stage is the one the document was waiting on: `pending` → store, `stored` → parse, `parsed` →
//! index. Idempotent: a run that already ended is left alone.

use docpipe_core::model::{DocStatus, RunStatus, Stage};
use docpipe_db::{documents, run_events, runs, transitions, Db, DbError};
use docpipe_vector::VectorIndex;
use tokio_postgres::GenericClient;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GiveUpOutcome {
    Failed {
        doc_id: String,
        run_id: i64,
        stage: Stage,
    },
    AlreadyEnded {
        doc_id: String,
        run_id: i64,
    },
    NoSuchDocument {
        doc_id: String,
    },
}

pub(crate) fn waiting_stage(status: DocStatus) -> Stage {
    match status {
        DocStatus::Pending => Stage::Store,
        DocStatus::Stored => Stage::Parse,
        _ => Stage::Index,
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GiveUpError {
    #[error("the database is unavailable")]
    Db(#[from] DbError),
    #[error("the vectors of the run cannot be removed yet")]
    Vectors(#[from] docpipe_vector::VectorError),
}

/// Records the give-up; `last_error` is the error the dead letter itself carries (an asynchronous
/// invocation's record does), used when the run recorded none. A give-up that names no run (an upload notification) finds the document's
/// current run only while that run is still waiting for its store: it must never fail a newer,
/// healthy run that has moved on. What the run wrote to Milvus goes first, so a failed run leaves
/// nothing searchable; if Milvus is down the give-up is returned to its queue and tried again.
pub async fn give_up(
    db: &Db,
    vectors: &dyn VectorIndex,
    doc_id: &str,
    run_id: Option<i64>,
    deliveries: u32,
    last_error: Option<&str>,
) -> Result<GiveUpOutcome, GiveUpError> {
    let client = db.client().await?;
    let Some(doc) = documents::get(&**client, doc_id).await? else {
        return Ok(GiveUpOutcome::NoSuchDocument {
            doc_id: doc_id.to_string(),
        });
    };
    let run_id = match run_id {
        Some(run_id) => run_id,
        None if doc.status == DocStatus::Pending => match doc.current_run_id {
            Some(run_id) => run_id,
            None => {
                return Ok(GiveUpOutcome::NoSuchDocument {
                    doc_id: doc_id.to_string(),
                })
            }
        },
        None => {
            return Ok(GiveUpOutcome::AlreadyEnded {
                doc_id: doc_id.to_string(),
                run_id: doc.current_run_id.unwrap_or_default(),
            })
        }
    };
    let running = runs::get(&**client, run_id)
        .await?
        .is_some_and(|r| r.run_status == RunStatus::Running);
    drop(client);
    if running {
        vectors.delete_run(doc_id, run_id).await?;
    }
    let client = db.client().await?;
    Ok(give_up_run(&**client, &doc, run_id, deliveries, last_error).await?)
}

async fn give_up_run(
    c: &impl GenericClient,
    doc: &documents::Document,
    run_id: i64,
    deliveries: u32,
    last_error: Option<&str>,
) -> Result<GiveUpOutcome, DbError> {
    let doc_id = doc.doc_id.as_str();
    let run = runs::get(c, run_id).await?;
    let Some(run) = run.filter(|r| r.run_status == RunStatus::Running) else {
        return Ok(GiveUpOutcome::AlreadyEnded {
            doc_id: doc_id.to_string(),
            run_id,
        });
    };
    let stage = waiting_stage(doc.status);
    let (attempts, message) = give_up_message(&run, stage, deliveries, last_error);
    run_events::record(
        c,
        run_id,
        stage.as_str(),
        run_events::Kind::GaveUp,
        attempts as i32,
        &format!("the queue dead-lettered the job after {deliveries} deliveries"),
    )
    .await?;
    if transitions::fail_run(c, doc_id, run_id, stage, &message).await? {
        tracing::error!(
            doc_id,
            run_id,
            stage = stage.as_str(),
            attempts,
            "gave up on the run"
        );
        Ok(GiveUpOutcome::Failed {
            doc_id: doc_id.to_string(),
            run_id,
            stage,
        })
    } else {
        Ok(GiveUpOutcome::AlreadyEnded {
            doc_id: doc_id.to_string(),
            run_id,
        })
    }
}

/// The attempts the run made at `stage` and the error it fails with: the run's own last error when
/// it recorded one, else the queue's.
fn give_up_message(
    run: &runs::Run,
    stage: Stage,
    deliveries: u32,
    last_error: Option<&str>,
) -> (u32, String) {
    let last = run
        .metadata
        .get("last_error")
        .and_then(|e| e.get("message"))
        .and_then(|m| m.as_str())
        .or(last_error)
        .unwrap_or("no error was recorded (the function may have timed out or crashed)");
    // The run counts its own attempts across deliveries and re-drives; a delivery that failed
    // before it could take the lease is counted only by the queue.
    let counted = match stage {
        Stage::Parse => run.parse_attempts,
        Stage::Index => run.index_attempts,
        _ => 0,
    };
    let attempts = if counted > 0 {
        counted as u32
    } else {
        deliveries
    };
    let message = format!("gave up after {attempts} attempts: {last}");
    (attempts, message)
}
