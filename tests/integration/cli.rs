//! The `docpipe` CLI's API commands against the real stack: the API router served on 127.0.0.1
//! (as the dev runner serves it) over a test database, bucket, queues and Milvus collection; the
//! commands parsed and run as the binary runs them (`docpipe_cli::parse` + `docpipe_cli::run`),
//! their output captured. Uploads go through the presigned URL to moto, whose bucket notification
//! lands in the test's store queue; the test pumps that queue into the store handler, as the dev
//! runner would, and runs parse and index.

use docpipe_cli::client::ClientError;
use docpipe_core::model::DocStatus;
use helpers::{corpus_dir, sha256_hex, sqs_batch, Pipeline};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

struct Cli {
    p: Pipeline,
    base: String,
    dir: PathBuf,
}

impl Cli {
    async fn new() -> Cli {
        Cli::serving(None).await
    }

    /// With `keys`, the API is served in the dev runner's signed mode (`DOCPIPE_DEV_SIGV4_KEYS`).
    async fn serving(keys: Option<String>) -> Cli {
        let p = Pipeline::new(Pipeline::hash()).await;
        let mut config = helpers::api_config(&p);
        config.dev_sigv4_keys = keys.map(docpipe_core::config::Secret::new);
        let base = helpers::serve_api_with(&p, config).await;
        let dir = std::env::temp_dir().join(helpers::unique("docpipe-cli-"));
        std::fs::create_dir_all(&dir).unwrap();
        Cli { p, base, dir }
    }

    /// Runs `docpipe ARGS… --api-url BASE`; returns what it printed, or the line it ended with.
    async fn run(&self, args: &[&str]) -> Result<String, (String, anyhow::Error)> {
        self.run_at(&self.base, args).await
    }

    async fn run_at(&self, base: &str, args: &[&str]) -> Result<String, (String, anyhow::Error)> {
        let mut argv = vec!["docpipe"];
        argv.extend_from_slice(args);
        argv.extend_from_slice(&["--api-url", base]);
        let cmd = docpipe_cli::parse(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let mut out = Vec::new();
        let result = docpipe_cli::run(cmd, &mut out).await;
        let text = String::from_utf8(out).unwrap();
        match result {
            Ok(()) => Ok(text),
            Err(e) => Err((docpipe_cli::error_line(&e), e)),
        }
    }

    async fn ok(&self, args: &[&str]) -> String {
        match self.run(args).await {
            Ok(text) => text,
            Err((line, _)) => panic!("docpipe {args:?}: {line}"),
        }
    }

    async fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("--json");
        let text = self.ok(&args).await;
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
    }

    /// The error line and the API's status of a command that must fail.
    async fn fails(&self, args: &[&str]) -> (String, Option<u16>, Option<String>) {
        match self.run(args).await {
            Ok(text) => panic!("docpipe {args:?} succeeded: {text}"),
            Err((line, e)) => {
                let c = e.downcast_ref::<ClientError>();
                (
                    line,
                    c.and_then(|c| c.status()),
                    c.and_then(|c| c.kind().map(String::from)),
                )
            }
        }
    }

    fn file(&self, name: &str, body: &[u8]) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, body).unwrap();
        path
    }

    /// Pumps the store queue into the store handler until `n` notifications were handled.
    async fn pump_store(&self, n: usize) {
        let mut handled = 0;
        for _ in 0..20 {
            let bodies = self.p.aws.drain(&self.p.aws.store_queue, n).await;
            if !bodies.is_empty() {
                let report = docpipe_pipeline::handlers::store::handle_sqs(
                    &self.p.store,
                    sqs_batch(&bodies),
                )
                .await;
                assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
                handled += bodies.len();
            }
            if handled >= n {
                return;
            }
        }
        panic!("{handled} of {n} store notifications arrived");
    }

    async fn status(&self, doc_id: &str) -> DocStatus {
        self.p.doc(doc_id).await.expect("the document").status
    }
}

impl Drop for Cli {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn law() -> (String, Vec<u8>) {
    let path = corpus_dir().join("laws-formats/md/law-15978a0e.md");
    ("湿地保护法 (2021).md".into(), std::fs::read(path).unwrap())
}

/// The doc ids `upload` printed, in order.
fn uploaded_ids(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|id| docpipe_core::ids::is_valid_doc_id(id))
        .map(String::from)
        .collect()
}

