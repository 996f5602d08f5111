-- The references between articles (本法第三十九条, 前款, 《…》第三十二条), read from a regulation's text at
-- parse time and written in the parse commit with the snapshot: replaced with it, so a retry or a
-- re-parse leaves no edge of the old one. A target in the same regulation carries whether the
-- regulation has it (dangling); one in another law keeps that law's name as written and its
-- normalised key, and is found when that law is read (cited by, citation checks).
CREATE TABLE IF NOT EXISTS article_references (
    doc_id          VARCHAR(128) NOT NULL REFERENCES documents(doc_id) ON DELETE CASCADE,
    ref_no          INT          NOT NULL,
    semantic_id     VARCHAR(128) NOT NULL,
    -- The citing article ('39', '39-1' for 第三十九条之一) and paragraph (款, 1-based).
    from_article    VARCHAR(16)  NOT NULL,
    from_paragraph  INT          NOT NULL,
    span_start      INT          NOT NULL,
    span_end        INT          NOT NULL,
    text            VARCHAR(256) NOT NULL,
    kind            VARCHAR(16)  NOT NULL
        CHECK (kind IN ('apply', 'analogy', 'exception', 'mention')),
    -- NULL: the same regulation.
    target_law      VARCHAR(256),
    target_law_key  VARCHAR(256),
    -- Canonical: art:39, art:39-1, art:39:p2:i1, arts:18..20, art:39:p1..2, chapter:3, part:3/chapter:2.
    target          VARCHAR(64)  NOT NULL,
    -- The articles the target covers, as ordinals (number * 1000 + 之M), for "cited by"; NULL for a
    -- chapter, section or part.
    target_from     INT,
    target_to       INT,
    dangling        BOOLEAN      NOT NULL,
    PRIMARY KEY (doc_id, ref_no)
);

CREATE INDEX IF NOT EXISTS article_references_cited
    ON article_references (doc_id, target_from, target_to) WHERE target_law IS NULL;
CREATE INDEX IF NOT EXISTS article_references_other_law
    ON article_references (target_law_key, target_from) WHERE target_law IS NOT NULL;
