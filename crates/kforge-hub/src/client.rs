//! Client side of the hub: `kforge push` and `kforge pull`, speaking only the HF Hub API (refs, tree, LFS
//! batch "basic" uploads streamed from disk, one NDJSON commit), so they work against any compatible hub.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::http::encode_segment;
use crate::model::RepoType;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{method} {url}: HTTP {status}: {message}")]
    Http {
        method: &'static str,
        url: String,
        status: u16,
        message: String,
    },
    #[error("{method} {url}: {source}")]
    Transport {
        method: &'static str,
        url: String,
        source: Box<ureq::Error>,
    },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Invalid(String),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ClientError + '_ {
    move |source| ClientError::Io {
        path: path.to_owned(),
        source,
    }
}

/// A connection to one hub as one user.
pub struct HubClient {
    endpoint: String,
    token: Option<String>,
    agent: ureq::Agent,
}

/// An HTTP answer whose status the caller inspects.
struct Answer {
    status: u16,
    headers: ureq::http::HeaderMap,
    body: ureq::Body,
}

impl Answer {
    fn json(mut self, method: &'static str, url: &str) -> Result<Value, ClientError> {
        self.body
            .with_config()
            .limit(256 << 20)
            .read_json()
            .map_err(|e| ClientError::Transport {
                method,
                url: url.to_owned(),
                source: Box::new(e),
            })
    }

    /// `X-Error-Message` and the body's text.
    fn error_parts(&mut self) -> (Option<String>, String) {
        let header = self
            .headers
            .get("x-error-message")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        (header, self.body.read_to_string().unwrap_or_default())
    }

    /// A create's 409: fine when the existing repo is `repo_id` itself, an error when the hub holds it under
    /// another spelling (a name differing only in letter case), which every later request would miss.
    fn exists_as(mut self, repo_id: &str, url: &str) -> Result<(), ClientError> {
        let (header, text) = self.error_parts();
        let existing = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v.get("url")?.as_str().map(str::to_owned));
        match existing {
            Some(u) if !u.ends_with(&format!("/{repo_id}")) => Err(ClientError::Http {
                method: "POST",
                url: url.to_owned(),
                status: 409,
                message: header.unwrap_or_else(|| format!("the hub holds this repo as {u}")),
            }),
            _ => Ok(()),
        }
    }

    /// The hub's error text: `X-Error-Message`, else the JSON `error`, else the raw body.
    fn error(mut self, method: &'static str, url: &str) -> ClientError {
        let (header, text) = self.error_parts();
        let message = header
            .or_else(|| {
                serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_owned))
            })
            .unwrap_or(text);
        ClientError::Http {
            method,
            url: url.to_owned(),
            status: self.status,
            message,
        }
    }
}

/// A file to upload: where it is on disk, where it goes in the repo, and its digests.
#[derive(Debug, Clone)]
pub struct LocalFile {
    pub local: PathBuf,
    pub path_in_repo: String,
    pub sha256: String,
    pub size: u64,
}

/// sha256 and size of a file, streamed.
pub fn hash_file(path: &Path) -> Result<(String, u64), ClientError> {
    let mut file = fs::File::open(path).map_err(io_err(path))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hex::encode(h.finalize()), size))
}

