//! The hub over real HTTP on 127.0.0.1 (port 0): protocol details, bad input, LFS, paging and concurrency.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use base64::Engine as _;
use kforge_hub::server::{Hub, HubConfig, router};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

struct TestHub {
    url: String,
    hub: Arc<Hub>,
    dir: tempfile::TempDir,
}

fn start(config: HubConfig) -> TestHub {
    let dir = tempfile::tempdir().unwrap();
    let hub = Arc::new(Hub::open(dir.path(), config).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let served = hub.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, router(served)).await.unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    TestHub {
        url: format!("http://{addr}"),
        hub,
        dir,
    }
}

struct Answer {
    status: u16,
    headers: ureq::http::HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent()
}

fn call(
    method: &str,
    url: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Answer {
    let mut b = ureq::http::Request::builder().method(method).uri(url);
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let resp = match body {
        Some(bytes) => agent().run(b.body(bytes).unwrap()),
        None => agent().run(b.body(()).unwrap()),
    }
    .unwrap();
    let (parts, mut body) = resp.into_parts();
    let bytes = body.with_config().limit(1 << 30).read_to_vec().unwrap();
    Answer {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body: bytes,
    }
}

fn post_json(url: &str, token: Option<&str>, body: Value) -> Answer {
    call(
        "POST",
        url,
        token,
        &[("content-type", "application/json")],
        Some(body.to_string().into_bytes()),
    )
}

fn ndjson(header: Value, ops: &[Value]) -> Vec<u8> {
    let mut lines = vec![json!({ "key": "header", "value": header }).to_string()];
    lines.extend(ops.iter().map(Value::to_string));
    (lines.join("\n") + "\n").into_bytes()
}

fn file_op(path: &str, content: &[u8]) -> Value {
    json!({ "key": "file", "value": { "path": path, "encoding": "base64",
        "content": base64::engine::general_purpose::STANDARD.encode(content) } })
}

impl TestHub {
    fn token(&self, user: &str, write: bool, orgs: &[&str]) -> String {
        let orgs: Vec<String> = orgs.iter().map(|s| s.to_string()).collect();
        self.hub.meta.create_token(user, write, &orgs).unwrap()
    }

    fn create(&self, token: &str, repo: &str, ty: &str) {
        let (ns, name) = repo.split_once('/').unwrap();
        let a = post_json(
            &format!("{}/api/repos/create", self.url),
            Some(token),
            json!({ "name": name, "organization": ns, "type": ty }),
        );
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    }

    fn commit(&self, token: &str, api: &str, branch: &str, body: Vec<u8>) -> Answer {
        call(
            "POST",
            &format!("{}/api/{api}/commit/{branch}", self.url),
            Some(token).filter(|t| !t.is_empty()),
            &[("content-type", "application/x-ndjson")],
            Some(body),
        )
    }

    fn head(&self, api: &str, branch: &str) -> String {
        let a = call(
            "GET",
            &format!("{}/api/{api}/revision/{branch}", self.url),
            None,
            &[],
            None,
        );
        assert_eq!(a.status, 200);
        a.json()["sha"].as_str().unwrap().to_owned()
    }
}

/// GETs `first` and every page its `Link: <absolute URL on base>; rel="next"` headers lead to, as a client
/// pages; returns the page count and each item's string `field`, in order.
fn follow_pages(first: &str, base: &str, field: &str) -> (usize, Vec<String>) {
    let (mut url, mut pages, mut items) = (Some(first.to_owned()), 0, Vec::new());
    while let Some(u) = url.take() {
        let a = call("GET", &u, None, &[], None);
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
        pages += 1;
        items.extend(
            a.json()
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e[field].as_str().unwrap().to_owned()),
        );
        url = a.header("link").map(|l| {
            assert!(l.starts_with(&format!("<{base}/")), "{l}");
            assert!(l.ends_with("; rel=\"next\""), "{l}");
            l.split(';')
                .next()
                .unwrap()
                .trim_matches(['<', '>'])
                .to_owned()
        });
    }
    (pages, items)
}

