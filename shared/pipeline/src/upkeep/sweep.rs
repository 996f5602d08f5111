//! The sweeper, run on a schedule. Waiting is never a failure: a run queued behind a backlog, or
//! waiting out a backoff, is left alone however long it waits. What the sweeper looks for is a job
//! that was *lost*, which shows in one of three ways:
//!
//! 1. a lease ran out with no worker renewing it (the worker died or was cut off mid-stage);
//! 2. the stage's queue holds no message at all (visible, in flight or delayed) while a run has
//!    said it is queued there for longer than the grace period;
//! 3. a run has been queued longer than the queue keeps a message, so its message cannot exist.
//!
//! Its answer is to re-drive the job: send the message again (every stage is idempotent, so a
//! duplicate changes nothing) and record that, a bounded number of times. A run fails for lack of
//! progress only when its job can no longer exist (signal 2 or 3) and the re-drives are used up;
//! then what it wrote to Milvus goes first, and the message says what happened and what was tried.
//!
//! A registered upload whose file never arrived is the one deadline left: its `pending` run fails
//! when the deadline passes ("no upload arrived").

use crate::adapters::{JobQueue, QueueDepth};
use docpipe_core::clock::Clock;
use docpipe_core::model::{DocStatus, JobMessage, Stage};
use docpipe_db::sweep::{self, QueuedRun as Candidate, UnarrivedUpload};
use docpipe_db::{runs, transitions, Db, DbError};
use docpipe_vector::VectorIndex;

