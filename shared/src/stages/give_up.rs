//! What happens when the queues give up on a message (it reached the DLQ after the maximum receive
//! count): its run, if still running, fails with "gave up after N attempts: <last error>". The
//! stage is the one the document was waiting on: `pending` → store, `stored` → parse, `parsed` →
//! index. Idempotent: a run that already ended is left alone.

use crate::db::{documents, runs, transitions, Db, DbError, Type};
use crate::model::{DocStatus, RunStatus, Stage};
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

pub fn waiting_stage(status: DocStatus) -> Stage {
    match status {
        DocStatus::Pending => Stage::Store,
        DocStatus::Stored => Stage::Parse,
        _ => Stage::Index,
    }
}

/// Remembers the last transient error of a run, so that a give-up can say what kept failing. Best
/// effort: when the database is what failed, there is nothing to record it in.
pub async fn record_transient_error(db: &Db, run_id: i64, stage: Stage, error: &str) {
    let Ok(client) = db.client().await else {
        return;
    };
    let detail = serde_json::json!({ "last_error": { "stage": stage.as_str(), "message": error, "at": chrono::Utc::now() } }).to_string();
    let _ = client
        .execute_typed(
            "UPDATE document_processing_runs SET metadata = metadata || $2::jsonb
             WHERE run_id = $1 AND run_status = 'running'",
            &[(&run_id, Type::INT8), (&detail, Type::TEXT)],
        )
        .await;
}

pub async fn give_up(
    db: &Db,
    doc_id: &str,
    run_id: Option<i64>,
    attempts: u32,
) -> Result<GiveUpOutcome, DbError> {
    let client = db.client().await?;
    let Some(doc) = documents::get(&**client, doc_id).await? else {
        return Ok(GiveUpOutcome::NoSuchDocument {
            doc_id: doc_id.to_string(),
        });
    };
    let Some(run_id) = run_id.or(doc.current_run_id) else {
        return Ok(GiveUpOutcome::NoSuchDocument {
            doc_id: doc_id.to_string(),
        });
    };
    give_up_run(&**client, &doc, run_id, attempts).await
}

async fn give_up_run(
    c: &impl GenericClient,
    doc: &documents::Document,
    run_id: i64,
    attempts: u32,
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
    let last = run
        .metadata
        .get("last_error")
        .and_then(|e| e.get("message"))
        .and_then(|m| m.as_str())
        .unwrap_or("no error was recorded (the function may have timed out or crashed)");
    let message = format!("gave up after {attempts} attempts: {last}");
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
