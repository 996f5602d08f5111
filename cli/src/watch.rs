//! `docpipe watch`: live progress of documents through pending → stored → parsed → indexed,
//! until every watched document is terminal (indexed or failed).
//!
//! On a terminal it draws one progress bar per document (indicatif), as many as fit, with an
//! overall bar below them; a finished bar makes room for a waiting document by scrolling up as a
//! line. Elsewhere (a pipe, a log, CI) it prints one line per state change, or with `--json` the
//! API's document JSON, one object per line.
//!
//! It polls `GET /documents?updated_since=…` (one request per interval, whatever the number of
//! documents), a few seconds behind the newest `updated_at` seen, since a change's `updated_at` is
//! its transaction's start and may commit later. When nothing changed for a while it asks for each
//! unfinished document by id, so a document deleted meanwhile does not keep it waiting.

use crate::client::Conn;
use crate::client::{ClientError, ListFilter};
use crate::model::{is_terminal, step, Doc};
use crate::text::truncate_middle;
use anyhow::bail;
use chrono::{DateTime, SecondsFormat, Utc};
use clap::Args;
use futures::StreamExt;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Documents to watch. Without any: every document not yet indexed or failed, and those
    /// that arrive while watching.
    pub ids: Vec<String>,
    /// How often to ask the API, in milliseconds.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(50..))]
    pub interval_ms: u64,
    /// Give up after this many seconds (exit status 1).
    #[arg(long)]
    pub timeout: Option<u64>,
    /// One line per state change, even on a terminal.
    #[arg(long)]
    pub lines: bool,
    #[command(flatten)]
    pub conn: Conn,
}

/// How far behind the newest `updated_at` seen the next poll starts.
const MARGIN: chrono::Duration = chrono::Duration::seconds(5);
/// After this long without a change, unfinished documents are asked for one by one.
const STALL: Duration = Duration::from_secs(10);
/// How long polls may keep failing before the watch gives up (a restarting dev runner or
/// database answers nothing, or 503, for a while).
const OUTAGE: Duration = Duration::from_secs(120);
/// How many open documents have their details (their run's progress) read per poll.
const DETAILS_PER_POLL: usize = 16;

struct Entry {
    doc: Doc,
    raw: Value,
}

pub async fn watch(args: WatchArgs, out: &mut (dyn Write + Send)) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut watched = Watched::start(&args).await?;
    let json = args.conn.json;
    if watched.order.is_empty() {
        if !json {
            writeln!(out, "nothing to watch: every document is indexed or failed")?;
        }
        return Ok(());
    }
    let bars = !json && !args.lines && std::io::stdout().is_terminal();
    let mut ui = if bars {
        Ui::Bars(Bars::new(watched.order.len()))
    } else {
        Ui::Lines { json, started }
    };
    for id in &watched.order {
        ui.add(&watched.docs[id], out)?;
    }
    ui.progress(&watched.order, &watched.docs);

    let interval = Duration::from_millis(args.interval_ms);
    let mut last_change = Instant::now();
    let mut last_check = Instant::now();
    let mut failing_since: Option<Instant> = None;
    while !watched.all_terminal() {
        if let Some(t) = args
            .timeout
            .filter(|t| started.elapsed() > Duration::from_secs(*t))
        {
            let left = watched.open().len();
            ui.finish(&watched.order, &watched.docs, out, started)?;
            bail!("gave up after {t}s: {left} documents are not indexed or failed yet");
        }
        sleep_ticking(&mut ui, interval).await;
        let listed = match watched.poll_listing(&mut ui, out).await {
            Ok(changed) => {
                if failing_since.take().is_some() {
                    ui.note("the API answers again", out)?;
                }
                changed
            }
            Err(Polled::Unanswered(e)) => {
                if failing_since.is_none() {
                    ui.note(&format!("warning: {e} (still trying)"), out)?;
                }
                let since = *failing_since.get_or_insert_with(Instant::now);
                if since.elapsed() > OUTAGE {
                    ui.finish(&watched.order, &watched.docs, out, started)?;
                    return Err(e.into());
                }
                continue;
            }
            Err(Polled::Output(e)) => return Err(e),
        };
        let detailed = watched.poll_details(&mut ui, out).await?;
        if listed || detailed {
            last_change = Instant::now();
        } else if last_change.elapsed() > STALL && last_check.elapsed() > STALL {
            last_check = Instant::now();
            watched.ask_each_open(&mut ui, out).await?;
        }
        ui.progress(&watched.order, &watched.docs);
    }
    ui.finish(&watched.order, &watched.docs, out, started)
}

