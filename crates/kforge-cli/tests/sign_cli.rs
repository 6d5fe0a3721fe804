//! `kforge key generate | sign` and `kforge verify` as a user runs them: round trip, trust file and
//! publisher rules, tampered files, and the error messages.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use kforge_manifest::metadata::{Metadata, digest_dir};

/// A scratch directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("kforge-sign-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn kforge(args: &[&str], home: &Path) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_kforge"))
        .args(args)
        .env_remove("KFORGE_TRUST")
        .env_remove("KFORGE_SIGNING_KEY")
        .env_remove("XDG_CONFIG_HOME")
        .env("HOME", home)
        .output()
        .unwrap();
    Run {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    }
}

/// A project with two built variants whose metadata.json digests cover their files.
fn project(root: &Path) -> Vec<PathBuf> {
    let meta = r#"{"name": "relu", "id": "_relu_cpu_0123abc", "version": 1, "license": "MIT",
      "backend": {"type": "cpu"}}"#;
    [
        "torch211-cxx11-cpu-x86_64-linux",
        "torch210-cxx11-cpu-x86_64-linux",
    ]
    .iter()
    .map(|name| {
        let dir = root.join("build").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("_relu_cpu_0123abc.abi3.so"), name.as_bytes()).unwrap();
        std::fs::write(dir.join("__init__.py"), "import torch\n").unwrap();
        let mut m = Metadata::from_json(meta, Path::new("m")).unwrap();
        m.digest = Some(digest_dir(&dir).unwrap());
        m.write(&dir.join("metadata.json")).unwrap();
        dir
    })
    .collect()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn generate_sign_verify_round_trip_with_trust_file() {
    let t = TempDir::new();
    let variants = project(&t.0);
    let key = t.0.join("keys/release");
    std::fs::create_dir_all(key.parent().unwrap()).unwrap();
    let r = kforge(
        &["key", "generate", "--out", s(&key), "--comment", "ci"],
        &t.0,
    );
    assert!(r.ok, "{}", r.stderr);
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let public = std::fs::read_to_string(t.0.join("keys/release.pub")).unwrap();
    assert!(public.starts_with("kforge-ed25519 ") && public.ends_with(" ci\n"));

    // Regenerating onto the same path is refused and leaves the key alone.
    let before = std::fs::read(&key).unwrap();
    let r = kforge(&["key", "generate", "--out", s(&key)], &t.0);
    assert!(
        !r.ok && r.stderr.contains("refusing to overwrite"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read(&key).unwrap(), before);

    let r = kforge(&["key", "sign", s(&t.0), "--key", s(&key)], &t.0);
    assert!(r.ok, "{}", r.stderr);
    assert!(r.stdout.contains("2 variant(s) signed"), "{}", r.stdout);
    for v in &variants {
        assert!(v.join("metadata.json.kforge-sig").is_file());
    }

    // The default trust file location (~/.config/kforge/trust.toml) is used when --trust is absent.
    let cfg = t.0.join(".config/kforge");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("trust.toml"),
        format!("[publishers.acme]\nkeys = [\"{}\"]\n", public.trim()),
    )
    .unwrap();
    let r = kforge(
        &["verify", s(&t.0.join("build")), "--publisher", "acme"],
        &t.0,
    );
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.stdout.matches("ok    ").count(), 2, "{}", r.stdout);
    assert!(r.stdout.contains("2 files match the digest; signed by key"));

    // One variant dir, and an explicit --trust naming another publisher's keys only.
    let other = t.0.join("other");
    assert!(kforge(&["key", "generate", "--out", s(&other)], &t.0).ok);
    let trust2 = t.0.join("trust2.toml");
    std::fs::write(
        &trust2,
        format!(
            "[publishers.mallory]\nkeys = [\"{}\"]\n",
            std::fs::read_to_string(t.0.join("other.pub"))
                .unwrap()
                .trim()
        ),
    )
    .unwrap();
    let r = kforge(&["verify", s(&variants[0]), "--trust", s(&trust2)], &t.0);
    assert!(!r.ok);
    assert!(
        r.stderr.contains("which is not trusted here"),
        "{}",
        r.stderr
    );
    let r = kforge(
        &[
            "verify",
            s(&variants[0]),
            "--trust",
            s(&trust2),
            "--publisher",
            "acme",
        ],
        &t.0,
    );
    assert!(
        !r.ok
            && r.stderr
                .contains("publisher `acme` is not in the trust file"),
        "{}",
        r.stderr
    );
}

