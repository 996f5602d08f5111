-- search_projection: each versioned document's version state as search filters on it before any
-- ranking (seed 001: Milvus's searchable fields are a projection of the release, so that a search
-- carries no lists of version ids). Days count from 1970-01-01; a document answers on day d when
-- `answering` and in_force_from <= d < in_force_to. A document of no version has no row and
-- answers on every day.
--
-- Written in the same transaction as every change it follows (an index commit, a release, a
-- repeal, a delete, a new run), and carried to Milvus through the clean-up outbox ('projection'),
-- which the sweeper works off; the sweeper also recomputes a page of works per run, so a row
-- missed or written before this table existed is put right. It only narrows what is ranked:
-- every hit is still checked against the version state itself.
CREATE TABLE IF NOT EXISTS search_projection (
    doc_id         VARCHAR(128) PRIMARY KEY REFERENCES documents(doc_id) ON DELETE CASCADE,
    answering      BOOLEAN      NOT NULL,
    in_force_from  BIGINT       NOT NULL,
    in_force_to    BIGINT       NOT NULL,
    updated_at     TIMESTAMPTZ  NOT NULL DEFAULT NOW()
);

-- Where the sweeper's recomputation of works goes on from.
CREATE TABLE IF NOT EXISTS search_projection_audit (
    id             BOOLEAN      PRIMARY KEY DEFAULT TRUE CHECK (id),
    after_work_id  BIGINT       NOT NULL DEFAULT 0,
    passes         BIGINT       NOT NULL DEFAULT 0,
    updated_at     TIMESTAMPTZ  NOT NULL DEFAULT NOW()
);
INSERT INTO search_projection_audit (id) VALUES (TRUE) ON CONFLICT DO NOTHING;

ALTER TABLE cleanups DROP CONSTRAINT IF EXISTS ck_cleanups_kind;
ALTER TABLE cleanups ADD CONSTRAINT ck_cleanups_kind
    CHECK (kind IN ('vectors_run', 'artifacts_run', 'document', 'projection'));
