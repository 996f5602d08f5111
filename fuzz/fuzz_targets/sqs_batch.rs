//! The SQS batch path of the store and DLQ functions: a Lambda event (JSON) that may or may not be
//! an SQS batch, whose bodies may be notifications or job messages. The first byte chooses how the
//! rest is used: as the whole event, or as the body of one message in a well-formed batch (so
//! that mutations reach the body decoders without first having to keep the batch intact).
#![no_main]
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let event: Value = if mode % 2 == 0 {
        match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) => return,
        }
    } else {
        json!({"Records": [
            {"messageId": "m-0", "eventSource": "aws:sqs", "body": text,
             "attributes": {"ApproximateReceiveCount": "1"}},
            {"messageId": "m-1", "eventSource": "aws:sqs",
             "body": "{\"v\":1,\"doc_id\":\"doc_0123456789abcdef0123456789abcdef\",\"run_id\":1}"}
        ]})
    };
    docpipe_fuzz::check_sqs_event(&event);
});
