//! Tenants (seeds 001, 004): `organ_id` names the organisation a document belongs to. A caller
//! reads its own tenant's documents and the `public` library; it writes only its own (and only a
//! publisher writes to `public`). Anything of another tenant answers as a missing thing does.

use serde::{Deserialize, Serialize};

/// Where every row from before tenants went, and the tenant of an upload key that names none.
pub const DEFAULT: &str = "default";
/// The shared law library: every tenant reads it, only a publisher writes it.
pub const PUBLIC: &str = "public";
/// The widest tenant id (`organ_id VARCHAR(64)`).
pub const MAX_ORGAN_ID: usize = 64;

/// Whether `candidate` may be a tenant id: lower-case letters, digits, `-` and `_`, starting with a
/// letter or digit, at most 64 (the migration's CHECK). It is safe in an object key and a Milvus
/// expression.
pub fn is_valid_organ_id(candidate: &str) -> bool {
    !candidate.is_empty()
        && candidate.len() <= MAX_ORGAN_ID
        && candidate
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_'))
        && (candidate.as_bytes()[0].is_ascii_lowercase()
            || candidate.as_bytes()[0].is_ascii_digit())
}

/// Whose documents a read covers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// The caller's tenant only.
    Own,
    /// The public library only.
    Public,
    /// Both.
    #[default]
    All,
}

impl Scope {
    /// The tenants a read by `tenant` with this scope covers (one when the caller is `public`).
    pub fn organs(self, tenant: &str) -> Vec<String> {
        let mut organs = match self {
            Scope::Own => vec![tenant.to_string()],
            Scope::Public => vec![PUBLIC.to_string()],
            Scope::All => vec![tenant.to_string(), PUBLIC.to_string()],
        };
        organs.dedup();
        organs
    }
}

/// The object key an upload of `file_name` registered through the API gets.
pub fn upload_key(organ_id: &str, doc_id: &str, file_name: &str) -> String {
    format!(
        "{}{organ_id}/{doc_id}/{file_name}",
        crate::ids::UPLOAD_PREFIX
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn organ_ids_are_checked_as_the_database_checks_them() {
        for good in ["default", "public", "acme", "a", "org-1_x", &"a".repeat(64)] {
            assert!(is_valid_organ_id(good), "{good}");
        }
        for bad in [
            "",
            "Acme",
            "-a",
            "_a",
            "a b",
            "a/b",
            "a'b",
            "a\"b",
            &"a".repeat(65),
            "组织",
        ] {
            assert!(!is_valid_organ_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_scope_names_the_tenants_it_reads() {
        assert_eq!(Scope::Own.organs("acme"), vec!["acme"]);
        assert_eq!(Scope::Public.organs("acme"), vec!["public"]);
        assert_eq!(Scope::All.organs("acme"), vec!["acme", "public"]);
        assert_eq!(Scope::All.organs("public"), vec!["public"]);
        assert_eq!(
            upload_key("acme", "doc_1", "a.md"),
            "uploads/acme/doc_1/a.md"
        );
    }
}
