//! The index function: index jobs in, indexed documents out.

use super::sqs::{handle_jobs, Announce, Backoff, BatchReport, Ending, JobHandler, JobOutcome};
use crate::error::StageError;
use crate::services::IndexService;
use crate::stages::index::IndexOutcome;
use crate::stages::rebuild::{rebuild_step, RebuildMessage};
use aws_lambda_events::event::sqs::SqsEvent;
use docpipe_core::metrics;
use docpipe_core::model::{JobMessage, Stage};

pub async fn handle_sqs(service: &IndexService, batch: SqsEvent) -> BatchReport<IndexOutcome> {
    handle_jobs(service, batch).await
}

#[async_trait::async_trait]
impl JobHandler for IndexService {
    type Outcome = IndexOutcome;
    const STAGE: Stage = Stage::Index;

    fn events(&self) -> Option<Announce<'_>> {
        Some(Announce {
            db: &self.db,
            publisher: &self.events,
            clock: &self.config.clock,
        })
    }

    fn backoff(&self) -> Option<Backoff<'_>> {
        Some(Backoff {
            db: &self.db,
            queue: self.queue.as_ref(),
            queue_url: Some(&self.config.index_queue_url),
            clock: &self.config.clock,
        })
    }

    async fn run(&self, job: &JobMessage) -> Result<IndexOutcome, StageError> {
        self.run_job(job).await
    }

    fn is_other(&self, body: &str) -> bool {
        RebuildMessage::decode(body).is_some()
    }

    async fn run_other(&self, body: &str) -> Option<Result<IndexOutcome, StageError>> {
        let message = RebuildMessage::decode(body)?;
        Some(
            rebuild_step(&self.rebuild_deps(), message.rebuild)
                .await
                .map(IndexOutcome::Rebuild),
        )
    }
}

impl JobOutcome for IndexOutcome {
    fn ending(&self) -> Ending {
        match self {
            IndexOutcome::Indexed { .. } => Ending::Completed,
            IndexOutcome::Failed { .. } => Ending::Failed,
            IndexOutcome::Stale { .. }
            | IndexOutcome::Continued { .. }
            | IndexOutcome::Rebuild(_) => Ending::Neither,
        }
    }

    fn continues(&self) -> bool {
        matches!(self, IndexOutcome::Continued { .. })
    }

    fn record_metrics(&self) {
        if let IndexOutcome::Indexed { chunks, .. } = self {
            metrics::chunks_indexed(*chunks);
        }
    }
}

impl std::fmt::Display for IndexOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IndexOutcome::Indexed {
                doc_id,
                run_id,
                chunks,
            } => write!(f, "{doc_id} run {run_id}: indexed ({chunks} chunks)"),
            IndexOutcome::Failed {
                doc_id,
                run_id,
                reason,
            } => write!(f, "{doc_id} run {run_id}: failed at index: {reason}"),
            IndexOutcome::Stale {
                doc_id,
                run_id,
                why,
            } => write!(
                f,
                "{doc_id} run {run_id}: stale index message dropped: {why}"
            ),
            IndexOutcome::Rebuild(outcome) => outcome.fmt(f),
            IndexOutcome::Continued {
                doc_id,
                run_id,
                done,
                total,
            } => write!(
                f,
                "{doc_id} run {run_id}: indexed {done} of {total} chunks; the next delivery goes on from chunk {done}"
            ),
        }
    }
}
