//! Seed 000 §6.1–6.2: an object landed in the bucket; make it a stored document with a run, and
//! queue its parse.
//!
//! Idempotency: a duplicate event finds the same document (the id derives from bucket and key) and
//! the same content (sha256, or the ETag before re-reading), so it starts no run. Concurrent
//! deliveries serialise on the document's row lock. New content under the same key opens a new run
//! and fails the old one as superseded.

use crate::adapters::JobQueue;
use crate::adapters::{ContentDigest, ObjectHead, ObjectStore, StorageError};
use crate::error::StageError;
use crate::stages::version_claim::{self, Spelling, VersionClaim};
use docpipe_core::config::StoreConfig;
use docpipe_core::events::ObjectRef;
use docpipe_core::ids;
use docpipe_core::model::{DocStatus, JobMessage, Stage, Trigger};
use docpipe_db::documents::{self, Document};
use docpipe_db::tombstones::{self, VersionTime};
use docpipe_db::transitions::{self, StoredObject};
use docpipe_db::{fit, intake, Db, DbError};
use docpipe_vector::limits;
use tokio_postgres::GenericClient;
use tracing::{info, warn};

pub struct StoreDeps<'a> {
    pub db: &'a Db,
    pub objects: &'a dyn ObjectStore,
    pub queue: &'a dyn JobQueue,
    pub config: &'a StoreConfig,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreOutcome {
    /// A run is stored and its parse job is queued.
    Stored { doc_id: String, run_id: i64 },
    /// The same content was already taken in; no run was opened. The parse job is sent again when
    /// the run is still waiting for it (the first delivery may have failed to send it).
    Duplicate {
        doc_id: String,
        run_id: Option<i64>,
        parse_resent: bool,
    },
    /// The object is unacceptable (say, too large): its run failed at `store` with the reason.
    Rejected {
        doc_id: String,
        run_id: i64,
        reason: String,
    },
    /// The event names a version of the object created before the object was deleted: the delete
    /// wins, and the event is dropped.
    Stale { doc_id: String, why: String },
    /// The object no longer exists. A run waiting for it failed; otherwise nothing changed.
    ObjectMissing {
        doc_id: String,
        failed_run: Option<i64>,
    },
}

fn db_err(e: DbError) -> StageError {
    StageError::from_db(Stage::Store, e)
}

/// A store that is away is worth retrying; a call the role may not make (S3's 403) is not.
fn storage_err(e: StorageError) -> StageError {
    if e.is_transient() {
        StageError::transient(Stage::Store, e)
    } else {
        StageError::failed(Stage::Store, docpipe_core::error::chain(&e))
    }
}

pub async fn store_object(
    deps: &StoreDeps<'_>,
    object: &ObjectRef,
) -> Result<StoreOutcome, StageError> {
    let bucket = object.bucket.as_str();
    let (key, head) = resolve_key(deps, object).await?;
    let doc_id = resolve_doc_id(deps.db, bucket, &key).await?;
    let Some(head) = head else {
        return object_missing(deps, &doc_id, object, &key).await;
    };

    if let Some(outcome) = duplicate_by_etag(deps, &doc_id, &head).await? {
        return Ok(outcome);
    }
    // A permanent refusal of this object: its run fails at `store` with the reason.
    let refuse = |reason: String| {
        reject(
            deps,
            &doc_id,
            (bucket, &key),
            &head,
            object.event_time_ms,
            reason,
        )
    };
    if head.size > deps.config.max_bytes {
        let reason = format!(
            "the object is {} bytes, over the limit of {} bytes (DOCPIPE_MAX_BYTES)",
            head.size, deps.config.max_bytes
        );
        return refuse(reason).await;
    }
    let named = match named_version(deps, &key, &head).await? {
        Ok(named) => named,
        Err(reason) => return refuse(reason).await,
    };
    let digest = match read_digest(deps, bucket, &key).await? {
        Read::Digest(digest) => digest,
        Read::Missing => return object_missing(deps, &doc_id, object, &key).await,
        Read::Refused(reason) => return refuse(reason).await,
    };
    let upload = Upload {
        object,
        doc_id: &doc_id,
        key: &key,
        head: &head,
        named: &named,
    };
    let run_id = match record_stored(deps, &upload, &digest).await? {
        Recorded::Stored(run_id) => run_id,
        Recorded::Stale(why) => return stale(&doc_id, why),
        Recorded::Duplicate => return duplicate(deps, &doc_id).await,
    };
    info!(doc_id, run_id, stage = "store", size = digest.bytes, sha256 = %digest.sha256, "stored");

    send_parse(deps, &doc_id, run_id).await?;
    Ok(StoreOutcome::Stored { doc_id, run_id })
}

