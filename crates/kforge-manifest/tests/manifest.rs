//! build.toml validation on real project directories: one test per rule, asserting the exact message,
//! its file:line:col and the fix hint.

use std::path::{Path, PathBuf};

use kforge_manifest::{Backend, Framework, StableAbi, Version, load_project, parse_manifest};

const BASE: &str = r#"[general]
name = "relu"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]

[kernel.relu_cpu]
backend = "cpu"
depends = ["torch"]
src = ["relu_cpu/relu.cpp"]

[kernel.relu_cuda]
backend = "cuda"
depends = ["torch"]
src = ["relu_cuda/relu.cu"]
cuda-capabilities = ["8.0", "9.0a"]
"#;

const FILES: [&str; 5] = [
    "torch-ext/torch_binding.cpp",
    "torch-ext/torch_binding.h",
    "torch-ext/relu/__init__.py",
    "relu_cpu/relu.cpp",
    "relu_cuda/relu.cu",
];

struct Fixture {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

fn fixture(toml: &str, files: &[&str]) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("proj");
    std::fs::create_dir(&dir).unwrap();
    for f in files {
        let p = dir.join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "// test\n").unwrap();
    }
    std::fs::write(dir.join("build.toml"), toml).unwrap();
    Fixture { _tmp: tmp, dir }
}

/// Every problem's one-line summary, with the fixture directory written as `P`.
fn problems(toml: &str, files: &[&str]) -> Vec<String> {
    let f = fixture(toml, files);
    match load_project(&f.dir) {
        Ok(p) => p.warnings.iter().map(|w| w.summary()).collect::<Vec<_>>(),
        Err(e) => e.problems.iter().map(|p| p.summary()).collect(),
    }
    .into_iter()
    .map(|s| s.replace(f.dir.to_str().unwrap(), "P"))
    .collect()
}

fn errors_of(toml: &str) -> Vec<String> {
    let f = fixture(toml, &FILES);
    let err = load_project(&f.dir).expect_err("should be rejected");
    err.errors()
        .map(|p| p.summary().replace(f.dir.to_str().unwrap(), "P"))
        .collect()
}

fn edit(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from}");
    BASE.replacen(from, to, 1)
}

#[test]
fn valid_edition5_project_loads_into_the_model() {
    let f = fixture(BASE, &FILES);
    let p = load_project(&f.dir).unwrap();
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(p.root, f.dir.canonicalize().unwrap());
    let m = &p.manifest;
    assert_eq!(m.edition, 5);
    assert_eq!(m.general.name, "relu");
    assert_eq!(m.general.version, Some(1));
    assert_eq!(m.general.license.as_deref(), Some("Apache-2.0"));
    assert_eq!(m.general.backends, vec![Backend::Cpu, Backend::Cuda]);
    let t = m.torch().unwrap();
    assert_eq!(
        t.src,
        vec![
            PathBuf::from("torch-ext/torch_binding.cpp"),
            PathBuf::from("torch-ext/torch_binding.h")
        ]
    );
    assert_eq!(t.pyext, vec!["py", "pyi"]);
    assert_eq!(
        m.kernels.keys().collect::<Vec<_>>(),
        vec!["relu_cpu", "relu_cuda"]
    );
    let cuda = &m.kernels["relu_cuda"];
    assert_eq!(cuda.backend, Backend::Cuda);
    assert_eq!(cuda.depends, vec!["torch"]);
    assert_eq!(
        cuda.cuda_capabilities.as_deref(),
        Some(&["8.0".to_string(), "9.0a".to_string()][..])
    );
    assert!(m.noarch_backends().is_empty());
}

