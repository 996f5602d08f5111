//! What every integration test stands on: the real local stack (`make up`), a fresh database per
//! test (created through PgBouncer and migrated), and a bucket and queues of the test's own, wired
//! with a real bucket notification. Tests therefore run in parallel without seeing each other.

use aws_sdk_s3::types::{
    Event, FilterRule, FilterRuleName, NotificationConfiguration, NotificationConfigurationFilter,
    QueueConfiguration, S3KeyFilter,
};
use docpipe::config::{AwsConfig, DbConfig, Secret, StoreConfig};
use docpipe::db::Db;
use docpipe::services::AwsClients;
use std::path::PathBuf;

/// The stack's defaults, as `make env` prints them; the environment overrides each.
fn env_or(name: &str, default: &str) -> String {
    std::env::var(name)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| default.to_string())
}

pub fn database_url() -> String {
    env_or(
        "DATABASE_URL",
        "postgres://docpipe:docpipe@127.0.0.1:6432/docpipe",
    )
}

pub fn aws_config() -> AwsConfig {
    AwsConfig {
        endpoint_url: Some(env_or("AWS_ENDPOINT_URL", "http://127.0.0.1:5000")),
        region: env_or("AWS_REGION", "us-east-1"),
        attempt_timeout_secs: 5,
    }
}

/// The repository's root, and the shared folder beside it (corpus, seeds, events).
pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

