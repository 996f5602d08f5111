//! The API's reads of one document through the one authority check
//! ([`docpipe_db::authority`]): what the text is worth today decides what may be served.

use crate::problem::ApiError;
use docpipe_db::authority::{self, Standing};
use docpipe_db::GenericClient;

/// What a read needs of a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// The text as the law that applies today (an article): indexed, released, in force.
    Applies,
    /// The document's own record (its blocks, its tree, its original): anything but a delete
    /// under way or a version held for its release, whose text answers nothing until released.
    NotWithheld,
}

/// How a document is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Served {
    Plain,
    /// A version held for its release, shown to a reviewer (who reviews it before releasing):
    /// the answer says so in its `X-Docpipe-Held` header.
    HeldForReview,
}

/// The header that marks an answer built on held text, for a reviewer.
pub(crate) const HELD_HEADER: &str = "x-docpipe-held";

impl Served {
    /// The answer, marked when it serves held text.
    pub(crate) fn answer(self, body: serde_json::Value) -> axum::response::Response {
        use axum::response::IntoResponse;
        let mut response = axum::Json(body).into_response();
        if self == Served::HeldForReview {
            response.headers_mut().insert(
                HELD_HEADER,
                axum::http::HeaderValue::from_static("held for release, served to a reviewer"),
            );
        }
        response
    }
}

/// Ok when the document may be read for `need`; 404 when it does not exist, else 409 with the
/// reason (`document-deleting`, `version-held`, and for [`Need::Applies`] also
/// `document-not-indexed` and `version-not-in-force`). A held version is served to a reviewer
/// only, and marked so.
pub(crate) async fn check(
    client: &impl GenericClient,
    doc_id: &str,
    need: Need,
    caller: &crate::tenant::Caller,
) -> Result<Served, ApiError> {
    let reviewer = caller.reviewer;
    let today = docpipe_search::today();
    let standing = authority::standing(client, &[doc_id.to_string()], &today, &caller.readable())
        .await?
        .remove(doc_id);
    match (standing, need) {
        (None, _) => Err(ApiError::NotFound(format!(
            "document {doc_id} does not exist"
        ))),
        (Some(Standing::Live), _) => Ok(Served::Plain),
        (Some(Standing::Deleting), _) => Err(ApiError::conflict(
            "document-deleting",
            format!("document {doc_id} is being deleted"),
        )),
        (Some(Standing::Held | Standing::Blocked), _) if reviewer => Ok(Served::HeldForReview),
        (Some(Standing::Blocked), _) => Err(ApiError::conflict(
            "scan-blocked",
            format!(
                "document {doc_id} holds sensitive values its scan blocked: it answers once a reviewer resolves them (GET /documents/{doc_id}/scan)"
            ),
        )),
        (Some(Standing::Held), _) => Err(ApiError::conflict(
            "version-held",
            format!(
                "document {doc_id} is a version held for its release: it answers once released"
            ),
        )),
        (Some(Standing::NotIndexed(_) | Standing::NotInForce), Need::NotWithheld) => {
            Ok(Served::Plain)
        }
        (Some(Standing::NotIndexed(status)), Need::Applies) => Err(ApiError::conflict(
            "document-not-indexed",
            format!("document {doc_id} is not indexed (status {status})"),
        )),
        (Some(Standing::NotInForce), Need::Applies) => Err(ApiError::conflict(
            "version-not-in-force",
            format!("document {doc_id} is a version not in force on {today}"),
        )),
    }
}
