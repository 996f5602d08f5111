//! The migrations as a CloudFormation custom resource: every create and update of the stack runs
//! them (idempotent, under the migration runner's advisory lock), and the deploy fails with the
//! migration's error when one fails. Delete leaves the schema alone: the data outlives the stack,
//! as the bucket does.
//!
//! CloudFormation waits for an answer at the event's `ResponseURL` (a presigned S3 URL), not for
//! the function's return value: a handler that dies without answering holds the stack for an
//! hour. So nothing here may fail before answering: the database is reached inside the handler,
//! not at init, and the work stops in time to answer before the function's deadline.

use crate::services::{connect_db, InitError};
use docpipe_core::config::{AwsConfig, DbConfig};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The custom resource's one physical id: the same on every update, so CloudFormation never
/// takes an update for a replacement (and sends a delete for the "old" one).
pub(crate) const PHYSICAL_ID: &str = "docpipe-migrations";
/// Time kept back from the deadline to send the answer.
const ANSWER_RESERVE: Duration = Duration::from_secs(10);
/// CloudFormation's limit on a response body is 4,096 bytes; the reason gets what is left.
const REASON_MAX_BYTES: usize = 2_048;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum RequestType {
    Create,
    Update,
    Delete,
}

/// What CloudFormation sends (the fields this handler reads).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CustomResourceEvent {
    pub request_type: RequestType,
    #[serde(rename = "ResponseURL")]
    pub response_url: String,
    pub stack_id: String,
    pub request_id: String,
    pub logical_resource_id: String,
    #[serde(default)]
    pub physical_resource_id: Option<String>,
    #[serde(default)]
    pub resource_properties: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Success,
    Failed,
}

/// What is sent back to CloudFormation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct CustomResourceResponse {
    pub status: Status,
    pub reason: String,
    pub physical_resource_id: String,
    pub stack_id: String,
    pub request_id: String,
    pub logical_resource_id: String,
    pub data: Value,
}

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("cannot answer CloudFormation at its response URL")]
    Answer(#[source] reqwest::Error),
    #[error("CloudFormation's response URL answered {status}: {body}")]
    Refused { status: u16, body: String },
}

/// The migrate function: where the database is, read at init; reached per request.
pub struct MigrateService {
    pub db: DbConfig,
    pub aws: AwsConfig,
    http: reqwest::Client,
}

impl MigrateService {
    pub fn new(db: DbConfig, aws: AwsConfig) -> Self {
        MigrateService {
            db,
            aws,
            http: reqwest::Client::builder()
                .timeout(ANSWER_RESERVE)
                .build()
                .expect("an HTTP client with a timeout builds"),
        }
    }

    /// Reads the environment. A problem is not returned: it becomes the FAILED answer of the
    /// first request, so that the deploy fails at once with it.
    pub fn from_env() -> (Self, Option<String>) {
        let mut env = docpipe_core::env::EnvReader::from_process();
        let db = DbConfig::read(&mut env);
        let aws = AwsConfig::read(&mut env);
        let problem = env.finish().err().map(|e| e.to_string());
        (MigrateService::new(db, aws), problem)
    }