pub fn shared_dir() -> PathBuf {
    std::env::var("DOCPIPE_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join("..").join("shared"))
}

pub fn unique(prefix: &str) -> String {
    let n: u64 = rand::random();
    format!("{prefix}{:012x}", n & 0xffff_ffff_ffff)
}

/// A database of the test's own, reached through PgBouncer like production reaches RDS Proxy.
pub struct TestDb {
    pub name: String,
    pub url: String,
    pub db: Db,
}

impl TestDb {
    pub async fn new() -> TestDb {
        let admin_url = database_url();
        let name = unique("docpipe_t_");
        let (client, conn) = tokio_postgres::connect(&admin_url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("cannot reach PostgreSQL through PgBouncer at {admin_url} (is the stack up? `make up`): {e}"));
        tokio::spawn(conn);
        client
            .simple_query(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create the test database");
        let url = replace_db_name(&admin_url, &name);
        let db = pool(&url, 4);
        docpipe::db::migrate::run(&db).await.expect("migrations");
        TestDb { name, url, db }
    }

    /// A database that outlives the run (a benchmark's corpus, indexed once): created when
    /// missing, migrated, never dropped.
    pub async fn persistent(name: &str) -> TestDb {
        let admin_url = database_url();
        let (client, conn) = tokio_postgres::connect(&admin_url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at {admin_url} (`make up`): {e}"));
        tokio::spawn(conn);
        let exists = client
            .query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&name])
            .await
            .expect("pg_database")
            .is_some();
        if !exists {
            client
                .simple_query(&format!("CREATE DATABASE {name}"))
                .await
                .expect("create the database");
        }
        let url = replace_db_name(&admin_url, name);
        let db = pool(&url, 4);
        docpipe::db::migrate::run(&db).await.expect("migrations");
        TestDb {
            name: name.to_string(),
            url,
            db,
        }
    }

    /// A second, independent pool on the same database: another "process".
    pub fn another_pool(&self, size: usize) -> Db {
        pool(&self.url, size)
    }

    pub async fn client(&self) -> docpipe::db::Client {
        self.db.client().await.expect("db client")
    }

    /// The first column of `sql`'s rows, whose one parameter is a doc_id.
    pub async fn column_for_doc<T>(&self, sql: &str, doc_id: &str) -> Vec<T>
    where
        T: for<'a> tokio_postgres::types::FromSql<'a>,
    {
        self.client()
            .await
            .query_typed(sql, &[(&doc_id, docpipe::db::Type::VARCHAR)])
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .iter()
            .map(|r| r.get(0))
            .collect()
    }
}

fn pool(url: &str, size: usize) -> Db {
    Db::connect(&DbConfig {
        url: Secret::new(url.to_string()),
        pool_size: size,
        secret_arn: None,
        ca_bundle: None,
    })
    .expect("pool")
}

fn replace_db_name(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let base = match base.rfind('/') {
        Some(i) if i > "postgres://".len() => &base[..i],
        _ => base,
    };
    match query {
        Some(q) => format!("{base}/{name}?{q}"),
        None => format!("{base}/{name}"),
    }
}

/// A bucket and the pipeline's queues, all new, with the bucket notification that sends
/// `s3:ObjectCreated:*` under `uploads/` to the store-events queue.
pub struct TestAws {
    pub clients: AwsClients,
    pub region: String,
    pub bucket: String,
    pub store_queue: String,
    pub parse_queue: String,
    pub index_queue: String,
    pub store_dlq: String,
    pub parse_dlq: String,
    pub index_dlq: String,
    /// The template's clock at the tests' scale; the queues carry its visibility timeouts,
    /// retention and redrive policy.
    pub clock: docpipe::clock::Clock,
}

/// The tests' time scale: every wait of the template shrunk by this factor (the work is not).
pub const TEST_TIME_SCALE: f64 = 0.01;
/// A scaled function timeout never goes below this: the slowest stage of a test document in a
/// debug build on a 2-core machine (a law parsed and indexed with e5 takes a few seconds) fits.
pub const TEST_TIMEOUT_FLOOR_SECS: f64 = 20.0;

/// The template's clock (its Globals' values), at `scale` with the tests' timeout floor.
pub fn template_clock(scale: f64) -> docpipe::clock::Clock {
    let template = docpipe_cli::template::Template::load(&workspace_root().join("template.yaml"))
        .expect("template.yaml");
    let mut vars: std::collections::HashMap<String, String> = template
        .clock_env()
        .expect("the template's clock")
        .into_iter()
        .collect();
    vars.insert("DOCPIPE_TIME_SCALE".into(), scale.to_string());
    vars.insert(
        "DOCPIPE_TIMEOUT_FLOOR_SECS".into(),
        TEST_TIMEOUT_FLOOR_SECS.to_string(),
    );
    clock_from(vars)
}

/// A clock from explicit variables, checked as a function checks it at start.
pub fn clock_from(vars: std::collections::HashMap<String, String>) -> docpipe::clock::Clock {
    let mut env = docpipe::config::EnvReader::with_lookup(move |k| vars.get(k).cloned());
    let clock = docpipe::clock::Clock::read(&mut env);
    env.finish().expect("a consistent clock");
    clock
}

/// The variables a function process of the tests' clock gets (the template's, plus the scale).
pub fn clock_env(scale: f64) -> Vec<(String, String)> {
    let template = docpipe_cli::template::Template::load(&workspace_root().join("template.yaml"))
        .expect("template.yaml");
    let mut vars = template.clock_env().expect("the template's clock");
    vars.push(("DOCPIPE_TIME_SCALE".into(), scale.to_string()));
    vars.push((
        "DOCPIPE_TIMEOUT_FLOOR_SECS".into(),
        TEST_TIMEOUT_FLOOR_SECS.to_string(),
    ));
    vars
}

impl TestAws {
    pub async fn new() -> TestAws {
        TestAws::with_scale(TEST_TIME_SCALE).await
    }

    /// A bucket and queues whose clock is the template's at `scale`.
    pub async fn with_scale(scale: f64) -> TestAws {
        let config = aws_config();
        let clients = AwsClients::new(&config).await;
        let prefix = unique("t");
        let bucket = format!("{prefix}-bucket");
        clients
            .s3
            .create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .expect("create bucket (is moto up? `make up`)");
        let clock = template_clock(scale);
        let mut queues = Vec::new();
        for (name, stage) in [
            ("store-events", clock.store),
            ("parse", clock.parse),
            ("index", clock.index),
        ] {
            let queue = create_queue(&clients.sqs, &format!("{prefix}-{name}")).await;
            let dlq = create_queue(&clients.sqs, &format!("{prefix}-{name}-dlq")).await;
            docpipe::dev_runner::apply_queue_clock(
                &clients.sqs,
                &queue,
                Some(&dlq),
                stage.visibility,
                clock.retention,
                clock.max_receive_count,
            )
            .await
            .expect("the template's queue attributes");
            queues.push((queue, dlq));
        }
        let [(store_queue, store_dlq), (parse_queue, parse_dlq), (index_queue, index_dlq)]: [(
            String,
            String,
        );
            3] = queues.try_into().expect("three queues");
        let store_arn = docpipe::dev_runner::queue_arn(&store_queue, &config.region);
        let filter = NotificationConfigurationFilter::builder()
            .key(
                S3KeyFilter::builder()
                    .filter_rules(
                        FilterRule::builder()
                            .name(FilterRuleName::Prefix)
                            .value("uploads/")
                            .build(),
                    )
                    .build(),
            )
            .build();
        clients
            .s3
            .put_bucket_notification_configuration()
            .bucket(&bucket)
            .notification_configuration(
                NotificationConfiguration::builder()
                    .queue_configurations(
                        QueueConfiguration::builder()
                            .id("store-on-upload")
                            .queue_arn(store_arn)
                            .events(Event::from("s3:ObjectCreated:*"))
                            .filter(filter)
                            .build()
                            .expect("queue configuration"),
                    )
                    .build(),
            )
            .send()
            .await
            .expect("bucket notification");
        TestAws {
            clients,
            region: config.region,
            bucket,
            store_queue,
            parse_queue,
            index_queue,
            store_dlq,
            parse_dlq,
            index_dlq,
            clock,
        }
    }

    pub fn store_config(&self, max_bytes: u64) -> StoreConfig {
        StoreConfig {
            parse_queue_url: self.parse_queue.clone(),
            store_queue_url: Some(self.store_queue.clone()),
            max_bytes,
            stage_deadline_secs: 900,
            clock: self.clock.clone(),
        }
    }

    pub async fn put(&self, key: &str, body: &[u8]) {
        self.clients
            .s3
            .put_object()
            .bucket(&self.bucket)
            .key(key)
            .content_type("text/plain")
            .body(body.to_vec().into())
            .send()
            .await
            .expect("put object");
    }

    pub async fn delete(&self, key: &str) {
        self.clients
            .s3
            .delete_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .expect("delete object");
    }

    /// Drains up to `max` message bodies from a queue, deleting them.
    pub async fn drain(&self, queue_url: &str, max: usize) -> Vec<String> {
        let mut bodies = Vec::new();
        loop {
            let out = self
                .clients
                .sqs
                .receive_message()
                .queue_url(queue_url)
                .max_number_of_messages(10)
                .wait_time_seconds(1)
                .send()
                .await
                .expect("receive");
            let messages = out.messages.unwrap_or_default();
            if messages.is_empty() {
                return bodies;
            }
            for m in messages {
                self.clients
                    .sqs
                    .delete_message()
                    .queue_url(queue_url)
                    .receipt_handle(m.receipt_handle.unwrap_or_default())
                    .send()
                    .await
                    .expect("delete message");
                bodies.push(m.body.unwrap_or_default());
            }
            if bodies.len() >= max {
                return bodies;
            }
        }
    }
}

/// A queue with SQS's defaults; [`TestAws::new`] then gives it the template's clock.
async fn create_queue(sqs: &aws_sdk_sqs::Client, name: &str) -> String {
    sqs.create_queue()
        .queue_name(name)
        .send()
        .await
        .expect("create queue")
        .queue_url
        .expect("queue url")
}

/// An S3 put notification for one object, the way moto delivers it (key form-urlencoded, no
/// `userIdentity`, no `sequencer`).
pub fn s3_put_event(bucket: &str, key: &str) -> serde_json::Value {
    let encoded: String = form_encode(key);
    serde_json::json!({
        "Records": [{
            "eventVersion": "2.1",
            "eventSource": "aws:s3",
            "awsRegion": "us-east-1",
            "eventTime": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "eventName": "ObjectCreated:Put",
            "s3": {
                "s3SchemaVersion": "1.0",
                "configurationId": "store-on-upload",
                "bucket": {"name": bucket, "arn": format!("arn:aws:s3:::{bucket}")},
                "object": {"key": encoded}
            }
        }]
    })
}

fn form_encode(key: &str) -> String {
    let mut out = String::new();
    for b in key.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// An SQS batch whose message bodies are the given strings.
pub fn sqs_batch(bodies: &[String]) -> aws_lambda_events::event::sqs::SqsEvent {
    let mut event = aws_lambda_events::event::sqs::SqsEvent::default();
    for (i, body) in bodies.iter().enumerate() {
        let mut m = aws_lambda_events::event::sqs::SqsMessage::default();
        m.message_id = Some(format!("msg-{i}"));
        m.body = Some(body.clone());
        m.event_source = Some("aws:sqs".into());
        event.records.push(m);
    }
    event
}

pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}

/// A queue that fails every send while `failing` is set: the fault a test injects in place of an
/// SQS outage. Everything else goes to the real queue.
pub struct FlakyQueue {
    pub inner: std::sync::Arc<dyn docpipe::adapters::JobQueue>,
    pub failing: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl docpipe::adapters::JobQueue for FlakyQueue {
    async fn send(
        &self,
        queue_url: &str,
        body: String,
    ) -> Result<(), docpipe::adapters::QueueError> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(docpipe::adapters::QueueError {
                queue_url: queue_url.to_string(),
                operation: "SendMessage",
                source: "injected: queue unavailable".into(),
            });
        }
        self.inner.send(queue_url, body).await
    }

    async fn hold_back(
        &self,
        queue_url: &str,
        receipt_handle: &str,
        delay: std::time::Duration,
    ) -> Result<(), docpipe::adapters::QueueError> {
        self.inner.hold_back(queue_url, receipt_handle, delay).await
    }

    async fn depth(
        &self,
        queue_url: &str,
    ) -> Result<docpipe::adapters::QueueDepth, docpipe::adapters::QueueError> {
        self.inner.depth(queue_url).await
    }
}

