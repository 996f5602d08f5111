//! Where originals and artifacts live.

use async_trait::async_trait;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectHead {
    pub size: u64,
    /// Without the quotes S3 puts around it.
    pub etag: String,
    pub content_type: String,
    /// `Last-Modified`, in milliseconds since the epoch (S3 gives whole seconds).
    pub last_modified_ms: Option<i64>,
    /// The user metadata (`x-amz-meta-*`), keys without the prefix, in lower case, values as S3
    /// gives them (RFC 2047 encoded where not US-ASCII).
    pub metadata: std::collections::HashMap<String, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentDigest {
    pub sha256: String,
    pub bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("object s3://{bucket}/{key} does not exist")]
    NotFound { bucket: String, key: String },
    #[error("object is larger than the limit of {limit} bytes")]
    TooLarge { limit: u64 },
    /// S3 answered 403: the function's role does not allow the call. For a GET or HEAD of a key
    /// that does not exist S3 answers 403, not 404, unless the role may also list the bucket
    /// (`s3:ListBucket`, with an `s3:prefix` that matches the key). A configuration error: retrying
    /// cannot help.
    #[error("access denied to s3://{bucket}/{key} ({op}: {code}): the function's role does not allow this call, or (for a key that does not exist) does not allow s3:ListBucket on its prefix, so S3 answers 403 instead of 404; a configuration error, fix the role's policy in template.yaml")]
    AccessDenied {
        bucket: String,
        /// The key, or the prefix of a listing.
        key: String,
        op: &'static str,
        /// S3's error code (`AccessDenied`; a HEAD has no body, so `403 Forbidden` there).
        code: String,
    },
    #[error("object storage is unavailable ({operation})")]
    Unavailable {
        operation: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StorageError {
    /// Only an unavailable store is worth retrying; a missing or oversized object stays so, and so
    /// does a call the role may not make.
    pub fn is_transient(&self) -> bool {
        matches!(self, StorageError::Unavailable { .. })
    }
}

#[async_trait]
pub trait ObjectStore: Send + Sync {
    /// `Ok(None)` when the object does not exist.
    async fn head(&self, bucket: &str, key: &str) -> Result<Option<ObjectHead>, StorageError>;

    /// Streams the object through sha256 without holding it in memory, refusing to read past `limit`.
    async fn sha256(
        &self,
        bucket: &str,
        key: &str,
        limit: u64,
    ) -> Result<ContentDigest, StorageError>;

    async fn get(&self, bucket: &str, key: &str, limit: u64) -> Result<Vec<u8>, StorageError>;

    async fn put(
        &self,
        bucket: &str,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> Result<(), StorageError>;

    /// Deletes one object; deleting a missing object is not an error.
    async fn delete(&self, bucket: &str, key: &str) -> Result<(), StorageError>;

    /// Deletes every object under `prefix` and returns how many there were.
    async fn delete_prefix(&self, bucket: &str, prefix: &str) -> Result<usize, StorageError>;

    /// The keys under `prefix`.
    async fn list(&self, bucket: &str, prefix: &str) -> Result<Vec<String>, StorageError>;

    /// One page of the keys under `prefix`, in key order: at most `limit` (S3 gives at most 1,000)
    /// that sort after `start_after` (from the first when it is empty), and whether more follow.
    async fn list_page(
        &self,
        bucket: &str,
        prefix: &str,
        start_after: &str,
        limit: usize,
    ) -> Result<(Vec<String>, bool), StorageError>;

    /// A URL that lets its holder PUT this one object until it expires.
    async fn presign_put(
        &self,
        bucket: &str,
        key: &str,
        content_type: &str,
        expires: std::time::Duration,
    ) -> Result<String, StorageError>;

    /// A URL that lets its holder GET this one object until it expires.
    async fn presign_get(
        &self,
        bucket: &str,
        key: &str,
        expires: std::time::Duration,
    ) -> Result<String, StorageError>;
}

pub struct S3ObjectStore {
    client: aws_sdk_s3::Client,
}

impl S3ObjectStore {
    pub fn new(client: aws_sdk_s3::Client) -> Self {
        S3ObjectStore { client }
    }

    pub fn client(&self) -> &aws_sdk_s3::Client {
        &self.client
    }

    async fn open(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<aws_sdk_s3::primitives::ByteStream, StorageError> {
        match self
            .client
            .get_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(out.body),
            Err(err) => {
                if let Some(denied) = access_denied(&err, bucket, key, "GetObject") {
                    return Err(denied);
                }
                let err = err.into_service_error();
                if err.is_no_such_key() {
                    Err(not_found(bucket, key))
                } else {
                    Err(unavailable("GetObject", err))
                }
            }
        }
    }
}

/// A 403 (or an `AccessDenied` code) as [`StorageError::AccessDenied`]; `None` for anything else.
fn access_denied<E: ProvideErrorMetadata>(
    err: &SdkError<E>,
    bucket: &str,
    key: &str,
    op: &'static str,
) -> Option<StorageError> {
    let status = err.raw_response().map(|r| r.status().as_u16());
    let code = err.code();
    if status != Some(403) && code != Some("AccessDenied") {
        return None;
    }
    Some(StorageError::AccessDenied {
        bucket: bucket.to_string(),
        key: key.to_string(),
        op,
        code: code.unwrap_or("403 Forbidden").to_string(),
    })
}

fn not_found(bucket: &str, key: &str) -> StorageError {
    StorageError::NotFound {
        bucket: bucket.to_string(),
        key: key.to_string(),
    }
}

fn unavailable(
    operation: &'static str,
    source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> StorageError {
    StorageError::Unavailable {
        operation,
        source: source.into(),
    }
}

#[async_trait]
impl ObjectStore for S3ObjectStore {
    async fn head(&self, bucket: &str, key: &str) -> Result<Option<ObjectHead>, StorageError> {
        match self
            .client
            .head_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
        {
            Ok(out) => Ok(Some(ObjectHead {
                size: out.content_length().unwrap_or(0).max(0) as u64,
                etag: out
                    .e_tag()
                    .unwrap_or_default()
                    .trim_matches('"')
                    .to_string(),
                content_type: out.content_type().unwrap_or_default().to_string(),
                last_modified_ms: out.last_modified().and_then(|t| t.to_millis().ok()),
                metadata: out
                    .metadata()
                    .map(|m| {
                        m.iter()
                            .map(|(k, v)| (k.to_ascii_lowercase(), v.clone()))
                            .collect()
                    })
                    .unwrap_or_default(),
            })),
            Err(err) => {
                if let Some(denied) = access_denied(&err, bucket, key, "HeadObject") {
                    return Err(denied);
                }
                let err = err.into_service_error();
                if err.is_not_found() {
                    Ok(None)
                } else {
                    Err(unavailable("HeadObject", err))
                }
            }
        }
    }

    async fn sha256(
        &self,
        bucket: &str,
        key: &str,
        limit: u64,
    ) -> Result<ContentDigest, StorageError> {
        let mut body = self.open(bucket, key).await?;
        let mut hasher = Sha256::new();
        let mut bytes = 0u64;
        while let Some(chunk) = body
            .try_next()
            .await
            .map_err(|e| unavailable("GetObject body", e))?
        {
            bytes += chunk.len() as u64;
            if bytes > limit {
                return Err(StorageError::TooLarge { limit });
            }
            hasher.update(&chunk);
        }
        Ok(ContentDigest {
            sha256: hex::encode(hasher.finalize()),
            bytes,
        })
    }

    async fn get(&self, bucket: &str, key: &str, limit: u64) -> Result<Vec<u8>, StorageError> {
        let mut body = self.open(bucket, key).await?;
        let mut data = Vec::new();
        while let Some(chunk) = body
            .try_next()
            .await
            .map_err(|e| unavailable("GetObject body", e))?
        {
            if data.len() as u64 + chunk.len() as u64 > limit {
                return Err(StorageError::TooLarge { limit });
            }
            data.extend_from_slice(&chunk);
        }
        Ok(data)
    }

    async fn put(
        &self,
        bucket: &str,
        key: &str,
        body: Vec<u8>,
        content_type: &str,
    ) -> Result<(), StorageError> {
        self.client
            .put_object()
            .bucket(bucket)
            .key(key)
            .content_type(content_type)
            .body(body.into())
            .send()
            .await
            .map_err(|e| {
                access_denied(&e, bucket, key, "PutObject")
                    .unwrap_or_else(|| unavailable("PutObject", e.into_service_error()))
            })?;
        Ok(())
    }

    async fn delete(&self, bucket: &str, key: &str) -> Result<(), StorageError> {
        self.client
            .delete_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| {
                access_denied(&e, bucket, key, "DeleteObject")
                    .unwrap_or_else(|| unavailable("DeleteObject", e.into_service_error()))
            })?;
        Ok(())
    }

    async fn delete_prefix(&self, bucket: &str, prefix: &str) -> Result<usize, StorageError> {
        let keys = self.list(bucket, prefix).await?;
        // DeleteObjects takes at most 1,000 keys per call.
        for batch in keys.chunks(1000) {
            let objects = batch
                .iter()
                .map(|k| {
                    aws_sdk_s3::types::ObjectIdentifier::builder()
                        .key(k)
                        .build()
                        .expect("key is set")
                })
                .collect();
            let delete = aws_sdk_s3::types::Delete::builder()
                .set_objects(Some(objects))
                .quiet(true)
                .build()
                .expect("objects are set");
            let out = self
                .client
                .delete_objects()
                .bucket(bucket)
                .delete(delete)
                .send()
                .await
                .map_err(|e| {
                    access_denied(&e, bucket, prefix, "DeleteObjects")
                        .unwrap_or_else(|| unavailable("DeleteObjects", e.into_service_error()))
                })?;
            if let Some(err) = out.errors().first() {
                if err.code() == Some("AccessDenied") {
                    return Err(StorageError::AccessDenied {
                        bucket: bucket.to_string(),
                        key: err.key().unwrap_or(prefix).to_string(),
                        op: "DeleteObjects",
                        code: "AccessDenied".to_string(),
                    });
                }
                return Err(unavailable(
                    "DeleteObjects",
                    format!(
                        "{} of {} keys not deleted, first {:?}: {:?}",
                        out.errors().len(),
                        batch.len(),
                        err.key(),
                        err.message()
                    ),
                ));
            }
        }
        Ok(keys.len())
    }

    async fn list(&self, bucket: &str, prefix: &str) -> Result<Vec<String>, StorageError> {
        let mut keys = Vec::new();
        let mut token = None;
        loop {
            let out = self
                .client
                .list_objects_v2()
                .bucket(bucket)
                .prefix(prefix)
                .set_continuation_token(token)
                .send()
                .await
                .map_err(|e| {
                    access_denied(&e, bucket, prefix, "ListObjectsV2")
                        .unwrap_or_else(|| unavailable("ListObjectsV2", e.into_service_error()))
                })?;
            keys.extend(
                out.contents()
                    .iter()
                    .filter_map(|o| o.key().map(String::from)),
            );
            match out.next_continuation_token() {
                Some(t) if out.is_truncated() == Some(true) => token = Some(t.to_string()),
                _ => return Ok(keys),
            }
        }
    }

    async fn list_page(
        &self,
        bucket: &str,
        prefix: &str,
        start_after: &str,
        limit: usize,
    ) -> Result<(Vec<String>, bool), StorageError> {
        let mut request = self
            .client
            .list_objects_v2()
            .bucket(bucket)
            .prefix(prefix)
            .max_keys(limit.clamp(1, 1_000) as i32);
        if !start_after.is_empty() {
            request = request.start_after(start_after);
        }
        let out = request.send().await.map_err(|e| {
            access_denied(&e, bucket, prefix, "ListObjectsV2")
                .unwrap_or_else(|| unavailable("ListObjectsV2", e.into_service_error()))
        })?;
        let keys = out
            .contents()
            .iter()
            .filter_map(|o| o.key().map(String::from))
            .collect();
        Ok((keys, out.is_truncated() == Some(true)))
    }

    async fn presign_put(
        &self,
        bucket: &str,
        key: &str,
        content_type: &str,
        expires: std::time::Duration,
    ) -> Result<String, StorageError> {
        let config = aws_sdk_s3::presigning::PresigningConfig::expires_in(expires)
            .map_err(|e| unavailable("presign", e))?;
        let mut request = self.client.put_object().bucket(bucket).key(key);
        if !content_type.is_empty() {
            request = request.content_type(content_type);
        }
        let presigned = request
            .presigned(config)
            .await
            .map_err(|e| unavailable("presign PutObject", e.into_service_error()))?;
        Ok(presigned.uri().to_string())
    }

    async fn presign_get(
        &self,
        bucket: &str,
        key: &str,
        expires: std::time::Duration,
    ) -> Result<String, StorageError> {
        let config = aws_sdk_s3::presigning::PresigningConfig::expires_in(expires)
            .map_err(|e| unavailable("presign", e))?;
        let presigned = self
            .client
            .get_object()
            .bucket(bucket)
            .key(key)
            .presigned(config)
            .await
            .map_err(|e| unavailable("presign GetObject", e.into_service_error()))?;
        Ok(presigned.uri().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An S3 endpoint that refuses every request as S3 refuses a role without the permission.
    async fn refusing_s3() -> S3ObjectStore {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>";
                    let answer = format!(
                        "HTTP/1.1 403 Forbidden\r\ncontent-type: application/xml\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = socket.write_all(answer.as_bytes()).await;
                });
            }
        });
        let config = aws_sdk_s3::Config::builder()
            .behavior_version_latest()
            .http_client(crate::adapters::aws::https_client())
            .region(aws_sdk_s3::config::Region::new("us-east-1"))
            .endpoint_url(format!("http://{addr}"))
            .credentials_provider(aws_sdk_s3::config::Credentials::new(
                "docpipe-test",
                "test",
                None,
                None,
                "test",
            ))
            .force_path_style(true)
            .build();
        S3ObjectStore::new(aws_sdk_s3::Client::from_conf(config))
    }

    fn assert_denied(result: Result<impl std::fmt::Debug, StorageError>, want_op: &str) {
        match result {
            Err(e @ StorageError::AccessDenied { .. }) => {
                let StorageError::AccessDenied { op, key, .. } = &e else {
                    unreachable!()
                };
                assert_eq!(*op, want_op);
                assert_eq!(key, "uploads/missing.pdf");
                assert!(!e.is_transient(), "{e}");
                let text = e.to_string();
                assert!(
                    text.contains("s3://docs/uploads/missing.pdf")
                        && text.contains("s3:ListBucket"),
                    "{text}"
                );
            }
            other => panic!("{want_op}: expected AccessDenied, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_403_is_access_denied_and_permanent_for_every_call() {
        let store = refusing_s3().await;
        let key = "uploads/missing.pdf";
        // A HEAD's 403 has no body (no error code): the status alone says it.
        assert_denied(store.head("docs", key).await, "HeadObject");
        assert_denied(store.get("docs", key, 1024).await, "GetObject");
        assert_denied(store.sha256("docs", key, 1024).await, "GetObject");
        assert_denied(
            store.put("docs", key, b"x".to_vec(), "text/plain").await,
            "PutObject",
        );
        assert_denied(store.delete("docs", key).await, "DeleteObject");
        assert_denied(store.list("docs", key).await, "ListObjectsV2");
    }

    #[test]
    fn only_an_unavailable_store_is_transient() {
        let denied = StorageError::AccessDenied {
            bucket: "b".into(),
            key: "k".into(),
            op: "GetObject",
            code: "AccessDenied".into(),
        };
        assert!(!denied.is_transient());
        assert!(unavailable("GetObject", "connection refused").is_transient());
    }
}
