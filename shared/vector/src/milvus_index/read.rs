//! Reads: counts, pages of chunk keys, and searches, each needing the collection loaded; hits
//! read column by column.

use super::*;

/// Milvus 2.3 refuses a query whose limit + offset exceeds this (`maxQueryResultWindow`).
pub(super) const MAX_QUERY_WINDOW: usize = 16_384;

pub(super) const HIT_FIELDS: [&str; 9] = [
    F_CHUNK_ID,
    F_DOC_ID,
    F_RUN_ID,
    F_TEXT,
    F_SECTION_PATH,
    F_SECTION_TITLE,
    F_PAGE_START,
    F_PAGE_END,
    F_DOC_NAME,
];

impl MilvusIndex {
    pub(super) async fn query(
        &self,
        op: &'static str,
        filter: String,
        output_fields: &[&str],
        limit: Option<usize>,
    ) -> Result<Option<QueryResponse>, VectorError> {
        self.query_at(ConsistencyLevel::Strong, op, filter, output_fields, limit)
            .await
    }

    /// A query at `consistency`: Strong waits until the index has caught up with every write
    /// acknowledged before it (a time tick, 200 ms by default, and more under load); the others
    /// answer from what it holds now, for a reader that can tell when that is incomplete.
    pub(super) async fn query_at(
        &self,
        consistency: ConsistencyLevel,
        op: &'static str,
        filter: String,
        output_fields: &[&str],
        limit: Option<usize>,
    ) -> Result<Option<QueryResponse>, VectorError> {
        self.when_loaded(op, || async {
            let mut builder = QueryRequest::builder()
                .collection_name(&self.collection)
                .filter(filter.clone())
                .output_fields(output_fields.iter().copied())
                .consistency_level(consistency);
            if let Some(limit) = limit {
                builder = builder.limit(limit as i64);
            }
            self.client.query(builder.build()?).await
        })
        .await
    }

    pub(super) async fn count_vectors(
        &self,
        doc_id: &str,
        run_id: Option<i64>,
    ) -> Result<usize, VectorError> {
        let mut filter = expr::doc_eq(doc_id);
        if let Some(run_id) = run_id {
            filter.push_str(&format!(" and {F_RUN_ID} == {run_id}"));
        }
        let Some(response) = self.query("count", filter, &["count(*)"], None).await? else {
            return Ok(0);
        };
        match response.results().get_output_field("count(*)") {
            Some(FieldData::Int64 { values, .. }) => {
                Ok(values.first().copied().unwrap_or(0).max(0) as usize)
            }
            other => Err(VectorError::rejected(
                "count",
                format!("unexpected count(*) column: {other:?}"),
            )),
        }
    }

    pub(super) async fn page_of_chunks(
        &self,
        after: &str,
        limit: usize,
    ) -> Result<Vec<ChunkKey>, VectorError> {
        let limit = limit.clamp(1, MAX_QUERY_WINDOW);
        // Milvus returns a limited query in primary-key order (2.3's query iterator relies on
        // it), so a key cursor pages through without offsets, whose window is capped.
        let filter = if after.is_empty() {
            format!("{F_CHUNK_ID} >= \"\"")
        } else {
            format!("{F_CHUNK_ID} > {}", quote(after))
        };
        let Some(response) = self
            .query(
                "chunk_page",
                filter,
                &[F_CHUNK_ID, F_DOC_ID, F_RUN_ID],
                Some(limit),
            )
            .await?
        else {
            return Ok(Vec::new());
        };
        let results = response.results();
        let chunk_ids = varchar_column("chunk_page", results.get_output_field(F_CHUNK_ID))?;
        let doc_ids = varchar_column("chunk_page", results.get_output_field(F_DOC_ID))?;
        let run_ids = int64_column("chunk_page", results.get_output_field(F_RUN_ID))?;
        let mut keys: Vec<ChunkKey> = chunk_ids
            .iter()
            .zip(doc_ids)
            .zip(run_ids)
            .map(|((chunk_id, doc_id), run_id)| ChunkKey {
                chunk_id: chunk_id.clone(),
                doc_id: doc_id.clone(),
                run_id: *run_id,
            })
            .collect();
        keys.sort_by(|a, b| a.chunk_id.cmp(&b.chunk_id));
        Ok(keys)
    }

