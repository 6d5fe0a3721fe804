//! `kforge build` end to end with the real toolchains (torch and nvcc wheels from the shared cache,
//! fetched on first use): outputs, the action cache, reproducibility, ABI gating and bad input.
//! Each build gets its own action cache (toolchains shared through a symlink), so counts and bytes
//! do not depend on earlier runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;

use common::{copy_tree, repo, s, scratch, text};
use kforge_manifest::metadata::Metadata;
use kforge_toolchain::{Cache, build_sets, prepare};
use tempfile::TempDir;

const CPU: &str = "torch211-cxx11-cpu-x86_64-linux";
const CUDA: &str = "torch211-cxx11-cu130-x86_64-linux";

/// A cache whose toolchains are the shared (downloaded once) ones and whose actions start empty.
fn fresh_cache() -> TempDir {
    let shared = Cache::from_env();
    for set in build_sets().unwrap() {
        prepare(&shared, &set).unwrap();
    }
    let dir = scratch("kforge-build-test-cache-");
    std::os::unix::fs::symlink(
        shared.root().join("toolchains"),
        dir.path().join("toolchains"),
    )
    .unwrap();
    dir
}

/// kernels/relu copied to `<dir>/<name>` (outside git, so the id is a content hash).
fn relu_copy(dir: &Path, name: &str) -> PathBuf {
    let dst = dir.join(name);
    copy_tree(&repo().join("kernels/relu"), &dst);
    dst
}

fn kforge(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kforge"))
        .args(args)
        .env("KFORGE_CACHE", cache)
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

fn build(cache: &Path, args: &[&str]) -> Output {
    let mut all = vec!["build"];
    all.extend_from_slice(args);
    kforge(cache, &all)
}

fn ok(out: Output) -> String {
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    stdout
}

#[test]
fn cpu_variant_builds_then_noop_then_only_changed_sources_recompile() {
    let cache = fresh_cache();
    let work = scratch("kforge-build-test-incr-");
    let proj = relu_copy(work.path(), "relu");
    let out_dir = work.path().join("out");
    let args = [
        s(&proj),
        "--backend",
        "cpu",
        "--out",
        s(&out_dir),
        "--unique-id",
        "t1",
        "-j",
        "2",
    ];

    let first = ok(build(cache.path(), &args));
    // binding, relu_cpu, the single-threaded stub, the link
    assert!(
        first.contains("built: ") && first.contains("(4 actions run, 0 cached)"),
        "{first}"
    );
    let variant = out_dir.join(CPU);
    let mut files: Vec<String> = std::fs::read_dir(&variant)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "__init__.py",
            "_ops.py",
            "_relu_cpu_t1.abi3.so",
            "metadata.json"
        ]
    );
    let so = std::fs::read(variant.join("_relu_cpu_t1.abi3.so")).unwrap();
    assert!(so.starts_with(b"\x7fELF"));
    assert!(so.windows(16).any(|w| w == b"PyInit__relu_cpu"));
    let meta = Metadata::read(&variant.join("metadata.json")).unwrap();
    assert_eq!(meta.id, "_relu_cpu_t1");
    assert_eq!(meta.backend.archs, None);
    let digest = meta.digest.expect("digest");
    assert_eq!(
        digest.files.keys().collect::<Vec<_>>(),
        ["__init__.py", "_ops.py", "_relu_cpu_t1.abi3.so"]
    );
    let ops = std::fs::read_to_string(variant.join("_ops.py")).unwrap();
    assert!(ops.contains("ops = torch.ops._relu_cpu_t1"), "{ops}");

    let before = std::fs::metadata(variant.join("metadata.json"))
        .unwrap()
        .modified()
        .unwrap();
    let again = ok(build(cache.path(), &args));
    assert!(
        again.contains("up to date: ") && again.contains("(0 actions run, 4 cached)"),
        "{again}"
    );
    let after = std::fs::metadata(variant.join("metadata.json"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after, "a no-op build must not rewrite the variant");

    let cpp = proj.join("relu_cpu/relu_cpu.cpp");
    let mut src = std::fs::read_to_string(&cpp).unwrap();
    src.push_str("\n// touched\n");
    std::fs::write(&cpp, src).unwrap();
    let touched = ok(build(cache.path(), &args));
    // that file and the link; the binding and the stub come from the cache (a comment changes no
    // byte of the library, so the variant itself may stay "up to date")
    assert!(touched.contains("(2 actions run, 2 cached)"), "{touched}");

    // A header both sources include: both recompile, and the library is relinked.
    let h = proj.join("torch-ext/torch_binding.h");
    let mut hdr = std::fs::read_to_string(&h).unwrap();
    // a definition that lands in every object including the header (a comment would change no byte)
    hdr.push_str("\nstatic const char kforge_marker[] __attribute__((used)) = \"touched\";\n");
    std::fs::write(&h, hdr).unwrap();
    let header = ok(build(cache.path(), &args));
    assert!(header.contains("(3 actions run, 1 cached)"), "{header}");
    assert!(!out_dir.join(".kforge-tmp").exists());
}

