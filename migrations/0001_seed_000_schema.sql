-- Seed 000 (文档处理链路数据库设计) section 4, verbatim: the six tables of the document processing chain.
-- Later migrations add; they never rewrite this file.

CREATE TABLE IF NOT EXISTS documents (
    doc_id              VARCHAR(128) PRIMARY KEY,
    doc_name            VARCHAR(512)  NOT NULL DEFAULT '',
    file_name           VARCHAR(512)  NOT NULL DEFAULT '',
    object_name         VARCHAR(1024) NOT NULL DEFAULT '',
    content_type        VARCHAR(128)  NOT NULL DEFAULT '',
    size_bytes          BIGINT        NOT NULL DEFAULT 0,
    status              VARCHAR(32)   NOT NULL DEFAULT 'pending',
    regulation_type     VARCHAR(128)  NOT NULL DEFAULT '',
    version             VARCHAR(64)   NOT NULL DEFAULT '',
    summary             TEXT          NOT NULL DEFAULT '',
    summary_latency_ms  INTEGER       NOT NULL DEFAULT 0,
    chunk_count         INTEGER       NOT NULL DEFAULT 0,
    parser_name         VARCHAR(128)  NOT NULL DEFAULT '',
    index_name          VARCHAR(128)  NOT NULL DEFAULT '',
    error_message       TEXT          NOT NULL DEFAULT '',
    metadata            JSONB         NOT NULL DEFAULT '{}'::jsonb,
    created_at          TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
    updated_at          TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
    CONSTRAINT chk_documents_status
        CHECK (status IN ('pending', 'stored', 'parsed', 'indexed', 'failed'))
);

CREATE INDEX IF NOT EXISTS idx_documents_status_updated_at
    ON documents(status, updated_at DESC);

CREATE INDEX IF NOT EXISTS idx_documents_regulation_version
    ON documents(regulation_type, version);

CREATE INDEX IF NOT EXISTS idx_documents_updated_at
    ON documents(updated_at DESC);

CREATE TABLE IF NOT EXISTS document_processing_runs (
    run_id                 BIGSERIAL PRIMARY KEY,
    doc_id                 VARCHAR(128) NOT NULL,
    trigger_type           VARCHAR(16)  NOT NULL,
    run_status             VARCHAR(16)  NOT NULL,
    parser_backend         VARCHAR(64)  NOT NULL DEFAULT '',
    chunk_backend          VARCHAR(64)  NOT NULL DEFAULT '',
    embedding_model        VARCHAR(128) NOT NULL DEFAULT '',
    index_name             VARCHAR(128) NOT NULL DEFAULT '',
    started_at             TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    stored_at              TIMESTAMPTZ,
    parsed_at              TIMESTAMPTZ,
    indexed_at             TIMESTAMPTZ,
    finished_at            TIMESTAMPTZ,
    layout_count           INTEGER      NOT NULL DEFAULT 0,
    structure_node_count   INTEGER      NOT NULL DEFAULT 0,
    semantic_block_count   INTEGER      NOT NULL DEFAULT 0,
    vector_chunk_count     INTEGER      NOT NULL DEFAULT 0,
    chunk_count            INTEGER      NOT NULL DEFAULT 0,
    failure_stage          VARCHAR(32)  NOT NULL DEFAULT '',
    error_message          TEXT         NOT NULL DEFAULT '',
    metadata               JSONB        NOT NULL DEFAULT '{}'::jsonb,
    CONSTRAINT fk_runs_document
        FOREIGN KEY (doc_id) REFERENCES documents(doc_id) ON DELETE CASCADE,
    CONSTRAINT chk_runs_trigger_type
        CHECK (trigger_type IN ('upload', 'retry')),
    CONSTRAINT chk_runs_status
        CHECK (run_status IN ('running', 'succeeded', 'failed'))
);

CREATE INDEX IF NOT EXISTS idx_runs_doc_started_at
    ON document_processing_runs(doc_id, started_at DESC);

CREATE INDEX IF NOT EXISTS idx_runs_status_started_at
    ON document_processing_runs(run_status, started_at DESC);

CREATE TABLE IF NOT EXISTS document_status_history (
    event_id         BIGSERIAL PRIMARY KEY,
    doc_id           VARCHAR(128) NOT NULL,
    run_id           BIGINT,
    from_status      VARCHAR(32)  NOT NULL DEFAULT '',
    to_status        VARCHAR(32)  NOT NULL,
    stage            VARCHAR(32)  NOT NULL DEFAULT '',
    message          TEXT         NOT NULL DEFAULT '',
    metadata         JSONB        NOT NULL DEFAULT '{}'::jsonb,
    occurred_at      TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    CONSTRAINT fk_status_document
        FOREIGN KEY (doc_id) REFERENCES documents(doc_id) ON DELETE CASCADE,
    CONSTRAINT fk_status_run
        FOREIGN KEY (run_id) REFERENCES document_processing_runs(run_id) ON DELETE CASCADE,
    CONSTRAINT chk_status_history_to_status
        CHECK (to_status IN ('pending', 'stored', 'parsed', 'indexed', 'failed'))
);

