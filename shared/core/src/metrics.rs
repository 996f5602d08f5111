//! CloudWatch metrics as Embedded Metric Format log lines: one JSON object per measurement on
//! stdout, which CloudWatch Logs turns into metrics without an API call from the function.
//! Written in Lambda (or when `DOCPIPE_METRICS=emf`); elsewhere they would only clutter the
//! progress lines.

use crate::model::Stage;
use serde_json::json;
use std::sync::OnceLock;

const NAMESPACE: &str = "docpipe";

fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| match std::env::var("DOCPIPE_METRICS").as_deref() {
        Ok("emf") => true,
        Ok(_) => false,
        Err(_) => std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some(),
    })
}

/// The EMF document for one set of metrics sharing dimensions.
pub fn document(
    dimensions: &[(&str, &str)],
    metrics: &[(&str, &str, f64)],
    timestamp_ms: i64,
) -> serde_json::Value {
    let mut doc = json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": [dimensions.iter().map(|(k, _)| *k).collect::<Vec<_>>()],
                "Metrics": metrics.iter().map(|(name, unit, _)| json!({"Name": name, "Unit": unit})).collect::<Vec<_>>(),
            }]
        }
    });
    for (k, v) in dimensions {
        doc[*k] = json!(v);
    }
    for (name, _, value) in metrics {
        doc[*name] = json!(value);
    }
    doc
}

fn emit(dimensions: &[(&str, &str)], metrics: &[(&str, &str, f64)]) {
    if enabled() {
        println!(
            "{}",
            document(dimensions, metrics, chrono::Utc::now().timestamp_millis())
        );
    }
}

/// A stage finished its work for one document.
pub fn stage_completed(stage: Stage, duration_ms: u64) {
    emit(
        &[("stage", stage.as_str())],
        &[
            ("DocumentsCompleted", "Count", 1.0),
            ("StageDuration", "Milliseconds", duration_ms as f64),
        ],
    );
}

/// A stage failed, permanently (the run failed) or transiently (the message will be retried).
pub fn stage_failed(stage: Stage, class: &str) {
    emit(
        &[("stage", stage.as_str()), ("class", class)],
        &[("Failures", "Count", 1.0)],
    );
}

pub fn chunks_indexed(count: usize) {
    emit(
        &[("stage", "index")],
        &[("ChunksIndexed", "Count", count as f64)],
    );
}

/// Runs the sweeper failed: the stuck-runs alarm watches this.
pub fn runs_swept(count: usize) {
    emit(
        &[("stage", "sweep")],
        &[("RunsSwept", "Count", count as f64)],
    );
}

/// Lost jobs the sweeper sent again.
pub fn runs_redriven(count: usize) {
    emit(
        &[("stage", "sweep")],
        &[("RunsRedriven", "Count", count as f64)],
    );
}

/// What the sweeper's housekeeping removed: clean-ups carried out, what the reconcile found and
/// removed (documents' vectors and artifact objects), and tombstones past their retention.
pub fn housekeeping(cleanups: usize, reconciled: usize, tombstones: usize) {
    emit(
        &[("stage", "sweep")],
        &[
            ("CleanupsCarriedOut", "Count", cleanups as f64),
            ("ReconcileRemoved", "Count", reconciled as f64),
            ("TombstonesPruned", "Count", tombstones as f64),
        ],
    );
}

/// How far the events' publication is behind, after a sweep published what it could: events not
/// yet taken by the bus, and the age of the oldest. The events-backlog alarm watches the age.
pub fn events_backlog(unsent: i64, oldest_secs: f64) {
    emit(
        &[("stage", "sweep")],
        &[
            ("EventsUnsent", "Count", unsent as f64),
            ("EventsOldestUnsentAge", "Seconds", oldest_secs),
        ],
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn emf_documents_name_their_metrics_and_carry_the_values() {
        let doc = super::document(
            &[("stage", "parse")],
            &[("StageDuration", "Milliseconds", 12.0)],
            1,
        );
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Namespace"], "docpipe");
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0][0],
            "stage"
        );
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"],
            "StageDuration"
        );
        assert_eq!(doc["stage"], "parse");
        assert_eq!(doc["StageDuration"], 12.0);
    }
}
