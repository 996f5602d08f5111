//! `POST /documents`: a document registered, with a presigned upload URL.

use super::*;
use docpipe_pipeline::stages::version_claim::VersionClaim;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RegisterRequest {
    #[serde(default)]
    pub doc_name: String,
    pub file_name: String,
    #[serde(default)]
    pub content_type: String,
    #[serde(default)]
    pub regulation_type: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub metadata: serde_json::Map<String, Value>,
    /// The work this document is a version of, by its citable title.
    #[serde(default)]
    pub work: String,
    #[serde(default)]
    pub promulgated: Option<String>,
    #[serde(default)]
    pub effective_from: Option<String>,
    #[serde(default)]
    pub effective_to: Option<String>,
}

/// PostgreSQL's JSONB refuses `\u0000` anywhere; so does this API, with a 422 instead of a 503.
fn has_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(has_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// The largest magnitude a metadata number may have. JSONB keeps numbers as exact decimals and
/// gives a float near `f64::MAX` back as a 309-digit integer that a JSON parser may refuse to
/// read as a float; nobody's metadata needs numbers that large.
pub(crate) const MAX_METADATA_NUMBER: f64 = 1e300;

fn has_huge_number(value: &Value) -> bool {
    match value {
        Value::Number(n) => n.as_f64().is_some_and(|f| f.abs() > MAX_METADATA_NUMBER),
        Value::Array(items) => items.iter().any(has_huge_number),
        Value::Object(map) => map.values().any(has_huge_number),
        _ => false,
    }
}

fn check_registration(r: &RegisterRequest) -> Result<(), ApiError> {
    if !r.content_type.is_empty() {
        let ok = r.content_type.len() <= 128
            && r.content_type.contains('/')
            && r.content_type.bytes().all(|b| (0x20..0x7f).contains(&b));
        if !ok {
            return Err(ApiError::validation(
                "content_type",
                "must be a media type such as application/pdf (printable ASCII, at most 128)",
            ));
        }
    }
    if r.metadata.contains_key("tags") {
        return Err(ApiError::validation(
            "metadata",
            "the key \"tags\" is reserved: send tags in the tags field",
        ));
    }
    if r.metadata
        .iter()
        .any(|(k, v)| k.contains('\0') || has_nul(v))
    {
        return Err(ApiError::validation(
            "metadata",
            "must not contain NUL characters",
        ));
    }
    if r.metadata.values().any(has_huge_number) {
        return Err(ApiError::validation(
            "metadata",
            format!("numbers must be at most {MAX_METADATA_NUMBER:e} in magnitude"),
        ));
    }
    let registration = to_registration(r);
    stages::register::validate(&registration).map_err(ApiError::from)
}

fn to_registration(r: &RegisterRequest) -> stages::register::Registration {
    stages::register::Registration {
        doc_name: r.doc_name.clone(),
        file_name: r.file_name.clone(),
        content_type: r.content_type.clone(),
        regulation_type: r.regulation_type.clone(),
        version: r.version.clone(),
        tags: r.tags.clone(),
        metadata: r.metadata.clone(),
        claim: VersionClaim {
            work: r.work.clone(),
            promulgated: r.promulgated.clone(),
            effective_from: r.effective_from.clone(),
            effective_to: r.effective_to.clone(),
        },
    }
}

pub(crate) async fn register_document(
    State(state): AppState,
    caller: crate::tenant::Caller,
    ApiJson(body): ApiJson<RegisterRequest>,
) -> Result<Response, ApiError> {
    let organ_id = caller.writable_tenant()?.to_string();
    let audit = Audit::begin(
        &state,
        &caller.meta,
        "register",
        "",
        json!({"file_name": body.file_name, "doc_name": body.doc_name}),
    )
    .await?;
    let result = async {
        check_registration(&body)?;
        crate::quota::check_holdings(&state, &organ_id).await?;
        let registered = stages::register::register(
            &state.db,
            &organ_id,
            &state.config.bucket,
            &to_registration(&body),
            state.config.registration_deadline_secs(),
        )
        .await?;
        let upload_url = state
            .objects
            .presign_put(
                &state.config.bucket,
                &registered.object_name,
                &body.content_type,
                state.config.upload_url_ttl,
            )
            .await?;
        Ok::<_, ApiError>((registered, upload_url))
    }
    .await;
    match result {
        Ok((registered, upload_url)) => {
            audit
                .finish(
                    &state,
                    audit::SUCCEEDED,
                    Some(&registered.doc_id),
                    json!({"run_id": registered.run_id, "object_name": registered.object_name}),
                )
                .await;
            let mut upload_headers = serde_json::Map::new();
            if !body.content_type.is_empty() {
                upload_headers.insert("Content-Type".into(), body.content_type.clone().into());
            }
            let answer = json!({
                "doc_id": registered.doc_id,
                "run_id": registered.run_id,
                "status": DocStatus::Pending,
                "object_name": registered.object_name,
                "upload_url": upload_url,
                "upload_method": "PUT",
                "upload_headers": upload_headers,
                "upload_expires_at": expires_at(state.config.upload_url_ttl),
            });
            Ok((
                StatusCode::CREATED,
                [location(&registered.doc_id)],
                Json(answer),
            )
                .into_response())
        }
        Err(e) => Err(audit.fail(&state, e).await),
    }
}
