//! The pipeline, seed 000 §6 stage by stage. Each stage is a plain async function over a Postgres
//! handle and the narrow traits in [`crate::adapters`]; the Lambda handlers and the dev runner call
//! these and nothing else.
//!
//! | seed 000 §6 | what happens | where |
//! | --- | --- | --- |
//! | 6.1 upload | `documents` row, a run (`upload`), history `pending` | [`store::store_object`] (or the API's registration) |
//! | 6.2 store | the original is checked (HEAD + streaming sha256); `stored`, run `stored_at`, history; a parse job | [`store::store_object`] |
//! | 6.3 parse | the original → layouts, heading tree, semantic blocks, chunks; four artifacts in S3 and `document_artifacts`; snapshot replaced in bulk; run `parsed_at` + counts; `parsed`; history; an index job | [`parse::parse_job`] |
//! | 6.4 embed and index | the chunks embedded and inserted into Milvus under a lease; older runs' vectors removed; run `indexed_at`, `finished_at`, `succeeded`; document `indexed`, `chunk_count`, `index_name`; history | [`index::index_job`] |
//! | 6.6 retry | the same document, a new run (`retry`), history; the new run is stored at once and parsed again | [`retry::retry`] |
//! | 6.7 delete | mark, then originals and artifacts from S3, vectors from Milvus, then the row (cascades) | [`delete::delete`] |
//! | 6.5 failure | run `failed` with `failure_stage` and `error_message`, document `failed`, history | [`docpipe_db::transitions::fail_run`] |
//! | liveness | parse and index take the run's lease (counting the attempt) and renew it while they work; a transient failure backs off; the sweeper re-drives lost jobs | [`lease::HeldLease`], [`crate::handlers::sqs::Backoff`], [`crate::upkeep::sweep::sweep`] |
//! | graph catch-up | the references of documents parsed before the graph (or by an older extractor) read from their stored blocks | [`references::reread`] |
//! | re-embedding | a new collection filled from the stored chunks in bounded steps through the index queue (backlog, walk, check), then one compare-and-set switches search | [`rebuild::rebuild_step`] |
//! | give-up | a dead-lettered job: its run's vectors removed, the run failed with its last error | [`crate::upkeep::give_up::give_up`] |
//!
//! Every status change goes through [`docpipe_db::transitions`], where each one is a single
//! compare-and-set statement.

pub mod cleanup;
pub mod current;
pub mod delete;
pub mod index;
pub mod keywords;
pub mod lease;
pub mod parse;
pub mod rebuild;
pub mod references;
pub mod register;
pub mod retry;
pub mod scan;
pub mod store;
pub mod version_claim;
pub mod versions;
pub mod work_title;
