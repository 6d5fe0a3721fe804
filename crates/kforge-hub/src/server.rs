//! The HTTP server (axum): the subset of the HF Hub API that `huggingface_hub` and `kernels` use, for the
//! `model` and `kernel` repo types. Routing is done by hand on the raw path so that `%2F` inside a revision
//! or path segment and the `kernels/` resolve prefix are never ambiguous.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use base64::Engine as _;
use http_body_util::BodyExt;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::{Identity, can_read, random_hex};
use crate::blobs::{BlobStore, FsBlobStore, PutError, is_sha256};
use crate::http::{
    ApiError, RangeRequest, base_url, decode, iso8601, parse_range, query_flag, query_pairs,
    query_value,
};
use crate::model::{
    BlobInfo, Commit, CommitRequest, Listing, Op, RESERVED_NAMESPACES, RefKind, Repo, RepoKey,
    RepoType, Tree,
};
use crate::paths::validate_repo_path;
use crate::store::{MetaStore, SqliteStore, StoreError};

/// The database file inside a data directory.
pub fn db_path(data_dir: &Path) -> PathBuf {
    data_dir.join("hub.sqlite")
}

/// Limits and settings of a running hub.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// Largest commit body (NDJSON with base64-inlined files), in bytes. Commits are buffered in memory
    /// (clients build them in memory too), so this also bounds the memory one request can take.
    pub max_commit: u64,
    /// Largest single uploaded object (LFS PUT, streamed to disk), in bytes.
    pub max_upload: u64,
    /// A connection on which no read or write completes for this long is closed (stalled clients).
    pub idle_timeout: std::time::Duration,
    /// LFS upload tickets outstanding at once, over all repos: bounds the memory batch requests can claim.
    pub max_pending_uploads: usize,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            max_commit: 1 << 30,
            max_upload: 64 << 30,
            idle_timeout: std::time::Duration::from_secs(30),
            max_pending_uploads: 100_000,
        }
    }
}

/// JSON bodies other than commits and uploads are small; this caps them.
const MAX_JSON_BODY: usize = 8 << 20;
/// Entries per tree page (the Hub uses 1000).
const TREE_PAGE: usize = 1000;
/// Commits per history page (the Hub pages `list_repo_commits` too).
const COMMITS_PAGE: usize = 1000;
/// How long an LFS upload ticket stays valid.
const TICKET_TTL: Duration = Duration::from_secs(3600);

struct Ticket {
    /// The repo whose writer asked; a finished upload grants it the blob.
    repo: Repo,
    oid: String,
    size: u64,
    expires: Instant,
}

/// The shared state of a hub: metadata store, blob store, settings and pending LFS upload tickets.
pub struct Hub {
    pub meta: Arc<dyn MetaStore>,
    pub blobs: Arc<dyn BlobStore>,
    pub config: HubConfig,
    tickets: Mutex<HashMap<String, Ticket>>,
    /// Exclusive lock on `DATA/hub.lock` while this hub serves the directory (released on drop).
    _lock: Option<std::fs::File>,
}

impl Hub {
    /// Open the default storage (SQLite + filesystem blobs) in `data_dir`, creating it if needed.
    /// Two hubs on one data directory would delete each other's in-flight uploads at start-up, so the
    /// directory is locked for as long as the hub lives.
    pub fn open(data_dir: &Path, config: HubConfig) -> Result<Hub, StoreError> {
        std::fs::create_dir_all(data_dir)?;
        let lock_path = data_dir.join("hub.lock");
        let lock = std::fs::File::create(&lock_path)?;
        if let Err(e) = lock.try_lock() {
            return Err(StoreError::Invalid(format!(
                "{}: another kforge hub is serving this data directory ({e}); stop it or pick another --data",
                lock_path.display()
            )));
        }
        let mut hub = Hub::with_stores(
            Arc::new(SqliteStore::open(&db_path(data_dir))?),
            Arc::new(FsBlobStore::open(data_dir)?),
            config,
        );
        hub._lock = Some(lock);
        Ok(hub)
    }

    pub fn with_stores(
        meta: Arc<dyn MetaStore>,
        blobs: Arc<dyn BlobStore>,
        config: HubConfig,
    ) -> Hub {
        Hub {
            meta,
            blobs,
            config,
            tickets: Mutex::new(HashMap::new()),
            _lock: None,
        }
    }
}

/// What a garbage collection removed (or, with `dry_run`, would remove).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GcReport {
    pub blobs_kept: usize,
    pub blobs_removed: usize,
    pub bytes_removed: u64,
    /// Unreferenced blobs younger than the grace period (maybe uploaded for a commit still to come).
    pub blobs_too_young: usize,
}

impl Hub {
    /// Remove blobs that no commit references (left behind by deleted repos or uploads never committed)
    /// and are older than `grace`. Needs the data directory's lock, so the hub must not be serving it.
    pub fn gc(&self, grace: Duration, dry_run: bool) -> Result<GcReport, StoreError> {
        let referenced = self.meta.prune_and_list_referenced()?;
        let mut report = GcReport::default();
        let mut removed = Vec::new();
        for (sha256, size, age) in self.blobs.list()? {
            if referenced.contains(&sha256) {
                report.blobs_kept += 1;
            } else if age < grace {
                report.blobs_too_young += 1;
            } else {
                if !dry_run {
                    self.blobs.remove(&sha256)?;
                    removed.push(sha256);
                }
                report.blobs_removed += 1;
                report.bytes_removed += size;
            }
        }
        self.meta.forget_blobs(&removed)?;
        Ok(report)
    }
}

type Shared = Arc<Hub>;
type ApiResult = Result<Response, ApiError>;

/// Run blocking storage work off the async runtime.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(format!("worker task failed: {e}")))?
}

/// The router: every request goes through [`dispatch`].
pub fn router(hub: Shared) -> Router {
    Router::new()
        .fallback(dispatch)
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| {
            ApiError::internal("internal error (a bug in the hub; see its log)").into_response()
        }))
        .with_state(hub)
}

async fn dispatch(State(hub): State<Shared>, req: Request) -> Response {
    let trace_id = req.headers().get("x-amzn-trace-id").cloned();
    let mut resp = route(hub, req)
        .await
        .unwrap_or_else(IntoResponse::into_response);
    // The client reports this id in its error messages, which ties a client failure to a server log line.
    if let Some(id) = trace_id {
        resp.headers_mut().insert("x-request-id", id);
    }
    resp
}

async fn route(hub: Shared, req: Request) -> ApiResult {
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let get_or_head = method == Method::GET || method == Method::HEAD;
    match segs.as_slice() {
        [""] if get_or_head => index(hub, req).await,
        ["api", "whoami-v2"] if method == Method::GET => whoami(hub, req).await,
        ["api", "repos", "create"] if method == Method::POST => create_repo(hub, req).await,
        ["api", "repos", "delete"] if method == Method::DELETE => delete_repo(hub, req).await,
        ["api", "repos", "move"] if method == Method::POST => move_repo(hub, req).await,
        ["api", "validate-yaml"] if method == Method::POST => validate_yaml(req).await,
        ["api", "organizations", org, "overview"] if method == Method::GET => {
            org_overview(hub, decode(org)?).await
        }
        ["api", "kforge", "lfs-upload", ticket] if method == Method::PUT => {
            lfs_upload(hub, ticket.to_string(), req).await
        }
        ["api", "models"] if get_or_head => list_repos(hub, RepoType::Model, req).await,
        ["api", "kernels"] if get_or_head => list_repos(hub, RepoType::Kernel, req).await,
        // No dataset or space repo exists here, so their listings are empty (not an error).
        ["api", "datasets" | "spaces"] if get_or_head => Ok(axum::Json(json!([])).into_response()),
        // The client asks these of dataset/space repos (`repo_exists`, `file_exists`, `hf_hub_download`) and
        // of namespace-less ids; RepoNotFound lets it answer "does not exist" instead of a generic error.
        ["api", ty @ ("datasets" | "spaces"), ns, name, ..] => {
            Err(unsupported_repo_type(ty, &decode(ns)?, &decode(name)?))
        }
        ["api", "models" | "kernels" | "datasets" | "spaces", id] if get_or_head => {
            Err(ApiError::repo_not_found_because(format!(
                "Repository Not Found for `{}`: repo ids on this hub are `namespace/name`",
                decode(id)?
            )))
        }
        ["api", ty, ns, name, rest @ ..] if *ty == "models" || *ty == "kernels" => {
            let repo_type = if *ty == "models" {
                RepoType::Model
            } else {
                RepoType::Kernel
            };
            let key = repo_key(repo_type, ns, name)?;
            let rest: Vec<String> = rest.iter().map(|s| s.to_string()).collect();
            repo_api(hub, key, rest, req).await
        }
        [
            ty @ ("datasets" | "spaces"),
            ns,
            name,
            "resolve",
            _,
            file @ ..,
        ] if get_or_head && !file.is_empty() => {
            Err(unsupported_repo_type(ty, &decode(ns)?, &decode(name)?))
        }
        [
            ty @ ("datasets" | "spaces"),
            ns,
            git,
            "info",
            "lfs",
            "objects",
            _,
        ] if method == Method::POST => {
            let name = git.strip_suffix(".git").unwrap_or(git);
            Err(unsupported_repo_type(ty, &decode(ns)?, &decode(name)?))
        }
        _ => {
            // A kernel repo's file endpoints are a model repo's behind a `kernels/` prefix; a path that is
            // none of them is still tried as a model repo's.
            let kernel = match segs.as_slice() {
                ["kernels", rest @ ..] => repo_file_route(RepoType::Kernel, rest, &method),
                _ => None,
            };
            let Some((repo_type, ns, name, endpoint)) =
                kernel.or_else(|| repo_file_route(RepoType::Model, &segs, &method))
            else {
                return Err(ApiError::not_found(format!(
                    "no such endpoint: {method} {path} (this hub serves the HF Hub API for model and kernel repos)"
                )));
            };
            let key = repo_key(repo_type, ns, name)?;
            match endpoint {
                FileEndpoint::Resolve { rev, file } => {
                    resolve(hub, key, decode(rev)?, decode(&file)?, req).await
                }
                FileEndpoint::LfsObjects { action } => {
                    lfs_objects(hub, key, action.to_owned(), req).await
                }
            }
        }
    }
}

