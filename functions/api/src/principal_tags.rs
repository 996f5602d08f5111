//! `AuthMode=iam`: a caller's tenant is its IAM principal's tag `docpipe-organ-id` (and the tag
//! `docpipe-publisher=true` makes a caller of the `public` tenant a publisher). API Gateway's IAM
//! authorizer hands the API the principal's ARN, not its tags, so the API reads them from IAM
//! (`ListRoleTags` for an assumed role, `ListUserTags` for a user), signed with the function's own
//! credentials, and keeps each principal's answer for [`CACHE_TTL`]. The template's caller and
//! reviewer policies let only a principal carrying the tag invoke the API at all.

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

/// The tag naming a principal's tenant.
pub const TENANT_TAG: &str = "docpipe-organ-id";
/// The tag (value `true`) that makes a principal of the public tenant a publisher.
pub const PUBLISHER_TAG: &str = "docpipe-publisher";
/// How long a principal's tags are taken as read: a tag changed in IAM holds in the API after
/// at most this long.
pub const CACHE_TTL: Duration = Duration::from_secs(60);
/// Principals kept at most (a full cache starts again empty).
const MAX_CACHED: usize = 4_096;
/// IAM's global endpoint signs for us-east-1.
const IAM_REGION: &str = "us-east-1";
pub const IAM_ENDPOINT: &str = "https://iam.amazonaws.com";

/// What a principal's tags say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tagged {
    pub tenant: Option<String>,
    pub publisher: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum TagError {
    #[error("the caller {0:?} is no IAM role or user whose tags can be read")]
    NotAPrincipal(String),
    #[error("IAM did not answer: {0}")]
    Unavailable(String),
    #[error("IAM refused to list the tags of {principal}: HTTP {status}: {body}")]
    Refused {
        principal: String,
        status: u16,
        body: String,
    },
}

/// The role or user an IAM authorizer's ARN names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Principal {
    Role(String),
    User(String),
}

fn principal_of(arn: &str) -> Option<Principal> {
    let resource = arn.splitn(6, ':').nth(5)?;
    let mut parts = resource.split('/');
    match parts.next()? {
        // arn:aws:sts::123456789012:assumed-role/NAME/SESSION
        "assumed-role" => parts.next().map(|n| Principal::Role(n.to_string())),
        // arn:aws:iam::123456789012:role/PATH/NAME, user/PATH/NAME: the name is last.
        "role" => resource
            .rsplit('/')
            .next()
            .map(|n| Principal::Role(n.to_string())),
        "user" => resource
            .rsplit('/')
            .next()
            .map(|n| Principal::User(n.to_string())),
        _ => None,
    }
    .filter(|p| match p {
        Principal::Role(n) | Principal::User(n) => !n.is_empty(),
    })
}

/// Reads principals' tags from IAM.
pub struct PrincipalTags {
    http: reqwest::Client,
    endpoint: String,
    tag_key: String,
    credentials: SharedCredentialsProvider,
    cache: Mutex<HashMap<String, (Instant, Tagged)>>,
}

