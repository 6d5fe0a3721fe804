//! The checker on shared objects compiled with gcc/g++ at test time, resolved against the real torch
//! libraries of the project venv (scripts/setup.sh creates it; KFORGE_VENV points elsewhere).

use std::path::{Path, PathBuf};
use std::process::Command;

use kforge_abi::{Options, Policy, Report, check_file, check_project, check_variant_dir};

fn torch_lib() -> PathBuf {
    let venv = std::env::var_os("KFORGE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv"));
    let lib = venv.join("lib");
    std::fs::read_dir(&lib)
        .unwrap_or_else(|e| panic!("{}: {e}; run scripts/setup.sh", lib.display()))
        .flatten()
        .map(|e| e.path().join("site-packages/torch/lib"))
        .find(|p| p.join("libc10.so").is_file())
        .unwrap_or_else(|| panic!("no torch in {}; run scripts/setup.sh", venv.display()))
}

/// Compile `src` into `<dir>/<name>.so`; `lang` is "c" or "cpp".
fn cc(dir: &Path, name: &str, lang: &str, src: &str, extra: &[&str]) -> PathBuf {
    let src_path = dir.join(format!("{name}.{lang}"));
    std::fs::write(&src_path, src).unwrap();
    let out = dir.join(format!("{name}.so"));
    let compiler = if lang == "cpp" { "g++" } else { "gcc" };
    let output = Command::new(compiler)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(&src_path)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{compiler} {name}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

fn policy(torch: bool) -> Policy {
    let mut p = Policy::manylinux("manylinux_2_28").unwrap();
    if torch {
        p.torch_lib = Some(torch_lib());
    }
    p
}

/// Findings as "code symbol" (or "code"), sorted.
fn codes(r: &Report) -> Vec<String> {
    let mut v: Vec<String> = r
        .files
        .iter()
        .flat_map(|f| &f.findings)
        .map(|f| match &f.symbol {
            Some(s) => format!("{} {s}", f.code),
            None => f.code.to_string(),
        })
        .collect();
    v.sort();
    v
}

const HIDDEN_SINGLE_THREADED: &str =
    "__attribute__((visibility(\"hidden\"))) char __libc_single_threaded = 0;\n";

/// A C++ extension calling into libtorch_cpu (C shim) and libc10 (C++), built as kforge builds.
const CLEAN_EXT: &str = r#"
#include <string>
#include <cstdint>
extern "C" int32_t aoti_torch_get_data_ptr(void* tensor, void** ret);
namespace c10 { namespace detail {
[[noreturn]] void torchCheckFail(const char* func, const char* file, uint32_t line, const char* msg);
} }
extern "C" int ext_entry(void* t, const char* s) {
  std::string copy(s);
  void* p = nullptr;
  if (copy.empty()) c10::detail::torchCheckFail("f", "x.cpp", 1, "empty");
  return aoti_torch_get_data_ptr(t, &p);
}
"#;

fn link_torch(torch: &Path) -> Vec<String> {
    vec![
        format!("-L{}", torch.display()),
        "-lc10".into(),
        "-ltorch_cpu".into(),
        "-fno-gnu-unique".into(),
    ]
}

#[test]
fn clean_extension_linked_against_real_torch_passes() {
    let dir = tempfile::tempdir().unwrap();
    let torch = torch_lib();
    let args = link_torch(&torch);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let so = cc(
        dir.path(),
        "clean",
        "cpp",
        &format!("{CLEAN_EXT}{HIDDEN_SINGLE_THREADED}"),
        &args,
    );
    let r = check_file(&so, &policy(true)).unwrap();
    assert!(!r.has_errors(), "{r}");
    assert!(codes(&r).is_empty(), "{r}");
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    assert!(
        r.to_string().contains("ok: no ABI issues (manylinux_2_28"),
        "{r}"
    );
}

#[test]
fn glibc_2_32_reference_is_caught_and_the_hidden_definition_fixes_it() {
    let dir = tempfile::tempdir().unwrap();
    let src =
        "extern char __libc_single_threaded; int st(void) { return __libc_single_threaded; }\n";
    let bad = cc(dir.path(), "st", "c", src, &[]);
    let r = check_file(&bad, &policy(false)).unwrap();
    assert!(r.has_errors());
    let f = &r.files[0].findings[0];
    assert_eq!(f.code, "symbol-version");
    assert_eq!(f.library.as_deref(), Some("libc.so.6"));
    assert!(
        f.message
            .contains("__libc_single_threaded@GLIBC_2.32 is newer than GLIBC_2.28")
    );
    assert!(f.fix_hint.as_deref().unwrap().contains("hidden visibility"));
    // Without a torch dir the resolution check says it did not run.
    assert!(r.notes[0].contains("--torch-lib"), "{:?}", r.notes);
    // manylinux_2_34 allows it.
    let r = check_file(&bad, &Policy::manylinux("manylinux_2_34").unwrap()).unwrap();
    assert!(!r.has_errors(), "{r}");

    let fixed = cc(
        dir.path(),
        "st_fixed",
        "c",
        &format!("{src}{HIDDEN_SINGLE_THREADED}"),
        &[],
    );
    assert!(!check_file(&fixed, &policy(false)).unwrap().has_errors());
}

#[test]
fn python_symbols_outside_abi3_or_newer_than_the_minimum() {
    let dir = tempfile::tempdir().unwrap();
    let src = "void *PyModule_Create2(void *, int); void *_PyObject_GetDictPtr(void *);\n\
               const char *PyUnicode_AsUTF8AndSize(void *, long *);\n\
               void *f(void *o) { PyUnicode_AsUTF8AndSize(o, 0); _PyObject_GetDictPtr(o); return PyModule_Create2(0, 3); }\n";
    let so = cc(dir.path(), "py", "c", src, &[]);
    let r = check_file(&so, &policy(false)).unwrap();
    assert_eq!(
        codes(&r),
        [
            "abi3-too-new PyUnicode_AsUTF8AndSize",
            "non-abi3 _PyObject_GetDictPtr"
        ]
    );
    let mut p = policy(false);
    p.python_abi = Some((3, 10));
    let r = check_file(&so, &p).unwrap();
    assert_eq!(codes(&r), ["non-abi3 _PyObject_GetDictPtr"]);
}

#[test]
fn gnu_unique_static_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let src = "inline int& counter() { static int value = 0; return value; }\n\
               int bump() { return ++counter(); }\n";
    let so = cc(dir.path(), "unique", "cpp", src, &["-fgnu-unique"]);
    let r = check_file(&so, &policy(false)).unwrap();
    assert!(
        codes(&r).contains(&"gnu-unique _ZZ7countervE5value".to_string()),
        "{r}"
    );
    let so = cc(dir.path(), "not_unique", "cpp", src, &["-fno-gnu-unique"]);
    assert!(!check_file(&so, &policy(false)).unwrap().has_errors());
}