/// 404 RepoNotFound for a repo type this hub does not serve (`datasets`, `spaces`).
fn unsupported_repo_type(plural: &str, ns: &str, name: &str) -> ApiError {
    ApiError::repo_not_found_because(format!(
        "Repository Not Found for {plural} `{ns}/{name}`: this hub serves model and kernel repos only"
    ))
}

/// An endpoint on a repo's files, with its still-encoded path segments.
enum FileEndpoint<'a> {
    Resolve { rev: &'a str, file: String },
    LfsObjects { action: &'a str },
}

/// `segs` (after any `kernels/` prefix) as (type, namespace, name, endpoint) of a repo file endpoint.
fn repo_file_route<'a>(
    repo_type: RepoType,
    segs: &[&'a str],
    method: &Method,
) -> Option<(RepoType, &'a str, &'a str, FileEndpoint<'a>)> {
    let get_or_head = method == Method::GET || method == Method::HEAD;
    match segs {
        // At the root, a reserved first segment is another URL prefix, never a model namespace.
        [ns, name, "resolve", rev, file @ ..]
            if get_or_head
                && !file.is_empty()
                && (repo_type == RepoType::Kernel || !RESERVED_NAMESPACES.contains(ns)) =>
        {
            let file = file.join("/");
            Some((repo_type, ns, name, FileEndpoint::Resolve { rev, file }))
        }
        [ns, git, "info", "lfs", "objects", action] if method == Method::POST => {
            let name = git.strip_suffix(".git").unwrap_or(git);
            Some((repo_type, ns, name, FileEndpoint::LfsObjects { action }))
        }
        _ => None,
    }
}

fn repo_key(repo_type: RepoType, ns: &str, name: &str) -> Result<RepoKey, ApiError> {
    Ok(RepoKey {
        repo_type,
        namespace: decode(ns)?,
        name: decode(name)?,
    })
}

// ---------------------------------------------------------------------------------------------------------
// Authentication and access checks

/// The bearer token, if any (an empty `Bearer ` counts as none).
fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_owned())
}

/// The caller's identity: `None` without a token; 401 for a token this hub did not issue.
async fn identify(hub: &Shared, headers: &HeaderMap) -> Result<Option<Identity>, ApiError> {
    let Some(token) = bearer(headers) else {
        return Ok(None);
    };
    let meta = hub.meta.clone();
    match blocking(move || Ok(meta.lookup_token(&token)?)).await? {
        Some(id) => Ok(Some(id)),
        None => Err(ApiError::unauthorized(
            "InvalidCredentials",
            "Invalid credentials in Authorization header",
        )),
    }
}

/// The repo if the caller may read it; otherwise 404 RepoNotFound (private repos are not revealed).
async fn readable_repo(
    hub: &Shared,
    key: &RepoKey,
    who: Option<&Identity>,
) -> Result<Repo, ApiError> {
    let meta = hub.meta.clone();
    let k = key.clone();
    let repo = blocking(move || Ok(meta.repo(&k)?)).await?;
    match repo {
        Some(r) if can_read(who, &r) => Ok(r),
        _ => Err(ApiError::repo_not_found(&key.id())),
    }
}

fn require_token(who: Option<&Identity>) -> Result<&Identity, ApiError> {
    who.ok_or_else(|| {
        ApiError::unauthorized(
            "AuthenticationRequired",
            "authentication required: send `Authorization: Bearer <token>` (HF_TOKEN or --token) with a token \
             from `kforge hub token create --user NAME --write`",
        )
    })
}

fn require_write(who: &Identity, namespace: &str) -> Result<(), ApiError> {
    if who.can_write(namespace) {
        Ok(())
    } else if !who.write {
        Err(ApiError::forbidden(format!(
            "the token of `{}` is read-only; create one with `kforge hub token create --user {} --write`",
            who.user, who.user
        )))
    } else {
        Err(ApiError::forbidden(format!(
            "`{}` cannot write to namespace `{namespace}`: it is neither the user's own namespace nor one of \
             its organisations (add `--org {namespace}` when creating the token)",
            who.user
        )))
    }
}

/// The repo if the caller may write to it: 401 without a token, 404 if unreadable, 403 without rights.
async fn writable_repo(
    hub: &Shared,
    key: &RepoKey,
    who: Option<&Identity>,
) -> Result<Repo, ApiError> {
    let id = require_token(who)?;
    let repo = readable_repo(hub, key, who).await?;
    require_write(id, &key.namespace)?;
    Ok(repo)
}

/// Why reading a request body failed: 413 `PayloadTooLarge` when it exceeded `limit` bytes, else 400.
fn body_error(e: &axum::Error, what: &str, limit: usize, hint: &str) -> ApiError {
    let too_large = std::iter::successors(Some(e as &dyn std::error::Error), |e| e.source())
        .any(|e| e.is::<http_body_util::LengthLimitError>());
    if too_large {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            Some("PayloadTooLarge"),
            format!("the {what} body is larger than the hub's limit of {limit} bytes{hint}"),
        )
    } else {
        ApiError::bad_request(format!("reading the {what} body failed: {e}"))
    }
}

async fn read_json<T: for<'de> Deserialize<'de>>(req: Request, what: &str) -> Result<T, ApiError> {
    let bytes = axum::body::to_bytes(req.into_body(), MAX_JSON_BODY)
        .await
        .map_err(|e| body_error(&e, what, MAX_JSON_BODY, ""))?;
    let text = if bytes.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        &bytes[..]
    };
    serde_json::from_slice(text).map_err(|e| {
        ApiError::bad_request(format!("the {what} body is not the expected JSON: {e}"))
    })
}

fn repo_url(base: &str, key: &RepoKey) -> String {
    format!("{base}/{}{}", key.repo_type.url_prefix(), key.id())
}

// ---------------------------------------------------------------------------------------------------------
// Account endpoints

async fn whoami(hub: Shared, req: Request) -> ApiResult {
    let who = identify(&hub, req.headers()).await?;
    let id = require_token(who.as_ref())?;
    let role = if id.write { "write" } else { "read" };
    let orgs: Vec<_> = id
        .orgs
        .iter()
        .map(|o| json!({ "type": "org", "name": o, "fullname": o, "roleInOrg": role }))
        .collect();
    Ok(axum::Json(json!({
        "type": "user",
        "name": id.user,
        "fullname": id.user,
        "isPro": false,
        "canPay": false,
        "orgs": orgs,
        "auth": { "type": "access_token", "accessToken": { "displayName": "kforge", "role": role } },
    }))
    .into_response())
}

async fn org_overview(hub: Shared, org: String) -> ApiResult {
    let meta = hub.meta.clone();
    let name = org.clone();
    let info = blocking(move || Ok(meta.org(&name)?)).await?;
    let info =
        info.ok_or_else(|| ApiError::not_found(format!("Organization `{org}` not found")))?;
    Ok(axum::Json(json!({
        "name": info.name,
        "fullname": info.name,
        "avatarUrl": "",
        "isVerified": false,
        "trustedKernelPublisher": info.trusted,
    }))
    .into_response())
}

#[derive(Deserialize)]
struct CreateRepoBody {
    name: Option<String>,
    organization: Option<String>,
    #[serde(rename = "type")]
    repo_type: Option<String>,
    private: Option<bool>,
    visibility: Option<String>,
}

fn parse_repo_type(t: Option<&str>) -> Result<RepoType, ApiError> {
    match t {
        None => Ok(RepoType::Model),
        Some(t) => RepoType::parse(t).ok_or_else(|| {
            ApiError::bad_request(format!(
                "repo type `{t}` is not served by this hub; use `model` or `kernel`"
            ))
        }),
    }
}

fn refuse_reserved(namespace: &str) -> Result<(), ApiError> {
    if RESERVED_NAMESPACES.contains(&namespace) {
        return Err(ApiError::bad_request(format!(
            "namespace `{namespace}` is reserved (it is a URL prefix); pick another"
        )));
    }
    Ok(())
}

