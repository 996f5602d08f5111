-- index_progress: how many of the run's chunks (in order) an index attempt inserted into Milvus
-- and recorded, under its lease. The next attempt of the same run keeps those and goes on from
-- there, so a document too large for one invocation finishes across deliveries.
ALTER TABLE document_processing_runs
    ADD COLUMN IF NOT EXISTS index_progress INTEGER NOT NULL DEFAULT 0;