#[test]
fn two_builds_in_different_directories_are_identical() {
    let work = scratch("kforge-build-test-repro-");
    let mut metas = Vec::new();
    for name in ["first", "second-checkout"] {
        let cache = fresh_cache();
        let proj = relu_copy(&work.path().join(name), "relu");
        let out = ok(build(cache.path(), &[s(&proj), "-j", "2"]));
        assert!(out.contains(CPU) && out.contains(CUDA), "{out}");
        let m: Vec<Metadata> = [CPU, CUDA]
            .iter()
            .map(|v| Metadata::read(&proj.join("build").join(v).join("metadata.json")).unwrap())
            .collect();
        metas.push(m);
    }
    for (a, b) in metas[0].iter().zip(&metas[1]) {
        assert!(a.digest.is_some());
        assert_eq!(a.digest, b.digest, "{} differs between checkouts", a.id);
        assert_eq!(a, b);
    }
    assert_eq!(
        metas[0][1].backend.archs.as_deref(),
        Some(&["8.0".to_string(), "9.0".to_string()][..])
    );
}

#[test]
fn compile_error_shows_the_compiler_message_and_leaves_no_variant() {
    let cache = fresh_cache();
    let work = scratch("kforge-build-test-err-");
    let proj = relu_copy(work.path(), "relu");
    let cpp = proj.join("relu_cpu/relu_cpu.cpp");
    let src = std::fs::read_to_string(&cpp).unwrap();
    std::fs::write(
        &cpp,
        src.replace(
            "at::Tensor const in =",
            "at::Tensor const in = undefined_name +",
        ),
    )
    .unwrap();
    let out_dir = work.path().join("out");
    let out = build(
        cache.path(),
        &[s(&proj), "--backend", "cpu", "--out", s(&out_dir)],
    );
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!("{CPU}: compiling relu_cpu/relu_cpu.cpp failed")),
        "{stderr}"
    );
    assert!(
        stderr.contains("relu_cpu/relu_cpu.cpp:") && stderr.contains("undefined_name"),
        "{stderr}"
    );
    assert!(stderr.contains("command: "), "{stderr}");
    assert!(!out_dir.join(CPU).exists());
    let leftovers: Vec<_> = std::fs::read_dir(&out_dir)
        .map(|r| r.count())
        .into_iter()
        .collect();
    assert!(
        leftovers.iter().all(|n| *n == 0),
        "out dir not empty: {leftovers:?}"
    );
}

#[test]
fn abi_violations_fail_the_build_unless_warn_only() {
    let cache = fresh_cache();
    let work = scratch("kforge-build-test-abi-");
    let proj = relu_copy(work.path(), "relu");
    // arc4random is GLIBC_2.36: newer than manylinux_2_28 allows.
    let cpp = proj.join("relu_cpu/relu_cpu.cpp");
    let src = std::fs::read_to_string(&cpp).unwrap();
    let src = src.replace("#include <cmath>", "#include <cmath>\n#include <cstdlib>")
        + "\nextern \"C\" unsigned kforge_test_random() { return arc4random(); }\n";
    std::fs::write(&cpp, src).unwrap();
    let out_dir = work.path().join("out");
    let args = [s(&proj), "--backend", "cpu", "--out", s(&out_dir)];
    let out = build(cache.path(), &args);
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{CPU}: ABI check failed")),
        "{stderr}"
    );
    assert!(stderr.contains("arc4random@GLIBC_2.36"), "{stderr}");
    assert!(
        !out_dir.join(CPU).exists(),
        "a failing variant must not be installed"
    );

    let mut warn = args.to_vec();
    warn.push("--abi-warn-only");
    let out = build(cache.path(), &warn);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("built: "), "{stdout}");
    assert!(
        stderr.contains("warning: ABI findings") && stderr.contains("arc4random"),
        "{stderr}"
    );
    assert!(out_dir.join(CPU).join("metadata.json").is_file());
}