fn parse_private(
    private: Option<bool>,
    visibility: Option<&str>,
) -> Result<Option<bool>, ApiError> {
    match visibility {
        None => Ok(private),
        Some("public") => Ok(Some(false)),
        Some("private") => Ok(Some(true)),
        Some(v) => Err(ApiError::bad_request(format!(
            "visibility `{v}` is not supported; use `public` or `private`"
        ))),
    }
}

async fn create_repo(hub: Shared, req: Request) -> ApiResult {
    let who = identify(&hub, req.headers()).await?;
    let base = base_url(req.headers());
    let body: CreateRepoBody = read_json(req, "create-repo").await?;
    let id = require_token(who.as_ref())?.clone();
    let name = body
        .name
        .ok_or_else(|| ApiError::bad_request("create-repo body lacks `name`"))?;
    let namespace = body.organization.unwrap_or_else(|| id.user.clone());
    let key = RepoKey {
        repo_type: parse_repo_type(body.repo_type.as_deref())?,
        namespace,
        name,
    };
    refuse_reserved(&key.namespace)?;
    require_write(&id, &key.namespace)?;
    let private = parse_private(body.private, body.visibility.as_deref())?.unwrap_or(false);
    let (meta, k, author) = (hub.meta.clone(), key.clone(), id.user.clone());
    match blocking(move || Ok(meta.create_repo(&k, private, &author))).await? {
        Ok(_) => {
            let url = repo_url(&base, &key);
            Ok(axum::Json(json!({ "url": url, "name": key.id(), "id": key.id() })).into_response())
        }
        Err(e) => {
            let e = hide_unreadable_conflict(&hub, &id, e).await?;
            // `create_repo(exist_ok=True)` reads `url` from the 409 body: the existing repo's, so a
            // request that differs only in letter case gets the name to use.
            let existing = match &e {
                StoreError::RepoExists(k) | StoreError::RepoCaseConflict { existing: k, .. } => {
                    Some(repo_url(&base, k))
                }
                _ => None,
            };
            let mut e = ApiError::from(e);
            e.extra = existing.map(|url| json!({ "url": url }));
            Err(e)
        }
    }
}

/// A case conflict with a repo the caller may not read (possible only where a data directory from before
/// namespaces were kept case-distinct holds two namespaces differing in case) must not name that repo: it
/// becomes a 400 that says a case variant exists, nothing more.
async fn hide_unreadable_conflict(
    hub: &Shared,
    who: &Identity,
    e: StoreError,
) -> Result<StoreError, ApiError> {
    let StoreError::RepoCaseConflict {
        requested,
        existing,
    } = e
    else {
        return Ok(e);
    };
    let meta = hub.meta.clone();
    let key = existing.clone();
    let repo = blocking(move || Ok(meta.repo(&key)?)).await?;
    if repo.is_some_and(|r| can_read(Some(who), &r)) {
        return Ok(StoreError::RepoCaseConflict {
            requested,
            existing,
        });
    }
    Err(ApiError::bad_request(format!(
        "repo `{}` would differ from an existing repo only in letter case, which the Hub treats as one name; \
         pick another name",
        requested.id()
    )))
}

async fn delete_repo(hub: Shared, req: Request) -> ApiResult {
    let who = identify(&hub, req.headers()).await?;
    let body: CreateRepoBody = read_json(req, "delete-repo").await?;
    let id = require_token(who.as_ref())?;
    let name = body
        .name
        .ok_or_else(|| ApiError::bad_request("delete-repo body lacks `name`"))?;
    let key = RepoKey {
        repo_type: parse_repo_type(body.repo_type.as_deref())?,
        namespace: body.organization.unwrap_or_else(|| id.user.clone()),
        name,
    };
    writable_repo(&hub, &key, who.as_ref()).await?;
    let meta = hub.meta.clone();
    blocking(move || Ok(meta.delete_repo(&key)?)).await?;
    Ok(axum::Json(json!({})).into_response())
}

#[derive(Deserialize)]
struct MoveRepoBody {
    #[serde(rename = "fromRepo")]
    from: Option<String>,
    #[serde(rename = "toRepo")]
    to: Option<String>,
    #[serde(rename = "type")]
    repo_type: Option<String>,
}

/// `move_repo`: rename a repo or hand it to another namespace. The caller needs write rights on both; the
/// old name answers 404 afterwards (no redirect), so clients pinned to it must switch.
async fn move_repo(hub: Shared, req: Request) -> ApiResult {
    let who = identify(&hub, req.headers()).await?;
    let base = base_url(req.headers());
    let body: MoveRepoBody = read_json(req, "move-repo").await?;
    let id = require_token(who.as_ref())?.clone();
    let repo_type = parse_repo_type(body.repo_type.as_deref())?;
    let key = |field: &str, value: Option<String>| {
        let value = value.ok_or_else(|| {
            ApiError::bad_request(format!("move-repo body lacks `{field}` (namespace/name)"))
        })?;
        match value.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(RepoKey {
                    repo_type,
                    namespace: ns.to_owned(),
                    name: name.to_owned(),
                })
            }
            _ => Err(ApiError::bad_request(format!(
                "move-repo `{field}` is `{value}`; expected `namespace/name`"
            ))),
        }
    };
    let (from, to) = (key("fromRepo", body.from)?, key("toRepo", body.to)?);
    refuse_reserved(&to.namespace)?;
    writable_repo(&hub, &from, who.as_ref()).await?;
    require_write(&id, &to.namespace)?;
    let url = repo_url(&base, &to);
    let (meta, t) = (hub.meta.clone(), to.clone());
    if let Err(e) = blocking(move || Ok(meta.move_repo(&from, &t))).await? {
        return Err(hide_unreadable_conflict(&hub, &id, e).await?.into());
    }
    Ok(axum::Json(json!({ "url": url, "name": to.id(), "id": to.id() })).into_response())
}

#[derive(Deserialize)]
struct YamlBody {
    content: Option<String>,
}

/// The client parses this answer as JSON before looking at the status, so it is always JSON.
async fn validate_yaml(req: Request) -> ApiResult {
    let body: YamlBody = read_json(req, "validate-yaml").await?;
    let content = body.content.unwrap_or_default();
    let mut errors = Vec::new();
    let mut lines = content.lines();
    if lines.next().map(str::trim_end) == Some("---") && !lines.any(|l| l.trim_end() == "---") {
        errors.push(json!({
            "message": "README.md metadata starts with `---` but has no closing `---` line"
        }));
    }
    let status = if errors.is_empty() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    Ok((
        status,
        axum::Json(json!({ "errors": errors, "warnings": [] })),
    )
        .into_response())
}

// ---------------------------------------------------------------------------------------------------------
// Repository API: /api/{models|kernels}/{ns}/{name}/...

async fn repo_api(hub: Shared, key: RepoKey, rest: Vec<String>, req: Request) -> ApiResult {
    let who = identify(&hub, req.headers()).await?;
    let method = req.method().clone();
    let (head, tail) = match rest.split_first() {
        Some((h, t)) => (h.as_str(), t.join("/")),
        None => ("", String::new()),
    };
    let tail = decode(&tail)?;
    match (head, &method) {
        ("", &Method::GET) => repo_info(hub, key, who, None, req).await,
        ("revision", &Method::GET) if !tail.is_empty() => {
            repo_info(hub, key, who, Some(tail), req).await
        }
        ("tree", &Method::GET) if rest.len() >= 2 => {
            // `rev` is one segment (fully encoded); the rest is the folder path.
            let rev = decode(&rest[1])?;
            let dir = decode(&rest[2..].join("/"))?;
            tree(hub, key, who, rev, dir, req).await
        }
        ("refs", &Method::GET) => refs(hub, key, who, req).await,
        ("branch", &Method::POST) if !tail.is_empty() => {
            create_branch(hub, key, who, tail, req).await
        }
        ("branch", &Method::DELETE) if !tail.is_empty() => {
            delete_ref(hub, key, who, RefKind::Branch, tail).await
        }
        ("tag", &Method::POST) if !tail.is_empty() => create_tag(hub, key, who, tail, req).await,
        ("tag", &Method::DELETE) if !tail.is_empty() => {
            delete_ref(hub, key, who, RefKind::Tag, tail).await
        }
        ("preupload", &Method::POST) if !tail.is_empty() => {
            preupload(hub, key, who, tail, req).await
        }
        ("commit", &Method::POST) if !tail.is_empty() => commit(hub, key, who, tail, req).await,
        ("commits", &Method::GET) if !tail.is_empty() => commits(hub, key, who, tail, req).await,
        ("paths-info", &Method::POST) if !tail.is_empty() => {
            paths_info(hub, key, who, tail, req).await
        }
        ("settings", &Method::PUT) => settings(hub, key, who, req).await,
        ("super-squash", &Method::POST) if !tail.is_empty() => {
            super_squash(hub, key, who, tail, req).await
        }
        _ => Err(ApiError::not_found(format!(
            "no such endpoint: {method} {} (supported: revision, tree, refs, branch, tag, preupload, commit, \
             commits, paths-info, settings, super-squash)",
            req.uri().path()
        ))),
    }
}