impl PrincipalTags {
    /// Reads the tag `tag_key` (the template's [`TENANT_TAG`]) from IAM at `endpoint`.
    pub fn new(
        endpoint: &str,
        tag_key: &str,
        credentials: SharedCredentialsProvider,
    ) -> PrincipalTags {
        PrincipalTags {
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(3))
                .timeout(Duration::from_secs(5))
                .build()
                .expect("an HTTP client"),
            endpoint: endpoint.trim_end_matches('/').to_string(),
            tag_key: tag_key.to_string(),
            credentials,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The tenant and publisher role of the principal `arn` names.
    pub async fn of(&self, arn: &str) -> Result<Tagged, TagError> {
        if let Some((at, tagged)) = self.cache.lock().expect("not poisoned").get(arn) {
            if at.elapsed() < CACHE_TTL {
                return Ok(tagged.clone());
            }
        }
        let principal = principal_of(arn).ok_or_else(|| TagError::NotAPrincipal(arn.into()))?;
        let tags = self.list_tags(&principal).await?;
        let tagged = Tagged {
            tenant: tags
                .get(&self.tag_key)
                .map(|t| t.trim().to_string())
                .filter(|t| docpipe_core::tenant::is_valid_organ_id(t)),
            publisher: tags.get(PUBLISHER_TAG).is_some_and(|v| v.trim() == "true"),
        };
        let mut cache = self.cache.lock().expect("not poisoned");
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(arn.to_string(), (Instant::now(), tagged.clone()));
        Ok(tagged)
    }

    async fn list_tags(&self, principal: &Principal) -> Result<HashMap<String, String>, TagError> {
        let (action, field, name) = match principal {
            Principal::Role(n) => ("ListRoleTags", "RoleName", n),
            Principal::User(n) => ("ListUserTags", "UserName", n),
        };
        let body = format!(
            "Action={action}&Version=2010-05-08&MaxItems=100&{field}={}",
            form_encode(name)
        );
        let url = format!("{}/", self.endpoint);
        let content_type = "application/x-www-form-urlencoded; charset=utf-8";
        let credentials = self
            .credentials
            .provide_credentials()
            .await
            .map_err(|e| TagError::Unavailable(docpipe_core::error::chain(&e)))?;
        let signed = crate::sigv4::sign_for(
            "iam",
            "POST",
            &url,
            &[("content-type", content_type)],
            body.as_bytes(),
            &credentials,
            IAM_REGION,
            SystemTime::now(),
        )
        .map_err(|e| TagError::Unavailable(e.to_string()))?;
        let mut request = self
            .http
            .post(&url)
            .header("content-type", content_type)
            .body(body);
        for (name, value) in signed.headers {
            request = request.header(name, value);
        }
        let answer = request
            .send()
            .await
            .map_err(|e| TagError::Unavailable(docpipe_core::error::chain(&e)))?;
        let status = answer.status();
        let text = answer
            .text()
            .await
            .map_err(|e| TagError::Unavailable(docpipe_core::error::chain(&e)))?;
        if !status.is_success() {
            return Err(TagError::Refused {
                principal: name.clone(),
                status: status.as_u16(),
                body: text.chars().take(300).collect(),
            });
        }
        Ok(tags_in(&text))
    }
}

/// `application/x-www-form-urlencoded`, as IAM's query API reads it.
fn form_encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The tags of an IAM `List…Tags` answer: each `<member>` holds a `<Key>` and a `<Value>`.
fn tags_in(xml: &str) -> HashMap<String, String> {
    let between = |s: &str, open: &str, close: &str| -> Option<String> {
        let start = s.find(open)? + open.len();
        let end = s[start..].find(close)? + start;
        Some(unescape(&s[start..end]))
    };
    xml.split("<member>")
        .skip(1)
        .filter_map(|member| {
            let member = member.split("</member>").next()?;
            Some((
                between(member, "<Key>", "</Key>")?,
                between(member, "<Value>", "</Value>").unwrap_or_default(),
            ))
        })
        .collect()
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_authorizers_arn_names_a_role_or_a_user() {
        assert_eq!(
            principal_of("arn:aws:sts::123456789012:assumed-role/docpipe-operator/ops-session"),
            Some(Principal::Role("docpipe-operator".into()))
        );
        assert_eq!(
            principal_of("arn:aws:iam::123456789012:user/team/alice"),
            Some(Principal::User("alice".into()))
        );
        assert_eq!(
            principal_of("arn:aws:iam::123456789012:role/svc/reader"),
            Some(Principal::Role("reader".into()))
        );
        assert_eq!(principal_of("arn:aws:iam::123456789012:root"), None);
        assert_eq!(principal_of("nonsense"), None);
    }

    #[test]
    fn the_tags_are_read_from_an_iam_answer() {
        let xml = "<ListRoleTagsResponse><ListRoleTagsResult><IsTruncated>false</IsTruncated>\
                   <Tags><member><Key>docpipe-organ-id</Key><Value>acme</Value></member>\
                   <member><Key>team</Key><Value>a &amp; b</Value></member></Tags>\
                   </ListRoleTagsResult></ListRoleTagsResponse>";
        let tags = tags_in(xml);
        assert_eq!(tags.get(TENANT_TAG).map(String::as_str), Some("acme"));
        assert_eq!(tags.get("team").map(String::as_str), Some("a & b"));
        assert_eq!(form_encode("a b/é"), "a%20b%2F%C3%A9");
    }
}