#[test]
fn every_key_of_edition5_is_read() {
    let toml = r#"[general]
name = "my-kernel"
version = 3
edition = 5
license = "MIT"
upstream = "https://github.com/org/upstream"
source = "git@github.com:org/source.git"
backends = ["cuda", "rocm", "xpu", "metal", "cpu", "tpu"]
python-depends = ["einops"]
kernel-depends = [{ repo-id = "org/a", version = 2 }, { repo-id = "org/b", revision = "main" }]

[general.hub]
repo-id = "org/my-kernel"
branch = "dev"

[general.cuda]
minver = "12.6"
maxver = "13.0"
python-depends = ["nvidia-cutlass-dsl"]
kernel-depends = [{ repo-id = "org/c", version = 1 }]

[general.xpu]
python-depends = ["onednn"]

[general.tpu]
python-depends = []

[torch]
src = ["torch-ext/b.cpp"]
include = ["inc"]
pyext = ["py", "json"]
minver = "2.10.0"
maxver = "2.12"
cxx-flags = ["-O3"]

[torch.stable-abi]
cuda = "2.11"

[kernel.k_cuda]
backend = "cuda"
depends = ["torch", "cutlass_3_6"]
src = ["k/k.cu"]
include = ["inc"]
cxx-flags = ["-DX"]
cuda-capabilities = ["9.0a"]
cuda-flags = ["-lineinfo"]
cuda-minver = "12.8"

[kernel.k_rocm]
backend = "rocm"
depends = ["torch"]
src = ["k/k.cu"]
rocm-archs = ["gfx942"]
hip-flags = ["-O3"]

[kernel.k_xpu]
backend = "xpu"
depends = ["torch", "sycl_tla"]
src = ["k/k.cpp"]
sycl-flags = ["-DY"]
"#;
    let f = fixture(
        toml,
        &[
            "torch-ext/b.cpp",
            "torch-ext/my_kernel/__init__.py",
            "k/k.cu",
            "k/k.cpp",
            "inc/h.h",
        ],
    );
    let p = load_project(&f.dir).unwrap_or_else(|e| panic!("{e}"));
    let m = p.manifest;
    let g = &m.general;
    assert_eq!(g.python_name(), "my_kernel");
    assert_eq!(g.source.as_deref(), Some("git@github.com:org/source.git"));
    assert_eq!(g.kernel_depends.len(), 2);
    assert_eq!(g.kernel_depends[1].revision.as_deref(), Some("main"));
    assert_eq!(g.hub.as_ref().unwrap().branch.as_deref(), Some("dev"));
    let cuda = g.cuda.as_ref().unwrap();
    assert_eq!(cuda.minver, Some(Version::new(&[12, 6])));
    assert_eq!(
        g.python_depends_for(Backend::Cuda),
        vec!["einops", "nvidia-cutlass-dsl"]
    );
    assert_eq!(
        g.kernel_depends_for(Backend::Cuda)
            .iter()
            .map(|d| d.repo_id.as_str())
            .collect::<Vec<_>>(),
        vec!["org/a", "org/b", "org/c"]
    );
    assert_eq!(g.python_depends_for(Backend::Xpu), vec!["einops", "onednn"]);
    let t = m.torch().unwrap();
    assert_eq!(t.minver, Some("2.10".parse().unwrap()));
    assert_eq!(t.pyext, vec!["py", "json"]);
    assert_eq!(
        t.stable_abi.as_ref().unwrap().for_backend(Backend::Cuda),
        Some(&Version::new(&[2, 11]))
    );
    assert!(matches!(t.stable_abi, Some(StableAbi::PerBackend(_))));
    assert_eq!(
        t.stable_abi.as_ref().unwrap().for_backend(Backend::Rocm),
        None
    );
    let k = &m.kernels["k_cuda"];
    assert_eq!(k.cuda_minver, Some(Version::new(&[12, 8])));
    assert_eq!(k.cuda_flags, vec!["-lineinfo"]);
    assert_eq!(m.kernels["k_rocm"].hip_flags, vec!["-O3"]);
    assert_eq!(m.kernels["k_xpu"].sycl_flags, vec!["-DY"]);
    // metal, cpu and tpu have no compiled component: they are built as noarch.
    assert_eq!(
        m.noarch_backends(),
        vec![Backend::Metal, Backend::Cpu, Backend::Tpu]
    );
}

