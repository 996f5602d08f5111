//! The sensitive-data scan of a parse (issue: tenants and a sensitive-data scan; seed 004's
//! security scans): every semantic block is scanned ([`docpipe_parse::sensitive`]) before the
//! artifacts are written and the snapshot committed. With the `mask` policy each value is masked
//! in the blocks and in the chunks cut from them (so in what is indexed, searched, excerpted and
//! stored as artifacts); with `warn` the text is left as it is. Either way the findings are
//! recorded with the parse commit, each with its place and a masked sample.

use docpipe_core::config::{ScanAction, ScanPolicy};
use docpipe_db::security::{NewFinding, NewScan};
use docpipe_parse::sensitive::{self, Finding, Kind};
use docpipe_parse::{ParsedDocument, SemanticBlock, VectorChunk};
use std::collections::{BTreeMap, HashMap};

/// High findings past which a scan's risk is critical.
const CRITICAL_AT: usize = 20;

/// Scans the parse's blocks, masks them and their chunks when the policy says so, and returns
/// the scan to record.
pub fn scan_parse(
    parsed: &mut ParsedDocument,
    chunks: &mut [VectorChunk],
    policy: &ScanPolicy,
) -> NewScan {
    let mut findings = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut masked_blocks: HashMap<String, Vec<char>> = HashMap::new();
    for (index, block) in parsed.semantic_blocks.iter_mut().enumerate() {
        let found = sensitive::scan(&block.text, &policy.rules);
        if found.is_empty() {
            continue;
        }
        for f in &found {
            *counts.entry(f.kind.as_str().to_string()).or_default() += 1;
            findings.push(NewFinding {
                finding_type: f.kind.as_str().to_string(),
                severity: severity(&f.kind).to_string(),
                location: location(block, index, f),
                masked_sample: f.masked.clone(),
                recommended_action: match policy.action {
                    ScanAction::Warn => "remove or mask the value before the document is shared",
                    ScanAction::Mask => "masked in the indexed text; the original still holds it",
                    ScanAction::Block => {
                        "withheld: a reviewer resolves the findings (POST /documents/{doc_id}/scan/resolve) before the document answers"
                    }
                }
                .to_string(),
            });
        }
        if policy.action == ScanAction::Mask {
            block.text = sensitive::mask(&block.text, &found);
            masked_blocks.insert(block.semantic_id.clone(), block.text.chars().collect());
        }
    }
    if policy.action == ScanAction::Mask {
        // The layouts (the text as extracted) and the headings are written as artifacts and rows
        // too: masked alike. Their findings repeat the blocks', so they are not recorded again.
        for layout in &mut parsed.layouts {
            layout.text = masked(&layout.text, policy);
        }
        for node in &mut parsed.structure_nodes {
            node.title = masked(&node.title, policy);
        }
        for block in &mut parsed.semantic_blocks {
            block.section_title = masked(&block.section_title, policy);
            for title in &mut block.section_path {
                *title = masked(title, policy);
            }
        }
    }
    // A chunk is a slice of its block (by character): cut again from the masked block, so that a
    // value split across two chunks is masked in both.
    for chunk in chunks.iter_mut() {
        if policy.action == ScanAction::Mask {
            chunk.section_title = masked(&chunk.section_title, policy);
            for title in &mut chunk.section_path {
                *title = masked(title, policy);
            }
        }
        if let Some(chars) = masked_blocks.get(&chunk.semantic_id) {
            let (start, end) = (chunk.char_start as usize, chunk.char_end as usize);
            if end <= chars.len() && start <= end {
                chunk.text = chars[start..end].iter().collect();
            }
        }
    }
    let highest = findings
        .iter()
        .map(|f| f.severity.as_str())
        .max_by_key(|s| rank(s))
        .unwrap_or("none");
    let high = findings.iter().filter(|f| f.severity == "high").count();
    let risk_level = if high >= CRITICAL_AT {
        "critical"
    } else {
        highest
    };
    NewScan {
        scanner_version: sensitive::SCANNER_VERSION.to_string(),
        policy: policy.action.as_str().to_string(),
        status: match (findings.is_empty(), policy.action) {
            (true, _) => "passed",
            (false, ScanAction::Block) => "blocked",
            (false, _) => "warned",
        }
        .to_string(),
        risk_level: risk_level.to_string(),
        findings_count: findings.len(),
        summary: serde_json::json!({
            "by_type": counts,
            "stored": findings.len().min(docpipe_db::security::MAX_FINDINGS_STORED),
            "masked": policy.action == ScanAction::Mask && !findings.is_empty(),
        }),
        findings,
    }
}

fn masked(text: &str, policy: &ScanPolicy) -> String {
    sensitive::mask(text, &sensitive::scan(text, &policy.rules))
}

fn severity(kind: &Kind) -> &'static str {
    match kind {
        Kind::IdCard | Kind::BankCard => "high",
        Kind::Mobile | Kind::Custom(_) => "medium",
        Kind::Email => "low",
    }
}

fn rank(severity: &str) -> u8 {
    match severity {
        "high" => 3,
        "medium" => 2,
        "low" => 1,
        _ => 0,
    }
}

/// Where a finding is: its block, the article (for an article block), the paragraph (1-based
/// line of the block) and the character in the block.
fn location(block: &SemanticBlock, index: usize, f: &Finding) -> serde_json::Value {
    let before = &block.text[..f.start];
    serde_json::json!({
        "block": block.semantic_id,
        "block_index": index,
        "block_type": block.block_type,
        "article": (block.block_type == "article").then_some(&block.section_title),
        "section_path": block.section_path,
        "paragraph": before.matches('\n').count() + 1,
        "char": before.chars().count(),
        "page": block.page_start,
    })
}
