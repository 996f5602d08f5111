//! What every fuzz target checks beyond "does not crash": the invariants the pipeline relies on
//! when it stores what a decoder or parser returned.
//!
//! A panic anywhere is a finding, even one the parser would catch: `docpipe_parse::parse` turns a
//! panicking parser library into `ParseError::ParserPanic`, so a target treats that result as a
//! crash too (libFuzzer's panic hook aborts first in any case).

use docpipe_core::events::{self, Notification};
use docpipe_core::model::JobMessage;
use docpipe_parse::{ChunkConfig, Hint, Limits, ParseError, ParsedDocument};
use serde_json::Value;

/// Limits for fuzzing: the defaults, except a smaller inflation budget so that a mutated archive
/// that inflates a lot costs milliseconds, not seconds (the cap's own logic is the same).
pub fn fuzz_limits() -> Limits {
    Limits {
        max_decompressed_bytes: 16 * 1024 * 1024,
        ..Limits::default()
    }
}

/// Parses `bytes` as a file called `file_name` with `content_type`, checks the result's
/// invariants, then chunks it with two configurations and checks the chunks.
pub fn parse_and_chunk(bytes: &[u8], file_name: &str, content_type: &str) {
    let hint = Hint::new(file_name, content_type);
    match docpipe_parse::parse(bytes, &hint, &fuzz_limits()) {
        Ok(doc) => {
            check_document(&doc);
            for cfg in [
                ChunkConfig::default(),
                ChunkConfig {
                    max_tokens: 16,
                    overlap_tokens: 4,
                },
            ] {
                check_chunks(&doc, &cfg);
            }
        }
        Err(ParseError::ParserPanic(why)) => panic!("a parser panicked: {why}"),
        Err(e) => {
            assert!(!e.kind().is_empty());
            assert!(e.to_string().len() >= 10, "terse error: {e}");
        }
    }
}

fn check_document(doc: &ParsedDocument) {
    assert!(doc.page_count >= 1);
    assert!(!doc.layouts.is_empty(), "Ok with no layout blocks");
    for (i, l) in doc.layouts.iter().enumerate() {
        assert_eq!(l.order as usize, i);
        assert!(!l.text.trim().is_empty(), "an empty layout block");
        assert!(l.page >= 1);
    }
    for (i, n) in doc.structure_nodes.iter().enumerate() {
        assert_eq!(n.idx as usize, i, "structure node idx");
        if let Some(p) = n.parent_idx {
            assert!(
                (p as usize) < i,
                "parent {p} of node {i} is not an earlier node"
            );
        }
    }
    // Every artifact serialises (the parse stage writes them as JSON).
    serde_json::to_vec(doc).expect("a parsed document serialises");
}

fn check_chunks(doc: &ParsedDocument, cfg: &ChunkConfig) {
    let chunks = docpipe_parse::chunk(doc, cfg);
    let blocks: std::collections::HashMap<&str, Vec<char>> = doc
        .semantic_blocks
        .iter()
        .map(|b| (b.semantic_id.as_str(), b.text.chars().collect()))
        .collect();
    let mut keys: Vec<&str> = Vec::with_capacity(chunks.len());
    for c in &chunks {
        assert!(
            c.token_estimate <= cfg.max_tokens,
            "a chunk of {} tokens over {}",
            c.token_estimate,
            cfg.max_tokens
        );
        assert_eq!(c.token_estimate, docpipe_parse::estimate_tokens(&c.text));
        let block = blocks
            .get(c.semantic_id.as_str())
            .expect("a chunk names an existing block");
        assert!(c.char_start < c.char_end && c.char_end as usize <= block.len());
        let slice: String = block[c.char_start as usize..c.char_end as usize]
            .iter()
            .collect();
        assert_eq!(slice, c.text, "a chunk is exactly a slice of its block");
        keys.push(&c.chunk_key);
    }
    keys.sort_unstable();
    let n = keys.len();
    keys.dedup();
    assert_eq!(keys.len(), n, "duplicate chunk keys");
}

/// Decodes a notification body and checks what the store stage relies on.
pub fn check_notification_str(body: &str) {
    match events::decode_notification_str(body) {
        Ok(n) => check_notification(&n),
        Err(e) => assert!(!e.0.is_empty()),
    }
}

pub fn check_notification(n: &Notification) {
    match n {
        Notification::Created(objects) => {
            assert!(!objects.is_empty(), "Created with no object");
            for o in objects {
                assert!(!o.key.is_empty(), "an empty key");
                if let Some(raw) = &o.raw_key {
                    assert_ne!(raw, &o.key, "raw_key is only kept when it differs");
                }
                // The id the store stage derives is always well formed, whatever the key.
                let id = docpipe_core::ids::derived_doc_id(&o.bucket, &o.key);
                assert!(docpipe_core::ids::is_valid_doc_id(&id));
                // A key that looks like an API upload key names a well-formed id, or none.
                if let Some(candidate) = docpipe_core::ids::doc_id_in_upload_key(&o.key) {
                    assert!(docpipe_core::ids::is_valid_doc_id(candidate));
                }
                let _ = docpipe_core::ids::file_name_of(&o.key);
            }
        }
        Notification::Test => {}
        Notification::Ignored(why) => assert!(!why.is_empty()),
    }
}

/// Decodes a job message; an accepted one is version 1, names an id that is safe in a URL, an
/// object key and a query (a docpipe id or an imported legacy id), and round-trips.
pub fn check_job_message(body: &str) {
    match JobMessage::decode(body) {
        Ok(job) => {
            assert_eq!(job.v, docpipe_core::model::JOB_MESSAGE_VERSION);
            assert!(docpipe_core::ids::is_addressable_doc_id(&job.doc_id));
            assert!(!job.doc_id.contains(['/', '\\', '\0']) && !job.doc_id.contains(".."));
            assert_eq!(JobMessage::decode(&job.encode()).as_ref(), Ok(&job));
        }
        Err(e) => assert!(!e.is_empty()),
    }
}

/// The store and DLQ functions' path for an SQS batch, without the database: recognise the batch,
/// deserialise it as Lambda's `SqsEvent`, then decode every body as the handlers do.
pub fn check_sqs_event(value: &Value) {
    if !events::is_sqs_batch(value) {
        // A direct invocation: the notification path.
        match events::decode_notification(value) {
            Ok(n) => check_notification(&n),
            Err(e) => assert!(!e.0.is_empty()),
        }
        return;
    }
    let Ok(batch) =
        serde_json::from_value::<aws_lambda_events::event::sqs::SqsEvent>(value.clone())
    else {
        return; // refused as "malformed SQS event", a permanent error
    };
    for message in &batch.records {
        let body = message.body.as_deref().unwrap_or_default();
        // Store: the body must be JSON, then a notification.
        if let Ok(v) = serde_json::from_str::<Value>(body) {
            match events::decode_notification(&v) {
                Ok(n) => check_notification(&n),
                Err(e) => assert!(!e.0.is_empty()),
            }
        }
        // Parse, index and DLQ: a job message first, then (DLQ) a notification.
        check_job_message(body);
        let _ = message
            .attributes
            .get("ApproximateReceiveCount")
            .and_then(|n| n.parse::<u32>().ok());
    }
}