#[test]
fn missing_build_toml() {
    let tmp = tempfile::tempdir().unwrap();
    let err = load_project(tmp.path()).unwrap_err();
    let s = err.problems[0].summary();
    assert!(s.contains("build.toml: error: cannot read"), "{s}");
    assert!(s.contains("create one with `kforge init NAME`"), "{s}");
    let err = load_project(&tmp.path().join("nope")).unwrap_err();
    assert!(
        err.problems[0]
            .message
            .starts_with("cannot open project directory"),
        "{}",
        err.problems[0].message
    );
}

#[test]
fn toml_syntax_error_points_at_the_line() {
    let toml = edit("license = \"Apache-2.0\"", "license = Apache-2.0");
    let errs = errors_of(&toml);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("P/build.toml:5:11: error: TOML syntax error:"),
        "{errs:?}"
    );
}

#[test]
fn unknown_key_suggests_the_closest() {
    assert_eq!(
        errors_of(&edit("license =", "licence =")),
        vec![
            "P/build.toml:5:1: error: unknown key `licence` in [general] (help: did you mean `license`?)"
        ]
    );
    assert_eq!(
        errors_of(&edit("cuda-capabilities", "cuda_capabilities")),
        vec![
            "P/build.toml:20:1: error: unknown key `cuda_capabilities` in [kernel.relu_cuda] (help: did you mean `cuda-capabilities`?)"
        ]
    );
    assert_eq!(
        errors_of(&format!("{BASE}\n[torhc]\nsrc = []\n")),
        vec![
            "P/build.toml:22:2: error: unknown key `torhc` in the top level (help: did you mean `torch`?)"
        ]
    );
}

#[test]
fn wrong_types() {
    assert_eq!(
        errors_of(&edit("version = 1", "version = \"1\"")),
        vec![
            "P/build.toml:3:11: error: `general.version` must be a non-negative integer, found a string (help: write it as `version = 1` (no quotes))"
        ]
    );
    assert_eq!(
        errors_of(&edit(
            "backends = [\"cpu\", \"cuda\"]",
            "backends = \"cuda\""
        )),
        vec![
            "P/build.toml:6:12: error: `general.backends` must be an array of strings, found a string (help: write it as `backends = [\"...\"]`)"
        ]
    );
    assert_eq!(
        errors_of(&edit("[\"8.0\", \"9.0a\"]", "[8.0]")),
        vec![
            "P/build.toml:20:22: error: every element of `kernel.relu_cuda.cuda-capabilities` must be a string, found a float (help: quote it, e.g. \"8.0\")"
        ]
    );
}

#[test]
fn bad_kernel_name() {
    assert_eq!(
        errors_of(&edit("[kernel.relu_cpu]", "[kernel.\"relu cpu\"]")),
        vec![
            "P/build.toml:11:9: error: invalid kernel name `relu cpu`: expected letters, digits, `_` and `-`, starting with a letter or `_` (help: rename it, e.g. [kernel.relu_cpu])"
        ]
    );
    assert_eq!(
        errors_of(&edit("name = \"relu\"", "name = \"Relu_Op\"")),
        vec![
            "P/build.toml:2:8: error: invalid kernel name `Relu_Op`: expected lowercase letters, digits and `-`, starting with a letter and not ending with `-` (at least 2 characters) (help: e.g. name = \"relu-op\")"
        ]
    );
}

#[test]
fn unknown_backend() {
    assert_eq!(
        errors_of(&edit("[\"cpu\", \"cuda\"]", "[\"cpu\", \"cdua\"]")),
        vec![
            "P/build.toml:6:20: error: unknown backend `cdua` in `general.backends` (help: did you mean `cuda`?)"
        ]
    );
    assert_eq!(
        errors_of(&edit("backend = \"cpu\"", "backend = \"tpu\"")),
        vec![
            "P/build.toml:12:11: error: [kernel.relu_cpu] uses backend `tpu`, which has no compiled kernels (help: compiled kernels use one of `cpu`, `cuda`, `metal`, `rocm`, `xpu`; tpu kernels are noarch (list it in general.backends only))"
        ]
    );
}

