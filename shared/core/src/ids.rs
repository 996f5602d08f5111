//! Document ids: non-enumerable, and deterministic where they must be.

use sha2::{Digest, Sha256};

const PREFIX: &str = "doc_";
const HEX_LEN: usize = 32;

/// The id of a document that arrived by a plain upload: derived from bucket and key, so every
/// duplicate event for the same object finds the same document, yet nobody can guess ids by counting.
pub fn derived_doc_id(bucket: &str, key: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(bucket.as_bytes());
    hasher.update([0u8]);
    hasher.update(key.as_bytes());
    let digest = hex::encode(hasher.finalize());
    format!("{PREFIX}{}", &digest[..HEX_LEN])
}

/// A fresh random id, for documents registered through the API before their upload.
pub fn random_doc_id() -> String {
    let bytes: [u8; HEX_LEN / 2] = rand::random();
    format!("{PREFIX}{}", hex::encode(bytes))
}

/// Whether `candidate` has the shape of a docpipe id. Anything else (path tricks, SQL, over-long
/// strings) is refused before it reaches a query or a key.
pub fn is_valid_doc_id(candidate: &str) -> bool {
    candidate.len() == PREFIX.len() + HEX_LEN
        && candidate.starts_with(PREFIX)
        && candidate[PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Whether `candidate` may name a document in a request or a message: a docpipe id, or an id kept
/// from the old system by the legacy import (letters, digits, `-`, `_`, `.`, at most 128, no `..`).
/// Either is safe in a URL and an object key; anything else is refused before it reaches a query.
pub fn is_addressable_doc_id(candidate: &str) -> bool {
    is_valid_doc_id(candidate) || is_safe_legacy_id(candidate)
}

/// Where originals are uploaded: the prefix the bucket's notification watches, and the only one
/// the S3-compatible webhook takes keys under (artifacts live beside it, under `artifacts/`).
pub const UPLOAD_PREFIX: &str = "uploads/";

/// The doc id an upload key names, when the key has the API's shape `uploads/{doc_id}/{file_name}`.
/// Whether that document really exists is for the caller to check.
pub fn doc_id_in_upload_key(key: &str) -> Option<&str> {
    let rest = key.strip_prefix(UPLOAD_PREFIX)?;
    let (candidate, file_name) = rest.split_once('/')?;
    if is_valid_doc_id(candidate) && !file_name.is_empty() {
        return Some(candidate);
    }
    // A tenant's: `uploads/{organ_id}/{doc_id}/{file_name}`.
    let (candidate, file_name) = file_name.split_once('/')?;
    (crate::tenant::is_valid_organ_id(rest.split('/').next().unwrap_or_default())
        && is_valid_doc_id(candidate)
        && !file_name.is_empty())
    .then_some(candidate)
}

/// The widest file name the `documents` table holds (`file_name`, `doc_name`: VARCHAR(512)).
pub const MAX_FILE_NAME_CHARS: usize = 512;

/// The last path segment of a key: what a person would call the file's name. An S3 key may be
/// 1,024 bytes in one segment, wider than the column: then its last [`MAX_FILE_NAME_CHARS`]
/// characters are kept, so the extension survives (the full key stays in `object_name`).
pub fn file_name_of(key: &str) -> &str {
    let name = key.rsplit('/').next().unwrap_or(key);
    match name.char_indices().rev().nth(MAX_FILE_NAME_CHARS - 1) {
        Some((start, _)) => &name[start..],
        None => name,
    }
}

/// Ids from the old system are kept as they are (S3 keys and vectors name them), but only if they
/// are safe to put in a key or a URL.
pub fn is_safe_legacy_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && !id.contains("..")
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && id.as_bytes()[0].is_ascii_alphanumeric()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_ids_are_stable_and_distinct() {
        let a = derived_doc_id("b", "uploads/x.pdf");
        assert_eq!(a, derived_doc_id("b", "uploads/x.pdf"));
        assert_ne!(a, derived_doc_id("b", "uploads/y.pdf"));
        // The separator keeps ("ab","c") and ("a","bc") apart.
        assert_ne!(derived_doc_id("ab", "c"), derived_doc_id("a", "bc"));
        assert!(is_valid_doc_id(&a));
    }

    #[test]
    fn random_ids_are_valid_and_differ() {
        let (a, b) = (random_doc_id(), random_doc_id());
        assert!(is_valid_doc_id(&a) && is_valid_doc_id(&b));
        assert_ne!(a, b);
    }

    #[test]
    fn hostile_ids_are_refused() {
        for bad in [
            "",
            "doc_",
            "../etc/passwd",
            "doc_0123456789abcdef0123456789abcdeg",
            "doc_0123456789ABCDEF0123456789ABCDEF",
            "doc_0123456789abcdef0123456789abcdef0",
            "1; DROP TABLE documents",
        ] {
            assert!(!is_valid_doc_id(bad), "{bad:?} accepted");
        }
        for bad in [
            "",
            "../etc/passwd",
            "a/b",
            "x..y",
            ".hidden",
            "a b",
            "1; DROP",
            "é",
        ] {
            assert!(!is_addressable_doc_id(bad), "{bad:?} accepted");
        }
        assert!(is_addressable_doc_id("legacy-001.v2"));
    }

    #[test]
    fn upload_keys_name_their_document() {
        let id = random_doc_id();
        assert_eq!(
            doc_id_in_upload_key(&format!("uploads/{id}/a b.pdf")),
            Some(id.as_str())
        );
        assert_eq!(doc_id_in_upload_key("uploads/report.pdf"), None);
        assert_eq!(
            doc_id_in_upload_key(&format!("uploads/acme/{id}/a b.pdf")),
            Some(id.as_str())
        );
        assert_eq!(
            doc_id_in_upload_key(&format!("uploads/Acme!/{id}/a.pdf")),
            None
        );
        assert_eq!(doc_id_in_upload_key(&format!("uploads/{id}/")), None);
        assert_eq!(doc_id_in_upload_key("other/doc_x/a.pdf"), None);
        assert_eq!(file_name_of("uploads/a/b c.pdf"), "b c.pdf");
        let wide = format!("uploads/{}.pdf", "法".repeat(600));
        let name = file_name_of(&wide);
        assert_eq!(name.chars().count(), MAX_FILE_NAME_CHARS);
        assert!(name.ends_with("法法.pdf"));
        let exact = "a".repeat(MAX_FILE_NAME_CHARS);
        assert_eq!(file_name_of(&exact), exact);
    }
}
