//! What a consumer downstream sees: the events on the test's bus, checked against the schemas in
//! `schemas/events` that the README documents.

use crate::workspace_root;
use std::collections::BTreeMap;

/// One validator per event type, from `schemas/events/<Type>.schema.json`.
pub struct EventSchemas {
    by_type: BTreeMap<String, jsonschema::Validator>,
}

impl EventSchemas {
    pub fn load() -> EventSchemas {
        let dir = workspace_root().join("schemas/events");
        let mut by_type = BTreeMap::new();
        for kind in docpipe_db::outbox::EventType::ALL {
            let path = dir.join(format!("{}.schema.json", kind.as_str()));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let schema: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let validator = jsonschema::validator_for(&schema)
                .unwrap_or_else(|e| panic!("{} is no JSON Schema: {e}", path.display()));
            by_type.insert(kind.as_str().to_string(), validator);
        }
        EventSchemas { by_type }
    }

    /// Why `event` (as EventBridge delivered it) is not what its schema says; none when it is.
    pub fn problems(&self, event: &serde_json::Value) -> Vec<String> {
        let kind = event["detail-type"].as_str().unwrap_or_default();
        let mut problems = Vec::new();
        if event["source"] != docpipe_db::outbox::SOURCE {
            problems.push(format!("source {} is not docpipe", event["source"]));
        }
        problems.extend(self.detail_problems(kind, &event["detail"]));
        problems
    }

    /// Why `detail` is not what the schema of `kind` says; none when it is.
    pub fn detail_problems(&self, kind: &str, detail: &serde_json::Value) -> Vec<String> {
        let Some(validator) = self.by_type.get(kind) else {
            return vec![format!("detail-type {kind:?} has no schema")];
        };
        let mut problems = Vec::new();
        if detail["type"] != kind {
            problems.push(format!(
                "detail.type {} differs from detail-type {kind}",
                detail["type"]
            ));
        }
        problems.extend(
            validator
                .iter_errors(detail)
                .map(|e| format!("{kind} {}: {e}", e.instance_path)),
        );
        problems
    }

    /// Panics with every problem of every event.
    pub fn assert_valid(&self, events: &[serde_json::Value]) {
        let problems: Vec<String> = events.iter().flat_map(|e| self.problems(e)).collect();
        assert!(
            problems.is_empty(),
            "events off their schemas: {problems:#?}"
        );
    }
}

/// The events' `detail.event_id`s, in order.
pub fn event_ids(events: &[serde_json::Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            e["detail"]["event_id"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// What a drill's database announced: every event its outbox recorded, as it is published, in its
/// schema, and each document's outcome (`DocumentIndexed` or `DocumentFailed` of its current run)
/// exactly once, whatever the faults repeated.
pub async fn assert_outcomes_announced(p: &crate::Pipeline, doc_ids: &[String]) {
    use docpipe_db::outbox::EventType;
    let recorded = docpipe_db::outbox::recorded_after(&**p.db.client().await, 0, 1_000_000)
        .await
        .expect("read the outbox");
    let schemas = EventSchemas::load();
    let problems: Vec<String> = recorded
        .iter()
        .flat_map(|r| schemas.detail_problems(&r.outgoing.kind, &r.outgoing.detail()))
        .collect();
    assert!(
        problems.is_empty(),
        "events off their schemas: {problems:#?}"
    );
    for doc_id in doc_ids {
        let doc = p.doc(doc_id).await.expect("the document");
        let kind = match doc.status {
            docpipe_core::model::DocStatus::Indexed => EventType::DocumentIndexed,
            _ => EventType::DocumentFailed,
        };
        let announced: Vec<&docpipe_db::outbox::Recorded> = recorded
            .iter()
            .filter(|r| r.outgoing.kind == kind.as_str() && r.outgoing.body["doc_id"] == **doc_id)
            .collect();
        assert_eq!(
            announced.len(),
            1,
            "{doc_id} ended {} and says so once: {announced:?}",
            doc.status
        );
        assert_eq!(
            announced[0].outgoing.body["run_id"],
            serde_json::json!(doc.current_run_id),
            "the outcome announced is the current run's"
        );
    }
}
