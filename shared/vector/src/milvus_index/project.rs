//! The projection of version state onto a document's vectors ([`crate::Projection`]): read back
//! the vectors that do not carry it, and upsert them whole with it.

use super::*;
use crate::{Projection, ReadBack, RunProjection};
use milvus::v2::prelude::{QueryResults, UpsertRequest};

/// Every stored field but `tags`, so that an upsert writes back exactly what it read. Tags are
/// read on their own ([`MilvusIndex::tags_of`]): the client cannot decode an empty array.
const ALL_FIELDS: [&str; 17] = [
    F_ORGAN_ID,
    F_CHUNK_ID,
    F_DOC_ID,
    F_RUN_ID,
    F_CHUNK_INDEX,
    F_DOC_NAME,
    F_REGULATION_TYPE,
    F_VERSION,
    F_SECTION_PATH,
    F_SECTION_TITLE,
    F_PAGE_START,
    F_PAGE_END,
    F_TEXT,
    F_ANSWERING,
    F_IN_FORCE_FROM,
    F_IN_FORCE_TO,
    F_EMBEDDING,
];

/// How long a read that must not wait ([`ReadBack::WholeOrLater`]) may take: a Bounded read of a
/// caught-up index takes tens of milliseconds (17 ms for 46 vectors, measured).
const READ_NOW_BUDGET: std::time::Duration = std::time::Duration::from_secs(3);

/// `read`'s answer, or unavailable once [`READ_NOW_BUDGET`] has passed. Only reads are given up
/// on: a write stopped halfway would leave a run half-written.
async fn within<T>(
    op: &'static str,
    read: impl std::future::Future<Output = Result<T, VectorError>>,
) -> Result<T, VectorError> {
    tokio::time::timeout(READ_NOW_BUDGET, read)
        .await
        .map_err(|_| VectorError::Unavailable {
            op,
            source: format!("no answer in {READ_NOW_BUDGET:?}: the index lags its writes").into(),
        })?
}

/// Vectors read back per page: a page of 512-dim vectors with their text stays well under the
/// gRPC message limit.
const PAGE: usize = 512;

impl MilvusIndex {
    pub(super) async fn project_run(
        &self,
        doc_id: &str,
        run_id: i64,
        projection: Projection,
        read: ReadBack,
    ) -> Result<usize, VectorError> {
        let run = format!("{} and {F_RUN_ID} == {run_id}", expr::doc_eq(doc_id));
        let mut rewritten = 0;
        match read {
            ReadBack::Wait => {}
            ReadBack::WholeOrWait(expected) => {
                // What the index holds now, without waiting for it to catch up: when that is the
                // whole run, every vector is rewritten (whatever it seemed to carry: a view this
                // recent may miss another writer's last upsert), and nothing more is needed.
                let seen = self
                    .rewrite(&run, ConsistencyLevel::Bounded, projection)
                    .await?;
                if seen == expected {
                    return Ok(seen);
                }
                rewritten += seen;
            }
            ReadBack::WholeOrLater(expected) => {
                return self.rewrite_whole_now(&run, expected, projection).await;
            }
        }
        let unlike = format!(
            "{run} and ({F_ANSWERING} != {} or {F_IN_FORCE_FROM} != {} or {F_IN_FORCE_TO} != {})",
            projection.answering, projection.in_force_from, projection.in_force_to
        );
        rewritten += self
            .rewrite(&unlike, ConsistencyLevel::Strong, projection)
            .await?;
        Ok(rewritten)
    }

