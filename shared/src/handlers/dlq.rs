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

pub async fn handle_sqs(service: &DeadLetterService, batch: SqsEvent) -> BatchReport {
    for_each_message(batch, |message| async move {
        let attempts = message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0);
        let body = message.body.unwrap_or_default();
        // A parse or index job names its run; a store-events message is an S3 notification.
        let targets: Vec<(String, Option<i64>)> = match JobMessage::decode(&body) {
            Ok(job) => vec![(job.doc_id, Some(job.run_id))],
            Err(_) => match events::decode_notification_str(&body) {
                Ok(Notification::Created(objects)) => objects
                    .iter()
                    .map(|o| (crate::ids::derived_doc_id(&o.bucket, &o.key), None))
                    .collect(),
                Ok(_) => return Ok("dead letter without a document: nothing to record".into()),
                Err(e) => {
                    return Err(StageError::permanent(
                        Stage::Sweep,
                        format!("unreadable dead letter dropped: {e}"),
                    ))
                }
            },
        };
        let mut lines = Vec::new();
        for (doc_id, run_id) in targets {
            let outcome = give_up(
                &service.db,
                service.vectors.as_ref(),
                &doc_id,
                run_id,
                attempts,
            )
            .await
            .map_err(|e| StageError::transient(Stage::Sweep, e))?;
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
