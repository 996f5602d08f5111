//! AWS Signature Version 4 for the API, computed by the AWS SDK's own signer (`aws-sigv4`), never
//! by hand. The `docpipe` CLI signs its requests to a deployed API with [`sign`] (API Gateway's IAM
//! authorization checks them); the dev runner, in its signed mode (`DOCPIPE_DEV_SIGV4_KEYS`),
//! checks them with [`LocalKeys::verify`] as API Gateway would, so the CLI's signing is tested
//! against a server that refuses a wrong key.

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{self, SignableBody, SignableRequest, SigningSettings};
use aws_sigv4::sign::v4;
use axum::http::HeaderMap;
use docpipe_core::config::Secret;
use std::collections::HashMap;
use std::time::{Duration, SystemTime};

/// The signing name of API Gateway's execute-api.
pub const SERVICE: &str = "execute-api";
const ALGORITHM: &str = "AWS4-HMAC-SHA256";
/// How far a request's `x-amz-date` may be from the server's clock (AWS allows 15 minutes).
pub const MAX_SKEW: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, thiserror::Error)]
pub enum SigningError {
    #[error("the request cannot be signed: {0}")]
    Sign(String),
}

/// What a request needs to carry to be signed: the headers to add (`authorization`,
/// `x-amz-date`, `x-amz-security-token`), and the signature itself.
pub struct Signature {
    pub headers: Vec<(String, String)>,
    pub signature: String,
}

/// Signs a request for `execute-api` in `region`. `url` is the full, already encoded URL;
/// `headers` are those the request will carry (each is signed, but for the ones SigV4 leaves out,
/// like `user-agent`); `host` is taken from the URL when absent.
pub fn sign(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    credentials: &Credentials,
    region: &str,
    time: SystemTime,
) -> Result<Signature, SigningError> {
    sign_for(
        SERVICE,
        method,
        url,
        headers,
        body,
        credentials,
        region,
        time,
    )
}

/// [`sign`] for another AWS service (`iam`, to read a caller's principal tags).
#[allow(clippy::too_many_arguments)]
pub fn sign_for(
    service: &str,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &[u8],
    credentials: &Credentials,
    region: &str,
    time: SystemTime,
) -> Result<Signature, SigningError> {
    let identity = credentials.clone().into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| SigningError::Sign(e.to_string()))?
        .into();
    let request = SignableRequest::new(
        method,
        url,
        headers.iter().copied(),
        SignableBody::Bytes(body),
    )
    .map_err(|e| SigningError::Sign(e.to_string()))?;
    let (instructions, signature) = http_request::sign(request, &params)
        .map_err(|e| SigningError::Sign(e.to_string()))?
        .into_parts();
    Ok(Signature {
        headers: instructions
            .headers()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        signature,
    })
}

/// Why a signed request was refused (each a 403, as API Gateway answers).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Rejected {
    #[error("the request is not signed: an Authorization header with AWS Signature Version 4 is required")]
    Unsigned,
    #[error("the Authorization header is not a SigV4 header: {0}")]
    Malformed(String),
    #[error("the access key {0:?} is not known to this API")]
    UnknownKey(String),
    #[error("the credential scope names the service {0:?}; this API is {SERVICE}")]
    WrongService(String),
    #[error("the request's x-amz-date is more than 15 minutes from the server's clock, or disagrees with its credential scope")]
    Stale,
    #[error("the signature does not match the request: check the secret key and that the request was not changed after signing")]
    Mismatch,
}

/// The keys the dev runner's signed mode accepts, by access key id.
pub struct LocalKeys {
    keys: HashMap<String, Secret>,
}