#[test]
fn resolve_headers_ranges_and_errors() {
    let t = start(HubConfig::default());
    let tok = t.token("alice", true, &["acme"]);
    t.create(&tok, "acme/relu", "kernel");
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let done = t.commit(
        &tok,
        "kernels/acme/relu",
        "main",
        ndjson(
            json!({ "summary": "add" }),
            &[file_op("build/v/x.bin", &data)],
        ),
    );
    assert_eq!(done.status, 200);
    let commit = done.json()["commitOid"].as_str().unwrap().to_owned();
    assert_eq!(
        done.json()["commitUrl"],
        format!("{}/kernels/acme/relu/commit/{commit}", t.url)
    );
    let sha256 = hex::encode(Sha256::digest(&data));
    let url = format!("{}/kernels/acme/relu/resolve/main/build/v/x.bin", t.url);

    let head = call("HEAD", &url, None, &[], None);
    assert_eq!(head.status, 200);
    assert_eq!(head.header("x-repo-commit"), Some(commit.as_str()));
    assert_eq!(head.header("etag"), Some(format!("\"{sha256}\"").as_str()));
    assert_eq!(
        head.header("x-linked-etag"),
        Some(format!("\"{sha256}\"").as_str())
    );
    assert_eq!(head.header("x-linked-size"), Some("10000"));
    assert_eq!(head.header("content-length"), Some("10000"));
    assert_eq!(head.header("accept-ranges"), Some("bytes"));
    assert!(head.body.is_empty());
    assert!(head.header("x-xet-hash").is_none());

    let get = call("GET", &url, None, &[], None);
    assert_eq!(get.body, data);
    let by_sha = call(
        "GET",
        &format!("{}/kernels/acme/relu/resolve/{commit}/build/v/x.bin", t.url),
        None,
        &[],
        None,
    );
    assert_eq!(by_sha.body, data);

    let part = call("GET", &url, None, &[("range", "bytes=100-199")], None);
    assert_eq!(part.status, 206);
    assert_eq!(part.header("content-range"), Some("bytes 100-199/10000"));
    assert_eq!(part.body, &data[100..200]);
    let tail = call("GET", &url, None, &[("range", "bytes=9990-")], None);
    assert_eq!(tail.body, &data[9990..]);
    let past = call("GET", &url, None, &[("range", "bytes=10000-")], None);
    assert_eq!(past.status, 416);
    assert_eq!(past.header("content-range"), Some("bytes */10000"));

    let missing = call(
        "HEAD",
        &format!("{}/kernels/acme/relu/resolve/main/nope", t.url),
        None,
        &[],
        None,
    );
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("x-error-code"), Some("EntryNotFound"));
    assert_eq!(missing.header("x-repo-commit"), Some(commit.as_str()));
    let bad_rev = call(
        "GET",
        &format!("{}/kernels/acme/relu/resolve/nope/x", t.url),
        None,
        &[],
        None,
    );
    assert_eq!(bad_rev.header("x-error-code"), Some("RevisionNotFound"));
    let no_repo = call(
        "GET",
        &format!("{}/kernels/acme/zzz/resolve/main/x", t.url),
        None,
        &[],
        None,
    );
    assert_eq!(no_repo.header("x-error-code"), Some("RepoNotFound"));
    // Kernel repos are not visible under the model prefix.
    let wrong_type = call(
        "GET",
        &format!("{}/acme/relu/resolve/main/build/v/x.bin", t.url),
        None,
        &[],
        None,
    );
    assert_eq!(wrong_type.header("x-error-code"), Some("RepoNotFound"));
    // Encoded traversal in a resolve path is just a missing entry: nothing outside the tree is ever read.
    let traversal = call(
        "GET",
        &format!(
            "{}/kernels/acme/relu/resolve/main/..%2F..%2Fhub.sqlite",
            t.url
        ),
        None,
        &[],
        None,
    );
    assert_eq!(traversal.status, 404);
    assert_eq!(traversal.header("x-error-code"), Some("EntryNotFound"));
    // The client's trace id comes back as the request id.
    let traced = call("GET", &url, None, &[("x-amzn-trace-id", "abc-123")], None);
    assert_eq!(traced.header("x-request-id"), Some("abc-123"));
}