/// Resolve `rev` in a readable repo and load its tree.
async fn snapshot(
    hub: &Shared,
    key: &RepoKey,
    who: Option<&Identity>,
    rev: &str,
) -> Result<(Repo, Commit, Arc<Tree>), ApiError> {
    let repo = readable_repo(hub, key, who).await?;
    let meta = hub.meta.clone();
    let (r, rev) = (repo.clone(), rev.to_owned());
    let (commit, tree) = blocking(move || {
        let commit = meta.resolve(&r, &rev)?;
        let tree = meta.tree(&commit.tree_id)?;
        Ok((commit, tree))
    })
    .await?;
    Ok((repo, commit, tree))
}

/// Repos per listing page (the Hub pages `list_models` too).
const LIST_PAGE: usize = 1000;

/// `sort` of a listing: by id, or newest first by creation or by the head commit of `main`.
enum ListOrder {
    Id,
    Created,
    Modified,
}

/// `list_models` (and `/api/kernels`): the repos of one type the caller can read, by id, or newest first for
/// `sort=createdAt|lastModified`; `author` (any letter case) and `search` (a substring of the id, any case)
/// narrow it; pages with an absolute `Link: <…>; rel="next"`. Filters on metadata this hub does not keep
/// (tags, pipelines, inference) are refused rather than ignored.
async fn list_repos(hub: Shared, repo_type: RepoType, req: Request) -> ApiResult {
    let who = identify(&hub, req.headers()).await?;
    let q = query_pairs(req.uri().query());
    const UNKEPT: [&str; 7] = [
        "filter",
        "apps",
        "inference",
        "inference_provider",
        "pipeline_tag",
        "num_parameters",
        "language",
    ];
    if let Some((k, v)) = q.iter().find(|(k, _)| UNKEPT.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "`{k}={v}`: this hub keeps no tags, pipelines or inference metadata; list with `author` and \
             `search` instead"
        )));
    }
    let order = match query_value(&q, "sort") {
        None | Some("id" | "downloads" | "likes" | "trendingScore") => ListOrder::Id, // all 0 here
        Some("createdAt") => ListOrder::Created,
        Some("lastModified") => ListOrder::Modified,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "`sort={other}` is not supported; use createdAt, lastModified or leave it out (id order)"
            )));
        }
    };
    // Nothing here is gated: `gated=true` lists nothing, `gated=false` everything.
    let only_gated = query_flag(&q, "gated");
    let author = query_value(&q, "author").map(str::to_owned);
    let search = query_value(&q, "search").map(str::to_ascii_lowercase);
    let start = index_param(&q, "cursor", |c| {
        format!("cursor `{c}` is not one this hub issued")
    })?;
    let limit = page_limit(&q, LIST_PAGE);
    let meta = hub.meta.clone();
    let (items, more) = blocking(move || {
        // Each repo with its head commit, resolved up front only when the order needs it.
        let mut repos: Vec<(Repo, Option<Commit>)> = meta
            .list_repos()?
            .into_iter()
            .filter(|r| r.key.repo_type == repo_type && can_read(who.as_ref(), r) && !only_gated)
            .filter(|r| {
                author
                    .as_ref()
                    .is_none_or(|a| r.key.namespace.eq_ignore_ascii_case(a))
            })
            .filter(|r| {
                search
                    .as_ref()
                    .is_none_or(|s| r.key.id().to_ascii_lowercase().contains(s))
            })
            .map(|r| (r, None))
            .collect();
        // Times are in seconds; the row id (creation order) breaks ties.
        match order {
            ListOrder::Id => repos.sort_by_key(|(r, _)| r.key.id()),
            ListOrder::Created => {
                repos.sort_by_key(|(r, _)| std::cmp::Reverse((r.created, r.rowid)))
            }
            ListOrder::Modified => {
                for (r, head) in &mut repos {
                    *head = Some(meta.resolve(r, "main")?);
                }
                repos.sort_by_key(|(r, head)| {
                    std::cmp::Reverse((head.as_ref().map_or(0, |c| c.created), r.rowid))
                });
            }
        }
        let range = cursor_page(start, limit, repos.len(), "repos")?;
        let more = (range.end < repos.len()).then_some(range.end);
        let items = repos
            .drain(range)
            .map(|(r, head)| {
                let head = match head {
                    Some(c) => c,
                    None => meta.resolve(&r, "main")?,
                };
                let mut item = repo_json(&r, &head);
                item["modelId"] = json!(r.key.id());
                Ok(item)
            })
            .collect::<Result<Vec<Value>, StoreError>>()?;
        Ok((items, more))
    })
    .await?;
    let mut resp = axum::Json(Value::Array(items)).into_response();
    if let Some(next) = more {
        link_next(&mut resp, &req, q, "cursor", next);
    }
    Ok(resp)
}

async fn repo_info(
    hub: Shared,
    key: RepoKey,
    who: Option<Identity>,
    rev: Option<String>,
    req: Request,
) -> ApiResult {
    let q = query_pairs(req.uri().query());
    let (repo, commit, tree) =
        snapshot(&hub, &key, who.as_ref(), rev.as_deref().unwrap_or("main")).await?;
    let with_blobs = query_flag(&q, "blobs");
    let siblings: Vec<Value> = tree
        .files
        .iter()
        .map(|(path, e)| {
            if with_blobs {
                json!({ "rfilename": path, "size": e.size, "blobId": e.sha1 })
            } else {
                json!({ "rfilename": path })
            }
        })
        .collect();
    let mut info = repo_json(&repo, &commit);
    info["siblings"] = json!(siblings);
    Ok(axum::Json(info).into_response())
}

/// What `repo_info` and the listings say of a repo at `commit`.
fn repo_json(repo: &Repo, commit: &Commit) -> Value {
    json!({
        "_id": format!("{:024x}", repo.rowid),
        "id": repo.key.id(),
        "author": repo.key.namespace,
        "sha": commit.id,
        "lastModified": iso8601(commit.created),
        "createdAt": iso8601(repo.created),
        "private": repo.private,
        "disabled": false,
        "gated": false,
        "downloads": 0,
        "likes": 0,
        "tags": [],
    })
}

fn file_json(path: &str, e: &crate::model::FileEntry) -> Value {
    json!({ "type": "file", "oid": e.sha1, "size": e.size, "path": path })
}

async fn tree(
    hub: Shared,
    key: RepoKey,
    who: Option<Identity>,
    rev: String,
    dir: String,
    req: Request,
) -> ApiResult {
    let q = query_pairs(req.uri().query());
    let (repo, commit, tree) = snapshot(&hub, &key, who.as_ref(), &rev).await?;
    let dir = dir.trim_end_matches('/').to_owned();
    if !dir.is_empty() {
        validate_repo_path(&dir).map_err(|e| ApiError::bad_request(e.to_string()))?;
    }
    if !tree.is_dir(&dir) {
        return Err(ApiError::entry_not_found(&dir, &commit.id));
    }
    let all = tree.list(&dir, query_flag(&q, "recursive"));
    let start = index_param(&q, "cursor", |c| {
        format!("cursor `{c}` is not one this hub issued")
    })?;
    let expand = query_flag(&q, "expand");
    let limit = page_limit(
        &q,
        if expand {
            EXPANDED_TREE_PAGE
        } else {
            TREE_PAGE
        },
    );
    let range = cursor_page(start, limit, all.len(), "entries")?;
    let end = range.end;
    let mut page: Vec<Value> = all[range]
        .iter()
        .map(|item| match item {
            Listing::File(path, e) => file_json(path, e),
            Listing::Dir(d) => dir_json(&tree, d),
        })
        .collect();
    if expand {
        add_last_commits(&hub, &repo, &commit, &mut page).await?;
    }
    let mut resp = axum::Json(page).into_response();
    if end < all.len() {
        link_next(&mut resp, &req, q, "cursor", end);
    }
    Ok(resp)
}

async fn refs(hub: Shared, key: RepoKey, who: Option<Identity>, req: Request) -> ApiResult {
    let repo = readable_repo(&hub, &key, who.as_ref()).await?;
    let meta = hub.meta.clone();
    let refs = blocking(move || Ok(meta.refs(&repo)?)).await?;
    let pick = |kind: RefKind| -> Vec<Value> {
        refs.iter()
            .filter(|r| r.kind == kind)
            .map(|r| {
                json!({ "name": r.name, "ref": format!("{}{}", kind.git_prefix(), r.name), "targetCommit": r.target })
            })
            .collect()
    };
    let mut body =
        json!({ "branches": pick(RefKind::Branch), "converts": [], "tags": pick(RefKind::Tag) });
    if query_flag(&query_pairs(req.uri().query()), "include_prs") {
        body["pullRequests"] = json!([]);
    }
    Ok(axum::Json(body).into_response())
}

#[derive(Deserialize)]
struct BranchBody {
    #[serde(rename = "startingPoint")]
    starting_point: Option<String>,
}

