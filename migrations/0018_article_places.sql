-- Where each article is: a block titled 第…条 carries its article as an ordinal (number * 1000 + 之M,
-- as article_references' targets do), so a reference's target is found by one index probe (the
-- article graph in search, cited-by). Non-article blocks keep NULL.
ALTER TABLE semantic_blocks ADD COLUMN IF NOT EXISTS article_ordinal INT;
CREATE INDEX IF NOT EXISTS semantic_blocks_article
    ON semantic_blocks (doc_id, article_ordinal) WHERE article_ordinal IS NOT NULL;

-- Which run's blocks the references (and the ordinals above) were read from, and by which extractor:
-- a document parsed before the graph existed, or by an older extractor, has no row or an old one,
-- and is read again from its stored blocks (no parse, no embedding).
CREATE TABLE IF NOT EXISTS reference_readings (
    doc_id      VARCHAR(128) PRIMARY KEY REFERENCES documents(doc_id) ON DELETE CASCADE,
    run_id      BIGINT       NOT NULL,
    extractor   VARCHAR(32)  NOT NULL,
    references_read INT      NOT NULL,
    read_at     TIMESTAMPTZ  NOT NULL DEFAULT now()
);
