-- What outlives a document's row.
--
-- object_tombstones: a delete remembers which object it removed, and when. An ObjectCreated event
-- for a version older than the delete (a late or duplicated notification, or a store that was
-- hashing while the delete committed) is stale and is dropped; an upload made after the delete is a
-- new document. Rows are kept for twice the store queue's retention (no event can wait longer), then
-- the sweeper prunes them.
CREATE TABLE IF NOT EXISTS object_tombstones (
    bucket      VARCHAR(255)  NOT NULL,
    object_name VARCHAR(1024) NOT NULL,
    doc_id      VARCHAR(128)  NOT NULL,
    deleted_at  TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
    PRIMARY KEY (bucket, object_name)
);
CREATE INDEX IF NOT EXISTS idx_object_tombstones_deleted_at ON object_tombstones(deleted_at);

-- cleanups: an outbox of removals a stage or a delete decided on. The row is written in the same
-- transaction as the decision, removed once the removal succeeded, and retried by the sweeper until
-- then, so a removal that failed (Milvus or S3 down) is never forgotten. No foreign key: it must
-- outlive the document.
--   kind  'vectors_run'   the vectors of (doc_id, run_id)
--         'artifacts_run' the artifacts under artifacts/{doc_id}/{run_id}/
--         'document'      a delete to finish (original, artifacts, vectors, then the row)
CREATE TABLE IF NOT EXISTS cleanups (
    cleanup_id  BIGSERIAL    PRIMARY KEY,
    kind        VARCHAR(32)  NOT NULL,
    doc_id      VARCHAR(128) NOT NULL,
    run_id      BIGINT,
    reason      TEXT         NOT NULL DEFAULT '',
    attempts    INTEGER      NOT NULL DEFAULT 0,
    last_error  TEXT         NOT NULL DEFAULT '',
    created_at  TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    next_at     TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    CONSTRAINT ck_cleanups_kind CHECK (kind IN ('vectors_run', 'artifacts_run', 'document'))
);
CREATE UNIQUE INDEX IF NOT EXISTS uq_cleanups_target ON cleanups(kind, doc_id, COALESCE(run_id, 0));
CREATE INDEX IF NOT EXISTS idx_cleanups_next ON cleanups(next_at);

-- intake_failures: an upload that reached the store function and did not become a document (a data
-- error, an event the queue gave up on). Every upload ends as a document or as one of these.
CREATE TABLE IF NOT EXISTS intake_failures (
    failure_id  BIGSERIAL     PRIMARY KEY,
    bucket      VARCHAR(255)  NOT NULL,
    object_name VARCHAR(1024) NOT NULL,
    reason      TEXT          NOT NULL,
    deliveries  INTEGER       NOT NULL DEFAULT 0,
    failed_at   TIMESTAMPTZ   NOT NULL DEFAULT NOW()
);
CREATE INDEX IF NOT EXISTS idx_intake_failures_failed_at ON intake_failures(failed_at DESC, failure_id DESC);
