//! What an upload says of its version: the work it is of and the version's dates, beside the
//! `version` and `regulation_type` every document has. A registration gives them in its body
//! (`work`, `promulgated`, `effective_from`, `effective_to`); a plain upload gives them as S3 object
//! metadata (`x-amz-meta-work`, `-version`, `-regulation-type`, `-promulgated`, `-effective-from`,
//! `-effective-to`). They are checked when the upload is taken in, kept in the document's
//! `metadata.version_of`, and beat what the text says at the index commit ([`super::versions`]).
//!
//! A version is named by its work and label. Two uploads that name the same version with different
//! dates collide: the second is refused, never merged into the first.

use super::work_title::{level_from_title, work_key};
use docpipe_db::{works, DbError};
use docpipe_parse::article_ref::normalize_law_name;
use docpipe_parse::version_dates::{Day, GivenDates};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use tokio_postgres::GenericClient;

/// The key of `documents.metadata` that keeps the claim.
pub const METADATA_KEY: &str = "version_of";

/// The longest work title an upload may give (the `works.title` column).
const WORK_CHARS: usize = 512;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionClaim {
    /// The title the work is cited by ("中华人民共和国公司法"); its normalised form names the work.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub work: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promulgated: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_to: Option<String>,
}

/// A claim that cannot be taken: the field, named as the upload spelled it, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {reason}")]
pub struct ClaimError {
    pub field: String,
    pub reason: String,
}

/// How the upload spelled each field: the registration's JSON names or the object's metadata
/// headers.
#[derive(Debug, Clone, Copy)]
pub enum Spelling {
    Registration,
    ObjectMetadata,
}

impl Spelling {
    fn field(self, name: &str) -> String {
        match self {
            Spelling::Registration => name.to_string(),
            Spelling::ObjectMetadata => format!("x-amz-meta-{}", name.replace('_', "-")),
        }
    }
}

impl VersionClaim {
    pub fn is_empty(&self) -> bool {
        self == &VersionClaim::default()
    }

    /// The claim as `documents.metadata` keeps it (`{}` when empty).
    pub fn as_metadata(&self) -> serde_json::Value {
        if self.is_empty() {
            serde_json::json!({})
        } else {
            serde_json::json!({ METADATA_KEY: self })
        }
    }

    /// The claim a document's metadata keeps, if any.
    pub fn of_document(metadata: &serde_json::Value) -> Option<VersionClaim> {
        serde_json::from_value(metadata.get(METADATA_KEY)?.clone()).ok()
    }

    /// The dates, parsed and checked against each other.
    pub fn dates(&self, spelling: Spelling) -> Result<GivenDates, ClaimError> {
        let day = |name: &str, value: &Option<String>| -> Result<Option<Day>, ClaimError> {
            let Some(value) = value else { return Ok(None) };
            Day::parse_iso(value.trim())
                .map(Some)
                .ok_or_else(|| ClaimError {
                    field: spelling.field(name),
                    reason: format!("{value:?} is not a date (YYYY-MM-DD)"),
                })
        };
        let given = GivenDates {
            promulgated: day("promulgated", &self.promulgated)?,
            effective_from: day("effective_from", &self.effective_from)?,
            effective_to: day("effective_to", &self.effective_to)?,
        };
        given.check().map_err(|c| ClaimError {
            field: spelling.field(c.later_field),
            reason: c.to_string(),
        })?;
        Ok(given)
    }

    /// Every check that needs no database: the work's title fits and the dates agree.
    pub fn check(&self, spelling: Spelling) -> Result<GivenDates, ClaimError> {
        let work = self.work.trim();
        let invalid = |reason: String| ClaimError {
            field: spelling.field("work"),
            reason,
        };
        if work.chars().count() > WORK_CHARS {
            return Err(invalid(format!("must be at most {WORK_CHARS} characters")));
        }
        if work.chars().any(char::is_control) {
            return Err(invalid("must not contain control characters".into()));
        }
        if !self.work.is_empty() && normalize_law_name(work).is_empty() {
            return Err(invalid(format!("{work:?} names no regulation")));
        }
        self.dates(spelling)
    }

