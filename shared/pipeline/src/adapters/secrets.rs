//! Secrets Manager, read once per container at init: the database password and the Milvus token
//! never sit in the functions' environment.

use aws_sdk_secretsmanager::Client;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("cannot read secret {arn}")]
    Unavailable {
        arn: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("secret {arn} is not what was expected: {reason}")]
    Malformed { arn: String, reason: String },
}

pub async fn fetch_string(sdk: &aws_config::SdkConfig, arn: &str) -> Result<String, SecretError> {
    let out = Client::new(sdk)
        .get_secret_value()
        .secret_id(arn)
        .send()
        .await
        .map_err(|e| SecretError::Unavailable {
            arn: arn.to_string(),
            source: Box::new(e.into_service_error()),
        })?;
    out.secret_string()
        .map(str::to_string)
        .ok_or_else(|| SecretError::Malformed {
            arn: arn.to_string(),
            reason: "it holds no string".into(),
        })
}

pub(crate) async fn fetch_json(
    sdk: &aws_config::SdkConfig,
    arn: &str,
) -> Result<serde_json::Value, SecretError> {
    let text = fetch_string(sdk, arn).await?;
    serde_json::from_str(&text).map_err(|e| SecretError::Malformed {
        arn: arn.to_string(),
        reason: format!("not JSON: {e}"),
    })
}
