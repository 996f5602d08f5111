//! Seed 000 §6.7: originals and artifacts from S3, then vectors from Milvus by `doc_id`, then the
//! `documents` row (the cascades take runs, history, artifacts and the snapshot).
//!
//! Before any of it the document is marked `deleting_at`: from then on every stage treats it as
//! gone, and a stage that wrote something meanwhile removes it when its compare-and-set fails. If a
//! step here fails the row stays, marked, and the delete can simply be repeated.

use crate::adapters::{ObjectHead, ObjectStore, StorageError};
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
    finish(deps, doc_id).await
}

/// Whether the object now under the document's key was uploaded before the delete, and so is
/// the document's to remove, rather than a newer upload to the same key. A delete that is
/// finished late (the sweeper, after an outage) must not take the upload a user made after it:
/// that one is a new document. S3's Last-Modified counts whole seconds, so an upload in the
/// delete's own second is taken as older. A store that gives no Last-Modified is judged by the
/// ETag the document recorded.
fn uploaded_before_the_delete(doc: &documents::Document, head: &ObjectHead) -> bool {
    match (head.last_modified_ms, doc.deleting_at) {
        (Some(modified_ms), Some(deleting_at)) => modified_ms <= deleting_at.timestamp_millis(),
        _ => doc.source_etag.is_empty() || doc.source_etag == head.etag,
    }
}

/// The removals of a marked document, then its row; repeatable until it succeeds (the API's
/// `DELETE` again, or the sweeper working off the outbox).
pub async fn finish(deps: &DeleteDeps<'_>, doc_id: &str) -> Result<Deleted, DeleteError> {
    let client = deps.db.client().await?;
    let doc = documents::get(&**client, doc_id)
        .await?
        .ok_or_else(|| DeleteError::NotFound(doc_id.to_string()))?;
    drop(client);

    let mut objects_removed = 0;
    if !doc.object_name.is_empty() && !doc.source_bucket.is_empty() {
        let head = deps
            .objects
            .head(&doc.source_bucket, &doc.object_name)
            .await?;
        match head {
            Some(head) if uploaded_before_the_delete(&doc, &head) => {
                deps.objects
                    .delete(&doc.source_bucket, &doc.object_name)
                    .await?;
                objects_removed += 1;
            }
            Some(head) => tracing::info!(
                doc_id,
                stage = "delete",
                key = %doc.object_name,
                etag = %head.etag,
                "the key holds a newer upload than the deleted document's: left for its own store"
            ),
            None => {}
        }
    }
    objects_removed += deps
        .objects
        .delete_prefix(deps.artifacts_bucket, &artifacts::doc_prefix(doc_id))
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