async fn create_branch(
    hub: Shared,
    key: RepoKey,
    who: Option<Identity>,
    name: String,
    req: Request,
) -> ApiResult {
    let repo = writable_repo(&hub, &key, who.as_ref()).await?;
    let body: BranchBody = read_json(req, "create-branch").await?;
    let start = body.starting_point.unwrap_or_else(|| "main".into());
    let meta = hub.meta.clone();
    let n = name.clone();
    blocking(move || Ok(meta.create_ref(&repo, RefKind::Branch, &n, &start)?)).await?;
    Ok(axum::Json(json!({ "name": name, "ref": format!("refs/heads/{name}") })).into_response())
}

#[derive(Deserialize)]
struct TagBody {
    tag: Option<String>,
}

async fn create_tag(
    hub: Shared,
    key: RepoKey,
    who: Option<Identity>,
    rev: String,
    req: Request,
) -> ApiResult {
    let repo = writable_repo(&hub, &key, who.as_ref()).await?;
    let body: TagBody = read_json(req, "create-tag").await?;
    let tag = body
        .tag
        .ok_or_else(|| ApiError::bad_request("create-tag body lacks `tag` (the new tag's name)"))?;
    let meta = hub.meta.clone();
    let t = tag.clone();
    blocking(move || Ok(meta.create_ref(&repo, RefKind::Tag, &t, &rev)?)).await?;
    Ok(axum::Json(json!({ "name": tag, "ref": format!("refs/tags/{tag}") })).into_response())
}

async fn delete_ref(
    hub: Shared,
    key: RepoKey,
    who: Option<Identity>,
    kind: RefKind,
    name: String,
) -> ApiResult {
    let repo = writable_repo(&hub, &key, who.as_ref()).await?;
    let meta = hub.meta.clone();
    blocking(move || Ok(meta.delete_ref(&repo, kind, &name)?)).await?;
    Ok(axum::Json(json!({})).into_response())
}

#[derive(Deserialize)]
struct SquashBody {
    message: Option<String>,
}

/// `super_squash_history`: the branch becomes one commit of its current files. Commits no other branch or
/// tag reaches are deleted (locks pinned to them stop resolving, as on the Hub).
async fn super_squash(
    hub: Shared,
    key: RepoKey,
    who: Option<Identity>,
    branch: String,
    req: Request,
) -> ApiResult {
    let repo = writable_repo(&hub, &key, who.as_ref()).await?;
    let author = who.map(|w| w.user).unwrap_or_default();
    let body: SquashBody = read_json(req, "super-squash").await?;
    let branch = branch
        .strip_prefix("refs/heads/")
        .unwrap_or(&branch)
        .to_owned();
    let title = body
        .message
        .filter(|m| !m.trim().is_empty())
        .unwrap_or_else(|| format!("Super-squash branch '{branch}'"));
    let meta = hub.meta.clone();
    let done = blocking(move || Ok(meta.squash_branch(&repo, &branch, &title, &author)?)).await?;
    Ok(axum::Json(json!({ "commitOid": done.id })).into_response())
}

#[derive(Deserialize)]
struct SettingsBody {
    private: Option<bool>,
    visibility: Option<String>,
    gated: Option<Value>,
}

async fn settings(hub: Shared, key: RepoKey, who: Option<Identity>, req: Request) -> ApiResult {
    let repo = writable_repo(&hub, &key, who.as_ref()).await?;
    let body: SettingsBody = read_json(req, "settings").await?;
    // Refused before anything changes: accepting it would report a gate that is never enforced.
    if let Some(g) = body
        .gated
        .as_ref()
        .filter(|g| !matches!(g, Value::Null | Value::Bool(false)))
    {
        return Err(ApiError::bad_request(format!(
            "gated repos are not supported by this hub (got `gated: {g}`); only `gated: false` is accepted"
        )));
    }
    if let Some(private) = parse_private(body.private, body.visibility.as_deref())? {
        let meta = hub.meta.clone();
        blocking(move || Ok(meta.set_private(&repo, private)?)).await?;
    }
    Ok(axum::Json(json!({})).into_response())
}

/// History newest first, in pages (`p`, as on the Hub) with an absolute `Link: <…>; rel="next"`, which
/// `list_repo_commits` follows; a history longer than one page used to be cut silently at 1000.
async fn commits(
    hub: Shared,
    key: RepoKey,
    who: Option<Identity>,
    rev: String,
    req: Request,
) -> ApiResult {
    let q = query_pairs(req.uri().query());
    let page = index_param(&q, "p", |p| {
        format!("page `p={p}` is not a non-negative integer")
    })?;
    let limit = page_limit(&q, COMMITS_PAGE);
    let start = page
        .checked_mul(limit)
        .ok_or_else(|| ApiError::bad_request(format!("page `p={page}` is out of range")))?;
    let repo = readable_repo(&hub, &key, who.as_ref()).await?;
    let meta = hub.meta.clone();
    // One commit more than the page tells whether there is a next page.
    let want = start.saturating_add(limit).saturating_add(1);
    let log = blocking(move || Ok(meta.history(&repo, &rev, want)?)).await?;
    if start > 0 && start >= log.len() {
        return Err(ApiError::bad_request(format!(
            "page `p={page}` is past the end of this history ({} commits)",
            log.len()
        )));
    }
    let end = start.saturating_add(limit).min(log.len());
    let items: Vec<Value> = log[start..end]
        .iter()
        .map(|c| {
            json!({
                "id": c.id, "title": c.title, "message": c.message, "date": iso8601(c.created),
                "authors": [{ "user": c.author }],
            })
        })
        .collect();
    let mut resp = axum::Json(items).into_response();
    if end < log.len() {
        link_next(&mut resp, &req, q, "p", page + 1);
    }
    Ok(resp)
}

async fn paths_info(
    hub: Shared,
    key: RepoKey,
    who: Option<Identity>,
    rev: String,
    req: Request,
) -> ApiResult {
    let bytes = axum::body::to_bytes(req.into_body(), MAX_JSON_BODY)
        .await
        .map_err(|e| body_error(&e, "paths-info", MAX_JSON_BODY, ""))?;
    let form: Vec<(String, String)> = form_urlencoded::parse(&bytes).into_owned().collect();
    let paths: Vec<String> = form
        .iter()
        .filter(|(k, _)| k == "paths")
        .map(|(_, v)| v.trim_end_matches('/').to_owned())
        .collect();
    let expand = query_flag(&form, "expand");
    let (repo, commit, tree) = snapshot(&hub, &key, who.as_ref(), &rev).await?;
    let mut out: Vec<Value> = paths
        .iter()
        .filter_map(|p| {
            if let Some(e) = tree.files.get(p) {
                Some(file_json(p, e))
            } else if !p.is_empty() && tree.is_dir(p) {
                Some(dir_json(&tree, p))
            } else {
                None
            }
        })
        .collect();
    if expand {
        add_last_commits(&hub, &repo, &commit, &mut out).await?;
    }
    Ok(axum::Json(out).into_response())
}

/// Entries per tree page with `expand` (each one walks the history), as the Hub pages it smaller too.
const EXPANDED_TREE_PAGE: usize = 100;

fn dir_json(tree: &Tree, dir: &str) -> Value {
    json!({ "type": "directory", "oid": tree.dir_oid(dir), "size": 0, "path": dir })
}

/// `expand=true` on tree and paths-info: each entry's `lastCommit`, the newest commit of `head`'s history in
/// which the file (or, for a folder, its oid) differs from the parent commit's.
async fn add_last_commits(
    hub: &Shared,
    repo: &Repo,
    head: &Commit,
    entries: &mut [Value],
) -> Result<(), ApiError> {
    let (meta, repo, head) = (hub.meta.clone(), repo.clone(), head.id.clone());
    let wanted: Vec<(String, bool)> = entries
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap_or_default().to_owned(),
                e["type"] == "directory",
            )
        })
        .collect();
    let found = blocking(move || {
        let history = meta.history(&repo, &head, usize::MAX)?;
        let state = |tree: &Tree, path: &str, dir: bool| {
            if dir {
                tree.is_dir(path).then(|| tree.dir_oid(path))
            } else {
                tree.files.get(path).map(|f| f.sha1.clone())
            }
        };
        // Newest first, loading each tree once and stopping when every entry has its commit (a push that
        // replaces build/ settles all of them at the first step).
        let first = meta.tree(&history[0].tree_id)?;
        let mut states: Vec<Option<String>> =
            wanted.iter().map(|(p, d)| state(&first, p, *d)).collect();
        let mut last: Vec<Option<usize>> = vec![None; wanted.len()];
        for i in 0..history.len() {
            let parent = history
                .get(i + 1)
                .map(|c| meta.tree(&c.tree_id))
                .transpose()?;
            for (j, (path, dir)) in wanted.iter().enumerate() {
                let before = parent.as_ref().and_then(|t| state(t, path, *dir));
                if last[j].is_none() && before != states[j] {
                    last[j] = Some(i);
                }
                states[j] = before;
            }
            if parent.is_none() || last.iter().all(Option::is_some) {
                break;
            }
        }
        Ok(last
            .into_iter()
            .map(|i| {
                let c = &history[i.unwrap_or(history.len() - 1)];
                json!({ "id": c.id, "title": c.title, "date": iso8601(c.created) })
            })
            .collect::<Vec<Value>>())
    })
    .await?;
    for (entry, last) in entries.iter_mut().zip(found) {
        entry["lastCommit"] = last;
    }
    Ok(())
}

