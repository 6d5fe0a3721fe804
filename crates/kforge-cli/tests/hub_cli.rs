//! `kforge hub serve`, `kforge push` and `kforge pull` as processes: round trip, bad input, and `kill -9` of
//! the server in the middle of commits (the repo must come back at a consistent commit, with no partial files).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

mod common;

use common::{copy_tree, repo, scratch, text};
use kforge_hub::client::{HubClient, hash_file};
use kforge_hub::model::RepoType;

const KFORGE: &str = env!("CARGO_BIN_EXE_kforge");
const VARIANT: &str = "torch211-cxx11-cpu-x86_64-linux";

struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(data: &Path) -> Server {
        let mut child = Command::new(KFORGE)
            .args(["hub", "serve", "--addr", "127.0.0.1:0", "--data"])
            .arg(data)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("kforge hub listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Server { child, addr }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGKILL: no graceful shutdown, no flushing.
    fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn kforge(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(KFORGE)
        .args(args)
        .env_remove("HF_ENDPOINT")
        .env_remove("HF_TOKEN")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    (out.status.success(), stdout, stderr)
}

fn token(data: &Path, user: &str, write: bool) -> String {
    let mut args = vec![
        "hub", "token", "create", "--user", user, "--org", "acme", "--data",
    ];
    let d = data.to_str().unwrap();
    args.push(d);
    if write {
        args.push("--write");
    }
    let (ok, out, err) = kforge(&args, &[]);
    assert!(ok, "{err}");
    out.trim().to_owned()
}

/// A built project with one variant; `seed` varies the contents.
fn project(root: &Path, seed: u8) -> PathBuf {
    let v = root.join("build").join(VARIANT);
    std::fs::create_dir_all(v.join("sub")).unwrap();
    std::fs::write(v.join("__init__.py"), format!("SEED = {seed}\n")).unwrap();
    std::fs::write(
        v.join("metadata.json"),
        "{\"name\": \"relu\", \"version\": 1}\n",
    )
    .unwrap();
    let blob: Vec<u8> = (0..200_000u32)
        .map(|i| (i as u8).wrapping_mul(seed))
        .collect();
    std::fs::write(v.join("sub/_relu.abi3.so"), blob).unwrap();
    root.to_owned()
}

/// Every file under `dir`, relative path → bytes.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, out);
            } else {
                let rel = p.strip_prefix(base).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn push_pull_round_trip_and_cli_errors() {
    let tmp = scratch("kforge-hub-cli-roundtrip-");
    let data = tmp.path().join("data");
    let server = Server::start(&data);
    let url = server.url();
    let tok = token(&data, "alice", true);
    let src = project(&tmp.path().join("src"), 3);
    let env = [("HF_ENDPOINT", url.as_str()), ("HF_TOKEN", tok.as_str())];

    let (ok, out, err) = kforge(
        &["push", src.to_str().unwrap(), "--repo", "acme/relu"],
        &env,
    );
    assert!(ok, "{err}");
    assert!(
        out.contains("acme/relu@v1") && out.contains("3 files"),
        "{out}"
    );
    assert!(out.contains("3 object(s) uploaded"), "{out}");
    let client = HubClient::new(&url, Some(tok.clone()));
    let files = client
        .list_files(RepoType::Kernel, "acme/relu", "v1", "build")
        .unwrap();
    assert_eq!(files.len(), 3);

    // Pushing the same build again uploads nothing new and still makes a commit on v1.
    let (ok, out, err) = kforge(
        &["push", src.to_str().unwrap(), "--repo", "acme/relu"],
        &env,
    );
    assert!(ok, "{err}");
    assert!(out.contains("0 object(s) uploaded"), "{out}");

    let dest = tmp.path().join("dest");
    let (ok, out, err) = kforge(
        &[
            "pull",
            "acme/relu",
            "--version",
            "1",
            "--variant",
            VARIANT,
            "--dest",
            dest.to_str().unwrap(),
        ],
        &env,
    );
    assert!(ok, "{err}");
    assert!(out.contains("3 files"), "{out}");
    assert_eq!(snapshot(&dest.join("build")), snapshot(&src.join("build")));

    // Errors name what is wrong and how to fix it.
    let (ok, _, err) = kforge(
        &[
            "pull",
            "acme/relu",
            "--version",
            "9",
            "--dest",
            dest.to_str().unwrap(),
        ],
        &env,
    );
    assert!(
        !ok && err.contains("has no version 9") && err.contains("available: v1"),
        "{err}"
    );
    let (ok, _, err) = kforge(
        &[
            "pull",
            "acme/relu",
            "--variant",
            "torch-cuda",
            "--dest",
            "x",
        ],
        &env,
    );
    assert!(
        !ok && err.contains("no variant `torch-cuda`") && err.contains(VARIANT),
        "{err}"
    );
    let (ok, _, err) = kforge(
        &["push", tmp.path().to_str().unwrap(), "--repo", "acme/relu"],
        &env,
    );
    assert!(
        !ok && err.contains("run `kforge build` in the project first"),
        "{err}"
    );
    let (ok, _, err) = kforge(&["push", src.to_str().unwrap(), "--repo", "relu"], &env);
    assert!(!ok && err.contains("must be `ORG/NAME`"), "{err}");
    let (ok, _, err) = kforge(&["push", src.to_str().unwrap(), "--repo", "acme/relu"], &[]);
    assert!(
        !ok && err.contains("pass --endpoint URL or set HF_ENDPOINT"),
        "{err}"
    );
    let reader = token(&data, "bob", false);
    let (ok, _, err) = kforge(
        &[
            "push",
            src.to_str().unwrap(),
            "--repo",
            "acme/relu",
            "--endpoint",
            &url,
            "--token",
            &reader,
        ],
        &[],
    );
    assert!(
        !ok && err.contains("403") && err.contains("read-only"),
        "{err}"
    );
    let (ok, _, err) = kforge(
        &[
            "hub",
            "token",
            "create",
            "--user",
            "../x",
            "--data",
            data.to_str().unwrap(),
        ],
        &[],
    );
    assert!(!ok && err.contains("invalid user name `../x`"), "{err}");

    // A revoked token is refused from then on.
    let d = data.to_str().unwrap();
    assert!(kforge(&["hub", "token", "revoke", &tok, "--data", d], &[]).0);
    let (ok, _, err) = kforge(&["pull", "acme/relu", "--dest", "x"], &env);
    assert!(
        !ok && err.contains("401") && err.contains("Invalid credentials"),
        "{err}"
    );
    let (ok, _, err) = kforge(&["hub", "token", "revoke", &tok, "--data", d], &[]);
    assert!(!ok && err.contains("no such token"), "{err}");

    // Garbage collection needs the hub stopped; every blob is still referenced by v1.
    let (ok, _, err) = kforge(&["hub", "gc", "--data", d], &[]);
    assert!(
        !ok && err.contains("another kforge hub is serving"),
        "{err}"
    );
    drop(server);
    let (ok, out, err) = kforge(&["hub", "gc", "--data", d, "--grace-hours", "0"], &[]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with("removed 0 unreferenced blob(s), 0 bytes; kept 3 referenced"),
        "{out}"
    );
}

/// Raw HTTP, so that a request can be left half-sent.
fn send_partial(addr: &str, path: &str, token: &str, declared: usize, body: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/x-ndjson\r\nContent-Length: {declared}\r\n\r\n"
    )
    .unwrap();
    s.write_all(body).unwrap();
    s.flush().unwrap();
    s
}

/// A commit of one inline file of `len` bytes (`a` repeated, which is also its base64 form's alphabet).
fn big_commit(path: &str, len: usize) -> Vec<u8> {
    // "aaaa" base64-decodes to 3 bytes of 0x69; len must be a multiple of 3.
    let content = "a".repeat(len / 3 * 4);
    format!(
        "{{\"key\":\"header\",\"value\":{{\"summary\":\"big\"}}}}\n\
         {{\"key\":\"file\",\"value\":{{\"path\":\"{path}\",\"encoding\":\"base64\",\"content\":\"{content}\"}}}}\n"
    )
    .into_bytes()
}

#[test]
fn kill_dash_nine_mid_commit_leaves_a_consistent_repo() {
    let tmp = scratch("kforge-hub-cli-crash-");
    let data = tmp.path().join("data");
    let tok = token(&data, "alice", true);
    let src = project(&tmp.path().join("src"), 5);
    let server = Server::start(&data);
    let url = server.url();
    let env = [("HF_ENDPOINT", url.as_str()), ("HF_TOKEN", tok.as_str())];
    assert!(
        kforge(
            &["push", src.to_str().unwrap(), "--repo", "acme/relu"],
            &env
        )
        .0
    );
    let client = HubClient::new(&url, Some(tok.clone()));
    let before = client
        .revision_sha(RepoType::Kernel, "acme/relu", "v1")
        .unwrap();

    // 1. Killed while the body is still arriving.
    let body = big_commit("partial.bin", 30_000_000);
    let _conn = send_partial(
        &server.addr,
        "/api/kernels/acme/relu/commit/v1",
        &tok,
        body.len(),
        &body[..body.len() / 2],
    );
    std::thread::sleep(Duration::from_millis(200));
    server.kill9();

    let server = Server::start(&data);
    let client = HubClient::new(&server.url(), Some(tok.clone()));
    assert_eq!(
        client
            .revision_sha(RepoType::Kernel, "acme/relu", "v1")
            .unwrap(),
        before
    );
    assert_eq!(
        std::fs::read_dir(data.join("tmp")).unwrap().count(),
        0,
        "partial uploads were cleaned"
    );

    // 2. Killed after the whole body was sent, while the hub stores blobs and commits: either outcome is
    //    fine, as long as it is all-or-nothing.
    let body = big_commit("whole.bin", 60_000_000);
    let mut conn = send_partial(
        &server.addr,
        "/api/kernels/acme/relu/commit/v1",
        &tok,
        body.len(),
        &body,
    );
    std::thread::sleep(Duration::from_millis(30));
    server.kill9();
    let mut ignored = Vec::new();
    let _ = conn.read_to_end(&mut ignored);

    let server = Server::start(&data);
    let url = server.url();
    let client = HubClient::new(&url, Some(tok.clone()));
    let after = client
        .revision_sha(RepoType::Kernel, "acme/relu", "v1")
        .unwrap();
    let files = client
        .list_files(RepoType::Kernel, "acme/relu", &after, "")
        .unwrap();
    let names: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    if after == before {
        assert!(!names.contains(&"whole.bin"));
    } else {
        assert!(names.contains(&"whole.bin"));
        assert!(files.contains(&("whole.bin".to_string(), 60_000_000)));
    }
    assert!(!names.contains(&"partial.bin"));

    // Every stored blob matches its name: nothing half-written became visible.
    for shard in std::fs::read_dir(data.join("blobs")).unwrap() {
        for blob in std::fs::read_dir(shard.unwrap().path()).unwrap() {
            let p = blob.unwrap().path();
            if p.extension().is_none() {
                let (sha, _) = hash_file(&p).unwrap();
                assert_eq!(sha, p.file_name().unwrap().to_string_lossy());
            }
        }
    }
    // And the pushed build still pulls byte-identical.
    let dest = tmp.path().join("dest");
    let env = [("HF_ENDPOINT", url.as_str()), ("HF_TOKEN", tok.as_str())];
    let (ok, _, err) = kforge(
        &[
            "pull",
            "acme/relu",
            "--version",
            "1",
            "--dest",
            dest.to_str().unwrap(),
        ],
        &env,
    );
    assert!(ok, "{err}");
    assert_eq!(snapshot(&dest.join("build")), snapshot(&src.join("build")));
}

#[test]
fn push_takes_the_repo_from_build_toml() {
    let tmp = scratch("kforge-hub-cli-toml-");
    let data = tmp.path().join("data");
    let server = Server::start(&data);
    let url = server.url();
    let out = Command::new(KFORGE)
        .args([
            "hub",
            "token",
            "create",
            "--user",
            "alice",
            "--write",
            "--org",
            "kforge-demo",
            "--data",
        ])
        .arg(&data)
        .output()
        .unwrap();
    let tok = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    // The relu example declares `[general.hub] repo-id = "kforge-demo/relu"`.
    let relu = repo().join("kernels/relu");
    let proj = tmp.path().join("relu");
    copy_tree(&relu, &proj);
    project(&proj, 9);
    std::fs::create_dir_all(proj.join("build/device/rocm")).unwrap();
    let env = [("HF_ENDPOINT", url.as_str()), ("HF_TOKEN", tok.as_str())];
    let (ok, out, err) = kforge(&["push", proj.to_str().unwrap()], &env);
    assert!(ok, "{err}");
    assert!(out.contains("kforge-demo/relu@v1"), "{out}");
    assert!(out.contains("skipped build/device/"), "{out}");
    let client = HubClient::new(&url, Some(tok));
    let files = client
        .list_files(RepoType::Kernel, "kforge-demo/relu", "v1", "build")
        .unwrap();
    assert!(
        files
            .iter()
            .all(|(p, _)| p.starts_with(&format!("build/{VARIANT}/"))),
        "{files:?}"
    );
}
