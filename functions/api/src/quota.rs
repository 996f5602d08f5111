//! Each tenant's quotas (the template's `TenantMaxDocuments`, `TenantMaxBytes`,
//! `TenantSearchesPerMinute`; 0: no limit): past one, a 429 problem, and nothing stored is touched.

use crate::problem::ApiError;
use crate::state::ApiState;
use crate::tenant::Caller;

/// Counts a search (or a citation check) against the caller's tenant's searches per minute.
pub(crate) async fn count_search(state: &ApiState, caller: &Caller) -> Result<(), ApiError> {
    let limit = state.config.tenancy.searches_per_minute;
    if limit == 0 {
        return Ok(());
    }
    let client = state.db.client().await?;
    let (made, left_secs) = docpipe_db::tenants::count_search(&**client, &caller.tenant).await?;
    if made > limit {
        return Err(ApiError::QuotaExceeded {
            quota: "searches_per_minute",
            detail: format!(
                "tenant {} made {limit} searches this minute, its quota: search again in {left_secs} s",
                caller.tenant
            ),
            limit,
        });
    }
    Ok(())
}

/// Refuses a new document when the tenant holds its quota of documents or bytes already.
pub(crate) async fn check_holdings(state: &ApiState, organ_id: &str) -> Result<(), ApiError> {
    let tenancy = &state.config.tenancy;
    if tenancy.max_documents == 0 && tenancy.max_bytes == 0 {
        return Ok(());
    }
    let client = state.db.client().await?;
    let held = docpipe_db::tenants::holdings(&**client, organ_id).await?;
    if tenancy.max_documents > 0 && held.documents >= tenancy.max_documents {
        return Err(ApiError::QuotaExceeded {
            quota: "documents",
            detail: format!(
                "tenant {organ_id} holds {} documents, its quota: delete some before adding more",
                held.documents
            ),
            limit: tenancy.max_documents,
        });
    }
    if tenancy.max_bytes > 0 && held.bytes >= tenancy.max_bytes {
        return Err(ApiError::QuotaExceeded {
            quota: "bytes",
            detail: format!(
                "tenant {organ_id} holds {} bytes of originals, its quota of {}: delete some before adding more",
                held.bytes, tenancy.max_bytes
            ),
            limit: tenancy.max_bytes,
        });
    }
    Ok(())
}
