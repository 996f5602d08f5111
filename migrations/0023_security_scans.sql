-- Seed 004's security_scans and security_findings, for the sensitive-data scan of each run's
-- parse (docpipe_parse::sensitive): the target is the run (its parsed text), the owner the
-- document. A finding never holds the value it found: masked_sample keeps a few characters of it
-- at most, and location_json says where (block, article, paragraph, character).
CREATE TABLE IF NOT EXISTS security_scans (
    scan_id          BIGSERIAL    PRIMARY KEY,
    doc_id           VARCHAR(128) NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    run_id           BIGINT       NOT NULL REFERENCES document_processing_runs(run_id) ON DELETE CASCADE,
    target_type      VARCHAR(32)  NOT NULL DEFAULT 'document_run',
    scanner_version  VARCHAR(64)  NOT NULL,
    -- What a finding did: warn (indexed as is, findings shown) or mask (indexed with the values
    -- masked in blocks, chunks and artifacts).
    policy           VARCHAR(16)  NOT NULL,
    status           VARCHAR(16)  NOT NULL,
    risk_level       VARCHAR(16)  NOT NULL,
    findings_count   INTEGER      NOT NULL DEFAULT 0,
    summary_json     JSONB        NOT NULL DEFAULT '{}'::jsonb,
    started_at       TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    completed_at     TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    CONSTRAINT ck_security_scans_status
        CHECK (status IN ('queued', 'running', 'passed', 'warned', 'blocked', 'failed')),
    CONSTRAINT ck_security_scans_risk
        CHECK (risk_level IN ('none', 'low', 'medium', 'high', 'critical')),
    CONSTRAINT ck_security_scans_policy CHECK (policy IN ('warn', 'mask', 'block'))
);
-- One scan per run: a parse that commits again replaces it with the snapshot.
CREATE UNIQUE INDEX IF NOT EXISTS uq_security_scans_run ON security_scans (run_id);
CREATE INDEX IF NOT EXISTS idx_security_scans_doc ON security_scans (doc_id, scan_id DESC);

CREATE TABLE IF NOT EXISTS security_findings (
    finding_id          BIGSERIAL    PRIMARY KEY,
    scan_id             BIGINT       NOT NULL REFERENCES security_scans(scan_id) ON DELETE CASCADE,
    finding_type        VARCHAR(64)  NOT NULL,
    severity            VARCHAR(16)  NOT NULL,
    location_json       JSONB        NOT NULL,
    masked_sample       VARCHAR(128) NOT NULL,
    recommended_action  VARCHAR(256) NOT NULL DEFAULT '',
    resolution          VARCHAR(32)  NOT NULL DEFAULT '',
    resolved_by         VARCHAR(128) NOT NULL DEFAULT '',
    resolved_at         TIMESTAMPTZ
);
CREATE INDEX IF NOT EXISTS idx_security_findings_scan ON security_findings (scan_id, finding_id);