/// Points the parser at the stack's `libpdfium.so` when the environment does not (`make env` does).
pub fn ensure_pdfium_env() {
    if std::env::var_os("DOCPIPE_PDFIUM_LIB").is_none() {
        let lib = workspace_root().join(".local/lib/libpdfium.so");
        // Tests call this before they start any thread that reads the environment.
        std::env::set_var("DOCPIPE_PDFIUM_LIB", lib);
    }
}

pub fn corpus_dir() -> PathBuf {
    std::env::var("DOCPIPE_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| shared_dir().join("corpus"))
}

/// The Markdown laws of the corpus (`laws/*.md`), in file-name order.
pub fn law_paths() -> Vec<PathBuf> {
    let dir = corpus_dir().join("laws");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    paths.sort();
    paths
}

/// A law's file name and text.
pub fn read_law(path: &std::path::Path) -> (String, String) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (
        path.file_name().unwrap().to_string_lossy().into_owned(),
        text,
    )
}

static ARTICLE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r"^第[一二三四五六七八九十百千零〇两\d]+条").expect("static regex")
});

/// A law's article lines (those that open with 第X条), trimmed.
pub fn article_lines(law: &str) -> Vec<&str> {
    law.lines()
        .map(str::trim)
        .filter(|l| ARTICLE.is_match(l))
        .collect()
}