impl std::fmt::Debug for LocalKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalKeys")
            .field("access_key_ids", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl LocalKeys {
    /// `ACCESS_KEY_ID:SECRET[,ACCESS_KEY_ID:SECRET…]`.
    pub fn parse(spec: &str) -> Result<LocalKeys, String> {
        let mut keys = HashMap::new();
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match pair.split_once(':') {
                Some((id, secret)) if !id.trim().is_empty() && !secret.is_empty() => {
                    keys.insert(id.trim().to_string(), Secret::new(secret.to_string()));
                }
                _ => return Err(
                    "DOCPIPE_DEV_SIGV4_KEYS must be ACCESS_KEY_ID:SECRET pairs, comma-separated"
                        .into(),
                ),
            }
        }
        if keys.is_empty() {
            return Err("DOCPIPE_DEV_SIGV4_KEYS names no key".into());
        }
        Ok(LocalKeys { keys })
    }

    /// Checks a request's signature and returns the access key id that signed it. `url` is the
    /// full URL the client signed (scheme, the Host header, path and raw query).
    pub fn verify(
        &self,
        method: &str,
        url: &str,
        headers: &HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) -> Result<String, Rejected> {
        let authorization = headers
            .get("authorization")
            .ok_or(Rejected::Unsigned)?
            .to_str()
            .map_err(|_| Rejected::Malformed("not ASCII".into()))?;
        let auth = Authorization::parse(authorization)?;
        if auth.service != SERVICE {
            return Err(Rejected::WrongService(auth.service.to_string()));
        }
        let secret = self
            .keys
            .get(auth.access_key_id)
            .ok_or_else(|| Rejected::UnknownKey(auth.access_key_id.to_string()))?;
        let time = request_time(headers, auth.date, now)?;
        let mut signed = Vec::new();
        for name in &auth.signed_headers {
            let values: Vec<&str> = headers
                .get_all(*name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect();
            if values.is_empty() {
                return Err(Rejected::Malformed(format!(
                    "the signed header {name:?} is missing"
                )));
            }
            signed.extend(values.into_iter().map(|v| (*name, v)));
        }
        if !auth.signed_headers.contains(&"host") {
            return Err(Rejected::Malformed(
                "host is not among the signed headers".into(),
            ));
        }
        let token = headers
            .get("x-amz-security-token")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let credentials = Credentials::new(
            auth.access_key_id,
            secret.expose(),
            token,
            None,
            "docpipe-local",
        );
        let expected = sign(method, url, &signed, body, &credentials, auth.region, time)
            .map_err(|e| Rejected::Malformed(e.to_string()))?;
        let same: bool =
            subtle::ConstantTimeEq::ct_eq(expected.signature.as_bytes(), auth.signature.as_bytes())
                .into();
        if same {
            Ok(auth.access_key_id.to_string())
        } else {
            Err(Rejected::Mismatch)
        }
    }
}

/// `x-amz-date`, which must agree with the credential scope's day and the server's clock.
fn request_time(
    headers: &HeaderMap,
    scope_date: &str,
    now: SystemTime,
) -> Result<SystemTime, Rejected> {
    let text = headers
        .get("x-amz-date")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| Rejected::Malformed("x-amz-date is missing".into()))?;
    let at = chrono::NaiveDateTime::parse_from_str(text, "%Y%m%dT%H%M%SZ")
        .map_err(|_| Rejected::Malformed(format!("x-amz-date {text:?} is not YYYYMMDDTHHMMSSZ")))?
        .and_utc();
    if !text.starts_with(scope_date) {
        return Err(Rejected::Stale);
    }
    let time: SystemTime = at.into();
    let skew = now
        .duration_since(time)
        .or_else(|_| time.duration_since(now))
        .unwrap_or_default();
    if skew > MAX_SKEW {
        return Err(Rejected::Stale);
    }
    Ok(time)
}

/// `AWS4-HMAC-SHA256 Credential=AKID/20150830/us-east-1/iam/aws4_request,
/// SignedHeaders=content-type;host;x-amz-date, Signature=…`.
struct Authorization<'a> {
    access_key_id: &'a str,
    date: &'a str,
    region: &'a str,
    service: &'a str,
    signed_headers: Vec<&'a str>,
    signature: &'a str,
}

