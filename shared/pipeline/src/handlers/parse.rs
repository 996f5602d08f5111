//! The parse function: parse jobs in, parsed documents (and index jobs) out.

use super::sqs::{handle_jobs, Announce, Backoff, BatchReport, Ending, JobHandler, JobOutcome};
use crate::error::StageError;
use crate::services::ParseService;
use crate::stages::parse::{parse_job, ParseOutcome};
use aws_lambda_events::event::sqs::SqsEvent;
use docpipe_core::model::{JobMessage, Stage};

pub async fn handle_sqs(service: &ParseService, batch: SqsEvent) -> BatchReport<ParseOutcome> {
    handle_jobs(service, batch).await
}

#[async_trait::async_trait]
impl JobHandler for ParseService {
    type Outcome = ParseOutcome;
    const STAGE: Stage = Stage::Parse;

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
            queue_url: Some(&self.config.parse_queue_url),
            clock: &self.config.clock,
        })
    }

    async fn run(&self, job: &JobMessage) -> Result<ParseOutcome, StageError> {
        parse_job(&self.deps(), job).await
    }
}

impl JobOutcome for ParseOutcome {
    fn ending(&self) -> Ending {
        match self {
            ParseOutcome::Parsed { .. } => Ending::Completed,
            ParseOutcome::Failed { .. } => Ending::Failed,
            ParseOutcome::IndexResent { .. } | ParseOutcome::Stale { .. } => Ending::Neither,
        }
    }
}

impl std::fmt::Display for ParseOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ParseOutcome::Parsed {
                doc_id,
                run_id,
                structure_nodes,
                semantic_blocks,
                chunks,
            } => write!(
                f,
                "{doc_id} run {run_id}: parsed ({structure_nodes} headings, {semantic_blocks} blocks, {chunks} chunks), index queued"
            ),
            ParseOutcome::Failed {
                doc_id,
                run_id,
                reason,
            } => write!(f, "{doc_id} run {run_id}: failed at parse: {reason}"),
            ParseOutcome::IndexResent { doc_id, run_id } => {
                write!(f, "{doc_id} run {run_id}: already parsed, index re-queued")
            }
            ParseOutcome::Stale {
                doc_id,
                run_id,
                why,
            } => write!(f, "{doc_id} run {run_id}: stale parse message dropped: {why}"),
        }
    }
}