impl HubClient {
    pub fn new(endpoint: &str, token: Option<String>) -> HubClient {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(30)))
            .build()
            .new_agent();
        HubClient {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            token: token.filter(|t| !t.is_empty()),
            agent,
        }
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn api(&self, repo_type: RepoType, repo_id: &str, rest: &str) -> String {
        format!(
            "{}/api/{}/{repo_id}{rest}",
            self.endpoint,
            repo_type.api_segment()
        )
    }

    fn send(
        &self,
        method: &'static str,
        url: &str,
        body: Option<(&str, Vec<u8>)>,
        auth: bool,
    ) -> Result<Answer, ClientError> {
        let builder = ureq::http::Request::builder().method(method).uri(url);
        let builder = match (&self.token, auth) {
            (Some(t), true) => builder.header("authorization", format!("Bearer {t}")),
            _ => builder,
        };
        let transport = |e: ureq::Error| ClientError::Transport {
            method,
            url: url.to_owned(),
            source: Box::new(e),
        };
        let resp = match body {
            Some((content_type, bytes)) => {
                let req = builder
                    .header("content-type", content_type)
                    .body(bytes)
                    .map_err(|e| ClientError::Invalid(format!("building {method} {url}: {e}")))?;
                self.agent.run(req).map_err(transport)?
            }
            None => {
                let req = builder
                    .body(())
                    .map_err(|e| ClientError::Invalid(format!("building {method} {url}: {e}")))?;
                self.agent.run(req).map_err(transport)?
            }
        };
        let (parts, body) = resp.into_parts();
        Ok(Answer {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }

    /// Send JSON (or nothing) and return the JSON answer of a 2xx; anything else is an error.
    fn call_json(
        &self,
        method: &'static str,
        url: &str,
        body: Option<Value>,
    ) -> Result<Value, ClientError> {
        let payload = body.map(|b| ("application/json", b.to_string().into_bytes()));
        let answer = self.send(method, url, payload, true)?;
        if (200..300).contains(&answer.status) {
            answer.json(method, url)
        } else {
            Err(answer.error(method, url))
        }
    }

    /// Create the repo if it does not exist (like `create_repo(exist_ok=True)`).
    pub fn ensure_repo(
        &self,
        repo_type: RepoType,
        repo_id: &str,
        private: bool,
    ) -> Result<(), ClientError> {
        let (ns, name) = split_repo_id(repo_id)?;
        let mut body = json!({ "name": name, "organization": ns, "private": private });
        if repo_type != RepoType::Model {
            body["type"] = json!(repo_type.as_str());
        }
        let url = format!("{}/api/repos/create", self.endpoint);
        let payload = Some(("application/json", body.to_string().into_bytes()));
        let answer = self.send("POST", &url, payload, true)?;
        match answer.status {
            200..=299 => Ok(()),
            409 => answer.exists_as(repo_id, &url),
            _ => Err(answer.error("POST", &url)),
        }
    }

    /// Branches as (name, target commit).
    pub fn branches(
        &self,
        repo_type: RepoType,
        repo_id: &str,
    ) -> Result<BTreeMap<String, String>, ClientError> {
        let url = self.api(repo_type, repo_id, "/refs");
        let refs = self.call_json("GET", &url, None)?;
        Ok(refs["branches"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|b| {
                Some((
                    b["name"].as_str()?.to_owned(),
                    b["targetCommit"].as_str()?.to_owned(),
                ))
            })
            .collect())
    }

    pub fn create_branch(
        &self,
        repo_type: RepoType,
        repo_id: &str,
        branch: &str,
        starting_point: &str,
    ) -> Result<(), ClientError> {
        let url = self.api(
            repo_type,
            repo_id,
            &format!("/branch/{}", encode_segment(branch)),
        );
        self.call_json(
            "POST",
            &url,
            Some(json!({ "startingPoint": starting_point })),
        )?;
        Ok(())
    }

    /// The commit id a revision points to.
    pub fn revision_sha(
        &self,
        repo_type: RepoType,
        repo_id: &str,
        rev: &str,
    ) -> Result<String, ClientError> {
        let url = self.api(
            repo_type,
            repo_id,
            &format!("/revision/{}", encode_segment(rev)),
        );
        let info = self.call_json("GET", &url, None)?;
        info["sha"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| ClientError::Invalid(format!("GET {url}: the answer has no `sha`")))
    }

    /// Files (path, size) under `dir` at `rev`, recursively, following pagination. A missing folder is empty.
    pub fn list_files(
        &self,
        repo_type: RepoType,
        repo_id: &str,
        rev: &str,
        dir: &str,
    ) -> Result<Vec<(String, u64)>, ClientError> {
        let path: String = dir
            .split('/')
            .map(encode_segment)
            .collect::<Vec<_>>()
            .join("/");
        let mut url = Some(self.api(
            repo_type,
            repo_id,
            &format!(
                "/tree/{}/{path}?recursive=true&expand=false",
                encode_segment(rev)
            ),
        ));
        let mut out = Vec::new();
        while let Some(u) = url.take() {
            let answer = self.send("GET", &u, None, true)?;
            if answer.status == 404
                && answer
                    .headers
                    .get("x-error-code")
                    .and_then(|v| v.to_str().ok())
                    == Some("EntryNotFound")
            {
                return Ok(out);
            }
            if !(200..300).contains(&answer.status) {
                return Err(answer.error("GET", &u));
            }
            url = next_link(&answer.headers);
            let items = answer.json("GET", &u)?;
            for item in items.as_array().into_iter().flatten() {
                if item["type"] == "file"
                    && let (Some(p), Some(size)) = (item["path"].as_str(), item["size"].as_u64())
                {
                    out.push((p.to_owned(), size));
                }
            }
        }
        Ok(out)
    }

    /// Upload the objects the hub lacks through the LFS batch API ("basic": one streamed PUT each).
    /// Returns (objects uploaded, bytes uploaded).
    pub fn upload_objects(
        &self,
        repo_type: RepoType,
        repo_id: &str,
        branch: &str,
        files: &[LocalFile],
    ) -> Result<(usize, u64), ClientError> {
        let mut unique: BTreeMap<&str, &LocalFile> = BTreeMap::new();
        for f in files {
            unique.entry(&f.sha256).or_insert(f);
        }
        let url = format!(
            "{}/{}{repo_id}.git/info/lfs/objects/batch",
            self.endpoint,
            repo_type.url_prefix()
        );
        let (mut count, mut bytes) = (0, 0);
        let all: Vec<&LocalFile> = unique.into_values().collect();
        for chunk in all.chunks(256) {
            let objects: Vec<Value> = chunk
                .iter()
                .map(|f| json!({ "oid": f.sha256, "size": f.size }))
                .collect();
            let body = json!({
                "operation": "upload", "transfers": ["basic"], "objects": objects,
                "hash_algo": "sha256", "ref": { "name": format!("refs/heads/{branch}") },
            });
            let payload = Some((
                "application/vnd.git-lfs+json",
                body.to_string().into_bytes(),
            ));
            let answer = self.send("POST", &url, payload, true)?;
            if !(200..300).contains(&answer.status) {
                return Err(answer.error("POST", &url));
            }
            let batch = answer.json("POST", &url)?;
            for (obj, local) in batch["objects"].as_array().into_iter().flatten().zip(chunk) {
                if obj["oid"].as_str() != Some(local.sha256.as_str()) {
                    return Err(ClientError::Invalid(format!(
                        "POST {url}: the answer lists objects in another order than requested"
                    )));
                }
                if let Some(err) = obj.get("error") {
                    return Err(ClientError::Invalid(format!(
                        "the hub refused `{}` ({}): {}",
                        local.path_in_repo, local.sha256, err["message"]
                    )));
                }
                let Some(href) = obj["actions"]["upload"]["href"].as_str() else {
                    continue; // already in this repo
                };
                self.put_file(href, local)?;
                if let Some(verify) = obj["actions"]["verify"]["href"].as_str() {
                    self.call_json(
                        "POST",
                        verify,
                        Some(json!({ "oid": local.sha256, "size": local.size })),
                    )?;
                }
                count += 1;
                bytes += local.size;
            }
        }
        Ok((count, bytes))
    }

    fn put_file(&self, href: &str, local: &LocalFile) -> Result<(), ClientError> {
        let file = fs::File::open(&local.local).map_err(io_err(&local.local))?;
        // The upload URL carries its own one-time credential; no Authorization header, as LFS clients do.
        let resp = self
            .agent
            .put(href)
            .send(file)
            .map_err(|e| ClientError::Transport {
                method: "PUT",
                url: href.to_owned(),
                source: Box::new(e),
            })?;
        let (parts, body) = resp.into_parts();
        if parts.status.is_success() {
            Ok(())
        } else {
            Err(Answer {
                status: parts.status.as_u16(),
                headers: parts.headers,
                body,
            }
            .error("PUT", href))
        }
    }

    /// One NDJSON commit on `branch`; returns the new commit id.
    pub fn commit(
        &self,
        repo_type: RepoType,
        repo_id: &str,
        branch: &str,
        header: Value,
        ops: &[Value],
    ) -> Result<String, ClientError> {
        let url = self.api(
            repo_type,
            repo_id,
            &format!("/commit/{}", encode_segment(branch)),
        );
        let mut body = json!({ "key": "header", "value": header }).to_string();
        for op in ops {
            body.push('\n');
            body.push_str(&op.to_string());
        }
        body.push('\n');
        let answer = self.send(
            "POST",
            &url,
            Some(("application/x-ndjson", body.into_bytes())),
            true,
        )?;
        if !(200..300).contains(&answer.status) {
            return Err(answer.error("POST", &url));
        }
        let done = answer.json("POST", &url)?;
        done["commitOid"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| {
                ClientError::Invalid(format!("POST {url}: the answer has no `commitOid`"))
            })
    }

    /// Current remote git blob id of `path` on `rev` (from preupload), if the file exists.
    pub fn remote_oid(
        &self,
        repo_type: RepoType,
        repo_id: &str,
        rev: &str,
        path: &str,
        size: u64,
    ) -> Result<Option<String>, ClientError> {
        let url = self.api(
            repo_type,
            repo_id,
            &format!("/preupload/{}", encode_segment(rev)),
        );
        let answer = self.call_json(
            "POST",
            &url,
            Some(json!({ "files": [{ "path": path, "size": size, "sample": "" }] })),
        )?;
        Ok(answer["files"][0]["oid"].as_str().map(str::to_owned))
    }

    /// Download `path` at commit `sha` into `dest`, checking the content against the hub's sha256 etag.
    pub fn download(
        &self,
        repo_type: RepoType,
        repo_id: &str,
        sha: &str,
        path: &str,
        dest: &Path,
    ) -> Result<u64, ClientError> {
        let encoded: String = path
            .split('/')
            .map(encode_segment)
            .collect::<Vec<_>>()
            .join("/");
        let url = format!(
            "{}/{}{repo_id}/resolve/{sha}/{encoded}",
            self.endpoint,
            repo_type.url_prefix()
        );
        let answer = self.send("GET", &url, None, true)?;
        if answer.status != 200 {
            return Err(answer.error("GET", &url));
        }
        let etag = answer
            .headers
            .get("x-linked-etag")
            .or_else(|| answer.headers.get("etag"))
            .and_then(|v| v.to_str().ok())
            .map(|e| e.trim_start_matches("W/").trim_matches('"').to_owned());
        let mut reader = answer.body.into_reader();
        let mut out = fs::File::create(dest).map_err(io_err(dest))?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 256 * 1024];
        let mut size = 0u64;
        loop {
            let n = reader.read(&mut buf).map_err(|source| ClientError::Io {
                path: PathBuf::from(&url),
                source,
            })?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(io_err(dest))?;
            size += n as u64;
        }
        out.sync_all().map_err(io_err(dest))?;
        let got = hex::encode(h.finalize());
        if let Some(expected) = etag.filter(|e| e.len() == 64)
            && expected != got
        {
            return Err(ClientError::Invalid(format!(
                "GET {url}: content sha256 {got} does not match the hub's etag {expected}"
            )));
        }
        Ok(size)
    }
}