impl<'a> Authorization<'a> {
    fn parse(header: &'a str) -> Result<Authorization<'a>, Rejected> {
        let rest = header
            .strip_prefix(ALGORITHM)
            .filter(|r| r.starts_with(' '))
            .ok_or_else(|| Rejected::Malformed(format!("the algorithm is not {ALGORITHM}")))?;
        let mut credential = None;
        let mut signed_headers = None;
        let mut signature = None;
        for part in rest.split(',').map(str::trim) {
            match part.split_once('=') {
                Some(("Credential", v)) => credential = Some(v),
                Some(("SignedHeaders", v)) => signed_headers = Some(v),
                Some(("Signature", v)) => signature = Some(v),
                _ => return Err(Rejected::Malformed(format!("unexpected part {part:?}"))),
            }
        }
        let missing = |what: &str| Rejected::Malformed(format!("{what} is missing"));
        let credential = credential.ok_or_else(|| missing("Credential"))?;
        let scope: Vec<&str> = credential.split('/').collect();
        let [access_key_id, date, region, service, "aws4_request"] = scope[..] else {
            return Err(Rejected::Malformed(
                "Credential is not KEY/DATE/REGION/SERVICE/aws4_request".into(),
            ));
        };
        let signature = signature.ok_or_else(|| missing("Signature"))?;
        if signature.len() != 64 || !signature.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Rejected::Malformed(
                "Signature is not 64 hexadecimal digits".into(),
            ));
        }
        Ok(Authorization {
            access_key_id,
            date,
            region,
            service,
            signed_headers: signed_headers
                .ok_or_else(|| missing("SignedHeaders"))?
                .split(';')
                .filter(|h| !h.is_empty())
                .collect(),
            signature,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    // AWS's worked example of a signed request ("Create a signed AWS API request", the IAM
    // ListUsers request signed on 2015-08-30 with the documented example key): the SDK's signer
    // gives AWS's published signature, so the check follows the specification, not itself.
    const EXAMPLE_SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
    const EXAMPLE_SIGNATURE: &str =
        "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7";

    fn example_time() -> SystemTime {
        chrono::DateTime::parse_from_rfc3339("2015-08-30T12:36:00Z")
            .unwrap()
            .into()
    }

    #[test]
    fn the_signer_gives_aws_published_signature_for_its_example() {
        let identity = Credentials::new("AKIDEXAMPLE", EXAMPLE_SECRET, None, None, "test").into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region("us-east-1")
            .name("iam")
            .time(example_time())
            .settings(SigningSettings::default())
            .build()
            .unwrap()
            .into();
        let headers = [(
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8",
        )];
        let request = SignableRequest::new(
            "GET",
            "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08",
            headers.into_iter(),
            SignableBody::Bytes(b""),
        )
        .unwrap();
        let (_, signature) = http_request::sign(request, &params).unwrap().into_parts();
        assert_eq!(signature, EXAMPLE_SIGNATURE);
    }

    fn signed_request(secret: &str, now: SystemTime) -> (HeaderMap, &'static str) {
        let url = "http://127.0.0.1:8080/documents?limit=5&status=indexed";
        let creds = Credentials::new("AKIDLOCAL", secret, None, None, "test");
        let s = sign(
            "POST",
            url,
            &[("content-type", "application/json")],
            b"{\"q\":1}",
            &creds,
            "us-east-1",
            now,
        )
        .unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("127.0.0.1:8080"));
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        for (k, v) in s.headers {
            headers.insert(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(&v).unwrap(),
            );
        }
        (headers, url)
    }

    #[test]
    fn a_request_signed_with_a_known_key_passes_and_any_change_fails() {
        let keys = LocalKeys::parse("AKIDLOCAL:right-secret").unwrap();
        let now = SystemTime::now();
        let (headers, url) = signed_request("right-secret", now);
        let body = b"{\"q\":1}";
        assert_eq!(
            keys.verify("POST", url, &headers, body, now).as_deref(),
            Ok("AKIDLOCAL")
        );
        // A wrong secret, a changed body, a changed query, another method: each refused.
        let (wrong, _) = signed_request("wrong-secret", now);
        assert_eq!(
            keys.verify("POST", url, &wrong, body, now),
            Err(Rejected::Mismatch)
        );
        assert_eq!(
            keys.verify("POST", url, &headers, b"{\"q\":2}", now),
            Err(Rejected::Mismatch)
        );
        let other = url.replace("limit=5", "limit=6");
        assert_eq!(
            keys.verify("POST", &other, &headers, body, now),
            Err(Rejected::Mismatch)
        );
        assert_eq!(
            keys.verify("GET", url, &headers, body, now),
            Err(Rejected::Mismatch)
        );
        // Too old, an unknown key, no signature at all.
        let later = now + MAX_SKEW + Duration::from_secs(60);
        assert_eq!(
            keys.verify("POST", url, &headers, body, later),
            Err(Rejected::Stale)
        );
        let other_keys = LocalKeys::parse("AKIDOTHER:right-secret").unwrap();
        assert!(matches!(
            other_keys.verify("POST", url, &headers, body, now),
            Err(Rejected::UnknownKey(_))
        ));
        let mut unsigned = headers.clone();
        unsigned.remove("authorization");
        assert_eq!(
            keys.verify("POST", url, &unsigned, body, now),
            Err(Rejected::Unsigned)
        );
    }

    #[test]
    fn malformed_authorization_headers_and_key_lists_are_refused_with_a_reason() {
        let keys = LocalKeys::parse("A:b").unwrap();
        for header in [
            "Bearer abc",
            "AWS4-HMAC-SHA256 Credential=A/20260101/us-east-1/execute-api, SignedHeaders=host, Signature=00",
            "AWS4-HMAC-SHA256 SignedHeaders=host, Signature=0000000000000000000000000000000000000000000000000000000000000000",
        ] {
            let mut headers = HeaderMap::new();
            headers.insert("authorization", HeaderValue::from_str(header).unwrap());
            assert!(
                matches!(
                    keys.verify("GET", "http://h/", &headers, b"", SystemTime::now()),
                    Err(Rejected::Malformed(_))
                ),
                "{header}"
            );
        }
        assert!(LocalKeys::parse("").is_err());
        assert!(LocalKeys::parse("no-secret").is_err());
        assert!(LocalKeys::parse(":secret").is_err());
    }
}