#[tokio::test]
async fn upload_ls_status_search_tree_summary_retry_rm() {
    let cli = Cli::new().await;
    let (name, body) = law();
    let path = cli.file(&name, &body);
    let path_s = path.to_str().unwrap();

    // upload: registered through the API, bytes PUT to the presigned URL with their type.
    let text = cli
        .ok(&[
            "upload",
            path_s,
            "--regulation-type",
            "法律",
            "--version",
            "2021",
            "--tags",
            "demo,wetland",
        ])
        .await;
    let ids = uploaded_ids(&text);
    assert_eq!(ids.len(), 1, "{text}");
    let doc_id = &ids[0];
    assert!(text.contains("uploaded") && text.contains(path_s), "{text}");
    assert_eq!(cli.status(doc_id).await, DocStatus::Pending);
    let key = format!("uploads/default/{doc_id}/{name}");
    let stored = cli.p.aws.get(&key).await;
    assert_eq!(stored, body, "the presigned PUT stored the bytes");

    // The bucket notification reaches the store stage through the store queue.
    cli.pump_store(1).await;
    let doc = cli.p.doc(doc_id).await.unwrap();
    assert_eq!(doc.status, DocStatus::Stored);
    assert_eq!(doc.content_sha256, sha256_hex(&body));
    assert_eq!(doc.content_type, "text/markdown");
    cli.p.drive(doc_id).await;
    assert_eq!(cli.status(doc_id).await, DocStatus::Indexed);

    ls_shows_it(&cli, doc_id, &name).await;
    let chunks = status_shows_its_run(&cli, doc_id).await;
    search_finds_it(&cli, doc_id, &name).await;
    tree_nests(&cli, doc_id).await;
    summary_counts(&cli, doc_id, chunks).await;
    skip_retry_and_rm(&cli, doc_id, path_s).await;
    cli.p.cleanup().await;
}

/// ls: the API's page shape with --json, a table without.
async fn ls_shows_it(cli: &Cli, doc_id: &str, name: &str) {
    let page = cli.json(&["ls"]).await;
    assert!(page["next_cursor"].is_null(), "{page}");
    let docs = page["documents"].as_array().unwrap();
    assert_eq!(docs.len(), 1);
    assert_eq!(docs[0]["doc_id"], doc_id);
    assert_eq!(docs[0]["status"], "indexed");
    assert_eq!(docs[0]["doc_name"], name);
    assert_eq!(docs[0]["regulation_type"], "法律");
    assert_eq!(docs[0]["tags"], serde_json::json!(["demo", "wetland"]));
    let table = cli.ok(&["ls", "--status", "indexed"]).await;
    assert!(table.starts_with("DOC_ID"), "{table}");
    let row = table.lines().find(|l| l.starts_with(doc_id)).unwrap();
    assert!(row.contains("indexed") && row.contains(name), "{row}");
    let none = cli.json(&["ls", "--status", "failed"]).await;
    assert_eq!(none["documents"], serde_json::json!([]));
    assert_eq!(
        cli.json(&["ls", "--limit", "1"]).await["documents"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// Status: the document and its current run, with per-stage times; its chunk count.
async fn status_shows_its_run(cli: &Cli, doc_id: &str) -> i64 {
    let detail = cli.json(&["status", doc_id]).await;
    assert_eq!(detail["doc_id"], doc_id);
    let run = &detail["current_run"];
    assert_eq!(run["run_status"], "succeeded");
    for stage in ["stored", "parsed", "indexed", "finished"] {
        assert!(run["stages"][stage]["at"].is_string(), "{stage}: {run}");
    }
    let chunks = run["counts"]["chunks"].as_i64().unwrap();
    assert!(chunks > 10, "{run}");
    let text = cli.ok(&["status", doc_id]).await;
    assert!(
        text.contains(&format!("indexed · {chunks} chunks")),
        "{text}"
    );
    for stage in ["stored", "parsed", "indexed", "finished"] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(stage)),
            "{stage}: {text}"
        );
    }
    assert!(
        text.contains("run       ") && text.contains("(upload) succeeded"),
        "{text}"
    );
    chunks
}