    /// Reads the run's vectors as the index holds them now (Bounded, each read given
    /// [`READ_NOW_BUDGET`]) and rewrites them only when they are all there: `expected` of them.
    /// Nothing is written otherwise, so a caller that gives up leaves no half-written run.
    async fn rewrite_whole_now(
        &self,
        run: &str,
        expected: usize,
        projection: Projection,
    ) -> Result<usize, VectorError> {
        const OP: &str = "set_projection";
        let behind = |found: String| VectorError::Unavailable {
            op: OP,
            source: format!("the index does not show the run whole yet ({found})").into(),
        };
        let mut all: Vec<ChunkRecord> = Vec::with_capacity(expected);
        let mut after = String::new();
        loop {
            let page = format!("{run} and {F_CHUNK_ID} > {}", quote(&after));
            let response = within(
                OP,
                self.query_at(
                    ConsistencyLevel::Bounded,
                    OP,
                    page,
                    self.all_fields(),
                    Some(PAGE),
                ),
            )
            .await?;
            let mut records = match response {
                Some(r) => records(r.results())?,
                None => Vec::new(),
            };
            records.sort_by(|a, b| a.chunk_id.cmp(&b.chunk_id));
            let full = records.len() == PAGE;
            if let Some(last) = records.last() {
                after = last.chunk_id.clone();
            }
            all.extend(records);
            if all.len() > expected {
                return Err(behind(format!("{} of {expected}", all.len())));
            }
            if !full {
                break;
            }
        }
        if all.len() != expected {
            return Err(behind(format!("{} of {expected}", all.len())));
        }
        for page in all.chunks_mut(PAGE) {
            let mut tags = within(OP, self.tags_of(page, ConsistencyLevel::Bounded)).await?;
            for r in page {
                r.projection = projection;
                r.tags = tags.remove(&r.chunk_id).unwrap_or_default();
            }
        }
        self.upsert_records(OP, &all).await?;
        Ok(all.len())
    }

    /// Reads the vectors `filter` selects at `consistency`, a page at a time, and upserts them
    /// whole with `projection`: how many it rewrote.
    async fn rewrite(
        &self,
        filter: &str,
        consistency: ConsistencyLevel,
        projection: Projection,
    ) -> Result<usize, VectorError> {
        const OP: &str = "set_projection";
        let mut rewritten = 0;
        let mut after = String::new();
        loop {
            let page = format!("{filter} and {F_CHUNK_ID} > {}", quote(&after));
            let Some(response) = self
                .query_at(consistency, OP, page, self.all_fields(), Some(PAGE))
                .await?
            else {
                return Ok(rewritten);
            };
            let mut records = records(response.results())?;
            if records.is_empty() {
                return Ok(rewritten);
            }
            records.sort_by(|a, b| a.chunk_id.cmp(&b.chunk_id));
            let mut tags = self.tags_of(&records, consistency).await?;
            for r in &mut records {
                r.projection = projection;
                r.tags = tags.remove(&r.chunk_id).unwrap_or_default();
            }
            self.upsert_records(OP, &records).await?;
            rewritten += records.len();
            if records.len() < PAGE {
                return Ok(rewritten);
            }
            after = records
                .last()
                .map(|r| r.chunk_id.clone())
                .unwrap_or_default();
        }
    }
}

impl MilvusIndex {
    /// Writes `records` whole over the vectors of the same chunk ids, in batches bounded as an
    /// insert's are.
    pub(super) async fn upsert_records(
        &self,
        op: &'static str,
        records: &[ChunkRecord],
    ) -> Result<(), VectorError> {
        for batch in self.batches(records) {
            let insert = InsertRequest::builder()
                .collection_name(&self.collection)
                .columns(super::write::columns(batch, self.has_organ()))
                .build()
                .map_err(|e| VectorError::from_milvus(op, e))?;
            let request = UpsertRequest::builder()
                .insert(insert)
                .build()
                .map_err(|e| VectorError::from_milvus(op, e))?;
            self.client
                .upsert(request)
                .await
                .map_err(|e| VectorError::from_milvus(op, e))?;
        }
        Ok(())
    }
}

/// Documents asked about in one drift query: an expression of a few kilobytes.
const DRIFT_DOCS_PER_QUERY: usize = 32;