/// The longest sentence of a law's middle article: what a person would paste to find the law.
pub fn law_probe(law: &str) -> String {
    let articles = article_lines(law);
    let middle = articles
        .get(articles.len() / 2)
        .unwrap_or_else(|| panic!("a law with articles: {:.80}", law));
    article_probe(middle).expect("an article has a sentence")
}

/// The longest sentence of an article's body: what a person would paste to find the law.
pub fn article_probe(article: &str) -> Option<String> {
    let body = article
        .split_once(char::is_whitespace)
        .map_or(article, |(_, b)| b);
    body.split(['。', '；'])
        .max_by_key(|s| s.chars().count())
        .map(|s| s.trim().to_string())
}

impl TestAws {
    pub fn parse_config(&self) -> docpipe::config::ParseConfig {
        docpipe::config::ParseConfig {
            bucket: self.bucket.clone(),
            parse_queue_url: self.parse_queue.clone(),
            index_queue_url: self.index_queue.clone(),
            max_bytes: docpipe::config::DEFAULT_MAX_BYTES,
            chunk: Default::default(),
            limits: Default::default(),
            clock: self.clock.clone(),
        }
    }

    pub async fn get(&self, key: &str) -> Vec<u8> {
        self.clients
            .s3
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await
            .expect("get object")
            .body
            .collect()
            .await
            .expect("body")
            .into_bytes()
            .to_vec()
    }

