//! kforge-fuzz: the bodies of the fuzz targets, shared by the cargo-fuzz entries (fuzz_targets/) and the
//! stable replay test (tests/replay.rs). Each takes arbitrary bytes; a panic or a failed property is a bug.

use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::sync::{Arc, OnceLock};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use kforge_manifest::metadata::Metadata;
use tower::ServiceExt as _;

/// `build.toml` text: parse and validate; when accepted, plan the variants and migrate to edition 5.
pub fn build_toml(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let file = Path::new("fuzz/build.toml");
    let problems = match kforge_manifest::parse_manifest(&text, file) {
        Ok((manifest, warnings)) => {
            let _ = manifest.noarch_backends();
            let _ =
                kforge_manifest::plan::plan(&manifest, &kforge_manifest::plan::hf_build_matrix());
            let _ = kforge_manifest::migrate::migrate_to_edition5(&text, file);
            warnings
        }
        Err(e) => {
            // A refusal must say why: at least one error-level problem with a message.
            assert!(e.errors().count() > 0, "refused without naming an error");
            for p in e.errors() {
                assert!(!p.to_string().is_empty(), "an error with an empty message");
            }
            e.problems
        }
    };
    // Rendering with source spans is what users see: it must not panic on any span the parser produced.
    let handler =
        miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor());
    for p in &problems {
        let mut out = String::new();
        handler
            .render_report(&mut out, p)
            .expect("rendering to a String");
    }
}

/// `metadata.json` text: what parses must print and parse back to the same value.
pub fn metadata_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("fuzz/metadata.json");
    if let Ok(m) = Metadata::from_json(text, path) {
        let again = Metadata::from_json(&m.to_json(), path)
            .unwrap_or_else(|e| panic!("printed metadata does not parse back: {e}"));
        assert_eq!(again, m, "metadata changed in a print/parse round trip");
    }
}

/// A variant name: what parses must print and parse back to the same variant.
pub fn variant_name(data: &[u8]) {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(v) = kforge_manifest::Variant::from_str(name) {
        let printed = v.to_string();
        let again = kforge_manifest::Variant::from_str(&printed).unwrap_or_else(|e| {
            panic!("{name:?} parsed, but its printed form {printed:?} does not: {e}")
        });
        assert_eq!(again, v, "{name:?} -> {printed:?} changed the variant");
    }
}

/// Any bytes as a shared object: the ABI checker reads them from a file and reports, never panics.
pub fn elf_reader(data: &[u8]) {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| scratch_dir("elf"));
    let path = dir.join("input.so");
    std::fs::write(&path, data).expect("writing the fuzz input");
    let mut policy = kforge_abi::Policy::manylinux("manylinux_2_28").expect("a known policy");
    policy.torch_stable_abi = true;
    policy.torch_stable_abi_version = Some((2, 10));
    policy.cpu = Some("x86_64".into());
    if let Ok(report) = kforge_abi::check_file(&path, &policy) {
        let _ = report.to_json();
    }
}

fn scratch_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kforge-fuzz-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the fuzz scratch directory");
    dir
}

/// An in-process hub (SQLite + blobs in a scratch dir) with a repo `acme/fuzz` and a write token.
struct HubEnv {
    rt: tokio::runtime::Runtime,
    router: axum::Router,
    token: String,
}

fn hub_env() -> &'static HubEnv {
    static ENV: OnceLock<HubEnv> = OnceLock::new();
    ENV.get_or_init(|| {
        let config = kforge_hub::server::HubConfig {
            max_commit: 4 << 20,
            max_upload: 4 << 20,
            ..Default::default()
        };
        let hub =
            kforge_hub::server::Hub::open(&scratch_dir("hub"), config).expect("opening the hub");
        let token = hub
            .meta
            .create_token("fuzzer", true, &["acme".into()])
            .expect("creating a token");
        let router = kforge_hub::server::router(Arc::new(hub));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let env = HubEnv { rt, router, token };
        let create = r#"{"name": "fuzz", "organization": "acme", "type": "kernel"}"#;
        let (status, body) = env.post("/api/repos/create", "application/json", create.into());
        assert_eq!(status, StatusCode::OK, "creating the repo: {body}");
        env
    })
}

impl HubEnv {
    fn post(&self, uri: &str, content_type: &str, body: Vec<u8>) -> (StatusCode, String) {
        let req = Request::post(uri)
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", content_type)
            .body(Body::from(body))
            .expect("a request");
        self.rt.block_on(async {
            let resp = self
                .router
                .clone()
                .oneshot(req)
                .await
                .expect("the router is infallible");
            let status = resp.status();
            let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .expect("reading the response body");
            (status, String::from_utf8_lossy(&bytes).into_owned())
        })
    }
}

/// The path rules a hub must enforce before accepting a file: relative, normalized, no `.git/`.
pub fn safe_repo_path(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.contains('\\')
        && !p.contains('\0')
        && p.split('/').all(|c| !c.is_empty() && c != "." && c != "..")
        && p.split('/').next() != Some(".git")
}

/// A commit through the hub's HTTP handler (in process). The first byte picks the shape: a raw NDJSON body,
/// or a well-formed commit whose file path (or deleted path) is the rest of the input. The hub must answer
/// every body without a 5xx, and accept only safe paths.
pub fn commit_ndjson(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let env = hub_env();
    let header = r#"{"key": "header", "value": {"summary": "fuzz"}}"#;
    let path = String::from_utf8_lossy(rest);
    let path_json = serde_json::Value::String(path.to_string()).to_string();
    let body = match mode % 3 {
        0 => rest.to_vec(),
        1 => format!(
            "{header}\n{{\"key\": \"file\", \"value\": {{\"path\": {path_json}, \"encoding\": \"base64\", \
             \"content\": \"a2ZvcmdlCg==\"}}}}\n"
        )
        .into_bytes(),
        _ => format!("{header}\n{{\"key\": \"deletedFile\", \"value\": {{\"path\": {path_json}}}}}\n")
            .into_bytes(),
    };
    let (status, answer) = env.post(
        "/api/kernels/acme/fuzz/commit/main",
        "application/x-ndjson",
        body,
    );
    assert!(
        !status.is_server_error(),
        "the hub answered {status} to a commit body: {answer}"
    );
    if mode % 3 == 1 && status.is_success() {
        assert!(
            safe_repo_path(&path),
            "the hub accepted the unsafe path {path:?}"
        );
    }
}