#[test]
fn unknown_depends() {
    assert_eq!(
        errors_of(&edit(
            "depends = [\"torch\"]\nsrc = [\"relu_cuda",
            "depends = [\"torch\", \"cutlass_3_7\"]\nsrc = [\"relu_cuda"
        )),
        vec![
            "P/build.toml:18:21: error: unknown dependency `cutlass_3_7` in `kernel.relu_cuda.depends` (help: did you mean `cutlass_3_9`?)"
        ]
    );
    assert_eq!(
        errors_of(&edit(
            "edition = 5\n",
            "edition = 5\npython-depends = [\"numpy\"]\n"
        )),
        vec![
            "P/build.toml:5:19: error: unknown Python dependency `numpy` in `general.python-depends` (help: the allowed dependencies are `einops`, `helion`, `tvm-ffi`)"
        ]
    );
}

#[test]
fn kernel_depends_needs_exactly_one_pin() {
    let both = edit(
        "edition = 5\n",
        "edition = 5\nkernel-depends = [{ repo-id = \"org/x\", version = 1, revision = \"main\" }]\n",
    );
    assert_eq!(
        errors_of(&both),
        vec![
            "P/build.toml:5:53: error: `general.kernel-depends[0]` sets both `version` and `revision`; they are mutually exclusive (help: keep `version = N` to follow a version branch, or `revision = \"...\"` to pin a commit/branch, not both)"
        ]
    );
    let none = edit(
        "edition = 5\n",
        "edition = 5\nkernel-depends = [{ repo-id = \"org/x\" }]\n",
    );
    assert_eq!(
        errors_of(&none),
        vec![
            "P/build.toml:5:19: error: `general.kernel-depends[0]` needs `version` or `revision` (help: add `version = 1` (a version branch) or `revision = \"<commit or branch>\"`)"
        ]
    );
}

#[test]
fn missing_required_keys_per_edition() {
    assert_eq!(
        errors_of(&edit("license = \"Apache-2.0\"\n", "")),
        vec![
            "P/build.toml:1:1: error: missing required key `license` in [general] (help: add `license = \"Apache-2.0\"` (a Hub license identifier))"
        ]
    );
    assert_eq!(
        errors_of(&edit(
            "depends = [\"torch\"]\nsrc = [\"relu_cpu/relu.cpp\"]",
            "src = [\"relu_cpu/relu.cpp\"]"
        )),
        vec![
            "P/build.toml:11:1: error: missing required key `depends` in [kernel.relu_cpu] (help: add `depends = [\"torch\"]`)"
        ]
    );
    // Without `edition` and with license + version + framework the file is edition 4, which has no
    // `kernel-depends`.
    let v4 = edit("edition = 5\n", "kernel-depends = []\n");
    assert_eq!(
        errors_of(&v4),
        vec![
            "P/build.toml:4:1: error: `kernel-depends` in [general] is not part of edition 4 build.toml files (help: add `edition = 5` to [general] (`kforge update-build` migrates an older build.toml))"
        ]
    );
    assert_eq!(
        errors_of(&edit("edition = 5", "edition = 6")),
        vec![
            "P/build.toml:4:11: error: unsupported build edition 6 (help: kforge reads `edition = 5`, and editions 3 and 4 (which have no `edition` key))"
        ]
    );
}

#[test]
fn missing_source_file_suggests_a_sibling() {
    assert_eq!(
        errors_of(&edit("relu_cuda/relu.cu\"", "relu_cuda/rleu.cu\"")),
        vec![
            "P/build.toml:19:8: error: file `relu_cuda/rleu.cu` does not exist (help: did you mean `relu_cuda/relu.cu`?)"
        ]
    );
}

#[test]
fn paths_must_stay_inside_the_project() {
    assert_eq!(
        errors_of(&edit("\"relu_cpu/relu.cpp\"", "\"relu_cpu/../../x.cpp\"")),
        vec![
            "P/build.toml:14:8: error: path `relu_cpu/../../x.cpp` leaves the project directory through `..` (help: paths in build.toml are relative to the project directory and must stay inside it; copy or vendor the file into the project)"
        ]
    );
    assert_eq!(
        errors_of(&edit("\"relu_cpu/relu.cpp\"", "\"/etc/hostname\"")),
        vec![
            "P/build.toml:14:8: error: path `/etc/hostname` is absolute; it must be relative to the project directory (help: paths in build.toml are relative to the project directory and must stay inside it; copy or vendor the file into the project)"
        ]
    );
}