fn next_link(headers: &ureq::http::HeaderMap) -> Option<String> {
    let link = headers.get("link")?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params.contains("rel=\"next\"").then(|| {
            url.trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_owned()
        })
    })
}

/// `ns/name` → (`ns`, `name`), with a clear error otherwise.
pub fn split_repo_id(repo_id: &str) -> Result<(&str, &str), ClientError> {
    match repo_id.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns, name))
        }
        _ => Err(ClientError::Invalid(format!(
            "repository id `{repo_id}` must be `ORG/NAME` (exactly one `/`)"
        ))),
    }
}

// ---------------------------------------------------------------------------------------------------------
// push

/// What `kforge push` uploads, and where.
#[derive(Debug, Clone)]
pub struct PushOptions {
    /// The kernel project directory (holding `build/<variant>/`).
    pub project: PathBuf,
    pub repo_id: String,
    pub repo_type: RepoType,
    /// Major version (branch `v<N>`); read from the variants' `metadata.json` when `None`.
    pub version: Option<u64>,
    /// Upload to this branch instead of `v<version>` (build.toml's `[general.hub] branch`).
    pub branch: Option<String>,
    pub private: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushReport {
    pub branch: String,
    pub commit: String,
    pub variants: Vec<String>,
    pub files: usize,
    pub uploaded_objects: usize,
    pub uploaded_bytes: u64,
    /// Directories under `build/` that are not variants and were not pushed.
    pub skipped: Vec<String>,
    /// The commit on `main` that updated README.md, if any.
    pub readme_commit: Option<String>,
}

/// What `build/` holds: variant directories with their files (skipping `__pycache__` and `*.pyc`), and the
/// directories that are not variants (e.g. `build/device/` from a device-only build), which are not pushed.
#[derive(Debug, Default)]
pub struct BuildDir {
    pub variants: BTreeMap<String, Vec<LocalFile>>,
    pub skipped: Vec<String>,
}

pub fn collect_variants(project: &Path) -> Result<BuildDir, ClientError> {
    let build = project.join("build");
    let entries = fs::read_dir(&build).map_err(|e| {
        ClientError::Invalid(format!(
            "{}: cannot read the build directory ({e}); run `kforge build` in the project first",
            build.display()
        ))
    })?;
    let mut out = BuildDir::default();
    for entry in entries {
        let entry = entry.map_err(io_err(&build))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !entry.path().is_dir() {
            continue;
        }
        if name.parse::<kforge_manifest::Variant>().is_err() && name != "torch-universal" {
            out.skipped.push(name);
            continue;
        }
        let mut files = Vec::new();
        walk(&entry.path(), &format!("build/{name}"), &mut files)?;
        if !files
            .iter()
            .any(|f| f.path_in_repo == format!("build/{name}/metadata.json"))
        {
            return Err(ClientError::Invalid(format!(
                "{}: no metadata.json (kernels >= 0.17 refuses variants without it); rebuild with `kforge build`",
                entry.path().display()
            )));
        }
        out.variants.insert(name, files);
    }
    out.skipped.sort();
    if out.variants.is_empty() {
        return Err(ClientError::Invalid(format!(
            "{}: no build/<variant>/ directories to push{}; run `kforge build` first",
            build.display(),
            if out.skipped.is_empty() {
                String::new()
            } else {
                format!(" (not variant names: {})", out.skipped.join(", "))
            }
        )));
    }
    Ok(out)
}

fn walk(dir: &Path, prefix: &str, out: &mut Vec<LocalFile>) -> Result<(), ClientError> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .map_err(io_err(dir))?
        .collect::<Result<_, _>>()
        .map_err(io_err(dir))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let repo_path = format!("{prefix}/{name}");
        crate::paths::validate_repo_path(&repo_path)
            .map_err(|e| ClientError::Invalid(format!("{}: {e}", path.display())))?;
        if path.is_dir() {
            if name != "__pycache__" {
                walk(&path, &repo_path, out)?;
            }
        } else if !name.ends_with(".pyc") {
            let (sha256, size) = hash_file(&path)?;
            out.push(LocalFile {
                local: path,
                path_in_repo: repo_path,
                sha256,
                size,
            });
        }
    }
    Ok(())
}

