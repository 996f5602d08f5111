-- A rebuild step copies a document too large for one step in parts: the document, its run, the
-- first chunk not copied yet, and whether it came from the walk (whose cursor moves past it once
-- whole) or from the backlog.
ALTER TABLE vector_generations
    ADD COLUMN IF NOT EXISTS partial_doc  VARCHAR(128) NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS partial_run  BIGINT       NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS partial_from INTEGER      NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS partial_walk BOOLEAN      NOT NULL DEFAULT FALSE;
