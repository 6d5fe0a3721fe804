//! `kforge check | init | variants | update-build` through the built binary: exit codes and the
//! diagnostics a user sees (file:line:col, the offending key, the fix).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

use common::{scratch, text};
use tempfile::TempDir;

fn kforge(args: &[&str], cwd: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kforge"))
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// A fresh `kforge init` project in a scratch dir.
fn new_project(tag: &str, backends: &str) -> (TempDir, PathBuf) {
    let s = scratch(&format!("kforge-manifest-cli-{tag}-"));
    let o = kforge(&["init", "mykernel", "--backends", backends], s.path());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let dir = s.path().join("mykernel");
    (s, dir)
}

#[test]
fn init_then_check_and_variants() {
    let (_s, dir) = new_project("init", "cpu,cuda");
    let o = kforge(&["check", "mykernel"], dir.parent().unwrap());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert_eq!(
        out,
        "ok: mykernel (edition 5, torch framework, backends cpu,cuda, 2 kernel components)\n"
    );
    assert_eq!(err, "", "a fresh project has no warnings");

    let o = kforge(&["variants", "--all"], &dir);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("torch212-cxx11-cpu-x86_64-linux  (cpu arch)\n  mykernel_cpu\n"),
        "{out}"
    );
    assert!(
        out.contains("torch213-cxx11-cu132-x86_64-linux  (cuda arch)  archs: 7.5;8.0;9.0+PTX\n  mykernel_cuda: 7.5, 8.0, 9.0+PTX\n"),
        "{out}"
    );
    let o = kforge(&["variants", "--all", "--json"], &dir);
    let (out, _) = text(&o);
    assert!(o.status.success());
    assert!(out.starts_with("{\n  \"variants\": ["), "{out}");
    assert!(
        out.contains("\"variant\": \"torch212-cpu-aarch64-darwin\""),
        "{out}"
    );
}

#[test]
fn init_refuses_bad_names_and_existing_projects() {
    let s = scratch("kforge-manifest-cli-init-bad-");
    let o = kforge(&["init", "Bad_Name"], s.path());
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("invalid kernel name `Bad_Name`"), "{err}");
    let o = kforge(&["init", "x1", "--backends", "cpu,cdua"], s.path());
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err.contains("unknown backend `cdua`: expected cpu, cuda or rocm; did you mean `cuda`?"),
        "{err}"
    );
    assert!(
        kforge(&["init", "x1", "--backends", "cpu"], s.path())
            .status
            .success()
    );
    let o = kforge(&["init", "x1", "--backends", "cpu"], s.path());
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("already exists; pass --overwrite"), "{err}");
}

