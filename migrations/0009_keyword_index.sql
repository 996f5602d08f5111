-- The keyword index: BM25 over semantic_blocks (the article is the unit), kept in PostgreSQL so
-- it commits in the same transaction as the run it belongs to and is checked by the same rows
-- search already trusts. Terms are 64-bit hashes of the analyzer's tokens (shared/src/analyzer).
-- Written by the index stage's commit; removed wherever semantic_blocks or the document go
-- (db/keyword.rs), so document frequencies stay exact.

-- One row per document whose current run is in the keyword index.
CREATE TABLE IF NOT EXISTS keyword_documents (
    doc_id       VARCHAR(128) PRIMARY KEY REFERENCES documents(doc_id) ON DELETE CASCADE,
    run_id       BIGINT       NOT NULL,
    analyzer     VARCHAR(64)  NOT NULL,
    -- The law as it is cited (its first heading, else the document name), and the same title
    -- normalised for matching a law that a query names.
    title        TEXT         NOT NULL,
    title_key    TEXT         NOT NULL,
    block_count  INTEGER      NOT NULL,
    indexed_at   TIMESTAMPTZ  NOT NULL DEFAULT NOW()
);
CREATE INDEX IF NOT EXISTS idx_keyword_documents_title_key ON keyword_documents(title_key);
CREATE INDEX IF NOT EXISTS idx_keyword_documents_analyzer ON keyword_documents(analyzer);

-- One row per indexed block; `terms` lists its distinct terms, which is how its postings are found
-- again when it goes.
CREATE TABLE IF NOT EXISTS keyword_blocks (
    block_id  BIGINT       PRIMARY KEY REFERENCES semantic_blocks(id) ON DELETE CASCADE,
    doc_id    VARCHAR(128) NOT NULL REFERENCES keyword_documents(doc_id) ON DELETE CASCADE,
    length    INTEGER      NOT NULL,
    terms     BIGINT[]     NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_keyword_blocks_doc_id ON keyword_blocks(doc_id);

-- The postings: a term's blocks with BM25's term-frequency part already weighted (`impact`), so a
-- query reads a term's best blocks first, from the second index alone.
CREATE TABLE IF NOT EXISTS keyword_postings (
    term      BIGINT   NOT NULL,
    block_id  BIGINT   NOT NULL,
    tf        SMALLINT NOT NULL,
    impact    REAL     NOT NULL,
    PRIMARY KEY (term, block_id)
);
CREATE INDEX IF NOT EXISTS idx_keyword_postings_term_impact
    ON keyword_postings(term, impact DESC) INCLUDE (block_id);

-- Document frequency per term, for IDF; updated with the postings, in term order (no deadlocks
-- between two documents committing at once).
CREATE TABLE IF NOT EXISTS keyword_terms (
    term  BIGINT  PRIMARY KEY,
    df    INTEGER NOT NULL
);
