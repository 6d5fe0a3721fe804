//! Runs the compile and link actions of a plan in parallel (`-j`), through the action cache.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use indicatif::{ProgressBar, ProgressStyle};
use kforge_manifest::{Backend, Project};
use kforge_toolchain::{Cache, Toolchain, prepare};

use crate::BuildOptions;
use crate::actions::{ActionCache, Dep, key_of};
use crate::commands::GLIBC_COMPAT_H;
use crate::commands::{self, Command, VariantContext};
use crate::error::{BuildError, io_err};
use crate::generate::{REGISTRATION_H, SINGLE_THREADED_CPP, glibc_compat_h};
use crate::plan::{Plan, Unit, VariantKind};

/// Bumped when the meaning of cached outputs changes.
const ACTION_VERSION: &str = "kforge-build-actions-1";

/// `SOURCE_DATE_EPOCH` for compilers when the caller set none: no wall-clock time reaches the output.
const DEFAULT_SOURCE_DATE_EPOCH: &str = "315532800";

/// The linked extension of one arch variant.
#[derive(Debug, Clone)]
pub struct Built {
    pub library: PathBuf,
    pub toolchain: Toolchain,
    pub actions_run: usize,
    pub actions_cached: usize,
}

enum Job<'a> {
    Compile { variant: usize, unit: &'a Unit },
    Stub { variant: usize },
}

struct Done {
    output: PathBuf,
    ran: bool,
}

/// Compile every unit of every arch variant, then link each variant. Noarch variants yield None.
pub fn compile_and_link(
    project: &Project,
    plan: &Plan,
    options: &BuildOptions,
) -> Result<Vec<Option<Built>>, BuildError> {
    let cache = &options.cache;
    let mut toolchains: BTreeMap<usize, Toolchain> = BTreeMap::new();
    let mut prepared: Vec<(String, Toolchain)> = Vec::new();
    for (i, v) in plan.variants.iter().enumerate() {
        if let VariantKind::Arch { set, .. } = &v.kind {
            let key = set.variant_name();
            let tc = match prepared.iter().find(|(k, _)| *k == key) {
                Some((_, tc)) => tc.clone(),
                None => {
                    let tc = prepare(cache, set)?;
                    prepared.push((key, tc.clone()));
                    tc
                }
            };
            toolchains.insert(i, tc);
        }
    }
    if toolchains.is_empty() {
        return Ok(plan.variants.iter().map(|_| None).collect());
    }
    let gen_dir = generated_dir(cache)?;
    let actions = ActionCache::new(cache.actions_dir());
    let runner = Runner {
        root: &project.root,
        cache,
        actions: &actions,
        gen_dir: &gen_dir,
        plan,
        toolchains: &toolchains,
        progress: progress_bar(options.progress),
    };

    let mut jobs = Vec::new();
    for (i, v) in plan.variants.iter().enumerate() {
        if let VariantKind::Arch { units, .. } = &v.kind {
            jobs.extend(units.iter().map(|unit| Job::Compile { variant: i, unit }));
            jobs.push(Job::Stub { variant: i });
        }
    }
    let link_count = toolchains.len();
    runner.progress.set_length((jobs.len() + link_count) as u64);
    let objects = run_parallel(options.jobs, &jobs, |job| runner.compile(job))?;

    // Link inputs in plan order: units (sorted by component, source), then the stub.
    let mut per_variant: BTreeMap<usize, (Vec<PathBuf>, usize, usize)> = BTreeMap::new();
    for (job, done) in jobs.iter().zip(objects) {
        let variant = match job {
            Job::Compile { variant, .. } | Job::Stub { variant } => *variant,
        };
        let entry = per_variant.entry(variant).or_default();
        entry.0.push(done.output);
        if done.ran {
            entry.1 += 1;
        } else {
            entry.2 += 1;
        }
    }
    let links: Vec<(usize, Vec<PathBuf>)> = per_variant
        .iter()
        .map(|(v, (objs, _, _))| (*v, objs.clone()))
        .collect();
    let libraries = run_parallel(options.jobs, &links, |(v, objs)| runner.link(*v, objs))?;
    runner.progress.finish_and_clear();

    let mut out: Vec<Option<Built>> = plan.variants.iter().map(|_| None).collect();
    for ((v, _), lib) in links.iter().zip(libraries) {
        let (_, run, cached) = per_variant[v];
        out[*v] = Some(Built {
            library: lib.output,
            toolchain: toolchains[v].clone(),
            actions_run: run + usize::from(lib.ran),
            actions_cached: cached + usize::from(!lib.ran),
        });
    }
    Ok(out)
}

