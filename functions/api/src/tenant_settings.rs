//! `GET /tenant`: the caller's tenant as docpipe sees it (its roles, its scan policy, its quotas
//! and what it holds); `PUT /tenant/scan-policy`: a reviewer of the tenant chooses what a finding
//! of the sensitive-data scan does in its documents (`warn`, `mask`, `block`, or `null` for the
//! deployment's), from the next parse on.

use crate::audit::{self, Audit};
use crate::problem::{ApiError, ApiJson};
use crate::state::ApiState;
use crate::tenant::Caller;
use axum::extract::State;
use axum::Json;
use docpipe_core::config::ScanAction;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

async fn describe(state: &ApiState, caller: &Caller) -> Result<Value, ApiError> {
    let client = state.db.client().await?;
    let chosen = docpipe_db::tenants::scan_policy(&**client, &caller.tenant).await?;
    let held = docpipe_db::tenants::holdings(&**client, &caller.tenant).await?;
    let tenancy = &state.config.tenancy;
    let limit = |n: i64| if n == 0 { Value::Null } else { json!(n) };
    Ok(json!({
        "organ_id": caller.tenant,
        "reviewer": caller.reviewer,
        "publisher": caller.publisher,
        "scan_policy": {
            "chosen": chosen,
            "applies": chosen.clone().unwrap_or_else(|| state.store_scan_default().to_string()),
        },
        "quotas": {
            "documents": { "limit": limit(tenancy.max_documents), "held": held.documents },
            "bytes": { "limit": limit(tenancy.max_bytes), "held": held.bytes },
            "searches_per_minute": { "limit": limit(tenancy.searches_per_minute) },
        },
    }))
}

pub(crate) async fn show(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(describe(&state, &caller).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScanPolicyRequest {
    /// `warn`, `mask`, `block`, or null: the deployment's. Required: `{}` names no choice.
    #[serde(deserialize_with = "present")]
    pub policy: Option<String>,
}

/// A field that must be there, null or not: serde takes a missing `Option` for `None` unless it
/// is read by a function of its own.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d)
}

pub(crate) async fn set_scan_policy(
    State(state): State<Arc<ApiState>>,
    caller: Caller,
    ApiJson(request): ApiJson<ScanPolicyRequest>,
) -> Result<Json<Value>, ApiError> {
    if let Some(p) = &request.policy {
        if ScanAction::named(p).is_none() {
            return Err(ApiError::validation(
                "policy",
                format!(
                    "{:?} is no scan policy: warn, mask, block, or null for the deployment's",
                    p.chars().take(20).collect::<String>()
                ),
            ));
        }
    }
    if !caller.reviewer {
        return Err(ApiError::Forbidden(format!(
            "choosing the tenant's scan policy is a reviewer's act: the caller {:?} is no reviewer",
            caller.meta.actor.actor_id
        )));
    }
    caller.writable_tenant()?;
    let audit = Audit::begin_on(
        &state,
        &caller.meta,
        "scan_policy",
        "tenant",
        &caller.tenant,
        json!({ "policy": request.policy }),
    )
    .await?;
    let outcome = async {
        let client = state.db.client().await?;
        docpipe_db::tenants::set_scan_policy(&**client, &caller.tenant, request.policy.as_deref())
            .await?;
        describe(&state, &caller).await
    }
    .await;
    match outcome {
        Ok(answer) => {
            audit
                .finish(&state, audit::SUCCEEDED, None, json!({}))
                .await;
            Ok(Json(answer))
        }
        Err(e) => Err(audit.fail(&state, e).await),
    }
}