/// The `version` all variants' metadata.json agree on.
fn metadata_version(
    project: &Path,
    variants: &BTreeMap<String, Vec<LocalFile>>,
) -> Result<u64, ClientError> {
    let mut found: Option<(u64, String)> = None;
    for name in variants.keys() {
        let path = project.join("build").join(name).join("metadata.json");
        let text = fs::read_to_string(&path).map_err(io_err(&path))?;
        let meta: Value = serde_json::from_str(&text).map_err(|e| {
            ClientError::Invalid(format!("{}: not valid JSON: {e}", path.display()))
        })?;
        let v = meta["version"].as_u64().ok_or_else(|| {
            ClientError::Invalid(format!(
                "{}: no integer `version`; pass --version N",
                path.display()
            ))
        })?;
        match &found {
            Some((other, first)) if *other != v => {
                return Err(ClientError::Invalid(format!(
                    "variants disagree on the version: {first} says {other}, {name} says {v}; rebuild or pass --version"
                )));
            }
            Some(_) => {}
            None => found = Some((v, name.clone())),
        }
    }
    found
        .map(|(v, _)| v)
        .ok_or_else(|| ClientError::Invalid("no variants".into()))
}

/// git blob id of a file's bytes (to skip an unchanged README).
fn git_blob_sha1(bytes: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(format!("blob {}\0", bytes.len()).as_bytes());
    h.update(bytes);
    hex::encode(h.finalize())
}

