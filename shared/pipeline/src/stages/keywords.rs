//! The keyword side of seed 000 §6.4: a document's `semantic_blocks` analysed into BM25 postings.
//! The index stage analyses before its commit and writes in it ([`docpipe_db::keyword::write`]), so
//! the keyword rows of a run exist exactly when the run is `indexed`. [`reindex`] re-analyses
//! documents indexed by an older analyzer straight from PostgreSQL: nothing is parsed or embedded
//! again.

use docpipe_core::analyzer::{Analyzer, ANALYZER};
use docpipe_db::keyword::{self, AnalysedDocument};
use docpipe_db::{documents, Db, DbError};
use docpipe_parse::article_ref::normalize_law_name;
use tracing::info;

/// Reads the document's blocks and analyses them (off the async threads: jieba is CPU work).
pub(crate) async fn analyse(
    c: &impl tokio_postgres::GenericClient,
    doc_id: &str,
) -> Result<AnalysedDocument, DbError> {
    let (title, blocks) = keyword::sources(c, doc_id).await?;
    let doc_id = doc_id.to_string();
    let analysed = tokio::task::spawn_blocking(move || {
        let analyzer = Analyzer::shared();
        let blocks = blocks
            .iter()
            .map(|b| {
                (
                    b.block_id,
                    analyzer.block_terms(&title, &b.section_path, &b.text),
                )
            })
            .collect();
        AnalysedDocument {
            title_key: normalize_law_name(&title),
            title,
            doc_id,
            analyzer: ANALYZER,
            blocks,
        }
    })
    .await
    .expect("the analyzer does not panic");
    Ok(analysed)
}

/// What a keyword reindex did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reindexed {
    pub documents: usize,
    pub blocks: usize,
}

/// Re-analyses up to `limit` indexed documents whose keyword rows are missing, from another run,
/// or from another analyzer version, each in a transaction under the document's row lock (the
/// same lock the index commit and the delete take, so neither can interleave).
pub async fn reindex(db: &Db, limit: i64) -> Result<Reindexed, DbError> {
    let mut done = Reindexed::default();
    let mut client = db.client().await?;
    let stale = keyword::stale_documents(&**client, ANALYZER, limit).await?;
    for (doc_id, run_id) in stale {
        let analysed = analyse(&**client, &doc_id).await?;
        let tx = client.transaction().await?;
        let Some(doc) = documents::lock(&*tx, &doc_id).await? else {
            continue;
        };
        if doc.current_run_id != Some(run_id)
            || doc.deleting_at.is_some()
            || doc.status != docpipe_core::model::DocStatus::Indexed
        {
            continue;
        }
        keyword::write(&*tx, run_id, &analysed).await?;
        tx.commit().await?;
        done.documents += 1;
        done.blocks += analysed.blocks.len();
        info!(
            doc_id,
            run_id,
            blocks = analysed.blocks.len(),
            "keyword rows rebuilt"
        );
    }
    Ok(done)
}