    pub async fn keys(&self, prefix: &str) -> Vec<String> {
        let out = self
            .clients
            .s3
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .send()
            .await
            .expect("list");
        out.contents()
            .iter()
            .filter_map(|o| o.key().map(String::from))
            .collect()
    }
}

pub fn milvus_url() -> String {
    env_or("MILVUS_URL", "http://127.0.0.1:19530")
}

/// The whole pipeline over one test's database, bucket, queues and Milvus collection, driven
/// stage by stage the way the queues would drive it.
pub struct Pipeline {
    pub db: TestDb,
    pub aws: TestAws,
    pub store: docpipe::services::StoreService,
    pub parse: docpipe::services::ParseService,
    pub index: docpipe::services::IndexService,
    pub milvus: std::sync::Arc<docpipe_vector::MilvusIndex>,
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
        let store = docpipe::services::StoreService::new(
            db.db.clone(),
            &aws.clients,
            aws.store_config(docpipe::config::DEFAULT_MAX_BYTES),
        );
        let parse =
            docpipe::services::ParseService::new(db.db.clone(), &aws.clients, aws.parse_config());
        let index = docpipe::services::IndexService {
            db: db.db.clone(),
            objects: std::sync::Arc::new(docpipe::adapters::S3ObjectStore::new(
                aws.clients.s3.clone(),
            )),
            queue: std::sync::Arc::new(docpipe::adapters::SqsJobQueue::new(
                aws.clients.sqs.clone(),
            )),
            embedder,
            vectors: milvus.clone(),
            config: docpipe::config::IndexConfig {
                bucket: aws.bucket.clone(),
                index_queue_url: aws.index_queue.clone(),
                embed_batch: 32,
                clock: aws.clock.clone(),
            },
        };
        Pipeline {
            db,
            aws,
            store,
            parse,
            index,
            milvus,
        }
    }

    pub fn hash() -> std::sync::Arc<dyn docpipe_embed::Embedder> {
        std::sync::Arc::new(docpipe_embed::HashEmbedder::new(384).expect("hash embedder"))
    }

    /// Uploads a file and carries it through store, parse and index; returns its doc_id.
    pub async fn ingest(&self, key: &str, body: &[u8]) -> String {
        self.aws.put(key, body).await;
        docpipe::handlers::store::handle_notification(
            &self.store,
            &s3_put_event(&self.aws.bucket, key),
        )
        .await
        .expect("store");
        let doc_id = docpipe::ids::derived_doc_id(&self.aws.bucket, key);
        self.drive(&doc_id).await;
        doc_id
    }

    /// Uploads a file, stores it and parses it; returns the job its index stage is waiting for.
    pub async fn parsed(&self, key: &str, body: &[u8]) -> docpipe::model::JobMessage {
        let job = stored(&self.db, &self.aws, &self.store, key, body).await;
        docpipe::stages::parse::parse_job(&self.parse.deps(), &job)
            .await
            .expect("parse");
        job
    }

    /// Runs the current run's remaining stages directly (the queues' messages are drained).
    pub async fn drive(&self, doc_id: &str) {
        use docpipe::model::{DocStatus, JobMessage};
        let doc = self.doc(doc_id).await.expect("document");
        let job = JobMessage::new(doc_id, doc.current_run_id.expect("a run"));
        if doc.status == DocStatus::Stored {
            docpipe::stages::parse::parse_job(&self.parse.deps(), &job)
                .await
                .expect("parse");
        }
        if self.doc(doc_id).await.expect("document").status == DocStatus::Parsed {
            docpipe::stages::index::index_job(&self.index.deps(), &job)
                .await
                .expect("index");
        }
        self.aws.drain(&self.aws.parse_queue, 100).await;
        self.aws.drain(&self.aws.index_queue, 100).await;
    }

    /// The delete stage's dependencies, over this pipeline's stores.
    pub fn delete_deps(&self) -> docpipe::stages::delete::DeleteDeps<'_> {
        docpipe::stages::delete::DeleteDeps {
            db: &self.db.db,
            objects: self.store.objects.as_ref(),
            vectors: self.milvus.as_ref(),
            artifacts_bucket: &self.aws.bucket,
        }
    }

    /// `POST /search` as the API runs it (a fresh cache each call, so nothing is remembered
    /// between the steps of a test).
    pub async fn search(
        &self,
        query: &str,
        top_k: usize,
        mode: docpipe::search::Mode,
        filters: &docpipe::search::Filters,
    ) -> docpipe::search::SearchResult {
        let cache = docpipe::search::SearchCache::default();
        docpipe::search::search(
            &docpipe::search::SearchDeps {
                db: &self.db.db,
                embedder: self.index.embedder.as_ref(),
                vectors: self.milvus.as_ref(),
                cache: &cache,
            },
            &docpipe::search::Query {
                text: query,
                top_k,
                mode,
                filters,
            },
        )
        .await
        .unwrap_or_else(|e| panic!("search {query:?} ({mode:?}): {e}"))
    }

    /// `POST /documents/{id}/retry`'s stage, as the API runs it.
    pub async fn retry(
        &self,
        doc_id: &str,
    ) -> Result<docpipe::stages::retry::Retried, docpipe::stages::retry::RetryError> {
        let deps = docpipe::stages::retry::RetryDeps {
            db: &self.db.db,
            objects: self.store.objects.as_ref(),
            queue: self.store.queue.as_ref(),
            parse_queue_url: &self.aws.parse_queue,
            stage_deadline_secs: 900,
            max_bytes: docpipe::config::DEFAULT_MAX_BYTES,
        };
        docpipe::stages::retry::retry(&deps, doc_id).await
    }

    /// Registers a document through the API's stage; it waits for its upload.
    pub async fn register(&self, file_name: &str) -> docpipe::stages::register::Registered {
        docpipe::stages::register::register(
            &self.db.db,
            &self.aws.bucket,
            &docpipe::stages::register::Registration {
                file_name: file_name.into(),
                content_type: "text/markdown".into(),
                ..Default::default()
            },
            900,
        )
        .await
        .expect("register")
    }

    pub async fn doc(&self, doc_id: &str) -> Option<docpipe::db::documents::Document> {
        docpipe::db::documents::get(&**self.db.client().await, doc_id)
            .await
            .unwrap()
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
    store: &docpipe::services::StoreService,
    key: &str,
    body: &[u8],
) -> docpipe::model::JobMessage {
    aws.put(key, body).await;
    let notified =
        docpipe::handlers::store::handle_notification(store, &s3_put_event(&aws.bucket, key))
            .await
            .expect("store");
    assert!(
        matches!(
            notified.only(),
            docpipe::stages::store::StoreOutcome::Stored { .. }
        ),
        "{notified}"
    );
    let doc_id = docpipe::ids::derived_doc_id(&aws.bucket, key);
    let doc = docpipe::db::documents::get(&**db.client().await, &doc_id)
        .await
        .unwrap()
        .expect("stored document");
    aws.drain(&aws.parse_queue, 10).await;
    docpipe::model::JobMessage::new(doc_id, doc.current_run_id.expect("a run"))
}

