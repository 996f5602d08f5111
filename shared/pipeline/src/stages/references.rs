//! The article graph of a document read again from its stored blocks: for documents parsed before
//! the graph existed or by an older extractor ([`docpipe_parse::references::EXTRACTOR`]). The parse
//! commit writes references for every new run; this only catches up, with nothing parsed or
//! embedded again.

use docpipe_db::{articles, documents, references, Db, DbError};
use tracing::info;

/// What a reading pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reread {
    pub documents: usize,
    pub references: usize,
}

/// Reads the references of up to `limit` indexed documents whose reading is missing or stale, each
/// in a transaction under the document's row lock (the lock the parse commit, a retry and a delete
/// take): a run that moved on meanwhile is left to its own parse.
pub async fn reread(db: &Db, limit: i64) -> Result<Reread, DbError> {
    let mut done = Reread::default();
    let mut client = db.client().await?;
    for (doc_id, run_id) in references::stale_documents(&**client, limit).await? {
        let blocks: Vec<_> = articles::article_blocks(&**client, &[doc_id.as_str()])
            .await?
            .into_iter()
            .map(|(_, block)| block)
            .collect();
        let found =
            tokio::task::spawn_blocking(move || docpipe_parse::references::extract(&blocks))
                .await
                .expect("the extractor does not panic");
        let tx = client.transaction().await?;
        let Some(doc) = documents::lock(&*tx, &doc_id).await? else {
            continue;
        };
        if doc.current_run_id != Some(run_id) || doc.deleting_at.is_some() {
            continue;
        }
        references::place_articles(&*tx, &doc_id).await?;
        references::replace(&*tx, &doc_id, run_id, &found).await?;
        tx.commit().await?;
        done.documents += 1;
        done.references += found.len();
        info!(
            doc_id,
            run_id,
            references = found.len(),
            "article references read"
        );
    }
    Ok(done)
}
