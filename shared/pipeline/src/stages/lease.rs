//! A worker's claim on a run while it works on a stage (seed 001: a stage is a retryable task with a
//! lease). Taking it counts the attempt; a background task renews it every third of its length
//! while the work goes on, so a run that is being worked on always shows a fresh renewal, and a
//! worker that dies stops renewing and its lease runs out. When a renewal finds the lease gone (a
//! takeover, or the run ended), the holder is told through [`HeldLease::is_lost`].

use docpipe_core::clock::Clock;
use docpipe_core::model::Stage;
use docpipe_db::transitions::{self, Attempt};
use docpipe_db::{Db, DbError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub(crate) struct HeldLease {
    pub run_id: i64,
    pub owner: String,
    pub attempt: Attempt,
    lost: Arc<AtomicBool>,
    renewer: tokio::task::JoinHandle<()>,
}

impl HeldLease {
    /// Takes the run's lease for `stage`; `None` when another worker holds a live one or the run
    /// is no longer running.
    pub async fn take(
        db: &Db,
        run_id: i64,
        stage: Stage,
        lease: Duration,
    ) -> Result<Option<HeldLease>, DbError> {
        let owner = format!("{}-{:016x}", stage.as_str(), rand::random::<u64>());
        let client = db.client().await?;
        let Some(attempt) =
            transitions::start_attempt(&**client, run_id, stage, &owner, lease.as_secs_f64())
                .await?
        else {
            return Ok(None);
        };
        drop(client);
        let lost = Arc::new(AtomicBool::new(false));
        let renewer = tokio::spawn(renew_until_lost(
            db.clone(),
            run_id,
            owner.clone(),
            lease,
            lost.clone(),
        ));
        Ok(Some(HeldLease {
            run_id,
            owner,
            attempt,
            lost,
            renewer,
        }))
    }

    /// The reason the run fails instead of trying again, when too many attempts of `stage` died
    /// before this one: each stopped without a word (its function's timeout, or its memory),
    /// and a further attempt of the same input would die the same way. Without this a poison
    /// document would hold a worker for its whole timeout on every delivery the queue allows.
    pub(crate) fn too_many_abandoned(&self, clock: &Clock, stage: Stage) -> Option<String> {
        let abandoned = self.attempt.abandoned;
        if abandoned < clock.max_abandoned_attempts as i32 {
            return None;
        }
        let timeout = match stage {
            Stage::Parse => clock.parse.function_timeout,
            _ => clock.index.function_timeout,
        };
        Some(format!(
            "{stage} did not finish within {} s, {abandoned} times: each attempt timed out or ran out of memory, and was stopped",
            timeout.as_secs_f64()
        ))
    }

    /// True once a renewal found that the lease is no longer this worker's.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Renews the lease now and says whether it is still this worker's. Called right before a write
    /// outside PostgreSQL (a Milvus insert): a renewal that succeeded holds the lease for a whole
    /// lease length, so no other worker can take the run over until well after the write.
    pub(crate) async fn confirm(&self, db: &Db, lease: Duration) -> Result<bool, DbError> {
        if self.is_lost() {
            return Ok(false);
        }
        let client = db.client().await?;
        let held =
            transitions::renew_lease(&**client, self.run_id, &self.owner, lease.as_secs_f64())
                .await?;
        if !held {
            self.lost.store(true, Ordering::SeqCst);
        }
        Ok(held)
    }

    /// Stops renewing and gives the lease back, so that a redelivery can take over at once rather
    /// than wait for it to run out. Best effort: an unreleased lease simply expires.
    pub async fn release(self, db: &Db) {
        self.renewer.abort();
        if let Ok(client) = db.client().await {
            let _ = transitions::release_lease(&**client, self.run_id, &self.owner).await;
        }
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

async fn renew_until_lost(
    db: Db,
    run_id: i64,
    owner: String,
    lease: Duration,
    lost: Arc<AtomicBool>,
) {
    let every = lease / 3;
    loop {
        tokio::time::sleep(every).await;
        let renewed = match db.client().await {
            Ok(client) => {
                transitions::renew_lease(&**client, run_id, &owner, lease.as_secs_f64()).await
            }
            Err(e) => Err(e),
        };
        match renewed {
            Ok(true) => {}
            Ok(false) => {
                lost.store(true, Ordering::SeqCst);
                return;
            }
            // The database is briefly away: try again next period. If it stays away the lease
            // runs out, which is what should happen to a worker that cannot reach it.
            Err(e) => {
                tracing::warn!(run_id, error = %docpipe_core::error::chain(&e), "lease renewal failed")
            }
        }
    }
}
