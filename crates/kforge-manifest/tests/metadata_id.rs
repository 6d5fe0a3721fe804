//! metadata.json (HF format), the variant digest, and the project id from git.

use std::path::Path;
use std::process::Command;

use kforge_manifest::metadata::{
    BackendInfo, DigestMismatch, Metadata, digest_dir, digest_dir_with, verify_digest,
};
use kforge_manifest::{Backend, parse_manifest, project_id};

const TOML: &str = r#"[general]
name = "relu-x"
version = 2
edition = 5
license = "Apache-2.0"
upstream = "https://github.com/org/relu"
backends = ["cuda"]
python-depends = ["einops"]

[general.cuda]
python-depends = ["nvidia-cutlass-dsl"]
kernel-depends = [{ repo-id = "org/dep", revision = "main" }]

[torch]
src = []
"#;

#[test]
fn metadata_json_is_hf_kebab_case() {
    let (m, _) = parse_manifest(TOML, Path::new("build.toml")).unwrap();
    let md = Metadata::for_variant(
        &m,
        "_relu_x_cuda_abc1234",
        Backend::Cuda,
        Some(vec!["9.0".into(), "8.0".into(), "9.0".into()]),
    );
    let json: serde_json::Value = serde_json::from_str(&md.to_json()).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "name": "relu-x",
            "id": "_relu_x_cuda_abc1234",
            "version": 2,
            "license": "Apache-2.0",
            "upstream": "https://github.com/org/relu",
            "python-depends": ["einops", "nvidia-cutlass-dsl"],
            "kernel-depends": [{"repo-id": "org/dep", "revision": "main"}],
            "backend": {"type": "cuda", "archs": ["8.0", "9.0"]}
        })
    );
    let back = Metadata::from_json(&md.to_json(), Path::new("m.json")).unwrap();
    assert_eq!(back, md);
    // kernel-depends is written even when empty; archs is absent for cpu.
    let cpu = Metadata::for_variant(&m, "_relu_x_cpu_1", Backend::Cpu, None);
    let v: serde_json::Value = serde_json::from_str(&cpu.to_json()).unwrap();
    assert_eq!(v["kernel-depends"], serde_json::json!([]));
    assert_eq!(v["backend"], serde_json::json!({"type": "cpu"}));
}

#[test]
fn reading_tolerates_unknown_fields_and_checks_provenance() {
    let text = r#"{"name":"r","id":"_r_cpu_1","version":1,"license":"MIT","backend":{"type":"cpu"},
        "future-field": 1,
        "provenance": {"kernel-builder": {"version": "0.17.0", "sha": "0123456789012345678901234567890123456789", "dirty": false}}}"#;
    let m = Metadata::from_json(text, Path::new("m.json")).unwrap();
    assert_eq!(m.python_depends, Vec::<String>::new());
    let b = m.provenance.unwrap().kernel_builder.unwrap();
    assert_eq!(
        b.commit.as_deref(),
        Some("0123456789012345678901234567890123456789")
    );
    let short = text.replace("0123456789012345678901234567890123456789", "0123456");
    assert_eq!(
        Metadata::from_json(&short, Path::new("m.json"))
            .unwrap_err()
            .to_string(),
        "m.json: provenance.kernel-builder.commit \"0123456\" is not a full 40- or 64-hex commit id"
    );
    let bad = r#"{"name":"r","id":"x","version":1,"license":"MIT","backend":{"type":"gpu"}}"#;
    let err = Metadata::from_json(bad, Path::new("m.json"))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("m.json is not valid metadata.json (line 1, column"),
        "{err}"
    );
    assert!(err.contains("unknown backend `gpu`"), "{err}");
}

#[test]
fn digest_covers_files_with_exclusions_and_verifies_as_a_set() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::write(d.join("__init__.py"), "x = 1\n").unwrap();
    std::fs::create_dir_all(d.join("sub/__pycache__")).unwrap();
    std::fs::write(d.join("sub/data.json"), "{}").unwrap();
    std::fs::write(d.join("sub/__pycache__/a.cpython-311.pyc"), "junk").unwrap();
    std::fs::write(d.join("b.pyc"), "junk").unwrap();
    std::fs::write(d.join("metadata.json"), "{}").unwrap();
    std::fs::write(d.join("metadata.json.sigstore"), "{}").unwrap();
    std::fs::write(d.join("metadata.json.kforge-sig"), "{}").unwrap();
    std::os::unix::fs::symlink("__init__.py", d.join("link.py")).unwrap();
    let digest = digest_dir(d).unwrap();
    assert_eq!(digest.algorithm, "sha256");
    assert_eq!(
        digest.files.keys().collect::<Vec<_>>(),
        ["__init__.py", "link.py", "sub/data.json"]
    );
    // `printf "x = 1\n" | sha256sum`, base64 standard with padding.
    assert_eq!(
        digest.files["__init__.py"],
        "nia/NpkRxFwkPGhBR7I/yeHc/PJX0pmhxjIBam/NM/Q="
    );
    assert_eq!(digest.files["link.py"], digest.files["__init__.py"]);
    assert_eq!(
        digest_dir_with(d, "sha512").unwrap().files["sub/data.json"].len(),
        88
    );
    assert!(verify_digest(d, &digest).unwrap().is_empty());
    std::fs::write(d.join("sub/data.json"), "{\"x\":1}").unwrap();
    std::fs::write(d.join("new.py"), "").unwrap();
    std::fs::remove_file(d.join("link.py")).unwrap();
    assert_eq!(
        verify_digest(d, &digest).unwrap(),
        vec![
            DigestMismatch::Missing("link.py".into()),
            DigestMismatch::Changed("sub/data.json".into()),
            DigestMismatch::Unexpected("new.py".into()),
        ]
    );
    let _ = BackendInfo {
        kind: Backend::Cpu,
        archs: None,
    };
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@e",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn project_id_is_the_git_tree_of_the_project_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path();
    let proj = repo.join("kernels/relu");
    std::fs::create_dir_all(&proj).unwrap();
    std::fs::write(proj.join("build.toml"), "[general]\n").unwrap();
    std::fs::write(repo.join("other.txt"), "a").unwrap();
    // Not committed yet: a content hash, stable across calls.
    let before = project_id(&proj);
    assert_eq!(before.len(), 7);
    assert!(before.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(project_id(&proj), before);
    git(repo, &["init", "-q"]);
    assert_eq!(
        project_id(&proj),
        before,
        "no HEAD yet: still the content hash"
    );
    git(repo, &["add", "."]);
    git(repo, &["commit", "-q", "-m", "c"]);
    let tree = git(repo, &["rev-parse", "HEAD:kernels/relu"]);
    assert_eq!(project_id(&proj), tree[..7]);
    // Changes outside the project do not change its id; tracked changes inside make it dirty;
    // untracked files are ignored.
    std::fs::write(repo.join("other.txt"), "b").unwrap();
    assert_eq!(project_id(&proj), tree[..7]);
    std::fs::write(proj.join("untracked.cu"), "").unwrap();
    assert_eq!(project_id(&proj), tree[..7]);
    std::fs::write(proj.join("build.toml"), "[general]\nname = \"x\"\n").unwrap();
    assert_eq!(project_id(&proj), format!("{}_dirty", &tree[..7]));
    // The repository root itself.
    assert_eq!(
        project_id(repo),
        format!("{}_dirty", &git(repo, &["rev-parse", "HEAD^{tree}"])[..7])
    );
}
