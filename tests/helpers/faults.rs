//! Fault hooks: adapters that fail or run a fault at the point a test chooses, and the local
//! stack's own controls.

use crate::*;

/// A queue that fails every send while `failing` is set: the fault a test injects in place of an
/// SQS outage. Everything else goes to the real queue.
pub struct FlakyQueue {
    pub inner: std::sync::Arc<dyn docpipe_pipeline::adapters::JobQueue>,
    pub failing: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl docpipe_pipeline::adapters::JobQueue for FlakyQueue {
    async fn send(
        &self,
        queue_url: &str,
        body: String,
    ) -> Result<(), docpipe_pipeline::adapters::QueueError> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(docpipe_pipeline::adapters::QueueError {
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
    ) -> Result<(), docpipe_pipeline::adapters::QueueError> {
        self.inner.hold_back(queue_url, receipt_handle, delay).await
    }

    async fn depth(
        &self,
        queue_url: &str,
    ) -> Result<docpipe_pipeline::adapters::QueueDepth, docpipe_pipeline::adapters::QueueError>
    {
        self.inner.depth(queue_url).await
    }
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
    pub inner: std::sync::Arc<dyn docpipe_pipeline::adapters::ObjectStore>,
    /// Called with the key just written; an error is returned to the stage as the put's.
    #[allow(clippy::type_complexity)]
    pub after_put:
        Box<dyn Fn(&str) -> Result<(), docpipe_pipeline::adapters::StorageError> + Send + Sync>,
    /// Called with the key after its sha256 was computed (the window before the store's insert).
    #[allow(clippy::type_complexity)]
    pub after_sha256: Box<dyn Fn(&str) + Send + Sync>,
    /// How often an object's bytes were read (`get` and `sha256`).
    pub body_reads: std::sync::atomic::AtomicUsize,
    /// Keys listed by `list_page` so far.
    pub keys_listed: std::sync::atomic::AtomicUsize,
}

impl HookedObjectStore {
    pub fn new(inner: std::sync::Arc<dyn docpipe_pipeline::adapters::ObjectStore>) -> Self {
        HookedObjectStore {
            inner,
            after_put: Box::new(|_| Ok(())),
            after_sha256: Box::new(|_| {}),
            body_reads: Default::default(),
            keys_listed: Default::default(),
        }
    }

    fn read_body(&self) {
        self.body_reads
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl docpipe_pipeline::adapters::ObjectStore for HookedObjectStore {
    async fn head(
        &self,
        b: &str,
        k: &str,
    ) -> Result<
        Option<docpipe_pipeline::adapters::ObjectHead>,
        docpipe_pipeline::adapters::StorageError,
    > {
        self.inner.head(b, k).await
    }
    async fn sha256(
        &self,
        b: &str,
        k: &str,
        l: u64,
    ) -> Result<docpipe_pipeline::adapters::ContentDigest, docpipe_pipeline::adapters::StorageError>
    {
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
    ) -> Result<Vec<u8>, docpipe_pipeline::adapters::StorageError> {
        self.read_body();
        self.inner.get(b, k, l).await
    }
    async fn put(
        &self,
        b: &str,
        k: &str,
        body: Vec<u8>,
        ct: &str,
    ) -> Result<(), docpipe_pipeline::adapters::StorageError> {
        self.inner.put(b, k, body, ct).await?;
        (self.after_put)(k)
    }
    async fn delete(
        &self,
        b: &str,
        k: &str,
    ) -> Result<(), docpipe_pipeline::adapters::StorageError> {
        self.inner.delete(b, k).await
    }
    async fn delete_prefix(
        &self,
        b: &str,
        p: &str,
    ) -> Result<usize, docpipe_pipeline::adapters::StorageError> {
        self.inner.delete_prefix(b, p).await
    }
    async fn list(
        &self,
        b: &str,
        p: &str,
    ) -> Result<Vec<String>, docpipe_pipeline::adapters::StorageError> {
        self.inner.list(b, p).await
    }
    async fn list_page(
        &self,
        b: &str,
        p: &str,
        after: &str,
        limit: usize,
    ) -> Result<(Vec<String>, bool), docpipe_pipeline::adapters::StorageError> {
        let page = self.inner.list_page(b, p, after, limit).await?;
        self.keys_listed
            .fetch_add(page.0.len(), std::sync::atomic::Ordering::SeqCst);
        Ok(page)
    }
    async fn presign_put(
        &self,
        b: &str,
        k: &str,
        ct: &str,
        e: std::time::Duration,
    ) -> Result<String, docpipe_pipeline::adapters::StorageError> {
        self.inner.presign_put(b, k, ct, e).await
    }
    async fn presign_get(
        &self,
        b: &str,
        k: &str,
        e: std::time::Duration,
    ) -> Result<String, docpipe_pipeline::adapters::StorageError> {
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
    /// Calls of `count` so far.
    pub counts: std::sync::atomic::AtomicUsize,
    /// Vectors listed by `chunk_page` so far.
    pub listed: std::sync::atomic::AtomicUsize,
    /// Calls of `set_projection` (a write-back that reads the vectors first) so far.
    pub projections_read: std::sync::atomic::AtomicUsize,
    /// Of those, the calls allowed to wait for the index to catch up with its writes.
    pub projections_waited: std::sync::atomic::AtomicUsize,
    /// Searches lose their tenant filter (the partition key's `organ_id in [...]`), as a Milvus
    /// that ignored it would.
    pub drop_tenant_filter: std::sync::atomic::AtomicBool,
    /// The documents of every hit a search returned.
    pub searched_docs: std::sync::Mutex<Vec<String>>,
}

impl HookedVectorIndex {
    pub fn new(inner: std::sync::Arc<dyn docpipe_vector::VectorIndex>) -> Self {
        HookedVectorIndex {
            inner,
            before_insert: Box::new(|_| Ok(())),
            after_insert: Box::new(|_| Ok(())),
            before_delete: Box::new(|_| Ok(())),
            inserts: Default::default(),
            counts: Default::default(),
            listed: Default::default(),
            projections_read: Default::default(),
            projections_waited: Default::default(),
            drop_tenant_filter: Default::default(),
            searched_docs: Default::default(),
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
    async fn drop_collection(&self) -> Result<(), docpipe_vector::VectorError> {
        self.inner.drop_collection().await
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
    async fn set_projection(
        &self,
        d: &str,
        run: i64,
        p: docpipe_vector::Projection,
        read: docpipe_vector::ReadBack,
    ) -> Result<usize, docpipe_vector::VectorError> {
        self.projections_read
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if matches!(
            read,
            docpipe_vector::ReadBack::Wait | docpipe_vector::ReadBack::WholeOrWait(_)
        ) {
            self.projections_waited
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.inner.set_projection(d, run, p, read).await
    }
    async fn upsert(
        &self,
        records: &[docpipe_vector::ChunkRecord],
    ) -> Result<(), docpipe_vector::VectorError> {
        self.inner.upsert(records).await
    }
    async fn drifted(
        &self,
        expected: &[docpipe_vector::RunProjection],
    ) -> Result<Vec<String>, docpipe_vector::VectorError> {
        self.inner.drifted(expected).await
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
    async fn delete_run_from(
        &self,
        d: &str,
        r: i64,
        from: i64,
    ) -> Result<(), docpipe_vector::VectorError> {
        (self.before_delete)(d)?;
        self.inner.delete_run_from(d, r, from).await
    }
    async fn delete_runs_up_to(&self, d: &str, r: i64) -> Result<(), docpipe_vector::VectorError> {
        (self.before_delete)(d)?;
        self.inner.delete_runs_up_to(d, r).await
    }
    async fn count(&self, d: &str, r: Option<i64>) -> Result<usize, docpipe_vector::VectorError> {
        self.counts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.inner.count(d, r).await
    }
    async fn chunk_page(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<Vec<docpipe_vector::ChunkKey>, docpipe_vector::VectorError> {
        let page = self.inner.chunk_page(after, limit).await?;
        self.listed
            .fetch_add(page.len(), std::sync::atomic::Ordering::SeqCst);
        Ok(page)
    }
    async fn search(
        &self,
        v: &[f32],
        k: usize,
        f: &docpipe_vector::SearchFilters,
    ) -> Result<Vec<docpipe_vector::VectorHit>, docpipe_vector::VectorError> {
        let mut filters = f.clone();
        if self
            .drop_tenant_filter
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            filters.organ_ids.clear();
        }
        let hits = self.inner.search(v, k, &filters).await?;
        self.searched_docs
            .lock()
            .unwrap()
            .extend(hits.iter().map(|h| h.doc_id.clone()));
        Ok(hits)
    }
}