#[test]
fn symbols_no_torch_library_defines_and_missing_links() {
    let dir = tempfile::tempdir().unwrap();
    let torch = torch_lib();
    let src = "namespace c10 { void kforge_no_such_function(); }\n\
               extern \"C\" int aoti_torch_get_data_ptr(void*, void**);\n\
               int g(void* t) { c10::kforge_no_such_function(); return aoti_torch_get_data_ptr(t, 0); }\n";
    let l = format!("-L{}", torch.display());
    // Links only libc10: aoti_torch_get_data_ptr lives in libtorch_cpu.
    let so = cc(
        dir.path(),
        "ext",
        "cpp",
        src,
        &[&l, "-lc10", "-fno-gnu-unique"],
    );
    let r = check_file(&so, &policy(true)).unwrap();
    let unresolved: Vec<_> = r.files[0]
        .findings
        .iter()
        .filter(|f| f.code == "unresolved-symbol")
        .collect();
    assert_eq!(unresolved.len(), 2, "{r}");
    let missing = unresolved
        .iter()
        .find(|f| f.symbol.as_deref() == Some("_ZN3c1023kforge_no_such_functionEv"))
        .unwrap();
    assert!(
        missing.message.contains("c10::kforge_no_such_function()"),
        "{r}"
    );
    assert!(
        missing
            .fix_hint
            .as_deref()
            .unwrap()
            .contains("no library of the torch")
    );
    let unlinked = unresolved
        .iter()
        .find(|f| f.symbol.as_deref() == Some("aoti_torch_get_data_ptr"))
        .unwrap();
    assert!(
        unlinked
            .fix_hint
            .as_deref()
            .unwrap()
            .contains("libtorch_cpu.so defines it: link it (-ltorch_cpu)"),
        "{r}"
    );
}

