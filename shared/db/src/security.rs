//! Seed 004's security scans: what the sensitive-data scan of a run's parse found, recorded in the
//! parse commit. A finding holds a masked sample and its place, never the value.

use super::{DbError, Type};
use serde::Serialize;
use tokio_postgres::GenericClient;

/// Findings one scan records at most (its counts stay whole): a document made of identity
/// numbers would otherwise write a row per number.
pub const MAX_FINDINGS_STORED: usize = 1_000;

/// A scan to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewScan {
    pub scanner_version: String,
    pub policy: String,
    pub status: String,
    pub risk_level: String,
    pub findings_count: usize,
    pub summary: serde_json::Value,
    pub findings: Vec<NewFinding>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NewFinding {
    pub finding_type: String,
    pub severity: String,
    pub location: serde_json::Value,
    pub masked_sample: String,
    pub recommended_action: String,
}

/// Records the run's scan, replacing one an earlier commit of the same run recorded.
pub async fn record(
    c: &impl GenericClient,
    doc_id: &str,
    run_id: i64,
    scan: &NewScan,
) -> Result<i64, DbError> {
    c.execute_typed(
        "DELETE FROM security_scans WHERE run_id = $1",
        &[(&run_id, Type::INT8)],
    )
    .await?;
    let row = c
        .query_typed_one(
            "INSERT INTO security_scans (doc_id, run_id, scanner_version, policy, status,
                                         risk_level, findings_count, summary_json)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING scan_id",
            &[
                (&doc_id, Type::VARCHAR),
                (&run_id, Type::INT8),
                (&scan.scanner_version, Type::VARCHAR),
                (&scan.policy, Type::VARCHAR),
                (&scan.status, Type::VARCHAR),
                (&scan.risk_level, Type::VARCHAR),
                (&(scan.findings_count as i32), Type::INT4),
                (&scan.summary, Type::JSONB),
            ],
        )
        .await?;
    let scan_id: i64 = row.get("scan_id");
    let stored = &scan.findings[..scan.findings.len().min(MAX_FINDINGS_STORED)];
    if !stored.is_empty() {
        let types: Vec<&str> = stored.iter().map(|f| f.finding_type.as_str()).collect();
        let severities: Vec<&str> = stored.iter().map(|f| f.severity.as_str()).collect();
        let locations: Vec<String> = stored.iter().map(|f| f.location.to_string()).collect();
        let samples: Vec<&str> = stored.iter().map(|f| f.masked_sample.as_str()).collect();
        let actions: Vec<&str> = stored
            .iter()
            .map(|f| f.recommended_action.as_str())
            .collect();
        c.execute_typed(
            "INSERT INTO security_findings (scan_id, finding_type, severity, location_json,
                                            masked_sample, recommended_action)
             SELECT $1, t, s, l::jsonb, left(m, 128), a
             FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
                  WITH ORDINALITY AS f(t, s, l, m, a, n)
             ORDER BY n",
            &[
                (&scan_id, Type::INT8),
                (&types, Type::TEXT_ARRAY),
                (&severities, Type::TEXT_ARRAY),
                (&locations, Type::TEXT_ARRAY),
                (&samples, Type::TEXT_ARRAY),
                (&actions, Type::TEXT_ARRAY),
            ],
        )
        .await?;
    }
    Ok(scan_id)
}

/// A recorded scan, with its findings (at most `limit` of them).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scan {
    pub scan_id: i64,
    pub doc_id: String,
    pub run_id: i64,
    pub target_type: String,
    pub scanner_version: String,
    pub policy: String,
    pub status: String,
    pub risk_level: String,
    pub findings_count: i32,
    pub summary: serde_json::Value,
    pub completed_at: String,
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub finding_id: i64,
    pub finding_type: String,
    pub severity: String,
    pub location: serde_json::Value,
    pub masked_sample: String,
    pub recommended_action: String,
    pub resolution: String,
}

/// The scan of the document's current run (its newest, if the current run has none yet).
pub async fn of_document(
    c: &impl GenericClient,
    doc_id: &str,
    limit: i64,
) -> Result<Option<Scan>, DbError> {
    let Some(row) = c
        .query_typed_opt(
            "SELECT s.scan_id, s.doc_id, s.run_id, s.target_type, s.scanner_version, s.policy,
                    s.status, s.risk_level, s.findings_count, s.summary_json,
                    to_char(s.completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')
                        AS completed_at
             FROM security_scans s JOIN documents d ON d.doc_id = s.doc_id
             WHERE s.doc_id = $1
             ORDER BY (s.run_id = d.current_run_id) DESC, s.scan_id DESC LIMIT 1",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?
    else {
        return Ok(None);
    };
    let scan_id: i64 = row.get("scan_id");
    let findings = c
        .query_typed(
            "SELECT finding_id, finding_type, severity, location_json, masked_sample,
                    recommended_action, resolution
             FROM security_findings WHERE scan_id = $1 ORDER BY finding_id LIMIT $2",
            &[(&scan_id, Type::INT8), (&limit, Type::INT8)],
        )
        .await?
        .iter()
        .map(|r| Finding {
            finding_id: r.get("finding_id"),
            finding_type: r.get("finding_type"),
            severity: r.get("severity"),
            location: r.get("location_json"),
            masked_sample: r.get("masked_sample"),
            recommended_action: r.get("recommended_action"),
            resolution: r.get("resolution"),
        })
        .collect();
    Ok(Some(Scan {
        scan_id,
        doc_id: row.get("doc_id"),
        run_id: row.get("run_id"),
        target_type: row.get("target_type"),
        scanner_version: row.get("scanner_version"),
        policy: row.get("policy"),
        status: row.get("status"),
        risk_level: row.get("risk_level"),
        findings_count: row.get("findings_count"),
        summary: row.get("summary_json"),
        completed_at: row.get("completed_at"),
        findings,
    }))
}

/// Whether the scan of `run_id` blocked it (and nobody resolved it yet).
pub async fn blocked(c: &impl GenericClient, run_id: i64) -> Result<bool, DbError> {
    Ok(c.query_typed_opt(
        "SELECT 1 AS one FROM security_scans WHERE run_id = $1 AND status = 'blocked'",
        &[(&run_id, Type::INT8)],
    )
    .await?
    .is_some())
}

/// A reviewer resolved the blocking findings of the document's current run: they are marked
/// resolved, by whom and when, and the scan no longer blocks (`warned`). The scan id, or none
/// when the current run's scan blocks nothing.
pub async fn resolve(
    c: &impl GenericClient,
    doc_id: &str,
    resolved_by: &str,
) -> Result<Option<i64>, DbError> {
    let Some(row) = c
        .query_typed_opt(
            "UPDATE security_scans s SET status = 'warned'
             FROM documents d
             WHERE d.doc_id = $1 AND s.run_id = d.current_run_id AND s.status = 'blocked'
             RETURNING s.scan_id",
            &[(&doc_id, Type::VARCHAR)],
        )
        .await?
    else {
        return Ok(None);
    };
    let scan_id: i64 = row.get("scan_id");
    c.execute_typed(
        "UPDATE security_findings SET resolution = 'resolved', resolved_by = $2,
                resolved_at = NOW()
         WHERE scan_id = $1 AND resolution = ''",
        &[(&scan_id, Type::INT8), (&resolved_by, Type::VARCHAR)],
    )
    .await?;
    Ok(Some(scan_id))
}