/// Search: validated hits; the table shows rank, score, name, section, pages, an excerpt.
async fn search_finds_it(cli: &Cli, doc_id: &str, name: &str) {
    let hits = cli
        .json(&[
            "search",
            "湿地保护规划",
            "--top-k",
            "3",
            "--tags",
            "wetland",
        ])
        .await;
    let list = hits["hits"].as_array().unwrap();
    assert_eq!(list.len(), 3, "{hits}");
    assert!(list.iter().all(|h| h["doc_id"] == doc_id));
    for mode in ["dense", "keyword", "hybrid"] {
        let r = cli
            .json(&["search", "湿地保护规划", "--mode", mode, "--top-k", "3"])
            .await;
        assert_eq!(r["mode"], mode, "{r}");
        assert!(
            r["hits"].as_array().is_some_and(|h| !h.is_empty()),
            "{mode}: {r}"
        );
    }
    let text = cli.ok(&["search", "湿地保护规划", "--top-k", "2"]).await;
    let lines: Vec<&str> = text.lines().collect();
    // Each hit: its line, its law's version (the law is one version of its work), its passage.
    assert_eq!(lines.len(), 6, "{text}");
    assert!(
        lines[1].trim_start().starts_with("version ") && lines[1].contains("in force"),
        "{text}"
    );
    assert!(
        lines[0].starts_with(" 1  0.") && lines[0].contains(name),
        "{text}"
    );
    assert!(lines[0].contains("p.1"), "{text}");
    assert!(
        lines[0].contains('›') || lines[0].contains("湿地"),
        "{text}"
    );
    assert!(lines[3].starts_with(" 2  "), "{text}");
    let filtered = cli
        .json(&["search", "湿地", "--regulation-type", "行政法规"])
        .await;
    assert_eq!(
        filtered["hits"],
        serde_json::json!([]),
        "a filter that excludes it"
    );
    assert_eq!(
        cli.ok(&[
            "search",
            "湿地",
            "--doc-id",
            &docpipe_core::ids::random_doc_id()
        ])
        .await
        .trim(),
        "no hits"
    );
}

/// Tree: the heading tree, children indented under their parents.
async fn tree_nests(cli: &Cli, doc_id: &str) {
    let tree = cli.ok(&["tree", doc_id]).await;
    let first = tree.lines().next().unwrap();
    assert!(
        !first.starts_with(' ') && first.contains("湿地保护法"),
        "{tree}"
    );
    assert!(
        tree.lines()
            .any(|l| l.starts_with("  ") && l.contains("第一章")),
        "{tree}"
    );
    assert!(
        tree.lines()
            .any(|l| l.starts_with("    ") && l.trim_start().starts_with("第一条")),
        "{tree}"
    );
    let shallow = cli.ok(&["tree", doc_id, "--depth", "2"]).await;
    assert!(!shallow.lines().any(|l| l.starts_with("    ")), "{shallow}");
    let structure = cli.json(&["tree", doc_id]).await;
    assert!(structure["node_count"].as_i64().unwrap() > 10);
}

/// Summary: counts, chunks and one run per stage, whose median is that run's own time in the
/// stage, as its timestamps give it.
async fn summary_counts(cli: &Cli, doc_id: &str, chunks: i64) {
    let summary = cli.json(&["summary"]).await;
    assert_eq!(summary["documents"], 1, "{summary}");
    assert_eq!(summary["by_status"]["indexed"], 1);
    assert_eq!(summary["chunks"], chunks);
    let run = cli.json(&["status", doc_id]).await["current_run"].clone();
    let at = |v: &serde_json::Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("{run}"))).unwrap()
    };
    let ms =
        |from: &serde_json::Value, to: &serde_json::Value| (at(to) - at(from)).num_milliseconds();
    let stages = &run["stages"];
    let expected = [
        ("store", ms(&run["started_at"], &stages["stored"]["at"])),
        (
            "parse",
            ms(&stages["stored"]["at"], &stages["parsed"]["at"]),
        ),
        (
            "index",
            ms(&stages["parsed"]["at"], &stages["indexed"]["at"]),
        ),
        ("total", ms(&run["started_at"], &stages["indexed"]["at"])),
    ];
    for (stage, ms) in expected {
        assert_eq!(summary["stages"][stage]["runs"], 1, "{stage}: {summary}");
        assert_eq!(
            summary["stages"][stage]["median_ms"], ms,
            "{stage}: one run's median is its own time: {summary} {run}"
        );
    }
    assert!(
        expected
            .iter()
            .all(|(stage, ms)| *stage == "store" || *ms > 0),
        "parsing and indexing take time: {expected:?}"
    );
    let text = cli.ok(&["summary"]).await;
    assert!(text.starts_with("documents  1: 1 indexed"), "{text}");
    assert!(text.contains("index   indexed − parsed"), "{text}");
}

