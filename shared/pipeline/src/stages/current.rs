//! The question every job message asks first: may it still act? Only while its document exists, is
//! not being deleted, names the message's run as current, and that run is still running. Anything
//! else makes the message stale: acknowledged and dropped, with the reason logged.

use docpipe_core::model::{JobMessage, RunStatus};
use docpipe_db::documents::{self, Document};
use docpipe_db::{runs, Db, DbError};

/// `Ok(document)` when the job may act, `Err(why)` when it is stale.
pub async fn check(db: &Db, job: &JobMessage) -> Result<Result<Document, String>, DbError> {
    let client = db.client().await?;
    let Some(doc) = documents::get(&**client, &job.doc_id).await? else {
        return Ok(Err("the document no longer exists".into()));
    };
    if doc.deleting_at.is_some() {
        return Ok(Err("the document is being deleted".into()));
    }
    if doc.current_run_id != Some(job.run_id) {
        return Ok(Err(format!(
            "run {} is not the current run ({:?})",
            job.run_id, doc.current_run_id
        )));
    }
    let running = runs::get(&**client, job.run_id)
        .await?
        .is_some_and(|r| r.run_status == RunStatus::Running);
    if !running {
        return Ok(Err(format!("run {} is no longer running", job.run_id)));
    }
    Ok(Ok(doc))
}
