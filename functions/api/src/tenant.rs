//! The caller's tenant in a handler ([`Caller`]) and the gates every tenant-owned thing passes:
//! another tenant's document or work answers exactly as a missing one (the same one key lookup,
//! the same 404), and a write to what the caller may only read (the public library, without the
//! publisher role) answers 403.

use crate::context::RequestMeta;
use crate::problem::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use docpipe_core::tenant::{Scope, PUBLIC};
use serde::Deserialize;

/// Who calls, with a tenant (the middleware refused a caller without one).
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub tenant: String,
    pub reviewer: bool,
    pub publisher: bool,
    pub meta: RequestMeta,
}

impl Caller {
    /// The tenants a read with `scope` covers.
    pub fn reads(&self, scope: Scope) -> Vec<String> {
        scope.organs(&self.tenant)
    }

    /// Everything the caller may read: its own and the public library.
    pub fn readable(&self) -> Vec<String> {
        self.reads(Scope::All)
    }

    /// Whether the caller may change a thing of `organ_id`: its own, and the public library
    /// only as a publisher.
    pub fn may_write(&self, organ_id: &str) -> bool {
        organ_id == self.tenant && (organ_id != PUBLIC || self.publisher)
    }

    /// [`Caller::may_write`], as the answer a handler returns.
    pub fn check_write(&self, organ_id: &str, what: &str) -> Result<(), ApiError> {
        if self.may_write(organ_id) {
            Ok(())
        } else if organ_id == PUBLIC {
            Err(ApiError::PublisherRequired(format!(
                "{what} is in the public library: only a publisher changes it"
            )))
        } else {
            Err(ApiError::PublisherRequired(format!(
                "{what} is not the caller's tenant's to change"
            )))
        }
    }

    /// Where the caller's own uploads go: its tenant, unless it is a reader of `public` without
    /// the publisher role.
    pub fn writable_tenant(&self) -> Result<&str, ApiError> {
        self.check_write(&self.tenant, "the tenant")?;
        Ok(&self.tenant)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let meta = RequestMeta::from_request_parts(parts, state)
            .await
            .unwrap_or_else(|never| match never {});
        let tenant = meta
            .tenant
            .clone()
            .ok_or_else(|| ApiError::NoTenant("the caller names no tenant".into()))?;
        Ok(Caller {
            tenant,
            reviewer: meta.reviewer,
            publisher: meta.publisher,
            meta,
        })
    }
}

/// `scope` of a query string or a body: `own`, `public` or `all`.
pub(crate) fn scope_name<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Scope>, D::Error> {
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v @ serde_json::Value::String(_)) => serde_json::from_value(v)
            .map(Some)
            .map_err(|_| serde::de::Error::custom("scope must be own, public or all")),
        Some(_) => Err(serde::de::Error::custom("scope must be own, public or all")),
    }
}

/// The document, when the caller may read it (and, for a write, change it): 404 exactly as for a
/// document that does not exist, else 403 for a write to what the caller only reads.
pub(crate) async fn gate_document(
    db: &docpipe_db::Db,
    caller: &Caller,
    doc_id: &str,
    writes: bool,
) -> Result<docpipe_db::documents::Document, ApiError> {
    let client = db.client().await?;
    let doc = docpipe_db::documents::get_in(&**client, doc_id, &caller.readable())
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("document {doc_id} does not exist")))?;
    if writes {
        caller.check_write(&doc.organ_id, &format!("document {doc_id}"))?;
    }
    Ok(doc)
}

/// As [`gate_document`], for a work: its tenant, when the caller may read it (404 as a missing
/// work otherwise). A write checks [`Caller::check_write`] on it after its own checks.
pub(crate) async fn gate_work(
    db: &docpipe_db::Db,
    caller: &Caller,
    work_id: i64,
) -> Result<String, ApiError> {
    let client = db.client().await?;
    docpipe_db::works::organ_of(&**client, work_id)
        .await?
        .filter(|o| caller.readable().contains(o))
        .ok_or_else(|| ApiError::NotFound(format!("work {work_id} does not exist")))
}

/// The tenants this container has registered (`tenants`), so each is written once.
#[derive(Default)]
pub struct KnownTenants(std::sync::Mutex<std::collections::HashSet<String>>);

impl KnownTenants {
    /// The most remembered; past it the set starts again (a re-registration is harmless).
    const MAX: usize = 10_000;

    pub(crate) async fn ensure(&self, db: &docpipe_db::Db, organ_id: &str) -> Result<(), ApiError> {
        if self.0.lock().expect("not poisoned").contains(organ_id) {
            return Ok(());
        }
        let client = db.client().await?;
        docpipe_db::documents::ensure_tenant(&**client, organ_id).await?;
        let mut known = self.0.lock().expect("not poisoned");
        if known.len() >= Self::MAX {
            known.clear();
        }
        known.insert(organ_id.to_string());
        Ok(())
    }
}
