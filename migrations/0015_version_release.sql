-- The release gate (seed 001's knowledge_release): a version answers only once released. In the
-- default mode the index commit releases it with the document that completes it; in the manual
-- mode (template parameter ReleaseMode=manual) it waits, indexed, for
-- POST /works/{id}/versions/{doc_id}/release. Versions recorded before the gate were all
-- answering: they count as released when they were recorded.
ALTER TABLE work_versions ADD COLUMN IF NOT EXISTS released_at TIMESTAMPTZ;
UPDATE work_versions SET released_at = created_at WHERE released_at IS NULL;
