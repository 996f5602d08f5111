-- What the pipeline needs beyond seed 000. Seed 000 leaves these to `metadata`; they are columns here
-- because the stages compare-and-set on them and the sweeper scans them, which JSONB would make slow
-- and unindexed.

-- The run that a message must name to be acted on (stale messages are dropped by comparing with it),
-- and what was stored: the original's sha256 (a re-sent object with the same content starts no run)
-- and its ETag (a duplicate event is recognised without re-reading the object).
ALTER TABLE documents
    ADD COLUMN IF NOT EXISTS current_run_id  BIGINT,
    ADD COLUMN IF NOT EXISTS source_bucket   VARCHAR(255) NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS content_sha256  VARCHAR(64)  NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS source_etag     VARCHAR(128) NOT NULL DEFAULT '';

-- A run's deadline lets the sweeper fail runs that nobody will finish.
ALTER TABLE document_processing_runs
    ADD COLUMN IF NOT EXISTS content_sha256  VARCHAR(64)  NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS deadline_at     TIMESTAMPTZ;

-- At most one run in flight per document: two runs racing to index one document is the
-- double-indexing that this pipeline promises never happens, so the database refuses it.
CREATE UNIQUE INDEX IF NOT EXISTS uq_runs_one_running_per_doc
    ON document_processing_runs(doc_id) WHERE run_status = 'running';

CREATE INDEX IF NOT EXISTS idx_runs_running_deadline
    ON document_processing_runs(deadline_at) WHERE run_status = 'running';
