-- A stage that writes outside PostgreSQL (vectors into Milvus) takes a lease on its run first (seed
-- 001: a stage is a retryable task with a lease), so that two deliveries of one message never write
-- two sets of vectors. The lease expires, so a worker that dies does not hold the run forever.
ALTER TABLE document_processing_runs
    ADD COLUMN IF NOT EXISTS lease_owner      VARCHAR(128) NOT NULL DEFAULT '',
    ADD COLUMN IF NOT EXISTS lease_expires_at TIMESTAMPTZ;

-- A delete marks the document first: from then on every stage treats it as gone and removes what it
-- wrote, so a delete racing an in-flight stage leaves no orphan object or vector. The row itself
-- goes last (seed 000 §6.7), when S3 and Milvus are clean.
ALTER TABLE documents
    ADD COLUMN IF NOT EXISTS deleting_at TIMESTAMPTZ;
