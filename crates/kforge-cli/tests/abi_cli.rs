//! `kforge abi` on real ELF fixtures compiled with gcc at test time.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch directory removed on drop (kforge-cli has no tempfile dev-dependency).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("kforge-abi-test-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cc(dir: &Path, name: &str, lang: &str, src: &str, extra: &[&str]) -> PathBuf {
    let src_path = dir.join(format!("{name}.{lang}"));
    std::fs::write(&src_path, src).unwrap();
    let out = dir.join(format!("{name}.so"));
    let compiler = if lang == "cpp" { "g++" } else { "gcc" };
    let status = Command::new(compiler)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(&src_path)
        .args(extra)
        .status()
        .unwrap();
    assert!(status.success(), "{compiler} failed for {name}");
    out
}

fn abi(args: &[&std::ffi::OsStr]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_kforge"))
        .arg("abi")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
    )
}

const SINGLE_THREADED: &str =
    "extern char __libc_single_threaded; int st(void) { return __libc_single_threaded; }\n";

#[test]
fn clean_library_passes() {
    let dir = TempDir::new();
    let so = cc(
        dir.path(),
        "clean",
        "c",
        "int add(int a, int b) { return a + b; }\n",
        &[],
    );
    let (ok, out) = abi(&[so.as_os_str()]);
    assert!(ok, "{out}");
    assert!(
        out.contains("ok: no ABI issues for manylinux_2_28"),
        "{out}"
    );
}

#[test]
fn glibc_2_32_symbol_fails_and_hidden_definition_fixes_it() {
    let dir = TempDir::new();
    let bad = cc(dir.path(), "st", "c", SINGLE_THREADED, &[]);
    let (ok, out) = abi(&[bad.as_os_str(), "--json".as_ref()]);
    assert!(!ok, "{out}");
    assert!(out.contains("__libc_single_threaded@GLIBC_2.32"), "{out}");
    assert!(out.contains("\"library\": \"libc.so.6\""), "{out}");
    assert!(out.contains("hidden definition"), "{out}");

    let fixed_src = format!(
        "{SINGLE_THREADED}__attribute__((visibility(\"hidden\"))) char __libc_single_threaded = 0;\n"
    );
    let fixed = cc(dir.path(), "st_fixed", "c", &fixed_src, &[]);
    let (ok, out) = abi(&[fixed.as_os_str()]);
    assert!(ok, "{out}");
}

#[test]
fn gnu_unique_symbol_fails() {
    let dir = TempDir::new();
    let src = "template <typename T> struct Counter { static int value; };\n\
               template <typename T> int Counter<T>::value = 0;\n\
               int bump() { return ++Counter<int>::value; }\n";
    let so = cc(dir.path(), "unique", "cpp", src, &["-fgnu-unique"]);
    let (ok, out) = abi(&[so.as_os_str()]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("[gnu-unique]") && out.contains("STB_GNU_UNIQUE"),
        "{out}"
    );
}

#[test]
fn non_abi3_python_symbol_fails() {
    let dir = TempDir::new();
    let src = "void *PyUnstable_Foo_Internal(void); void *PyModule_Create2(void *, int);\n\
               void *f(void) { PyModule_Create2(0, 3); return PyUnstable_Foo_Internal(); }\n";
    let so = cc(dir.path(), "py", "c", src, &[]);
    let (ok, out) = abi(&[so.as_os_str()]);
    assert!(!ok, "{out}");
    assert!(out.contains("[non-abi3] PyUnstable_Foo_Internal"), "{out}");
    assert!(!out.contains("PyModule_Create2 is not"), "{out}");
}

#[test]
fn unresolved_symbol_against_stub_torch_lib() {
    let dir = TempDir::new();
    let lib = dir.path().join("torchlib");
    std::fs::create_dir(&lib).unwrap();
    let stub = cc(
        dir.path(),
        "libc10",
        "c",
        "int c10_defined(void) { return 1; }\n",
        &[],
    );
    std::fs::rename(&stub, lib.join("libc10.so")).unwrap();
    let src = "int c10_defined(void); int c10_missing(void);\n\
               int g(void) { return c10_defined() + c10_missing(); }\n";
    let so = cc(dir.path(), "ext", "c", src, &[]);
    let (ok, out) = abi(&[so.as_os_str(), "--torch-lib".as_ref(), lib.as_os_str()]);
    assert!(!ok, "{out}");
    assert!(out.contains("[unresolved-symbol] c10_missing"), "{out}");
    assert!(!out.contains("c10_defined is"), "{out}");
}
