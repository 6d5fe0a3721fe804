//! The HTTP server (axum). So far: `GET /api/whoami-v2`; the repo endpoints are still to come.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

use crate::auth::{Identity, TokenStore};
use crate::blobs::BlobStore;

/// Where the hub keeps its data, and the database file inside it.
pub fn db_path(data_dir: &Path) -> PathBuf {
    data_dir.join("hub.sqlite")
}

struct AppState {
    tokens: Mutex<TokenStore>,
    _blobs: BlobStore,
}

type Shared = Arc<AppState>;

/// A 4xx/5xx answer shaped like the Hub's: status, `X-Error-Code`, JSON `{"error": ...}`.
fn hub_error(status: StatusCode, code: Option<&'static str>, message: &str) -> Response {
    let mut resp = (status, Json(json!({ "error": message }))).into_response();
    if let Some(code) = code {
        resp.headers_mut()
            .insert("x-error-code", HeaderValue::from_static(code));
    }
    resp.headers_mut().insert(
        "x-error-message",
        HeaderValue::from_str(message).unwrap_or(HeaderValue::from_static("error")),
    );
    resp
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get("authorization")?.to_str().ok()?;
    value.strip_prefix("Bearer ").map(str::trim)
}

fn identify(state: &AppState, headers: &HeaderMap) -> Result<Option<Identity>, Box<Response>> {
    let Some(token) = bearer(headers) else {
        return Ok(None);
    };
    let internal = |msg: &str| Box::new(hub_error(StatusCode::INTERNAL_SERVER_ERROR, None, msg));
    let tokens = state
        .tokens
        .lock()
        .map_err(|_| internal("token store poisoned"))?;
    match tokens.lookup(token) {
        Ok(Some(id)) => Ok(Some(id)),
        Ok(None) => Err(Box::new(unauthorized())),
        Err(e) => Err(internal(&e.to_string())),
    }
}

fn unauthorized() -> Response {
    hub_error(
        StatusCode::UNAUTHORIZED,
        None,
        "Invalid credentials in Authorization header",
    )
}

async fn whoami(State(state): State<Shared>, headers: HeaderMap) -> Response {
    match identify(&state, &headers) {
        Err(resp) => *resp,
        Ok(None) => unauthorized(),
        Ok(Some(id)) => {
            let role = if id.write { "write" } else { "read" };
            let orgs: Vec<_> = id
                .orgs
                .iter()
                .map(|o| json!({ "type": "org", "name": o, "roleInOrg": role }))
                .collect();
            Json(json!({
                "type": "user",
                "name": id.user,
                "fullname": id.user,
                "orgs": orgs,
                "auth": { "type": "access_token", "accessToken": { "displayName": "kforge", "role": role } },
            }))
            .into_response()
        }
    }
}

/// Open the data dir, bind `addr`, call `on_ready` with the bound address, and serve until `shutdown` resolves.
pub async fn serve(
    data_dir: &Path,
    addr: SocketAddr,
    on_ready: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    std::fs::create_dir_all(data_dir)?;
    let tokens = TokenStore::open(&db_path(data_dir)).map_err(std::io::Error::other)?;
    let state = Arc::new(AppState {
        tokens: Mutex::new(tokens),
        _blobs: BlobStore::open(data_dir)?,
    });
    let app = Router::new()
        .route("/api/whoami-v2", get(whoami))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind(addr).await?;
    on_ready(listener.local_addr()?);
    axum::serve(listener, app)
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
    on_ready: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve(data_dir, addr, on_ready, termination_signal()))
}
