-- A version's end, when its upload gives one (a temporary regulation, a text known to lapse). The
-- next version's start, or the work's repeal, ends it otherwise; the earliest of the three holds.
ALTER TABLE work_versions ADD COLUMN IF NOT EXISTS effective_to DATE;
ALTER TABLE work_versions ADD COLUMN IF NOT EXISTS effective_to_source VARCHAR(16) NOT NULL DEFAULT '';