    pub(super) async fn search_vectors(
        &self,
        vector: &[f32],
        top_k: usize,
        filters: &SearchFilters,
    ) -> Result<Vec<VectorHit>, VectorError> {
        if top_k == 0 {
            return Ok(Vec::new());
        }
        if vector.is_empty() {
            return Err(VectorError::rejected("search", "query vector is empty"));
        }
        match self.collection_dim().await? {
            Some(dim) if dim != vector.len() => {
                return Err(VectorError::rejected(
                    "search",
                    format!(
                        "query vector has {} dimensions, the collection {dim}",
                        vector.len()
                    ),
                ))
            }
            Some(_) => {}
            None => return Err(self.missing()),
        }
        let top_k = top_k.min(MAX_QUERY_WINDOW);
        let ef = self.options.search_ef.max(top_k);
        let mut builder = SearchRequest::builder()
            .collection_name(&self.collection)
            .vector_field(F_EMBEDDING)
            .vectors(SearchVectors::Float(vec![vector.to_vec()]))
            .output_fields(HIT_FIELDS)
            .limit(top_k as i64)
            .metric_type(MetricType::Cosine)
            .extra_params(HashMap::from([("ef".to_owned(), ef.to_string())]))
            .consistency_level(self.options.search_consistency.to_milvus());
        if let Some(filter) = expr::search_filter(filters, self.has_organ()) {
            builder = builder.filter(filter);
        }
        let request = builder
            .build()
            .map_err(|e| VectorError::from_milvus("search", e))?;
        let search = || async { self.client.search(request.clone()).await };
        let Some(response) = self.when_loaded("search", search).await? else {
            return Err(self.missing());
        };
        match response.results().get_results().first() {
            Some(result) => hits(result),
            None => Ok(Vec::new()),
        }
    }
}

/// Reads hits column by column: `SingleResult::rows()` needs the primary-key and score field
/// names, which Milvus 2.3 does not send (`primary-key or score field name is empty`).
pub(super) fn hits(result: &SingleResult) -> Result<Vec<VectorHit>, VectorError> {
    const OP: &str = "search";
    let scores = result.get_scores();
    let n = scores.len();
    if n == 0 {
        // An empty result carries no output columns at all.
        return Ok(Vec::new());
    }
    let chunk_ids = match result.get_ids() {
        Ids::VarChar(ids) => ids.as_slice(),
        _ => {
            return Err(VectorError::rejected(
                OP,
                "collection has an integer primary key; expected VarChar chunk ids",
            ))
        }
    };
    let col_s = |name: &str| varchar_column(OP, result.get_output_field(name));
    let col_i = |name: &str| int64_column(OP, result.get_output_field(name));
    let doc_id = col_s(F_DOC_ID)?;
    let run_id = col_i(F_RUN_ID)?;
    let text = col_s(F_TEXT)?;
    let section_path = col_s(F_SECTION_PATH)?;
    let section_title = col_s(F_SECTION_TITLE)?;
    let page_start = col_i(F_PAGE_START)?;
    let page_end = col_i(F_PAGE_END)?;
    let doc_name = col_s(F_DOC_NAME)?;
    let lengths = [
        chunk_ids.len(),
        doc_id.len(),
        run_id.len(),
        text.len(),
        section_path.len(),
        section_title.len(),
        page_start.len(),
        page_end.len(),
        doc_name.len(),
    ];
    if lengths.iter().any(|&len| len != n) {
        return Err(VectorError::rejected(
            OP,
            format!("search result columns disagree in length: {n} scores, columns {lengths:?}"),
        ));
    }
    Ok((0..n)
        .map(|i| VectorHit {
            chunk_id: chunk_ids[i].clone(),
            doc_id: doc_id[i].clone(),
            run_id: run_id[i],
            score: scores[i],
            text: text[i].clone(),
            section_path: section_path[i].clone(),
            section_title: section_title[i].clone(),
            page_start: page_start[i],
            page_end: page_end[i],
            doc_name: doc_name[i].clone(),
        })
        .collect())
}

pub(super) fn varchar_column<'a>(
    op: &'static str,
    field: Option<&'a FieldData>,
) -> Result<&'a [String], VectorError> {
    match field {
        Some(FieldData::VarChar { values, .. }) => Ok(values),
        other => Err(VectorError::rejected(
            op,
            format!(
                "expected a VarChar column, got {:?}",
                other.map(column_preview)
            ),
        )),
    }
}

pub(super) fn int64_column<'a>(
    op: &'static str,
    field: Option<&'a FieldData>,
) -> Result<&'a [i64], VectorError> {
    match field {
        Some(FieldData::Int64 { values, .. }) => Ok(values),
        other => Err(VectorError::rejected(
            op,
            format!(
                "expected an Int64 column, got {:?}",
                other.map(column_preview)
            ),
        )),
    }
}

pub(super) fn column_preview(field: &FieldData) -> String {
    // Debug of a whole column would dump every value into the error message.
    let debug = format!("{field:?}");
    debug.chars().take(80).collect()
}
