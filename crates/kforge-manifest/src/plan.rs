//! Which variants a project yields for a set of build targets, and the archs each component gets:
//! HF's rules (backend filter, torch/CUDA bounds, noarch fallback, stable ABI, tvm-ffi, arch intersection).

use std::collections::BTreeSet;

use serde::Serialize;

use crate::{Backend, Compute, Framework, Manifest, Variant, Version, cuda_archs, rocm_archs};

/// One (torch, compute, platform) combination a builder can produce.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildTarget {
    pub torch: Version,
    pub compute: Compute,
    /// `x86_64` or `aarch64`.
    pub cpu: String,
    /// `linux`, `darwin` or `windows`.
    pub os: String,
    /// The tvm-ffi version this target carries, if any.
    pub tvm_ffi: Option<Version>,
}

impl BuildTarget {
    pub fn backend(&self) -> Backend {
        compute_backend(&self.compute)
    }

    /// The HF torch variant name of this target (`torch211-cxx11-cu130-x86_64-linux`).
    pub fn torch_variant(&self) -> Variant {
        Variant::Torch {
            torch: self.torch.clone(),
            cxx11: (self.os == "linux").then_some(true),
            compute: self.compute.clone(),
            cpu: self.cpu.clone(),
            os: self.os.clone(),
        }
    }
}

pub fn compute_backend(c: &Compute) -> Backend {
    match c {
        Compute::Cpu => Backend::Cpu,
        Compute::Metal => Backend::Metal,
        Compute::Cuda(_) => Backend::Cuda,
        Compute::Rocm(_) => Backend::Rocm,
        Compute::Xpu(_) => Backend::Xpu,
    }
}

/// One compiled component of a variant with the archs it is built for (CUDA/ROCm).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedComponent {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archs: Option<Vec<String>>,
}

/// A component left out of a variant, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub component: String,
    pub reason: String,
}

/// One `build/<variant>/` directory the project yields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedVariant {
    pub variant: String,
    pub backend: Backend,
    /// `arch`, `stable-abi`, `tvm-ffi` or `noarch`.
    pub kind: &'static str,
    /// `metadata.json` `backend.archs`: the union over components (or the noarch table), sorted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archs: Option<Vec<String>>,
    pub components: Vec<PlannedComponent>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<Skipped>,
    /// Set when the variant cannot be built (e.g. an empty arch intersection).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A backend of `general.backends` that yields no variant with the given targets, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unplanned {
    pub backend: Backend,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub variants: Vec<PlannedVariant>,
    pub unplanned: Vec<Unplanned>,
}

impl Plan {
    /// Pretty JSON: `{"variants": [...], "unplanned": [...]}`.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a plan serializes")
    }
}

/// HF's default version bounds when a project sets none (inclusive).
const DEFAULT_TORCH: (&[u32], &[u32]) = (&[2, 0], &[99, 9]);
const DEFAULT_CUDA: (&[u32], &[u32]) = (&[11, 8], &[99, 9]);

fn in_bounds(
    v: &Version,
    min: Option<&Version>,
    max: Option<&Version>,
    default: (&[u32], &[u32]),
) -> bool {
    let lo = min.cloned().unwrap_or_else(|| Version::new(default.0));
    let hi = max.cloned().unwrap_or_else(|| Version::new(default.1));
    *v >= lo && *v <= hi
}

/// The variants `manifest` yields for `targets`, in target order (noarch variants last).
pub fn plan(manifest: &Manifest, targets: &[BuildTarget]) -> Plan {
    let mut variants: Vec<PlannedVariant> = Vec::new();
    let mut unplanned = Vec::new();
    let noarch = manifest.noarch_backends();
    for &backend in &manifest.general.backends {
        if noarch.contains(&backend) {
            variants.push(noarch_variant(manifest, backend));
            continue;
        }
        let mut reasons = BTreeSet::new();
        let before = variants.len();
        for t in targets.iter().filter(|t| t.backend() == backend) {
            match arch_variant(manifest, t) {
                Ok(Some(v)) => {
                    if !variants.iter().any(|x| x.variant == v.variant) {
                        variants.push(v);
                    }
                }
                Ok(None) => {}
                Err(why) => {
                    reasons.insert(why);
                }
            }
        }
        if variants.len() == before {
            let reason = if reasons.is_empty() {
                format!("no configured build target has backend {backend}")
            } else {
                reasons.into_iter().collect::<Vec<_>>().join("; ")
            };
            unplanned.push(Unplanned { backend, reason });
        }
    }
    // Arch variants in target order, noarch after them.
    variants.sort_by_key(|v| v.kind == "noarch");
    Plan {
        variants,
        unplanned,
    }
}

