//! HTTP helpers shared by the handlers: Hub-shaped errors, URL pieces, byte ranges and timestamps.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::store::StoreError;

/// An error answer shaped like the Hub's: status, `X-Error-Code`, `X-Error-Message` and `{"error": ...}`.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: Option<&'static str>,
    pub message: String,
    /// Sent as `X-Repo-Commit` (the Hub does so for a missing entry at a known commit).
    pub commit: Option<String>,
    /// Extra JSON fields (e.g. `url` on a 409 from `create_repo`).
    pub extra: Option<serde_json::Value>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: Option<&'static str>, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            commit: None,
            extra: None,
        }
    }
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, Some("BadRequest"), message)
    }
    pub fn repo_not_found(repo_id: &str) -> Self {
        Self::repo_not_found_because(format!(
            "Repository Not Found for `{repo_id}`: it does not exist, or it is private and your token \
             (if any) is not a member of its namespace"
        ))
    }
    /// 404 `RepoNotFound` (the class clients map to RepositoryNotFoundError) with its own explanation.
    pub fn repo_not_found_because(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, Some("RepoNotFound"), message)
    }
    pub fn revision_not_found(rev: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            Some("RevisionNotFound"),
            format!("Invalid rev id: {rev}"),
        )
    }
    pub fn entry_not_found(path: &str, commit: &str) -> Self {
        let mut e = Self::new(
            StatusCode::NOT_FOUND,
            Some("EntryNotFound"),
            format!("Entry not found: `{path}` does not exist at commit {commit}"),
        );
        e.commit = Some(commit.to_owned());
        e
    }
    /// Status 401 with `code` `InvalidCredentials` (unknown token) or `AuthenticationRequired` (no token):
    /// the client maps neither to a special class, so it behaves as with the Hub's code-less 401.
    pub fn unauthorized(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, Some(code), message)
    }
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, Some("Forbidden"), message)
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, None, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, None, message)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        use crate::model::ApplyError;
        let msg = e.to_string();
        match e {
            StoreError::Db(_) | StoreError::Io(_) | StoreError::CorruptTree(..) => {
                tracing::error!("storage failure: {msg}");
                ApiError::internal(format!("internal storage error: {msg}"))
            }
            StoreError::Invalid(_) => ApiError::bad_request(msg),
            StoreError::RepoExists(_)
            | StoreError::RepoCaseConflict { .. }
            | StoreError::RefExists(..)
            | StoreError::RefNameTaken { .. } => {
                ApiError::new(StatusCode::CONFLICT, Some("Conflict"), msg)
            }
            StoreError::RepoNotFound(key) => ApiError::repo_not_found(&key.id()),
            StoreError::RevisionNotFound(rev) => ApiError::revision_not_found(&rev),
            StoreError::RefNotFound(..) => {
                ApiError::new(StatusCode::NOT_FOUND, Some("RevisionNotFound"), msg)
            }
            StoreError::DeleteMain => ApiError::forbidden(msg),
            StoreError::ParentMismatch { .. } => ApiError::new(
                StatusCode::PRECONDITION_FAILED,
                Some("ParentCommitMismatch"),
                msg,
            ),
            StoreError::Apply(ApplyError::MissingFile(_)) => {
                ApiError::new(StatusCode::NOT_FOUND, Some("EntryNotFound"), msg)
            }
            StoreError::Apply(ApplyError::FileDirConflict(..)) => ApiError::bad_request(msg),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.message });
        if let (Some(serde_json::Value::Object(extra)), Some(obj)) =
            (self.extra, body.as_object_mut())
        {
            obj.extend(extra);
        }
        let mut resp = (self.status, axum::Json(body)).into_response();
        let h = resp.headers_mut();
        if let Some(code) = self.code {
            h.insert("x-error-code", HeaderValue::from_static(code));
        }
        // Header values must be visible ASCII; the JSON body keeps the exact text.
        let ascii: String = self
            .message
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() || c == ' ' {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        if let Ok(v) = HeaderValue::from_str(&ascii) {
            h.insert("x-error-message", v);
        }
        if let Some(commit) = self.commit.and_then(|c| HeaderValue::from_str(&c).ok()) {
            h.insert("x-repo-commit", commit);
        }
        resp
    }
}

