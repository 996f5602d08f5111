-- Laws over time. A work is one regulation (its citable title, normalised, and its issuing level);
-- a version is one text of it, with its dates and where each came from; a document is a rendition
-- of one version (the same version as md and pdf are two documents of one version).
--
-- Nothing here says which version is current: that follows from the dates and from which versions
-- answer (a version answers while one of its documents is indexed and not being deleted), so a
-- version still indexing, failed or deleted never answers, and deleting the current version's
-- last document hands "current" back to the version before it in the delete's own transaction.
CREATE TABLE IF NOT EXISTS works (
    work_id            BIGSERIAL     PRIMARY KEY,
    title              VARCHAR(512)  NOT NULL,
    title_key          VARCHAR(512)  NOT NULL,
    level              VARCHAR(128)  NOT NULL DEFAULT '',
    -- 'upload' (the registration's regulation_type) or 'title' (inferred from the title's ending)
    level_source       VARCHAR(16)   NOT NULL DEFAULT '',
    repealed_on        DATE,
    successor_work_id  BIGINT        REFERENCES works(work_id) ON DELETE SET NULL,
    created_at         TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
    updated_at         TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
    CONSTRAINT uq_works_title_level UNIQUE (title_key, level)
);

CREATE TABLE IF NOT EXISTS work_versions (
    version_id             BIGSERIAL     PRIMARY KEY,
    work_id                BIGINT        NOT NULL REFERENCES works(work_id) ON DELETE CASCADE,
    -- The version's name: the upload's `version`, else its date (YYYY-MM-DD).
    label                  VARCHAR(64)   NOT NULL,
    label_source           VARCHAR(16)   NOT NULL,
    promulgated_on         DATE,
    promulgated_source     VARCHAR(16)   NOT NULL DEFAULT '',
    effective_from         DATE,
    effective_from_source  VARCHAR(16)   NOT NULL DEFAULT '',
    -- The heading notes as read, and which source won where they disagreed, and why.
    notes                  JSONB         NOT NULL DEFAULT '[]'::jsonb,
    decisions              JSONB         NOT NULL DEFAULT '[]'::jsonb,
    created_at             TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
    updated_at             TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
    CONSTRAINT uq_work_versions_label UNIQUE (work_id, label)
);

CREATE TABLE IF NOT EXISTS version_documents (
    doc_id       VARCHAR(128)  PRIMARY KEY REFERENCES documents(doc_id) ON DELETE CASCADE,
    version_id   BIGINT        NOT NULL REFERENCES work_versions(version_id) ON DELETE CASCADE,
    run_id       BIGINT        NOT NULL,
    assigned_at  TIMESTAMPTZ   NOT NULL DEFAULT NOW()
);
CREATE INDEX IF NOT EXISTS idx_version_documents_version ON version_documents(version_id);
