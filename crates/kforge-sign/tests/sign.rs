//! Key files, sign/verify round trips and every tampering the verifier must refuse.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use kforge_manifest::metadata::{Metadata, digest_dir};
use kforge_sign::{
    SIG_FILE, SignError, TrustStore, check_digest, generate, key_id, public_key_line, public_path,
    read_public_key, read_secret_key, sign_variant, variant_dirs, verify_signature, write_key_pair,
};

const META: &str = r#"{"name": "relu", "id": "_relu_cpu_abc1234", "version": 1, "license": "Apache-2.0",
  "python-depends": [], "kernel-depends": [], "backend": {"type": "cpu"}}"#;

/// A variant directory with a few files and a metadata.json whose digest covers them.
fn variant(root: &Path, name: &str) -> PathBuf {
    let dir = root.join("build").join(name);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("_relu_cpu_abc1234.abi3.so"), b"\x7fELF not really").unwrap();
    std::fs::write(dir.join("__init__.py"), "from ._ops import ops\n").unwrap();
    std::fs::write(dir.join("sub/data.txt"), "payload").unwrap();
    let mut meta = Metadata::from_json(META, Path::new("META")).unwrap();
    meta.digest = Some(digest_dir(&dir).unwrap());
    meta.write(&dir.join("metadata.json")).unwrap();
    dir
}

#[test]
fn key_files_round_trip_and_secret_is_private() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("release");
    let key = generate().unwrap();
    write_key_pair(&path, &key, "release key").unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(read_secret_key(&path).unwrap().to_bytes(), key.to_bytes());
    let public = read_public_key(&public_path(&path)).unwrap();
    assert_eq!(public, key.verifying_key());
    assert_eq!(key_id(&public).len(), 16);
    let line = std::fs::read_to_string(public_path(&path)).unwrap();
    assert!(line.ends_with(" release key\n"), "{line}");
    // Two keys differ, and the second write refuses to replace the first.
    assert_ne!(generate().unwrap().to_bytes(), key.to_bytes());
    let err = write_key_pair(&path, &generate().unwrap(), "").unwrap_err();
    assert!(matches!(err, SignError::Exists(p) if p == path));
    assert_eq!(read_secret_key(&path).unwrap().to_bytes(), key.to_bytes());
}

#[test]
fn key_file_errors_name_the_file_and_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("k");
    write_key_pair(&p, &generate().unwrap(), "").unwrap();
    let msg = read_secret_key(&public_path(&p)).unwrap_err().to_string();
    assert!(msg.contains("this is a public key"), "{msg}");
    std::fs::write(tmp.path().join("bad"), "kforge-ed25519-secret AAAA\n").unwrap();
    let msg = read_secret_key(&tmp.path().join("bad"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("bad") && msg.contains("expected 32"), "{msg}");
    std::fs::write(tmp.path().join("junk"), "hello\n").unwrap();
    let msg = read_public_key(&tmp.path().join("junk"))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("kforge-ed25519 <base64>"), "{msg}");
}

