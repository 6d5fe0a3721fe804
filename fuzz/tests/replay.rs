//! Replays every seed (fuzz/seeds/<target>/) and every saved crash (fuzz/regressions/<target>/) through the
//! target bodies on stable Rust, without libFuzzer: a fixed crash stays fixed.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 5] = [
    ("build_toml", kforge_fuzz::build_toml),
    ("metadata_json", kforge_fuzz::metadata_json),
    ("commit_ndjson", kforge_fuzz::commit_ndjson),
    ("elf_reader", kforge_fuzz::elf_reader),
    ("variant_name", kforge_fuzz::variant_name),
];

/// Run `target` on every file of `dir`; returns (inputs run, failures as "file: panic message").
fn replay(dir: &Path, target: Target) -> (usize, Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (0, Vec::new());
    };
    let mut files: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    let mut failures = Vec::new();
    for f in &files {
        let data = std::fs::read(f).unwrap();
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| target(&data))) {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("{}: {msg}", f.display()));
        }
    }
    (files.len(), failures)
}

#[test]
fn seeds_and_regressions_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failures = Vec::new();
    for (name, target) in TARGETS {
        let (seeds, mut f1) = replay(&root.join("seeds").join(name), target);
        let (regressions, mut f2) = replay(&root.join("regressions").join(name), target);
        assert!(seeds > 0, "no seeds for {name}");
        eprintln!("{name}: {seeds} seeds, {regressions} regressions replayed");
        failures.append(&mut f1);
        failures.append(&mut f2);
    }
    assert!(
        failures.is_empty(),
        "failing inputs:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_oracles_hold_on_known_inputs() {
    // The path oracle the commit target checks the hub against.
    for bad in [
        "../etc/passwd",
        "a/../b",
        "/abs",
        ".git/config",
        "a//b",
        "a\\b",
        "",
    ] {
        assert!(!kforge_fuzz::safe_repo_path(bad), "{bad:?}");
    }
    assert!(kforge_fuzz::safe_repo_path("build/torch-cpu/__init__.py"));
    // Traversal reaches the hub, which must refuse it (the target asserts no 200 for unsafe paths).
    kforge_fuzz::commit_ndjson(b"\x01../../etc/passwd");
    kforge_fuzz::commit_ndjson(b"\x01.git/config");
    // A well-formed commit lands.
    kforge_fuzz::commit_ndjson(b"\x01build/ok.txt");
    // Variant names and metadata round-trip.
    kforge_fuzz::variant_name(b"torch211-cxx11-cu130-x86_64-linux");
    kforge_fuzz::metadata_json(include_bytes!(
        "../seeds/metadata_json/cuda-provenance.json"
    ));
}
