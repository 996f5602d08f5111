//! The e5-small engine against the real model. Needs `scripts/fetch-e5.sh` and `--features e5`.

#[path = "../src/testdata.rs"]
mod testdata;

use std::path::PathBuf;
use std::sync::OnceLock;

use docpipe_embed::{cosine, e5, E5Embedder, EmbedError, Embedder};
use testdata::{PARAGRAPHS, PARAPHRASES};

fn model_path() -> PathBuf {
    match std::env::var_os("DOCPIPE_E5_MODEL") {
        Some(p) => PathBuf::from(p),
        None => e5::default_model_path().unwrap_or_else(|e| {
            panic!("the e5 model is missing ({e}): run `bash scripts/fetch-e5.sh` first")
        }),
    }
}

fn model() -> &'static E5Embedder {
    static MODEL: OnceLock<E5Embedder> = OnceLock::new();
    MODEL.get_or_init(|| {
        E5Embedder::load(&model_path(), None).unwrap_or_else(|e| {
            panic!("cannot load the e5 model ({e}): run `bash scripts/fetch-e5.sh` first")
        })
    })
}

fn paragraphs() -> Vec<String> {
    PARAGRAPHS.iter().map(|(_, p)| p.to_string()).collect()
}

fn top1(q: &[f32], docs: &[Vec<f32>]) -> usize {
    (0..docs.len())
        .max_by(|&a, &b| cosine(q, &docs[a]).total_cmp(&cosine(q, &docs[b])))
        .unwrap()
}

#[tokio::test]
async fn identity_and_normalisation() {
    let m = model();
    assert_eq!(m.model_id(), "multilingual-e5-small-q4");
    assert_eq!(m.dimension(), 384);
    let v = m.embed_passages(&paragraphs()).await.unwrap();
    assert_eq!(v.len(), PARAGRAPHS.len());
    for x in &v {
        assert_eq!(x.len(), 384);
        assert!((cosine(x, x) - 1.0).abs() < 1e-4);
    }
    let q = m.embed_query("养狗").await.unwrap();
    assert!((cosine(&q, &q) - 1.0).abs() < 1e-4);
}

#[tokio::test]
async fn batching_and_threads_do_not_change_vectors() {
    let m = model();
    let texts = paragraphs();
    let batch = m.embed_passages(&texts).await.unwrap();
    let single_thread = E5Embedder::load(m.path(), Some(1)).unwrap();
    for (i, t) in texts.iter().enumerate() {
        let one = single_thread
            .embed_passages(std::slice::from_ref(t))
            .await
            .unwrap();
        assert!(cosine(&one[0], &batch[i]) > 0.9999, "text {i}");
    }
}

#[tokio::test]
async fn query_and_passage_prefixes_differ() {
    let m = model();
    let text = "个人信息受法律保护";
    let q = m.embed_query(text).await.unwrap();
    let p = m.embed_passages(&[text.to_string()]).await.unwrap();
    let c = cosine(&q, &p[0]);
    assert!(c < 0.9999 && c > 0.8, "query vs passage cosine {c}");
    // The prefixes themselves are tokens, plus <s> and </s>.
    let (tq, tp) = (m.token_count(text, true), m.token_count(text, false));
    assert!(tq > 5 && tp > 5 && tq != tp, "{tq} {tp}");
}

#[tokio::test]
async fn sentences_retrieve_their_own_paragraph() {
    let m = model();
    let docs = m.embed_passages(&paragraphs()).await.unwrap();
    let (mut total, mut misses) = (0, Vec::new());
    for (i, (_, p)) in PARAGRAPHS.iter().enumerate() {
        for s in p
            .split_inclusive(['。', '；'])
            .filter(|s| s.chars().count() >= 12)
        {
            let q = m.embed_query(s).await.unwrap();
            let got = top1(&q, &docs);
            if got != i {
                misses.push(format!("{s} -> {}", PARAGRAPHS[got].0));
            }
            total += 1;
        }
    }
    assert!(total >= 25, "only {total} sentences checked");
    // Boilerplate that many laws share ("法律、法规另有规定的，从其规定。", "本规定由本市各级人民政府
    // 组织实施。") names no topic, so a semantic model may rank it anywhere (39/41 here, the two
    // misses being those two); a sentence with content must find its paragraph.
    eprintln!(
        "{}/{total} sentences top-1; misses: {misses:#?}",
        total - misses.len()
    );
    assert!(misses.len() <= 2, "misses: {misses:#?}");
}