#[test]
fn symlink_out_of_the_project_is_rejected() {
    let f = fixture(BASE, &FILES);
    let outside = f.dir.parent().unwrap().join("outside.cpp");
    std::fs::write(&outside, "// outside\n").unwrap();
    std::fs::remove_file(f.dir.join("relu_cpu/relu.cpp")).unwrap();
    std::os::unix::fs::symlink(&outside, f.dir.join("relu_cpu/relu.cpp")).unwrap();
    let err = load_project(&f.dir).unwrap_err();
    let msgs: Vec<String> = err.errors().map(|p| p.summary()).collect();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(
        msgs[0].contains(
            "build.toml:14:8: error: path `relu_cpu/relu.cpp` resolves through a symlink to"
        ),
        "{msgs:?}"
    );
    assert!(
        msgs[0].contains("outside the project directory"),
        "{msgs:?}"
    );
    // A symlink that stays inside is fine.
    std::fs::remove_file(f.dir.join("relu_cpu/relu.cpp")).unwrap();
    std::os::unix::fs::symlink("../relu_cuda/relu.cu", f.dir.join("relu_cpu/relu.cpp")).unwrap();
    load_project(&f.dir).unwrap();
}

#[test]
fn python_package_layout() {
    let files: Vec<&str> = FILES
        .iter()
        .copied()
        .filter(|f| !f.ends_with("__init__.py"))
        .collect();
    assert_eq!(
        problems(BASE, &files),
        vec![
            "P/torch-ext/relu: error: python package file `torch-ext/relu/__init__.py` does not exist (help: the python package of kernel `relu` lives in `torch-ext/relu/`; create `torch-ext/relu/__init__.py` (it re-exports the ops))"
        ]
    );
    let mut nested = FILES.to_vec();
    nested.push("torch-ext/relu/relu/__init__.py");
    assert_eq!(
        problems(BASE, &nested),
        vec![
            "P/torch-ext/relu: error: `torch-ext/relu/relu` must not exist (help: the package is `torch-ext/relu/` itself; move the files of `torch-ext/relu/relu` up one level)"
        ]
    );
}

#[test]
fn empty_arch_intersections() {
    assert_eq!(
        errors_of(&edit("[\"8.0\", \"9.0a\"]", "[\"99999.0\"]")),
        vec![
            "P/build.toml:20:21: error: `kernel.relu_cuda.cuda-capabilities` [\"99999.0\"] leaves no arch to build with CUDA 12.6, 12.8, 13.0 (help: list capabilities the toolkits support, e.g. [\"7.5\", \"8.0\", \"8.6\", \"8.7\", \"8.9\", \"9.0\", \"10.0\", \"11.0\", \"12.0\", \"12.1+PTX\"])"
        ]
    );
    assert_eq!(
        errors_of(&edit("[\"8.0\", \"9.0a\"]", "[\"sm_90\"]")),
        vec![
            "P/build.toml:20:22: error: invalid CUDA capability `sm_90` in `kernel.relu_cuda.cuda-capabilities` (help: write MAJOR.MINOR with an optional `a`/`f` suffix and `+PTX`, e.g. \"8.0\", \"9.0a\", \"10.0f\", \"8.0+PTX\")"
        ]
    );
    let rocm = format!(
        "{}\n[kernel.relu_rocm]\nbackend = \"rocm\"\ndepends = [\"torch\"]\nsrc = [\"relu_cuda/relu.cu\"]\nrocm-archs = [\"gfx99999\"]\n",
        BASE.replace("[\"cpu\", \"cuda\"]", "[\"cpu\", \"cuda\", \"rocm\"]")
    );
    assert_eq!(
        errors_of(&rocm),
        vec![
            "P/build.toml:26:14: error: `kernel.relu_rocm.rocm-archs` [\"gfx99999\"] contains no supported ROCm arch (help: use archs from `gfx906`, `gfx908`, `gfx90a`, `gfx942`, `gfx950`, `gfx1030`, `gfx1100`, `gfx1101`, `gfx1200`, `gfx1201`)"
        ]
    );
}

