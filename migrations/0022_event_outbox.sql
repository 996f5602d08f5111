-- event_outbox: what docpipe tells the systems downstream (a RAG service re-reading a changed
-- article, a compliance tracker, a dashboard), written in the same transaction as the state each
-- event announces, so that no committed change goes unannounced and no rolled-back one is
-- announced. The pipeline publishes to EventBridge right after its commits; the sweeper publishes
-- whatever is still unsent (a failed or interrupted publication), so delivery is at least once.
-- `event_id` is stable (derived from what the event announces), so a consumer deduplicates on it
-- and a second write of the same announcement is no second event.
CREATE TABLE IF NOT EXISTS event_outbox (
    seq              BIGSERIAL    PRIMARY KEY,
    event_id         VARCHAR(256) NOT NULL UNIQUE,
    detail_type      VARCHAR(64)  NOT NULL,
    -- No foreign keys: a DocumentDeleted outlives its document, a WorkRepealed its versions.
    doc_id           VARCHAR(128),
    work_id          BIGINT,
    detail           JSONB        NOT NULL,
    created_at       TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    sent_at          TIMESTAMPTZ,
    attempts         INTEGER      NOT NULL DEFAULT 0,
    -- When a publisher may take it next: now for a new event, later for one claimed (so two
    -- publishers rarely send it twice) or one whose send failed (backed off).
    next_attempt_at  TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    last_error       TEXT         NOT NULL DEFAULT ''
);

-- The publishers' queue: only what is unsent, oldest first.
CREATE INDEX IF NOT EXISTS idx_event_outbox_due
    ON event_outbox (next_attempt_at, seq) WHERE sent_at IS NULL;
-- What the sweeper prunes once sent and old.
CREATE INDEX IF NOT EXISTS idx_event_outbox_sent
    ON event_outbox (sent_at) WHERE sent_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_event_outbox_doc ON event_outbox (doc_id, seq);