    /// The work the claim names, as (title key, level), when it names one. The level is the
    /// upload's `regulation_type`, else what the title's form says.
    pub fn work_key(&self, regulation_type: &str) -> Option<(String, String)> {
        let work = self.work.trim();
        if work.is_empty() {
            return None;
        }
        let level = match regulation_type.trim() {
            "" => level_from_title(work).to_string(),
            given => given.to_string(),
        };
        Some((work_key(&normalize_law_name(work)).to_string(), level))
    }
}

/// Why the version an upload names collides with one already recorded under the same work and
/// label: a date both give, given differently. None when it does not collide (or names no work,
/// so that its version is only known once its text is read).
pub async fn collision(
    c: &impl GenericClient,
    organ_id: &str,
    claim: &VersionClaim,
    given: &GivenDates,
    version: &str,
    regulation_type: &str,
) -> Result<Option<String>, DbError> {
    let (Some((title_key, level)), label) = (claim.work_key(regulation_type), version.trim())
    else {
        return Ok(None);
    };
    if label.is_empty() {
        return Ok(None);
    }
    let Some(recorded) = works::recorded_version(c, organ_id, &title_key, &level, label).await?
    else {
        return Ok(None);
    };
    let pairs = [
        ("promulgated", given.promulgated, &recorded.promulgated_on),
        (
            "effective_from",
            given.effective_from,
            &recorded.effective_from,
        ),
        ("effective_to", given.effective_to, &recorded.effective_to),
    ];
    for (name, given, recorded_day) in pairs {
        if let (Some(given), Some(recorded_day)) = (given, recorded_day) {
            if given.to_string() != *recorded_day {
                return Ok(Some(format!(
                    "version {label:?} of {:?} is already recorded (work {}, documents {}) with \
                     {name} {recorded_day}; this upload gives {given}: name another version, or \
                     give the recorded dates",
                    claim.work.trim(),
                    recorded.work_id,
                    recorded.documents.join(", ")
                )));
            }
        }
    }
    Ok(None)
}

/// What a plain upload's object metadata says of its version: (`version`, `regulation_type`,
/// the claim). S3 keeps user metadata keys in lower case; a value that is not US-ASCII arrives
/// encoded as RFC 2047 says (`=?UTF-8?B?…?=`), which AWS does for such values.
pub fn from_object_metadata(
    metadata: &HashMap<String, String>,
) -> Result<(String, String, VersionClaim), ClaimError> {
    let get = |name: &str| -> Result<Option<String>, ClaimError> {
        let Some(raw) = metadata.get(name) else {
            return Ok(None);
        };
        let value = decode_rfc2047(raw).ok_or_else(|| ClaimError {
            field: format!("x-amz-meta-{name}"),
            reason: "is not valid RFC 2047 (=?UTF-8?B?…?= or =?UTF-8?Q?…?=) UTF-8".into(),
        })?;
        Ok(Some(value.trim().to_string()).filter(|v| !v.is_empty()))
    };
    let claim = VersionClaim {
        work: get("work")?.unwrap_or_default(),
        promulgated: get("promulgated")?,
        effective_from: get("effective-from")?,
        effective_to: get("effective-to")?,
    };
    Ok((
        get("version")?.unwrap_or_default(),
        get("regulation-type")?.unwrap_or_default(),
        claim,
    ))
}

