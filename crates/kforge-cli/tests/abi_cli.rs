//! `kforge abi` on ELF fixtures compiled with gcc at test time, and `kforge cache stats | gc`.
//! (The checks themselves are covered in crates/kforge-abi/tests; this is the command's surface.)

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::{scratch, text};

fn cc(dir: &Path, name: &str, src: &str) -> PathBuf {
    let src_path = dir.join(format!("{name}.c"));
    std::fs::write(&src_path, src).unwrap();
    let out = dir.join(format!("{name}.so"));
    let status = Command::new("gcc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(&src_path)
        .status()
        .unwrap();
    assert!(status.success(), "gcc failed for {name}");
    out
}

struct Run {
    ok: bool,
    stdout: String,
    stderr: String,
}

fn kforge(args: &[&std::ffi::OsStr], env: &[(&str, &Path)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kforge"));
    cmd.args(args).env_remove("KFORGE_TORCH_LIB");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let (stdout, stderr) = text(&out);
    Run {
        ok: out.status.success(),
        stdout,
        stderr,
    }
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

const SINGLE_THREADED: &str =
    "extern char __libc_single_threaded; int st(void) { return __libc_single_threaded; }\n";

#[test]
fn clean_file_passes_and_a_violation_fails_with_hint() {
    let dir = scratch("kforge-abi-test-");
    let clean = cc(
        dir.path(),
        "clean",
        "int add(int a, int b) { return a + b; }\n",
    );
    let r = kforge(&[os("abi"), clean.as_os_str()], &[]);
    assert!(r.ok, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("ok: no ABI issues (manylinux_2_28, Python ABI 3.9)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("note: symbol resolution skipped"),
        "{}",
        r.stdout
    );

    let bad = cc(dir.path(), "st", SINGLE_THREADED);
    let r = kforge(&[os("abi"), bad.as_os_str()], &[]);
    assert!(!r.ok);
    assert!(
        r.stdout.contains("error [symbol-version] __libc_single_threaded@GLIBC_2.32 is newer than GLIBC_2.28 allowed by manylinux_2_28 (from libc.so.6)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("hint: "), "{}", r.stdout);
    assert!(
        r.stderr.contains("ABI compatibility issues found"),
        "{}",
        r.stderr
    );

    // The same file is fine for a newer level, spelled either way.
    for flag in ["--manylinux", "--policy", "-m"] {
        let r = kforge(
            &[os("abi"), bad.as_os_str(), os(flag), os("manylinux_2_34")],
            &[],
        );
        assert!(r.ok, "{flag}: {}", r.stdout);
    }
}

#[test]
fn json_output_and_project_discovery() {
    let dir = scratch("kforge-abi-test-");
    let variant = dir.path().join("build/torch211-cxx11-cpu-x86_64-linux");
    std::fs::create_dir_all(&variant).unwrap();
    std::fs::write(variant.join("metadata.json"), "{}").unwrap();
    cc(&variant, "_relu_cpu_abc1234", SINGLE_THREADED);
    let r = kforge(&[os("abi"), dir.path().as_os_str(), os("--json")], &[]);
    assert!(!r.ok);
    let json = &r.stdout;
    assert!(json.contains("\"code\": \"symbol-version\""), "{json}");
    assert!(json.contains("\"severity\": \"error\""), "{json}");
    assert!(json.contains("_relu_cpu_abc1234.so"), "{json}");
    assert!(
        json.contains("\"checks\": \"manylinux_2_28, Python ABI 3.9\""),
        "{json}"
    );

    // Run from inside the project with no path argument.
    let out = Command::new(env!("CARGO_BIN_EXE_kforge"))
        .arg("abi")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("_relu_cpu_abc1234.so"));
}

#[test]
fn bad_arguments_are_named() {
    let dir = scratch("kforge-abi-test-");
    let so = cc(dir.path(), "x", "int x(void) { return 0; }\n");
    let r = kforge(
        &[
            os("abi"),
            so.as_os_str(),
            os("--manylinux"),
            os("manylinux_2_99"),
        ],
        &[],
    );
    assert!(!r.ok);
    assert!(
        r.stderr
            .contains("unknown manylinux policy `manylinux_2_99`"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("manylinux_2_28"), "{}", r.stderr);

    let r = kforge(
        &[os("abi"), so.as_os_str(), os("--python-abi"), os("three")],
        &[],
    );
    assert!(
        r.stderr
            .contains("--python-abi `three`: expected MAJOR.MINOR"),
        "{}",
        r.stderr
    );

    let r = kforge(
        &[
            os("abi"),
            so.as_os_str(),
            os("--torch-lib"),
            dir.path().as_os_str(),
        ],
        &[],
    );
    assert!(
        r.stderr.contains("not a directory holding libc10.so"),
        "{}",
        r.stderr
    );

    // A directory that is neither a project with variants nor a variant: nothing is scanned.
    let r = kforge(&[os("abi"), dir.path().join("sub").as_os_str()], &[]);
    assert!(
        r.stderr.contains("no such file or directory"),
        "{}",
        r.stderr
    );
    std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
    cc(
        &dir.path().join("sub/deeper"),
        "hidden",
        "int h(void) { return 0; }\n",
    );
    let r = kforge(&[os("abi"), dir.path().join("sub").as_os_str()], &[]);
    assert!(!r.ok);
    assert!(r.stderr.contains("no variant found"), "{}", r.stderr);
    // A variant directory without metadata.json is still checked.
    let r = kforge(&[os("abi"), dir.path().join("sub/deeper").as_os_str()], &[]);
    assert!(r.ok && r.stdout.contains("hidden.so"), "{}", r.stdout);

    let missing = dir.path().join("nope");
    let r = kforge(&[os("abi"), missing.as_os_str()], &[]);
    assert!(
        r.stderr.contains("nope: no such file or directory"),
        "{}",
        r.stderr
    );
}

#[test]
fn cache_stats_and_gc_trim_the_oldest_actions() {
    let dir = scratch("kforge-abi-test-");
    let cache = dir.path().join("cache");
    let actions = cache.join("actions");
    for (i, name) in ["old", "mid", "new"].iter().enumerate() {
        let d = actions.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("out.o"), vec![0u8; 4096]).unwrap();
        // Distinct modification times, oldest first.
        let t = std::time::SystemTime::UNIX_EPOCH
            + std::time::Duration::from_secs(1_000_000 + i as u64);
        std::fs::File::open(&d).unwrap().set_modified(t).unwrap();
    }
    std::fs::create_dir_all(cache.join("tmp/dead-999999999-1")).unwrap();
    std::fs::write(cache.join("tmp/dead-999999999-1/part"), vec![0u8; 100]).unwrap();

    let env = [("KFORGE_CACHE", cache.as_path())];
    let r = kforge(&[os("cache"), os("stats")], &env);
    assert!(r.ok, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!("cache: {}", cache.display())),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("actions         3 entries     12.0 KiB"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("tmp                              100 B"),
        "{}",
        r.stdout
    );

    let r = kforge(&[os("cache"), os("gc"), os("--max-size"), os("9K")], &env);
    assert!(r.ok, "{}", r.stderr);
    assert!(r.stdout.contains("freed 4.1 KiB"), "{}", r.stdout);
    assert!(!actions.join("old").exists());
    assert!(actions.join("mid").exists() && actions.join("new").exists());
    assert!(!cache.join("tmp/dead-999999999-1").exists());

    let r = kforge(&[os("cache"), os("gc"), os("--max-size"), os("lots")], &env);
    assert!(!r.ok);
    assert!(r.stderr.contains("--max-size lots"), "{}", r.stderr);
    assert!(r.stderr.contains("not a size"), "{}", r.stderr);
}
