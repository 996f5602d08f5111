-- The index stage counts its attempts on a run. The first attempt knows that nothing of the run
-- can be in Milvus yet, so it skips the clean-up and the read-back that a retry needs (each one
-- waits for Milvus's consistency point, about a third of a second); a retry does both.
ALTER TABLE document_processing_runs
    ADD COLUMN IF NOT EXISTS index_attempts INTEGER NOT NULL DEFAULT 0;
