-- A citation of a law the titles cached in a process do not hold reads that law's documents by
-- its title key (keyword::law_titles_of): the key itself, or the key followed by a bracketed date
-- (a version's title). A LIKE on a prefix uses a btree only under the C collation, or through the
-- pattern operator class under any other (RDS's default en_US.UTF-8).
CREATE INDEX IF NOT EXISTS idx_keyword_documents_title_key_prefix
    ON keyword_documents (title_key text_pattern_ops);