#[derive(Deserialize)]
struct PreuploadBody {
    files: Vec<PreuploadFile>,
}

#[derive(Deserialize)]
struct PreuploadFile {
    path: String,
}

/// Every file is `regular`: no LFS or Xet round trip is needed, which is what makes unmodified 2.x clients
/// (which would use Xet for `lfs`) work. `oid` lets the client skip files that did not change.
async fn preupload(
    hub: Shared,
    key: RepoKey,
    who: Option<Identity>,
    rev: String,
    req: Request,
) -> ApiResult {
    writable_repo(&hub, &key, who.as_ref()).await?;
    let body: PreuploadBody = read_json(req, "preupload").await?;
    let (_, commit, tree) = snapshot(&hub, &key, who.as_ref(), &rev).await?;
    let mut files = Vec::with_capacity(body.files.len());
    for f in body.files {
        validate_repo_path(&f.path)
            .map_err(|e| ApiError::bad_request(format!("preupload: {e}")))?;
        let mut item = json!({ "path": f.path, "uploadMode": "regular", "shouldIgnore": false });
        if let Some(e) = tree.files.get(&f.path) {
            item["oid"] = json!(e.sha1);
        }
        files.push(item);
    }
    Ok(axum::Json(json!({ "files": files, "commitOid": commit.id })).into_response())
}

// ---------------------------------------------------------------------------------------------------------
// Commit (NDJSON)

#[derive(Deserialize)]
struct Line {
    key: String,
    value: Value,
}

/// One parsed NDJSON operation before its content is stored.
enum PendingOp {
    Inline {
        path: String,
        bytes: Vec<u8>,
    },
    Lfs {
        path: String,
        oid: String,
        size: Option<u64>,
    },
    DeleteFile(String),
    DeleteFolder(String),
}

struct ParsedCommit {
    title: String,
    message: String,
    parent: Option<String>,
    ops: Vec<PendingOp>,
}

fn str_field<'a>(v: &'a Value, line: usize, key: &str, field: &str) -> Result<&'a str, ApiError> {
    v.get(field).and_then(Value::as_str).ok_or_else(|| {
        ApiError::bad_request(format!(
            "commit line {line} (`{key}`): missing string field `{field}`"
        ))
    })
}

fn checked_path(p: &str, line: usize) -> Result<String, ApiError> {
    validate_repo_path(p)
        .map(str::to_owned)
        .map_err(|e| ApiError::bad_request(format!("commit line {line}: {e}")))
}

fn parse_commit_body(body: &[u8]) -> Result<ParsedCommit, ApiError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::bad_request("the commit body is not UTF-8 NDJSON"))?;
    let mut parsed: Option<ParsedCommit> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let line: Line = serde_json::from_str(raw).map_err(|e| {
            ApiError::bad_request(format!(
                "commit line {n}: expected a JSON object {{\"key\": ..., \"value\": ...}}: {e}"
            ))
        })?;
        let v = &line.value;
        let key = line.key.as_str();
        if key == "header" {
            if parsed.is_some() {
                return Err(ApiError::bad_request(format!(
                    "commit line {n}: a second `header` line"
                )));
            }
            if !v.is_object() {
                return Err(ApiError::bad_request(format!(
                    "commit line {n}: the `header` value must be an object \
                     {{\"summary\", \"description\", \"parentCommit\"}}"
                )));
            }
            let opt_str = |field: &str| match v.get(field) {
                None | Some(Value::Null) => Ok(""),
                Some(Value::String(s)) => Ok(s.as_str()),
                Some(_) => Err(ApiError::bad_request(format!(
                    "commit line {n}: header field `{field}` must be a string"
                ))),
            };
            let summary = opt_str("summary")?.trim();
            let description = opt_str("description")?;
            parsed = Some(ParsedCommit {
                title: if summary.is_empty() {
                    "Upload files".into()
                } else {
                    summary.to_owned()
                },
                message: description.to_owned(),
                parent: match v.get("parentCommit") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(s)) => Some(s.clone()),
                    Some(_) => {
                        return Err(ApiError::bad_request(format!(
                            "commit line {n}: `parentCommit` must be a 40-hex commit id string"
                        )));
                    }
                },
                ops: Vec::new(),
            });
            continue;
        }
        let Some(commit) = parsed.as_mut() else {
            return Err(ApiError::bad_request(format!(
                "commit line {n}: the first line must be the `header`, got `{key}`"
            )));
        };
        let op = match key {
            "file" => {
                let path = checked_path(str_field(v, n, key, "path")?, n)?;
                let encoding = v
                    .get("encoding")
                    .and_then(Value::as_str)
                    .unwrap_or("base64");
                if encoding != "base64" {
                    return Err(ApiError::bad_request(format!(
                        "commit line {n}: encoding `{encoding}` is not supported; send base64"
                    )));
                }
                let content = str_field(v, n, key, "content")?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(content)
                    .map_err(|e| {
                        ApiError::bad_request(format!(
                            "commit line {n} (`{path}`): content is not base64: {e}"
                        ))
                    })?;
                PendingOp::Inline { path, bytes }
            }
            "lfsFile" => {
                let path = checked_path(str_field(v, n, key, "path")?, n)?;
                let algo = v.get("algo").and_then(Value::as_str).unwrap_or("sha256");
                let oid = str_field(v, n, key, "oid")?;
                if algo != "sha256" || !is_sha256(oid) {
                    return Err(ApiError::bad_request(format!(
                        "commit line {n} (`{path}`): expected algo sha256 and a 64-hex lowercase oid"
                    )));
                }
                let size = match v.get("size") {
                    None | Some(Value::Null) => None,
                    Some(s) => Some(s.as_u64().ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "commit line {n} (`{path}`): `size` must be an integer"
                        ))
                    })?),
                };
                PendingOp::Lfs {
                    path,
                    oid: oid.to_owned(),
                    size,
                }
            }
            "deletedFile" => PendingOp::DeleteFile(checked_path(str_field(v, n, key, "path")?, n)?),
            "deletedFolder" => {
                let p = str_field(v, n, key, "path")?.trim_end_matches('/');
                PendingOp::DeleteFolder(checked_path(p, n)?)
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "commit line {n}: unknown key `{other}`; expected header, file, lfsFile, deletedFile or \
                     deletedFolder"
                )));
            }
        };
        commit.ops.push(op);
    }
    parsed.ok_or_else(|| {
        ApiError::bad_request("the commit body is empty; it must start with a `header` line")
    })
}

/// Store inline contents and check LFS references, turning pending operations into tree operations.
fn materialize(
    meta: &dyn MetaStore,
    blobs: &dyn BlobStore,
    repo: &Repo,
    pending: Vec<PendingOp>,
) -> Result<Vec<Op>, ApiError> {
    pending
        .into_iter()
        .map(|p| match p {
            PendingOp::Inline { path, bytes } => {
                let blob = blobs
                    .put(&mut &bytes[..], bytes.len() as u64, None)
                    .map_err(|e| ApiError::internal(format!("storing `{path}`: {e}")))?;
                Ok(Op::Put { path, blob })
            }
            PendingOp::Lfs { path, oid, size } => {
                let blob = stat_granted(meta, blobs, repo, &oid)?.ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "`{path}`: LFS object {oid} was never uploaded; upload it through the LFS batch API first"
                    ))
                })?;
                if let Some(s) = size
                    && s != blob.size
                {
                    return Err(ApiError::bad_request(format!(
                        "`{path}`: LFS object {oid} has {} bytes, not the {s} the commit says",
                        blob.size
                    )));
                }
                Ok(Op::Put { path, blob })
            }
            PendingOp::DeleteFile(path) => Ok(Op::DeleteFile { path }),
            PendingOp::DeleteFolder(path) => Ok(Op::DeleteFolder { path }),
        })
        .collect()
}

async fn commit(
    hub: Shared,
    key: RepoKey,
    who: Option<Identity>,
    rev: String,
    req: Request,
) -> ApiResult {
    let repo = writable_repo(&hub, &key, who.as_ref()).await?;
    let author = who.map(|w| w.user).unwrap_or_default();
    if query_flag(&query_pairs(req.uri().query()), "create_pr") {
        return Err(ApiError::bad_request(
            "pull requests are not supported by this hub; commit to a branch (create it with create_branch)",
        ));
    }
    let base = base_url(req.headers());
    let limit = usize::try_from(hub.config.max_commit).unwrap_or(usize::MAX);
    let body = axum::body::to_bytes(req.into_body(), limit)
        .await
        .map_err(|e| {
            body_error(
                &e,
                "commit",
                limit,
                " (`kforge hub serve --max-commit-mib`; upload large files through LFS instead)",
            )
        })?;
    let (meta, blobs) = (hub.meta.clone(), hub.blobs.clone());
    // Blobs are stored first; only the final transaction makes them reachable, so a failure or a crash at
    // any point leaves the branch at its previous commit.
    let done = blocking(move || {
        let parsed = parse_commit_body(&body)?;
        if let Some(p) = &parsed.parent
            && !crate::model::is_commit_id(p)
        {
            return Err(ApiError::bad_request(format!(
                "`parentCommit` `{p}` is not a 40-hex commit id"
            )));
        }
        let ops = materialize(meta.as_ref(), blobs.as_ref(), &repo, parsed.ops)?;
        let request = CommitRequest {
            branch: rev,
            parent: parsed.parent,
            title: parsed.title,
            message: parsed.message,
            author,
            ops,
        };
        Ok(meta.commit(&repo, &request)?)
    })
    .await?;
    Ok(axum::Json(json!({
        "success": true,
        "commitOid": done.id,
        "commitUrl": format!("{}/commit/{}", repo_url(&base, &key), done.id),
        "commitMessage": done.title,
        "hookOutput": "",
    }))
    .into_response())
}

