//! A function process, the dev runner's Lambda container: `docpipe lambda <function>` builds the
//! function's clients once (its init), says it is ready, then takes one SQS batch per line on
//! stdin and answers each with one line on stdout. It is the same handler the Lambda binary calls.
//! Logs go to stderr, as everywhere. Killing the process is how an invocation past its timeout is
//! stopped, work in `spawn_blocking` (parsing, e5) included.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// Lines of the protocol start with this, so that nothing else a library prints on stdout (an EMF
/// metric, say) is taken for an answer.
const READY: &str = "\u{1e}docpipe-ready";
const ANSWER: &str = "\u{1e}docpipe-answer ";

#[derive(Debug, Serialize, Deserialize)]
pub struct Invocation {
    pub response: SqsBatchResponse,
    pub lines: Vec<String>,
}

pub struct FunctionProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
}

impl FunctionProcess {
    /// Starts `docpipe lambda <function>` and waits for its init to finish.
    pub async fn start(function: &str) -> anyhow::Result<FunctionProcess> {
        let exe = std::env::current_exe()?;
        let mut child = tokio::process::Command::new(exe)
            .arg("lambda")
            .arg(function)
            .envs(
                crate::roles::role_keys()
                    .then(|| ("AWS_ACCESS_KEY_ID", crate::roles::role_access_key(function))),
            )
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout is piped")).lines();
        loop {
            match stdout.next_line().await? {
                Some(line) if line == READY => break,
                Some(other) => println!("{other}"),
                None => anyhow::bail!("the {function} function exited during its init"),
            }
        }
        Ok(FunctionProcess {
            child,
            stdin,
            stdout,
        })
    }

    pub async fn invoke(&mut self, event: &SqsEvent) -> anyhow::Result<Invocation> {
        let mut line = serde_json::to_vec(event)?;
        line.push(b'\n');
        self.stdin.write_all(&line).await?;
        self.stdin.flush().await?;
        loop {
            match self.stdout.next_line().await? {
                Some(line) => match line.strip_prefix(ANSWER) {
                    Some(answer) => return Ok(serde_json::from_str(answer)?),
                    None => println!("{line}"),
                },
                None => anyhow::bail!("the function process exited mid-invocation"),
            }
        }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Stops the process at once, as Lambda stops a container whose invocation timed out.
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The child's side: init, then one batch per line until stdin closes.
pub async fn serve(function: &str) -> anyhow::Result<()> {
    let handler = Handler::init(function).await?;
    let mut out = tokio::io::stdout();
    out.write_all(format!("{READY}\n").as_bytes()).await?;
    out.flush().await?;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        let event: SqsEvent = serde_json::from_str(&line)?;
        let report = handler.handle(event).await;
        let answer = serde_json::to_string(&Invocation {
            response: report.response,
            lines: report.lines,
        })?;
        out.write_all(format!("{ANSWER}{answer}\n").as_bytes())
            .await?;
        out.flush().await?;
    }
    Ok(())
}

enum Handler {
    Store(docpipe_pipeline::services::StoreService),
    Parse(docpipe_pipeline::services::ParseService),
    Index(docpipe_pipeline::services::IndexService),
    DeadLetter(docpipe_pipeline::services::DeadLetterService),
}

impl Handler {
    async fn init(function: &str) -> anyhow::Result<Handler> {
        use docpipe_pipeline::services::*;
        Ok(match function {
            "store" => Handler::Store(StoreService::from_env().await?),
            "parse" => Handler::Parse(ParseService::from_env().await?),
            "index" => Handler::Index(IndexService::from_env().await?),
            "dlq" => Handler::DeadLetter(DeadLetterService::from_env().await?),
            other => anyhow::bail!("no function {other:?}: store, parse, index or dlq"),
        })
    }

    async fn handle(&self, event: SqsEvent) -> docpipe_pipeline::handlers::sqs::BatchReport {
        use docpipe_pipeline::handlers;
        match self {
            Handler::Store(s) => handlers::store::handle_sqs(s, event).await.untyped(),
            Handler::Parse(s) => handlers::parse::handle_sqs(s, event).await.untyped(),
            Handler::Index(s) => handlers::index::handle_sqs(s, event).await.untyped(),
            Handler::DeadLetter(s) => handlers::dlq::handle_sqs(s, event).await.untyped(),
        }
    }
}