/// What reading the object through made of it.
enum Read {
    Digest(ContentDigest),
    /// It was removed since its HEAD.
    Missing,
    /// It may not be stored: the run fails with the reason.
    Refused(String),
}

async fn read_digest(deps: &StoreDeps<'_>, bucket: &str, key: &str) -> Result<Read, StageError> {
    match deps
        .objects
        .sha256(bucket, key, deps.config.max_bytes)
        .await
    {
        Ok(d) => Ok(Read::Digest(d)),
        Err(StorageError::NotFound { .. }) => Ok(Read::Missing),
        Err(StorageError::TooLarge { limit }) => Ok(Read::Refused(format!(
            "the object grew past the limit of {limit} bytes while it was read"
        ))),
        Err(e @ StorageError::AccessDenied { .. }) => {
            Ok(Read::Refused(docpipe_core::error::chain(&e)))
        }
        Err(e) => Err(storage_err(e)),
    }
}

/// The object being stored, as the store stage resolved it.
struct Upload<'a> {
    object: &'a ObjectRef,
    doc_id: &'a str,
    key: &'a str,
    head: &'a ObjectHead,
    named: &'a NamedVersion,
}

/// The version a plain upload's object metadata names (all empty when it names none).
struct NamedVersion {
    version: String,
    regulation_type: String,
    claim: VersionClaim,
}

/// What the object's metadata names of its version, checked as a registration is: `Err` with the
/// reason the upload is refused (a field too wide, dates that contradict, a version recorded with
/// other dates).
async fn named_version(
    deps: &StoreDeps<'_>,
    key: &str,
    head: &ObjectHead,
) -> Result<Result<NamedVersion, String>, StageError> {
    let (version, regulation_type, claim) =
        match version_claim::from_object_metadata(&head.metadata) {
            Ok(named) => named,
            Err(e) => return Ok(Err(e.to_string())),
        };
    let widths = [
        ("x-amz-meta-version", &version, 64, limits::VERSION_BYTES),
        (
            "x-amz-meta-regulation-type",
            &regulation_type,
            128,
            limits::REGULATION_TYPE_BYTES,
        ),
    ];
    for (field, value, chars, bytes) in widths {
        if value.chars().count() > chars || value.len() > bytes {
            return Ok(Err(format!(
                "invalid {field}: must be at most {chars} characters and {bytes} bytes of UTF-8"
            )));
        }
    }
    let given = match claim.check(Spelling::ObjectMetadata) {
        Ok(given) => given,
        Err(e) => return Ok(Err(e.to_string())),
    };
    // Most uploads name no work: they cost no pool checkout here.
    let collides = if claim.work.trim().is_empty() || version.is_empty() {
        None
    } else {
        let client = deps.db.client().await.map_err(db_err)?;
        let organ_id = documents::tenant_of_key(&**client, key)
            .await
            .map_err(db_err)?;
        version_claim::collision(
            &**client,
            &organ_id,
            &claim,
            &given,
            &version,
            &regulation_type,
        )
        .await
        .map_err(db_err)?
    };
    Ok(match collides {
        Some(why) => Err(why),
        None => Ok(NamedVersion {
            version,
            regulation_type,
            claim,
        }),
    })
}

