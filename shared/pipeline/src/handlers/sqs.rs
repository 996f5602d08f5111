//! SQS batches with partial batch responses: a message that failed transiently is reported back to
//! be redelivered; one that succeeded or failed its run is acknowledged, so one bad message never
//! fails its batch.

use crate::adapters::JobQueue;
use crate::error::StageError;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent, SqsMessage};
use docpipe_core::clock::Clock;
use docpipe_core::metrics;
use docpipe_core::model::{JobMessage, Stage};
use docpipe_db::{run_events, Db};
use std::future::Future;

/// How one message ended.
#[derive(Debug)]
pub enum Handled<O> {
    /// The handler's outcome (which may be a failed run: the stage recorded it).
    Done(O),
    /// It failed transiently and goes back to its queue to be redelivered.
    Retry(StageError),
    /// It was acknowledged without an outcome: it failed with no run to fail, or failed
    /// transiently with no `messageId` to return it by.
    Dropped(StageError),
}

impl<O> Handled<O> {
    /// The outcome, when the message had one.
    #[cfg(any(test, feature = "testing"))]
    pub fn done(&self) -> Option<&O> {
        match self {
            Handled::Done(outcome) => Some(outcome),
            Handled::Retry(_) | Handled::Dropped(_) => None,
        }
    }

    /// Why it was dropped, when it was.
    #[cfg(any(test, feature = "testing"))]
    pub fn dropped(&self) -> Option<&StageError> {
        match self {
            Handled::Dropped(e) => Some(e),
            Handled::Done(_) | Handled::Retry(_) => None,
        }
    }
}

/// What happened to each message: the partial batch response for Lambda, a line per message for
/// the dev runner's progress, and the typed ends for tests.
#[derive(Debug)]
pub struct BatchReport<O = ()> {
    pub response: SqsBatchResponse,
    /// One human-readable line per message: what it did, or why it will be retried.
    pub lines: Vec<String>,
    /// One per message, in order.
    pub outcomes: Vec<Handled<O>>,
}

impl<O> Default for BatchReport<O> {
    fn default() -> Self {
        BatchReport {
            response: SqsBatchResponse::default(),
            lines: Vec::new(),
            outcomes: Vec::new(),
        }
    }
}

impl<O> BatchReport<O> {
    pub fn failed_ids(&self) -> Vec<&str> {
        self.response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect()
    }

    /// Each message's outcome, `None` for one without.
    #[cfg(any(test, feature = "testing"))]
    pub fn done(&self) -> Vec<Option<&O>> {
        self.outcomes.iter().map(Handled::done).collect()
    }

    /// The report without its typed outcomes, for a caller that only forwards it.
    pub fn untyped(self) -> BatchReport {
        BatchReport {
            response: self.response,
            lines: self.lines,
            outcomes: Vec::new(),
        }
    }
}

/// Runs `handle` on each message in order. `Ok(outcome)` and errors that fail the run acknowledge
/// the message; transient errors report it as a batch item failure.
pub(crate) async fn for_each_message<O, F, Fut>(event: SqsEvent, mut handle: F) -> BatchReport<O>
where
    O: std::fmt::Display,
    F: FnMut(SqsMessage) -> Fut,
    Fut: Future<Output = Result<O, StageError>>,
{
    let mut report = BatchReport::default();
    for message in event.records {
        let id = message.message_id.clone().unwrap_or_default();
        let handled = match handle(message).await {
            Ok(outcome) => {
                report.lines.push(outcome.to_string());
                Handled::Done(outcome)
            }
            Err(err) if err.is_retryable() && id.is_empty() => {
                // An empty item identifier makes Lambda fail the whole batch, redelivering the
                // messages that succeeded. SQS gives every message an id, so a record without
                // one did not come from a queue and has nowhere to go back to.
                let text = docpipe_core::error::chain(&err);
                tracing::error!(error = %text, class = "transient", "a record without a messageId failed: it cannot be returned to its queue");
                report
                    .lines
                    .push(format!("failed, not retried (no messageId): {text}"));
                Handled::Dropped(err)
            }
            Err(err) if err.is_retryable() => {
                let text = docpipe_core::error::chain(&err);
                tracing::warn!(message_id = %id, error = %text, class = "transient", "message will be redelivered");
                report.lines.push(format!("retry later: {text}"));
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = id;
                report.response.batch_item_failures.push(failure);
                Handled::Retry(err)
            }
            Err(err) => {
                let text = docpipe_core::error::chain(&err);
                tracing::error!(message_id = %id, error = %text, class = "permanent", "message dropped");
                report.lines.push(format!("dropped: {text}"));
                Handled::Dropped(err)
            }
        };
        report.outcomes.push(handled);
    }
    report
}