#[test]
fn bad_selections_are_one_clear_line() {
    let cache = fresh_cache();
    let proj = repo().join("kernels/relu");
    let out = build(cache.path(), &[s(&proj), "--backend", "gpu"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.starts_with("error: --backend gpu: unknown backend `gpu`"),
        "{stderr}"
    );

    let out = build(
        cache.path(),
        &[s(&proj), "--variant", "torch299-cxx11-cpu-x86_64-linux"],
    );
    let (_, stderr) = text(&out);
    assert!(
        stderr.contains("error: --variant torch299-cxx11-cpu-x86_64-linux: this project has no such variant here; available: torch211-cxx11-cpu-x86_64-linux, torch211-cxx11-cu130-x86_64-linux"),
        "{stderr}"
    );

    let work = scratch("kforge-build-test-nomanifest-");
    let out = build(cache.path(), &[s(work.path())]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(stderr.contains("build.toml"), "{stderr}");
}

#[test]
fn kforge_init_projects_build() {
    let cache = fresh_cache();
    let work = scratch("kforge-build-test-init-");
    let proj = work.path().join("my-kernel");
    ok(kforge(
        cache.path(),
        &["init", "my-kernel", "--backends", "cpu", s(&proj)],
    ));
    let out = ok(build(cache.path(), &[s(&proj), "--unique-id", "i1"]));
    assert!(out.contains(CPU), "{out}");
    let variant = proj.join("build").join(CPU);
    assert!(variant.join("_my_kernel_cpu_i1.abi3.so").is_file());
    assert!(variant.join("__init__.py").is_file());
}

#[test]
fn rocm_device_only_compiles_the_rocm_component() {
    let cache = fresh_cache();
    let work = scratch("kforge-build-test-rocm-");
    let proj = repo().join("kernels/relu");
    let out_dir = work.path().join("out");
    let args = [
        s(&proj),
        "--backend",
        "rocm",
        "--device-only",
        "--out",
        s(&out_dir),
    ];
    let stdout = ok(build(cache.path(), &args));
    assert!(stdout.contains("never executed here"), "{stdout}");
    assert!(stdout.contains("relu_rocm gfx942 -> "), "{stdout}");
    let co = std::fs::read(out_dir.join("device/rocm/gfx942/relu_rocm.co")).unwrap();
    assert!(co.starts_with(b"\x7fELF"));

    let out = build(cache.path(), &[s(&proj), "--device-only"]);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.starts_with("error: --device-only: valid only with `--backend rocm`"),
        "{stderr}"
    );
}

#[test]
fn newer_glibc_symbol_versions_are_avoided() {
    let cache = fresh_cache();
    let work = scratch("kforge-build-test-glibc-");
    let proj = relu_copy(work.path(), "relu");
    // Linked plainly on glibc >= 2.34 these are pthread_once@GLIBC_2.34 (std::call_once),
    // exp/log/pow@GLIBC_2.29 and __libc_single_threaded@GLIBC_2.32 (libstdc++'s shared_ptr):
    // all above manylinux_2_28, so the build's ABI check would reject the variant.
    let cpp = proj.join("relu_cpu/relu_cpu.cpp");
    let src = std::fs::read_to_string(&cpp).unwrap().replace(
        "#include <cmath>",
        "#include <cmath>\n#include <memory>\n#include <mutex>",
    ) + r#"
extern "C" double kforge_test_glibc(double x) {
  static std::once_flag once;
  static double y;
  std::call_once(once, [&] { y = std::exp(x) + std::log(x) + std::pow(x, 2.5); });
  auto shared = std::make_shared<double>(y);
  auto copy = shared;
  return *copy;
}
"#;
    std::fs::write(&cpp, src).unwrap();
    let out_dir = work.path().join("out");
    let stdout = ok(build(
        cache.path(),
        &[s(&proj), "--backend", "cpu", "--out", s(&out_dir)],
    ));
    assert!(stdout.contains("built: "), "{stdout}");
    let abi = ok(kforge(cache.path(), &["abi", s(&out_dir.join(CPU))]));
    assert!(abi.contains("ok: no ABI issues"), "{abi}");
}