/// Drives the local stack's fault controls: `stop`, `kill`, `pause`, `resume` a service, or `up`
/// to bring back whatever is down. Only the fault tests use this (they run alone, one at a time).
pub fn stack(action: &str, service: &str) {
    let script = workspace_root().join("scripts/stack.sh");
    let run = || {
        let mut cmd = std::process::Command::new("bash");
        cmd.arg(&script).arg(action);
        if !service.is_empty() {
            cmd.arg(service);
        }
        cmd.output().expect("run scripts/stack.sh")
    };
    let mut out = run();
    if !out.status.success() && action == "up" {
        // A service that was just killed can take a moment to let go of its port on a busy machine.
        std::thread::sleep(std::time::Duration::from_secs(5));
        out = run();
    }
    assert!(
        out.status.success(),
        "stack.sh {action} {service} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The real object store with a hook after every successful put: a test makes the hook kill a
/// service, or fail, at the point it chooses ("after the artifact write, before the commit").
pub struct HookedObjectStore {
    pub inner: std::sync::Arc<dyn docpipe::adapters::ObjectStore>,
    /// Called with the key just written; an error is returned to the stage as the put's.
    #[allow(clippy::type_complexity)]
    pub after_put: Box<dyn Fn(&str) -> Result<(), docpipe::adapters::StorageError> + Send + Sync>,
    /// Called with the key after its sha256 was computed (the window before the store's insert).
    #[allow(clippy::type_complexity)]
    pub after_sha256: Box<dyn Fn(&str) + Send + Sync>,
    /// How often an object's bytes were read (`get` and `sha256`).
    pub body_reads: std::sync::atomic::AtomicUsize,
}

impl HookedObjectStore {
    pub fn new(inner: std::sync::Arc<dyn docpipe::adapters::ObjectStore>) -> Self {
        HookedObjectStore {
            inner,
            after_put: Box::new(|_| Ok(())),
            after_sha256: Box::new(|_| {}),
            body_reads: Default::default(),
        }
    }

    fn read_body(&self) {
        self.body_reads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl docpipe::adapters::ObjectStore for HookedObjectStore {
    async fn head(
        &self,
        b: &str,
        k: &str,
    ) -> Result<Option<docpipe::adapters::ObjectHead>, docpipe::adapters::StorageError> {
        self.inner.head(b, k).await
    }
    async fn sha256(
        &self,
        b: &str,
        k: &str,
        l: u64,
    ) -> Result<docpipe::adapters::ContentDigest, docpipe::adapters::StorageError> {
        self.read_body();
        let digest = self.inner.sha256(b, k, l).await?;
        (self.after_sha256)(k);
        Ok(digest)
    }
    async fn get(
        &self,
        b: &str,
        k: &str,
        l: u64,
    ) -> Result<Vec<u8>, docpipe::adapters::StorageError> {
        self.read_body();
        self.inner.get(b, k, l).await
    }
    async fn put(
        &self,
        b: &str,
        k: &str,
        body: Vec<u8>,
        ct: &str,
    ) -> Result<(), docpipe::adapters::StorageError> {
        self.inner.put(b, k, body, ct).await?;
        (self.after_put)(k)
    }
    async fn delete(&self, b: &str, k: &str) -> Result<(), docpipe::adapters::StorageError> {
        self.inner.delete(b, k).await
    }
    async fn delete_prefix(
        &self,
        b: &str,
        p: &str,
    ) -> Result<usize, docpipe::adapters::StorageError> {
        self.inner.delete_prefix(b, p).await
    }
    async fn list(&self, b: &str, p: &str) -> Result<Vec<String>, docpipe::adapters::StorageError> {
        self.inner.list(b, p).await
    }
    async fn presign_put(
        &self,
        b: &str,
        k: &str,
        ct: &str,
        e: std::time::Duration,
    ) -> Result<String, docpipe::adapters::StorageError> {
        self.inner.presign_put(b, k, ct, e).await
    }
    async fn presign_get(
        &self,
        b: &str,
        k: &str,
        e: std::time::Duration,
    ) -> Result<String, docpipe::adapters::StorageError> {
        self.inner.presign_get(b, k, e).await
    }
}

/// The real vector index with hooks around each insert (`n` counts inserts from 1): a test makes a
/// hook refuse the insert (Milvus down) or run a fault right after it (crash after the write).
pub struct HookedVectorIndex {
    pub inner: std::sync::Arc<dyn docpipe_vector::VectorIndex>,
    #[allow(clippy::type_complexity)]
    pub before_insert: Box<dyn Fn(usize) -> Result<(), docpipe_vector::VectorError> + Send + Sync>,
    #[allow(clippy::type_complexity)]
    pub after_insert: Box<dyn Fn(usize) -> Result<(), docpipe_vector::VectorError> + Send + Sync>,
    /// Called with the doc_id before every delete (of a document, a run or other runs).
    #[allow(clippy::type_complexity)]
    pub before_delete: Box<dyn Fn(&str) -> Result<(), docpipe_vector::VectorError> + Send + Sync>,
    pub inserts: std::sync::atomic::AtomicUsize,
}

impl HookedVectorIndex {
    pub fn new(inner: std::sync::Arc<dyn docpipe_vector::VectorIndex>) -> Self {
        HookedVectorIndex {
            inner,
            before_insert: Box::new(|_| Ok(())),
            after_insert: Box::new(|_| Ok(())),
            before_delete: Box::new(|_| Ok(())),
            inserts: Default::default(),
        }
    }
}

/// What a hook returns to play an outage.
pub fn vector_outage(op: &'static str) -> docpipe_vector::VectorError {
    docpipe_vector::VectorError::Unavailable {
        op,
        source: "injected: connection refused".into(),
    }
}

#[async_trait::async_trait]
impl docpipe_vector::VectorIndex for HookedVectorIndex {
    fn collection(&self) -> &str {
        self.inner.collection()
    }
    async fn ensure_collection(
        &self,
        dim: usize,
        model: &str,
    ) -> Result<(), docpipe_vector::VectorError> {
        self.inner.ensure_collection(dim, model).await
    }
    async fn insert(
        &self,
        records: &[docpipe_vector::ChunkRecord],
    ) -> Result<(), docpipe_vector::VectorError> {
        let n = self
            .inserts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        (self.before_insert)(n)?;
        self.inner.insert(records).await?;
        (self.after_insert)(n)
    }
    async fn delete_doc(&self, d: &str) -> Result<(), docpipe_vector::VectorError> {
        (self.before_delete)(d)?;
        self.inner.delete_doc(d).await
    }
    async fn delete_other_runs(&self, d: &str, k: i64) -> Result<(), docpipe_vector::VectorError> {
        (self.before_delete)(d)?;
        self.inner.delete_other_runs(d, k).await
    }
    async fn delete_run(&self, d: &str, r: i64) -> Result<(), docpipe_vector::VectorError> {
        (self.before_delete)(d)?;
        self.inner.delete_run(d, r).await
    }
    async fn delete_runs_up_to(&self, d: &str, r: i64) -> Result<(), docpipe_vector::VectorError> {
        (self.before_delete)(d)?;
        self.inner.delete_runs_up_to(d, r).await
    }
    async fn count(&self, d: &str, r: Option<i64>) -> Result<usize, docpipe_vector::VectorError> {
        self.inner.count(d, r).await
    }
    async fn doc_runs(&self) -> Result<docpipe_vector::DocRuns, docpipe_vector::VectorError> {
        self.inner.doc_runs().await
    }
    async fn search(
        &self,
        v: &[f32],
        k: usize,
        f: &docpipe_vector::SearchFilters,
    ) -> Result<Vec<docpipe_vector::VectorHit>, docpipe_vector::VectorError> {
        self.inner.search(v, k, f).await
    }
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
) -> std::collections::HashMap<String, docpipe::model::DocStatus> {
    let started = std::time::Instant::now();
    loop {
        let mut statuses = std::collections::HashMap::new();
        let client = db.client().await;
        for doc_id in doc_ids {
            if let Some(doc) = docpipe::db::documents::get(&**client, doc_id)
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

/// A document's run events, as (stage, kind) pairs in order.
pub async fn run_event_kinds(db: &TestDb, doc_id: &str) -> Vec<(String, String)> {
    docpipe::db::run_events::list_for_doc(&**db.client().await, doc_id)
        .await
        .expect("run events")
        .into_iter()
        .map(|e| (e.stage, e.kind))
        .collect()
}
