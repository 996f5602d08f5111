-- An idempotency scope names the operation and the document ("retry:{doc_id}"); ids kept from the
-- old system by the legacy import may be 128 characters, so the scope must hold 6 + 128.
ALTER TABLE idempotency_keys ALTER COLUMN scope TYPE VARCHAR(160);