// ---------------------------------------------------------------------------------------------------------
// Downloads: HEAD/GET {prefix}{ns}/{name}/resolve/{rev}/{path}

async fn resolve(hub: Shared, key: RepoKey, rev: String, path: String, req: Request) -> ApiResult {
    let who = identify(&hub, req.headers()).await?;
    let (_, commit, tree) = snapshot(&hub, &key, who.as_ref(), &rev).await?;
    let entry = validate_repo_path(&path)
        .ok()
        .and_then(|p| tree.files.get(p))
        .ok_or_else(|| ApiError::entry_not_found(&path, &commit.id))?;
    let etag = format!("\"{}\"", entry.sha256);
    let range = parse_range(
        req.headers()
            .get(header::RANGE)
            .and_then(|v| v.to_str().ok()),
        entry.size,
    );
    let (status, start, len) = match range {
        RangeRequest::Full => (StatusCode::OK, 0, entry.size),
        RangeRequest::Partial(a, b) => (StatusCode::PARTIAL_CONTENT, a, b - a + 1),
        RangeRequest::Unsatisfiable => {
            let mut resp = ApiError::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                None,
                format!("range outside the {} bytes of `{path}`", entry.size),
            )
            .into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{}", entry.size)) {
                resp.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return Ok(resp);
        }
    };
    let body = if req.method() == Method::HEAD {
        Body::empty()
    } else {
        let reader = hub
            .blobs
            .open_range(&entry.sha256, start, len)
            .map_err(|e| ApiError::internal(format!("opening the blob of `{path}`: {e}")))?;
        Body::from_stream(tokio_util::io::ReaderStream::with_capacity(
            reader,
            256 * 1024,
        ))
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    let mut set = |name: &'static str, value: String| {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    };
    set("x-repo-commit", commit.id.clone());
    set("etag", etag.clone());
    set("x-linked-etag", etag);
    set("x-linked-size", entry.size.to_string());
    set("content-length", len.to_string());
    set("accept-ranges", "bytes".into());
    set("content-type", "application/octet-stream".into());
    if status == StatusCode::PARTIAL_CONTENT {
        set(
            "content-range",
            format!("bytes {start}-{}/{}", start + len - 1, entry.size),
        );
    }
    Ok(resp)
}

// ---------------------------------------------------------------------------------------------------------
// Git LFS batch API ("basic" transfer), used by clients that upload through LFS (and by `kforge push`)

#[derive(Deserialize)]
struct BatchBody {
    operation: String,
    objects: Vec<BatchObject>,
}

#[derive(Deserialize)]
struct BatchObject {
    oid: Value,
    size: Value,
}

fn lfs_json(status: StatusCode, body: Value) -> Response {
    let mut resp = (status, axum::Json(body)).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/vnd.git-lfs+json"),
    );
    resp
}

async fn lfs_objects(hub: Shared, key: RepoKey, action: String, req: Request) -> ApiResult {
    let who = identify(&hub, req.headers()).await?;
    let base = base_url(req.headers());
    match action.as_str() {
        "batch" => {
            let repo = writable_repo(&hub, &key, who.as_ref()).await?;
            let body: BatchBody = read_json(req, "LFS batch").await?;
            if body.operation != "upload" {
                return Err(ApiError::bad_request(format!(
                    "LFS operation `{}` is not supported; downloads go through /resolve",
                    body.operation
                )));
            }
            let verify = format!(
                "{base}/{}{}.git/info/lfs/objects/verify",
                key.repo_type.url_prefix(),
                key.id()
            );
            let mut objects = Vec::with_capacity(body.objects.len());
            let mut swept = false;
            for o in body.objects {
                let (Some(oid), Some(size)) = (o.oid.as_str(), o.size.as_u64()) else {
                    // Echo the oid as sent (a string stays a string) so the client can tell which object failed.
                    let echoed = o
                        .oid
                        .as_str()
                        .map_or_else(|| o.oid.to_string(), str::to_owned);
                    objects.push(json!({ "oid": echoed, "size": o.size.as_u64().unwrap_or(0),
                        "error": { "code": 422, "message": "oid must be a string and size an integer" } }));
                    continue;
                };
                if !is_sha256(oid) {
                    objects.push(json!({ "oid": oid, "size": size,
                        "error": { "code": 422, "message": "oid must be 64 lowercase hex digits (sha256)" } }));
                    continue;
                }
                if size > hub.config.max_upload {
                    let message = format!(
                        "object of {size} bytes exceeds the hub's limit of {} bytes (`--max-upload-mib`)",
                        hub.config.max_upload
                    );
                    objects.push(json!({ "oid": oid, "size": size, "error": { "code": 413, "message": message } }));
                    continue;
                }
                let existing = granted_blob(&hub, &repo, oid).await?;
                match existing {
                    // Already this repo's: no `actions`, so the client skips the upload.
                    Some(b) if b.size == size => objects.push(json!({ "oid": oid, "size": size })),
                    Some(b) => objects.push(json!({ "oid": oid, "size": size,
                        "error": { "code": 422, "message": format!("object {oid} is stored with size {}", b.size) } })),
                    // Not stored, or stored for other repos only: the client must prove it has the bytes.
                    None => {
                        let ticket = random_hex(24)
                            .map_err(|e| ApiError::internal(format!("random source: {e}")))?;
                        let mut tickets = hub.tickets.lock().unwrap_or_else(|p| p.into_inner());
                        let now = Instant::now();
                        let cap = hub.config.max_pending_uploads;
                        if tickets.len() >= cap && !swept {
                            // Expired tickets are swept when the table is full, at most once per request, so
                            // a batch of many objects stays linear even against a full table.
                            tickets.retain(|_, t| t.expires > now);
                            swept = true;
                        }
                        if tickets.len() >= cap {
                            objects.push(json!({ "oid": oid, "size": size, "error": { "code": 429, "message":
                                format!("the hub has {cap} uploads pending (`--max-pending-uploads`); \
                                         upload those (or wait up to {} s for them to expire) and retry",
                                        TICKET_TTL.as_secs()) } }));
                            continue;
                        }
                        tickets.insert(
                            ticket.clone(),
                            Ticket {
                                repo: repo.clone(),
                                oid: oid.to_owned(),
                                size,
                                expires: now + TICKET_TTL,
                            },
                        );
                        objects.push(json!({ "oid": oid, "size": size, "authenticated": true, "actions": {
                            "upload": { "href": format!("{base}/api/kforge/lfs-upload/{ticket}"),
                                        "expires_in": TICKET_TTL.as_secs() },
                            "verify": { "href": verify },
                        }}));
                    }
                }
            }
            Ok(lfs_json(
                StatusCode::OK,
                json!({ "transfer": "basic", "objects": objects, "hash_algo": "sha256" }),
            ))
        }
        "verify" => {
            let repo = readable_repo(&hub, &key, who.as_ref()).await?;
            let body: BatchObject = read_json(req, "LFS verify").await?;
            let (Some(oid), Some(size)) =
                (body.oid.as_str().map(str::to_owned), body.size.as_u64())
            else {
                return Err(ApiError::bad_request(
                    "LFS verify body needs `oid` (string) and `size` (integer)",
                ));
            };
            match granted_blob(&hub, &repo, &oid).await? {
                Some(b) if b.size == size => Ok(lfs_json(
                    StatusCode::OK,
                    json!({ "oid": oid, "size": size }),
                )),
                _ => Err(ApiError::not_found(format!(
                    "LFS object {oid} ({size} bytes) is not stored"
                ))),
            }
        }
        other => Err(ApiError::not_found(format!(
            "no LFS endpoint `{other}`; use batch or verify"
        ))),
    }
}

/// Blob `oid` if it is stored and `repo` may reference it (see [`MetaStore::grant_blob`]); a blob stored only
/// for other repos reads as absent, so nothing reveals what they hold.
fn stat_granted(
    meta: &dyn MetaStore,
    blobs: &dyn BlobStore,
    repo: &Repo,
    oid: &str,
) -> Result<Option<BlobInfo>, ApiError> {
    if !meta.blob_granted(repo, oid)? {
        return Ok(None);
    }
    blobs
        .stat(oid)
        .map_err(|e| ApiError::internal(format!("blob storage: {e}")))
}

async fn granted_blob(hub: &Shared, repo: &Repo, oid: &str) -> Result<Option<BlobInfo>, ApiError> {
    let (meta, blobs, repo, oid) = (
        hub.meta.clone(),
        hub.blobs.clone(),
        repo.clone(),
        oid.to_owned(),
    );
    blocking(move || stat_granted(meta.as_ref(), blobs.as_ref(), &repo, &oid)).await
}