#[test]
fn bad_input_is_refused_with_clear_4xx_and_writes_nothing() {
    let t = start(HubConfig {
        max_commit: 4096,
        max_upload: 1 << 20,
        ..HubConfig::default()
    });
    let tok = t.token("alice", true, &["acme"]);
    t.create(&tok, "acme/m", "model");
    let before = t.head("models/acme/m", "main");
    let cases: Vec<(Vec<u8>, u16, &str)> = vec![
        (b"not json\n".to_vec(), 400, "commit line 1"),
        (ndjson(json!({}), &[file_op("../up", b"x")]), 400, "`..`"),
        (ndjson(json!({}), &[file_op("/abs", b"x")]), 400, "absolute"),
        (
            ndjson(json!({}), &[file_op("a\\b", b"x")]),
            400,
            "backslash",
        ),
        (ndjson(json!({}), &[file_op("a\0b", b"x")]), 400, "NUL"),
        (
            ndjson(json!({}), &[file_op(".git/config", b"x")]),
            400,
            "`.git` component",
        ),
        (
            ndjson(
                json!({}),
                &[json!({"key":"file","value":{"path":"a","content":"@@@"}})],
            ),
            400,
            "not base64",
        ),
        (
            ndjson(
                json!({}),
                &[
                    json!({"key":"lfsFile","value":{"path":"a","algo":"sha256","oid":"0".repeat(64),"size":1}}),
                ],
            ),
            400,
            "never uploaded",
        ),
        (
            ndjson(
                json!({"parentCommit": "0".repeat(40)}),
                &[file_op("ok", b"x")],
            ),
            412,
            "parentCommit",
        ),
        (
            ndjson(json!({}), &[file_op("big", &[7u8; 8192])]),
            413,
            "limit of 4096 bytes",
        ),
        (
            ndjson(
                json!({}),
                &[json!({"key":"deletedFile","value":{"path":"nope"}})],
            ),
            404,
            "doesn't exist",
        ),
    ];
    for (body, status, needle) in cases {
        let a = t.commit(&tok, "models/acme/m", "main", body.clone());
        let text = String::from_utf8_lossy(&a.body).into_owned();
        assert_eq!(a.status, status, "{text}");
        assert!(a.header("x-error-message").is_some(), "{text}");
        assert!(
            a.json()["error"].as_str().unwrap().contains(needle),
            "expected `{needle}` in {text}"
        );
    }
    assert_eq!(t.head("models/acme/m", "main"), before);
    let missing = t.commit(
        &tok,
        "models/acme/m",
        "nope",
        ndjson(json!({}), &[file_op("a", b"x")]),
    );
    assert_eq!(missing.header("x-error-code"), Some("RevisionNotFound"));

    // Objects over the upload limit are refused at batch time.
    let batch = post_json(
        &format!("{}/acme/m.git/info/lfs/objects/batch", t.url),
        Some(&tok),
        json!({ "operation": "upload", "objects": [{ "oid": "a".repeat(64), "size": 2 << 20 }] }),
    );
    assert_eq!(batch.json()["objects"][0]["error"]["code"], 413);

    // Malformed JSON bodies and bad names.
    let url = format!("{}/api/repos/create", t.url);
    let a = call("POST", &url, Some(&tok), &[], Some(b"{oops".to_vec()));
    assert_eq!(a.status, 400);
    assert_eq!(a.header("x-error-code"), Some("BadRequest"));
    for (name, org) in [("a..b", "acme"), ("ok", "kernels"), ("x y", "acme")] {
        let a = post_json(
            &url,
            Some(&tok),
            json!({ "name": name, "organization": org }),
        );
        assert_eq!(a.status, 400, "{name}");
    }
    let a = post_json(
        &url,
        Some(&tok),
        json!({ "name": "d", "organization": "acme", "type": "dataset" }),
    );
    assert!(
        a.json()["error"]
            .as_str()
            .unwrap()
            .contains("use `model` or `kernel`")
    );
    let tree = call(
        "GET",
        &format!("{}/api/models/acme/m/tree/main/..%2F..", t.url),
        None,
        &[],
        None,
    );
    assert_eq!(tree.status, 400);
    let unknown = call(
        "GET",
        &format!("{}/api/spaces/acme/m", t.url),
        None,
        &[],
        None,
    );
    assert_eq!(unknown.status, 404);
    // Unknown token: 401 everywhere, even on public reads.
    let forged = call(
        "GET",
        &format!("{}/api/models/acme/m", t.url),
        Some("hf_forged"),
        &[],
        None,
    );
    assert_eq!(forged.status, 401);
}