#[test]
fn many_problems_are_reported_together() {
    let toml = edit("license = \"Apache-2.0\"", "licence = 1")
        .replace("backend = \"cpu\"", "backend = \"cpux\"")
        .replace("relu_cuda/relu.cu\"", "nope.cu\"");
    assert_eq!(
        errors_of(&toml),
        vec![
            "P/build.toml:5:1: error: unknown key `licence` in [general] (help: did you mean `license`?)",
            "P/build.toml:12:11: error: unknown backend `cpux` in `kernel.relu_cpu.backend` (help: did you mean `cpu`?)",
            "P/build.toml:19:8: error: file `nope.cu` does not exist (help: create the file, or fix the path (relative to the project directory))",
        ]
    );
}

#[test]
fn framework_tables() {
    let two = format!("{BASE}\n[torch-noarch]\n");
    assert_eq!(
        errors_of(&two),
        vec![
            "P/build.toml:22:2: error: a project has exactly one framework table, found [torch] and [torch-noarch] (help: keep one of [torch], [torch-noarch] and [tvm-ffi])"
        ]
    );
    let noarch = r#"[general]
name = "relu-triton"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cuda", "rocm", "xpu"]

[torch-noarch]
cuda_capabilities = ["8.0", "9.0"]
rocm-archs = ["gfx942"]
"#;
    let f = fixture(noarch, &["torch-ext/relu_triton/__init__.py"]);
    let m = load_project(&f.dir).unwrap().manifest;
    let Framework::TorchNoarch(n) = &m.framework else {
        panic!("not noarch")
    };
    assert_eq!(n.cuda_capabilities.as_deref().unwrap(), ["8.0", "9.0"]);
    assert_eq!(n.rocm_archs.as_deref().unwrap(), ["gfx942"]);
    assert_eq!(
        m.noarch_backends(),
        vec![Backend::Cuda, Backend::Rocm, Backend::Xpu]
    );
    let tvm = BASE
        .replace("[torch]", "[tvm-ffi]")
        .replace("torch-ext/", "tvm-ffi-ext/");
    let files: Vec<String> = FILES
        .iter()
        .map(|f| f.replace("torch-ext/", "tvm-ffi-ext/"))
        .collect();
    let f = fixture(&tvm, &files.iter().map(String::as_str).collect::<Vec<_>>());
    let m = load_project(&f.dir).unwrap().manifest;
    assert!(matches!(m.framework, Framework::TvmFfi(_)));
    assert_eq!(m.framework.ext_dir(), "tvm-ffi-ext");
}

#[test]
fn edition4_and_legacy_files_are_normalized_with_a_warning() {
    let v4 = BASE.replace("edition = 5\n", "");
    let f = fixture(&v4, &FILES);
    let p = load_project(&f.dir).unwrap();
    assert_eq!(p.manifest.edition, 4);
    assert_eq!(p.warnings.len(), 1);
    assert_eq!(
        p.warnings[0]
            .summary()
            .replace(f.dir.to_str().unwrap(), "P"),
        "P/build.toml:1:1: warning: an edition 4 build.toml; the current format is edition 5 (help: run `kforge update-build` to rewrite it as edition 5)"
    );
    // Legacy: no version/license, no framework table → noarch.
    let v3 = "[general]\nname = \"act\"\nbackends = [\"cuda\"]\n";
    let (m, warnings) = parse_manifest(v3, Path::new("x/build.toml")).unwrap();
    assert_eq!(m.edition, 3);
    assert_eq!(m.general.version, None);
    assert!(matches!(m.framework, Framework::TorchNoarch(_)));
    assert_eq!(warnings.len(), 1);
    // A pre-edition-3 file (no backends) is rejected with a hint.
    let v2 = "[general]\nname = \"act\"\n\n[torch]\nsrc = []\n\n[kernel.a]\nlanguage = \"cuda\"\nsrc = []\ndepends = []\n";
    let err = parse_manifest(v2, Path::new("x/build.toml")).unwrap_err();
    let msgs: Vec<String> = err.errors().map(|p| p.summary()).collect();
    assert_eq!(
        msgs,
        vec![
            "x/build.toml:1:1: error: missing required key `backends` in [general] (help: add `backends = [\"cuda\"]` (the backends this kernel supports); build.toml files older than edition 3 are not supported)",
            "x/build.toml:8:1: error: [kernel.a] uses `language`, a key of the pre-edition-3 format (help: replace it with `backend = \"cuda\"` (or rocm, metal, ...))",
        ]
    );
}

