//! The sweeper's part in re-embedding: a rebuild whose chain of steps went quiet (a step message
//! lost after its commit, or dead-lettered through a long outage) is sent on again from where
//! PostgreSQL says it is, and the collections whose time is up (cancelled, or retired past their
//! grace and not kept) are dropped.

use crate::services::SweepService;
use crate::stages::rebuild::RebuildMessage;
use docpipe_db::generations;
use tracing::{info, warn};

/// One sweep's tending; never fails the sweep (what it leaves, the next one does).
pub async fn tend(sweeper: &SweepService) {
    if let Err(e) = go_on(sweeper).await {
        warn!(error = %e, "rebuilds were not tended; the next sweep will");
    }
    if let Err(e) = drop_due(sweeper).await {
        warn!(error = %e, "collections due were not dropped; the next sweep will");
    }
}

/// How long a building generation may go without a step before it counts as stalled: a step
/// that crashed comes back after the index queue's visibility timeout, one that failed after its
/// backoff, and a step runs at most the function's timeout.
fn quiet(sweeper: &SweepService) -> std::time::Duration {
    let clock = &sweeper.clock;
    clock.index.visibility + clock.backoff_max + clock.index.function_timeout
}

async fn go_on(sweeper: &SweepService) -> Result<(), String> {
    let stalled = {
        let client = sweeper.db.client().await.map_err(|e| e.to_string())?;
        generations::stalled(&**client, quiet(sweeper).as_secs_f64())
            .await
            .map_err(|e| docpipe_core::error::chain(&e))?
    };
    for g in stalled {
        sweeper
            .queue
            .send(
                &sweeper.index_queue_url,
                RebuildMessage::new(g.generation_id, g.step).encode(),
            )
            .await
            .map_err(|e| docpipe_core::error::chain(&e))?;
        let client = sweeper.db.client().await.map_err(|e| e.to_string())?;
        generations::touched(&**client, g.generation_id)
            .await
            .map_err(|e| docpipe_core::error::chain(&e))?;
        info!(
            generation = g.generation_id,
            step = g.step,
            "a quiet rebuild was sent on"
        );
    }
    Ok(())
}

async fn drop_due(sweeper: &SweepService) -> Result<(), String> {
    let due = {
        let client = sweeper.db.client().await.map_err(|e| e.to_string())?;
        generations::due_drops(&**client)
            .await
            .map_err(|e| docpipe_core::error::chain(&e))?
    };
    for g in due {
        let collection = sweeper.generations.collection_named(&g.collection).await;
        collection
            .drop_collection()
            .await
            .map_err(|e| docpipe_core::error::chain(&e))?;
        let client = sweeper.db.client().await.map_err(|e| e.to_string())?;
        generations::mark_dropped(&**client, g.generation_id)
            .await
            .map_err(|e| docpipe_core::error::chain(&e))?;
        sweeper.generations.forget().await;
        info!(generation = g.generation_id, collection = %g.collection, "collection dropped");
    }
    Ok(())
}
