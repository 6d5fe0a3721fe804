//! `kforge init`: a new HF-format kernel project (edition 5 build.toml, torch-ext binding, a ReLU kernel
//! per backend, the python wrapper and a test), written all at once or not at all.

use std::path::{Path, PathBuf};

use crate::{Backend, valid_kernel_project_name, write_atomic};

/// Backends `kforge init` has templates for.
pub const INIT_BACKENDS: [Backend; 3] = [Backend::Cpu, Backend::Cuda, Backend::Rocm];

#[derive(Debug, Clone)]
pub struct InitOptions {
    /// `name` or `org/name` (the latter also sets `[general.hub] repo-id`).
    pub name: String,
    pub backends: Vec<Backend>,
    pub license: String,
    /// Replace files that already exist.
    pub overwrite: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum InitError {
    #[error(
        "invalid kernel name `{0}`: expected lowercase letters, digits and `-`, starting with a letter and not ending with `-` (e.g. `my-kernel` or `org/my-kernel`)"
    )]
    BadName(String),
    #[error("no backends given: pass e.g. `--backends cpu,cuda`")]
    NoBackends,
    #[error("`kforge init` has no template for backend {0}; use cpu, cuda and/or rocm")]
    NoTemplate(Backend),
    #[error("{} already exists; pass --overwrite to replace the generated files", .0.display())]
    Exists(PathBuf),
    #[error("cannot write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The files of a new project: (relative path, contents).
