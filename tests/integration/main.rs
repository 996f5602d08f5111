//! docpipe's integration tests: one binary, one module per capability, each test on the real local
//! stack (`make up`) with a database, bucket, queues and Milvus collection of its own (see
//! [`helpers`]), so they run in parallel. The suites that stop shared services or start dev runners
//! of their own are binaries apart: `faults` (run alone, one test at a time) and `liveness`.

mod announcements;
mod api;
mod cli;
mod deploy;
mod duplicates;
mod events;
mod hostile;
mod import;
mod index;
mod intake;
mod migrations;
mod ocr;
mod parse;
mod races;
mod reembed;
mod references;
mod scan;
mod search;
mod store;
mod tenants;
mod versions;
