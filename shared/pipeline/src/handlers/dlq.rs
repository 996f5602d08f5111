//! The DLQ function: messages the parse, index (and store-events) queues gave up on. Each one's run
//! is failed with "gave up after N attempts: <last error>"; the handler itself never gives up on a
//! message that it could not record (a database outage returns it to the DLQ).

use super::lambda::Function;
use super::sqs::{handle_messages, Backoff, BatchReport, MessageHandler};
use crate::error::StageError;
use crate::services::DeadLetterService;
use crate::upkeep::give_up::{give_up, GiveUpOutcome};
use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use docpipe_core::events::{self, Notification};
use docpipe_core::model::{JobMessage, Stage};

/// What a dead letter is about: a run (parse, index), or an upload (store), which may have none.
struct Target {
    doc_id: String,
    run_id: Option<i64>,
    upload: Option<events::ObjectRef>,
}

/// The document an upload belongs to, found the way the store function finds it (a registered
/// upload's key names its document).
async fn upload_doc_id(
    db: &docpipe_db::Db,
    bucket: &str,
    key: &str,
) -> Result<String, docpipe_db::DbError> {
    if let Some(candidate) = docpipe_core::ids::doc_id_in_upload_key(key) {
        let client = db.client().await?;
        if let Some(doc) = docpipe_db::documents::get(&**client, candidate).await? {
            if doc.object_name == key {
                return Ok(doc.doc_id);
            }
        }
    }
    Ok(docpipe_core::ids::derived_doc_id(bucket, key))
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
    // The reason recorded, when one was.
    if matches!(outcome, GiveUpOutcome::Failed { .. }) {
        return Ok(None);
    }
    let transient = |e: docpipe_db::DbError| StageError::transient(Stage::Sweep, e);
    let client = service.db.client().await.map_err(transient)?;
    let doc_id = match outcome {
        GiveUpOutcome::AlreadyEnded { doc_id, .. } | GiveUpOutcome::NoSuchDocument { doc_id } => {
            doc_id
        }
        GiveUpOutcome::Failed { .. } => unreachable!("handled above"),
    };
    let doc = docpipe_db::documents::get(&**client, doc_id)
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
    docpipe_db::intake::record(
        &**client,
        &upload.bucket,
        &upload.key,
        &reason,
        attempts as i32,
    )
    .await
    .map_err(transient)?;
    tracing::error!(bucket = %upload.bucket, key = %upload.key, attempts, "upload given up: recorded as an intake failure");
    Ok(Some(reason))
}

pub async fn handle_sqs(
    service: &DeadLetterService,
    batch: SqsEvent,
) -> BatchReport<DeadLetterOutcome> {
    handle_messages(service, batch).await
}

#[async_trait::async_trait]
impl MessageHandler for DeadLetterService {
    type Outcome = DeadLetterOutcome;

    /// A dead letter that fails to be recorded goes back to the DLQ as it is.
    fn backoff(&self) -> Option<Backoff<'_>> {
        None
    }

    async fn handle(&self, message: &SqsMessage) -> Result<DeadLetterOutcome, StageError> {
        let Some(letter) = read_letter(self, message).await? else {
            return Ok(DeadLetterOutcome::NothingToRecord);
        };
        let mut lines = Vec::new();
        for target in letter.targets {
            lines.push(
                give_up_target(self, target, letter.attempts, letter.last_error.as_deref()).await?,
            );
        }
        Ok(DeadLetterOutcome::Recorded(lines))
    }
}

/// What a dead letter came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadLetterOutcome {
    /// It named no document (a test event, an ignored notification).
    NothingToRecord,
    /// What was recorded for each run or upload it named, in order.
    Recorded(Vec<GaveUp>),
}

/// The give-up of one run or upload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GaveUp {
    /// The run's give-up, after the attempts counted.
    Run {
        outcome: GiveUpOutcome,
        attempts: u32,
    },
    /// An upload that never became a document, recorded as an intake failure with the reason.
    IntakeFailure { key: String, reason: String },
}