pub fn render(opts: &InitOptions) -> Result<Vec<(PathBuf, String)>, InitError> {
    let (repo_id, name) = match opts.name.split_once('/') {
        Some((org, n)) if !org.is_empty() && !n.contains('/') => (Some(opts.name.as_str()), n),
        Some(_) => return Err(InitError::BadName(opts.name.clone())),
        None => (None, opts.name.as_str()),
    };
    if !valid_kernel_project_name(name) {
        return Err(InitError::BadName(opts.name.clone()));
    }
    if opts.backends.is_empty() {
        return Err(InitError::NoBackends);
    }
    let mut backends = Vec::new();
    for &b in &opts.backends {
        if !INIT_BACKENDS.contains(&b) {
            return Err(InitError::NoTemplate(b));
        }
        if !backends.contains(&b) {
            backends.push(b);
        }
    }
    let py = name.replace('-', "_");
    let has = |b| backends.contains(&b);
    let gpu = has(Backend::Cuda) || has(Backend::Rocm);
    let fill = |t: &str| {
        t.replace("{{py}}", &py)
            .replace("{{name}}", name)
            .replace(
                "{{has_cpu}}",
                if has(Backend::Cpu) { "True" } else { "False" },
            )
            .replace("{{has_gpu}}", if gpu { "True" } else { "False" })
    };

    let mut toml = format!(
        "# A kernel project in Hugging Face's build.toml format (edition 5).\n\
         # `kforge check` validates it, `kforge build` builds build/<variant>/, `kforge variants` lists them.\n\
         [general]\nname = \"{name}\"\nversion = 1\nedition = 5\nlicense = \"{}\"\nbackends = [{}]\n",
        opts.license,
        backends
            .iter()
            .map(|b| format!("\"{b}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(repo) = repo_id {
        toml.push_str(&format!("\n[general.hub]\nrepo-id = \"{repo}\"\n"));
    }
    toml.push_str(
        "\n[torch]\nsrc = [\"torch-ext/torch_binding.cpp\", \"torch-ext/torch_binding.h\"]\n",
    );
    let mut impls = Vec::new();
    let mut files = Vec::new();
    if has(Backend::Cpu) {
        toml.push_str(&format!(
            "\n[kernel.{py}_cpu]\nbackend = \"cpu\"\ndepends = [\"torch\"]\nsrc = [\"{py}_cpu/{py}_cpu.cpp\"]\n"
        ));
        impls.push(format!(
            "#if defined(CPU_KERNEL)\n  ops.impl(\"{py}\", c10::kCPU, &{py});\n#endif"
        ));
        files.push((
            format!("{py}_cpu/{py}_cpu.cpp"),
            fill(include_str!("templates/kernel_cpu.cpp.tmpl")),
        ));
    }
    if gpu {
        impls.push(format!(
            "#if defined(CUDA_KERNEL) || defined(ROCM_KERNEL)\n  ops.impl(\"{py}\", c10::kCUDA, &{py});\n#endif"
        ));
        files.push((
            format!("{py}_cuda/{py}.cu"),
            fill(include_str!("templates/kernel.cu.tmpl")),
        ));
    }
    if has(Backend::Cuda) {
        toml.push_str(&format!(
            "\n# Without cuda-capabilities every arch of the CUDA toolkit is built; 9.0+PTX also runs on newer GPUs.\n\
             [kernel.{py}_cuda]\nbackend = \"cuda\"\ndepends = [\"torch\"]\ncuda-capabilities = [\"7.5\", \"8.0\", \"9.0+PTX\"]\nsrc = [\"{py}_cuda/{py}.cu\"]\n"
        ));
    }
    if has(Backend::Rocm) {
        toml.push_str(&format!(
            "\n# ROCm builds the same .cu source after hipify.\n\
             [kernel.{py}_rocm]\nbackend = \"rocm\"\ndepends = [\"torch\"]\nrocm-archs = [\"gfx90a\", \"gfx942\"]\nsrc = [\"{py}_cuda/{py}.cu\"]\n"
        ));
    }
    let binding =
        include_str!("templates/torch_binding.cpp.tmpl").replace("{{impls}}", &impls.join("\n"));
    files.extend([
        ("build.toml".to_string(), toml),
        ("torch-ext/torch_binding.cpp".to_string(), fill(&binding)),
        ("torch-ext/torch_binding.h".to_string(), fill(include_str!("templates/torch_binding.h.tmpl"))),
        (format!("torch-ext/{py}/__init__.py"), fill(include_str!("templates/__init__.py.tmpl"))),
        ("tests/__init__.py".to_string(), String::new()),
        (format!("tests/test_{py}.py"), fill(include_str!("templates/test_kernel.py.tmpl"))),
        (
            ".gitignore".to_string(),
            "# Outputs of `kforge build` and files it generates.\nbuild/\n__pycache__/\ntorch-ext/registration.h\ntorch-ext/*/_ops.py\n".to_string(),
        ),
        (
            "README.md".to_string(),
            format!(
                "# {name}\n\nElementwise ReLU as a torch custom op, for {}.\n\n\
                 ```sh\nkforge check      # validate build.toml and the layout\nkforge variants   # the build/<variant>/ directories and archs\n\
                 kforge build      # build them\npython -m pytest tests\n```\n\n\
                 ```python\nfrom kernels import get_local_kernel\n\n{py} = get_local_kernel(\"path/to/{name}\")\n{py}.{py}(x)\n```\n",
                backends.iter().map(|b| b.as_str()).collect::<Vec<_>>().join(", ")
            ),
        ),
    ]);
    Ok(files
        .into_iter()
        .map(|(p, c)| (PathBuf::from(p), c))
        .collect())
}

/// Write a new project into `dir`. A missing `dir` is assembled in a temporary sibling and renamed into
/// place, so an interrupted init leaves nothing behind; into an existing directory each file is
/// written atomically, and existing files are kept unless `overwrite`.
pub fn init(dir: &Path, opts: &InitOptions) -> Result<Vec<PathBuf>, InitError> {
    let files = render(opts)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| InitError::Io { path, source }
    };
    if dir.exists() {
        if !opts.overwrite
            && let Some((p, _)) = files.iter().find(|(p, _)| dir.join(p).exists())
        {
            return Err(InitError::Exists(dir.join(p)));
        }
        for (p, content) in &files {
            let full = dir.join(p);
            std::fs::create_dir_all(full.parent().expect("files are inside dir"))
                .map_err(io(&full))?;
            write_atomic(&full, content.as_bytes()).map_err(io(&full))?;
        }
    } else {
        let parent = dir
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(io(parent))?;
        let leaf = dir
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        let tmp = parent.join(format!(".{leaf}.kforge-init-{}", std::process::id()));
        let result = (|| {
            for (p, content) in &files {
                let full = tmp.join(p);
                std::fs::create_dir_all(full.parent().expect("files are inside dir"))
                    .map_err(io(&full))?;
                std::fs::write(&full, content).map_err(io(&full))?;
            }
            std::fs::rename(&tmp, dir).map_err(io(dir))
        })();
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
        }
        result?;
    }
    Ok(files.into_iter().map(|(p, _)| p).collect())
}
