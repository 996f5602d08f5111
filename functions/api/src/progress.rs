//! Where a run is, in the liveness model's words: waiting for its upload, *queued* for a stage (its
//! job is on the queue and nobody holds it), *backing off* after a transient error, or *running*
//! (a worker holds its lease and renews it), with the stage's attempts and for how long. The API
//! answers with it and the CLI prints its summary, e.g. "queued for index, 14 min" or "indexing,
//! attempt 2 of 5, lease renewed 3 s ago".

use chrono::{DateTime, Utc};
use docpipe_core::model::{DocStatus, RunStatus};
use docpipe_db::runs::Run;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    AwaitingUpload,
    Queued,
    BackingOff,
    Running,
    Succeeded,
    Failed,
}

#[derive(Debug, Clone, Serialize)]
pub struct Progress {
    pub state: RunState,
    /// The stage the run is queued for or running (`store`, `parse`, `index`); none once it ended.
    pub stage: Option<&'static str>,
    /// Since when the run is in this state.
    pub since: Option<DateTime<Utc>>,
    pub for_secs: Option<i64>,
    /// Attempts of this stage so far, across deliveries and re-drives.
    pub attempts: i32,
    /// Deliveries a job gets before its queue gives up (the template's `MaxReceiveCount`).
    pub max_attempts: Option<u32>,
    pub lease_renewed_secs_ago: Option<i64>,
    /// When a message that backed off comes back.
    pub retry_at: Option<DateTime<Utc>>,
    pub redrives: i32,
    pub summary: String,
}

/// The progress of `run`, the current run of a document in `status`, at `now`.
pub fn of(run: &Run, status: DocStatus, now: DateTime<Utc>, max_attempts: Option<u32>) -> Progress {
    let mut p = Progress {
        state: RunState::Queued,
        stage: None,
        since: None,
        for_secs: None,
        attempts: 0,
        max_attempts,
        lease_renewed_secs_ago: None,
        retry_at: None,
        redrives: run.redrives,
        summary: String::new(),
    };
    match run.run_status {
        RunStatus::Succeeded => {
            p.state = RunState::Succeeded;
            p.since = run.finished_at;
            p.summary = match secs_since(now, run.finished_at) {
                Some(s) => format!("indexed {} ago", duration(s)),
                None => "indexed".into(),
            };
            return p;
        }
        RunStatus::Failed => {
            p.state = RunState::Failed;
            p.since = run.finished_at;
            p.summary = format!("failed at {}", run.failure_stage);
            return p;
        }
        RunStatus::Running => {}
    }
    let (stage, verb, attempts) = match status {
        DocStatus::Pending => {
            p.state = RunState::AwaitingUpload;
            p.stage = Some("store");
            p.since = Some(run.started_at);
            p.for_secs = secs_since(now, p.since);
            p.summary = format!(
                "waiting for the upload, {}",
                duration(p.for_secs.unwrap_or(0))
            );
            return p;
        }
        DocStatus::Stored => ("parse", "parsing", run.parse_attempts),
        _ => ("index", "indexing", run.index_attempts),
    };
    p.stage = Some(stage);
    p.attempts = attempts;
    running_stage(&mut p, run, now, stage, verb);
    if run.redrives > 0 {
        p.summary
            .push_str(&format!(", re-driven {}×", run.redrives));
    }
    p
}

fn secs_since(now: DateTime<Utc>, t: Option<DateTime<Utc>>) -> Option<i64> {
    t.map(|t| (now - t).num_seconds().max(0))
}

