-- reconcile_cursors: where the sweeper's reconcile stopped in each listing it pages through (a
-- vector collection by chunk id, a bucket's artifacts by key), so that each sweep reads one
-- bounded page and the next goes on from there; past the end it starts over and counts a pass.
-- An empty position is the start of the listing.
CREATE TABLE IF NOT EXISTS reconcile_cursors (
    name       VARCHAR(255)  PRIMARY KEY,
    position   VARCHAR(1024) NOT NULL DEFAULT '',
    passes     BIGINT        NOT NULL DEFAULT 0,
    updated_at TIMESTAMPTZ   NOT NULL DEFAULT NOW()
);

-- Idempotency keys expire a day after their request; the sweeper deletes the expired ones, oldest
-- first.
CREATE INDEX IF NOT EXISTS idx_idempotency_keys_created_at ON idempotency_keys(created_at);