#[test]
fn foreign_libraries_and_build_rpaths_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let dep = cc(
        dir.path(),
        "libfoo",
        "c",
        "int foo(void) { return 1; }\n",
        &[],
    );
    assert!(dep.ends_with("libfoo.so"));
    let l = format!("-L{}", dir.path().display());
    let rpath = format!("-Wl,-rpath,{}", dir.path().display());
    let so = cc(
        dir.path(),
        "ext",
        "c",
        "int foo(void); int g(void) { return foo(); }\n",
        &[&l, "-lfoo", &rpath],
    );
    let r = check_file(&so, &policy(true)).unwrap();
    let c = codes(&r);
    assert!(c.contains(&"library-not-allowed".to_string()), "{r}");
    assert!(c.contains(&"build-rpath".to_string()), "{r}");
    let text = r.to_string();
    assert!(
        text.contains("needs libfoo.so, which is neither loaded by torch"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(json["files"][0]["findings"][0]["severity"], "error");
}

#[test]
fn stable_abi_mode_flags_aten_symbols_and_newer_shims() {
    let dir = tempfile::tempdir().unwrap();
    let src = "extern \"C\" int torch_from_blob(void*); extern \"C\" int torch_library_impl(void*);\n\
               namespace at { void kforge_aten_call(); }\n\
               int g(void* p) { at::kforge_aten_call(); return torch_from_blob(p) + torch_library_impl(p); }\n";
    let so = cc(dir.path(), "stable", "cpp", src, &["-fno-gnu-unique"]);
    let mut p = policy(false);
    p.torch_stable_abi_version = Some((2, 10));
    let r = check_file(&so, &p).unwrap();
    assert_eq!(
        codes(&r),
        [
            "non-stable-torch-abi _ZN2at16kforge_aten_callEv",
            "torch-shim-too-new torch_from_blob"
        ]
    );
    p.torch_stable_abi_version = Some((2, 11));
    let r = check_file(&so, &p).unwrap();
    assert_eq!(
        codes(&r),
        ["non-stable-torch-abi _ZN2at16kforge_aten_callEv"]
    );
}

#[test]
fn project_discovery_and_variant_cpu() {
    let dir = tempfile::tempdir().unwrap();
    let variant = dir.path().join("build/torch211-cxx11-cpu-aarch64-linux");
    std::fs::create_dir_all(&variant).unwrap();
    std::fs::write(variant.join("metadata.json"), "{}").unwrap();
    cc(
        &variant,
        "_ops",
        "c",
        "int add(int a, int b) { return a + b; }\n",
        &[],
    );
    let options = Options {
        policy: policy(false),
    };
    let r = check_project(dir.path(), &options).unwrap();
    assert_eq!(r.files.len(), 1);
    // An x86_64 object in a variant named for aarch64.
    assert_eq!(codes(&r), ["wrong-machine"]);
    let r = check_variant_dir(&variant, &options).unwrap();
    assert!(r.has_errors());

    // A stable-ABI variant is checked for the stable ABI of its torch version.
    let stable = dir
        .path()
        .join("build/torch-stable-abi210-cpu-x86_64-linux");
    std::fs::create_dir_all(&stable).unwrap();
    std::fs::write(stable.join("metadata.json"), "{}").unwrap();
    let src =
        "extern \"C\" int torch_from_blob(void*); int g(void* p) { return torch_from_blob(p); }\n";
    cc(&stable, "_ops", "cpp", src, &["-fno-gnu-unique"]);
    let r = check_variant_dir(&stable, &options).unwrap();
    assert_eq!(codes(&r), ["torch-shim-too-new torch_from_blob"]);
    assert!(r.checks.contains("torch stable ABI 2.10"), "{}", r.checks);

    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let e = check_project(&empty, &options).unwrap_err().to_string();
    assert!(e.contains("no *.so file found"), "{e}");
}

#[test]
fn bad_torch_lib_is_an_error_not_a_silent_pass() {
    let dir = tempfile::tempdir().unwrap();
    let so = cc(dir.path(), "x", "c", "int x(void) { return 0; }\n", &[]);
    let mut p = policy(false);
    p.torch_lib = Some(dir.path().to_path_buf());
    let e = check_file(&so, &p).unwrap_err().to_string();
    assert!(e.contains("not a directory holding libc10.so"), "{e}");
}

#[test]
fn a_library_torch_loads_through_its_rpath_satisfies_the_extension() {
    // libcudart.so.13 sits in nvidia/cu13/lib, found by libtorch_cuda.so's $ORIGIN RPATH; the extension
    // names it without any search path, as kforge links it, and the loader reuses torch's copy.
    let dir = tempfile::tempdir().unwrap();
    let torch = torch_lib();
    let cudart = torch.join("../../nvidia/cu13/lib");
    assert!(
        cudart.join("libcudart.so.13").is_file(),
        "{}",
        cudart.display()
    );
    let l = format!("-L{}", cudart.display());
    let src = "int cudaGetLastError(void); int nope_kforge_cuda(void);\n\
               int g(void) { return cudaGetLastError() + nope_kforge_cuda(); }\n";
    let so = cc(dir.path(), "cu", "c", src, &[&l, "-l:libcudart.so.13"]);
    let r = check_file(&so, &policy(true)).unwrap();
    assert_eq!(codes(&r), ["unresolved-symbol nope_kforge_cuda"], "{r}");
    let f = &r.files[0].findings[0];
    assert!(
        f.fix_hint
            .as_deref()
            .unwrap()
            .contains("no library of the torch"),
        "{r}"
    );
}
