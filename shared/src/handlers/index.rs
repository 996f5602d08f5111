//! The index function: index jobs in, indexed documents out.

use super::sqs::{for_each_message, Backoff, BatchReport, Delivery};
use crate::error::StageError;
use crate::metrics;
use crate::model::{JobMessage, Stage};
use crate::services::IndexService;
use crate::stages::index::{index_job, IndexOutcome};
use aws_lambda_events::event::sqs::SqsEvent;

pub async fn handle_sqs(service: &IndexService, batch: SqsEvent) -> BatchReport {
    let backoff = Backoff {
        db: &service.db,
        queue: service.queue.as_ref(),
        queue_url: Some(&service.config.index_queue_url),
        clock: &service.config.clock,
    };
    let backoff = &backoff;
    for_each_message(batch, |message| async move {
        let delivery = Delivery::of(&message);
        let job = JobMessage::decode(message.body.as_deref().unwrap_or_default())
            .map_err(|e| StageError::permanent(Stage::Index, e))?;
        let started = std::time::Instant::now();
        let outcome = match index_job(&service.deps(), &job).await {
            Ok(outcome) => outcome,
            Err(e) => {
                metrics::stage_failed(Stage::Index, e.class());
                if e.is_retryable() {
                    backoff
                        .after_failure(&delivery, Some((job.run_id, Stage::Index)), &e)
                        .await;
                }
                return Err(e);
            }
        };
        match &outcome {
            IndexOutcome::Indexed { chunks, .. } => {
                metrics::stage_completed(Stage::Index, started.elapsed().as_millis() as u64);
                metrics::chunks_indexed(*chunks);
            }
            IndexOutcome::Failed { .. } => metrics::stage_failed(Stage::Index, "permanent"),
            IndexOutcome::Stale { .. } => {}
        }
        Ok(match outcome {
            IndexOutcome::Indexed {
                doc_id,
                run_id,
                chunks,
            } => format!("{doc_id} run {run_id}: indexed ({chunks} chunks)"),
            IndexOutcome::Failed {
                doc_id,
                run_id,
                reason,
            } => format!("{doc_id} run {run_id}: failed at index: {reason}"),
            IndexOutcome::Stale {
                doc_id,
                run_id,
                why,
            } => format!("{doc_id} run {run_id}: stale index message dropped: {why}"),
        })
    })
    .await
}