/// Sleeps one interval, keeping the spinners turning.
async fn sleep_ticking(ui: &mut Ui, interval: Duration) {
    let wake = Instant::now() + interval;
    while Instant::now() < wake {
        ui.tick();
        tokio::time::sleep((wake - Instant::now()).min(Duration::from_millis(100))).await;
    }
}

/// Why a listing poll brought nothing: the API did not answer (the watch tries again), or the
/// output could not be written (the watch ends).
enum Polled {
    Unanswered(ClientError),
    Output(anyhow::Error),
}

/// The documents being watched, in the order they are shown, and where the polls stand.
struct Watched {
    client: crate::client::Client,
    /// Without ids, documents that arrive while watching are watched too.
    follow_new: bool,
    order: Vec<String>,
    docs: HashMap<String, Entry>,
    /// The newest `updated_at` the API has shown: the next poll starts a margin before it.
    newest: Option<DateTime<Utc>>,
    /// Without ids, a terminal document that appears in a poll is watched only if it was
    /// created after the watch began (it went all the way between two polls).
    new_after: Option<DateTime<Utc>>,
    /// Where the next poll of details starts among the open documents.
    detail_turn: usize,
}

impl Watched {
    /// The documents to watch: the ids given, or every document not yet terminal.
    async fn start(args: &WatchArgs) -> anyhow::Result<Watched> {
        let mut watched = Watched {
            client: args.conn.client()?,
            follow_new: args.ids.is_empty(),
            order: Vec::new(),
            docs: HashMap::new(),
            newest: None,
            new_after: None,
            detail_turn: 0,
        };
        if watched.follow_new {
            for v in watched
                .client
                .list(&ListFilter::default(), None)
                .await?
                .documents
            {
                let doc = Doc::from_value(&v);
                watched.newest = watched.newest.max(doc.updated_at);
                if !doc.is_terminal() {
                    watched.insert(doc, v);
                }
            }
            watched.new_after = watched.newest;
            return Ok(watched);
        }
        let mut ids = args.ids.clone();
        let mut seen = std::collections::HashSet::new();
        ids.retain(|id| seen.insert(id.clone()));
        let client = watched.client.clone();
        let fetched: Vec<Result<Value, ClientError>> = futures::stream::iter(ids.clone())
            .map(|id| {
                let client = client.clone();
                async move { client.document(&id).await }
            })
            .buffered(8)
            .collect()
            .await;
        for (id, r) in ids.iter().zip(fetched) {
            let v = r.map_err(|e| anyhow::Error::new(e).context(id.clone()))?;
            let doc = Doc::from_value(&v);
            watched.newest = watched.newest.max(doc.updated_at);
            watched.insert(doc, v);
        }
        Ok(watched)
    }

    fn insert(&mut self, doc: Doc, raw: Value) {
        self.order.push(doc.doc_id.clone());
        self.docs.insert(doc.doc_id.clone(), Entry { doc, raw });
    }

    fn all_terminal(&self) -> bool {
        self.order.iter().all(|id| self.docs[id].doc.is_terminal())
    }

    /// The documents not yet indexed or failed, in order.
    fn open(&self) -> Vec<String> {
        self.order
            .iter()
            .filter(|id| !self.docs[*id].doc.is_terminal())
            .cloned()
            .collect()
    }

    /// What changed since a margin before the newest change seen: one request, whatever the
    /// number of documents. True when something shown changed.
    async fn poll_listing(
        &mut self,
        ui: &mut Ui,
        out: &mut (dyn Write + Send),
    ) -> Result<bool, Polled> {
        let filter = ListFilter {
            updated_since: self
                .newest
                .map(|t| (t - MARGIN).to_rfc3339_opts(SecondsFormat::Micros, true)),
            ..Default::default()
        };
        let page = self
            .client
            .list(&filter, None)
            .await
            .map_err(Polled::Unanswered)?;
        let mut changed = false;
        for v in page.documents {
            let doc = Doc::from_value(&v);
            self.newest = self.newest.max(doc.updated_at);
            if self.docs.contains_key(&doc.doc_id) {
                changed |= update(&mut self.docs, ui, doc, v, out).map_err(Polled::Output)?;
            } else if self.follow_new
                && (!doc.is_terminal() || self.new_after.is_none_or(|t| doc.created_at > Some(t)))
            {
                self.insert(doc, v);
                let last = self.order.last().expect("just pushed");
                ui.add(&self.docs[last], out).map_err(Polled::Output)?;
                changed = true;
            }
        }
        Ok(changed)
    }

