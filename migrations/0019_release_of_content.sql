-- A release approves content, not a label: the rendition (document) and the sha256 of what it held
-- when it was released, and who released it. A rendition answers only while its document still
-- holds the content released, so in the manual mode a new rendition of a released version, or an
-- overwrite of a released rendition, waits for a release of its own. In the default mode the index
-- commit releases what it commits.
ALTER TABLE version_documents ADD COLUMN IF NOT EXISTS released_sha256 VARCHAR(64);
ALTER TABLE version_documents ADD COLUMN IF NOT EXISTS released_by VARCHAR(256);
ALTER TABLE version_documents ADD COLUMN IF NOT EXISTS released_at TIMESTAMPTZ;
-- Renditions of versions released before this: released, of the content they hold now.
UPDATE version_documents vd
   SET released_sha256 = d.content_sha256, released_by = 'migration 0019',
       released_at = v.released_at
  FROM documents d, work_versions v
 WHERE d.doc_id = vd.doc_id AND v.version_id = vd.version_id
   AND v.released_at IS NOT NULL AND vd.released_sha256 IS NULL;