#[tokio::test]
async fn paraphrased_questions_retrieve_the_right_paragraph() {
    let m = model();
    let docs = m.embed_passages(&paragraphs()).await.unwrap();
    let mut misses = Vec::new();
    for (question, want) in PARAPHRASES {
        let q = m.embed_query(question).await.unwrap();
        let got = top1(&q, &docs);
        if got != *want {
            misses.push(format!("{question} -> {}", PARAGRAPHS[got].0));
        }
    }
    // A semantic model must answer nearly all of them; the hashing embedder answers few.
    eprintln!(
        "{}/{} questions top-1; misses: {misses:#?}",
        PARAPHRASES.len() - misses.len(),
        PARAPHRASES.len()
    );
    assert!(misses.len() <= 1, "misses: {misses:#?}");
}

#[tokio::test]
async fn long_and_odd_texts() {
    let m = model();
    let long = PARAGRAPHS[1].1.repeat(12); // ~2 700 characters, several 512-token windows
    assert!(m.token_count(&long, false) > 1024);
    let odd = "a\0b".to_string();
    let v = m.embed_passages(&[long, odd]).await.unwrap();
    assert!(v.iter().all(|x| (cosine(x, x) - 1.0).abs() < 1e-4));
    let err = m
        .embed_passages(&["x".into(), "".into()])
        .await
        .unwrap_err();
    assert!(matches!(err, EmbedError::EmptyInput { index: 1 }));
    assert!(err.is_permanent());
}

#[test]
fn bad_model_files_are_permanent_and_say_what_to_do() {
    let dir = std::env::temp_dir().join(format!("docpipe-e5-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.bin");
    std::fs::write(&junk, b"definitely not a model").unwrap();
    for path in [dir.join("missing.bin"), junk] {
        let err = E5Embedder::load(&path, None).unwrap_err();
        assert!(err.is_permanent());
        assert!(matches!(err, EmbedError::ModelFile { .. }), "{err:?}");
        assert!(err.to_string().contains("fetch-e5.sh"), "{err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn from_vars_builds_e5() {
    let path = model_path();
    let e = docpipe_embed::from_vars(|k| match k {
        "DOCPIPE_EMBEDDER" => Some("e5-small".into()),
        "DOCPIPE_E5_MODEL" => Some(path.display().to_string()),
        _ => None,
    })
    .unwrap();
    assert_eq!(e.dimension(), 384);
    let err = docpipe_embed::from_vars(|k| match k {
        "DOCPIPE_EMBEDDER" => Some("e5-small".into()),
        "DOCPIPE_EMBED_DIM" => Some("1024".into()),
        _ => None,
    })
    .err()
    .unwrap();
    assert!(
        err.is_permanent() && err.to_string().contains("384"),
        "{err}"
    );
}

fn corpus_dir() -> PathBuf {
    std::env::var_os("DOCPIPE_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus"))
}

/// Up to `n` questions from the corpus's train.jsonl, and up to `n` ~200-character passages of
/// its laws; empty when the corpus is not there.
fn corpus_texts(n: usize) -> (Vec<String>, Vec<String>) {
    let dir = corpus_dir();
    let questions: Vec<String> = std::fs::read_to_string(dir.join("questions/train.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["question"].as_str().map(str::to_owned))
        .take(n)
        .collect();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("laws"))
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|x| x == "md"));
    files.sort();
    let mut passages = Vec::new();
    for f in files.iter().take(n) {
        let body: String = std::fs::read_to_string(f)
            .unwrap_or_default()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("<!--"))
            .collect();
        let chunk: String = body.chars().take(200).collect();
        if chunk.chars().count() >= 50 {
            passages.push(chunk);
        }
    }
    (questions, passages)
}

