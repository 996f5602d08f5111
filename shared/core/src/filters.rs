//! What a search may be narrowed to: the request's `filters`, read by the keyword and article
//! queries in the database and by the vector filter.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Filters {
    #[serde(default)]
    pub doc_ids: Vec<String>,
    #[serde(default)]
    pub regulation_type: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// The tenants whose documents the read covers. Never taken from a request body: the API sets
    /// it from the caller's tenant and scope. Empty covers every tenant (the operator's tools).
    #[serde(skip)]
    pub organs: Vec<String>,
}
