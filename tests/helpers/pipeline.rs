//! The whole pipeline over one test's database, bucket, queues and collection, driven stage by
//! stage or by a dev runner of the test's own.

use crate::*;
use std::path::PathBuf;

pub fn milvus_url() -> String {
    env_or("MILVUS_URL", "http://127.0.0.1:19530")
}

/// The whole pipeline over one test's database, bucket, queues and Milvus collection, driven
/// stage by stage the way the queues would drive it.
pub struct Pipeline {
    pub db: TestDb,
    pub aws: TestAws,
    pub store: docpipe_pipeline::services::StoreService,
    pub parse: docpipe_pipeline::services::ParseService,
    pub index: docpipe_pipeline::services::IndexService,
    pub milvus: std::sync::Arc<docpipe_vector::MilvusIndex>,
    /// Which collection search reads (the pipeline's own until a rebuild switches it).
    pub generations: std::sync::Arc<docpipe_pipeline::adapters::generations::Generations>,
}

impl Pipeline {
    pub async fn new(embedder: std::sync::Arc<dyn docpipe_embed::Embedder>) -> Pipeline {
        let collection = unique("t_chunks_");
        Pipeline::with(
            TestDb::new().await,
            TestAws::new().await,
            embedder,
            &collection,
        )
        .await
    }

    /// The pipeline over a database and a collection the caller chose (a benchmark's, which
    /// outlive the run).
    pub async fn with(
        db: TestDb,
        aws: TestAws,
        embedder: std::sync::Arc<dyn docpipe_embed::Embedder>,
        collection: &str,
    ) -> Pipeline {
        ensure_pdfium_env();
        let milvus = std::sync::Arc::new(
            docpipe_vector::MilvusIndex::connect(&milvus_url(), None, collection)
                .await
                .unwrap_or_else(|e| {
                    panic!("cannot reach Milvus at {} (`make up`): {e}", milvus_url())
                }),
        );
        let store = docpipe_pipeline::services::StoreService::new(
            db.db.clone(),
            &aws.clients,
            aws.store_config(docpipe_core::config::DEFAULT_MAX_BYTES),
        );
        let parse = docpipe_pipeline::services::ParseService::new(
            db.db.clone(),
            &aws.clients,
            aws.parse_config(),
        );
        let generations =
            std::sync::Arc::new(docpipe_pipeline::adapters::generations::Generations::new(
                db.db.clone(),
                milvus.clone(),
                embedder.clone(),
                open_collection(),
                docpipe_pipeline::adapters::generations::Generations::embedders_from_env(),
            ));
        let index = docpipe_pipeline::services::IndexService {
            db: db.db.clone(),
            objects: std::sync::Arc::new(docpipe_pipeline::adapters::S3ObjectStore::new(
                aws.clients.s3.clone(),
            )),
            queue: std::sync::Arc::new(docpipe_pipeline::adapters::SqsJobQueue::new(
                aws.clients.sqs.clone(),
            )),
            embedder,
            vectors: milvus.clone(),
            generations: generations.clone(),
            config: docpipe_core::config::IndexConfig {
                bucket: aws.bucket.clone(),
                index_queue_url: aws.index_queue.clone(),
                embed_batch: 32,
                clock: aws.clock.clone(),
                release: Default::default(),
                rebuild_batch: rebuild_batch(),
            },
            events: aws.clients.events.clone(),
        };
        Pipeline {
            db,
            aws,
            store,
            parse,
            index,
            milvus,
            generations,
        }
    }

    pub fn hash() -> std::sync::Arc<dyn docpipe_embed::Embedder> {
        std::sync::Arc::new(docpipe_embed::HashEmbedder::new(384).expect("hash embedder"))
    }

    /// Uploads a file and carries it through store, parse and index; returns its doc_id.
    pub async fn ingest(&self, key: &str, body: &[u8]) -> String {
        self.aws.put(key, body).await;
        docpipe_pipeline::handlers::store::handle_notification(
            &self.store,
            &s3_put_event(&self.aws.bucket, key),
        )
        .await
        .expect("store");
        let doc_id = docpipe_core::ids::derived_doc_id(&self.aws.bucket, key);
        self.drive(&doc_id).await;
        doc_id
    }

    /// Uploads a file and carries it through every stage, which must leave it indexed; returns
    /// the indexed document.
    pub async fn ingest_indexed(&self, key: &str, body: &[u8]) -> docpipe_db::documents::Document {
        let doc_id = self.ingest(key, body).await;
        let doc = self.doc(&doc_id).await.expect("document");
        assert_eq!(
            doc.status,
            docpipe_core::model::DocStatus::Indexed,
            "{key}: {}",
            doc.error_message
        );
        doc
    }

