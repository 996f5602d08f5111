//! The AWS SDK configuration, built once per process. Locally `AWS_ENDPOINT_URL` points both S3 and
//! SQS at the emulator; S3 then needs path-style addressing.

use docpipe_core::config::AwsConfig;

pub async fn sdk_config(config: &AwsConfig) -> aws_config::SdkConfig {
    // Without an operation timeout a frozen endpoint would hold an invocation until Lambda kills it;
    // with one, the message goes back to its queue as a transient failure.
    let timeouts = aws_config::timeout::TimeoutConfig::builder()
        .connect_timeout(std::time::Duration::from_secs(3))
        .operation_attempt_timeout(std::time::Duration::from_secs(config.attempt_timeout_secs))
        .build();
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(config.region.clone()))
        .http_client(https_client())
        .timeout_config(timeouts);
    if let Some(endpoint) = &config.endpoint_url {
        loader = loader.endpoint_url(endpoint);
    }
    loader.load().await
}

/// rustls on ring, the TLS stack the rest of docpipe uses (the SDK's default would bring aws-lc).
pub fn https_client() -> aws_sdk_s3::config::SharedHttpClient {
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(CryptoMode::Ring))
        .build_https()
}

pub(crate) fn s3_client(sdk: &aws_config::SdkConfig, config: &AwsConfig) -> aws_sdk_s3::Client {
    let s3_config = aws_sdk_s3::config::Builder::from(sdk)
        .force_path_style(config.endpoint_url.is_some())
        .build();
    aws_sdk_s3::Client::from_conf(s3_config)
}

pub(crate) fn sqs_client(sdk: &aws_config::SdkConfig) -> aws_sdk_sqs::Client {
    aws_sdk_sqs::Client::new(sdk)
}

pub(crate) fn eventbridge_client(sdk: &aws_config::SdkConfig) -> aws_sdk_eventbridge::Client {
    aws_sdk_eventbridge::Client::new(sdk)
}
