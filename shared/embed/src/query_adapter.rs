//! A learned linear map applied to query vectors only: `q' = normalise(W q)`.
//!
//! A layperson asks "老公出轨离婚财产怎么分" where the statute says "夫妻共同财产…过错方"; a
//! general multilingual model puts the two further apart than they should be. `W` is fitted on
//! labelled questions (`scripts/retrieval/adapter.py`: contrastive loss over every article, pulled
//! towards the identity so that it moves queries only where the questions say to). Passages are
//! untouched, so an adapter can be added, changed or removed without re-embedding anything: the
//! index keeps the model's own passage vectors.

use crate::EmbedError;

/// A `dim` × `dim` matrix, row-major, applied to each query vector.
#[derive(Clone, PartialEq)]
pub struct QueryAdapter {
    id: String,
    dim: usize,
    matrix: Box<[f32]>,
}

impl std::fmt::Debug for QueryAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryAdapter")
            .field("id", &self.id)
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

impl QueryAdapter {
    /// Reads `dim` × `dim` little-endian f32 values, row-major (what `adapter.py` writes).
    /// `source` names where they came from, for the error.
    pub fn from_le_bytes(
        id: impl Into<String>,
        dim: usize,
        bytes: &[u8],
        source: &str,
    ) -> Result<Self, EmbedError> {
        let want = dim * dim * 4;
        if bytes.len() != want {
            return Err(EmbedError::config(
                "DOCPIPE_E5_QUERY_ADAPTER",
                format!(
                    "{source}: {} bytes, but a {dim}x{dim} f32 matrix is {want}",
                    bytes.len()
                ),
            ));
        }
        let matrix: Box<[f32]> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        if matrix.iter().any(|v| !v.is_finite()) {
            return Err(EmbedError::config(
                "DOCPIPE_E5_QUERY_ADAPTER",
                format!("{source}: the matrix holds a NaN or an infinity"),
            ));
        }
        Ok(QueryAdapter {
            id: id.into(),
            dim,
            matrix,
        })
    }

    /// Reads an adapter file; its id is the file's name.
    pub fn from_file(dim: usize, path: &std::path::Path) -> Result<Self, EmbedError> {
        let bytes = std::fs::read(path).map_err(|e| {
            EmbedError::config(
                "DOCPIPE_E5_QUERY_ADAPTER",
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
        let id = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        Self::from_le_bytes(id, dim, &bytes, &path.display().to_string())
    }

    /// What a search response names it by.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `W v`, L2-normalised (every vector docpipe stores or compares is unit length).
    pub fn apply(&self, v: &[f32]) -> Result<Vec<f32>, EmbedError> {
        if v.len() != self.dim {
            return Err(EmbedError::DimensionMismatch {
                expected: self.dim,
                got: v.len(),
            });
        }
        let mut out: Vec<f32> = self
            .matrix
            .chunks_exact(self.dim)
            .map(|row| row.iter().zip(v).map(|(w, x)| w * x).sum())
            .collect();
        let norm = out.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            out.iter_mut().for_each(|x| *x /= norm);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    #[test]
    fn the_identity_keeps_a_unit_vector() {
        let a = QueryAdapter::from_le_bytes("id", 2, &bytes(&[1.0, 0.0, 0.0, 1.0]), "t").unwrap();
        assert_eq!(a.apply(&[0.6, 0.8]).unwrap(), vec![0.6, 0.8]);
    }

    #[test]
    fn the_matrix_is_row_major_and_the_result_unit_length() {
        // rows (0, 2) and (1, 0): (x, y) -> (2y, x)
        let a = QueryAdapter::from_le_bytes("m", 2, &bytes(&[0.0, 2.0, 1.0, 0.0]), "t").unwrap();
        let out = a.apply(&[1.0, 0.0]).unwrap();
        assert_eq!(out, vec![0.0, 1.0]);
        let out = a.apply(&[0.0, 1.0]).unwrap();
        assert_eq!(out, vec![1.0, 0.0]);
        let out = a.apply(&[0.6, 0.8]).unwrap();
        let norm: f32 = out.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-6, "{out:?}");
        assert!(out[0] > out[1], "2y must outweigh x: {out:?}");
    }

    #[test]
    fn a_file_of_the_wrong_size_or_with_nan_is_refused() {
        let short = QueryAdapter::from_le_bytes("s", 2, &bytes(&[1.0, 0.0, 0.0]), "short.bin");
        let msg = short.unwrap_err().to_string();
        assert!(
            msg.contains("short.bin: 12 bytes") && msg.contains("16"),
            "{msg}"
        );
        let nan = QueryAdapter::from_le_bytes("n", 2, &bytes(&[1.0, f32::NAN, 0.0, 1.0]), "n");
        assert!(nan.unwrap_err().to_string().contains("NaN"));
    }

    #[test]
    fn a_vector_of_another_dimension_is_refused() {
        let a = QueryAdapter::from_le_bytes("id", 2, &bytes(&[1.0, 0.0, 0.0, 1.0]), "t").unwrap();
        assert!(matches!(
            a.apply(&[1.0, 0.0, 0.0]),
            Err(EmbedError::DimensionMismatch {
                expected: 2,
                got: 3
            })
        ));
    }
}
