//! Writes: chunk records checked, capped and cut into insert batches by bytes and rows, and
//! deletes by expression.

use super::*;

impl MilvusIndex {
    pub(super) async fn delete_where(
        &self,
        op: &'static str,
        filter: String,
    ) -> Result<(), VectorError> {
        // Nothing was ever stored when the collection is missing: the delete's goal holds.
        self.when_loaded(op, || async {
            let request = DeleteRequest::builder()
                .collection_name(&self.collection)
                .filter(filter.clone())
                .build()?;
            self.client.delete(request).await
        })
        .await
        .map(|_| ())
    }

    pub(super) fn batches<'a>(&self, records: &'a [ChunkRecord]) -> Vec<&'a [ChunkRecord]> {
        split_batches(
            records,
            self.options.batch_max_bytes,
            self.options.batch_max_rows,
        )
    }

    pub(super) async fn insert_batch(&self, batch: &[ChunkRecord]) -> Result<(), VectorError> {
        let request = InsertRequest::builder()
            .collection_name(&self.collection)
            .columns(columns(batch, self.has_organ()))
            .build()
            .map_err(|e| VectorError::from_milvus("insert", e))?;
        match self.client.insert(request).await {
            // The pipeline trusts an acknowledged insert instead of reading it back, so the
            // acknowledgement must cover every row.
            Ok(response) if response.insert_count() == batch.len() as i64 => Ok(()),
            Ok(response) => Err(VectorError::Unavailable {
                op: "insert",
                source: format!(
                    "Milvus acknowledged {} of {} rows",
                    response.insert_count(),
                    batch.len()
                )
                .into(),
            }),
            // Dropped under us: transient, so the retry's ensure_collection recreates it.
            Err(e) if is_collection_missing(&e) => {
                self.forget_ensured();
                Err(VectorError::Unavailable {
                    op: "insert",
                    source: Box::new(e),
                })
            }
            Err(e) => Err(VectorError::from_milvus("insert", e)),
        }
    }

    pub(super) async fn insert_records(&self, records: &[ChunkRecord]) -> Result<(), VectorError> {
        validate(records)?;
        for batch in self.batches(records) {
            self.insert_batch(batch).await?;
        }
        Ok(())
    }
}

/// Checks what truncation cannot fix: ids (a cut id would collide or miss its deletes) and
/// vectors of differing length.
pub(super) fn validate(records: &[ChunkRecord]) -> Result<(), VectorError> {
    let Some(first) = records.first() else {
        return Ok(());
    };
    let dim = first.embedding.len();
    if dim == 0 {
        return Err(VectorError::rejected("insert", "empty embedding"));
    }
    for record in records {
        for (name, value) in [(F_CHUNK_ID, &record.chunk_id), (F_DOC_ID, &record.doc_id)] {
            if value.is_empty() || value.len() > MAX_ID {
                return Err(VectorError::rejected(
                    "insert",
                    format!(
                        "{name} must be 1..={MAX_ID} bytes, got {} bytes (chunk `{}`)",
                        value.len(),
                        truncate_utf8(&record.chunk_id, MAX_ID)
                    ),
                ));
            }
        }
        if record.embedding.len() != dim {
            return Err(VectorError::rejected(
                "insert",
                format!(
                    "chunk `{}` has a {}-dim embedding, the batch is {dim}-dim",
                    record.chunk_id,
                    record.embedding.len()
                ),
            ));
        }
    }
    Ok(())
}

pub(super) fn capped_tags(tags: &[String]) -> Vec<String> {
    tags.iter()
        .filter(|t| !t.is_empty())
        .take(MAX_TAGS)
        .map(|t| truncate_utf8(t, MAX_TAG).to_owned())
        .collect()
}

/// An upper-bound guess of a row's share of the insert request: every string as it will be
/// sent, the vector, the integers, plus a little protobuf framing per value.
pub(super) fn estimated_bytes(record: &ChunkRecord) -> usize {
    const FRAMING_PER_VALUE: usize = 4;
    let strings = [
        (record.chunk_id.len(), MAX_ID),
        (record.doc_id.len(), MAX_ID),
        (record.doc_name.len(), MAX_DOC_NAME),
        (record.regulation_type.len(), MAX_REGULATION_TYPE),
        (record.version.len(), MAX_VERSION),
        (record.section_path.len(), MAX_SECTION_PATH),
        (record.section_title.len(), MAX_SECTION_TITLE),
        (record.text.len(), MAX_TEXT),
    ]
    .iter()
    .map(|&(len, max)| len.min(max) + FRAMING_PER_VALUE)
    .sum::<usize>();
    let tags = record
        .tags
        .iter()
        .take(MAX_TAGS)
        .map(|t| t.len().min(MAX_TAG) + FRAMING_PER_VALUE)
        .sum::<usize>()
        + 2 * FRAMING_PER_VALUE;
    strings + tags + 6 * 8 + 1 + 4 * record.embedding.len()
}