/// A header value with its RFC 2047 encoded words decoded (UTF-8 only); a value without any is
/// taken as it is. None when an encoded word is malformed or not UTF-8.
fn decode_rfc2047(value: &str) -> Option<String> {
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("=?") {
        let (before, word) = rest.split_at(start);
        // Whitespace between two encoded words is not part of the text.
        if !(out.last().is_some() && before.trim().is_empty()) {
            out.extend_from_slice(before.as_bytes());
        }
        let mut parts = word[2..].splitn(3, '?');
        let (charset, encoding, tail) = (parts.next()?, parts.next()?, parts.next()?);
        let end = tail.find("?=")?;
        if !charset.eq_ignore_ascii_case("utf-8") {
            return None;
        }
        let text = &tail[..end];
        match encoding {
            "B" | "b" => out.extend(base64_decode(text)?),
            "Q" | "q" => out.extend(quoted_decode(text)?),
            _ => return None,
        }
        rest = &tail[end + 2..];
    }
    out.extend_from_slice(rest.as_bytes());
    String::from_utf8(out).ok()
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes = text.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for group in bytes.chunks(4) {
        if group.len() == 1 {
            return None;
        }
        let mut n = 0u32;
        for (i, &c) in group.iter().enumerate() {
            n |= value(c)? << (18 - 6 * i);
        }
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&decoded[..group.len() - 1]);
    }
    Some(out)
}

fn quoted_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'_' => out.push(b' '),
            b'=' => {
                let hex = text.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_words_are_decoded() {
        // "公司法" in UTF-8, base64 and quoted-printable.
        assert_eq!(
            decode_rfc2047("=?UTF-8?B?5YWs5Y+45rOV?=").unwrap(),
            "公司法"
        );
        assert_eq!(
            decode_rfc2047("=?utf-8?Q?=E5=85=AC=E5=8F=B8=E6=B3=95?=").unwrap(),
            "公司法"
        );
        assert_eq!(
            decode_rfc2047("=?UTF-8?B?5YWs?= =?UTF-8?B?5Y+45rOV?=").unwrap(),
            "公司法"
        );
        assert_eq!(decode_rfc2047("2018-10-26").unwrap(), "2018-10-26");
        assert!(decode_rfc2047("=?UTF-8?B?5YWs").is_none());
        assert!(decode_rfc2047("=?latin1?Q?abc?=").is_none());
        assert!(decode_rfc2047("=?UTF-8?B?/w==?=").is_none(), "not UTF-8");
    }

    #[test]
    fn object_metadata_names_the_version() {
        let metadata: HashMap<String, String> = [
            ("work", "=?UTF-8?B?5YWs5Y+45rOV?="),
            ("version", "2018修正"),
            ("regulation-type", "法律"),
            ("effective-from", "2018-10-26"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let (version, level, claim) = from_object_metadata(&metadata).unwrap();
        assert_eq!((version.as_str(), level.as_str()), ("2018修正", "法律"));
        assert_eq!(claim.work, "公司法");
        assert_eq!(claim.effective_from.as_deref(), Some("2018-10-26"));
        assert_eq!(
            claim.work_key(""),
            Some(("公司法".to_string(), "法律".to_string()))
        );
    }

    #[test]
    fn bad_claims_name_their_field() {
        let claim = VersionClaim {
            promulgated: Some("2020-05-01".into()),
            effective_from: Some("2020-01-01".into()),
            ..VersionClaim::default()
        };
        let err = claim.check(Spelling::ObjectMetadata).unwrap_err();
        assert_eq!(err.field, "x-amz-meta-effective-from");
        assert!(err.reason.contains("contradict"), "{err}");
        let claim = VersionClaim {
            effective_to: Some("2020-02-30".into()),
            ..VersionClaim::default()
        };
        assert_eq!(
            claim.check(Spelling::Registration).unwrap_err().field,
            "effective_to"
        );
        let claim = VersionClaim {
            work: "《》".into(),
            ..VersionClaim::default()
        };
        assert!(claim.check(Spelling::Registration).is_err());
        assert!(VersionClaim::default()
            .check(Spelling::Registration)
            .is_ok());
        assert_eq!(VersionClaim::default().as_metadata(), serde_json::json!({}));
    }
}