    /// A listing says where each document is, not where its run is (queued, or running, and
    /// which attempt): the details of a few open documents per poll, in turn, say that.
    async fn poll_details(
        &mut self,
        ui: &mut Ui,
        out: &mut (dyn Write + Send),
    ) -> anyhow::Result<bool> {
        let open = self.open();
        if open.is_empty() {
            return Ok(false);
        }
        let start = self.detail_turn % open.len();
        let turn: Vec<String> = open
            .iter()
            .cycle()
            .skip(start)
            .take(open.len().min(DETAILS_PER_POLL))
            .cloned()
            .collect();
        self.detail_turn = start + turn.len();
        let mut changed = false;
        for (_, answer) in self.ask(turn).await {
            if let Ok(v) = answer {
                let doc = Doc::from_value(&v);
                if self.docs.contains_key(&doc.doc_id) {
                    changed |= update(&mut self.docs, ui, doc, v, out)?;
                }
            }
        }
        Ok(changed)
    }

    /// After a while without a change, every open document is asked for by id, so a document
    /// deleted meanwhile (404) does not keep the watch waiting.
    async fn ask_each_open(
        &mut self,
        ui: &mut Ui,
        out: &mut (dyn Write + Send),
    ) -> anyhow::Result<()> {
        for (id, answer) in self.ask(self.open()).await {
            match answer {
                Ok(v) => {
                    let doc = Doc::from_value(&v);
                    update(&mut self.docs, ui, doc, v, out)?;
                }
                Err(ClientError::Problem { status: 404, .. }) => {
                    let mut doc = self.docs[&id].doc.clone();
                    doc.status = "deleted".into();
                    let raw = self.docs[&id].raw.clone();
                    update(&mut self.docs, ui, doc, raw, out)?;
                }
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// The API's answer for each id, eight requests at a time.
    async fn ask(&self, ids: Vec<String>) -> Vec<(String, Result<Value, ClientError>)> {
        let client = self.client.clone();
        futures::stream::iter(ids)
            .map(|id| {
                let client = client.clone();
                async move {
                    let r = client.document(&id).await;
                    (id, r)
                }
            })
            .buffer_unordered(8)
            .collect()
            .await
    }
}

/// Records a document's new state; tells the UI when what it shows changed.
fn update(
    docs: &mut HashMap<String, Entry>,
    ui: &mut Ui,
    doc: Doc,
    raw: Value,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    let entry = docs.get_mut(&doc.doc_id).expect("a watched document");
    // A late answer never takes a document back (the margin re-reads what was seen).
    if entry.doc.is_terminal()
        && entry.doc.status != "deleted"
        && doc.updated_at < entry.doc.updated_at
    {
        return Ok(false);
    }
    // A listing carries no progress: keep the last one seen until a detail brings a new one.
    let mut doc = doc;
    if doc.progress.is_none() && doc.status == entry.doc.status {
        doc.progress = entry.doc.progress.clone();
    }
    let repaint = entry.doc.progress != doc.progress;
    let same = entry.doc.status == doc.status
        && entry.doc.progress_key() == doc.progress_key()
        && entry.doc.error_message == doc.error_message
        && entry.doc.chunk_count == doc.chunk_count
        && entry.doc.current_run_id == doc.current_run_id;
    let was = std::mem::replace(&mut entry.doc, doc);
    entry.raw = raw;
    if same {
        if repaint {
            // The same state, a fresher clock ("lease renewed 2 s ago"): the bar shows it, the
            // lines do not repeat it.
            ui.refresh(entry);
        }
        return Ok(false);
    }
    ui.change(&was.status, entry, out)?;
    Ok(true)
}

/// What a bar's message says for a state.
fn message(doc: &Doc) -> String {
    if let Some(p) = doc.progress.as_ref().filter(|_| !doc.is_terminal()) {
        if !p.summary.is_empty() {
            return format!("{} · {}", doc.status, p.summary);
        }
    }
    match doc.status.as_str() {
        "pending" => "pending · waiting for the upload".into(),
        // Without the run's progress it is not known whether a worker has it yet.
        "stored" => "stored · waiting to be parsed".into(),
        "parsed" => "parsed · waiting to be indexed".into(),
        "indexed" => format!("indexed · {} chunks", doc.chunk_count),
        "failed" if doc.error_message.is_empty() => "failed".into(),
        "failed" => format!("failed: {}", crate::text::excerpt(&doc.error_message)),
        other => other.to_string(),
    }
}

enum Ui {
    Bars(Bars),
    Lines { json: bool, started: Instant },
}

impl Ui {
    fn add(&mut self, e: &Entry, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            Ui::Bars(b) => b.add(&e.doc),
            Ui::Lines { json: true, .. } => writeln!(out, "{}", serde_json::to_string(&e.raw)?)?,
            Ui::Lines { started, .. } => writeln!(
                out,
                "[{:>7.1}s] {}  {}  {}",
                started.elapsed().as_secs_f64(),
                e.doc.doc_id,
                e.doc.name(),
                message(&e.doc)
            )?,
        }
        out.flush()?;
        Ok(())
    }

    fn change(&mut self, was: &str, e: &Entry, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            Ui::Bars(b) => b.change(&e.doc),
            Ui::Lines { json: true, .. } => writeln!(out, "{}", serde_json::to_string(&e.raw)?)?,
            Ui::Lines { started, .. } => writeln!(
                out,
                "[{:>7.1}s] {}  {}  {was} → {}",
                started.elapsed().as_secs_f64(),
                e.doc.doc_id,
                e.doc.name(),
                message(&e.doc)
            )?,
        }
        out.flush()?;
        Ok(())
    }

    fn refresh(&mut self, e: &Entry) {
        if let Ui::Bars(b) = self {
            b.change(&e.doc);
        }
    }

    fn note(&mut self, text: &str, out: &mut dyn Write) -> anyhow::Result<()> {
        match self {
            Ui::Bars(b) => b.mp.println(text)?,
            _ => eprintln!("{text}"),
        }
        out.flush()?;
        Ok(())
    }

    fn tick(&self) {
        if let Ui::Bars(b) = self {
            b.tick();
        }
    }

    fn progress(&mut self, order: &[String], docs: &HashMap<String, Entry>) {
        if let Ui::Bars(b) = self {
            b.rebalance(docs);
            b.overall(order, docs);
        }
    }

    fn finish(
        &mut self,
        order: &[String],
        docs: &HashMap<String, Entry>,
        out: &mut dyn Write,
        started: Instant,
    ) -> anyhow::Result<()> {
        let count = |s: &str| order.iter().filter(|id| docs[*id].doc.status == s).count();
        let (indexed, failed, deleted) = (count("indexed"), count("failed"), count("deleted"));
        let mut line = format!(
            "{} documents in {:.1}s: {indexed} indexed, {failed} failed",
            order.len(),
            started.elapsed().as_secs_f64()
        );
        if deleted > 0 {
            line.push_str(&format!(", {deleted} deleted"));
        }
        let open = order.len() - indexed - failed - deleted;
        if open > 0 {
            line.push_str(&format!(", {open} still in progress"));
        }
        match self {
            Ui::Bars(b) => {
                b.overall(order, docs);
                b.overall.finish();
                // Whatever never got a bar is told as a line, so the screen accounts for all.
                while let Some(id) = b.waiting.pop_front() {
                    b.mp.println(final_line(&docs[&id].doc))?;
                }
                // The bars leave the cursor at the end of their last line.
                writeln!(out)?;
                writeln!(out, "{line}")?;
            }
            Ui::Lines { json: true, .. } => {}
            Ui::Lines { .. } => writeln!(out, "{line}")?,
        }
        out.flush()?;
        Ok(())
    }
}

fn final_line(doc: &Doc) -> String {
    let mark = match doc.status.as_str() {
        "indexed" => "✓",
        "failed" => "✗",
        _ => "·",
    };
    format!(
        "{mark} {}  {}",
        truncate_middle(doc.name(), 40),
        message(doc)
    )
}

struct Bars {
    mp: MultiProgress,
    overall: ProgressBar,
    bars: HashMap<String, ProgressBar>,
    /// The documents that have a bar, oldest first.
    shown: VecDeque<String>,
    /// The documents waiting for a bar, in the order they came.
    waiting: VecDeque<String>,
    capacity: usize,
    /// Documents added so far.
    added: usize,
    /// What every watched document's name starts with (one folder's prefix): left off the labels.
    shared_prefix: String,
}

const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

fn style(finished: &str, bar: &str) -> ProgressStyle {
    let mut ticks: Vec<&str> = SPINNER.to_vec();
    ticks.push(finished);
    ProgressStyle::with_template(&format!(
        "{{spinner}} {{prefix:30}} [{{bar:16.{bar}}}] {{wide_msg}}"
    ))
    .expect("a valid template")
    .tick_strings(&ticks)
    .progress_chars("=> ")
}

fn style_of(doc: &Doc) -> ProgressStyle {
    match doc.status.as_str() {
        "indexed" => style("✓", "green"),
        "failed" => style("✗", "red"),
        "deleted" => style("·", "white"),
        _ => style("·", "cyan/blue"),
    }
}

/// Shows a document's state on its bar: position, colour, message; finished when terminal.
fn paint(bar: &ProgressBar, doc: &Doc) {
    bar.set_style(style_of(doc));
    if doc.status != "failed" && doc.status != "deleted" {
        bar.set_position(step(&doc.status));
    }
    if is_terminal(&doc.status) {
        bar.finish_with_message(message(doc));
    } else {
        bar.set_message(message(doc));
    }
}

impl Bars {
    fn new(expected: usize) -> Bars {
        let mp = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let rows = console::Term::stdout().size().0 as usize;
        // The documents known at the start are counted at once, not drawn one by one.
        let overall = mp.add(ProgressBar::new(expected as u64));
        overall.set_style(
            ProgressStyle::with_template(
                "{elapsed_precise:.dim} [{bar:40.green/white}] {pos}/{len} done · {wide_msg}",
            )
            .expect("a valid template")
            .progress_chars("█▉▊▋▌▍▎▏ "),
        );
        Bars {
            mp,
            overall,
            bars: HashMap::new(),
            shown: VecDeque::new(),
            waiting: VecDeque::new(),
            capacity: rows.saturating_sub(3).max(3),
            added: 0,
            shared_prefix: String::new(),
        }
    }