pub struct SweepDeps<'a> {
    pub db: &'a Db,
    pub queue: &'a dyn JobQueue,
    pub vectors: &'a dyn VectorIndex,
    pub parse_queue_url: &'a str,
    pub index_queue_url: &'a str,
    pub clock: &'a Clock,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Swept {
    /// The job was sent again.
    Redriven {
        doc_id: String,
        run_id: i64,
        stage: Stage,
        reason: String,
    },
    /// The run failed: its job is lost and the re-drives are used up (or its upload never came).
    Failed {
        doc_id: String,
        run_id: i64,
        message: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("the database is unavailable")]
    Db(#[from] DbError),
    #[error("a sweep statement failed")]
    Statement(#[from] tokio_postgres::Error),
}

/// What one sweep did, and what it could not do (tried again next sweep).
#[derive(Debug, Default)]
pub struct SweepReport {
    pub actions: Vec<Swept>,
    pub problems: Vec<String>,
}

impl SweepReport {
    pub fn failed(&self) -> usize {
        self.actions
            .iter()
            .filter(|a| matches!(a, Swept::Failed { .. }))
            .count()
    }
    pub(crate) fn redriven(&self) -> usize {
        self.actions.len() - self.failed()
    }
}

/// One sweep over at most `limit` runs per stage.
pub async fn sweep(deps: &SweepDeps<'_>, limit: i64) -> Result<SweepReport, SweepError> {
    let mut report = SweepReport::default();
    fail_unarrived_uploads(deps.db, limit, &mut report).await?;
    for stage in [Stage::Parse, Stage::Index] {
        sweep_stage(deps, stage, limit, &mut report).await?;
    }
    Ok(report)
}

async fn fail_unarrived_uploads(
    db: &Db,
    limit: i64,
    report: &mut SweepReport,
) -> Result<(), SweepError> {
    let client = db.client().await?;
    for upload in sweep::unarrived_uploads(&**client, limit).await? {
        let UnarrivedUpload {
            run_id,
            doc_id,
            deadline,
            waited_secs: waited,
        } = upload;
        let message = format!(
            "timed out: no upload arrived, or it was never stored, within the deadline ({deadline}); waited {waited} s"
        );
        if transitions::fail_run(&**client, &doc_id, run_id, Stage::Store, &message).await? {
            tracing::warn!(doc_id, run_id, stage = "store", "no upload arrived");
            report.actions.push(Swept::Failed {
                doc_id,
                run_id,
                message,
            });
        }
    }
    Ok(())
}

async fn sweep_stage(
    deps: &SweepDeps<'_>,
    stage: Stage,
    limit: i64,
    report: &mut SweepReport,
) -> Result<(), SweepError> {
    let (status, queue_url) = match stage {
        Stage::Parse => (DocStatus::Stored, deps.parse_queue_url),
        _ => (DocStatus::Parsed, deps.index_queue_url),
    };
    let candidates = sweep::queued_runs(
        &**deps.db.client().await?,
        status.as_str(),
        stage == Stage::Index,
        limit,
        deps.clock.lost_job_grace,
        deps.clock.retention,
    )
    .await?;
    if candidates.is_empty() {
        return Ok(());
    }
    // Asked only when some run looks lost, and after the candidates were read: a message sent
    // after that read is then counted, never missed.
    let depth: Option<QueueDepth> = match deps.queue.depth(queue_url).await {
        Ok(depth) => Some(depth),
        Err(e) => {
            report.problems.push(format!(
                "{stage} queue depth unknown: {}",
                docpipe_core::error::chain(&e)
            ));
            None
        }
    };
    let queue_empty = depth.is_some_and(|d| d.is_empty());
    let retention = deps.clock.retention.as_secs();
    for c in candidates {
        let reason = if c.lease_expired {
            format!(
                "the lease of attempt {} ran out with no worker renewing it",
                c.attempts
            )
        } else if c.unsent {
            format!(
                "its job was decided {} s ago and never sent (the send after the commit failed)",
                c.queued_secs
            )
        } else if c.past_retention {
            format!(
                "queued for {} s, longer than the queue keeps a message ({retention} s)",
                c.queued_secs
            )
        } else if queue_empty {
            format!(
                "the {stage} queue holds no message while the run has been queued for {} s",
                c.queued_secs
            )
        } else {
            // A backlog: its message is on the queue, behind others. Waiting is not failing.
            continue;
        };
        let job_cannot_exist = c.past_retention || queue_empty || c.unsent;
        if c.redrives < deps.clock.redrive_limit as i32 {
            redrive(deps, stage, queue_url, &c, &reason, report).await?;
        } else if job_cannot_exist {
            fail_lost(deps, stage, &c, &reason, report).await?;
        }
        // Otherwise the re-drives are used up but a message may still come back (a dead
        // worker's message returns after its visibility timeout): it is left to the queue,
        // whose dead-letter queue has the last word.
    }
    Ok(())
}

async fn redrive(
    deps: &SweepDeps<'_>,
    stage: Stage,
    queue_url: &str,
    c: &Candidate,
    reason: &str,
    report: &mut SweepReport,
) -> Result<(), SweepError> {
    let client = deps.db.client().await?;
    // Counted first, guarded by the count it read: two sweeps at once re-drive a run once.
    if !runs::record_redrive(&**client, c.run_id, c.redrives, stage, reason).await? {
        return Ok(());
    }
    drop(client);
    let body = JobMessage::new(c.doc_id.clone(), c.run_id).encode();
    if let Err(e) = deps.queue.send(queue_url, body).await {
        // Recorded but not sent: the queue stays empty, and the next sweep re-drives again.
        report.problems.push(format!(
            "re-drive of {} run {} not sent: {}",
            c.doc_id,
            c.run_id,
            docpipe_core::error::chain(&e)
        ));
        return Ok(());
    }
    if let Err(e) = runs::job_sent(&**deps.db.client().await?, c.run_id).await {
        report.problems.push(format!(
            "re-drive of {} run {} sent but not marked so: {}",
            c.doc_id,
            c.run_id,
            docpipe_core::error::chain(&e)
        ));
    }
    tracing::warn!(doc_id = %c.doc_id, run_id = c.run_id, stage = stage.as_str(), redrive = c.redrives + 1, reason, "re-drove a lost job");
    report.actions.push(Swept::Redriven {
        doc_id: c.doc_id.clone(),
        run_id: c.run_id,
        stage,
        reason: reason.to_string(),
    });
    Ok(())
}

async fn fail_lost(
    deps: &SweepDeps<'_>,
    stage: Stage,
    c: &Candidate,
    reason: &str,
    report: &mut SweepReport,
) -> Result<(), SweepError> {
    // Nothing of a failed run stays searchable; if Milvus is away, the run waits for the next sweep.
    if let Err(e) = deps.vectors.delete_run(&c.doc_id, c.run_id).await {
        report.problems.push(format!(
            "{} run {}: its vectors could not be removed, so it is not failed yet: {}",
            c.doc_id,
            c.run_id,
            docpipe_core::error::chain(&e)
        ));
        return Ok(());
    }
    let message = format!(
        "no progress in the {stage} stage: {reason}; the job was re-driven {} time(s), the limit, and can no longer exist",
        c.redrives
    );
    let client = deps.db.client().await?;
    if transitions::fail_run(&**client, &c.doc_id, c.run_id, stage, &message).await? {
        tracing::error!(doc_id = %c.doc_id, run_id = c.run_id, stage = stage.as_str(), "failed a run whose job was lost");
        report.actions.push(Swept::Failed {
            doc_id: c.doc_id.clone(),
            run_id: c.run_id,
            message,
        });
    }
    Ok(())
}
