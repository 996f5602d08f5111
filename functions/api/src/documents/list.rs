//! `GET /documents`: documents by status, type, version and update time; a keyset cursor.

use super::*;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    pub status: Option<DocStatus>,
    pub regulation_type: Option<String>,
    pub version: Option<String>,
    pub updated_since: Option<DateTime<Utc>>,
    pub limit: Option<i64>,
    pub cursor: Option<String>,
    /// `own` (the default: the caller's tenant's documents), `public` or `all`.
    pub scope: Option<docpipe_core::tenant::Scope>,
}

pub async fn list_documents(
    State(state): AppState,
    caller: crate::tenant::Caller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = page_limit(q.limit)?;
    if let Some(v) = &q.regulation_type {
        check_text("regulation_type", v, 128)?;
    }
    if let Some(v) = &q.version {
        check_text("version", v, 64)?;
    }
    let after = q
        .cursor
        .as_deref()
        .map(views::decode_doc_cursor)
        .transpose()?;
    let filter = DocumentFilter {
        status: q.status,
        regulation_type: q.regulation_type,
        version: q.version,
        updated_since: q.updated_since,
        organs: caller.reads(q.scope.unwrap_or(docpipe_core::tenant::Scope::Own)),
    };
    let client = state.db.client().await?;
    let mut docs = db_views::list_documents(&**client, &filter, after.as_ref(), limit + 1).await?;
    let next_cursor = if docs.len() as i64 > limit {
        docs.truncate(limit as usize);
        docs.last().map(views::encode_doc_cursor)
    } else {
        None
    };
    let documents: Vec<DocumentView> = docs.into_iter().map(DocumentView::from).collect();
    Ok(Json(
        json!({ "documents": documents, "next_cursor": next_cursor }),
    ))
}