/// What a stage made of one job, as the lifter counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// The stage did its work (metrics: completed, with its duration).
    Completed,
    /// The input was bad and the run failed (metrics: failed, permanent).
    Failed,
    /// Nothing to do: a stale or duplicate message.
    Neither,
}

/// A stage's typed outcome for one job: its progress line (`Display`) and how it ends.
pub(crate) trait JobOutcome: std::fmt::Display {
    fn ending(&self) -> Ending;
    /// Counts of its own beyond completed and failed (the index stage's chunks).
    fn record_metrics(&self) {}
    /// Whether the job made progress and goes on in another delivery (the index stage's work
    /// that does not fit one invocation). The lifter sends the job again as a fresh message and
    /// acknowledges this one: SQS counts every receive of a message towards its dead-letter
    /// queue, and progress must not spend that budget.
    fn continues(&self) -> bool {
        false
    }
}

/// A stage that takes job messages (parse, index), one job at a time. [`handle_jobs`] lifts it to
/// a batch handler.
#[async_trait::async_trait]
pub(crate) trait JobHandler: Sync {
    type Outcome: JobOutcome + Send;
    const STAGE: Stage;
    /// Where a job that failed transiently waits; `None` when nothing queued it.
    fn backoff(&self) -> Option<Backoff<'_>>;
    async fn run(&self, job: &JobMessage) -> Result<Self::Outcome, StageError>;
    /// A message of the queue's that is no job (the index queue's rebuild steps): its outcome,
    /// or `None` when the body is not one of those.
    async fn run_other(&self, _body: &str) -> Option<Result<Self::Outcome, StageError>> {
        None
    }
    /// Whether `body` is such a message (it is then armed against a dead worker as a job is).
    fn is_other(&self, _body: &str) -> bool {
        false
    }
    /// Where the events the batch recorded go once it is done.
    fn events(&self) -> Option<Announce<'_>> {
        None
    }
}

/// A process's publisher, with what it publishes from.
pub(crate) struct Announce<'a> {
    pub db: &'a docpipe_db::Db,
    pub publisher: &'a crate::publish::Publisher,
    pub clock: &'a docpipe_core::clock::Clock,
}

impl Announce<'_> {
    /// After a batch: its events (and some of any backlog) onto the bus, before the invocation
    /// answers; what is not sent stays in the outbox for the next batch or the sweeper.
    async fn after_batch(&self) {
        self.publisher
            .flush(self.db, self.clock, crate::publish::AFTER_BATCH)
            .await;
    }
}

/// Every job stage is a Lambda function the same way: its SQS batch through [`handle_jobs`], the
/// partial-batch response out.
#[async_trait::async_trait]
impl<T: JobHandler + crate::services::Service> super::lambda::Function for T {
    type Event = aws_lambda_events::event::sqs::SqsEvent;
    type Response = aws_lambda_events::event::sqs::SqsBatchResponse;
    type Error = std::convert::Infallible;

    async fn invoke(&self, batch: Self::Event) -> Result<Self::Response, Self::Error> {
        Ok(handle_jobs(self, batch).await.response)
    }
}