/// The report with miette's line wrapping undone, so that messages can be matched whole.
fn flat(report: &str) -> String {
    report
        .lines()
        .map(|l| l.trim_start().trim_start_matches('│').trim())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Replace `from` by `to` in the project's build.toml and run `kforge check`.
fn check_broken(dir: &Path, from: &str, to: &str) -> (i32, String) {
    let path = dir.join("build.toml");
    let orig = std::fs::read_to_string(&path).unwrap();
    assert!(orig.contains(from), "{from} not in build.toml");
    std::fs::write(&path, orig.replacen(from, to, 1)).unwrap();
    let o = kforge(&["check", "."], dir);
    std::fs::write(&path, orig).unwrap();
    let (_, err) = text(&o);
    (o.status.code().unwrap_or(-1), flat(&err))
}

#[test]
fn each_kind_of_mistake_gives_a_located_error() {
    let (_s, dir) = new_project("broken", "cpu,cuda,rocm");
    // (edit, expected location, expected message, expected hint)
    let cases: &[(&str, &str, &str, &str, &str)] = &[
        (
            "license = \"Apache-2.0\"",
            "license = Apache-2.0",
            "build.toml:7:11]",
            "TOML syntax error",
            "fix the TOML syntax",
        ),
        (
            "version = 1",
            "verison = 1",
            "build.toml:5:1]",
            "unknown key `verison` in [general]",
            "did you mean `version`?",
        ),
        (
            "version = 1",
            "version = \"1\"",
            "build.toml:5:11]",
            "`general.version` must be a non-negative integer, found a string",
            "write it as `version = 1` (no quotes)",
        ),
        (
            "[kernel.mykernel_cpu]",
            "[kernel.\"my kernel\"]",
            "build.toml:13:9]",
            "invalid kernel name `my kernel`",
            "rename it, e.g. [kernel.my_kernel]",
        ),
        (
            "backend = \"cpu\"",
            "backend = \"cpux\"",
            "build.toml:14:11]",
            "unknown backend `cpux` in `kernel.mykernel_cpu.backend`",
            "did you mean `cpu`?",
        ),
        (
            "depends = [\"torch\"]",
            "depends = [\"torhc\"]",
            "build.toml:15:12]",
            "unknown dependency `torhc` in `kernel.mykernel_cpu.depends`",
            "did you mean `torch`?",
        ),
        (
            "edition = 5\n",
            "edition = 5\nkernel-depends = [{ repo-id = \"a/b\", version = 1, revision = \"x\" }]\n",
            "build.toml:7:51]",
            "sets both `version` and `revision`",
            "not both",
        ),
        (
            "license = \"Apache-2.0\"\n",
            "",
            "build.toml:3:1]",
            "missing required key `license` in [general]",
            "add `license = \"Apache-2.0\"`",
        ),
        (
            "mykernel_cpu/mykernel_cpu.cpp",
            "mykernel_cpu/mykernel_cpux.cpp",
            "build.toml:16:8]",
            "file `mykernel_cpu/mykernel_cpux.cpp` does not exist",
            "did you mean `mykernel_cpu/mykernel_cpu.cpp`?",
        ),
        (
            "\"mykernel_cpu/mykernel_cpu.cpp\"",
            "\"../outside.cpp\"",
            "build.toml:16:8]",
            "path `../outside.cpp` leaves the project directory through `..`",
            "must stay inside it",
        ),
        (
            "\"mykernel_cpu/mykernel_cpu.cpp\"",
            "\"/etc/hostname\"",
            "build.toml:16:8]",
            "path `/etc/hostname` is absolute",
            "must stay inside it",
        ),
        (
            "rocm-archs = [\"gfx90a\", \"gfx942\"]",
            "rocm-archs = [\"gfx99999\"]",
            "build.toml:29:14]",
            "contains no supported ROCm arch",
            "use archs from `gfx906`",
        ),
        (
            "[\"7.5\", \"8.0\", \"9.0+PTX\"]",
            "[\"99999.0\"]",
            "build.toml:22:21]",
            "leaves no arch to build with CUDA",
            "list capabilities the toolkits support",
        ),
    ];
    for (from, to, loc, msg, hint) in cases {
        let (code, err) = check_broken(&dir, from, to);
        assert_eq!(code, 1, "{to}: {err}");
        assert!(err.contains(loc), "{to}: expected {loc} in\n{err}");
        assert!(err.contains(msg), "{to}: expected {msg} in\n{err}");
        assert!(err.contains(hint), "{to}: expected {hint} in\n{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    // The snippet shows the offending line with a marker.
    let path = dir.join("build.toml");
    let orig = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, orig.replace("version = 1", "verison = 1")).unwrap();
    let (_, err) = text(&kforge(&["check"], &dir));
    std::fs::write(&path, orig).unwrap();
    assert!(err.contains(" 5 │ verison = 1\n"), "{err}");
    assert!(err.contains("╰── unknown key"), "{err}");
    // And the project is intact afterwards.
    assert!(kforge(&["check", "."], &dir).status.success());
}

#[test]
fn symlink_out_and_layout_errors() {
    let (s, dir) = new_project("layout", "cpu");
    let outside = s.path().join("outside.cpp");
    std::fs::write(&outside, "int x;\n").unwrap();
    let src = dir.join("mykernel_cpu/mykernel_cpu.cpp");
    std::fs::rename(&src, dir.join("moved.cpp")).unwrap();
    std::os::unix::fs::symlink(&outside, &src).unwrap();
    let o = kforge(&["check"], &dir);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("path `mykernel_cpu/mykernel_cpu.cpp` resolves through a symlink to"),
        "{err}"
    );
    std::fs::remove_file(&src).unwrap();
    std::fs::rename(dir.join("moved.cpp"), &src).unwrap();

    std::fs::remove_file(dir.join("torch-ext/mykernel/__init__.py")).unwrap();
    let o = kforge(&["check"], &dir);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("python package file `torch-ext/mykernel/__init__.py` does not exist"),
        "{err}"
    );

    let o = kforge(&["check", "no-such-dir"], &dir);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        err.contains("cannot open project directory no-such-dir"),
        "{err}"
    );
    let o = kforge(&["check", "torch-ext"], &dir);
    let (_, err) = text(&o);
    assert!(err.contains("cannot read torch-ext/build.toml"), "{err}");
    assert!(err.contains("create one with"), "{err}");
}

#[test]
fn update_build_migrates_edition4_in_place() {
    let (_s, dir) = new_project("update", "cpu");
    let path = dir.join("build.toml");
    let v5 = std::fs::read_to_string(&path).unwrap();
    let v4 = v5.replace("edition = 5\n", "");
    std::fs::write(&path, &v4).unwrap();

    let o = kforge(&["check", "--deny-warnings"], &dir);
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{err}");
    assert!(
        err.contains("an edition 4 build.toml; the current format is edition 5"),
        "{err}"
    );
    assert!(err.contains("run `kforge update-build`"), "{err}");

    let o = kforge(&["update-build", "--dry-run"], &dir);
    assert_eq!(text(&o).0, v5);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        v4,
        "--dry-run writes nothing"
    );

    let o = kforge(&["update-build"], &dir);
    assert!(o.status.success(), "{:?}", text(&o));
    // The comments at the top survive and the result is what init writes.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), v5);
    let o = kforge(&["update-build"], &dir);
    assert_eq!(
        text(&o).0,
        "./build.toml is already edition 5; nothing to do\n"
    );

    std::fs::write(&path, v4.replace("\"cpu\"]", "\"cpux\"]")).unwrap();
    let o = kforge(&["update-build"], &dir);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(err.contains("unknown backend `cpux`"), "{err}");
    assert!(
        err.contains("update-build only migrates valid files"),
        "{err}"
    );
}