/// A running run at `stage`: held by a worker (its lease is live), backing off until its message
/// comes back, or queued.
fn running_stage(p: &mut Progress, run: &Run, now: DateTime<Utc>, stage: &str, verb: &str) {
    let attempts = p.attempts;
    let of_max = match p.max_attempts {
        Some(max) => format!("attempt {attempts} of {max}"),
        None => format!("attempt {attempts}"),
    };
    let leased = !run.lease_owner.is_empty() && run.lease_expires_at.is_some_and(|t| t > now);
    if leased {
        p.state = RunState::Running;
        p.since = run.lease_renewed_at.or(run.queued_at);
        p.lease_renewed_secs_ago = secs_since(now, run.lease_renewed_at);
        p.for_secs = secs_since(now, p.since);
        p.summary = format!(
            "{verb}, {of_max}, lease renewed {} ago",
            duration(p.lease_renewed_secs_ago.unwrap_or(0))
        );
    } else if let Some(retry_at) = run.visible_at.filter(|t| *t > now) {
        p.state = RunState::BackingOff;
        p.retry_at = Some(retry_at);
        p.since = run.queued_at;
        p.for_secs = secs_since(now, p.since);
        p.summary = format!(
            "queued for {stage}, backing off after {of_max}: retried in {}",
            duration((retry_at - now).num_seconds().max(0))
        );
    } else {
        p.state = RunState::Queued;
        p.since = run.queued_at;
        p.for_secs = secs_since(now, p.since);
        let waited = duration(p.for_secs.unwrap_or(0));
        p.summary = if attempts > 0 {
            format!("queued for {stage}, {waited} ({} so far)", plural(attempts))
        } else {
            format!("queued for {stage}, {waited}")
        };
    }
}

fn plural(attempts: i32) -> String {
    if attempts == 1 {
        "1 attempt".into()
    } else {
        format!("{attempts} attempts")
    }
}

/// "3 s", "14 min", "2 h 5 min".
pub fn duration(secs: i64) -> String {
    match secs {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    fn run(now: DateTime<Utc>) -> Run {
        Run {
            run_id: 1,
            doc_id: "doc_x".into(),
            trigger_type: "upload".into(),
            run_status: RunStatus::Running,
            parser_backend: String::new(),
            chunk_backend: String::new(),
            embedding_model: String::new(),
            index_name: String::new(),
            started_at: now - Duration::minutes(20),
            stored_at: Some(now - Duration::minutes(19)),
            parsed_at: Some(now - Duration::minutes(14)),
            indexed_at: None,
            finished_at: None,
            layout_count: 0,
            structure_node_count: 0,
            semantic_block_count: 0,
            vector_chunk_count: 0,
            chunk_count: 0,
            failure_stage: String::new(),
            error_message: String::new(),
            metadata: serde_json::json!({}),
            content_sha256: String::new(),
            deadline_at: None,
            parse_attempts: 1,
            index_attempts: 0,
            queued_at: Some(now - Duration::minutes(14)),
            visible_at: None,
            redrives: 0,
            lease_owner: String::new(),
            lease_expires_at: None,
            lease_renewed_at: None,
            job_unsent: false,
            index_progress: 0,
        }
    }

    #[test]
    fn queued_running_and_backing_off_read_as_people_say_them() {
        let now = Utc::now();
        let mut r = run(now);
        let p = of(&r, DocStatus::Parsed, now, Some(5));
        assert_eq!(p.state, RunState::Queued);
        assert_eq!(p.summary, "queued for index, 14 min");

        r.index_attempts = 2;
        r.lease_owner = "index-1".into();
        r.lease_expires_at = Some(now + Duration::seconds(100));
        r.lease_renewed_at = Some(now - Duration::seconds(3));
        let p = of(&r, DocStatus::Parsed, now, Some(5));
        assert_eq!(p.state, RunState::Running);
        assert_eq!(p.summary, "indexing, attempt 2 of 5, lease renewed 3 s ago");

        // A lease that ran out is not a worker: the run is queued again (the sweeper's business).
        r.lease_expires_at = Some(now - Duration::seconds(1));
        r.visible_at = Some(now + Duration::seconds(90));
        let p = of(&r, DocStatus::Parsed, now, Some(5));
        assert_eq!(p.state, RunState::BackingOff);
        assert_eq!(
            p.summary,
            "queued for index, backing off after attempt 2 of 5: retried in 1 min"
        );
    }
}
