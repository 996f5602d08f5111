-- Tenants (seeds 001, 004): `organ_id` is the tenant key. Every document belongs to one tenant,
-- and what hangs off a document carries its tenant too, so a statement about one table can be
-- kept to one tenant without a join. `public` holds the law library every tenant may read; only
-- a publisher writes to it. Every row that exists before this migration belongs to `default`.

CREATE TABLE IF NOT EXISTS tenants (
    organ_id    VARCHAR(64)  PRIMARY KEY
        CHECK (organ_id ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
    created_at  TIMESTAMPTZ  NOT NULL DEFAULT NOW()
);
INSERT INTO tenants (organ_id) VALUES ('default'), ('public') ON CONFLICT DO NOTHING;
-- What a finding of the sensitive-data scan does in this tenant's documents; NULL: the
-- deployment's (the template's ScanPolicy).
ALTER TABLE tenants ADD COLUMN IF NOT EXISTS scan_policy VARCHAR(8)
    CHECK (scan_policy IN ('warn', 'mask', 'block'));

-- The tenant an upload key names: `uploads/<organ_id>/…` when its first folder is a known tenant,
-- else `default` (keys from before tenants, and the API's legacy `uploads/<doc_id>/<file>`).
CREATE OR REPLACE FUNCTION docpipe_tenant_of_key(object_key TEXT) RETURNS VARCHAR
LANGUAGE sql STABLE AS $$
    SELECT COALESCE(
        (SELECT t.organ_id FROM tenants t
         WHERE object_key LIKE 'uploads/%/_%' AND t.organ_id = split_part(object_key, '/', 2)),
        'default')
$$;

ALTER TABLE documents ADD COLUMN IF NOT EXISTS organ_id VARCHAR(64) NOT NULL DEFAULT 'default';
CREATE INDEX IF NOT EXISTS idx_documents_organ_updated
    ON documents(organ_id, updated_at DESC, doc_id DESC);

-- A row that hangs off a document takes the document's tenant when it is written, whatever the
-- statement that writes it says: one place decides, and no writer can get it wrong.
CREATE OR REPLACE FUNCTION docpipe_organ_of_document() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT d.organ_id INTO NEW.organ_id FROM documents d WHERE d.doc_id = NEW.doc_id;
    IF NEW.organ_id IS NULL THEN
        NEW.organ_id := 'default';
    END IF;
    RETURN NEW;
END
$$;

DO $$
DECLARE
    t TEXT;
BEGIN
    FOREACH t IN ARRAY ARRAY['document_processing_runs', 'document_artifacts',
                             'article_references', 'security_scans', 'keyword_documents']
    LOOP
        EXECUTE format('ALTER TABLE %I ADD COLUMN IF NOT EXISTS organ_id VARCHAR(64) NOT NULL DEFAULT ''default''', t);
        EXECUTE format('DROP TRIGGER IF EXISTS trg_%s_organ ON %I', t, t);
        EXECUTE format('CREATE TRIGGER trg_%s_organ BEFORE INSERT ON %I
                        FOR EACH ROW EXECUTE FUNCTION docpipe_organ_of_document()', t, t);
    END LOOP;
END
$$;

-- Works are per tenant: a tenant's own text of a law is its own work, never merged into the
-- public library's (or another tenant's) work of the same title.
ALTER TABLE works ADD COLUMN IF NOT EXISTS organ_id VARCHAR(64) NOT NULL DEFAULT 'default';
ALTER TABLE works DROP CONSTRAINT IF EXISTS uq_works_title_level;
ALTER TABLE works DROP CONSTRAINT IF EXISTS uq_works_organ_title_level;
ALTER TABLE works ADD CONSTRAINT uq_works_organ_title_level UNIQUE (organ_id, title_key, level);
CREATE INDEX IF NOT EXISTS idx_works_organ ON works(organ_id, work_id);

ALTER TABLE work_versions ADD COLUMN IF NOT EXISTS organ_id VARCHAR(64) NOT NULL DEFAULT 'default';
CREATE OR REPLACE FUNCTION docpipe_organ_of_work() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT w.organ_id INTO NEW.organ_id FROM works w WHERE w.work_id = NEW.work_id;
    IF NEW.organ_id IS NULL THEN
        NEW.organ_id := 'default';
    END IF;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS trg_work_versions_organ ON work_versions;
CREATE TRIGGER trg_work_versions_organ BEFORE INSERT ON work_versions
    FOR EACH ROW EXECUTE FUNCTION docpipe_organ_of_work();

-- Written by the API, which knows the caller's tenant.
ALTER TABLE audit_log ADD COLUMN IF NOT EXISTS organ_id VARCHAR(64) NOT NULL DEFAULT 'default';
ALTER TABLE idempotency_keys ADD COLUMN IF NOT EXISTS organ_id VARCHAR(64) NOT NULL DEFAULT 'default';
ALTER TABLE idempotency_keys DROP CONSTRAINT IF EXISTS idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD PRIMARY KEY (organ_id, scope, key);

-- Written by intake, from the key.
ALTER TABLE intake_failures ADD COLUMN IF NOT EXISTS organ_id VARCHAR(64) NOT NULL DEFAULT 'default';
CREATE OR REPLACE FUNCTION docpipe_organ_of_key() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.organ_id := docpipe_tenant_of_key(NEW.object_name);
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS trg_intake_failures_organ ON intake_failures;
CREATE TRIGGER trg_intake_failures_organ BEFORE INSERT ON intake_failures
    FOR EACH ROW EXECUTE FUNCTION docpipe_organ_of_key();
CREATE INDEX IF NOT EXISTS idx_intake_failures_organ
    ON intake_failures(organ_id, failed_at DESC, failure_id DESC);

-- The keyword index per tenant: a term's best postings are read per tenant (a tenant's few
-- articles are never crowded out of the per-term bound by a large public library), and its
-- document frequencies are counted per tenant, so no score reveals another tenant's text.
ALTER TABLE keyword_postings ADD COLUMN IF NOT EXISTS organ_id VARCHAR(64) NOT NULL DEFAULT 'default';
DROP INDEX IF EXISTS idx_keyword_postings_term_impact;
CREATE INDEX IF NOT EXISTS idx_keyword_postings_organ_term_impact
    ON keyword_postings(organ_id, term, impact DESC) INCLUDE (block_id);

ALTER TABLE keyword_terms ADD COLUMN IF NOT EXISTS organ_id VARCHAR(64) NOT NULL DEFAULT 'default';
ALTER TABLE keyword_terms DROP CONSTRAINT IF EXISTS keyword_terms_pkey;
ALTER TABLE keyword_terms ADD PRIMARY KEY (organ_id, term);
CREATE INDEX IF NOT EXISTS idx_keyword_documents_organ ON keyword_documents(organ_id);

-- Every event names the tenant of what it announces, so a consumer keeps to its own.
ALTER TABLE event_outbox ADD COLUMN IF NOT EXISTS organ_id VARCHAR(64) NOT NULL DEFAULT 'default';

-- Searches per tenant per minute, for the quota: one row a tenant a minute, pruned by the sweeper.
CREATE TABLE IF NOT EXISTS tenant_search_minutes (
    organ_id  VARCHAR(64)  NOT NULL,
    minute    TIMESTAMPTZ  NOT NULL,
    searches  INTEGER      NOT NULL DEFAULT 0,
    PRIMARY KEY (organ_id, minute)
);
