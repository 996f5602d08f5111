//! The pipeline, seed 000 §6 stage by stage. Each stage is a plain async function over a Postgres
//! handle and the narrow traits in [`crate::adapters`]; the Lambda handlers and the dev runner call
//! these and nothing else.
//!
//! | seed 000 §6 | what happens | where |
//! | --- | --- | --- |
//! | 6.1 upload | `documents` row, a run (`upload`), history `pending` | [`store::store_object`] (or the API's registration) |
//! | 6.2 store | the original is checked (HEAD + streaming sha256); `stored`, run `stored_at`, history; a parse job | [`store::store_object`] |
//! | 6.3 parse | the original → layouts, heading tree, semantic blocks, chunks; four artifacts in S3 and `document_artifacts`; snapshot replaced in bulk; run `parsed_at` + counts; `parsed`; history; an index job | [`parse::parse_job`] |
//! | 6.5 failure | run `failed` with `failure_stage` and `error_message`, document `failed`, history | [`crate::db::transitions::fail_run`] |
//!
//! Every status change goes through [`crate::db::transitions`], where each one is a single
//! compare-and-set statement.

pub mod parse;
pub mod store;