/// What the store transaction decided.
enum Recorded {
    /// The run is stored, ready for its parse job.
    Stored(i64),
    /// A delete that committed first wins.
    Stale(String),
    /// The document holds this content already.
    Duplicate,
}

/// Seed 000 §6.2's transaction, under the document's row lock (the row is created for a first
/// upload): the run for the new content is opened or adopted and marked stored.
async fn record_stored(
    deps: &StoreDeps<'_>,
    upload: &Upload<'_>,
    digest: &ContentDigest,
) -> Result<Recorded, StageError> {
    let (bucket, key, doc_id) = (upload.object.bucket.as_str(), upload.key, upload.doc_id);
    let version = VersionTime::of(upload.head.last_modified_ms, upload.object.event_time_ms);
    let mut client = deps.db.client().await.map_err(db_err)?;
    let tx = client.transaction().await.map_err(|e| db_err(e.into()))?;
    let names = Names::of(key, upload.head);
    let doc = documents::lock_or_create(&*tx, doc_id, bucket, key, names.file_name)
        .await
        .map_err(db_err)?;
    // After the row lock: a delete that committed before it is seen here, whether it is still
    // removing (the row is marked) or done (the row was just inserted again, and rolls back).
    if let Some(why) = deleted_since(&*tx, bucket, key, version).await? {
        return Ok(Recorded::Stale(why));
    }
    if doc.deleting_at.is_some() {
        return Err(StageError::transient(
            Stage::Store,
            format!("{doc_id} is being deleted; the upload is retried once the delete is done"),
        ));
    }
    // Under the row lock, which every store of this key takes: is what was hashed still the
    // object? Two uploads to one key, A then B, stored at once: A's store may hash A's bytes and
    // commit after B's store did, and the document would then name content the key no longer
    // holds. The upload that replaced it has its own event; this one gives way.
    if let Some(why) = replaced_since_hashed(deps, bucket, key, upload.head).await? {
        return Ok(Recorded::Stale(why));
    }
    if doc.content_sha256 == digest.sha256 && doc.current_run_id.is_some() {
        // The caller reads the duplicate once this connection is back: a pool of two must never
        // wait on itself.
        return Ok(Recorded::Duplicate);
    }
    let run_id = run_for_new_content(&*tx, &doc, deps.config, &digest.sha256).await?;
    let mut metadata = names.full_values();
    if let (Some(m), serde_json::Value::Object(claim)) =
        (metadata.as_object_mut(), upload.named.claim.as_metadata())
    {
        m.extend(claim);
    }
    let stored = transitions::mark_stored(
        &*tx,
        doc_id,
        run_id,
        &StoredObject {
            bucket,
            key,
            file_name: names.file_name,
            content_type: names.content_type,
            size_bytes: digest.bytes as i64,
            sha256: &digest.sha256,
            etag: &upload.head.etag,
            metadata: &metadata,
            version: &upload.named.version,
            regulation_type: &upload.named.regulation_type,
        },
    )
    .await
    .map_err(db_err)?;
    if !stored {
        // Impossible while we hold the row lock on a run we just opened or adopted; refuse loudly
        // rather than queue a parse for a run that is not stored.
        return Err(StageError::transient(
            Stage::Store,
            format!("run {run_id} of {doc_id} was not pending when it was stored"),
        ));
    }
    tx.commit().await.map_err(|e| db_err(e.into()))?;
    Ok(Recorded::Stored(run_id))
}

/// Why the object under `key` is no longer the one this store read, if it is not: another upload
/// replaced it (another ETag) or it was removed.
async fn replaced_since_hashed(
    deps: &StoreDeps<'_>,
    bucket: &str,
    key: &str,
    hashed: &ObjectHead,
) -> Result<Option<String>, StageError> {
    let now = deps.objects.head(bucket, key).await.map_err(storage_err)?;
    Ok(match now {
        Some(now) if now.etag == hashed.etag => None,
        Some(now) => Some(format!(
            "a newer upload (ETag {}) replaced the object (ETag {}) while it was stored; that upload is stored in its place",
            now.etag, hashed.etag
        )),
        None => Some("the object was removed while it was stored".to_string()),
    })
}