#[test]
fn help_has_examples() {
    for cmd in ["check", "init", "variants", "update-build"] {
        let o = kforge(&[cmd, "--help"], Path::new("."));
        let (out, _) = text(&o);
        assert!(o.status.success());
        assert!(out.contains("Examples:"), "{cmd}: {out}");
    }
}

#[test]
fn example_projects_of_this_repo_check() {
    let kernels = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels");
    let mut checked = 0;
    for e in std::fs::read_dir(&kernels).unwrap().flatten() {
        if !e.path().join("build.toml").is_file() {
            continue;
        }
        let o = kforge(&["check", e.path().to_str().unwrap()], Path::new("."));
        let (out, err) = text(&o);
        assert!(o.status.success(), "{}: {out}{err}", e.path().display());
        assert!(out.starts_with("ok: "), "{out}");
        checked += 1;
    }
    assert!(
        checked >= 1,
        "no example project under {}",
        kernels.display()
    );
}

/// The python of the repo's virtual environment (scripts/setup.sh creates it; KFORGE_VENV overrides).
fn venv_python() -> PathBuf {
    let venv = std::env::var_os("KFORGE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv"));
    venv.join("bin/python")
}

#[test]
fn init_project_builds_and_passes_its_own_test() {
    let python = venv_python();
    assert!(
        python.exists(),
        "{} is missing: run scripts/setup.sh (or set KFORGE_VENV)",
        python.display()
    );
    let (_s, dir) = new_project("e2e", "cpu,cuda");
    let o = kforge(&["build", "--backend", "cpu"], &dir);
    let (out, err) = text(&o);
    assert!(o.status.success(), "kforge build failed:\n{out}{err}");
    assert!(
        dir.join("build/torch211-cxx11-cpu-x86_64-linux/metadata.json")
            .is_file(),
        "{out}{err}"
    );
    let o = Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(
        o.status.success(),
        "the generated tests failed:\n{out}{err}"
    );
    // 3 dtypes + non-contiguous + NaN + empty + bad out, on the CPU (no GPU in CI).
    assert!(out.contains("7 passed"), "{out}");
}

#[test]
fn snapshots_of_variants_and_a_diagnostic() {
    let (_s, dir) = new_project("snap", "cpu,rocm");
    let o = kforge(&["variants", "--all"], &dir);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let expected = [
        "torch212-cxx11-cpu-x86_64-linux  (cpu arch)",
        "  mykernel_cpu",
        "torch212-cxx11-cpu-aarch64-linux  (cpu arch)",
        "  mykernel_cpu",
        "torch212-cpu-aarch64-darwin  (cpu arch)",
        "  mykernel_cpu",
        "torch213-cxx11-cpu-x86_64-linux  (cpu arch)",
        "  mykernel_cpu",
        "torch213-cxx11-cpu-aarch64-linux  (cpu arch)",
        "  mykernel_cpu",
        "torch213-cpu-aarch64-darwin  (cpu arch)",
        "  mykernel_cpu",
        "torch212-cxx11-rocm71-x86_64-linux  (rocm arch)  archs: gfx90a;gfx942",
        "  mykernel_rocm: gfx90a, gfx942",
        "torch212-cxx11-rocm72-x86_64-linux  (rocm arch)  archs: gfx90a;gfx942",
        "  mykernel_rocm: gfx90a, gfx942",
        "torch213-cxx11-rocm71-x86_64-linux  (rocm arch)  archs: gfx90a;gfx942",
        "  mykernel_rocm: gfx90a, gfx942",
        "torch213-cxx11-rocm72-x86_64-linux  (rocm arch)  archs: gfx90a;gfx942",
        "  mykernel_rocm: gfx90a, gfx942",
        "",
    ]
    .join("\n");
    assert_eq!(out, expected);

    let path = dir.join("build.toml");
    let orig = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, orig.replace("version = 1", "verison = 1")).unwrap();
    let o = kforge(&["check"], &dir);
    assert_eq!(o.status.code(), Some(1));
    let expected = [
        "manifest::unknown-key",
        "",
        "  × unknown key `verison` in [general]",
        "   ╭─[./build.toml:5:1]",
        " 4 │ name = \"mykernel\"",
        " 5 │ verison = 1",
        "   · ───┬───",
        "   ·    ╰── unknown key",
        " 6 │ edition = 5",
        "   ╰────",
        "  help: did you mean `version`?",
        "",
        "error: ./build.toml has 1 problem (see above)",
        "",
    ]
    .join("\n");
    assert_eq!(text(&o).1, expected);
}
