-- vector_generations: which Milvus collection search reads, with which embedder, and the one
-- being built beside it from the stored chunks (a new embedding model, blue/green). PostgreSQL
-- decides: one compare-and-set of `state` switches search, and every function reads the active
-- generation from here (a deployment with no row reads the collection and embedder it is
-- configured with, as before).
CREATE TABLE IF NOT EXISTS vector_generations (
    generation_id  BIGSERIAL    PRIMARY KEY,
    collection     VARCHAR(255) NOT NULL UNIQUE,
    -- The embedder's settings over the function's environment (DOCPIPE_EMBEDDER and its own
    -- variables; never a secret, which stays in the environment).
    embedder       JSONB        NOT NULL,
    model_id       VARCHAR(128) NOT NULL,
    dimension      INTEGER      NOT NULL CHECK (dimension > 0),
    state          VARCHAR(16)  NOT NULL,
    -- A building generation that switches by itself once its check passes (else it waits, ready,
    -- for an operator's switch).
    auto_switch    BOOLEAN      NOT NULL DEFAULT TRUE,
    -- A retired collection that stays in Milvus after its grace period.
    keep           BOOLEAN      NOT NULL DEFAULT FALSE,
    -- How long the collection this one replaces stays (still written to) after the switch.
    grace_secs     DOUBLE PRECISION NOT NULL DEFAULT 3600 CHECK (grace_secs >= 0),
    -- The rebuild's walk: documents in doc_id order, the last one done, and a step counter that a
    -- rebuild message must name (a duplicate or stale message finds another and is dropped).
    cursor         VARCHAR(128) NOT NULL DEFAULT '',
    walked         BOOLEAN      NOT NULL DEFAULT FALSE,
    step           BIGINT       NOT NULL DEFAULT 0,
    docs_total     INTEGER      NOT NULL DEFAULT 0,
    chunks_total   BIGINT       NOT NULL DEFAULT 0,
    docs_done      INTEGER      NOT NULL DEFAULT 0,
    chunks_done    BIGINT       NOT NULL DEFAULT 0,
    lease_owner    VARCHAR(64),
    lease_until    TIMESTAMPTZ,
    last_error     TEXT         NOT NULL DEFAULT '',
    check_report   JSONB,
    requested_by   VARCHAR(256) NOT NULL DEFAULT '',
    created_at     TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    updated_at     TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    ready_at       TIMESTAMPTZ,
    switched_at    TIMESTAMPTZ,
    retired_at     TIMESTAMPTZ,
    drop_after     TIMESTAMPTZ,
    dropped_at     TIMESTAMPTZ,
    CONSTRAINT chk_vector_generations_state
        CHECK (state IN ('building', 'ready', 'active', 'retired', 'cancelled', 'dropped'))
);

-- One collection answers searches; one is built at a time (a second rebuild is refused).
CREATE UNIQUE INDEX IF NOT EXISTS uq_vector_generations_active
    ON vector_generations ((state)) WHERE state = 'active';
CREATE UNIQUE INDEX IF NOT EXISTS uq_vector_generations_building
    ON vector_generations ((TRUE)) WHERE state IN ('building', 'ready');

-- Documents indexed while a generation was built, behind its walk: written in the index commit's
-- transaction, so none is missed, and copied before the switch.
CREATE TABLE IF NOT EXISTS vector_generation_backlog (
    generation_id  BIGINT       NOT NULL REFERENCES vector_generations(generation_id) ON DELETE CASCADE,
    doc_id         VARCHAR(128) NOT NULL,
    created_at     TIMESTAMPTZ  NOT NULL DEFAULT NOW(),
    PRIMARY KEY (generation_id, doc_id)
);