    /// Uploads a file, stores it and parses it; returns the job its index stage is waiting for.
    pub async fn parsed(&self, key: &str, body: &[u8]) -> docpipe_core::model::JobMessage {
        let job = stored(&self.db, &self.aws, &self.store, key, body).await;
        docpipe_pipeline::stages::parse::parse_job(&self.parse.deps(), &job)
            .await
            .expect("parse");
        job
    }

    /// Runs the current run's remaining stages directly (the queues' messages are drained).
    pub async fn drive(&self, doc_id: &str) {
        use docpipe_core::model::{DocStatus, JobMessage};
        let doc = self.doc(doc_id).await.expect("document");
        let job = JobMessage::new(doc_id, doc.current_run_id.expect("a run"));
        if doc.status == DocStatus::Stored {
            docpipe_pipeline::stages::parse::parse_job(&self.parse.deps(), &job)
                .await
                .expect("parse");
        }
        if self.doc(doc_id).await.expect("document").status == DocStatus::Parsed {
            docpipe_pipeline::stages::index::index_job(&self.index.deps(), &job)
                .await
                .expect("index");
        }
        self.aws.drain(&self.aws.parse_queue, 100).await;
        self.aws.drain(&self.aws.index_queue, 100).await;
    }

    /// Waits until a dense search sees the document's vectors. Search reads Milvus with Bounded
    /// consistency (what the API uses: it does not wait for the newest writes), so vectors
    /// inserted in the last few seconds (Milvus's graceful time, 5 s by default) may not be found
    /// yet; a test that requires dense hits waits for them first.
    pub async fn wait_searchable(&self, doc_id: &str) {
        let probe = self
            .index
            .embedder
            .embed_query("searchable")
            .await
            .expect("embed a probe");
        let filters = docpipe_vector::SearchFilters {
            doc_ids: vec![doc_id.to_string()],
            ..Default::default()
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let hits =
                docpipe_vector::VectorIndex::search(self.milvus.as_ref(), &probe, 1, &filters)
                    .await
                    .expect("dense search");
            if !hits.is_empty() {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{doc_id}: its vectors were not searchable within 30 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    }

    /// The delete stage's dependencies, over this pipeline's stores.
    pub fn delete_deps(&self) -> docpipe_pipeline::stages::delete::DeleteDeps<'_> {
        docpipe_pipeline::stages::delete::DeleteDeps {
            db: &self.db.db,
            objects: self.store.objects.as_ref(),
            vectors: self.milvus.as_ref(),
            artifacts_bucket: &self.aws.bucket,
        }
    }

    /// `POST /search` as the API runs it (a fresh cache each call, so nothing is remembered
    /// between the steps of a test), as of today and for the versions in force.
    pub async fn search(
        &self,
        query: &str,
        top_k: usize,
        mode: docpipe_search::Mode,
        filters: &docpipe_core::filters::Filters,
    ) -> docpipe_search::SearchResult {
        self.search_as_of(query, top_k, mode, filters, None, Default::default())
            .await
    }

    /// [`Pipeline::search`] for a date and a choice of versions.
    pub async fn search_as_of(
        &self,
        query: &str,
        top_k: usize,
        mode: docpipe_search::Mode,
        filters: &docpipe_core::filters::Filters,
        as_of: Option<&str>,
        versions: docpipe_search::Versions,
    ) -> docpipe_search::SearchResult {
        let cache = docpipe_search::SearchCache::default();
        docpipe_search::search(
            &docpipe_search::SearchDeps {
                db: &self.db.db,
                embedder: self.index.embedder.as_ref(),
                vectors: self.milvus.as_ref(),
                cache: &cache,
            },
            &docpipe_search::Query {
                text: query,
                top_k,
                mode,
                filters,
                as_of,
                versions,
                graph: docpipe_search::Graph::DEFAULT,
            },
        )
        .await
        .unwrap_or_else(|e| panic!("search {query:?} ({mode:?}, {as_of:?}): {e}"))
    }

    /// `POST /documents/{id}/retry`'s stage, as the API runs it.
    pub async fn retry(
        &self,
        doc_id: &str,
    ) -> Result<docpipe_pipeline::stages::retry::Retried, docpipe_pipeline::stages::retry::RetryError>
    {
        let deps = docpipe_pipeline::stages::retry::RetryDeps {
            db: &self.db.db,
            objects: self.store.objects.as_ref(),
            queue: self.store.queue.as_ref(),
            parse_queue_url: &self.aws.parse_queue,
            stage_deadline_secs: 900,
            max_bytes: docpipe_core::config::DEFAULT_MAX_BYTES,
        };
        docpipe_pipeline::stages::retry::retry(&deps, doc_id).await
    }

    /// Registers a document through the API's stage; it waits for its upload.
    pub async fn register(
        &self,
        file_name: &str,
    ) -> docpipe_pipeline::stages::register::Registered {
        docpipe_pipeline::stages::register::register(
            &self.db.db,
            docpipe_core::tenant::DEFAULT,
            &self.aws.bucket,
            &docpipe_pipeline::stages::register::Registration {
                file_name: file_name.into(),
                content_type: "text/markdown".into(),
                ..Default::default()
            },
            900,
        )
        .await
        .expect("register")
    }

    /// The pipeline with the hashing embedder, whose store refuses objects over `max_bytes`.
    pub async fn with_max_bytes(max_bytes: u64) -> Pipeline {
        let mut p = Pipeline::new(Pipeline::hash()).await;
        p.store = docpipe_pipeline::services::StoreService::new(
            p.db.db.clone(),
            &p.aws.clients,
            p.aws.store_config(max_bytes),
        );
        p
    }

    pub async fn doc(&self, doc_id: &str) -> Option<docpipe_db::documents::Document> {
        docpipe_db::documents::get(&**self.db.client().await, doc_id)
            .await
            .unwrap()
    }

    /// Generations over another handle on the pipeline's collection (a fault-injecting one).
    pub fn generations_over(
        &self,
        vectors: std::sync::Arc<dyn docpipe_vector::VectorIndex>,
    ) -> std::sync::Arc<docpipe_pipeline::adapters::generations::Generations> {
        std::sync::Arc::new(docpipe_pipeline::adapters::generations::Generations::new(
            self.db.db.clone(),
            vectors,
            self.index.embedder.clone(),
            open_collection(),
            docpipe_pipeline::adapters::generations::Generations::embedders_from_env(),
        ))
    }

    /// Every collection still written to, as the sweeper and the DLQ function hold them.
    pub fn live_vectors(&self) -> std::sync::Arc<dyn docpipe_vector::VectorIndex> {
        std::sync::Arc::new(docpipe_pipeline::adapters::generations::LiveVectors::new(
            self.generations.clone(),
        ))
    }

    /// The DLQ function's service over this pipeline's database and collection.
    pub fn dead_letters(&self) -> docpipe_pipeline::services::DeadLetterService {
        docpipe_pipeline::services::DeadLetterService {
            db: self.db.db.clone(),
            vectors: self.live_vectors(),
        }
    }

    /// The sweeper function's service over this pipeline's database, queues and collection.
    pub fn sweeper(&self) -> docpipe_pipeline::services::SweepService {
        docpipe_pipeline::services::SweepService {
            db: self.db.db.clone(),
            queue: std::sync::Arc::new(docpipe_pipeline::adapters::SqsJobQueue::new(
                self.aws.clients.sqs.clone(),
            )),
            objects: std::sync::Arc::new(docpipe_pipeline::adapters::S3ObjectStore::new(
                self.aws.clients.s3.clone(),
            )),
            vectors: self.live_vectors(),
            generations: self.generations.clone(),
            bucket: self.aws.bucket.clone(),
            parse_queue_url: self.aws.parse_queue.clone(),
            index_queue_url: self.aws.index_queue.clone(),
            clock: self.aws.clock.clone(),
            lease: self.aws.clock.store.function_timeout,
            events: self.aws.clients.events.clone(),
        }
    }

    /// The document an upload under `key` of this test's bucket became.
    pub async fn doc_at(&self, key: &str) -> Option<docpipe_db::documents::Document> {
        self.doc(&docpipe_core::ids::derived_doc_id(&self.aws.bucket, key))
            .await
    }

    pub async fn runs(&self, doc_id: &str) -> Vec<docpipe_db::runs::Run> {
        docpipe_db::runs::list_for_doc(&**self.db.client().await, doc_id)
            .await
            .unwrap()
    }

    /// The document's status history, as `from>to` pairs in order.
    pub async fn history(&self, doc_id: &str) -> Vec<String> {
        docpipe_db::runs::history(&**self.db.client().await, doc_id)
            .await
            .unwrap()
            .into_iter()
            .map(|e| format!("{}>{}", e.from_status, e.to_status))
            .collect()
    }

    /// Uploads `body` under `key` and stores it; returns the parse job its run waits for.
    pub async fn stored(&self, key: &str, body: &[u8]) -> docpipe_core::model::JobMessage {
        stored(&self.db, &self.aws, &self.store, key, body).await
    }

    /// The store outcome of the S3 event for `key` (an object already put, or not).
    pub async fn deliver(&self, key: &str) -> docpipe_pipeline::stages::store::StoreOutcome {
        docpipe_pipeline::handlers::store::handle_notification(
            &self.store,
            &s3_put_event(&self.aws.bucket, key),
        )
        .await
        .expect("store succeeds")
        .only()
        .clone()
    }

    /// The parse jobs waiting on this test's parse queue (taken off it).
    pub async fn parse_jobs(&self) -> Vec<docpipe_core::model::JobMessage> {
        self.aws
            .drain(&self.aws.parse_queue, 100)
            .await
            .iter()
            .map(|b| docpipe_core::model::JobMessage::decode(b).expect("a v1 job message"))
            .collect()
    }

    /// A `count(*)` statement's answer.
    pub async fn count(&self, sql: &str) -> i64 {
        self.db
            .client()
            .await
            .query_typed_one(sql, &[])
            .await
            .unwrap()
            .get(0)
    }

    /// A `count(*)` statement's answer, for the document `$1`.
    pub async fn count_for(&self, sql: &str, doc_id: &str) -> i64 {
        self.db
            .client()
            .await
            .query_typed_one(sql, &[(&doc_id, docpipe_db::Type::VARCHAR)])
            .await
            .unwrap()
            .get(0)
    }

    pub async fn cleanup(&self) {
        let _ = self.milvus.drop_collection().await;
    }
}

/// Uploads `body` under `key` and runs the store stage on its S3 event, which must store it; returns
/// the parse job of the run it opened (the copy the stage queued is drained).
pub async fn stored(
    db: &TestDb,
    aws: &TestAws,
    store: &docpipe_pipeline::services::StoreService,
    key: &str,
    body: &[u8],
) -> docpipe_core::model::JobMessage {
    aws.put(key, body).await;
    let notified = docpipe_pipeline::handlers::store::handle_notification(
        store,
        &s3_put_event(&aws.bucket, key),
    )
    .await
    .expect("store");
    assert!(
        matches!(
            notified.only(),
            docpipe_pipeline::stages::store::StoreOutcome::Stored { .. }
        ),
        "{notified}"
    );
    let doc_id = docpipe_core::ids::derived_doc_id(&aws.bucket, key);
    let doc = docpipe_db::documents::get(&**db.client().await, &doc_id)
        .await
        .unwrap()
        .expect("stored document");
    aws.drain(&aws.parse_queue, 10).await;
    docpipe_core::model::JobMessage::new(doc_id, doc.current_run_id.expect("a run"))
}

/// The `docpipe` binary the dev runner runs as (`make up` and `scripts/test.sh` build it).
pub fn docpipe_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("DOCPIPE_BIN") {
        return PathBuf::from(bin);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join("debug").join("docpipe")
}

/// A dev runner of the test's own, over a [`Pipeline`]'s database, bucket, queues and collection:
/// the process that plays AWS, on the template's clock at `scale`, with the hashing embedder.
/// It and its function processes are killed when this is dropped.
pub struct DevRunner {
    child: std::process::Child,
    pub log: PathBuf,
}

impl DevRunner {
    pub fn spawn(p: &Pipeline, scale: f64, extra: &[(&str, String)]) -> DevRunner {
        use std::os::unix::process::CommandExt;
        let bin = docpipe_bin();
        assert!(
            bin.exists(),
            "{} is missing: build it with `cargo build -p docpipe-cli` (make up does)",
            bin.display()
        );
        let log = std::env::temp_dir().join(unique("docpipe-dev-runner-") + ".log");
        let out = std::fs::File::create(&log).expect("dev runner log");
        let aws = aws_config();
        let mut cmd = std::process::Command::new(&bin);
        cmd.arg("dev")
            .arg("--no-api")
            .arg("--wait-seconds")
            .arg("1")
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", std::env::var_os("HOME").unwrap_or_default())
            .env("DOCPIPE_TEMPLATE", workspace_root().join("template.yaml"))
            .env("DOCPIPE_TIME_SCALE", scale.to_string())
            .env(
                "DOCPIPE_TIMEOUT_FLOOR_SECS",
                TEST_TIMEOUT_FLOOR_SECS.to_string(),
            )
            .env("DATABASE_URL", &p.db.url)
            .env("DOCPIPE_DB_POOL_SIZE", "2")
            .env("AWS_ENDPOINT_URL", aws.endpoint_url.unwrap_or_default())
            .env("AWS_REGION", &aws.region)
            .env("AWS_ACCESS_KEY_ID", env_or("AWS_ACCESS_KEY_ID", "test"))
            .env(
                "AWS_SECRET_ACCESS_KEY",
                env_or("AWS_SECRET_ACCESS_KEY", "test"),
            )
            .env("DOCPIPE_BUCKET", &p.aws.bucket)
            .env("DOCPIPE_STORE_QUEUE_URL", &p.aws.store_queue)
            .env("DOCPIPE_PARSE_QUEUE_URL", &p.aws.parse_queue)
            .env("DOCPIPE_INDEX_QUEUE_URL", &p.aws.index_queue)
            .env("DOCPIPE_STORE_DLQ_URL", &p.aws.store_dlq)
            .env("DOCPIPE_PARSE_DLQ_URL", &p.aws.parse_dlq)
            .env("DOCPIPE_INDEX_DLQ_URL", &p.aws.index_dlq)
            .env("DOCPIPE_EVENT_BUS", &p.aws.events_bus)
            .env("MILVUS_URL", milvus_url())
            .env(
                "DOCPIPE_MILVUS_COLLECTION",
                docpipe_vector::VectorIndex::collection(p.milvus.as_ref()),
            )
            .env("DOCPIPE_EMBEDDER", "hash")
            .env(
                "DOCPIPE_PDFIUM_LIB",
                std::env::var_os("DOCPIPE_PDFIUM_LIB").unwrap_or_default(),
            )
            .env(
                "DOCPIPE_OCR_DIR",
                std::env::var_os("DOCPIPE_OCR_DIR").unwrap_or_default(),
            )
            .env("DOCPIPE_LOG", "info")
            .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
            .stdin(std::process::Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            // Its own process group, so that the function processes go down with it.
            .process_group(0);
        let child = cmd.spawn().expect("start the dev runner");
        DevRunner { child, log }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for DevRunner {
    fn drop(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &group])
            .status();
        let _ = self.child.wait();
    }
}

/// Waits until every document of `doc_ids` is `indexed` or `failed`, or `limit` passes; returns
/// the statuses (by doc_id) it saw last.
pub async fn wait_terminal(
    db: &TestDb,
    doc_ids: &[String],
    limit: std::time::Duration,
) -> std::collections::HashMap<String, docpipe_core::model::DocStatus> {
    let started = std::time::Instant::now();
    loop {
        let mut statuses = std::collections::HashMap::new();
        let client = db.client().await;
        for doc_id in doc_ids {
            if let Some(doc) = docpipe_db::documents::get(&**client, doc_id)
                .await
                .expect("read the document")
            {
                statuses.insert(doc_id.clone(), doc.status);
            }
        }
        drop(client);
        let done = statuses.len() == doc_ids.len() && statuses.values().all(|s| s.is_terminal());
        if done || started.elapsed() > limit {
            return statuses;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// Opens a collection of the test Milvus by name, on first use (a rebuild's).
pub fn open_collection() -> docpipe_pipeline::adapters::generations::OpenCollection {
    std::sync::Arc::new(|name: &str| {
        let name = name.to_string();
        std::sync::Arc::new(docpipe_pipeline::adapters::LazyVectorIndex::new(
            name.clone(),
            move || {
                let name = name.clone();
                async move {
                    docpipe_vector::MilvusIndex::connect(&milvus_url(), None, &name)
                        .await
                        .map(|i| {
                            std::sync::Arc::new(i)
                                as std::sync::Arc<dyn docpipe_vector::VectorIndex>
                        })
                }
            },
        )) as std::sync::Arc<dyn docpipe_vector::VectorIndex>
    })
}

/// A rebuild step's batch on the tests' clock: the template's, scaled down as its times are.
pub fn rebuild_batch() -> usize {
    let template = docpipe_cli::template::Template::load(&workspace_root().join("template.yaml"))
        .expect("template.yaml");
    let chunks: f64 = template
        .parameter_default("RebuildBatchChunks")
        .and_then(|v| v.parse().ok())
        .expect("the template's RebuildBatchChunks");
    ((chunks * TEST_TIME_SCALE).round() as usize).max(1)
}