pub(super) fn split_batches(
    records: &[ChunkRecord],
    max_bytes: usize,
    max_rows: usize,
) -> Vec<&[ChunkRecord]> {
    let max_rows = max_rows.max(1);
    let mut batches = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, record) in records.iter().enumerate() {
        let size = estimated_bytes(record);
        let rows = i - start;
        if rows > 0 && (rows >= max_rows || bytes + size > max_bytes) {
            batches.push(&records[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += size;
    }
    if start < records.len() {
        batches.push(&records[start..]);
    }
    batches
}

pub(super) fn columns(batch: &[ChunkRecord], has_organ: bool) -> Vec<FieldData> {
    let strings = |name: &str, max: usize, get: fn(&ChunkRecord) -> &str| FieldData::VarChar {
        name: name.to_owned(),
        values: batch
            .iter()
            .map(|r| truncate_utf8(get(r), max).to_owned())
            .collect(),
    };
    let ints = |name: &str, get: fn(&ChunkRecord) -> i64| FieldData::Int64 {
        name: name.to_owned(),
        values: batch.iter().map(get).collect(),
    };
    let mut columns = vec![
        strings(F_CHUNK_ID, MAX_ID, |r| &r.chunk_id),
        strings(F_DOC_ID, MAX_ID, |r| &r.doc_id),
    ];
    // In the schema's order.
    if has_organ {
        columns.push(strings(F_ORGAN_ID, MAX_ORGAN_ID, |r| &r.organ_id));
    }
    columns.extend([
        ints(F_RUN_ID, |r| r.run_id),
        ints(F_CHUNK_INDEX, |r| r.chunk_index),
        strings(F_DOC_NAME, MAX_DOC_NAME, |r| &r.doc_name),
        strings(F_REGULATION_TYPE, MAX_REGULATION_TYPE, |r| {
            &r.regulation_type
        }),
        strings(F_VERSION, MAX_VERSION, |r| &r.version),
        strings(F_SECTION_PATH, MAX_SECTION_PATH, |r| &r.section_path),
        strings(F_SECTION_TITLE, MAX_SECTION_TITLE, |r| &r.section_title),
        ints(F_PAGE_START, |r| r.page_start),
        ints(F_PAGE_END, |r| r.page_end),
        strings(F_TEXT, MAX_TEXT, |r| &r.text),
        FieldData::ArrayVarChar {
            name: F_TAGS.to_owned(),
            values: batch.iter().map(|r| capped_tags(&r.tags)).collect(),
        },
        FieldData::Bool {
            name: F_ANSWERING.to_owned(),
            values: batch.iter().map(|r| r.projection.answering).collect(),
        },
        ints(F_IN_FORCE_FROM, |r| r.projection.in_force_from),
        ints(F_IN_FORCE_TO, |r| r.projection.in_force_to),
        FieldData::FloatVector {
            name: F_EMBEDDING.to_owned(),
            values: batch.iter().map(|r| r.embedding.clone()).collect(),
        },
    ]);
    columns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: usize, text_len: usize, dim: usize) -> ChunkRecord {
        ChunkRecord {
            chunk_id: format!("c{i}"),
            organ_id: "default".into(),
            doc_id: "d".into(),
            run_id: 1,
            chunk_index: i as i64,
            doc_name: "n".into(),
            regulation_type: "law".into(),
            version: "v".into(),
            section_path: "a > b".into(),
            section_title: "b".into(),
            page_start: 1,
            page_end: 1,
            text: "字".repeat(text_len),
            tags: vec![],
            embedding: vec![0.0; dim],
            projection: crate::Projection::ALWAYS,
        }
    }

    #[test]
    fn batches_respect_bytes_and_rows() {
        let records: Vec<_> = (0..10).map(|i| record(i, 100, 384)).collect();
        let per_row = estimated_bytes(&records[0]);
        let batches = split_batches(&records, per_row * 3, 100);
        assert_eq!(
            batches.iter().map(|b| b.len()).collect::<Vec<_>>(),
            [3, 3, 3, 1]
        );
        let batches = split_batches(&records, usize::MAX, 4);
        assert_eq!(
            batches.iter().map(|b| b.len()).collect::<Vec<_>>(),
            [4, 4, 2]
        );
        // A single oversized row still goes out alone rather than looping forever.
        let batches = split_batches(&records[..2], 1, 100);
        assert_eq!(batches.len(), 2);
        assert!(split_batches(&[], 10, 10).is_empty());
    }

    #[test]
    fn text_is_capped_in_bytes_and_tags_in_count_and_length() {
        let mut r = record(0, 5000, 4); // 15,000 bytes of CJK
        r.tags = (0..40).map(|i| format!("{i}{}", "标".repeat(30))).collect();
        let cols = columns(std::slice::from_ref(&r), true);
        let FieldData::VarChar { values, .. } = &cols[12] else {
            panic!("text column")
        };
        assert!(values[0].len() <= MAX_TEXT && values[0].len() > MAX_TEXT - 3);
        let FieldData::ArrayVarChar { values, .. } = &cols[13] else {
            panic!("tags column")
        };
        assert_eq!(values[0].len(), MAX_TAGS);
        assert!(values[0].iter().all(|t| t.len() <= MAX_TAG));
    }

    #[test]
    fn oversized_ids_and_ragged_vectors_are_refused() {
        let mut r = record(0, 1, 4);
        r.chunk_id = "x".repeat(129);
        assert!(matches!(validate(&[r]), Err(VectorError::Rejected { .. })));
        let a = record(0, 1, 4);
        let b = record(1, 1, 5);
        assert!(matches!(
            validate(&[a, b]),
            Err(VectorError::Rejected { .. })
        ));
    }

    #[test]
    fn description_round_trips_the_model_id() {
        let d = MilvusIndex::description(384, "intfloat/multilingual-e5-small");
        assert_eq!(
            d.split_once(MODEL_MARKER).unwrap().1,
            "intfloat/multilingual-e5-small"
        );
    }
}