#[test]
fn lfs_basic_upload_then_commit() {
    let t = start(HubConfig::default());
    let tok = t.token("alice", true, &["acme"]);
    t.create(&tok, "acme/big", "kernel");
    let data = vec![42u8; 1 << 20];
    let oid = hex::encode(Sha256::digest(&data));
    let batch_url = format!("{}/kernels/acme/big.git/info/lfs/objects/batch", t.url);
    let batch_body = json!({ "operation": "upload", "transfers": ["basic", "multipart"],
        "objects": [{ "oid": oid, "size": data.len() }], "hash_algo": "sha256" });
    let batch = post_json(&batch_url, Some(&tok), batch_body.clone());
    assert_eq!(batch.status, 200);
    assert_eq!(
        batch.header("content-type"),
        Some("application/vnd.git-lfs+json")
    );
    let obj = &batch.json()["objects"][0];
    let href = obj["actions"]["upload"]["href"]
        .as_str()
        .unwrap()
        .to_owned();
    let verify = obj["actions"]["verify"]["href"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(href.starts_with(&t.url));

    // Wrong bytes for the ticket are refused and leave nothing behind.
    let wrong = call("PUT", &href, None, &[], Some(vec![0u8; 1 << 20]));
    assert_eq!(
        wrong.status,
        400,
        "{}",
        String::from_utf8_lossy(&wrong.body)
    );
    let short = call("PUT", &href, None, &[], Some(vec![42u8; 10]));
    assert_eq!(short.status, 400);
    let v = post_json(
        &verify,
        Some(&tok),
        json!({ "oid": oid, "size": data.len() }),
    );
    assert_eq!(v.status, 404);

    assert_eq!(
        call("PUT", &href, None, &[], Some(data.clone())).status,
        200
    );
    // One-time URL (a small body: the refusal comes before the body is read).
    assert_eq!(
        call("PUT", &href, None, &[], Some(b"again".to_vec())).status,
        403
    );
    assert_eq!(
        post_json(
            &verify,
            Some(&tok),
            json!({ "oid": oid, "size": data.len() })
        )
        .status,
        200
    );
    // Already stored: no actions.
    let again = post_json(&batch_url, Some(&tok), batch_body);
    assert!(again.json()["objects"][0].get("actions").is_none());

    let lfs = json!({ "key": "lfsFile", "value": { "path": "w.bin", "algo": "sha256", "oid": oid, "size": data.len() } });
    assert_eq!(
        t.commit(&tok, "kernels/acme/big", "main", ndjson(json!({}), &[lfs]))
            .status,
        200
    );
    let got = call(
        "GET",
        &format!("{}/kernels/acme/big/resolve/main/w.bin", t.url),
        None,
        &[],
        None,
    );
    assert_eq!(got.body, data);

    // Batch needs write rights.
    let reader = t.token("bob", false, &["acme"]);
    let denied = post_json(
        &batch_url,
        Some(&reader),
        json!({ "operation": "upload", "objects": [] }),
    );
    assert_eq!(denied.status, 403);
}

/// Blobs are stored once for the whole hub, but a repo only gets to skip an upload (or reference an LFS
/// object) once its own writer has sent the bytes: a hash alone must not copy another repo's private file.
#[test]
fn lfs_objects_of_other_repos_are_neither_revealed_nor_reusable() {
    let t = start(HubConfig::default());
    let alice = t.token("alice", true, &["acme"]);
    let mallory = t.token("mallory", true, &["evil"]);
    let post = |repo: &str, action: &str, tok: &str, body: Value| {
        post_json(
            &format!("{}/kernels/{repo}.git/info/lfs/objects/{action}", t.url),
            Some(tok),
            body,
        )
    };
    let upload = |repo: &str, tok: &str, data: &[u8], oid: &str| {
        let batch = post(
            repo,
            "batch",
            tok,
            json!({ "operation": "upload",
            "objects": [{ "oid": oid, "size": data.len() }] }),
        );
        assert_eq!(batch.status, 200);
        let href = batch.json()["objects"][0]["actions"]["upload"]["href"]
            .as_str()
            .map(str::to_owned);
        if let Some(href) = &href {
            assert_eq!(
                call("PUT", href, None, &[], Some(data.to_vec())).status,
                200
            );
        }
        href.is_some()
    };
    let lfs_commit = |repo: &str, tok: &str, oid: &str, size: usize| {
        let op = json!({ "key": "lfsFile", "value": { "path": "w.bin", "algo": "sha256", "oid": oid, "size": size } });
        t.commit(
            tok,
            &format!("kernels/{repo}"),
            "main",
            ndjson(json!({}), &[op]),
        )
    };

    let secret = b"private weights".repeat(1000);
    let oid = hex::encode(Sha256::digest(&secret));
    let inline = b"inline secret".to_vec();
    let inline_oid = hex::encode(Sha256::digest(&inline));
    for repo in ["acme/weights", "evil/probe"] {
        let tok = if repo.starts_with("acme") {
            &alice
        } else {
            &mallory
        };
        t.create(tok, repo, "kernel");
    }
    assert!(upload("acme/weights", &alice, &secret, &oid));
    assert_eq!(
        lfs_commit("acme/weights", &alice, &oid, secret.len()).status,
        200
    );
    let sent = t.commit(
        &alice,
        "kernels/acme/weights",
        "main",
        ndjson(json!({}), &[file_op("i.txt", &inline)]),
    );
    assert_eq!(sent.status, 200);

    let probe_head = t.head("kernels/evil/probe", "main");
    for o in [&oid, &inline_oid] {
        // The other repo's writer is asked to upload, exactly as if the blob were not stored...
        let batch = post(
            "evil/probe",
            "batch",
            &mallory,
            json!({ "operation": "upload",
            "objects": [{ "oid": o, "size": 1 }] }),
        );
        assert!(
            batch.json()["objects"][0]["actions"]["upload"]["href"].is_string(),
            "{}",
            batch.json()
        );
        // ...verify and commit say it is missing, with the same message as for a blob never stored.
        assert_eq!(
            post(
                "evil/probe",
                "verify",
                &mallory,
                json!({ "oid": o, "size": 1 })
            )
            .status,
            404
        );
        let refused = lfs_commit("evil/probe", &mallory, o, 1);
        assert_eq!(refused.status, 400);
        assert!(String::from_utf8_lossy(&refused.body).contains("was never uploaded"));
    }
    assert_eq!(t.head("kernels/evil/probe", "main"), probe_head);
    let missing = call(
        "GET",
        &format!("{}/kernels/evil/probe/resolve/main/w.bin", t.url),
        None,
        &[],
        None,
    );
    assert_eq!(missing.status, 404);

    // Sending the real bytes proves possession: the upload is checked against the oid, then the commit works.
    assert!(upload("evil/probe", &mallory, &secret, &oid));
    assert_eq!(
        lfs_commit("evil/probe", &mallory, &oid, secret.len()).status,
        200
    );
    // The owner still skips re-uploads, and a later upload of the same bytes to its repo needs no PUT.
    assert!(!upload("acme/weights", &alice, &secret, &oid));
    assert!(!upload("evil/probe", &mallory, &secret, &oid));
}

#[test]
fn a_case_conflict_never_names_a_repo_its_caller_cannot_read() {
    let t = start(HubConfig::default());
    let owner = t.token("acme", true, &[]);
    let err = t.hub.meta.create_token("ACME", true, &[]).unwrap_err();
    assert!(
        err.to_string()
            .contains("differs from the existing namespace `acme` only in letter case"),
        "{err}"
    );
    // A data directory from before namespaces were kept case-distinct may hold both spellings.
    let twin = "hf_0123456789abcdef0123456789abcdef01234567";
    rusqlite::Connection::open(t.dir.path().join("hub.sqlite"))
        .unwrap()
        .execute(
            "INSERT INTO tokens (hash, user, write, orgs) VALUES (?1, 'Acme', 1, '')",
            [kforge_hub::auth::token_hash(twin)],
        )
        .unwrap();
    let create = |tok: &str, ns: &str, name: &str, private: bool| {
        post_json(
            &format!("{}/api/repos/create", t.url),
            Some(tok),
            json!({ "name": name, "organization": ns, "type": "kernel", "private": private }),
        )
    };
    assert_eq!(create(&owner, "acme", "secret", true).status, 200);
    assert_eq!(create(&owner, "acme", "open", false).status, 200);
    let hidden = create(twin, "Acme", "Secret", false);
    assert_eq!(hidden.status, 400);
    let text = String::from_utf8_lossy(&hidden.body);
    assert!(
        text.contains("differ from an existing repo only in letter case")
            && !text.contains("acme/")
    );
    let public = create(twin, "Acme", "OPEN", false);
    assert_eq!(public.status, 409);
    assert!(
        public.json()["url"]
            .as_str()
            .unwrap()
            .ends_with("/kernels/acme/open")
    );
    // The owner sees its own repo named, and a move onto a hidden twin is refused the same way.
    assert_eq!(create(&owner, "acme", "SECRET", false).status, 409);
    assert_eq!(create(twin, "Acme", "mine", false).status, 200);
    let moved = post_json(
        &format!("{}/api/repos/move", t.url),
        Some(twin),
        json!({ "fromRepo": "Acme/mine", "toRepo": "Acme/SECRET", "type": "kernel" }),
    );
    assert_eq!(
        moved.status,
        400,
        "{}",
        String::from_utf8_lossy(&moved.body)
    );
    assert!(!String::from_utf8_lossy(&moved.body).contains("acme/"));
    // Both spellings already stored keep working: their users may still be given tokens.
    assert!(t.hub.meta.create_token("Acme", true, &[]).is_ok());
    assert!(t.hub.meta.create_token("aCME", true, &[]).is_err());
}

#[test]
fn pending_lfs_uploads_are_capped() {
    let t = start(HubConfig {
        max_pending_uploads: 3,
        ..HubConfig::default()
    });
    let tok = t.token("alice", true, &["acme"]);
    t.create(&tok, "acme/many", "kernel");
    let url = format!("{}/kernels/acme/many.git/info/lfs/objects/batch", t.url);
    let files: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; 100]).collect();
    let batch = |files: &[Vec<u8>]| {
        let objects: Vec<Value> = files
            .iter()
            .map(|f| json!({ "oid": hex::encode(Sha256::digest(f)), "size": f.len() }))
            .collect();
        let a = post_json(
            &url,
            Some(&tok),
            json!({ "operation": "upload", "objects": objects }),
        );
        assert_eq!(a.status, 200);
        a.json()["objects"].as_array().unwrap().clone()
    };
    let answers = batch(&files);
    let hrefs: Vec<&str> = answers
        .iter()
        .filter_map(|o| o["actions"]["upload"]["href"].as_str())
        .collect();
    assert_eq!(hrefs.len(), 3);
    for refused in &answers[3..] {
        assert_eq!(refused["error"]["code"], 429, "{refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("--max-pending-uploads")
        );
    }
    // A finished upload frees its ticket, so the next batch gets one more.
    assert_eq!(
        call("PUT", hrefs[0], None, &[], Some(files[0].clone())).status,
        200
    );
    let again = batch(&files[3..]);
    assert!(
        again[0]["actions"]["upload"]["href"].is_string(),
        "{}",
        again[0]
    );
    assert_eq!(again[1]["error"]["code"], 429);
}