/// Rows one drift query returns at most (Milvus's query window): past it, each document of the
/// page is asked about alone.
const DRIFT_ROWS: usize = 16_384;

impl MilvusIndex {
    pub(super) async fn drifted_runs(
        &self,
        expected: &[RunProjection],
    ) -> Result<Vec<String>, VectorError> {
        const OP: &str = "drifted";
        let mut drifted = Vec::new();
        for page in expected.chunks(DRIFT_DOCS_PER_QUERY) {
            let found = self.drift_query(OP, page, DRIFT_ROWS).await?;
            if found.len() < DRIFT_ROWS {
                drifted.extend(found.into_iter().collect::<std::collections::BTreeSet<_>>());
                continue;
            }
            for one in page {
                if !self
                    .drift_query(OP, std::slice::from_ref(one), 1)
                    .await?
                    .is_empty()
                {
                    drifted.push(one.doc_id.clone());
                }
            }
        }
        Ok(drifted)
    }

    /// The doc ids of up to `limit` vectors of `page`'s runs that carry another projection.
    async fn drift_query(
        &self,
        op: &'static str,
        page: &[RunProjection],
        limit: usize,
    ) -> Result<Vec<String>, VectorError> {
        if page.is_empty() {
            return Ok(Vec::new());
        }
        let filter = page
            .iter()
            .map(|e| {
                let p = e.projection;
                format!(
                    "({} and {F_RUN_ID} == {} and ({F_ANSWERING} != {} or {F_IN_FORCE_FROM} != {} \
                     or {F_IN_FORCE_TO} != {}))",
                    expr::doc_eq(&e.doc_id),
                    e.run_id,
                    p.answering,
                    p.in_force_from,
                    p.in_force_to
                )
            })
            .collect::<Vec<_>>()
            .join(" or ");
        let Some(response) = self.query(op, filter, &[F_DOC_ID], Some(limit)).await? else {
            return Ok(Vec::new());
        };
        match response.results().get_output_field(F_DOC_ID) {
            None => Ok(Vec::new()),
            column => Ok(varchar_column(op, column)?.to_vec()),
        }
    }
}

impl MilvusIndex {
    /// [`ALL_FIELDS`], without `organ_id` in a collection made before tenants.
    fn all_fields(&self) -> &'static [&'static str] {
        if self.has_organ() {
            &ALL_FIELDS
        } else {
            &ALL_FIELDS[1..]
        }
    }

    /// The non-empty tag arrays of `records`, by chunk id. Milvus 2.3 sends an empty array as a
    /// row without data, which the client refuses to decode, so empty arrays are never asked for.
    /// At the consistency the records were read at: on one query node (standalone, or one
    /// replica) a later read sees at least what the earlier one did.
    async fn tags_of(
        &self,
        records: &[ChunkRecord],
        consistency: ConsistencyLevel,
    ) -> Result<HashMap<String, Vec<String>>, VectorError> {
        const OP: &str = "set_projection";
        let ids: Vec<String> = records.iter().map(|r| r.chunk_id.clone()).collect();
        // A non-empty array's first element is some string, and an empty array has none.
        // Not `array_length(tags) != 0`: Milvus 2.3.5 fails that expression on a growing
        // segment while it takes inserts (an internal assertion, `data_barrier`), which made
        // most write-backs during an ingest fail and retry.
        let filter = format!(
            "{F_CHUNK_ID} in {} and {F_TAGS}[0] >= \"\"",
            expr::quoted_list(&ids)
        );
        let Some(response) = self
            .query_at(
                consistency,
                OP,
                filter,
                &[F_CHUNK_ID, F_TAGS],
                Some(ids.len()),
            )
            .await?
        else {
            return Ok(HashMap::new());
        };
        let results = response.results();
        let chunk_ids = varchar_column(OP, results.get_output_field(F_CHUNK_ID))?;
        let tags = match results.get_output_field(F_TAGS) {
            Some(FieldData::ArrayVarChar { values, .. }) => values,
            None if chunk_ids.is_empty() => return Ok(HashMap::new()),
            other => return Err(unexpected(F_TAGS, other)),
        };
        if tags.len() != chunk_ids.len() {
            return Err(VectorError::rejected(
                OP,
                format!("{} ids but {} tag arrays", chunk_ids.len(), tags.len()),
            ));
        }
        Ok(chunk_ids
            .iter()
            .cloned()
            .zip(tags.iter().cloned())
            .collect())
    }
}