fn progress_bar(show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    if let Ok(style) =
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] [{bar:30}] {pos}/{len} {msg}")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// `<cache>/gen/<hash>/` with `registration.h` and the single-threaded stub, written once.
fn generated_dir(cache: &Cache) -> Result<PathBuf, BuildError> {
    let compat = glibc_compat_h();
    let hash = key_of(&[
        ("registration.h", REGISTRATION_H),
        ("stub", SINGLE_THREADED_CPP),
        ("glibc-compat", &compat),
    ]);
    let dir = cache.root().join("gen").join(&hash[..16]);
    if dir.join("registration.h").is_file() {
        return Ok(dir);
    }
    let work = cache.temp_dir("gen")?;
    fs::write(work.join("registration.h"), REGISTRATION_H).map_err(io_err(&work))?;
    fs::write(work.join("single_threaded.cpp"), SINGLE_THREADED_CPP).map_err(io_err(&work))?;
    fs::write(work.join(GLIBC_COMPAT_H), compat).map_err(io_err(&work))?;
    let parent = cache.root().join("gen");
    fs::create_dir_all(&parent).map_err(io_err(&parent))?;
    if fs::rename(&work, &dir).is_err() && !dir.join("registration.h").is_file() {
        let _ = fs::remove_dir_all(&work);
        return Err(BuildError::Io {
            path: dir,
            source: std::io::Error::other("could not place generated files"),
        });
    }
    let _ = fs::remove_dir_all(&work);
    Ok(dir)
}

/// Run `f` over `items` on up to `jobs` threads. After the first failure no new item starts;
/// every failure of the items already running is reported.
fn run_parallel<T: Sync, R: Send>(
    jobs: usize,
    items: &[T],
    f: impl Fn(&T) -> Result<R, BuildError> + Sync,
) -> Result<Vec<R>, BuildError> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<R>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    let errors: Mutex<Vec<BuildError>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    if i >= items.len() || failed.load(Ordering::SeqCst) {
                        break;
                    }
                    match f(&items[i]) {
                        Ok(r) => results.lock().expect("results")[i] = Some(r),
                        Err(e) => {
                            failed.store(true, Ordering::SeqCst);
                            errors.lock().expect("errors").push(e);
                        }
                    }
                }
            });
        }
    });
    let mut errors = errors.into_inner().expect("errors");
    if errors.len() == 1 {
        return Err(errors.remove(0));
    }
    if !errors.is_empty() {
        return Err(BuildError::Many(errors));
    }
    Ok(results
        .into_inner()
        .expect("results")
        .into_iter()
        .map(|r| r.expect("every item ran"))
        .collect())
}

struct Runner<'a> {
    root: &'a Path,
    cache: &'a Cache,
    actions: &'a ActionCache,
    gen_dir: &'a Path,
    plan: &'a Plan,
    toolchains: &'a BTreeMap<usize, Toolchain>,
    progress: ProgressBar,
}