/// Upload every `build/<variant>/` to branch `v<version>` in one commit, like HF's `kernel-builder upload`:
/// the uploaded variants replace their previous contents (a new branch drops everything under `build/`),
/// other variants on the branch stay. README.md, if present, goes to `main`.
pub fn push(client: &HubClient, opts: &PushOptions) -> Result<PushReport, ClientError> {
    split_repo_id(&opts.repo_id)?;
    let BuildDir { variants, skipped } = collect_variants(&opts.project)?;
    let branch = match (&opts.branch, opts.version) {
        (Some(b), _) => b.clone(),
        (None, Some(v)) => format!("v{v}"),
        (None, None) => format!("v{}", metadata_version(&opts.project, &variants)?),
    };
    let (ty, repo) = (opts.repo_type, opts.repo_id.as_str());
    client.ensure_repo(ty, repo, opts.private)?;
    let mut branches = client.branches(ty, repo)?;
    let new_branch = !branches.contains_key(&branch);
    if new_branch {
        client.create_branch(ty, repo, &branch, "main")?;
        branches = client.branches(ty, repo)?;
    }
    let head = branches.get(&branch).cloned().ok_or_else(|| {
        ClientError::Invalid(format!("branch {branch} vanished right after its creation"))
    })?;
    let existing = client.list_files(ty, repo, &head, "build")?;
    let files: Vec<LocalFile> = variants.values().flatten().cloned().collect();
    let (uploaded_objects, uploaded_bytes) = client.upload_objects(ty, repo, &branch, &files)?;

    let mut ops = Vec::new();
    let stale = |prefix: &str| existing.iter().any(|(p, _)| p.starts_with(prefix));
    if new_branch {
        if stale("build/") {
            ops.push(json!({ "key": "deletedFolder", "value": { "path": "build" } }));
        }
    } else {
        for name in variants.keys() {
            if stale(&format!("build/{name}/")) {
                ops.push(
                    json!({ "key": "deletedFolder", "value": { "path": format!("build/{name}") } }),
                );
            }
        }
    }
    for f in &files {
        ops.push(json!({ "key": "lfsFile", "value": {
            "path": f.path_in_repo, "algo": "sha256", "oid": f.sha256, "size": f.size } }));
    }
    let names: Vec<String> = variants.keys().cloned().collect();
    let header = json!({
        "summary": format!("Upload {} variant(s) to {branch}", names.len()),
        "description": format!("kforge push: {}", names.join(", ")),
        "parentCommit": head,
    });
    let commit = client.commit(ty, repo, &branch, header, &ops).map_err(|e| match e {
        ClientError::Http { status: 412, .. } => ClientError::Invalid(format!(
            "branch {branch} of {repo} moved while pushing (someone else pushed); run `kforge push` again"
        )),
        other => other,
    })?;

    let readme_commit = push_readme(client, opts)?;
    Ok(PushReport {
        branch,
        commit,
        variants: names,
        files: files.len(),
        uploaded_objects,
        uploaded_bytes,
        skipped,
        readme_commit,
    })
}

