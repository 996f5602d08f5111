//! An object store and a job queue in memory, for unit tests of stage logic that needs no real
//! service. The capability tests run on the real stack; these answer as S3 and SQS do where the
//! stages look (a missing key is `None` or `NotFound`, a delete of a missing key succeeds,
//! listings are in key order; a queue that is down refuses every call), and nothing more.

use super::object_store::{ContentDigest, ObjectHead, ObjectStore, StorageError};
use super::queue::{JobQueue, QueueDepth, QueueError};
use async_trait::async_trait;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Debug, Clone)]
struct Stored {
    body: Vec<u8>,
    content_type: String,
    last_modified_ms: i64,
}

/// Objects by bucket and key. Each put gets the next Last-Modified of a clock the test sets.
#[derive(Debug, Default)]
pub struct MemoryObjectStore {
    objects: Mutex<BTreeMap<(String, String), Stored>>,
    now_ms: Mutex<i64>,
}

impl MemoryObjectStore {
    /// Sets the Last-Modified the next puts get.
    pub fn set_now_ms(&self, now_ms: i64) {
        *self.now_ms.lock().expect("clock") = now_ms;
    }

    pub fn contains(&self, bucket: &str, key: &str) -> bool {
        self.objects
            .lock()
            .expect("objects")
            .contains_key(&(bucket.to_string(), key.to_string()))
    }

    fn keys_under(&self, bucket: &str, prefix: &str) -> Vec<String> {
        self.objects
            .lock()
            .expect("objects")
            .keys()
            .filter(|(b, k)| b == bucket && k.starts_with(prefix))
            .map(|(_, k)| k.clone())
            .collect()
    }

    fn stored(&self, bucket: &str, key: &str) -> Option<Stored> {
        self.objects
            .lock()
            .expect("objects")
            .get(&(bucket.to_string(), key.to_string()))
            .cloned()
    }
}

fn etag_of(body: &[u8]) -> String {
    hex::encode(&Sha256::digest(body)[..16])
}

#[async_trait]
impl ObjectStore for MemoryObjectStore {
    async fn head(&self, bucket: &str, key: &str) -> Result<Option<ObjectHead>, StorageError> {
        Ok(self.stored(bucket, key).map(|s| ObjectHead {
            size: s.body.len() as u64,
            etag: etag_of(&s.body),
            content_type: s.content_type,
            last_modified_ms: Some(s.last_modified_ms),
            metadata: Default::default(),
        }))
    }

    async fn sha256(
        &self,
        bucket: &str,
        key: &str,
        limit: u64,
    ) -> Result<ContentDigest, StorageError> {
        let body = self.get(bucket, key, limit).await?;
        Ok(ContentDigest {
            sha256: hex::encode(Sha256::digest(&body)),
            bytes: body.len() as u64,
        })
    }

    async fn get(&self, bucket: &str, key: &str, limit: u64) -> Result<Vec<u8>, StorageError> {
        let stored = self
            .stored(bucket, key)
            .ok_or_else(|| StorageError::NotFound {
                bucket: bucket.to_string(),
                key: key.to_string(),
            })?;
        if stored.body.len() as u64 > limit {
            return Err(StorageError::TooLarge { limit });
        }
        Ok(stored.body)
    }

    async fn put(
        &self,
        bucket: &str,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> Result<(), StorageError> {
        let last_modified_ms = *self.now_ms.lock().expect("clock");
        self.objects.lock().expect("objects").insert(
            (bucket.to_string(), key.to_string()),
            Stored {
                body,
                content_type: content_type.to_string(),
                last_modified_ms,
            },
        );
        Ok(())
    }

    async fn delete(&self, bucket: &str, key: &str) -> Result<(), StorageError> {
        self.objects
            .lock()
            .expect("objects")
            .remove(&(bucket.to_string(), key.to_string()));
        Ok(())
    }

    async fn delete_prefix(&self, bucket: &str, prefix: &str) -> Result<usize, StorageError> {
        let keys = self.keys_under(bucket, prefix);
        for key in &keys {
            self.delete(bucket, key).await?;
        }
        Ok(keys.len())
    }

    async fn list(&self, bucket: &str, prefix: &str) -> Result<Vec<String>, StorageError> {
        Ok(self.keys_under(bucket, prefix))
    }

    async fn list_page(
        &self,
        bucket: &str,
        prefix: &str,
        start_after: &str,
        limit: usize,
    ) -> Result<(Vec<String>, bool), StorageError> {
        let after: Vec<String> = self
            .keys_under(bucket, prefix)
            .into_iter()
            .filter(|k| start_after.is_empty() || k.as_str() > start_after)
            .collect();
        let more = after.len() > limit;
        Ok((after.into_iter().take(limit).collect(), more))
    }

    async fn presign_put(
        &self,
        bucket: &str,
        key: &str,
        _content_type: &str,
        _expires: std::time::Duration,
    ) -> Result<String, StorageError> {
        Ok(format!("memory://{bucket}/{key}?put"))
    }

    async fn presign_get(
        &self,
        bucket: &str,
        key: &str,
        _expires: std::time::Duration,
    ) -> Result<String, StorageError> {
        Ok(format!("memory://{bucket}/{key}"))
    }
}

/// Messages sent, by queue URL, in order; `down` makes every call fail as an unreachable queue.
#[derive(Debug, Default)]
pub struct MemoryJobQueue {
    sent: Mutex<Vec<(String, String)>>,
    down: std::sync::atomic::AtomicBool,
}

impl MemoryJobQueue {
    /// The bodies sent to `queue_url`, in order.
    pub fn sent_to(&self, queue_url: &str) -> Vec<String> {
        self.sent
            .lock()
            .expect("sent")
            .iter()
            .filter(|(url, _)| url == queue_url)
            .map(|(_, body)| body.clone())
            .collect()
    }

    pub fn set_down(&self, down: bool) {
        self.down.store(down, std::sync::atomic::Ordering::SeqCst);
    }

    fn check(&self, queue_url: &str, operation: &'static str) -> Result<(), QueueError> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(QueueError {
                queue_url: queue_url.to_string(),
                operation,
                source: "the queue is down".into(),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl JobQueue for MemoryJobQueue {
    async fn send(&self, queue_url: &str, body: String) -> Result<(), QueueError> {
        self.check(queue_url, "SendMessage")?;
        self.sent
            .lock()
            .expect("sent")
            .push((queue_url.to_string(), body));
        Ok(())
    }

    async fn hold_back(
        &self,
        queue_url: &str,
        _receipt_handle: &str,
        _delay: std::time::Duration,
    ) -> Result<(), QueueError> {
        // No message is ever received here, so there is none to hold back.
        self.check(queue_url, "ChangeMessageVisibility")
    }

    async fn depth(&self, queue_url: &str) -> Result<QueueDepth, QueueError> {
        self.check(queue_url, "GetQueueAttributes")?;
        Ok(QueueDepth {
            visible: self.sent_to(queue_url).len() as u64,
            ..QueueDepth::default()
        })
    }
}