/// `scheme://host[:port]` of the request, so every URL we return points where the client connected.
pub fn base_url(headers: &HeaderMap) -> String {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let proto = match get("x-forwarded-proto") {
        Some(p) if p.eq_ignore_ascii_case("https") => "https",
        _ => "http",
    };
    let host = get("x-forwarded-host")
        .and_then(authority)
        .or_else(|| get("host").and_then(authority))
        .unwrap_or("127.0.0.1");
    format!("{proto}://{host}")
}

/// `host[:port]` (the first of a proxy chain's comma-separated list) if it has only the characters of a
/// host name, IPv6 literal and port, so it cannot bend the URLs (or the `Link` header) built from it.
fn authority(value: &str) -> Option<&str> {
    let first = value.split(',').next()?.trim();
    let ok = !first.is_empty()
        && first
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:[]".contains(&b));
    ok.then_some(first)
}

/// Percent-decode one URL segment (or a run of segments), refusing invalid UTF-8.
pub fn decode(segment: &str) -> Result<String, ApiError> {
    percent_encoding::percent_decode_str(segment)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| {
            ApiError::bad_request(format!(
                "URL segment `{segment}` is not valid UTF-8 once decoded"
            ))
        })
}

/// Percent-encode a value for use inside one URL segment.
pub fn encode_segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Query parameters as (key, value) pairs.
pub fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

/// A query flag: `true`/`True`/`1` (0.36 clients send Python-style booleans).
pub fn query_flag(pairs: &[(String, String)], key: &str) -> bool {
    pairs
        .iter()
        .any(|(k, v)| k == key && (v.eq_ignore_ascii_case("true") || v == "1"))
}

pub fn query_value<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// What a `Range` header asks of a body of `size` bytes.
#[derive(Debug, PartialEq, Eq)]
pub enum RangeRequest {
    /// No usable single range: send everything with 200.
    Full,
    /// Inclusive byte range: send 206.
    Partial(u64, u64),
    /// Send 416.
    Unsatisfiable,
}

/// A byte position of a range spec: ASCII digits only (no sign, no `+`), saturating at `u64::MAX`, so a
/// position past any real file is still "past the end" rather than a parse error.
fn range_pos(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.bytes().fold(0u64, |n, b| {
        n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
    }))
}

/// RFC 9110 §14.1.2 for one range. A syntactically invalid spec (bad unit, signs, `a-b` with `b < a`,
/// several ranges) is ignored and the whole body is sent; a valid one that starts past the end is a 416.
pub fn parse_range(header: Option<&str>, size: u64) -> RangeRequest {
    let Some(spec) = header.and_then(|h| h.trim().strip_prefix("bytes=")) else {
        return RangeRequest::Full;
    };
    if spec.contains(',') {
        // Multipart ranges are optional (RFC 9110); answering with the full body is allowed.
        return RangeRequest::Full;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeRequest::Full;
    };
    let (a, b) = (a.trim(), b.trim());
    let last = size.saturating_sub(1);
    let (start, end) = if a.is_empty() {
        // Suffix range: the last `n` bytes (all of them if `n` exceeds the size).
        match range_pos(b) {
            None => return RangeRequest::Full,
            Some(0) => return RangeRequest::Unsatisfiable,
            Some(n) => (size.saturating_sub(n), last),
        }
    } else {
        let Some(start) = range_pos(a) else {
            return RangeRequest::Full;
        };
        let end = if b.is_empty() {
            last
        } else {
            match range_pos(b) {
                Some(e) if e >= start => e.min(last),
                _ => return RangeRequest::Full,
            }
        };
        (start, end)
    };
    if size == 0 || start >= size {
        RangeRequest::Unsatisfiable
    } else {
        RangeRequest::Partial(start, end)
    }
}

