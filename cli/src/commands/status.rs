//! `docpipe status`: a document, its current run with per-stage times, and why it failed.

use super::{or_dash, print_json, IdArgs};
use crate::model::{Doc, Run};
use crate::text::{human_bytes, local_time, seconds};
use std::io::Write;

pub async fn status(args: IdArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let v = args.conn.client()?.document(&args.doc_id).await?;
    if args.conn.json {
        return print_json(out, &v);
    }
    let doc = Doc::from_value(&v);
    write_document(&doc, out)?;
    match &doc.current_run {
        None => writeln!(out, "  run       none yet")?,
        Some(run) => write_run(run, out)?,
    }
    if doc.status == "failed"
        && !doc.error_message.is_empty()
        && doc
            .current_run
            .as_ref()
            .is_none_or(|r| r.error_message.is_empty())
    {
        writeln!(out, "  failure   {}", doc.error_message)?;
    }
    Ok(())
}

/// The document's own lines: state, what it is doing now, its file, labels, digest and age.
fn write_document(doc: &Doc, out: &mut dyn Write) -> anyhow::Result<()> {
    writeln!(out, "{}  {}", doc.doc_id, doc.name())?;
    let mut state = doc.status.clone();
    if doc.status == "indexed" {
        state.push_str(&format!(" · {} chunks", doc.chunk_count));
    }
    if doc.deleting {
        state.push_str(" · being deleted");
    }
    writeln!(out, "  status    {state}")?;
    if let Some(p) = doc.progress.as_ref().filter(|_| !doc.is_terminal()) {
        // Queued or running, and for how long: "queued for index, 14 min".
        writeln!(out, "  now       {}", p.summary)?;
    }
    writeln!(
        out,
        "  file      {} · {} · {}",
        doc.file_name,
        if doc.content_type.is_empty() {
            "?"
        } else {
            &doc.content_type
        },
        human_bytes(doc.size_bytes)
    )?;
    let mut labels = Vec::new();
    if !doc.regulation_type.is_empty() {
        labels.push(format!("type {}", doc.regulation_type));
    }
    if !doc.version.is_empty() {
        labels.push(format!("version {}", doc.version));
    }
    if !doc.tags.is_empty() {
        labels.push(format!("tags {}", doc.tags.join(", ")));
    }
    if !labels.is_empty() {
        writeln!(out, "  labels    {}", labels.join(" · "))?;
    }
    if !doc.content_sha256.is_empty() {
        writeln!(out, "  sha256    {}", doc.content_sha256)?;
    }
    if let Some(t) = doc.created_at {
        writeln!(out, "  created   {}", local_time(t))?;
    }
    Ok(())
}

/// The current run: its trigger and state, each stage's time, its counts, engines and failure.
fn write_run(run: &Run, out: &mut dyn Write) -> anyhow::Result<()> {
    writeln!(
        out,
        "  run       {} ({}) {}, started {}",
        run.run_id,
        run.trigger_type,
        run.run_status,
        run.started_at.map(local_time).unwrap_or_default()
    )?;
    let stages = [
        ("stored", &run.stages.stored),
        ("parsed", &run.stages.parsed),
        ("indexed", &run.stages.indexed),
        ("finished", &run.stages.finished),
    ];
    for (name, t) in stages {
        // Each stage's time is since the one before; `finished`'s is since the start.
        let note = if name == "finished" { " in all" } else { "" };
        match t.at {
            Some(at) => writeln!(
                out,
                "    {name:<9} {}  {:>8}{note}",
                at.with_timezone(&chrono::Local).format("%H:%M:%S%.3f"),
                t.duration_ms
                    .map(|ms| seconds(ms as f64))
                    .unwrap_or_default()
            )?,
            None => writeln!(out, "    {name:<9} -")?,
        }
    }
    let c = &run.counts;
    writeln!(
        out,
        "  counts    {} layouts · {} headings · {} blocks · {} chunks",
        c.layouts, c.structure_nodes, c.semantic_blocks, c.chunks
    )?;
    if !run.embedding_model.is_empty() || !run.parser_backend.is_empty() {
        writeln!(
            out,
            "  engines   parser {} · embedder {}",
            or_dash(&run.parser_backend),
            or_dash(&run.embedding_model)
        )?;
    }
    if !run.failure_stage.is_empty() || !run.error_message.is_empty() {
        writeln!(
            out,
            "  failure   {}: {}",
            or_dash(&run.failure_stage),
            run.error_message
        )?;
    }
    Ok(())
}