/// The names a document row holds, each cut to its column at a character boundary (a file name
/// keeps its last 512 characters, so its extension); what was cut is kept whole in the document's
/// `metadata.original`.
struct Names<'a> {
    file_name: &'a str,
    content_type: &'a str,
    full_file_name: &'a str,
    full_content_type: &'a str,
}

const CONTENT_TYPE_CHARS: usize = 128;

impl<'a> Names<'a> {
    fn of(key: &'a str, head: &'a ObjectHead) -> Names<'a> {
        // The column keeps the name's end (its extension); the whole name goes to metadata.
        let full_file_name = key.rsplit('/').next().unwrap_or(key);
        let full_content_type = if head.content_type.is_empty() {
            "application/octet-stream"
        } else {
            head.content_type.as_str()
        };
        Names {
            file_name: ids::file_name_of(key),
            content_type: fit(full_content_type, CONTENT_TYPE_CHARS),
            full_file_name,
            full_content_type,
        }
    }

    /// `{"original": {...}}` with the values that did not fit, or `{}`.
    fn full_values(&self) -> serde_json::Value {
        let mut original = serde_json::Map::new();
        if self.file_name.len() < self.full_file_name.len() {
            original.insert("file_name".into(), self.full_file_name.into());
        }
        if self.content_type.len() < self.full_content_type.len() {
            original.insert("content_type".into(), self.full_content_type.into());
        }
        if original.is_empty() {
            serde_json::json!({})
        } else {
            serde_json::json!({ "original": original })
        }
    }
}

/// Why this version of the object is stale: it was deleted after the version was created.
async fn deleted_since(
    tx: &impl GenericClient,
    bucket: &str,
    key: &str,
    version: Option<VersionTime>,
) -> Result<Option<String>, StageError> {
    let deleted_at = tombstones::deleted_after(tx, bucket, key, version)
        .await
        .map_err(db_err)?;
    Ok(deleted_at.map(|at| {
        format!("s3://{bucket}/{key} was deleted at {at}, after this version of it was created")
    }))
}

fn stale(doc_id: &str, why: String) -> Result<StoreOutcome, StageError> {
    info!(doc_id, stage = "store", why = %why, "stale upload event dropped: the delete wins");
    Ok(StoreOutcome::Stale {
        doc_id: doc_id.to_string(),
        why,
    })
}

/// Notifications may spell a key two ways (see [`ObjectRef::raw_key`]): the first that exists wins.
async fn resolve_key(
    deps: &StoreDeps<'_>,
    object: &ObjectRef,
) -> Result<(String, Option<ObjectHead>), StageError> {
    let head = deps
        .objects
        .head(&object.bucket, &object.key)
        .await
        .map_err(storage_err)?;
    if head.is_some() {
        return Ok((object.key.clone(), head));
    }
    if let Some(raw) = &object.raw_key {
        let head = deps
            .objects
            .head(&object.bucket, raw)
            .await
            .map_err(storage_err)?;
        if head.is_some() {
            return Ok((raw.clone(), head));
        }
    }
    Ok((object.key.clone(), None))
}

/// A key of the API's shape names a registered document, but only if that document was registered
/// for exactly this key: a client cannot attach an upload to somebody else's document.
async fn resolve_doc_id(db: &Db, bucket: &str, key: &str) -> Result<String, StageError> {
    if let Some(candidate) = ids::doc_id_in_upload_key(key) {
        let client = db.client().await.map_err(db_err)?;
        if let Some(doc) = documents::get(&**client, candidate).await.map_err(db_err)? {
            if doc.object_name == key {
                return Ok(doc.doc_id);
            }
        }
    }
    Ok(ids::derived_doc_id(bucket, key))
}

