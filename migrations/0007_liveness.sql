-- Liveness: in each stage a run is either *queued* (its job is on the queue and nobody holds its
-- lease) or *running* (a worker holds the lease and renews it). Waiting is never a failure, so the
-- deadline no longer fails a stored or parsed run; the sweeper instead looks for jobs that were lost
-- and sends them again.
--   queued_at         when this stage's job was last sent (by the previous stage or a re-drive)
--   visible_at        when a message that backed off after a transient error comes back
--   redrives          how often the sweeper has sent this run's job again
--   parse_attempts    deliveries of the parse job that took the lease (index_attempts is index's)
--   lease_renewed_at  when the lease holder last proved it was alive
ALTER TABLE document_processing_runs
    ADD COLUMN IF NOT EXISTS queued_at        TIMESTAMPTZ,
    ADD COLUMN IF NOT EXISTS visible_at       TIMESTAMPTZ,
    ADD COLUMN IF NOT EXISTS redrives         INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS parse_attempts   INTEGER NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS lease_renewed_at TIMESTAMPTZ;

-- What happened to a run that is not a status change: each attempt, each backoff with its error,
-- each re-drive. `document_status_history.to_status` is required, so these live beside it.
CREATE TABLE IF NOT EXISTS run_events (
    event_id    BIGSERIAL    PRIMARY KEY,
    doc_id      VARCHAR(128) NOT NULL,
    run_id      BIGINT       NOT NULL,
    stage       VARCHAR(32)  NOT NULL,
    kind        VARCHAR(32)  NOT NULL,
    attempt     INTEGER      NOT NULL DEFAULT 0,
    message     TEXT         NOT NULL DEFAULT '',
    visible_at  TIMESTAMPTZ,
    occurred_at TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    CONSTRAINT fk_run_events_doc FOREIGN KEY (doc_id) REFERENCES documents(doc_id) ON DELETE CASCADE,
    CONSTRAINT fk_run_events_run FOREIGN KEY (run_id)
        REFERENCES document_processing_runs(run_id) ON DELETE CASCADE,
    CONSTRAINT ck_run_events_kind CHECK (kind IN ('queued', 'attempt', 'backoff', 'redrive', 'lease_expired', 'gave_up', 'timed_out'))
);
CREATE INDEX IF NOT EXISTS idx_run_events_doc ON run_events(doc_id, event_id);
CREATE INDEX IF NOT EXISTS idx_run_events_run ON run_events(run_id, event_id);

-- The sweeper's scan: running runs by stage state.
CREATE INDEX IF NOT EXISTS idx_runs_running_queued
    ON document_processing_runs(queued_at) WHERE run_status = 'running';

-- Runs already in flight when this migration lands are queued from when they entered their stage.
UPDATE document_processing_runs SET queued_at = COALESCE(parsed_at, stored_at)
WHERE run_status = 'running' AND queued_at IS NULL;
