//! Structured JSON logs, one line per event, with `doc_id`, `run_id` and `stage` as fields.

use tracing_subscriber::{fmt, EnvFilter};

/// Installs the JSON subscriber. Safe to call more than once (later calls do nothing), so tests and
/// binaries can both call it.
pub fn init() {
    let filter = EnvFilter::try_from_env("DOCPIPE_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new("info,aws_config=warn,aws_smithy_runtime=warn"));
    let _ = fmt()
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .with_span_list(false)
        .with_target(false)
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