impl Runner<'_> {
    fn compile(&self, job: &Job) -> Result<Done, BuildError> {
        let (variant, command, source, label) = match job {
            Job::Compile { variant, unit } => {
                let v = &self.plan.variants[*variant];
                let ctx = VariantContext {
                    toolchain: &self.toolchains[variant],
                    backend: v.backend,
                    ops_name: &v.ops_name,
                    gen_dir: self.gen_dir,
                };
                let cmd = commands::compile(&ctx, unit);
                (
                    *variant,
                    cmd,
                    self.root.join(&unit.source),
                    format!("compiling {}", unit.source.display()),
                )
            }
            Job::Stub { variant } => {
                let source = self.gen_dir.join("single_threaded.cpp");
                let cmd = commands::compile_stub(&self.toolchains[variant], &source);
                (
                    *variant,
                    cmd,
                    source,
                    "compiling the __libc_single_threaded stub".into(),
                )
            }
        };
        let v = &self.plan.variants[variant];
        let tc = &self.toolchains[&variant];
        let source_hash = self.actions.file_hash(&source).map_err(io_err(&source))?;
        let key = key_of(&[
            ("version", ACTION_VERSION),
            ("toolchain", &tc.id),
            ("program", &command.program.display().to_string()),
            ("args", &command.args.join("\0")),
            ("source", &source_hash),
        ]);
        if let Some(output) = self.actions.lookup(&key, self.root) {
            self.progress.inc(1);
            return Ok(Done { output, ran: false });
        }
        self.progress
            .set_message(format!("{} [{}]", label, short_name(&v.name)));
        let work = self.cache.temp_dir("cc")?;
        let result = (|| {
            let output = work.join("out.o");
            let depfile = work.join("out.d");
            let extra = commands::compile_outputs(&output, &depfile);
            self.run(&v.name, &label, &command, &extra)?;
            let text = fs::read_to_string(&depfile).map_err(io_err(&depfile))?;
            let deps = self.deps(crate::actions::parse_depfile(&text), tc)?;
            self.actions.store(&key, &work, &output, &deps)
        })();
        let _ = fs::remove_dir_all(&work);
        self.progress.inc(1);
        result.map(|output| Done { output, ran: true })
    }

    fn link(&self, variant: usize, objects: &[PathBuf]) -> Result<Done, BuildError> {
        let v = &self.plan.variants[variant];
        let tc = &self.toolchains[&variant];
        let openmp = match &v.kind {
            VariantKind::Arch { units, .. } => units
                .iter()
                .any(|u| u.flags.iter().any(|f| f == "-fopenmp")),
            VariantKind::Noarch => false,
        };
        let command = commands::link(tc, v.backend, objects, openmp);
        let mut parts = vec![
            ("version", ACTION_VERSION.to_string()),
            ("toolchain", tc.id.clone()),
            ("program", command.program.display().to_string()),
            ("args", command.args.join("\0")),
        ];
        for o in objects {
            parts.push(("object", self.actions.file_hash(o).map_err(io_err(o))?));
        }
        let parts: Vec<(&str, &str)> = parts.iter().map(|(a, b)| (*a, b.as_str())).collect();
        let key = key_of(&parts);
        if let Some(output) = self.actions.lookup(&key, self.root) {
            self.progress.inc(1);
            return Ok(Done { output, ran: false });
        }
        let label = format!("linking {}.abi3.so", v.ops_name);
        self.progress
            .set_message(format!("{label} [{}]", short_name(&v.name)));
        let work = self.cache.temp_dir("ld")?;
        let result = (|| {
            let output = work.join("out.so");
            let extra = vec!["-o".to_string(), output.display().to_string()];
            self.run(&v.name, &label, &command, &extra)?;
            self.actions.store(&key, &work, &output, &[])
        })();
        let _ = fs::remove_dir_all(&work);
        self.progress.inc(1);
        result.map(|output| Done { output, ran: true })
    }

    /// Run one command in the project root; its output is shown on failure (and warnings on success).
    fn run(
        &self,
        variant: &str,
        label: &str,
        command: &Command,
        extra: &[String],
    ) -> Result<(), BuildError> {
        let shown = command.display_with(extra);
        tracing::info!("[{variant}] {shown}");
        let epoch = std::env::var("SOURCE_DATE_EPOCH")
            .unwrap_or_else(|_| DEFAULT_SOURCE_DATE_EPOCH.to_string());
        let output = std::process::Command::new(&command.program)
            .args(&command.args)
            .args(extra)
            .current_dir(self.root)
            .env("SOURCE_DATE_EPOCH", epoch)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| BuildError::Action {
                variant: variant.to_string(),
                action: label.to_string(),
                status: format!("cannot start {}: {e}", command.program.display()),
                output: String::new(),
                command: shown.clone(),
            })?;
        let mut text = String::from_utf8_lossy(&output.stdout).to_string();
        text.push_str(&String::from_utf8_lossy(&output.stderr));
        if !output.status.success() {
            return Err(BuildError::Action {
                variant: variant.to_string(),
                action: label.to_string(),
                status: output.status.to_string(),
                output: text.trim_end().to_string(),
                command: shown,
            });
        }
        if !text.trim().is_empty() {
            self.progress
                .suspend(|| eprintln!("[{variant}] {label}:\n{}", text.trim_end()));
        }
        Ok(())
    }

    /// Dependencies worth checking on lookup: files outside the pinned toolchain, the Python headers and
    /// the system (those are covered by the toolchain id).
    fn deps(&self, paths: Vec<String>, tc: &Toolchain) -> Result<Vec<Dep>, BuildError> {
        let mut deps = Vec::new();
        for p in paths {
            let path = Path::new(&p);
            if path.is_absolute()
                && (path.starts_with(&tc.cache_root)
                    || path.starts_with(&tc.python.include)
                    || path.starts_with("/usr"))
            {
                continue;
            }
            let full = self.root.join(path);
            let sha256 = self.actions.file_hash(&full).map_err(io_err(&full))?;
            deps.push(Dep { path: p, sha256 });
        }
        Ok(deps)
    }
}

/// "torch211-cxx11-cu130-x86_64-linux" → "cu130", for compact progress messages.
fn short_name(variant: &str) -> &str {
    variant.split('-').nth(2).unwrap_or(variant)
}

/// The library directory the ABI check resolves undefined symbols against: torch's libs plus, for CUDA,
/// the CUDA runtime (a directory of symlinks in the cache, made once per toolchain).
pub fn abi_lib_dir(cache: &Cache, tc: &Toolchain, backend: Backend) -> Result<PathBuf, BuildError> {
    let Some(cuda) = tc.cuda_root.as_ref().filter(|_| backend == Backend::Cuda) else {
        return Ok(tc.torch_lib.clone());
    };
    let dir = cache.root().join("abi-libs").join(&tc.id);
    if dir.is_dir() {
        return Ok(dir);
    }
    let work = cache.temp_dir("abi-libs")?;
    for src_dir in [&tc.torch_lib, &cuda.join("lib")] {
        for e in fs::read_dir(src_dir).map_err(io_err(src_dir))?.flatten() {
            let link = work.join(e.file_name());
            if !link.exists() {
                std::os::unix::fs::symlink(e.path(), &link).map_err(io_err(&link))?;
            }
        }
    }
    let parent = cache.root().join("abi-libs");
    fs::create_dir_all(&parent).map_err(io_err(&parent))?;
    if fs::rename(&work, &dir).is_err() {
        let _ = fs::remove_dir_all(&work);
    }
    Ok(dir)
}
