//! The parse function: parse jobs in, parsed documents (and index jobs) out.

use super::sqs::{for_each_message, Backoff, BatchReport, Delivery};
use crate::error::StageError;
use crate::metrics;
use crate::model::{JobMessage, Stage};
use crate::services::ParseService;
use crate::stages::parse::{parse_job, ParseOutcome};
use aws_lambda_events::event::sqs::SqsEvent;

pub async fn handle_sqs(service: &ParseService, batch: SqsEvent) -> BatchReport {
    let backoff = Backoff {
        db: &service.db,
        queue: service.queue.as_ref(),
        queue_url: Some(&service.config.parse_queue_url),
        clock: &service.config.clock,
    };
    let backoff = &backoff;
    for_each_message(batch, |message| async move {
        let delivery = Delivery::of(&message);
        let job = JobMessage::decode(message.body.as_deref().unwrap_or_default())
            .map_err(|e| StageError::permanent(Stage::Parse, e))?;
        let started = std::time::Instant::now();
        match parse_job(&service.deps(), &job).await {
            Ok(outcome) => {
                match &outcome {
                    ParseOutcome::Parsed { .. } => {
                        metrics::stage_completed(Stage::Parse, started.elapsed().as_millis() as u64)
                    }
                    ParseOutcome::Failed { .. } => metrics::stage_failed(Stage::Parse, "permanent"),
                    _ => {}
                }
                Ok(describe(&outcome))
            }
            Err(e) => {
                metrics::stage_failed(Stage::Parse, e.class());
                if e.is_retryable() {
                    backoff
                        .after_failure(&delivery, Some((job.run_id, Stage::Parse)), &e)
                        .await;
                }
                Err(e)
            }
        }
    })
    .await
}

fn describe(outcome: &ParseOutcome) -> String {
    match outcome {
        ParseOutcome::Parsed {
            doc_id,
            run_id,
            structure_nodes,
            semantic_blocks,
            chunks,
        } => format!(
            "{doc_id} run {run_id}: parsed ({structure_nodes} headings, {semantic_blocks} blocks, {chunks} chunks), index queued"
        ),
        ParseOutcome::Failed {
            doc_id,
            run_id,
            reason,
        } => format!("{doc_id} run {run_id}: failed at parse: {reason}"),
        ParseOutcome::IndexResent { doc_id, run_id } => {
            format!("{doc_id} run {run_id}: already parsed, index re-queued")
        }
        ParseOutcome::Stale {
            doc_id,
            run_id,
            why,
        } => format!("{doc_id} run {run_id}: stale parse message dropped: {why}"),
    }
}