#[test]
fn sign_then_verify_and_every_tamper_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = variant(tmp.path(), "torch211-cxx11-cpu-x86_64-linux");
    let key = generate().unwrap();
    let sig = sign_variant(&dir, &key).unwrap();
    assert_eq!(sig.key_id, key_id(&key.verifying_key()));
    assert_eq!(check_digest(&dir).unwrap(), 3);
    let ok = verify_signature(
        &dir,
        &[generate().unwrap().verifying_key(), key.verifying_key()],
    )
    .unwrap();
    assert_eq!(ok.key_id, sig.key_id);

    // Another key: untrusted, and the message lists what is trusted.
    let other = generate().unwrap().verifying_key();
    let err = verify_signature(&dir, &[other]).unwrap_err();
    assert!(matches!(err, SignError::UntrustedKey { .. }), "{err}");
    assert!(err.to_string().contains(&key_id(&other)));

    // Any edit of metadata.json breaks the signature, even one that keeps it valid JSON.
    let md = dir.join("metadata.json");
    let orig = std::fs::read(&md).unwrap();
    std::fs::write(
        &md,
        String::from_utf8(orig.clone())
            .unwrap()
            .replace("Apache-2.0", "MIT"),
    )
    .unwrap();
    let err = verify_signature(&dir, &[key.verifying_key()]).unwrap_err();
    assert!(err.to_string().contains("changed after signing"), "{err}");
    std::fs::write(&md, &orig).unwrap();

    // A forged signature over the right hash (made with another key, relabelled) does not verify.
    let sig_path = dir.join(SIG_FILE);
    let good = std::fs::read_to_string(&sig_path).unwrap();
    let forged_dir = variant(tmp.path(), "forged");
    let impostor = generate().unwrap();
    std::fs::write(forged_dir.join("metadata.json"), &orig).unwrap();
    let forged = sign_variant(&forged_dir, &impostor).unwrap();
    let relabelled = good.replace(&sig.signature, &forged.signature);
    std::fs::write(&sig_path, &relabelled).unwrap();
    let err = verify_signature(&dir, &[key.verifying_key()]).unwrap_err();
    assert!(matches!(err, SignError::BadSignature { .. }), "{err}");

    // A re-formatted (non-canonical) signature file is refused even with the same values.
    std::fs::write(&sig_path, good.replace("\n  ", "\n    ")).unwrap();
    let err = verify_signature(&dir, &[key.verifying_key()]).unwrap_err();
    assert!(err.to_string().contains("canonical"), "{err}");
    std::fs::write(&sig_path, &good).unwrap();
    verify_signature(&dir, &[key.verifying_key()]).unwrap();

    // Every single-byte flip of the signature file is refused.
    let bytes = good.as_bytes();
    for i in 0..bytes.len() {
        let mut b = bytes.to_vec();
        b[i] ^= 0x20;
        std::fs::write(&sig_path, &b).unwrap();
        assert!(
            verify_signature(&dir, &[key.verifying_key()]).is_err(),
            "flip at byte {i} accepted"
        );
    }
    std::fs::write(&sig_path, &good).unwrap();

    // The digest check names the changed, missing and extra files.
    std::fs::write(dir.join("sub/data.txt"), "PAYLOAD").unwrap();
    std::fs::remove_file(dir.join("__init__.py")).unwrap();
    std::fs::write(dir.join("extra.so"), "x").unwrap();
    let err = check_digest(&dir).unwrap_err().to_string();
    assert!(err.contains("sub/data.txt: hash differs"), "{err}");
    assert!(
        err.contains("__init__.py: listed in the digest but missing"),
        "{err}"
    );
    assert!(
        err.contains("extra.so: present but not in the digest"),
        "{err}"
    );
    // ... and a variant that does not match its digest cannot be signed.
    assert!(matches!(
        sign_variant(&dir, &key).unwrap_err(),
        SignError::DigestMismatch { .. }
    ));
}

#[test]
fn unsigned_and_digestless_variants_are_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = variant(tmp.path(), "v");
    let err = verify_signature(&dir, &[generate().unwrap().verifying_key()]).unwrap_err();
    assert!(matches!(err, SignError::Unsigned(_)), "{err}");
    std::fs::write(dir.join("metadata.json"), META).unwrap();
    let err = sign_variant(&dir, &generate().unwrap()).unwrap_err();
    assert!(matches!(err, SignError::NoDigest(_)), "{err}");
    assert!(err.to_string().contains("kforge build"));
}

#[test]
fn variant_dirs_accepts_variant_build_and_project() {
    let tmp = tempfile::tempdir().unwrap();
    let a = variant(tmp.path(), "a");
    let b = variant(tmp.path(), "b");
    std::fs::create_dir_all(tmp.path().join("build/not-a-variant")).unwrap();
    assert_eq!(variant_dirs(&a).unwrap(), vec![a.clone()]);
    assert_eq!(
        variant_dirs(&tmp.path().join("build")).unwrap(),
        vec![a.clone(), b.clone()]
    );
    assert_eq!(variant_dirs(tmp.path()).unwrap(), vec![a, b]);
    let err = variant_dirs(&tmp.path().join("build/not-a-variant")).unwrap_err();
    assert!(matches!(err, SignError::NoVariants(_)), "{err}");
}

#[test]
fn trust_file_parses_and_errors_name_the_key() {
    let k1 = generate().unwrap().verifying_key();
    let k2 = generate().unwrap().verifying_key();
    let text = format!(
        "[publishers.acme]\nkeys = [\"{}\", \"{}\"]\n\n[publishers.lab]\nkeys = [\"{}\"]\nrequire-signature = false\n",
        public_key_line(&k1, "ci"),
        public_key_line(&k2, ""),
        public_key_line(&k2, "shared")
    );
    let t = TrustStore::parse(&text, Path::new("trust.toml")).unwrap();
    assert_eq!(t.keys(Some("acme")).unwrap(), vec![k1, k2]);
    assert_eq!(t.keys(None).unwrap().len(), 3);
    assert!(t.requires_signature("acme"));
    assert!(!t.requires_signature("lab"));
    assert!(!t.requires_signature("nobody"));
    let err = t.keys(Some("nobody")).unwrap_err().to_string();
    assert!(err.contains("[publishers.nobody]"), "{err}");

    for (bad, expect) in [
        ("[publishers.x]\nkeys = []\n", "publishers.x.keys is empty"),
        (
            "[publishers.x]\nkeys = [\"ssh-ed25519 AAAA\"]\n",
            "publishers.x.keys",
        ),
        ("[publishers.x]\nkey = []\n", "unknown field `key`"),
        ("[publishers.x\n", "trust.toml"),
    ] {
        let err = TrustStore::parse(bad, Path::new("trust.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(expect) && err.contains("trust.toml"),
            "{bad:?}: {err}"
        );
    }
}
