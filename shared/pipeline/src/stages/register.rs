//! Seed 000 §6.1 for a document announced through the API before its bytes arrive: the document row
//! (with its future object key), a run (`upload`) and the `pending` history entry. The upload then
//! comes through the normal notification path; the store stage finds this document by its key and
//! adopts the waiting run.

use super::version_claim::{self, ClaimError, Spelling, VersionClaim};
use docpipe_core::ids;
use docpipe_core::model::Trigger;
use docpipe_db::{documents, transitions};
use docpipe_db::{Db, DbError};
use docpipe_vector::limits;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct Registration {
    pub doc_name: String,
    pub file_name: String,
    pub content_type: String,
    pub regulation_type: String,
    pub version: String,
    pub tags: Vec<String>,
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// The work and dates the upload names for its version.
    #[serde(flatten)]
    pub claim: VersionClaim,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Registered {
    pub doc_id: String,
    pub run_id: i64,
    pub object_name: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    #[error("invalid {}: {}", .0.field, .0.reason)]
    Claim(#[from] ClaimError),
    /// The version it names is recorded with other dates.
    #[error("{0}")]
    Collides(String),
    #[error("the database is unavailable")]
    Db(#[from] DbError),
}

fn invalid(field: &'static str, reason: impl Into<String>) -> RegisterError {
    RegisterError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// A file name becomes the last segment of an object key: no separators, no traversal, no control
/// characters, and it fits the columns.
pub(crate) fn check_file_name(name: &str) -> Result<(), RegisterError> {
    if name.is_empty() {
        return Err(invalid("file_name", "must not be empty"));
    }
    if name.len() > 255 {
        return Err(invalid("file_name", "must be at most 255 bytes"));
    }
    if name == "." || name == ".." || name.contains(['/', '\\']) {
        return Err(invalid(
            "file_name",
            "must be a plain name, without / or \\ or .",
        ));
    }
    if name.chars().any(char::is_control) {
        return Err(invalid("file_name", "must not contain control characters"));
    }
    Ok(())
}

fn check_len(field: &'static str, value: &str, max: usize) -> Result<(), RegisterError> {
    if value.chars().count() > max {
        return Err(invalid(field, format!("must be at most {max} characters")));
    }
    if value
        .chars()
        .any(|c| c.is_control() && c != '\n' && c != '\t')
    {
        return Err(invalid(field, "must not contain control characters"));
    }
    Ok(())
}

fn check_bytes(field: &'static str, value: &str, max: usize) -> Result<(), RegisterError> {
    if value.len() > max {
        return Err(invalid(
            field,
            format!(
                "must be at most {max} bytes of UTF-8 (the vector index's limit; {} CJK \
                 characters), got {} bytes",
                max / 3,
                value.len()
            ),
        ));
    }
    Ok(())
}

pub fn validate(r: &Registration) -> Result<(), RegisterError> {
    check_file_name(&r.file_name)?;
    check_len("doc_name", &r.doc_name, 512)?;
    check_len("content_type", &r.content_type, 128)?;
    check_len("regulation_type", &r.regulation_type, 128)?;
    check_len("version", &r.version, 64)?;
    // Every chunk's vector carries these, and search filters on them there: they must fit the
    // vector index's fields, which count bytes (a CJK character is 3).
    check_bytes(
        "regulation_type",
        &r.regulation_type,
        limits::REGULATION_TYPE_BYTES,
    )?;
    check_bytes("version", &r.version, limits::VERSION_BYTES)?;
    if r.tags.len() > 32 {
        return Err(invalid("tags", "at most 32 tags"));
    }
    for tag in &r.tags {
        if tag.is_empty() || tag.len() > 64 || tag.chars().any(char::is_control) {
            return Err(invalid(
                "tags",
                format!("{tag:?} must be 1 to 64 bytes, no control characters"),
            ));
        }
    }
    if serde_json::to_vec(&r.metadata)
        .map(|v| v.len())
        .unwrap_or(usize::MAX)
        > 16 * 1024
    {
        return Err(invalid("metadata", "must be at most 16 KiB of JSON"));
    }
    if r.metadata.contains_key(version_claim::METADATA_KEY) {
        return Err(invalid(
            "metadata",
            "the key \"version_of\" is reserved: send work, promulgated, effective_from and \
             effective_to as fields of their own",
        ));
    }
    r.claim.check(Spelling::Registration)?;
    Ok(())
}

pub async fn register(
    db: &Db,
    organ_id: &str,
    bucket: &str,
    registration: &Registration,
    deadline_secs: i64,
) -> Result<Registered, RegisterError> {
    validate(registration)?;
    let doc_id = ids::random_doc_id();
    let object_name = docpipe_core::tenant::upload_key(organ_id, &doc_id, &registration.file_name);
    let given = registration.claim.check(Spelling::Registration)?;
    let mut metadata = registration.metadata.clone();
    metadata.insert("tags".into(), serde_json::json!(registration.tags));
    if !registration.claim.is_empty() {
        metadata.insert(
            version_claim::METADATA_KEY.into(),
            serde_json::json!(registration.claim),
        );
    }
    let metadata = serde_json::Value::Object(metadata).to_string();
    let doc_name = if registration.doc_name.is_empty() {
        &registration.file_name
    } else {
        &registration.doc_name
    };
    let mut client = db.client().await?;
    if let Some(why) = version_claim::collision(
        &**client,
        organ_id,
        &registration.claim,
        &given,
        &registration.version,
        &registration.regulation_type,
    )
    .await?
    {
        return Err(RegisterError::Collides(why));
    }
    let tx = client.transaction().await.map_err(DbError::from)?;
    documents::ensure_tenant(&*tx, organ_id).await?;
    documents::insert_registered(
        &*tx,
        &documents::NewRegistration {
            doc_id: &doc_id,
            doc_name,
            file_name: &registration.file_name,
            object_name: &object_name,
            content_type: &registration.content_type,
            regulation_type: &registration.regulation_type,
            version: &registration.version,
            metadata: &metadata,
            source_bucket: bucket,
            organ_id,
        },
    )
    .await?;
    let run_id = transitions::open_run(
        &*tx,
        &doc_id,
        Trigger::Upload,
        "registered; waiting for the upload",
        deadline_secs,
    )
    .await?;
    tx.commit().await.map_err(DbError::from)?;
    tracing::info!(doc_id, run_id, stage = "upload", "document registered");
    Ok(Registered {
        doc_id,
        run_id,
        object_name,
    })
}
