-- Seed 004 §14: an audit record for every registration, retry and delete: who, when, what, and the
-- result. No foreign key to documents: the record outlives the document it names.
CREATE TABLE IF NOT EXISTS audit_log (
    id           BIGSERIAL PRIMARY KEY,
    actor_type   VARCHAR(32)  NOT NULL DEFAULT 'user',
    actor_id     VARCHAR(256) NOT NULL DEFAULT '',
    action       VARCHAR(64)  NOT NULL,
    target_type  VARCHAR(32)  NOT NULL DEFAULT 'document',
    target_id    VARCHAR(128) NOT NULL DEFAULT '',
    request_id   VARCHAR(128) NOT NULL DEFAULT '',
    result       VARCHAR(32)  NOT NULL,
    detail       JSONB        NOT NULL DEFAULT '{}'::jsonb,
    created_at   TIMESTAMPTZ  NOT NULL DEFAULT NOW()
);

CREATE INDEX IF NOT EXISTS idx_audit_log_target ON audit_log(target_type, target_id, created_at DESC);
CREATE INDEX IF NOT EXISTS idx_audit_log_created_at ON audit_log(created_at DESC);

-- Idempotent requests (seed 004: an idempotent request reuses the original result): the same key on
-- the same operation answers what it answered the first time, and does nothing twice.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    scope        VARCHAR(64)  NOT NULL,
    key          VARCHAR(256) NOT NULL,
    status_code  INTEGER      NOT NULL,
    response     JSONB        NOT NULL,
    created_at   TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    PRIMARY KEY (scope, key)
);