#[test]
fn verify_reports_each_tampered_file_and_unsigned_variants() {
    let t = TempDir::new();
    let variants = project(&t.0);
    let key = t.0.join("k");
    assert!(kforge(&["key", "generate", "--out", s(&key)], &t.0).ok);
    let trust = t.0.join("trust.toml");
    std::fs::write(
        &trust,
        format!(
            "[publishers.acme]\nkeys = [\"{}\"]\n\n[publishers.lab]\nkeys = [\"{}\"]\nrequire-signature = false\n",
            std::fs::read_to_string(t.0.join("k.pub")).unwrap().trim(),
            std::fs::read_to_string(t.0.join("k.pub")).unwrap().trim()
        ),
    )
    .unwrap();

    // Unsigned: fine by default and for a publisher that does not require signatures; refused for one
    // that does, and with --require-signature.
    let tr = s(&trust);
    let r = kforge(&["verify", s(&t.0), "--trust", tr], &t.0);
    assert!(
        r.ok && r.stdout.contains("not signed"),
        "{}{}",
        r.stdout,
        r.stderr
    );
    assert!(
        kforge(
            &["verify", s(&t.0), "--trust", tr, "--publisher", "lab"],
            &t.0
        )
        .ok
    );
    let r = kforge(
        &["verify", s(&t.0), "--trust", tr, "--publisher", "acme"],
        &t.0,
    );
    assert!(!r.ok && r.stderr.contains("is not signed"), "{}", r.stderr);
    assert!(
        r.stderr.contains("2 of 2 variant(s) failed"),
        "{}",
        r.stderr
    );
    assert!(
        !kforge(
            &["verify", s(&t.0), "--trust", tr, "--require-signature"],
            &t.0
        )
        .ok
    );

    assert!(kforge(&["key", "sign", s(&t.0), "--key", s(&key)], &t.0).ok);
    assert!(
        kforge(
            &["verify", s(&t.0), "--trust", tr, "--publisher", "acme"],
            &t.0
        )
        .ok
    );

    // Files: changed, removed, added — each named; the other variant still passes.
    std::fs::write(variants[0].join("__init__.py"), "import os\n").unwrap();
    std::fs::remove_file(variants[0].join("_relu_cpu_0123abc.abi3.so")).unwrap();
    std::fs::write(variants[0].join("evil.so"), "x").unwrap();
    let r = kforge(&["verify", s(&t.0), "--trust", tr], &t.0);
    assert!(!r.ok);
    assert!(
        r.stderr
            .contains("__init__.py: hash differs from the digest"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("_relu_cpu_0123abc.abi3.so: listed in the digest but missing")
    );
    assert!(r.stderr.contains("evil.so: present but not in the digest"));
    assert!(
        r.stderr.contains("1 of 2 variant(s) failed"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout
            .contains(variants[1].file_name().unwrap().to_str().unwrap())
    );

    // metadata.json edited after signing (a consistent digest rewrite) is caught by the signature.
    let md = variants[1].join("metadata.json");
    let text = std::fs::read_to_string(&md).unwrap();
    std::fs::write(&md, text.replace("\"MIT\"", "\"GPL\"")).unwrap();
    let r = kforge(&["verify", s(&variants[1]), "--trust", tr], &t.0);
    assert!(
        !r.ok && r.stderr.contains("changed after signing"),
        "{}",
        r.stderr
    );
}

#[test]
fn bad_arguments_have_clear_errors() {
    let t = TempDir::new();
    let r = kforge(
        &["key", "sign", s(&t.0), "--key", s(&t.0.join("nope"))],
        &t.0,
    );
    assert!(
        !r.ok && r.stderr.contains("--key") && r.stderr.contains("nope"),
        "{}",
        r.stderr
    );
    let key = t.0.join("k");
    assert!(kforge(&["key", "generate", "--out", s(&key)], &t.0).ok);
    let r = kforge(
        &["key", "sign", s(&t.0), "--key", s(&t.0.join("k.pub"))],
        &t.0,
    );
    assert!(
        !r.ok && r.stderr.contains("this is a public key"),
        "{}",
        r.stderr
    );
    let r = kforge(&["key", "sign", s(&t.0), "--key", s(&key)], &t.0);
    assert!(
        !r.ok && r.stderr.contains("no variant directories"),
        "{}",
        r.stderr
    );
    let bad = t.0.join("trust.toml");
    std::fs::write(&bad, "[publishers.acme]\nkeys = [\"kforge-ed25519 !!\"]\n").unwrap();
    project(&t.0);
    let r = kforge(&["verify", s(&t.0), "--trust", s(&bad)], &t.0);
    assert!(
        !r.ok && r.stderr.contains("invalid trust file") && r.stderr.contains("not base64"),
        "{}",
        r.stderr
    );
}