/// The resident weights and e5x.c's kernel must give upstream's vectors (only the float summation
/// order differs), and threads inside a call must not change them at all.
#[tokio::test]
async fn resident_weights_give_the_reference_vectors() {
    let m = model();
    assert!(m.resident_bytes() > 0, "this build has no resident weights");
    let reference = E5Embedder::load_reference(m.path(), Some(1)).unwrap();
    assert_eq!(reference.resident_bytes(), 0);
    let (mut questions, mut passages) = corpus_texts(40);
    if questions.len() + passages.len() < 50 {
        eprintln!(
            "corpus not at {} (DOCPIPE_CORPUS): comparing the fixtures instead",
            corpus_dir().display()
        );
        questions = PARAPHRASES.iter().map(|(q, _)| q.to_string()).collect();
        questions.extend(
            PARAGRAPHS
                .iter()
                .flat_map(|(_, p)| p.split_inclusive('。'))
                .map(str::to_owned),
        );
        passages = paragraphs();
    }
    assert!(questions.len() + passages.len() >= 50);

    let mut worst = 1.0f32;
    // Threads inside a call split the output rows, and AVX512-VNNI sums the same integers as
    // AVX2: neither may change a single bit.
    let one_thread = E5Embedder::load_with(m.path(), Some(1), e5::Kernel::Avx2).unwrap();
    let two_threads = E5Embedder::load(m.path(), Some(2)).unwrap();
    for q in &questions {
        let want = reference.embed_query(q).await.unwrap();
        let got = two_threads.embed_query(q).await.unwrap();
        assert_eq!(got, one_thread.embed_query(q).await.unwrap(), "{q}");
        let c = cosine(&want, &got);
        assert!(c >= 0.9999, "query {q:?}: cosine {c}");
        worst = worst.min(c);
    }
    let want = reference.embed_passages(&passages).await.unwrap();
    let got = m.embed_passages(&passages).await.unwrap();
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        let c = cosine(w, g);
        assert!(c >= 0.9999, "passage {i} {:?}: cosine {c}", passages[i]);
        worst = worst.min(c);
    }
    eprintln!(
        "{} queries, {} passages: lowest cosine resident vs reference {worst:.6}",
        questions.len(),
        passages.len()
    );
}

/// The built-in query adapter is on unless `DOCPIPE_E5_QUERY_ADAPTER` says otherwise; it moves
/// queries only (a passage is the model's own vector either way), keeps them unit length, and a
/// file that is not an adapter is refused at start, naming the variable.
#[tokio::test]
async fn the_query_adapter_maps_queries_only_and_is_chosen_by_its_variable() {
    let path = model_path().display().to_string();
    let build = |adapter: Option<&str>| {
        docpipe_embed::from_vars(|k| match k {
            "DOCPIPE_EMBEDDER" => Some("e5-small".into()),
            "DOCPIPE_E5_MODEL" => Some(path.clone()),
            "DOCPIPE_E5_QUERY_ADAPTER" => adapter.map(str::to_string),
            _ => None,
        })
    };
    let adapted = build(None).unwrap();
    let plain = build(Some("none")).unwrap();
    assert_eq!(adapted.query_adapter(), Some(e5::BUILTIN_QUERY_ADAPTER));
    assert_eq!(plain.query_adapter(), None);

    let question = "公司不给交社保怎么办";
    let (q_adapted, q_plain) = (
        adapted.embed_query(question).await.unwrap(),
        plain.embed_query(question).await.unwrap(),
    );
    let norm: f32 = q_adapted.iter().map(|x| x * x).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "adapted query norm {norm}");
    let moved = cosine(&q_adapted, &q_plain);
    assert!(
        moved < 0.999,
        "the adapter did not move the query: cosine {moved}"
    );
    assert_eq!(
        q_adapted,
        e5::builtin_query_adapter().apply(&q_plain).unwrap()
    );
    let passages = vec![
        "用人单位应当自用工之日起三十日内为其职工申请办理社会保险登记。".to_string(),
        "湿地保护应当坚持保护优先、严格管理、系统治理、科学修复、合理利用的原则。".to_string(),
    ];
    let vectors = adapted.embed_passages(&passages).await.unwrap();
    assert_eq!(vectors, plain.embed_passages(&passages).await.unwrap());
    assert!(
        cosine(&q_adapted, &vectors[0]) > cosine(&q_adapted, &vectors[1]),
        "the adapted query must still prefer the social-insurance article to the wetland one"
    );

    let dir = std::env::temp_dir().join(format!("docpipe-adapter-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let junk = dir.join("junk.f32");
    std::fs::write(&junk, b"not a matrix").unwrap();
    for bad in [junk, dir.join("missing.f32")] {
        let err = build(Some(&bad.display().to_string())).err().unwrap();
        assert!(err.is_permanent(), "{err}");
        assert!(
            err.to_string().contains("DOCPIPE_E5_QUERY_ADAPTER"),
            "{err}"
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}
