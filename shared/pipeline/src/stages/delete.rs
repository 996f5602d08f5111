//! Seed 000 §6.7: originals and artifacts from S3, then vectors from Milvus by `doc_id`, then the
//! `documents` row (the cascades take runs, history, artifacts and the snapshot).
//!
//! Before any of it the document is marked `deleting_at`: from then on every stage treats it as
//! gone, and a stage that wrote something meanwhile removes it when its compare-and-set fails. If a
//! step here fails the row stays, marked, and the delete can simply be repeated.

use crate::adapters::{ObjectHead, ObjectStore, StorageError};
use chrono::{DateTime, Utc};
use docpipe_core::artifacts;
use docpipe_db::{cleanups, documents, keyword, tombstones, Db, DbError};
use docpipe_vector::{VectorError, VectorIndex};

pub struct DeleteDeps<'a> {
    pub db: &'a Db,
    pub objects: &'a dyn ObjectStore,
    pub vectors: &'a dyn VectorIndex,
    /// Where artifacts live (the originals' bucket is recorded on each document).
    pub artifacts_bucket: &'a str,
}

#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    #[error("document {0} does not exist")]
    NotFound(String),
    #[error("the database is unavailable")]
    Db(#[from] DbError),
    #[error("object storage is unavailable; the delete can be repeated")]
    Storage(#[from] StorageError),
    #[error("the vector index is unavailable; the delete can be repeated")]
    Vector(#[from] VectorError),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deleted {
    pub doc_id: String,
    pub objects_removed: usize,
}

/// Marks the document, then removes everything of it. The mark, the tombstone that keeps a late
/// upload event from bringing the document back, and the outbox row that lets the sweeper finish
/// an interrupted delete are one transaction.
pub async fn delete(deps: &DeleteDeps<'_>, doc_id: &str) -> Result<Deleted, DeleteError> {
    let mut client = deps.db.client().await?;
    let tx = client.transaction().await.map_err(DbError::from)?;
    if !documents::mark_deleting(&*tx, doc_id).await? {
        return Err(DeleteError::NotFound(doc_id.to_string()));
    }
    // Nothing of it may be found by keyword from now on, and its terms stop counting.
    keyword::remove(&*tx, doc_id).await?;
    tombstones::record(&*tx, doc_id).await?;
    cleanups::record(&*tx, cleanups::Kind::Document, doc_id, None, "deleted").await?;
    tx.commit().await.map_err(DbError::from)?;
    drop(client);
    // The version before it may answer again.
    crate::stages::cleanup::carry_projections(
        deps.db,
        deps.vectors,
        crate::stages::cleanup::Carry::Due(crate::stages::index::PROJECTIONS_AT_ONCE),
    )
    .await;
    finish(deps, doc_id).await
}

/// What removing a deleted document's objects needs of its row.
struct Original<'a> {
    bucket: &'a str,
    key: &'a str,
    /// The ETag the store recorded, empty when it recorded none.
    etag: &'a str,
    deleting_at: Option<DateTime<Utc>>,
}

impl<'a> Original<'a> {
    fn of(doc: &'a documents::Document) -> Self {
        Original {
            bucket: &doc.source_bucket,
            key: &doc.object_name,
            etag: &doc.source_etag,
            deleting_at: doc.deleting_at,
        }
    }

    /// Whether the object now under the document's key was uploaded before the delete, and so is
    /// the document's to remove, rather than a newer upload to the same key. A delete that is
    /// finished late (the sweeper, after an outage) must not take the upload a user made after it:
    /// that one is a new document. S3's Last-Modified counts whole seconds, so an upload in the
    /// delete's own second is taken as older. A store that gives no Last-Modified is judged by the
    /// ETag the document recorded.
    fn uploaded_before_the_delete(&self, head: &ObjectHead) -> bool {
        match (head.last_modified_ms, self.deleting_at) {
            (Some(modified_ms), Some(deleting_at)) => modified_ms <= deleting_at.timestamp_millis(),
            _ => self.etag.is_empty() || self.etag == head.etag,
        }
    }
}

/// Removes the original (unless a newer upload holds its key) and every artifact of the document;
/// returns how many objects went.
async fn remove_objects(
    objects: &dyn ObjectStore,
    original: &Original<'_>,
    artifacts_bucket: &str,
    doc_id: &str,
) -> Result<usize, StorageError> {
    let mut removed = 0;
    if !original.key.is_empty() && !original.bucket.is_empty() {
        match objects.head(original.bucket, original.key).await? {
            Some(head) if original.uploaded_before_the_delete(&head) => {
                objects.delete(original.bucket, original.key).await?;
                removed += 1;
            }
            Some(head) => tracing::info!(
                doc_id,
                stage = "delete",
                key = %original.key,
                etag = %head.etag,
                "the key holds a newer upload than the deleted document's: left for its own store"
            ),
            None => {}
        }
    }
    removed += objects
        .delete_prefix(artifacts_bucket, &artifacts::doc_prefix(doc_id))
        .await?;
    Ok(removed)
}

/// The removals of a marked document, then its row; repeatable until it succeeds (the API's
/// `DELETE` again, or the sweeper working off the outbox).
pub async fn finish(deps: &DeleteDeps<'_>, doc_id: &str) -> Result<Deleted, DeleteError> {
    let client = deps.db.client().await?;
    let doc = documents::get(&**client, doc_id)
        .await?
        .ok_or_else(|| DeleteError::NotFound(doc_id.to_string()))?;
    drop(client);

    let objects_removed = remove_objects(
        deps.objects,
        &Original::of(&doc),
        deps.artifacts_bucket,
        doc_id,
    )
    .await?;
    deps.vectors.delete_doc(doc_id).await?;

    let mut client = deps.db.client().await?;
    let tx = client.transaction().await.map_err(DbError::from)?;
    keyword::remove(&*tx, doc_id).await?;
    documents::remove(&*tx, doc_id).await?;
    cleanups::done_for(&*tx, cleanups::Kind::Document, doc_id).await?;
    tx.commit().await.map_err(DbError::from)?;
    tracing::info!(
        doc_id,
        stage = "delete",
        objects_removed,
        "document deleted"
    );
    Ok(Deleted {
        doc_id: doc_id.to_string(),
        objects_removed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::memory::MemoryObjectStore;

    const DOC: &str = "doc_0123456789abcdef0123456789abcdef";
    const OTHER: &str = "doc_fedcba9876543210fedcba9876543210";

    fn deleted_at(ms: i64) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp_millis(ms)
    }

    async fn store_with_artifacts() -> MemoryObjectStore {
        let store = MemoryObjectStore::default();
        store.set_now_ms(1_000);
        store
            .put(
                "uploads",
                "uploads/law.md",
                b"old".to_vec(),
                "text/markdown",
            )
            .await
            .unwrap();
        for doc in [DOC, OTHER] {
            let key = format!("{}layouts.json", artifacts::doc_prefix(doc));
            store
                .put("artifacts", &key, b"{}".to_vec(), "application/json")
                .await
                .unwrap();
        }
        store
    }

    #[tokio::test]
    async fn the_original_and_the_documents_artifacts_go_and_nothing_else() {
        let store = store_with_artifacts().await;
        let original = Original {
            bucket: "uploads",
            key: "uploads/law.md",
            etag: "",
            deleting_at: deleted_at(2_000),
        };
        let removed = remove_objects(&store, &original, "artifacts", DOC)
            .await
            .unwrap();
        assert_eq!(removed, 2);
        assert!(!store.contains("uploads", "uploads/law.md"));
        let left = store.list("artifacts", "").await.unwrap();
        assert_eq!(
            left,
            vec![format!("{}layouts.json", artifacts::doc_prefix(OTHER))]
        );
    }

    #[tokio::test]
    async fn a_newer_upload_to_the_same_key_is_left_for_its_own_store() {
        let store = store_with_artifacts().await;
        store.set_now_ms(5_000);
        store
            .put(
                "uploads",
                "uploads/law.md",
                b"new".to_vec(),
                "text/markdown",
            )
            .await
            .unwrap();
        let original = Original {
            bucket: "uploads",
            key: "uploads/law.md",
            etag: "",
            deleting_at: deleted_at(2_000),
        };
        let removed = remove_objects(&store, &original, "artifacts", DOC)
            .await
            .unwrap();
        assert_eq!(removed, 1, "only the document's artifact goes");
        assert!(store.contains("uploads", "uploads/law.md"));
    }

    #[tokio::test]
    async fn without_a_delete_time_the_recorded_etag_decides() {
        let store = store_with_artifacts().await;
        let head = store
            .head("uploads", "uploads/law.md")
            .await
            .unwrap()
            .unwrap();
        let mut original = Original {
            bucket: "uploads",
            key: "uploads/law.md",
            etag: "another-etag",
            deleting_at: None,
        };
        assert!(!original.uploaded_before_the_delete(&head));
        original.etag = &head.etag;
        assert!(original.uploaded_before_the_delete(&head));
    }
}