fn noarch_variant(manifest: &Manifest, backend: Backend) -> PlannedVariant {
    let archs = match (&manifest.framework, backend) {
        (Framework::TorchNoarch(n), Backend::Cuda) => n.cuda_capabilities.clone(),
        (Framework::TorchNoarch(n), Backend::Rocm) => n.rocm_archs.clone(),
        _ => None,
    };
    PlannedVariant {
        variant: Variant::Noarch { backend }.to_string(),
        backend,
        kind: "noarch",
        archs: archs.map(sorted),
        components: Vec::new(),
        skipped: Vec::new(),
        error: None,
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// `Ok(None)`: the target does not apply; `Err`: why it is filtered out.
fn arch_variant(manifest: &Manifest, t: &BuildTarget) -> Result<Option<PlannedVariant>, String> {
    let backend = t.backend();
    let (name, kind) = match &manifest.framework {
        Framework::Torch(ext) => {
            if !in_bounds(
                &t.torch,
                ext.minver.as_ref(),
                ext.maxver.as_ref(),
                DEFAULT_TORCH,
            ) {
                return Err(format!(
                    "torch {} is outside [torch] minver/maxver",
                    t.torch
                ));
            }
            match ext.stable_abi.as_ref().and_then(|s| s.for_backend(backend)) {
                Some(abi) => {
                    if t.torch < *abi {
                        return Err(format!("torch {} is older than stable-abi {abi}", t.torch));
                    }
                    let v = Variant::StableAbi {
                        torch: abi.clone(),
                        compute: t.compute.clone(),
                        cpu: t.cpu.clone(),
                        os: t.os.clone(),
                    };
                    (v.to_string(), "stable-abi")
                }
                None => (t.torch_variant().to_string(), "arch"),
            }
        }
        Framework::TvmFfi(_) => {
            let Some(tvm) = &t.tvm_ffi else {
                return Err("no build target with tvm-ffi for this backend".to_string());
            };
            let v = Variant::TvmFfi {
                tvm_ffi: tvm.clone(),
                compute: t.compute.clone(),
                cpu: t.cpu.clone(),
                os: t.os.clone(),
            };
            (v.to_string(), "tvm-ffi")
        }
        Framework::TorchNoarch(_) => return Ok(None),
    };
    if let Compute::Cuda(cuda) = &t.compute {
        let c = manifest.general.cuda.as_ref();
        if !in_bounds(
            cuda,
            c.and_then(|c| c.minver.as_ref()),
            c.and_then(|c| c.maxver.as_ref()),
            DEFAULT_CUDA,
        ) {
            return Err(format!(
                "CUDA {cuda} is outside [general.cuda] minver/maxver"
            ));
        }
    }
    let mut components = Vec::new();
    let mut skipped = Vec::new();
    let mut union: BTreeSet<String> = BTreeSet::new();
    let mut error = None;
    for (cname, k) in manifest.kernels_for(backend) {
        let archs = match &t.compute {
            Compute::Cuda(cuda) => {
                if let Some(min) = k.cuda_minver.as_ref().filter(|m| cuda < *m) {
                    skipped.push(Skipped {
                        component: cname.clone(),
                        reason: format!("cuda-minver {min} is newer than CUDA {cuda}"),
                    });
                    continue;
                }
                match cuda_archs(k.cuda_capabilities.as_deref(), cuda) {
                    Ok(a) => Some(a),
                    Err(e) => {
                        error.get_or_insert_with(|| format!("[kernel.{cname}]: {e}"));
                        None
                    }
                }
            }
            Compute::Rocm(_) => match rocm_archs(k.rocm_archs.as_deref()) {
                Ok(a) => Some(a),
                Err(e) => {
                    error.get_or_insert_with(|| format!("[kernel.{cname}]: {e}"));
                    None
                }
            },
            _ => None,
        };
        union.extend(archs.iter().flatten().cloned());
        components.push(PlannedComponent {
            name: cname.clone(),
            archs,
        });
    }
    let archs = matches!(t.compute, Compute::Cuda(_) | Compute::Rocm(_))
        .then(|| union.into_iter().collect::<Vec<_>>())
        .filter(|a| !a.is_empty());
    Ok(Some(PlannedVariant {
        variant: name,
        backend,
        kind,
        archs,
        components,
        skipped,
        error,
    }))
}

fn target(torch: &[u32], compute: Compute, platform: &str, tvm: bool) -> BuildTarget {
    let (cpu, os) = platform.split_once('-').expect("cpu-os");
    BuildTarget {
        torch: Version::new(torch),
        compute,
        cpu: cpu.to_string(),
        os: os.to_string(),
        tvm_ffi: tvm.then(|| Version::new(&[0, 1])),
    }
}

/// Hugging Face's current build matrix (reference §3.2, Aug 2026): Torch 2.12 and 2.13.
pub fn hf_build_matrix() -> Vec<BuildTarget> {
    let cu = |v: &[u32]| Compute::Cuda(Version::new(v));
    let mut out = Vec::new();
    for torch in [[2u32, 12], [2, 13]] {
        let t12 = torch == [2, 12];
        for p in ["x86_64-linux", "aarch64-linux"] {
            out.push(target(&torch, Compute::Cpu, p, t12 && p == "x86_64-linux"));
            for c in [[12u32, 6], [13, 0], [13, 2]] {
                let tvm = p == "x86_64-linux" && (t12 || c == [13, 2]);
                out.push(target(&torch, cu(&c), p, tvm));
            }
        }
        out.push(target(&torch, Compute::Cpu, "aarch64-darwin", false));
        out.push(target(&torch, Compute::Metal, "aarch64-darwin", false));
        for r in [[7u32, 1], [7, 2]] {
            out.push(target(
                &torch,
                Compute::Rocm(Version::new(&r)),
                "x86_64-linux",
                false,
            ));
        }
        let xpu = if t12 {
            Version::new(&[2025, 3])
        } else {
            Version::new(&[2026, 0])
        };
        out.push(target(&torch, Compute::Xpu(xpu), "x86_64-linux", t12));
    }
    out
}