#[test]
fn urls_and_versions() {
    assert_eq!(
        errors_of(&edit(
            "edition = 5\n",
            "edition = 5\nupstream = \"ftp://x.org/r\"\n"
        )),
        vec![
            "P/build.toml:5:12: error: `general.upstream` = \"ftp://x.org/r\" is not a git URL: expected an https, http, git, ssh, git+ssh, git+https or git+http URL, or scp-style user@host:path (help: e.g. upstream = \"https://github.com/org/repo\")"
        ]
    );
    assert_eq!(
        errors_of(&edit(
            "src = [\"torch-ext/torch_binding.cpp\"",
            "minver = 2.11\nsrc = [\"torch-ext/torch_binding.cpp\""
        )),
        vec![
            "P/build.toml:9:10: error: `torch.minver` must be a version string, found a float (help: write it as `minver = \"2.11\"` (versions are strings))"
        ]
    );
    assert_eq!(
        errors_of(&edit(
            "src = [\"torch-ext/torch_binding.cpp\"",
            "minver = \"2.x\"\nsrc = [\"torch-ext/torch_binding.cpp\""
        )),
        vec![
            "P/build.toml:9:10: error: `torch.minver`: invalid version `2.x`: expected dot-separated non-negative integers such as \"2.11\" or \"13.0\" (help: write it as `minver = \"2.11\"`)"
        ]
    );
    assert_eq!(
        errors_of(&edit(
            "src = [\"torch-ext/torch_binding.cpp\"",
            "minver = \"2.12\"\nmaxver = \"2.11\"\nsrc = [\"torch-ext/torch_binding.cpp\""
        )),
        vec![
            "P/build.toml:9:10: error: `torch.minver` (2.12) is greater than `torch.maxver` (2.11): no version can satisfy both (help: swap the two bounds or widen the range)"
        ]
    );
}

#[test]
fn problems_render_as_miette_snippets() {
    let f = fixture(&edit("license =", "licence ="), &FILES);
    let err = load_project(&f.dir).unwrap_err();
    let mut out = String::new();
    miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
        .render_report(&mut out, &err.problems[0])
        .unwrap();
    assert!(out.contains("build.toml:5:1]"), "{out}");
    assert!(out.contains("licence = \"Apache-2.0\""), "{out}");
    assert!(out.contains("unknown key"), "{out}");
    assert!(out.contains("did you mean `license`?"), "{out}");
}