/// Upload --skip-existing uploads nothing twice; retry opens a new run (a second one in flight is a 409); rm deletes (then a 404).
async fn skip_retry_and_rm(cli: &Cli, doc_id: &str, path_s: &str) {
    // upload --skip-existing: the same content is not uploaded twice.
    let again = cli.ok(&["upload", "--skip-existing", path_s]).await;
    assert!(again.starts_with(&format!("{doc_id}  present")), "{again}");
    assert_eq!(
        cli.json(&["ls"]).await["documents"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // retry: a new run; a second retry while it is in flight is a 409 with its detail.
    let text = cli.ok(&["retry", doc_id]).await;
    assert!(text.starts_with(&format!("{doc_id}: run ")), "{text}");
    assert_eq!(cli.status(doc_id).await, DocStatus::Stored);
    let (line, status, kind) = cli.fails(&["retry", doc_id]).await;
    assert_eq!(status, Some(409));
    assert_eq!(kind.as_deref(), Some("run-in-flight"));
    assert!(line.starts_with("error: Conflict: "), "{line}");
    assert!(line.contains("in flight"), "{line}");
    cli.p.drive(doc_id).await;
    assert_eq!(cli.status(doc_id).await, DocStatus::Indexed);

    // rm: gone, and then a 404 with the API's detail.
    let text = cli.ok(&["rm", doc_id]).await;
    assert_eq!(text.trim(), format!("{doc_id}: deleted"));
    assert!(cli.p.doc(doc_id).await.is_none());
    assert!(cli
        .p
        .aws
        .keys(&format!("uploads/default/{doc_id}/"))
        .await
        .is_empty());
    let (line, status, _) = cli.fails(&["status", doc_id]).await;
    assert_eq!(status, Some(404));
    assert_eq!(
        line,
        format!("error: Not Found: document {doc_id} does not exist")
    );
}

#[tokio::test]
async fn errors_are_one_line_with_the_problem_title_and_detail() {
    let cli = Cli::new().await;
    let (line, status, kind) = cli.fails(&["status", "bad!id"]).await;
    assert_eq!(status, Some(400));
    assert_eq!(kind.as_deref(), Some("invalid-parameter"));
    assert!(line.starts_with("error: Bad Request: "), "{line}");
    assert!(line.contains("doc_id"), "{line}");
    for cmd in ["tree", "retry", "rm", "watch"] {
        let (line, status, _) = cli.fails(&[cmd, "bad!id"]).await;
        assert_eq!(status, Some(400), "{cmd}: {line}");
        assert!(line.starts_with("error: Bad Request: "), "{cmd}: {line}");
    }
    let missing = docpipe_core::ids::random_doc_id();
    let (line, status, _) = cli.fails(&["retry", &missing]).await;
    assert_eq!(status, Some(404), "{line}");
    let (line, _, kind) = cli.fails(&["search", "x", "--top-k", "500"]).await;
    assert_eq!(kind.as_deref(), Some("validation-failed"), "{line}");
    assert!(line.starts_with("error: Unprocessable Entity: "), "{line}");
    let (line, _, _) = cli.fails(&["ls", "--status", "done"]).await;
    assert!(line.starts_with("error: Bad Request: "), "{line}");

    // An upload that cannot be read fails that file and says so; nothing is registered.
    let (line, _, _) = cli
        .fails(&["upload", cli.dir.join("absent.md").to_str().unwrap()])
        .await;
    assert_eq!(line, "error: 1 of 1 files were not uploaded");
    assert!(cli.json(&["ls"]).await["documents"]
        .as_array()
        .unwrap()
        .is_empty());

    // Nothing listening: said plainly.
    let cmd = docpipe_cli::parse(["docpipe", "ls", "--api-url", "http://127.0.0.1:9"]).unwrap();
    let e = docpipe_cli::run(cmd, &mut Vec::new()).await.unwrap_err();
    let line = docpipe_cli::error_line(&e);
    assert!(
        line.starts_with("error: cannot reach the API at http://127.0.0.1:9"),
        "{line}"
    );
    cli.p.cleanup().await;
}

#[tokio::test]
async fn intake_failures_are_listed_by_the_api_and_the_cli_newest_first() {
    let cli = Cli::new().await;
    assert!(cli
        .ok(&["intake-failures"])
        .await
        .contains("0 intake failures"));
    for key in ["intake/first\u{0}.md", "intake/second\u{0}.md"] {
        docpipe_pipeline::handlers::store::handle_notification(
            &cli.p.store,
            &helpers::s3_put_event(&cli.p.aws.bucket, key),
        )
        .await
        .expect_err("a key with a NUL is refused");
    }
    let page = cli.json(&["intake-failures"]).await;
    let names: Vec<&str> = page["intake_failures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["object_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["intake/second.md", "intake/first.md"]);
    assert!(page["next_cursor"].is_null());
    let text = cli.ok(&["intake-failures", "--limit", "1"]).await;
    assert!(
        text.contains(&format!("s3://{}/intake/second.md", cli.p.aws.bucket)),
        "{text}"
    );
    assert!(text.contains("NUL"), "the reason: {text}");
    assert!(text.contains("1 intake failures"), "{text}");
    let (line, status, _) = cli.fails(&["intake-failures", "--limit", "0"]).await;
    assert!(line.contains("--limit"), "{line}");
    assert_eq!(status, None, "refused before any request");
    cli.p.cleanup().await;
}

/// Runs `watch` in the background while the test moves documents along, stage by stage.
#[tokio::test]
async fn watch_prints_each_state_change_until_every_document_is_terminal() {
    let cli = Arc::new(Cli::new().await);
    let (name, body) = law();
    let good = cli.file(&name, &body);
    let bad = cli.file(
        "broken.pdf",
        &std::fs::read(corpus_dir().join("malformed/random64k.pdf")).unwrap(),
    );
    let text = cli
        .ok(&["upload", good.to_str().unwrap(), bad.to_str().unwrap()])
        .await;
    let ids = uploaded_ids(&text);
    assert_eq!(ids.len(), 2, "{text}");

    // Without ids: every document not yet terminal (both are pending).
    let watcher = {
        let cli = cli.clone();
        tokio::spawn(async move {
            cli.run(&[
                "watch",
                "--lines",
                "--interval-ms",
                "50",
                "--timeout",
                "120",
            ])
            .await
            .map_err(|(line, _)| line)
        })
    };
    drive_both(&cli, &ids).await;
    let out = tokio::time::timeout(Duration::from_secs(60), watcher)
        .await
        .expect("watch ends once both are terminal")
        .unwrap()
        .unwrap();
    let (good_id, bad_id) = (&ids[0], &ids[1]);
    assert_watched(&cli, &out, good_id, bad_id, &name).await;
    terminal_documents_need_no_waiting(&cli, good_id, bad_id).await;
    cli.p.cleanup().await;
}

/// Both documents through store, parse and (the good one) index, with pauses the watcher sees.
async fn drive_both(cli: &Cli, ids: &[String]) {
    let pause = || tokio::time::sleep(Duration::from_millis(600));
    pause().await;
    cli.pump_store(2).await;
    pause().await;
    for id in ids {
        let doc = cli.p.doc(id).await.unwrap();
        let job = docpipe_core::model::JobMessage::new(id, doc.current_run_id.unwrap());
        let _ = docpipe_pipeline::stages::parse::parse_job(&cli.p.parse.deps(), &job).await;
    }
    pause().await;
    for id in ids {
        let doc = cli.p.doc(id).await.unwrap();
        if doc.status == DocStatus::Parsed {
            let job = docpipe_core::model::JobMessage::new(id, doc.current_run_id.unwrap());
            docpipe_pipeline::stages::index::index_job(&cli.p.index.deps(), &job)
                .await
                .unwrap();
        }
    }
}

/// The watcher's lines: the good document's steps in order, the bad one's failure with its
/// reason, and the closing count.
async fn assert_watched(cli: &Cli, out: &str, good_id: &str, bad_id: &str, name: &str) {
    let lines_of = |id: &str| -> Vec<&str> { out.lines().filter(|l| l.contains(id)).collect() };
    let good_lines = lines_of(good_id);
    // Each line says the state it moved to; consecutive lines of one state (queued, then running
    // in it) are one step. The steps come in order, and a run only said to be queued or running.
    let states: Vec<&str> = good_lines
        .iter()
        .map(|l| {
            let after = l.rsplit_once(" → ").map_or(*l, |(_, a)| a);
            let after = after.rsplit_once("  ").map_or(after, |(_, a)| a);
            after.split(" · ").next().unwrap_or("")
        })
        .collect();
    let mut steps = states.clone();
    steps.dedup();
    assert_eq!(steps, ["pending", "stored", "parsed", "indexed"], "{out}");
    assert!(
        good_lines[0].contains("pending · waiting for the upload"),
        "{out}"
    );
    assert!(good_lines.last().unwrap().contains("→ indexed · "), "{out}");
    for line in &good_lines {
        assert!(line.contains(name), "{line}");
        // "indexing" or "parsing" only for a run a worker holds (its attempt is shown).
        for verb in ["· indexing", "· parsing"] {
            assert!(!line.contains(verb) || line.contains("attempt"), "{line}");
        }
    }
    let bad_lines = lines_of(bad_id);
    let last = bad_lines.last().unwrap();
    assert!(last.contains(" → failed: "), "{out}");
    let reason = cli.p.doc(bad_id).await.unwrap().error_message;
    assert!(!reason.is_empty() && last.contains(reason.split_whitespace().next().unwrap()));
    let summary = out.lines().last().unwrap();
    assert!(
        summary.starts_with("2 documents in ") && summary.ends_with(": 1 indexed, 1 failed"),
        "{out}"
    );
}

/// With ids of terminal documents there is nothing to wait for; JSON lines are the API's; with no
/// ids and nothing in flight it says so and ends.
async fn terminal_documents_need_no_waiting(cli: &Cli, good_id: &str, bad_id: &str) {
    let json = cli
        .ok(&["watch", good_id, bad_id, "--json", "--interval-ms", "50"])
        .await;
    let docs: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(docs.len(), 2, "{json}");
    assert_eq!(docs[0]["status"], "indexed");
    assert_eq!(docs[1]["status"], "failed");
    assert!(
        docs[0]["current_run"].is_object(),
        "GET /documents/{{id}}'s shape"
    );
    // Without ids and nothing in flight: says so and ends.
    assert_eq!(
        cli.ok(&["watch"]).await.trim(),
        "nothing to watch: every document is indexed or failed"
    );
}

/// The CLI against an API that wants SigV4, as a deployed stack with `AuthMode=iam` does: the dev
/// runner's signed mode checks every request's signature with the SDK's signer. The CLI signs with
/// credentials from the default AWS chain (here the environment's keys); the presigned upload,
/// search's signed body, and the audit's caller all go through. A wrong secret, an unsigned
/// request and a tampered one are each a 403 problem.
#[tokio::test]
async fn the_cli_signs_with_sigv4_from_the_default_chain_and_a_wrong_key_is_refused() {
    let key_id = std::env::var("AWS_ACCESS_KEY_ID").expect("the stack's environment has AWS keys");
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap();
    let cli = Cli::serving(Some(format!("{key_id}:{secret}"))).await;
    let (name, body) = law();
    let path = cli.file(&name, &body);
    let path_s = path.to_str().unwrap();

    let text = cli.ok(&["upload", path_s, "--auth", "sigv4"]).await;
    let ids = uploaded_ids(&text);
    assert_eq!(ids.len(), 1, "{text}");
    let doc_id = &ids[0];
    assert_eq!(
        cli.p
            .aws
            .get(&format!("uploads/default/{doc_id}/{name}"))
            .await,
        body,
        "the presigned PUT (never re-signed) stored the bytes"
    );
    cli.pump_store(1).await;
    cli.p.drive(doc_id).await;
    let status = cli.json(&["status", doc_id, "--auth", "sigv4"]).await;
    assert_eq!(status["status"], "indexed", "{status}");
    let hits = cli
        .json(&["search", "湿地", "--auth", "sigv4", "--top-k", "3"])
        .await;
    assert!(
        hits["hits"].as_array().is_some_and(|h| !h.is_empty()),
        "a signed POST with a body is answered: {hits}"
    );
    let audit = docpipe_db::audit::for_target(&**cli.p.db.client().await, "document", doc_id)
        .await
        .unwrap();
    assert_eq!(
        (audit[0].actor_type.as_str(), audit[0].actor_id.as_str()),
        ("iam", format!("local-key/{key_id}").as_str()),
        "the caller is the key that signed"
    );

    // Unsigned: refused, and nothing reaches a handler.
    let (line, status, kind) = cli.fails(&["ls", "--auth", "none"]).await;
    assert_eq!(
        (status, kind.as_deref()),
        (Some(403), Some("signature-invalid")),
        "{line}"
    );
    assert!(line.contains("not signed"), "{line}");
    // The same key id with another secret: the API that knows the right secret refuses it.
    let wrong = Cli::serving(Some(format!("{key_id}:not-{secret}"))).await;
    let (line, status, kind) = wrong.fails(&["ls", "--auth", "sigv4"]).await;
    assert_eq!(
        (status, kind.as_deref()),
        (Some(403), Some("signature-invalid")),
        "{line}"
    );
    assert!(line.contains("signature does not match"), "{line}");
    let (line, _, _) = wrong.fails(&["upload", path_s, "--auth", "sigv4"]).await;
    assert!(line.contains("1 of 1 files were not uploaded"), "{line}");
    let listed = docpipe_db::documents::all_lines(&**wrong.p.db.client().await)
        .await
        .unwrap();
    assert_eq!(listed.len(), 0, "a refused registration stores nothing");
    // The health check stays open, as the template leaves it.
    let health = reqwest::get(format!("{}/healthz", cli.base)).await.unwrap();
    assert_ne!(health.status().as_u16(), 403);
    wrong.p.cleanup().await;
    cli.p.cleanup().await;
}

/// `--tenant` names the caller's tenant to the dev runner: an upload goes under that tenant's
/// folder, is listed for it and not for another; `docpipe tenant` shows the tenant and, for a
/// reviewer, chooses its scan policy; a malformed tenant is refused before any request.
#[tokio::test]
async fn the_tenant_flag_keeps_uploads_and_listings_to_that_tenant() {
    let cli = Cli::new().await;
    let file = cli.dir.join("acme.md");
    std::fs::write(
        &file,
        "# 星河数据安全管理办法\n\n第一条 为了保护数据，制定本办法。\n",
    )
    .unwrap();
    let uploaded = cli
        .ok(&["upload", file.to_str().unwrap(), "--tenant", "acme"])
        .await;
    let doc_id = uploaded
        .split_whitespace()
        .find(|w| w.starts_with("doc_"))
        .unwrap_or_else(|| panic!("{uploaded}"))
        .to_string();
    let listed = cli.json(&["ls", "--tenant", "acme"]).await;
    assert!(listed.to_string().contains(&doc_id), "{listed}");
    let other = cli.json(&["ls", "--tenant", "beta"]).await;
    assert!(!other.to_string().contains(&doc_id), "{other}");
    let (line, status, _) = cli.fails(&["status", &doc_id, "--tenant", "beta"]).await;
    assert_eq!(status, Some(404), "{line}");
    let doc = cli.p.doc(&doc_id).await.unwrap();
    assert!(
        doc.object_name.starts_with("uploads/acme/"),
        "{}",
        doc.object_name
    );

    let shown = cli.ok(&["tenant", "--tenant", "acme"]).await;
    assert!(shown.starts_with("tenant acme"), "{shown}");
    assert!(shown.contains("warn (the deployment's)"), "{shown}");
    let chosen = cli
        .ok(&["tenant", "--tenant", "acme", "--scan-policy", "mask"])
        .await;
    assert!(chosen.contains("mask (the tenant's)"), "{chosen}");
    let (line, _, _) = cli.fails(&["ls", "--tenant", "Acme!"]).await;
    assert!(line.contains("is no tenant id"), "{line}");
    cli.p.cleanup().await;
}