#[test]
fn tree_pages_follow_link_headers() {
    let t = start(HubConfig::default());
    let tok = t.token("alice", true, &[]);
    t.create(&tok, "alice/many", "model");
    let ops: Vec<Value> = (0..2300)
        .map(|i| file_op(&format!("d/f{i:05}.txt"), b"x"))
        .collect();
    assert_eq!(
        t.commit(&tok, "models/alice/many", "main", ndjson(json!({}), &ops))
            .status,
        200
    );
    let (pages, paths) = follow_pages(
        &format!(
            "{}/api/models/alice/many/tree/main?recursive=true&expand=false",
            t.url
        ),
        &t.url,
        "path",
    );
    assert_eq!(pages, 3);
    assert_eq!(paths.len(), 2301); // the folder plus every file
    assert_eq!(paths[0], "d");
    assert_eq!(paths[2300], "d/f02299.txt");
}

#[test]
fn concurrent_writers_lose_nothing_and_conflicts_are_412() {
    let t = Arc::new(start(HubConfig::default()));
    let tok = t.token("alice", true, &["acme"]);
    t.create(&tok, "acme/busy", "kernel");
    const WRITERS: usize = 16;
    const PER_WRITER: usize = 16;
    let conflicts = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (t, tok, conflicts) = (t.clone(), tok.clone(), conflicts.clone());
            std::thread::spawn(move || {
                for i in 0..PER_WRITER {
                    let file = file_op(&format!("w{w:02}/c{i:02}"), format!("{w}-{i}").as_bytes());
                    if i % 2 == 0 {
                        // Plain commits apply on top of whatever the head is.
                        let a = t.commit(
                            &tok,
                            "kernels/acme/busy",
                            "main",
                            ndjson(json!({}), &[file]),
                        );
                        assert_eq!(a.status, 200);
                        continue;
                    }
                    // Optimistic commits: retry on 412 until they land on the current head.
                    loop {
                        let head = t.head("kernels/acme/busy", "main");
                        let body =
                            ndjson(json!({ "parentCommit": head }), std::slice::from_ref(&file));
                        let a = t.commit(&tok, "kernels/acme/busy", "main", body);
                        match a.status {
                            200 => break,
                            412 => {
                                conflicts.fetch_add(1, Ordering::Relaxed);
                            }
                            s => panic!("unexpected {s}: {}", String::from_utf8_lossy(&a.body)),
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let log = call(
        "GET",
        &format!("{}/api/kernels/acme/busy/commits/main", t.url),
        None,
        &[],
        None,
    )
    .json();
    assert_eq!(log.as_array().unwrap().len(), WRITERS * PER_WRITER + 1);
    let files = call(
        "GET",
        &format!("{}/api/kernels/acme/busy/tree/main?recursive=true", t.url),
        None,
        &[],
        None,
    )
    .json();
    let n_files = files
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "file")
        .count();
    assert_eq!(n_files, WRITERS * PER_WRITER);
    let sample = call(
        "GET",
        &format!("{}/kernels/acme/busy/resolve/main/w07/c13", t.url),
        None,
        &[],
        None,
    );
    assert_eq!(sample.body, b"7-13");
    // With 16 writers racing, some optimistic commits must have lost a race.
    eprintln!(
        "412 conflicts answered: {}",
        conflicts.load(Ordering::Relaxed)
    );
}

#[test]
fn client_disconnect_mid_commit_changes_nothing() {
    use std::io::Write;
    let t = start(HubConfig::default());
    let tok = t.token("alice", true, &[]);
    t.create(&tok, "alice/m", "model");
    let before = t.head("models/alice/m", "main");
    let body = ndjson(json!({}), &[file_op("x.bin", &vec![1u8; 3 << 20])]);
    let addr = t.url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /api/models/alice/m/commit/main HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {tok}\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(&body[..body.len() / 2]).unwrap();
    drop(s);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(t.head("models/alice/m", "main"), before);
    assert_eq!(
        std::fs::read_dir(t.dir.path().join("tmp")).unwrap().count(),
        0
    );
    // The hub keeps serving.
    let ok = t.commit(&tok, "models/alice/m", "main", body);
    assert_eq!(ok.status, 200);
    assert_ne!(t.head("models/alice/m", "main"), before);
}

#[test]
fn one_hub_per_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let first = Hub::open(dir.path(), HubConfig::default()).unwrap();
    let err = Hub::open(dir.path(), HubConfig::default()).err().unwrap();
    assert!(
        err.to_string().contains("another kforge hub is serving"),
        "{err}"
    );
    drop(first);
    Hub::open(dir.path(), HubConfig::default()).unwrap();
}

#[test]
fn gc_removes_only_unreferenced_blobs() {
    use kforge_hub::model::{CommitRequest, Op, RepoKey, RepoType};
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::open(dir.path(), HubConfig::default()).unwrap();
    let put = |bytes: &[u8]| {
        hub.blobs
            .put(&mut &bytes[..], bytes.len() as u64, None)
            .unwrap()
    };
    let (shared, only_a, only_b, never_committed) =
        (put(b"shared"), put(b"a"), put(b"b"), put(b"orphan"));
    let key = |name: &str| RepoKey {
        repo_type: RepoType::Kernel,
        namespace: "acme".into(),
        name: name.into(),
    };
    let uploader = hub.meta.create_repo(&key("u"), false, "alice").unwrap();
    hub.meta
        .grant_blob(&uploader, &never_committed.sha256)
        .unwrap();
    for (name, own) in [("a", &only_a), ("b", &only_b)] {
        let repo = hub.meta.create_repo(&key(name), false, "alice").unwrap();
        let ops = vec![
            Op::Put {
                path: "shared".into(),
                blob: shared.clone(),
            },
            Op::Put {
                path: "own".into(),
                blob: own.clone(),
            },
        ];
        let req = CommitRequest {
            branch: "main".into(),
            parent: None,
            title: "t".into(),
            message: String::new(),
            author: "alice".into(),
            ops,
        };
        hub.meta.commit(&repo, &req).unwrap();
    }
    hub.meta.delete_repo(&key("b")).unwrap();

    // Within the grace period nothing goes.
    let young = hub.gc(Duration::from_secs(3600), false).unwrap();
    assert_eq!(
        (young.blobs_kept, young.blobs_too_young, young.blobs_removed),
        (2, 2, 0)
    );
    let dry = hub.gc(Duration::ZERO, true).unwrap();
    assert_eq!((dry.blobs_removed, dry.bytes_removed), (2, 7));
    assert!(hub.blobs.stat(&only_b.sha256).unwrap().is_some());

    let done = hub.gc(Duration::ZERO, false).unwrap();
    assert_eq!(
        (done.blobs_kept, done.blobs_removed, done.bytes_removed),
        (2, 2, 7)
    );
    for (blob, kept) in [
        (&shared, true),
        (&only_a, true),
        (&only_b, false),
        (&never_committed, false),
    ] {
        assert_eq!(
            hub.blobs.stat(&blob.sha256).unwrap().is_some(),
            kept,
            "{blob:?}"
        );
    }
    let a = hub.meta.repo(&key("a")).unwrap().unwrap();
    let tree = hub
        .meta
        .tree(&hub.meta.resolve(&a, "main").unwrap().tree_id)
        .unwrap();
    assert_eq!(tree.files.len(), 2);
    // A collected blob's grants go with it: storing it again takes its bytes, even for the repo that had it.
    assert!(hub.meta.blob_granted(&a, &only_a.sha256).unwrap());
    assert!(
        !hub.meta
            .blob_granted(&uploader, &never_committed.sha256)
            .unwrap()
    );
}

#[test]
fn hostile_queries_ranges_and_refs_get_clear_answers() {
    let t = start(HubConfig::default());
    let tok = t.token("alice", true, &["acme"]);
    t.create(&tok, "acme/h", "model");
    let done = t.commit(
        &tok,
        "models/acme/h",
        "main",
        ndjson(json!({}), &[file_op("d/a.txt", b"0123456789")]),
    );
    assert_eq!(done.status, 200);

    // A cursor near usize::MAX used to overflow `start + limit` (a panic, answered 500).
    let api = format!("{}/api/models/acme/h", t.url);
    for cursor in ["18446744073709551615", "3"] {
        let a = call(
            "GET",
            &format!("{api}/tree/main?recursive=true&cursor={cursor}"),
            None,
            &[],
            None,
        );
        assert_eq!(
            a.status,
            400,
            "{cursor}: {}",
            String::from_utf8_lossy(&a.body)
        );
        assert!(a.json()["error"].as_str().unwrap().contains("past the end"));
    }
    // The last valid cursor gives an empty page, not an error.
    let end = call(
        "GET",
        &format!("{api}/tree/main?recursive=true&cursor=2"),
        None,
        &[],
        None,
    );
    assert_eq!((end.status, end.json()), (200, json!([])));

    // Ranges: huge positions saturate instead of being ignored or refused.
    let url = format!("{}/acme/h/resolve/main/d/a.txt", t.url);
    let range = |spec: &str| call("GET", &url, None, &[("range", spec)], None);
    let huge_end = range("bytes=2-99999999999999999999999");
    assert_eq!(huge_end.status, 206);
    assert_eq!(huge_end.header("content-range"), Some("bytes 2-9/10"));
    assert_eq!(huge_end.body, b"23456789");
    let huge_suffix = range("bytes=-99999999999999999999999");
    assert_eq!(huge_suffix.status, 206);
    assert_eq!(huge_suffix.body, b"0123456789");
    let huge_start = range("bytes=99999999999999999999999-");
    assert_eq!(huge_start.status, 416);
    assert_eq!(huge_start.header("content-range"), Some("bytes */10"));
    for malformed in ["bytes=-", "bytes=-5-", "bytes=+1-2"] {
        let a = range(malformed);
        assert_eq!(
            (a.status, a.body.as_slice()),
            (200, &b"0123456789"[..]),
            "{malformed}"
        );
    }

    // Repo types this hub does not serve, and ids without a namespace, are RepoNotFound (what the client's
    // repo_exists/file_exists/hf_hub_download need), not a code-less 404.
    for path in [
        "/api/datasets/acme/h",
        "/api/spaces/acme/h/revision/main",
        "/datasets/acme/h/resolve/main/d/a.txt",
        "/spaces/acme/h/resolve/main/x",
        "/api/models/solo",
    ] {
        let a = call("GET", &format!("{}{path}", t.url), None, &[], None);
        assert_eq!(a.status, 404, "{path}");
        assert_eq!(a.header("x-error-code"), Some("RepoNotFound"), "{path}");
    }
    let head = call(
        "HEAD",
        &format!("{}/datasets/acme/h/resolve/main/x", t.url),
        None,
        &[],
        None,
    );
    assert_eq!(head.header("x-error-code"), Some("RepoNotFound"));

    // A JSON body over the limit is 413, not a 400 that reads like malformed JSON.
    let big = vec![b' '; (8 << 20) + 10];
    let a = call(
        "POST",
        &format!("{api}/preupload/main"),
        Some(&tok),
        &[],
        Some(big),
    );
    assert_eq!(a.status, 413);
    assert_eq!(a.header("x-error-code"), Some("PayloadTooLarge"));

    // An LFS batch error echoes the oid the client sent (a string stays a plain string).
    let batch = post_json(
        &format!("{}/acme/h.git/info/lfs/objects/batch", t.url),
        Some(&tok),
        json!({ "operation": "upload", "objects": [{ "oid": "abc", "size": -1 }] }),
    );
    assert_eq!(batch.json()["objects"][0]["oid"], "abc");
    assert_eq!(batch.json()["objects"][0]["error"]["code"], 422);

    // A header that is not an object, or with non-string fields, is refused rather than ignored.
    let before = t.head("models/acme/h", "main");
    for (header, needle) in [
        (json!("just a string"), "must be an object"),
        (json!({ "summary": 5 }), "`summary` must be a string"),
        (
            json!({ "description": ["x"] }),
            "`description` must be a string",
        ),
    ] {
        let body = ndjson(header, &[file_op("x", b"x")]);
        let a = t.commit(&tok, "models/acme/h", "main", body);
        assert_eq!(a.status, 400);
        assert!(
            a.json()["error"].as_str().unwrap().contains(needle),
            "{needle}"
        );
    }
    let nested_git = t.commit(
        &tok,
        "models/acme/h",
        "main",
        ndjson(
            json!({}),
            &[file_op("sub/.git/hooks/post-checkout", b"#!/bin/sh")],
        ),
    );
    assert_eq!(nested_git.status, 400);
    assert_eq!(t.head("models/acme/h", "main"), before);

    // Gating is not implemented: asking for it is refused and changes nothing.
    let settings = call(
        "PUT",
        &format!("{api}/settings"),
        Some(&tok),
        &[],
        Some(
            json!({ "gated": "auto", "private": true })
                .to_string()
                .into_bytes(),
        ),
    );
    assert_eq!(settings.status, 400);
    assert!(settings.json()["error"].as_str().unwrap().contains("gated"));
    let info = call("GET", &api, None, &[], None);
    assert_eq!(info.json()["private"], false);
    let ungated = call(
        "PUT",
        &format!("{api}/settings"),
        Some(&tok),
        &[],
        Some(json!({ "gated": false }).to_string().into_bytes()),
    );
    assert_eq!(ungated.status, 200);

    // A tag named like a branch (or the reverse) would be shadowed by it: 409.
    let tag_main = post_json(
        &format!("{api}/tag/main"),
        Some(&tok),
        json!({ "tag": "main" }),
    );
    assert_eq!(tag_main.status, 409);
    assert!(
        tag_main.json()["error"]
            .as_str()
            .unwrap()
            .contains("ambiguous")
    );
    let tag = post_json(
        &format!("{api}/tag/main"),
        Some(&tok),
        json!({ "tag": "v1" }),
    );
    assert_eq!(tag.status, 200);
    let branch = post_json(&format!("{api}/branch/v1"), Some(&tok), json!({}));
    assert_eq!(branch.status, 409);
    let refs = call("GET", &format!("{api}/refs"), None, &[], None).json();
    assert_eq!(refs["branches"].as_array().unwrap().len(), 1);
    assert_eq!(refs["tags"][0]["name"], "v1");
}

#[test]
fn commit_history_is_paged_with_link_headers() {
    let t = start(HubConfig::default());
    let tok = t.token("alice", true, &[]);
    t.create(&tok, "alice/log", "model");
    for i in 0..4 {
        let body = ndjson(
            json!({ "summary": format!("c{i}") }),
            &[file_op("f", i.to_string().as_bytes())],
        );
        assert_eq!(t.commit(&tok, "models/alice/log", "main", body).status, 200);
    }
    // 5 commits (4 + the initial one) in pages of 2: the client follows `Link` until there is none.
    let (pages, titles) = follow_pages(
        &format!("{}/api/models/alice/log/commits/main?limit=2", t.url),
        &t.url,
        "title",
    );
    assert_eq!(pages, 3);
    assert_eq!(titles, ["c3", "c2", "c1", "c0", "initial commit"]);
    for bad in ["p=3", "p=abc", "p=18446744073709551615"] {
        let a = call(
            "GET",
            &format!("{}/api/models/alice/log/commits/main?limit=2&{bad}", t.url),
            None,
            &[],
            None,
        );
        assert_eq!(a.status, 400, "{bad}");
        assert_eq!(a.header("x-error-code"), Some("BadRequest"));
    }
}
