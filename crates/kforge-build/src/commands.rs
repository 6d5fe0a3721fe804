//! Compiler and linker command lines. Everything that reaches the output is fixed by the inputs:
//! sources are named relative to the project root (the working directory), the cache and Python
//! include paths are mapped to constants, and nvcc gets a location-independent source name.

use std::path::{Path, PathBuf};

use kforge_manifest::Backend;
use kforge_toolchain::Toolchain;

use crate::plan::{Lang, Unit};

/// A command without its output arguments (`-o`, `-MF`): this is what the action cache keys on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    pub program: PathBuf,
    pub args: Vec<String>,
}

impl Command {
    /// Shell-like text for logs and error messages.
    pub fn display_with(&self, extra: &[String]) -> String {
        std::iter::once(self.program.display().to_string())
            .chain(self.args.iter().chain(extra).map(|a| quote(a)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_=./,:+@%[]".contains(&b))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// What every compile of one variant shares.
pub struct VariantContext<'a> {
    pub toolchain: &'a Toolchain,
    pub backend: Backend,
    pub ops_name: &'a str,
    /// Holds the generated `registration.h` and [`GLIBC_COMPAT_H`].
    pub gen_dir: &'a Path,
}

/// The generated header force-included into every compile (see `generate::glibc_compat_h`).
pub const GLIBC_COMPAT_H: &str = "kforge_glibc_compat.h";

/// Where outputs say the cache and the Python headers are, whatever their real location.
const CACHE_MAP: &str = "/kforge-cache";
const PYTHON_MAP: &str = "/kforge-python-include";

fn cxx_standard(tc: &Toolchain) -> &'static str {
    // kernel-builder: C++17 below torch 2.12, C++20 from 2.12 on.
    if tc.set.torch_version() >= (2, 12) {
        "-std=c++20"
    } else {
        "-std=c++17"
    }
}

/// Flags shared by g++ and nvcc (nvcc passes them on to the host compiler or understands them).
fn common_flags(ctx: &VariantContext, unit: &Unit) -> Vec<String> {
    let tc = ctx.toolchain;
    let mut f = vec![
        cxx_standard(tc).to_string(),
        "-O3".into(),
        "-DNDEBUG".into(),
        "-D_GLIBCXX_USE_CXX11_ABI=1".into(),
        format!("-DTORCH_EXTENSION_NAME={}", ctx.ops_name),
        // The module is abi3 (`.abi3.so`): only the 3.9 limited API.
        "-DPy_LIMITED_API=0x03090000".into(),
    ];
    match ctx.backend {
        Backend::Cuda => f.extend(["-DUSE_CUDA=1".into(), "-DCUDA_KERNEL".into()]),
        _ => f.push("-DCPU_KERNEL".into()),
    }
    f.push("-include".into());
    f.push(ctx.gen_dir.join(GLIBC_COMPAT_H).display().to_string());
    for inc in &unit.includes {
        f.push(format!("-I{}", inc.display()));
    }
    f.push(format!("-I{}", ctx.gen_dir.display()));
    for inc in &tc.torch_includes {
        f.push("-isystem".into());
        f.push(inc.display().to_string());
    }
    if let Some(cuda) = &tc.cuda_root {
        f.push("-isystem".into());
        f.push(cuda.join("include").display().to_string());
    }
    f.push("-isystem".into());
    f.push(tc.python.include.display().to_string());
    f
}

fn host_flags(tc: &Toolchain) -> Vec<String> {
    vec![
        "-fPIC".into(),
        // Statics must not be shared between kernels loaded into one process (kernels#740).
        "-fno-gnu-unique".into(),
        format!("-ffile-prefix-map={}={CACHE_MAP}", tc.cache_root.display()),
        format!(
            "-ffile-prefix-map={}={PYTHON_MAP}",
            tc.python.include.display()
        ),
    ]
}

/// `-gencode` pairs for CUDA capabilities such as "8.0", "9.0a", "12.1+PTX".
pub fn gencode_flags(archs: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for arch in archs {
        let (base, ptx) = match arch.strip_suffix("+PTX") {
            Some(b) => (b, true),
            None => (arch.as_str(), false),
        };
        let code: String = base.chars().filter(|c| *c != '.').collect();
        out.push(format!("-gencode=arch=compute_{code},code=sm_{code}"));
        if ptx {
            out.push(format!("-gencode=arch=compute_{code},code=compute_{code}"));
        }
    }
    out
}

/// The command that compiles `unit` (run with the project root as working directory).
pub fn compile(ctx: &VariantContext, unit: &Unit) -> Command {
    let tc = ctx.toolchain;
    let source = unit.source.display().to_string();
    match unit.lang {
        Lang::Cxx => {
            let mut args = common_flags(ctx, unit);
            args.extend(host_flags(tc));
            args.extend(unit.flags.iter().cloned());
            args.extend(["-c".into(), source]);
            Command {
                program: tc.gxx.path.clone(),
                args,
            }
        }
        Lang::Cuda => {
            let mut args = vec!["-ccbin".to_string(), tc.gxx.path.display().to_string()];
            args.extend(common_flags(ctx, unit));
            for h in host_flags(tc) {
                args.extend(["-Xcompiler".into(), h]);
            }
            // torch's COMMON_NVCC_FLAGS as kernel-builder uses them for CUDA >= 11.8.
            args.extend(["--expt-relaxed-constexpr".into(), "-DENABLE_FP8".into()]);
            args.extend(gencode_flags(&unit.archs));
            // nvcc names anonymous-namespace symbols after the real path of the source; name it by
            // kernel and relative path instead, so the object does not depend on the checkout location.
            let orig = format!("--orig_src_path_name={}/{source}", ctx.ops_name);
            args.extend(["-Xcudafe".into(), orig.clone(), "-Xcicc".into(), orig]);
            args.extend(unit.flags.iter().cloned());
            args.extend(["-c".into(), source]);
            Command {
                program: tc.nvcc().unwrap_or_else(|| PathBuf::from("nvcc")),
                args,
            }
        }
    }
}

/// The command that compiles the generated `__libc_single_threaded` stub at `source` (absolute).
pub fn compile_stub(tc: &Toolchain, source: &Path) -> Command {
    let mut args = vec!["-O2".into()];
    args.extend(host_flags(tc));
    args.extend(["-c".into(), source.display().to_string()]);
    Command {
        program: tc.gxx.path.clone(),
        args,
    }
}

/// Arguments that make the compile write `output` and its make-style depfile `depfile`.
pub fn compile_outputs(output: &Path, depfile: &Path) -> Vec<String> {
    vec![
        "-MD".into(),
        "-MF".into(),
        depfile.display().to_string(),
        "-o".into(),
        output.display().to_string(),
    ]
}

/// The command that links `objects` (in this order) into the extension module.
/// `openmp`: some source was compiled with `-fopenmp`, so the OpenMP runtime is linked (its soname,
/// libgomp.so.1, is the one torch already loads).
pub fn link(tc: &Toolchain, backend: Backend, objects: &[PathBuf], openmp: bool) -> Command {
    let mut args = vec!["-shared".to_string()];
    if openmp {
        args.push("-fopenmp".into());
    }
    args.extend(objects.iter().map(|o| o.display().to_string()));
    args.extend([
        // Only libraries actually used end up in DT_NEEDED; local symbols (file names of nvcc's
        // temporary files among them) are dropped so that the bytes depend on the inputs only.
        "-Wl,--as-needed".into(),
        "-Wl,-x".into(),
        format!("-L{}", tc.torch_lib.display()),
        "-lc10".into(),
        "-ltorch".into(),
        "-ltorch_cpu".into(),
    ]);
    if backend == Backend::Cuda {
        args.extend(["-lc10_cuda".into(), "-ltorch_cuda".into()]);
        if let Some(cuda) = &tc.cuda_root {
            args.push(format!("-L{}", cuda.join("lib").display()));
        }
        // Dynamic: the static libcudart pulls in GLIBC_2.34.
        args.push("-l:libcudart.so.13".into());
    }
    Command {
        program: tc.gxx.path.clone(),
        args,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gencode_covers_arch_suffixes_and_ptx() {
        let archs: Vec<String> = ["8.0", "9.0a", "12.1+PTX"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            gencode_flags(&archs),
            [
                "-gencode=arch=compute_80,code=sm_80",
                "-gencode=arch=compute_90a,code=sm_90a",
                "-gencode=arch=compute_121,code=sm_121",
                "-gencode=arch=compute_121,code=compute_121",
            ]
        );
    }

    #[test]
    fn quoting_keeps_plain_args_and_quotes_others() {
        let c = Command {
            program: "g++".into(),
            args: vec!["-DX=1".into(), "a b".into(), "it's".into()],
        };
        assert_eq!(c.display_with(&[]), r"g++ -DX=1 'a b' 'it'\''s'");
    }
}