    /// Handles one request and answers CloudFormation. `deadline` is the invocation's.
    pub async fn handle(
        &self,
        event: &CustomResourceEvent,
        deadline: Instant,
        init_problem: Option<&str>,
    ) -> Result<CustomResourceResponse, MigrateError> {
        let (status, reason, data) = match (event.request_type, init_problem) {
            (RequestType::Delete, _) => (
                Status::Success,
                "the schema and its data outlive the stack: nothing removed".to_string(),
                Value::Null,
            ),
            (_, Some(problem)) => (Status::Failed, problem.to_string(), Value::Null),
            (_, None) => {
                let budget = deadline
                    .saturating_duration_since(Instant::now())
                    .saturating_sub(ANSWER_RESERVE);
                match tokio::time::timeout(budget, self.migrate()).await {
                    Ok(Ok(applied)) => (
                        Status::Success,
                        describe_applied(&applied),
                        serde_json::json!({
                            "Applied": applied.iter().map(i32::to_string).collect::<Vec<_>>().join(","),
                            "SchemaVersion": docpipe_db::migrate::MIGRATIONS.last().map(|m| m.version).unwrap_or(0).to_string(),
                        }),
                    ),
                    Ok(Err(e)) => (
                        Status::Failed,
                        format!("migrations failed: {}", docpipe_core::error::chain(&e)),
                        Value::Null,
                    ),
                    Err(_) => (
                        Status::Failed,
                        format!(
                            "migrations did not finish within {:.0} s (the function's time less what answering needs): is the database reachable from the function's subnets?",
                            budget.as_secs_f64()
                        ),
                        Value::Null,
                    ),
                }
            }
        };
        match status {
            Status::Success => {
                tracing::info!(request = ?event.request_type, %reason, "custom resource succeeded")
            }
            Status::Failed => {
                tracing::error!(request = ?event.request_type, %reason, "custom resource failed")
            }
        }
        let response = CustomResourceResponse {
            status,
            reason: fit_bytes(&reason, REASON_MAX_BYTES).to_string(),
            physical_resource_id: event
                .physical_resource_id
                .clone()
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| PHYSICAL_ID.to_string()),
            stack_id: event.stack_id.clone(),
            request_id: event.request_id.clone(),
            logical_resource_id: event.logical_resource_id.clone(),
            data,
        };
        self.answer(&event.response_url, &response).await?;
        Ok(response)
    }

    async fn migrate(&self) -> Result<Vec<i32>, InitError> {
        let db = connect_db(&self.db, &self.aws).await?;
        Ok(docpipe_db::migrate::run(&db).await?)
    }

    /// The presigned URL was signed with no content type: the PUT must not send one.
    async fn answer(
        &self,
        url: &str,
        response: &CustomResourceResponse,
    ) -> Result<(), MigrateError> {
        let body = serde_json::to_vec(response).expect("a response serialises");
        let answer = self
            .http
            .put(url)
            .header(reqwest::header::CONTENT_TYPE, "")
            .body(body)
            .send()
            .await
            .map_err(MigrateError::Answer)?;
        if !answer.status().is_success() {
            let status = answer.status().as_u16();
            let body = answer.text().await.unwrap_or_default();
            return Err(MigrateError::Refused {
                status,
                body: fit_bytes(&body, 512).to_string(),
            });
        }
        Ok(())
    }
}

fn describe_applied(applied: &[i32]) -> String {
    match applied {
        [] => "the schema is current: no migration was pending".to_string(),
        versions => format!(
            "applied migrations {}",
            versions
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The longest prefix of `text` within `max` bytes, cut at a character boundary.
fn fit_bytes(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_reason_is_cut_at_a_character() {
        let reason = "迁移失败".repeat(1_000);
        let cut = fit_bytes(&reason, REASON_MAX_BYTES);
        assert!(cut.len() <= REASON_MAX_BYTES && cut.len() > REASON_MAX_BYTES - 4);
        assert!(reason.starts_with(cut));
    }

    #[test]
    fn the_events_sam_generates_parse() {
        let event: CustomResourceEvent = serde_json::from_str(
            r#"{"RequestType":"Update","ResponseURL":"http://pre-signed-S3-url-for-response",
                "StackId":"arn:aws:cloudformation:us-east-1:123456789012:stack/MyStack/guid",
                "RequestId":"unique id for this create request","ResourceType":"Custom::TestResource",
                "LogicalResourceId":"MyTestResource","PhysicalResourceId":"docpipe-migrations",
                "ResourceProperties":{"StackName":"MyStack"},"OldResourceProperties":{}}"#,
        )
        .unwrap();
        assert_eq!(event.request_type, RequestType::Update);
        assert_eq!(event.physical_resource_id.as_deref(), Some(PHYSICAL_ID));
    }
}