/// The same object version (ETag and size) was seen before: answer without re-reading it. Not
/// while the document's delete is under way: the same bytes put to the key again then are a new
/// upload, which must outlive the delete (the store waits for it, then records a new document),
/// not be acknowledged as the document about to go.
async fn duplicate_by_etag(
    deps: &StoreDeps<'_>,
    doc_id: &str,
    head: &ObjectHead,
) -> Result<Option<StoreOutcome>, StageError> {
    if head.etag.is_empty() {
        return Ok(None);
    }
    let client = deps.db.client().await.map_err(db_err)?;
    let doc = documents::get(&**client, doc_id).await.map_err(db_err)?;
    drop(client);
    match doc {
        Some(doc)
            if doc.source_etag == head.etag
                && doc.size_bytes == head.size as i64
                && doc.current_run_id.is_some()
                && doc.deleting_at.is_none() =>
        {
            Ok(Some(duplicate(deps, doc_id).await?))
        }
        _ => Ok(None),
    }
}

async fn duplicate(deps: &StoreDeps<'_>, doc_id: &str) -> Result<StoreOutcome, StageError> {
    let client = deps.db.client().await.map_err(db_err)?;
    let doc = documents::get(&**client, doc_id).await.map_err(db_err)?;
    drop(client);
    let Some(doc) = doc else {
        // Deleted between the two reads: nothing left to do for this event.
        return Ok(StoreOutcome::Duplicate {
            doc_id: doc_id.to_string(),
            run_id: None,
            parse_resent: false,
        });
    };
    let waiting_for_parse = doc.status == DocStatus::Stored;
    if let (true, Some(run_id)) = (waiting_for_parse, doc.current_run_id) {
        send_parse(deps, doc_id, run_id).await?;
    }
    info!(
        doc_id,
        run_id = doc.current_run_id,
        stage = "store",
        parse_resent = waiting_for_parse,
        "duplicate event: no new run"
    );
    Ok(StoreOutcome::Duplicate {
        doc_id: doc_id.to_string(),
        run_id: doc.current_run_id,
        parse_resent: waiting_for_parse,
    })
}

/// The run that new content belongs to. A document registered through the API waits with an open
/// `pending` run for its first upload: that run is adopted. Otherwise a run still in flight is
/// failed as superseded and a new one opens.
async fn run_for_new_content(
    tx: &impl GenericClient,
    doc: &Document,
    config: &StoreConfig,
    sha256: &str,
) -> Result<i64, StageError> {
    let awaiting_first_upload = doc.status == DocStatus::Pending
        && doc.content_sha256.is_empty()
        && doc.source_etag.is_empty();
    if let (true, Some(run_id)) = (awaiting_first_upload, doc.current_run_id) {
        let run = docpipe_db::runs::get(tx, run_id).await.map_err(db_err)?;
        if run.is_some_and(|r| r.run_status == docpipe_core::model::RunStatus::Running) {
            return Ok(run_id);
        }
    }
    if let Some(previous) = doc.current_run_id {
        let superseded = transitions::fail_run(
            tx,
            &doc.doc_id,
            previous,
            Stage::Store,
            &format!("superseded by a new upload of the object (sha256 {sha256})"),
        )
        .await
        .map_err(db_err)?;
        if superseded {
            warn!(doc_id = %doc.doc_id, run_id = previous, stage = "store", "in-flight run superseded by new content");
        }
    }
    transitions::open_run(
        tx,
        &doc.doc_id,
        Trigger::Upload,
        "object created",
        config.stage_deadline_secs,
    )
    .await
    .map_err(db_err)
}