/// The lifter, in the spirit of aws-lambda-rust-runtime's partial-batch example: a per-job
/// handler as a batch handler. It decodes each message (a body that is no job is dropped as
/// permanent), runs the stage, counts completed and failed, and backs a transient failure off
/// and records it on its run before the message is reported back to its queue.
pub(crate) async fn handle_jobs<H: JobHandler>(
    handler: &H,
    batch: SqsEvent,
) -> BatchReport<H::Outcome> {
    let backoff = handler.backoff();
    let backoff = backoff.as_ref();
    let report = for_each_message(batch, |message| async move {
        let delivery = Delivery::of(&message);
        let body = message.body.as_deref().unwrap_or_default();
        if handler.is_other(body) {
            if let Some(backoff) = backoff {
                backoff.arm(&delivery, H::STAGE).await;
            }
        }
        if let Some(result) = handler.run_other(body).await {
            if let (Err(e), Some(backoff)) = (&result, backoff) {
                if e.is_retryable() {
                    backoff.after_failure(&delivery, None, e).await;
                }
            }
            return result;
        }
        let job = JobMessage::decode(body).map_err(|e| StageError::failed(H::STAGE, e))?;
        if let Some(backoff) = backoff {
            backoff.arm(&delivery, H::STAGE).await;
        }
        let started = std::time::Instant::now();
        let result = match handler.run(&job).await {
            Ok(outcome) if outcome.continues() => {
                let progress = outcome.to_string();
                let queue = backoff.and_then(|b| b.queue_url.map(|url| (b.queue, url)));
                continue_in_fresh_message(queue, &job, H::STAGE, progress)
                    .await
                    .map(|()| outcome)
            }
            other => other,
        };
        match result {
            Ok(outcome) => {
                match outcome.ending() {
                    Ending::Completed => {
                        metrics::stage_completed(H::STAGE, started.elapsed().as_millis() as u64)
                    }
                    Ending::Failed => metrics::stage_failed(H::STAGE, "permanent"),
                    Ending::Neither => {}
                }
                outcome.record_metrics();
                Ok(outcome)
            }
            Err(e) => {
                metrics::stage_failed(H::STAGE, e.class());
                if let Some(backoff) = backoff.filter(|_| e.is_retryable()) {
                    backoff
                        .after_failure(&delivery, Some((job.run_id, H::STAGE)), &e)
                        .await;
                }
                Err(e)
            }
        }
    })
    .await;
    if let Some(events) = handler.events() {
        events.after_batch().await;
    }
    report
}

/// Sends `job` again to the queue it came from, so its next delivery is a fresh message. A job
/// that came from no queue, or a send that fails, is a transient failure instead: its message
/// comes back (counting a receive) and backs off, as any failed delivery does.
async fn continue_in_fresh_message(
    queue: Option<(&dyn JobQueue, &str)>,
    job: &JobMessage,
    stage: Stage,
    progress: String,
) -> Result<(), StageError> {
    let Some((queue, url)) = queue else {
        return Err(StageError::transient(stage, progress));
    };
    queue
        .send(url, job.encode())
        .await
        .map_err(|e| StageError::transient(stage, e))
}

/// A function that takes each message as it is (store: an upload notification; DLQ: a dead
/// letter). [`handle_messages`] lifts it to a batch handler, as [`handle_jobs`] does for jobs.
#[async_trait::async_trait]
pub(crate) trait MessageHandler: Sync {
    type Outcome: std::fmt::Display + Send;
    /// Where a message that failed transiently waits; `None` when it comes back after its
    /// visibility timeout.
    fn backoff(&self) -> Option<Backoff<'_>>;
    async fn handle(&self, message: &SqsMessage) -> Result<Self::Outcome, StageError>;
    /// Where the events the batch recorded go once it is done.
    fn events(&self) -> Option<Announce<'_>> {
        None
    }
    /// How long handling `message` may take at worst, for a batch that must end before its
    /// invocation's deadline; `None` when nothing says.
    fn time_needed(&self, _message: &SqsMessage) -> Option<std::time::Duration> {
        None
    }
}

/// The lifter for messages that name no run: each message is handled in order, and one that
/// failed transiently backs off (only the message: there is no run to record it on) before it is
/// reported back to its queue.
pub(crate) async fn handle_messages<H: MessageHandler>(
    handler: &H,
    batch: SqsEvent,
) -> BatchReport<H::Outcome> {
    handle_messages_until(handler, batch, None).await
}

/// The same, within an invocation that ends at `deadline`: a message that would not finish in the
/// time left is not started. It and the rest of the batch go back to the queue at once (their
/// visibility set to 0, not backed off: nothing failed), for another invocation. The first
/// message is always started: a batch must make progress.
pub(crate) async fn handle_messages_until<H: MessageHandler>(
    handler: &H,
    batch: SqsEvent,
    deadline: Option<std::time::Instant>,
) -> BatchReport<H::Outcome> {
    let backoff = handler.backoff();
    let backoff = backoff.as_ref();
    let started = std::sync::atomic::AtomicUsize::new(0);
    let out_of_time = std::sync::atomic::AtomicBool::new(false);
    let (started, out_of_time) = (&started, &out_of_time);
    let report = for_each_message(batch, |message| async move {
        use std::sync::atomic::Ordering::SeqCst;
        let first = started.fetch_add(1, SeqCst) == 0;
        if let (Some(deadline), false) = (deadline, first) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let needed = handler.time_needed(&message).unwrap_or_default();
            if out_of_time.load(SeqCst) || needed > left {
                out_of_time.store(true, SeqCst);
                if let Some(backoff) = backoff {
                    backoff.release_now(&Delivery::of(&message)).await;
                }
                return Err(StageError::transient(
                    Stage::Store,
                    Deferred {
                        left_secs: left.as_secs_f64(),
                        needed_secs: needed.as_secs_f64(),
                    },
                ));
            }
        }
        let result = handler.handle(&message).await;
        if let (Err(e), Some(backoff)) = (&result, backoff) {
            if e.is_retryable() {
                backoff
                    .after_failure(&Delivery::of(&message), None, e)
                    .await;
            }
        }
        result
    })
    .await;
    if let Some(events) = handler.events() {
        events.after_batch().await;
    }
    report
}