fn push_readme(client: &HubClient, opts: &PushOptions) -> Result<Option<String>, ClientError> {
    let path = opts.project.join("README.md");
    if !path.is_file() {
        return Ok(None);
    }
    let bytes = fs::read(&path).map_err(io_err(&path))?;
    let (ty, repo) = (opts.repo_type, opts.repo_id.as_str());
    if client.remote_oid(ty, repo, "main", "README.md", bytes.len() as u64)?
        == Some(git_blob_sha1(&bytes))
    {
        return Ok(None);
    }
    let op = json!({ "key": "file", "value": {
        "path": "README.md", "encoding": "base64",
        "content": base64::engine::general_purpose::STANDARD.encode(&bytes) } });
    let header = json!({ "summary": "Update README.md", "description": "kforge push" });
    client.commit(ty, repo, "main", header, &[op]).map(Some)
}

// ---------------------------------------------------------------------------------------------------------
// pull

/// Which kernel build to fetch, and where to put it.
#[derive(Debug, Clone)]
pub struct PullOptions {
    pub repo_id: String,
    pub repo_type: RepoType,
    pub version: Option<u64>,
    pub revision: Option<String>,
    /// Only this variant (default: all).
    pub variant: Option<String>,
    /// Files land in `<dest>/build/<variant>/...`.
    pub dest: PathBuf,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullReport {
    pub revision: String,
    pub commit: String,
    pub variants: Vec<String>,
    pub files: usize,
    pub bytes: u64,
}

/// The revision `version`/`revision` ask for; without either, the highest `v<N>` branch (as `kernels info`).
fn pick_revision(client: &HubClient, opts: &PullOptions) -> Result<String, ClientError> {
    if let Some(rev) = &opts.revision {
        return Ok(rev.clone());
    }
    let branches = client.branches(opts.repo_type, &opts.repo_id)?;
    let mut versions: Vec<u64> = branches
        .keys()
        .filter_map(|b| b.strip_prefix('v')?.parse().ok())
        .collect();
    versions.sort_unstable();
    let listed = versions
        .iter()
        .map(|v| format!("v{v}"))
        .collect::<Vec<_>>()
        .join(", ");
    match opts.version {
        Some(v) if versions.contains(&v) => Ok(format!("v{v}")),
        Some(v) => Err(ClientError::Invalid(format!(
            "{} has no version {v} (branch v{v}); available: {}",
            opts.repo_id,
            if listed.is_empty() { "none" } else { &listed }
        ))),
        None => versions.last().map(|v| format!("v{v}")).ok_or_else(|| {
            ClientError::Invalid(format!(
                "{} has no version branches (v<N>); pass --revision",
                opts.repo_id
            ))
        }),
    }
}

/// Download `build/<variant>/` (one or all) of a revision. Files are staged in a temp folder under `dest`
/// and each variant directory is swapped in only once all of its files arrived and matched their digests.
pub fn pull(client: &HubClient, opts: &PullOptions) -> Result<PullReport, ClientError> {
    split_repo_id(&opts.repo_id)?;
    let (ty, repo) = (opts.repo_type, opts.repo_id.as_str());
    let revision = pick_revision(client, opts)?;
    let commit = client.revision_sha(ty, repo, &revision)?;
    let files = client.list_files(ty, repo, &commit, "build")?;
    let mut by_variant: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
    for (path, size) in files {
        if let Some(variant) = path
            .strip_prefix("build/")
            .and_then(|r| r.split_once('/'))
            .map(|(v, _)| v)
        {
            by_variant
                .entry(variant.to_owned())
                .or_default()
                .push((path, size));
        }
    }
    if let Some(v) = &opts.variant {
        let available = by_variant.keys().cloned().collect::<Vec<_>>().join(", ");
        by_variant.retain(|name, _| name == v);
        if by_variant.is_empty() {
            return Err(ClientError::Invalid(format!(
                "{repo}@{revision} has no variant `{v}`; available: {}",
                if available.is_empty() {
                    "none"
                } else {
                    &available
                }
            )));
        }
    }
    if by_variant.is_empty() {
        return Err(ClientError::Invalid(format!(
            "{repo}@{revision} has no build/<variant>/ files"
        )));
    }
    let build = opts.dest.join("build");
    fs::create_dir_all(&build).map_err(io_err(&build))?;
    let staging = opts
        .dest
        .join(format!(".kforge-pull-{}", std::process::id()));
    let result = pull_into(client, ty, repo, &commit, &by_variant, &staging, &build);
    let _ = fs::remove_dir_all(&staging);
    let (count, bytes) = result?;
    Ok(PullReport {
        revision,
        commit,
        variants: by_variant.into_keys().collect(),
        files: count,
        bytes,
    })
}

fn pull_into(
    client: &HubClient,
    ty: RepoType,
    repo: &str,
    commit: &str,
    by_variant: &BTreeMap<String, Vec<(String, u64)>>,
    staging: &Path,
    build: &Path,
) -> Result<(usize, u64), ClientError> {
    let (mut count, mut bytes) = (0, 0);
    for files in by_variant.values() {
        for (path, _) in files {
            crate::paths::validate_repo_path(path)
                .map_err(|e| ClientError::Invalid(format!("the hub listed an unsafe path: {e}")))?;
            let local = staging.join(path);
            let parent = local.parent().expect("a repo path has a parent");
            fs::create_dir_all(parent).map_err(io_err(parent))?;
            bytes += client.download(ty, repo, commit, path, &local)?;
            count += 1;
        }
    }
    for name in by_variant.keys() {
        let target = build.join(name);
        if target.exists() {
            fs::remove_dir_all(&target).map_err(io_err(&target))?;
        }
        let staged = staging.join("build").join(name);
        fs::rename(&staged, &target).map_err(io_err(&target))?;
    }
    Ok((count, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repo_ids_and_links() {
        assert_eq!(split_repo_id("acme/relu").unwrap(), ("acme", "relu"));
        for bad in ["relu", "/relu", "acme/", "a/b/c"] {
            assert!(split_repo_id(bad).is_err(), "{bad}");
        }
        let mut h = ureq::http::HeaderMap::new();
        h.insert(
            "link",
            "<http://h/api/x?cursor=2>; rel=\"next\"".parse().unwrap(),
        );
        assert_eq!(next_link(&h).as_deref(), Some("http://h/api/x?cursor=2"));
        assert_eq!(
            git_blob_sha1(b"hello"),
            "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0"
        );
    }

    #[test]
    fn variants_are_collected_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let v = dir.path().join("build/torch211-cxx11-cpu-x86_64-linux");
        fs::create_dir_all(v.join("__pycache__")).unwrap();
        fs::write(v.join("__init__.py"), "x = 1\n").unwrap();
        fs::write(v.join("__pycache__/a.pyc"), "junk").unwrap();
        assert!(
            collect_variants(dir.path())
                .unwrap_err()
                .to_string()
                .contains("no metadata.json")
        );
        fs::write(v.join("metadata.json"), r#"{"version": 2}"#).unwrap();
        let got = collect_variants(dir.path()).unwrap().variants;
        let paths: Vec<_> = got
            .values()
            .flatten()
            .map(|f| f.path_in_repo.as_str())
            .collect();
        assert_eq!(
            paths,
            [
                "build/torch211-cxx11-cpu-x86_64-linux/__init__.py",
                "build/torch211-cxx11-cpu-x86_64-linux/metadata.json"
            ]
        );
        assert_eq!(metadata_version(dir.path(), &got).unwrap(), 2);
        // Other folders (e.g. device-only outputs) are reported and left out.
        fs::create_dir_all(dir.path().join("build/device/rocm")).unwrap();
        let with_device = collect_variants(dir.path()).unwrap();
        assert_eq!(with_device.skipped, ["device"]);
        assert_eq!(with_device.variants.len(), 1);
        fs::remove_dir_all(&v).unwrap();
        let err = collect_variants(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("no build/<variant>/") && err.contains("not variant names: device"),
            "{err}"
        );
    }
}