    fn add(&mut self, doc: &Doc) {
        self.waiting.push_back(doc.doc_id.clone());
        self.added += 1;
        if self.added as u64 > self.overall.length().unwrap_or(0) {
            self.overall.inc_length(1);
        }
    }

    fn show(&mut self, doc: &Doc) {
        // Styled (and drawing nowhere) before it is added, so that its first frame is right.
        let bar = ProgressBar::with_draw_target(Some(3), ProgressDrawTarget::hidden())
            .with_style(style_of(doc))
            .with_prefix(crate::text::label(doc.name(), &self.shared_prefix, 30))
            .with_message(message(doc));
        let bar = self.mp.insert_before(&self.overall, bar);
        paint(&bar, doc);
        self.bars.insert(doc.doc_id.clone(), bar);
        self.shown.push_back(doc.doc_id.clone());
    }

    fn change(&mut self, doc: &Doc) {
        if let Some(bar) = self.bars.get(&doc.doc_id) {
            paint(bar, doc);
        }
    }

    /// Gives waiting documents a bar: in free rows, or in those of the oldest finished bars.
    fn rebalance(&mut self, docs: &HashMap<String, Entry>) {
        if !self.waiting.is_empty() {
            self.shared_prefix = crate::text::common_prefix(docs.values().map(|e| e.doc.name()));
        }
        while let Some(id) = self.waiting.front().cloned() {
            let doc = &docs[&id].doc;
            if self.bars.len() >= self.capacity {
                let Some(pos) = self.shown.iter().position(|s| docs[s].doc.is_terminal()) else {
                    // Every row is busy. A waiting document that is already done is told as
                    // a line now rather than wait for a row.
                    let done: Vec<String> = self
                        .waiting
                        .iter()
                        .filter(|w| docs[*w].doc.is_terminal())
                        .cloned()
                        .collect();
                    for w in done {
                        let _ = self.mp.println(final_line(&docs[&w].doc));
                        self.waiting.retain(|x| *x != w);
                    }
                    return;
                };
                let old = self.shown.remove(pos).expect("a shown document");
                if let Some(bar) = self.bars.remove(&old) {
                    self.mp.remove(&bar);
                }
                let _ = self.mp.println(final_line(&docs[&old].doc));
            }
            self.waiting.pop_front();
            self.show(doc);
        }
    }

    fn overall(&self, order: &[String], docs: &HashMap<String, Entry>) {
        let mut counts: Vec<(&str, usize)> = [
            "indexed", "failed", "deleted", "parsed", "stored", "pending",
        ]
        .into_iter()
        .map(|s| {
            (
                s,
                order.iter().filter(|id| docs[*id].doc.status == s).count(),
            )
        })
        .collect();
        counts.retain(|(_, n)| *n > 0);
        let done = order
            .iter()
            .filter(|id| docs[*id].doc.is_terminal())
            .count();
        self.overall.set_position(done as u64);
        let mut msg: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
        if !self.waiting.is_empty() {
            msg.push(format!("{} without a bar yet", self.waiting.len()));
        }
        self.overall.set_message(msg.join(" · "));
    }

    fn tick(&self) {
        for bar in self.bars.values() {
            if !bar.is_finished() {
                bar.tick();
            }
        }
        self.overall.tick();
    }
}