/// `YYYY-MM-DDTHH:MM:SS.000Z`, the one format `huggingface_hub` parses.
pub fn iso8601(unix_secs: i64) -> String {
    let days = unix_secs.div_euclid(86_400);
    let secs = unix_secs.rem_euclid(86_400);
    // Civil-from-days (proleptic Gregorian), after Howard Hinnant's public-domain algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.000Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn base_url_takes_only_well_formed_forwarded_values() {
        let url = |pairs: &[(&'static str, &'static str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, v.parse().unwrap());
            }
            super::base_url(&h)
        };
        assert_eq!(url(&[("host", "hub:8790")]), "http://hub:8790");
        assert_eq!(
            url(&[
                ("host", "10.0.0.5:8790"),
                ("x-forwarded-host", "hub.example, proxy2"),
                ("x-forwarded-proto", "HTTPS")
            ]),
            "https://hub.example"
        );
        assert_eq!(
            url(&[
                ("host", "[::1]:8790"),
                ("x-forwarded-host", "evil>; rel=\"x\""),
                ("x-forwarded-proto", "javascript")
            ]),
            "http://[::1]:8790"
        );
        assert_eq!(url(&[("host", "a b")]), "http://127.0.0.1");
    }

    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range(None, 10), RangeRequest::Full);
        assert_eq!(
            parse_range(Some("bytes=2-5"), 10),
            RangeRequest::Partial(2, 5)
        );
        assert_eq!(
            parse_range(Some("bytes=2-"), 10),
            RangeRequest::Partial(2, 9)
        );
        assert_eq!(
            parse_range(Some("bytes=-3"), 10),
            RangeRequest::Partial(7, 9)
        );
        assert_eq!(
            parse_range(Some("bytes=5-100"), 10),
            RangeRequest::Partial(5, 9)
        );
        assert_eq!(
            parse_range(Some("bytes=10-"), 10),
            RangeRequest::Unsatisfiable
        );
        assert_eq!(
            parse_range(Some("bytes=0-"), 0),
            RangeRequest::Unsatisfiable
        );
        assert_eq!(parse_range(Some("bytes=5-2"), 10), RangeRequest::Full);
        assert_eq!(parse_range(Some("bytes=0-1,3-4"), 10), RangeRequest::Full);
        assert_eq!(parse_range(Some("items=0-1"), 10), RangeRequest::Full);
        // Positions beyond u64 saturate: still a valid range, clamped to the file or past its end.
        assert_eq!(
            parse_range(Some("bytes=0-99999999999999999999999"), 10),
            RangeRequest::Partial(0, 9)
        );
        assert_eq!(
            parse_range(Some("bytes=99999999999999999999999-"), 10),
            RangeRequest::Unsatisfiable
        );
        assert_eq!(
            parse_range(Some("bytes=-99999999999999999999999"), 10),
            RangeRequest::Partial(0, 9)
        );
        assert_eq!(
            parse_range(Some("bytes=-20"), 10),
            RangeRequest::Partial(0, 9)
        );
        // Malformed specs are ignored (whole body), not refused.
        for bad in [
            "bytes=-",
            "bytes=-5-",
            "bytes=+1-2",
            "bytes=1-+2",
            "bytes=a-",
            "bytes=1.5-2",
        ] {
            assert_eq!(parse_range(Some(bad), 10), RangeRequest::Full, "{bad}");
        }
        assert_eq!(
            parse_range(Some("bytes=-0"), 10),
            RangeRequest::Unsatisfiable
        );
    }

    #[test]
    fn timestamps() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_660_893_578), "2022-08-19T07:19:38.000Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn errors_carry_hub_headers() {
        let resp = ApiError::entry_not_found("a.txt", &"c".repeat(40)).into_response();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        assert_eq!(resp.headers()["x-error-code"], "EntryNotFound");
        assert_eq!(resp.headers()["x-repo-commit"], "c".repeat(40).as_str());
    }
}
