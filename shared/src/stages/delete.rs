//! Seed 000 §6.7: originals and artifacts from S3, then vectors from Milvus by `doc_id`, then the
//! `documents` row (the cascades take runs, history, artifacts and the snapshot).
//!
//! Before any of it the document is marked `deleting_at`: from then on every stage treats it as
//! gone, and a stage that wrote something meanwhile removes it when its compare-and-set fails. If a
//! step here fails the row stays, marked, and the delete can simply be repeated.

use crate::adapters::{ObjectStore, StorageError};
use crate::artifacts;
use crate::db::{cleanups, documents, keyword, tombstones, Db, DbError};
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
        deps.objects
            .delete(&doc.source_bucket, &doc.object_name)
            .await?;
        objects_removed += 1;
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