CREATE INDEX IF NOT EXISTS idx_status_history_doc_occurred_at
    ON document_status_history(doc_id, occurred_at DESC);

CREATE INDEX IF NOT EXISTS idx_status_history_run_occurred_at
    ON document_status_history(run_id, occurred_at DESC);

CREATE TABLE IF NOT EXISTS document_artifacts (
    artifact_id       BIGSERIAL PRIMARY KEY,
    doc_id            VARCHAR(128)  NOT NULL,
    run_id            BIGINT,
    artifact_type     VARCHAR(32)   NOT NULL,
    object_name       VARCHAR(1024) NOT NULL,
    content_type      VARCHAR(128)  NOT NULL DEFAULT 'application/json',
    byte_size         BIGINT        NOT NULL DEFAULT 0,
    checksum          VARCHAR(128)  NOT NULL DEFAULT '',
    metadata          JSONB         NOT NULL DEFAULT '{}'::jsonb,
    created_at        TIMESTAMPTZ   NOT NULL DEFAULT NOW(),
    CONSTRAINT fk_artifacts_document
        FOREIGN KEY (doc_id) REFERENCES documents(doc_id) ON DELETE CASCADE,
    CONSTRAINT fk_artifacts_run
        FOREIGN KEY (run_id) REFERENCES document_processing_runs(run_id) ON DELETE CASCADE,
    CONSTRAINT chk_artifact_type
        CHECK (artifact_type IN ('layouts', 'structure_nodes', 'semantic_blocks', 'vector_chunks'))
);

CREATE INDEX IF NOT EXISTS idx_artifacts_doc_created_at
    ON document_artifacts(doc_id, created_at DESC);

CREATE INDEX IF NOT EXISTS idx_artifacts_run_type
    ON document_artifacts(run_id, artifact_type);

CREATE UNIQUE INDEX IF NOT EXISTS uq_artifacts_run_type_object
    ON document_artifacts(run_id, artifact_type, object_name);

CREATE TABLE IF NOT EXISTS structure_nodes (
    id             BIGSERIAL PRIMARY KEY,
    doc_id         VARCHAR(128) NOT NULL,
    unique_id      VARCHAR(128),
    page           INTEGER      NOT NULL DEFAULT 0,
    idx            INTEGER      NOT NULL DEFAULT 0,
    level          INTEGER      NOT NULL DEFAULT 0,
    title          TEXT         NOT NULL DEFAULT '',
    type           VARCHAR(64),
    sub_type       VARCHAR(64),
    created_at     TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    CONSTRAINT fk_structure_nodes_document
        FOREIGN KEY (doc_id) REFERENCES documents(doc_id) ON DELETE CASCADE
);

CREATE INDEX IF NOT EXISTS idx_structure_nodes_doc_idx
    ON structure_nodes(doc_id, idx);

CREATE INDEX IF NOT EXISTS idx_structure_nodes_doc_level
    ON structure_nodes(doc_id, level);

CREATE TABLE IF NOT EXISTS semantic_blocks (
    id              BIGSERIAL PRIMARY KEY,
    doc_id          VARCHAR(128) NOT NULL,
    semantic_id     VARCHAR(128) NOT NULL,
    block_type      VARCHAR(64)  NOT NULL DEFAULT '',
    page_start      INTEGER      NOT NULL DEFAULT 0,
    page_end        INTEGER      NOT NULL DEFAULT 0,
    section_path    JSONB        NOT NULL DEFAULT '[]'::jsonb,
    section_level   INTEGER      NOT NULL DEFAULT 0,
    section_title   VARCHAR(512) NOT NULL DEFAULT '',
    source_ids      JSONB        NOT NULL DEFAULT '[]'::jsonb,
    text            TEXT         NOT NULL DEFAULT '',
    created_at      TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    CONSTRAINT fk_semantic_blocks_document
        FOREIGN KEY (doc_id) REFERENCES documents(doc_id) ON DELETE CASCADE,
    CONSTRAINT uq_semantic_blocks_doc_semantic
        UNIQUE (doc_id, semantic_id)
);

CREATE INDEX IF NOT EXISTS idx_semantic_blocks_doc_id
    ON semantic_blocks(doc_id);

CREATE INDEX IF NOT EXISTS idx_semantic_blocks_doc_section_title
    ON semantic_blocks(doc_id, section_title);

CREATE INDEX IF NOT EXISTS idx_semantic_blocks_doc_block_type
    ON semantic_blocks(doc_id, block_type);
