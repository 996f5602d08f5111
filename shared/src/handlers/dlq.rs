//! The DLQ function: messages the parse, index (and store-events) queues gave up on. Each one's run
//! is failed with "gave up after N attempts: <last error>"; the handler itself never gives up on a
//! message that it could not record (a database outage returns it to the DLQ).

use super::sqs::{for_each_message, BatchReport};
use crate::error::StageError;
use crate::events::{self, Notification};
use crate::model::{JobMessage, Stage};
use crate::services::DeadLetterService;
use crate::stages::give_up::{give_up, GiveUpOutcome};
use aws_lambda_events::event::sqs::SqsEvent;

/// What a dead letter is about: a run (parse, index), or an upload (store), which may have none.
struct Target {
    doc_id: String,
    run_id: Option<i64>,
    upload: Option<events::ObjectRef>,
}

/// The document an upload belongs to, found the way the store function finds it (a registered
/// upload's key names its document).
async fn upload_doc_id(
    db: &crate::db::Db,
    bucket: &str,
    key: &str,
) -> Result<String, crate::db::DbError> {
    if let Some(candidate) = crate::ids::doc_id_in_upload_key(key) {
        let client = db.client().await?;
        if let Some(doc) = crate::db::documents::get(&**client, candidate).await? {
            if doc.object_name == key {
                return Ok(doc.doc_id);
            }
        }
    }
    Ok(crate::ids::derived_doc_id(bucket, key))
}

/// An upload the queue gave up on that failed no run (there was none waiting, or the document had
/// moved on) did not become a document: it is recorded as an intake failure. One whose version the
/// document already holds (same ETag) was taken in after all, and needs no record.
async fn record_lost_upload(
    service: &DeadLetterService,
    upload: &events::ObjectRef,
    outcome: &GiveUpOutcome,
    attempts: u32,
    last_error: Option<&str>,
) -> Result<Option<String>, StageError> {
    if matches!(outcome, GiveUpOutcome::Failed { .. }) {
        return Ok(None);
    }
    let transient = |e: crate::db::DbError| StageError::transient(Stage::Sweep, e);
    let client = service.db.client().await.map_err(transient)?;
    let doc_id = match outcome {
        GiveUpOutcome::AlreadyEnded { doc_id, .. } | GiveUpOutcome::NoSuchDocument { doc_id } => {
            doc_id
        }
        GiveUpOutcome::Failed { .. } => unreachable!("handled above"),
    };
    let doc = crate::db::documents::get(&**client, doc_id)
        .await
        .map_err(transient)?;
    let taken_in = match (&upload.etag, &doc) {
        (Some(etag), Some(doc)) => !etag.is_empty() && doc.source_etag == *etag,
        _ => false,
    };
    if taken_in {
        return Ok(None);
    }
    let reason = match last_error {
        Some(error) => format!("the store function gave up on the upload after {attempts} attempts: {error}"),
        None => format!(
            "the store function gave up on the upload after {attempts} deliveries (its errors are in the store function's log)"
        ),
    };
    crate::db::intake::record(
        &**client,
        &upload.bucket,
        &upload.key,
        &reason,
        attempts as i32,
    )
    .await
    .map_err(transient)?;
    tracing::error!(bucket = %upload.bucket, key = %upload.key, attempts, "upload given up: recorded as an intake failure");
    Ok(Some(format!(
        "{}: intake failure recorded: {reason}",
        upload.key
    )))
}

pub async fn handle_sqs(service: &DeadLetterService, batch: SqsEvent) -> BatchReport {
    for_each_message(batch, |message| async move {
        let attempts = message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0);
        let body = message.body.unwrap_or_default();
        // A parse or index job names its run; a store-events message is an S3 notification; a
        // store invoked directly (NotificationMode=direct) that failed all its asynchronous
        // attempts arrives as Lambda's invocation record around the notification.
        let mut attempts = attempts;
        let mut last_error = None;
        let targets: Vec<Target> = match JobMessage::decode(&body) {
            Ok(job) => vec![Target {
                doc_id: job.doc_id,
                run_id: Some(job.run_id),
                upload: None,
            }],
            Err(_) => {
                let value: Option<serde_json::Value> = serde_json::from_str(&body).ok();
                let notification = match value
                    .as_ref()
                    .and_then(crate::async_invoke::decode_invocation_record)
                {
                    Some((payload, invoked, error)) => {
                        attempts = invoked;
                        last_error = Some(error).filter(|e| !e.is_empty());
                        events::decode_notification(&payload)
                    }
                    None => events::decode_notification_str(&body),
                };
                match notification {
                    Ok(Notification::Created(objects)) => {
                        let mut targets = Vec::with_capacity(objects.len());
                        for object in objects {
                            let doc_id = upload_doc_id(&service.db, &object.bucket, &object.key)
                                .await
                                .map_err(|e| StageError::transient(Stage::Sweep, e))?;
                            targets.push(Target {
                                doc_id,
                                run_id: None,
                                upload: Some(object),
                            });
                        }
                        targets
                    }
                    Ok(_) => return Ok("dead letter without a document: nothing to record".into()),
                    Err(e) => {
                        return Err(StageError::permanent(
                            Stage::Sweep,
                            format!("unreadable dead letter dropped: {e}"),
                        ))
                    }
                }
            }
        };
        let mut lines = Vec::new();
        for target in targets {
            let outcome = give_up(
                &service.db,
                service.vectors.as_ref(),
                &target.doc_id,
                target.run_id,
                attempts,
                last_error.as_deref(),
            )
            .await
            .map_err(|e| StageError::transient(Stage::Sweep, e))?;
            if let Some(upload) = &target.upload {
                if let Some(line) =
                    record_lost_upload(service, upload, &outcome, attempts, last_error.as_deref())
                        .await?
                {
                    lines.push(line);
                    continue;
                }
            }
            lines.push(match outcome {
                GiveUpOutcome::Failed {
                    doc_id,
                    run_id,
                    stage,
                } => format!(
                    "{doc_id} run {run_id}: failed at {stage}: gave up after {attempts} attempts"
                ),
                GiveUpOutcome::AlreadyEnded { doc_id, run_id } => {
                    format!("{doc_id} run {run_id}: already ended, nothing to record")
                }
                GiveUpOutcome::NoSuchDocument { doc_id } => {
                    format!("{doc_id}: no such document, nothing to record")
                }
            });
        }
        Ok(lines.join("; "))
    })
    .await
}