/// Reads a request body that an async task forwards through a channel (blob writes are blocking).
struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
    current: Bytes,
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(b)) => self.current = b,
                Some(Err(e)) => return Err(e),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}

/// `PUT` of one LFS object to its one-time URL; the body is streamed to disk and checked against the oid.
async fn lfs_upload(hub: Shared, ticket: String, req: Request) -> ApiResult {
    let (repo, oid, size) = {
        let tickets = hub.tickets.lock().unwrap_or_else(|p| p.into_inner());
        match tickets.get(&ticket) {
            Some(t) if t.expires > Instant::now() => (t.repo.clone(), t.oid.clone(), t.size),
            _ => {
                return Err(ApiError::forbidden(
                    "unknown or expired upload URL; ask the LFS batch endpoint for a new one",
                ));
            }
        }
    };
    if size > hub.config.max_upload {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            Some("PayloadTooLarge"),
            format!(
                "object of {size} bytes exceeds the hub's limit of {} bytes (`--max-upload-mib`)",
                hub.config.max_upload
            ),
        ));
    }
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let blobs = hub.blobs.clone();
    let o = oid.clone();
    let writer = tokio::task::spawn_blocking(move || {
        let mut reader = ChannelReader {
            rx,
            current: Bytes::new(),
        };
        blobs.put(&mut reader, size, Some(&o))
    });
    let mut body = req.into_body();
    while let Some(frame) = body.frame().await {
        let item = frame
            .map(|f| f.into_data().unwrap_or_default())
            .map_err(|e| std::io::Error::other(format!("reading the upload body: {e}")));
        let failed = item.is_err();
        if tx.send(item).await.is_err() || failed {
            break;
        }
    }
    drop(tx);
    let stored = writer
        .await
        .map_err(|e| ApiError::internal(format!("upload task failed: {e}")))?;
    match stored {
        Ok(_) => {
            let (meta, o) = (hub.meta.clone(), oid.clone());
            blocking(move || Ok(meta.grant_blob(&repo, &o)?)).await?;
            hub.tickets
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&ticket);
            Ok(StatusCode::OK.into_response())
        }
        Err(e @ (PutError::SizeMismatch { .. } | PutError::DigestMismatch { .. })) => Err(
            ApiError::bad_request(format!("upload of {oid} refused: {e}")),
        ),
        Err(PutError::Io(e)) => Err(ApiError::internal(format!("storing upload of {oid}: {e}"))),
    }
}

// ---------------------------------------------------------------------------------------------------------
// A small HTML index: repos, their version branches and the variants on each.

fn escape_html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn index(hub: Shared, req: Request) -> ApiResult {
    let who = identify(&hub, req.headers()).await?;
    let meta = hub.meta.clone();
    let rows = blocking(move || {
        let mut rows = Vec::new();
        for repo in meta.list_repos()? {
            if !can_read(who.as_ref(), &repo) {
                continue;
            }
            let mut versions = Vec::new();
            for r in meta.refs(&repo)? {
                if r.kind != RefKind::Branch {
                    continue;
                }
                let commit = meta.resolve(&repo, &r.target)?;
                let tree = meta.tree(&commit.tree_id)?;
                let variants: Vec<String> = tree
                    .list("build", false)
                    .into_iter()
                    .filter_map(|l| match l {
                        Listing::Dir(d) => Some(d.trim_start_matches("build/").to_owned()),
                        Listing::File(..) => None,
                    })
                    .collect();
                versions.push((r.name, r.target, variants));
            }
            rows.push((repo, versions));
        }
        Ok(rows)
    })
    .await?;
    let mut html = String::from(
        "<!doctype html><meta charset=utf-8><title>kforge hub</title><h1>kforge hub</h1>\
         <table border=1 cellpadding=4><tr><th>repository</th><th>type</th><th>branch</th><th>commit</th>\
         <th>variants</th></tr>",
    );
    for (repo, versions) in rows {
        for (branch, target, variants) in versions {
            html.push_str(&format!(
                "<tr><td>{}{}</td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                escape_html(&repo.key.id()),
                if repo.private { " (private)" } else { "" },
                repo.key.repo_type.as_str(),
                escape_html(&branch),
                &target[..12.min(target.len())],
                escape_html(&variants.join(", ")),
            ));
        }
    }
    html.push_str("</table>");
    Ok(Html(html).into_response())
}

// ---------------------------------------------------------------------------------------------------------
// Serving

/// Open the data dir, bind `addr`, call `on_ready` with the bound address, and serve until `shutdown` resolves.
pub async fn serve(
    data_dir: &Path,
    addr: SocketAddr,
    config: HubConfig,
    on_ready: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let idle_timeout = config.idle_timeout;
    let hub = Hub::open(data_dir, config).map_err(std::io::Error::other)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    on_ready(listener.local_addr()?);
    let listener = crate::idle::IdleTimeoutListener::new(listener, idle_timeout);
    axum::serve(listener, router(Arc::new(hub)))
        .with_graceful_shutdown(shutdown)
        .await
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
async fn termination_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut sig) => {
                sig.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// Run the server on a new tokio runtime until SIGTERM/Ctrl-C; `on_ready` gets the bound address.
pub fn serve_blocking(
    data_dir: &Path,
    addr: SocketAddr,
    config: HubConfig,
    on_ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(
        data_dir,
        addr,
        config,
        on_ready,
        termination_signal(),
    ))
}

/// The next page's absolute URL as a `Link: <…>; rel="next"` header: this request's URL with the paging
/// parameter `key` set to `next` (the other query parameters kept).
fn link_next(resp: &mut Response, req: &Request, q: Vec<(String, String)>, key: &str, next: usize) {
    let mut pairs: Vec<(String, String)> = q.into_iter().filter(|(k, _)| k != key).collect();
    pairs.push((key.into(), next.to_string()));
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    let url = format!("{}{}?{query}", base_url(req.headers()), req.uri().path());
    if let Ok(v) = HeaderValue::from_str(&format!("<{url}>; rel=\"next\"")) {
        resp.headers_mut().insert(header::LINK, v);
    }
}

/// A paging position from the query (`cursor`, `p`): 0 when absent, a 400 with `bad(value)` when not a number.
fn index_param(
    q: &[(String, String)],
    key: &str,
    bad: impl FnOnce(&str) -> String,
) -> Result<usize, ApiError> {
    match query_value(q, key) {
        None => Ok(0),
        Some(v) => v.parse().map_err(|_| ApiError::bad_request(bad(v))),
    }
}

/// `start..end` of a cursor page of `limit` over `len` items; a cursor past the end is a 400.
fn cursor_page(
    start: usize,
    limit: usize,
    len: usize,
    noun: &str,
) -> Result<std::ops::Range<usize>, ApiError> {
    if start > len {
        return Err(ApiError::bad_request(format!(
            "cursor `{start}` is past the end of this listing ({len} {noun}); start again without a cursor"
        )));
    }
    Ok(start..start.saturating_add(limit).min(len))
}

/// The page size asked for with `limit`, within 1..=`max` (`max` when absent or not a number).
fn page_limit(q: &[(String, String)], max: usize) -> usize {
    query_value(q, "limit")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(max)
        .clamp(1, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ndjson_commit_parsing() {
        let body = concat!(
            r#"{"key":"header","value":{"summary":"s","description":"d","parentCommit":null}}"#,
            "\n",
            r#"{"key":"file","value":{"path":"a.txt","content":"aGk=","encoding":"base64"}}"#,
            "\n",
            r#"{"key":"deletedFolder","value":{"path":"build/x/"}}"#,
            "\n"
        );
        let c = parse_commit_body(body.as_bytes()).unwrap();
        assert_eq!(
            (c.title.as_str(), c.message.as_str(), c.parent),
            ("s", "d", None)
        );
        assert!(
            matches!(&c.ops[0], PendingOp::Inline { path, bytes } if path == "a.txt" && bytes == b"hi")
        );
        assert!(matches!(&c.ops[1], PendingOp::DeleteFolder(p) if p == "build/x"));

        for (bad, expect) in [
            ("", "empty"),
            (
                r#"{"key":"file","value":{}}"#,
                "first line must be the `header`",
            ),
            ("{\"key\":\"header\",\"value\":{}}\nnot json", "line 2"),
            (
                "{\"key\":\"header\",\"value\":{}}\n{\"key\":\"file\",\"value\":{\"path\":\"../x\",\"content\":\"\"}}",
                "`..`",
            ),
            (
                "{\"key\":\"header\",\"value\":{}}\n{\"key\":\"file\",\"value\":{\"path\":\"x\",\"content\":\"!!\"}}",
                "not base64",
            ),
            (
                "{\"key\":\"header\",\"value\":{}}\n{\"key\":\"rename\",\"value\":{}}",
                "unknown key `rename`",
            ),
        ] {
            let err = parse_commit_body(bad.as_bytes()).err().expect(bad);
            assert_eq!(err.status, StatusCode::BAD_REQUEST);
            assert!(err.message.contains(expect), "{bad}: {}", err.message);
        }
    }
}
