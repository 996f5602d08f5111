//! The sweeper, run on a schedule: a run that sat in `running` past its deadline fails, with a
//! message that says which stage it was stuck in and for how long. No document stays in a
//! non-terminal state forever, whatever was lost on the way (a message, a crashed function, an
//! upload URL nobody used).

use super::give_up::waiting_stage;
use crate::db::{transitions, Db, DbError, Type};
use crate::model::DocStatus;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Swept {
    pub doc_id: String,
    pub run_id: i64,
    pub message: String,
}

/// Fails up to `limit` overdue runs; returns what it failed.
pub async fn sweep(db: &Db, limit: i64) -> Result<Vec<Swept>, DbError> {
    let client = db.client().await?;
    let rows = client
        .query_typed(
            "SELECT r.run_id, r.doc_id, d.status, r.deadline_at::text,
                    EXTRACT(EPOCH FROM (NOW() - COALESCE(r.parsed_at, r.stored_at, r.started_at)))::int8
             FROM document_processing_runs r JOIN documents d ON d.doc_id = r.doc_id
             WHERE r.run_status = 'running' AND r.deadline_at < NOW()
             ORDER BY r.deadline_at LIMIT $1",
            &[(&limit, Type::INT8)],
        )
        .await?;
    let mut swept = Vec::new();
    for row in rows {
        let run_id: i64 = row.get(0);
        let doc_id: String = row.get(1);
        let status = DocStatus::parse(row.get(2)).unwrap_or(DocStatus::Pending);
        let deadline: String = row.get(3);
        let waited: i64 = row.get(4);
        let stage = waiting_stage(status);
        let message = if status == DocStatus::Pending {
            format!("timed out: no upload arrived, or it was never stored, within the deadline ({deadline}); waited {waited} s")
        } else {
            format!("timed out in the {stage} stage: no progress for {waited} s, past the deadline ({deadline})")
        };
        if transitions::fail_run(&**client, &doc_id, run_id, stage, &message).await? {
            tracing::warn!(
                doc_id,
                run_id,
                stage = stage.as_str(),
                "swept an overdue run"
            );
            swept.push(Swept {
                doc_id,
                run_id,
                message,
            });
        }
    }
    Ok(swept)
}