/// A message a batch did not start, for want of time.
#[derive(Debug, thiserror::Error)]
#[error("deferred to another invocation: {left_secs:.1} s of this one were left, and the message may need {needed_secs:.1} s")]
pub(crate) struct Deferred {
    pub left_secs: f64,
    pub needed_secs: f64,
}

/// Which delivery of its message this is, and how to hold it back.
#[derive(Debug, Clone)]
pub(crate) struct Delivery {
    pub receipt_handle: String,
    /// `ApproximateReceiveCount`: 1 on the first delivery.
    pub receive_count: u32,
}

impl Delivery {
    pub fn of(message: &SqsMessage) -> Delivery {
        Delivery {
            receipt_handle: message.receipt_handle.clone().unwrap_or_default(),
            receive_count: message
                .attributes
                .get("ApproximateReceiveCount")
                .and_then(|n| n.parse().ok())
                .unwrap_or(1),
        }
    }
}

/// Where a message that failed transiently goes back to, and on what clock.
pub struct Backoff<'a> {
    pub db: &'a Db,
    pub queue: &'a dyn JobQueue,
    /// The queue the message came from; `None` when nothing queued it (a direct invocation).
    pub queue_url: Option<&'a str>,
    pub clock: &'a Clock,
}

impl Backoff<'_> {
    /// Before a job's work starts: its message stays hidden for the function's whole time, then
    /// the lease (a dead worker's lease runs out at most that long after its last renewal, and
    /// the next delivery must find it run out), then the backoff this delivery would get after a
    /// failure. A worker that dies (its timeout, its memory) cannot set a backoff; with this its
    /// message still comes back after one, not after the queue's whole visibility timeout. A
    /// delivery that ends sooner deletes the message or sets its backoff from then.
    pub(crate) async fn arm(&self, delivery: &Delivery, stage: Stage) {
        let function_timeout = match stage {
            Stage::Parse => self.clock.parse.function_timeout,
            Stage::Index => self.clock.index.function_timeout,
            _ => self.clock.store.function_timeout,
        };
        let Some(url) = self
            .queue_url
            .filter(|_| !delivery.receipt_handle.is_empty())
        else {
            return;
        };
        let hidden =
            function_timeout + self.clock.lease + self.clock.backoff(delivery.receive_count);
        if let Err(e) = self
            .queue
            .hold_back(url, &delivery.receipt_handle, hidden)
            .await
        {
            tracing::warn!(error = %docpipe_core::error::chain(&e), "could not arm the message's backoff; a dead worker's message returns after its visibility timeout");
        }
    }

    /// Makes the message visible again at once, for a message that was not tried (best effort:
    /// otherwise it returns after its visibility timeout).
    pub(crate) async fn release_now(&self, delivery: &Delivery) {
        let Some(url) = self
            .queue_url
            .filter(|_| !delivery.receipt_handle.is_empty())
        else {
            return;
        };
        if let Err(e) = self
            .queue
            .hold_back(url, &delivery.receipt_handle, std::time::Duration::ZERO)
            .await
        {
            tracing::warn!(error = %docpipe_core::error::chain(&e), "could not release a deferred message; it returns after its visibility timeout");
        }
    }

    /// A transient failure backs off: the message stays hidden for the clock's exponential, capped
    /// wait (rather than the queue's whole visibility timeout), and the run records the attempt's
    /// error and when the message comes back. Best effort on both counts: if SQS or PostgreSQL is
    /// what failed, the message still comes back after its visibility timeout.
    pub(crate) async fn after_failure(
        &self,
        delivery: &Delivery,
        run: Option<(i64, Stage)>,
        error: &StageError,
    ) {
        let delay = self.clock.backoff(delivery.receive_count);
        if let Some(url) = self
            .queue_url
            .filter(|_| !delivery.receipt_handle.is_empty())
        {
            if let Err(e) = self
                .queue
                .hold_back(url, &delivery.receipt_handle, delay)
                .await
            {
                tracing::warn!(error = %docpipe_core::error::chain(&e), "could not set the message's backoff; it returns after its visibility timeout");
            }
        }
        let Some((run_id, stage)) = run else { return };
        let text = docpipe_core::error::chain(error);
        let recorded = match self.db.client().await {
            Ok(client) => {
                run_events::record_backoff(
                    &**client,
                    run_id,
                    stage.as_str(),
                    delivery.receive_count as i32,
                    &text,
                    delay.as_secs_f64(),
                )
                .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = recorded {
            tracing::warn!(run_id, error = %docpipe_core::error::chain(&e), "could not record the backoff");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A stage that answers from a script, by run id: 1 completes, 2 fails the run, 3 is stale,
    /// anything else fails transiently.
    struct Scripted {
        seen: Mutex<Vec<i64>>,
    }

    struct Said(i64, Ending);

    impl std::fmt::Display for Said {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "run {}", self.0)
        }
    }

    impl JobOutcome for Said {
        fn ending(&self) -> Ending {
            self.1
        }
    }

    #[async_trait::async_trait]
    impl JobHandler for Scripted {
        type Outcome = Said;
        const STAGE: Stage = Stage::Parse;
        fn backoff(&self) -> Option<Backoff<'_>> {
            None
        }
        async fn run(&self, job: &JobMessage) -> Result<Said, StageError> {
            self.seen.lock().unwrap().push(job.run_id);
            match job.run_id {
                1 => Ok(Said(1, Ending::Completed)),
                2 => Ok(Said(2, Ending::Failed)),
                3 => Ok(Said(3, Ending::Neither)),
                n => Err(StageError::transient(
                    Stage::Parse,
                    format!("run {n}: down"),
                )),
            }
        }
    }

    fn message(id: &str, body: &str) -> SqsMessage {
        let mut m = SqsMessage::default();
        m.message_id = Some(id.into());
        m.body = Some(body.into());
        m
    }

    fn job(run_id: i64) -> String {
        JobMessage::new(docpipe_core::ids::random_doc_id(), run_id).encode()
    }

    #[tokio::test]
    async fn the_lifter_reports_back_only_what_failed_transiently() {
        let mut batch = SqsEvent::default();
        batch.records = vec![
            message("m-1", &job(1)),
            message("m-2", &job(2)),
            message("m-bad", "{not a job"),
            message("m-3", &job(3)),
            message("m-4", &job(4)),
        ];
        let handler = Scripted {
            seen: Mutex::new(Vec::new()),
        };
        let report = handle_jobs(&handler, batch).await;
        assert_eq!(report.failed_ids(), ["m-4"]);
        assert_eq!(
            *handler.seen.lock().unwrap(),
            [1, 2, 3, 4],
            "a body that is no job never reaches the stage"
        );
        let ends: Vec<Option<Ending>> = report.done().iter().map(|o| o.map(|s| s.1)).collect();
        assert_eq!(
            ends,
            [
                Some(Ending::Completed),
                Some(Ending::Failed),
                None,
                Some(Ending::Neither),
                None
            ]
        );
        assert!(matches!(
            report.outcomes[2].dropped(),
            Some(StageError::Failed {
                stage: Stage::Parse,
                ..
            })
        ));
        assert!(matches!(report.outcomes[4], Handled::Retry(_)));
        assert_eq!(
            report.lines[0], "run 1",
            "the line is the outcome's Display"
        );
    }

    /// A message handler that answers from each body: `ok`, `bad` (permanent) or `down`.
    struct Echo;

    #[async_trait::async_trait]
    impl MessageHandler for Echo {
        type Outcome = String;
        fn backoff(&self) -> Option<Backoff<'_>> {
            None
        }
        async fn handle(&self, message: &SqsMessage) -> Result<String, StageError> {
            match message.body.as_deref() {
                Some("ok") => Ok("done".into()),
                Some("bad") => Err(StageError::failed(Stage::Store, "refused")),
                _ => Err(StageError::transient(Stage::Store, "the queue is down")),
            }
        }
    }

    /// Echo, with a time each message may need.
    struct Slow(std::time::Duration);

    #[async_trait::async_trait]
    impl MessageHandler for Slow {
        type Outcome = String;
        fn backoff(&self) -> Option<Backoff<'_>> {
            None
        }
        async fn handle(&self, message: &SqsMessage) -> Result<String, StageError> {
            Echo.handle(message).await
        }
        fn time_needed(&self, _: &SqsMessage) -> Option<std::time::Duration> {
            Some(self.0)
        }
    }

    #[tokio::test]
    async fn a_batch_leaves_what_it_has_no_time_for_to_another_invocation() {
        let batch = || {
            let mut batch = SqsEvent::default();
            batch.records = vec![
                message("m-1", "ok"),
                message("m-2", "ok"),
                message("m-3", "ok"),
            ];
            batch
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        // Each message may need 10 s: the first is started (a batch must move), the rest wait.
        let slow = Slow(std::time::Duration::from_secs(10));
        let report = handle_messages_until(&slow, batch(), Some(deadline)).await;
        assert_eq!(report.failed_ids(), ["m-2", "m-3"]);
        assert_eq!(report.lines[0], "done");
        assert!(
            report.lines[1].contains("deferred to another invocation"),
            "{}",
            report.lines[1]
        );
        // With time enough, or no deadline, every message is handled.
        let quick = Slow(std::time::Duration::from_millis(10));
        let report = handle_messages_until(&quick, batch(), Some(deadline)).await;
        assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
        let report = handle_messages_until(&slow, batch(), None).await;
        assert!(report.failed_ids().is_empty(), "{:?}", report.lines);
    }

    #[tokio::test]
    async fn the_message_lifter_reports_back_only_what_failed_transiently() {
        let mut batch = SqsEvent::default();
        batch.records = vec![
            message("m-1", "ok"),
            message("m-2", "bad"),
            message("m-3", "down"),
            message("m-4", "ok"),
        ];
        let report = handle_messages(&Echo, batch).await;
        assert_eq!(report.failed_ids(), ["m-3"]);
        assert_eq!(report.lines[0], "done");
        assert_eq!(
            report.lines[1],
            "dropped: store failed permanently: refused"
        );
        assert!(
            report.lines[2].starts_with("retry later: "),
            "{}",
            report.lines[2]
        );
        assert_eq!(report.lines[3], "done", "a failure never stops the batch");
    }

    #[tokio::test]
    async fn a_record_without_a_message_id_never_spoils_the_batch_response() {
        let mut batch = SqsEvent::default();
        for id in [Some("m-1"), None, Some("m-3")] {
            let mut m = SqsMessage::default();
            m.message_id = id.map(String::from);
            m.body = Some("x".into());
            batch.records.push(m);
        }
        let report = for_each_message(batch, |_| async {
            Err::<String, _>(StageError::transient(Stage::Store, "the database is down"))
        })
        .await;
        let ids: Vec<&str> = report
            .response
            .batch_item_failures
            .iter()
            .map(|f| f.item_identifier.as_str())
            .collect();
        assert_eq!(ids, ["m-1", "m-3"], "no empty identifier");
        assert_eq!(report.lines.len(), 3);
    }

    #[tokio::test]
    async fn a_job_that_goes_on_is_sent_again_as_a_fresh_message() {
        let queue = crate::adapters::memory::MemoryJobQueue::default();
        let job = JobMessage::new("doc_0123456789abcdef0123456789abcdef", 3);
        continue_in_fresh_message(
            Some((&queue, "index-q")),
            &job,
            Stage::Index,
            "32 of 50".into(),
        )
        .await
        .unwrap();
        let sent = queue.sent_to("index-q");
        assert_eq!(sent.len(), 1);
        assert_eq!(JobMessage::decode(&sent[0]).unwrap(), job);
    }

    #[tokio::test]
    async fn without_a_queue_or_with_one_down_it_comes_back_as_a_transient_failure() {
        let job = JobMessage::new("doc_0123456789abcdef0123456789abcdef", 3);
        let err = continue_in_fresh_message(None, &job, Stage::Index, "32 of 50".into())
            .await
            .unwrap_err();
        assert!(
            err.is_retryable() && err.to_string().contains("32 of 50"),
            "{err}"
        );

        let queue = crate::adapters::memory::MemoryJobQueue::default();
        queue.set_down(true);
        let err =
            continue_in_fresh_message(Some((&queue, "index-q")), &job, Stage::Index, "x".into())
                .await
                .unwrap_err();
        assert!(err.is_retryable(), "{err}");
        assert!(queue.sent_to("index-q").is_empty());
    }
}
