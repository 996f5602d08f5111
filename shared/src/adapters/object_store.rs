//! Where originals and artifacts live.

use async_trait::async_trait;
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectHead {
    pub size: u64,
    /// Without the quotes S3 puts around it.
    pub etag: String,
    pub content_type: String,
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
    #[error("object storage is unavailable ({operation})")]
    Unavailable {
        operation: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StorageError {
    /// Only an unavailable store is worth retrying; a missing or oversized object stays so.
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
            })),
            Err(err) => {
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
            .map_err(|e| unavailable("PutObject", e.into_service_error()))?;
        Ok(())
    }

    async fn delete(&self, bucket: &str, key: &str) -> Result<(), StorageError> {
        self.client
            .delete_object()
            .bucket(bucket)
            .key(key)
            .send()
            .await
            .map_err(|e| unavailable("DeleteObject", e.into_service_error()))?;
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
                .map_err(|e| unavailable("DeleteObjects", e.into_service_error()))?;
            if let Some(err) = out.errors().first() {
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
                .map_err(|e| unavailable("ListObjectsV2", e.into_service_error()))?;
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