#[test]
fn more_rules_with_exact_messages() {
    let tpu = edit(
        "backends = [\"cpu\", \"cuda\"]\n",
        "backends = [\"cpu\", \"cuda\"]\n\n[general.tpu]\npython-depends = [\"jax\"]\n",
    );
    assert_eq!(
        errors_of(&tpu),
        vec![
            "P/build.toml:9:19: error: unknown Python dependency `jax` in `general.tpu.python-depends` for backend tpu (help: no Python dependencies are defined for backend tpu; remove the entry)"
        ]
    );
    let v4_table = BASE.replace("edition = 5\n", "").replace(
        "[kernel.relu_cpu]",
        "[torch.stable-abi]\ncpu = \"2.11\"\n\n[kernel.relu_cpu]",
    );
    assert_eq!(
        errors_of(&v4_table),
        vec![
            "P/build.toml:10:1: error: a per-backend [torch.stable-abi] table needs edition 5 (help: add `edition = 5` to [general] (`kforge update-build` migrates an older build.toml))"
        ]
    );
    assert_eq!(
        errors_of(&edit(
            "edition = 5\n",
            "edition = 5\nkernel-depends = [{ repo-id = \"noslash\", version = 1 }]\n"
        )),
        vec![
            "P/build.toml:5:31: error: `general.kernel-depends[0].repo-id` = \"noslash\" is not a Hub repo id (help: write it as \"org/name\")"
        ]
    );
    assert_eq!(
        errors_of(&edit("\"relu_cpu/relu.cpp\"", "\"relu_cpu\"")),
        vec![
            "P/build.toml:14:8: error: `relu_cpu` is a directory; `src` lists files (help: list the source and header files themselves (directories go in `include`))"
        ]
    );
    assert_eq!(
        errors_of(&edit(
            "src = [\"relu_cpu/relu.cpp\"]",
            "src = [\"relu_cpu/relu.cpp\"]\ninclude = [\"relu_cpu/relu.cpp\"]"
        )),
        vec![
            "P/build.toml:15:12: error: `relu_cpu/relu.cpp` is a file; `include` lists directories (help: list the directory that contains the header)"
        ]
    );
    // Warnings: a backend listed twice, a kernel for an unlisted backend, an unsupported ROCm arch.
    let warn = edit("[\"cpu\", \"cuda\"]", "[\"cpu\", \"cuda\", \"cpu\"]")
        + "\n[kernel.relu_rocm]\nbackend = \"rocm\"\ndepends = [\"torch\"]\nrocm-archs = [\"gfx940\", \"gfx942\"]\nsrc = [\"relu_cuda/relu.cu\"]\n";
    assert_eq!(
        problems(&warn, &FILES),
        vec![
            "P/build.toml:6:28: warning: backend `cpu` is listed twice in `general.backends`",
            "P/build.toml:23:11: warning: [kernel.relu_rocm] has backend rocm, which is not in `general.backends`: it will not be built (help: add \"rocm\" to `general.backends` or remove [kernel.relu_rocm])",
            "P/build.toml:25:15: warning: ROCm arch `gfx940` is not supported and is dropped (help: supported archs: `gfx906`, `gfx908`, `gfx90a`, `gfx942`, `gfx950`, `gfx1030`, `gfx1100`, `gfx1101`, `gfx1200`, `gfx1201`)",
        ]
    );
}

#[test]
fn noarch_rules() {
    let base = "[general]\nname = \"tri\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cuda\"]\n\n[torch-noarch]\n";
    let files = ["torch-ext/tri/__init__.py"];
    assert_eq!(
        problems(
            &format!("{base}cuda_capabilities = [\"8.0\"]\ncuda-capabilities = [\"9.0\"]\n"),
            &files
        ),
        vec![
            "P/build.toml:10:1: error: [torch-noarch] sets both `cuda_capabilities` and `cuda-capabilities` (help: keep one of the two spellings)"
        ]
    );
    assert_eq!(
        problems(
            &format!("{base}\n[kernel.k]\nbackend = \"cuda\"\ndepends = []\nsrc = []\n"),
            &files
        ),
        vec![
            "P/build.toml:10:9: error: [kernel.k] is a compiled component, but the project uses [torch-noarch] (help: use [torch] (an AOT extension) for compiled kernels, or remove the [kernel.*] tables)"
        ]
    );
    // A legacy file with no framework table is noarch as well; the error says that, not [torch-noarch].
    let legacy = "[general]\nname = \"tri\"\nbackends = [\"cpu\"]\n\n[kernel.k]\nbackend = \"cpu\"\ndepends = []\nsrc = []\n";
    let legacy_errors: Vec<String> = problems(legacy, &files)
        .into_iter()
        .filter(|p| p.contains("error:"))
        .collect();
    assert_eq!(
        legacy_errors,
        vec![
            "P/build.toml:5:9: error: [kernel.k] is a compiled component, but the project has no [torch] table (a legacy build.toml without one is a noarch project) (help: use [torch] (an AOT extension) for compiled kernels, or remove the [kernel.*] tables)"
        ]
    );
    // An empty [kernel] table is how HF's noarch examples spell "no kernels".
    assert_eq!(
        problems(&format!("{base}\n[kernel]\n"), &files),
        Vec::<String>::new()
    );
}