/// The rows of a query over [`ALL_FIELDS`], as records (tags left empty).
fn records(results: &QueryResults) -> Result<Vec<ChunkRecord>, VectorError> {
    const OP: &str = "set_projection";
    let s = |name: &str| varchar_column(OP, results.get_output_field(name));
    let i = |name: &str| int64_column(OP, results.get_output_field(name));
    let chunk_ids = s(F_CHUNK_ID)?;
    let n = chunk_ids.len();
    let (doc_ids, run_ids, chunk_index) = (s(F_DOC_ID)?, i(F_RUN_ID)?, i(F_CHUNK_INDEX)?);
    // Absent from a collection made before tenants, which is written without it.
    let organs = match results.get_output_field(F_ORGAN_ID) {
        Some(_) => s(F_ORGAN_ID)?.to_vec(),
        None => vec![String::new(); n],
    };
    let (doc_names, types, versions) = (s(F_DOC_NAME)?, s(F_REGULATION_TYPE)?, s(F_VERSION)?);
    let (paths, titles, texts) = (s(F_SECTION_PATH)?, s(F_SECTION_TITLE)?, s(F_TEXT)?);
    let (page_start, page_end) = (i(F_PAGE_START)?, i(F_PAGE_END)?);
    let (from, to) = (i(F_IN_FORCE_FROM)?, i(F_IN_FORCE_TO)?);
    let answering = match results.get_output_field(F_ANSWERING) {
        Some(FieldData::Bool { values, .. }) => values,
        other => return Err(unexpected(F_ANSWERING, other)),
    };
    let embeddings = match results.get_output_field(F_EMBEDDING) {
        Some(FieldData::FloatVector { values, .. }) => values,
        other => return Err(unexpected(F_EMBEDDING, other)),
    };
    let lengths = [
        doc_ids.len(),
        run_ids.len(),
        chunk_index.len(),
        doc_names.len(),
        types.len(),
        versions.len(),
        paths.len(),
        titles.len(),
        texts.len(),
        page_start.len(),
        page_end.len(),
        from.len(),
        to.len(),
        answering.len(),
        embeddings.len(),
    ];
    if lengths.iter().any(|&len| len != n) {
        return Err(VectorError::rejected(
            OP,
            format!("query columns disagree in length: {n} ids, columns {lengths:?}"),
        ));
    }
    Ok((0..n)
        .map(|k| ChunkRecord {
            chunk_id: chunk_ids[k].clone(),
            doc_id: doc_ids[k].clone(),
            organ_id: organs[k].clone(),
            run_id: run_ids[k],
            chunk_index: chunk_index[k],
            doc_name: doc_names[k].clone(),
            regulation_type: types[k].clone(),
            version: versions[k].clone(),
            section_path: paths[k].clone(),
            section_title: titles[k].clone(),
            page_start: page_start[k],
            page_end: page_end[k],
            text: texts[k].clone(),
            tags: Vec::new(),
            embedding: embeddings[k].clone(),
            projection: Projection {
                answering: answering[k],
                in_force_from: from[k],
                in_force_to: to[k],
            },
        })
        .collect())
}

fn unexpected(name: &str, field: Option<&FieldData>) -> VectorError {
    VectorError::rejected(
        "set_projection",
        format!(
            "unexpected `{name}` column: {:?}",
            field.map(column_preview)
        ),
    )
}