impl std::fmt::Display for DeadLetterOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ends = match self {
            DeadLetterOutcome::NothingToRecord => {
                return f.write_str("dead letter without a document: nothing to record")
            }
            DeadLetterOutcome::Recorded(ends) => ends,
        };
        for (i, end) in ends.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            match end {
                GaveUp::IntakeFailure { key, reason } => {
                    write!(f, "{key}: intake failure recorded: {reason}")?
                }
                GaveUp::Run { outcome, attempts } => match outcome {
                    GiveUpOutcome::Failed {
                        doc_id,
                        run_id,
                        stage,
                    } => write!(
                        f,
                        "{doc_id} run {run_id}: failed at {stage}: gave up after {attempts} attempts"
                    )?,
                    GiveUpOutcome::AlreadyEnded { doc_id, run_id } => {
                        write!(f, "{doc_id} run {run_id}: already ended, nothing to record")?
                    }
                    GiveUpOutcome::NoSuchDocument { doc_id } => {
                        write!(f, "{doc_id}: no such document, nothing to record")?
                    }
                },
            }
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl Function for DeadLetterService {
    type Event = SqsEvent;
    type Response = SqsBatchResponse;
    type Error = std::convert::Infallible;

    async fn invoke(&self, batch: SqsEvent) -> Result<SqsBatchResponse, Self::Error> {
        Ok(handle_sqs(self, batch).await.response)
    }
}

/// A dead letter, read: what it is about, after how many attempts, and the last error when the
/// letter carries one.
struct Letter {
    targets: Vec<Target>,
    attempts: u32,
    last_error: Option<String>,
}

/// A parse or index job names its run; a store-events message is an S3 notification; a store
/// invoked directly (NotificationMode=direct) that failed all its asynchronous attempts arrives as
/// Lambda's invocation record around the notification. `None`: it names no document.
async fn read_letter(
    service: &DeadLetterService,
    message: &SqsMessage,
) -> Result<Option<Letter>, StageError> {
    let mut attempts = message
        .attributes
        .get("ApproximateReceiveCount")
        .and_then(|n| n.parse::<u32>().ok())
        .unwrap_or(0);
    let body = message.body.as_deref().unwrap_or_default();
    let mut last_error = None;
    // A re-embedding's step names no document: the sweeper sends a quiet rebuild on from the step
    // PostgreSQL records, so its dead letter has nothing to record.
    if crate::stages::rebuild::RebuildMessage::decode(body).is_some() {
        return Ok(None);
    }
    if let Ok(job) = JobMessage::decode(body) {
        let target = Target {
            doc_id: job.doc_id,
            run_id: Some(job.run_id),
            upload: None,
        };
        return Ok(Some(Letter {
            targets: vec![target],
            attempts,
            last_error,
        }));
    }
    let value: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let notification = match value
        .as_ref()
        .and_then(crate::handlers::async_invoke::decode_invocation_record)
    {
        Some((payload, invoked, error)) => {
            attempts = invoked;
            last_error = Some(error).filter(|e| !e.is_empty());
            events::decode_notification(&payload)
        }
        None => events::decode_notification_str(body),
    };
    let objects = match notification {
        Ok(Notification::Created(objects)) => objects,
        Ok(_) => return Ok(None),
        Err(e) => {
            return Err(StageError::failed(
                Stage::Sweep,
                format!("unreadable dead letter dropped: {e}"),
            ))
        }
    };
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
    Ok(Some(Letter {
        targets,
        attempts,
        last_error,
    }))
}

/// The give-up of one target.
async fn give_up_target(
    service: &DeadLetterService,
    target: Target,
    attempts: u32,
    last_error: Option<&str>,
) -> Result<GaveUp, StageError> {
    let outcome = give_up(
        &service.db,
        service.vectors.as_ref(),
        &target.doc_id,
        target.run_id,
        attempts,
        last_error,
    )
    .await
    .map_err(|e| StageError::transient(Stage::Sweep, e))?;
    if let Some(upload) = &target.upload {
        if let Some(reason) =
            record_lost_upload(service, upload, &outcome, attempts, last_error).await?
        {
            return Ok(GaveUp::IntakeFailure {
                key: upload.key.clone(),
                reason,
            });
        }
    }
    Ok(GaveUp::Run { outcome, attempts })
}