/// A permanent refusal: the document gets a run that fails at `store` with `reason`. Recording the
/// ETag lets a duplicate of this event be recognised without opening another failed run.
async fn reject(
    deps: &StoreDeps<'_>,
    doc_id: &str,
    (bucket, key): (&str, &str),
    head: &ObjectHead,
    event_time_ms: Option<i64>,
    reason: String,
) -> Result<StoreOutcome, StageError> {
    let mut client = deps.db.client().await.map_err(db_err)?;
    let tx = client.transaction().await.map_err(|e| db_err(e.into()))?;
    let names = Names::of(key, head);
    let doc = documents::lock_or_create(&*tx, doc_id, bucket, key, names.file_name)
        .await
        .map_err(db_err)?;
    let version = VersionTime::of(head.last_modified_ms, event_time_ms);
    if let Some(why) = deleted_since(&*tx, bucket, key, version).await? {
        return stale(doc_id, why);
    }
    if !head.etag.is_empty() && doc.source_etag == head.etag && doc.current_run_id.is_some() {
        drop(tx);
        drop(client);
        return duplicate(deps, doc_id).await;
    }
    let run_id = run_for_new_content(&*tx, &doc, deps.config, "unread").await?;
    documents::record_rejected_object(
        &*tx,
        doc_id,
        &documents::RejectedObject {
            object_name: key,
            file_name: names.file_name,
            size_bytes: head.size as i64,
            source_etag: &head.etag,
            content_type: names.content_type,
            metadata: &names.full_values().to_string(),
        },
    )
    .await
    .map_err(db_err)?;
    transitions::fail_run(&*tx, doc_id, run_id, Stage::Store, &reason)
        .await
        .map_err(db_err)?;
    tx.commit().await.map_err(|e| db_err(e.into()))?;
    warn!(doc_id, run_id, stage = "store", reason = %reason, "object rejected");
    Ok(StoreOutcome::Rejected {
        doc_id: doc_id.to_string(),
        run_id,
        reason,
    })
}

/// The object was deleted before it could be checked. A run still waiting for it fails; a document
/// that already finished keeps its state (its original is gone, which a delete or retry will report).
/// The object an event names is gone. A run waiting for it fails; a late event of an object a
/// delete removed is stale; any other upload that found nothing is recorded as an intake failure,
/// so that an upload is never lost without a word (an overwrite that a slow delete removed, say).
async fn object_missing(
    deps: &StoreDeps<'_>,
    doc_id: &str,
    object: &ObjectRef,
    key: &str,
) -> Result<StoreOutcome, StageError> {
    let bucket = object.bucket.as_str();
    let mut client = deps.db.client().await.map_err(db_err)?;
    let tx = client.transaction().await.map_err(|e| db_err(e.into()))?;
    let mut failed_run = None;
    let message = format!("object s3://{bucket}/{key} no longer exists");
    if let Some(doc) = documents::lock(&*tx, doc_id).await.map_err(db_err)? {
        if let Some(run_id) = doc.current_run_id {
            if transitions::fail_run(&*tx, doc_id, run_id, Stage::Store, &message)
                .await
                .map_err(db_err)?
            {
                failed_run = Some(run_id);
            }
        }
    }
    let version = VersionTime::of(None, object.event_time_ms);
    let deleted = tombstones::deleted_after(&*tx, bucket, key, version)
        .await
        .map_err(db_err)?
        .is_some();
    if failed_run.is_none() && !deleted {
        intake::record(
            &*tx,
            bucket,
            key,
            &format!("{message} when its upload was stored: nothing was recorded for it"),
            1,
        )
        .await
        .map_err(db_err)?;
    }
    tx.commit().await.map_err(|e| db_err(e.into()))?;
    warn!(
        doc_id,
        run_id = failed_run,
        stage = "store",
        bucket,
        key,
        "object no longer exists"
    );
    Ok(StoreOutcome::ObjectMissing {
        doc_id: doc_id.to_string(),
        failed_run,
    })
}

async fn send_parse(deps: &StoreDeps<'_>, doc_id: &str, run_id: i64) -> Result<(), StageError> {
    deps.queue
        .send(
            &deps.config.parse_queue_url,
            JobMessage::new(doc_id, run_id).encode(),
        )
        .await
        .map_err(|e| StageError::transient(Stage::Store, e))
}
