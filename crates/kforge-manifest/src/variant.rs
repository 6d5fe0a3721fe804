//! HF variant directory names (parse/print byte for byte), CUDA/ROCm arch intersection, ops names.

use std::fmt;
use std::str::FromStr;

use crate::{Backend, Version};

/// The compute part of a variant name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Compute {
    Cpu,
    Metal,
    Cuda(Version),
    Rocm(Version),
    Xpu(Version),
}

/// One `build/<variant>/` directory name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Variant {
    /// `torch211-cxx11-cu130-x86_64-linux`; `cxx11` is None where the name has no tag (darwin, windows).
    Torch {
        torch: Version,
        cxx11: Option<bool>,
        compute: Compute,
        cpu: String,
        os: String,
    },
    /// `torch-stable-abi211-cu126-x86_64-linux`.
    StableAbi {
        torch: Version,
        compute: Compute,
        cpu: String,
        os: String,
    },
    /// `tvm-ffi01-cu126-x86_64-linux`.
    TvmFfi {
        tvm_ffi: Version,
        compute: Compute,
        cpu: String,
        os: String,
    },
    /// `torch-<backend>`; `cann` is spelled `npu`.
    Noarch { backend: Backend },
    /// Legacy `torch-universal`.
    Universal,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid variant name `{name}`: {why}")]
pub struct VariantParseError {
    pub name: String,
    pub why: String,
}

fn noarch_suffix(b: Backend) -> &'static str {
    if b == Backend::Cann {
        "npu"
    } else {
        b.as_str()
    }
}

fn two_part(prefix: &str, v: &Version) -> String {
    format!("{prefix}{}{}", v.major(), v.minor())
}

impl fmt::Display for Compute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Compute::Cpu => f.write_str("cpu"),
            Compute::Metal => f.write_str("metal"),
            Compute::Cuda(v) => f.write_str(&two_part("cu", v)),
            Compute::Rocm(v) => f.write_str(&two_part("rocm", v)),
            Compute::Xpu(v) => f.write_str(&two_part("xpu", v)),
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Variant::Torch {
                torch,
                cxx11,
                compute,
                cpu,
                os,
            } => {
                write!(f, "{}", two_part("torch", torch))?;
                match cxx11 {
                    Some(true) => f.write_str("-cxx11")?,
                    Some(false) => f.write_str("-cxx98")?,
                    None => {}
                }
                write!(f, "-{compute}-{cpu}-{os}")
            }
            Variant::StableAbi {
                torch,
                compute,
                cpu,
                os,
            } => {
                write!(
                    f,
                    "{}-{compute}-{cpu}-{os}",
                    two_part("torch-stable-abi", torch)
                )
            }
            Variant::TvmFfi {
                tvm_ffi,
                compute,
                cpu,
                os,
            } => {
                write!(f, "{}-{compute}-{cpu}-{os}", two_part("tvm-ffi", tvm_ffi))
            }
            Variant::Noarch { backend } => write!(f, "torch-{}", noarch_suffix(*backend)),
            Variant::Universal => f.write_str("torch-universal"),
        }
    }
}

/// "130" → 13.0: the last digit is the minor (the loader's greedy regex); the major takes the rest.
fn split_last_digit(digits: &str) -> Option<Version> {
    if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (maj, min) = digits.split_at(digits.len() - 1);
    Some(Version::new(&[maj.parse().ok()?, min.parse().ok()?]))
}

/// "211" → 2.11: a single-digit major, the minor takes the rest.
fn split_first_digit(digits: &str) -> Option<Version> {
    if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (maj, min) = digits.split_at(1);
    Some(Version::new(&[maj.parse().ok()?, min.parse().ok()?]))
}

fn parse_compute(s: &str) -> Option<Compute> {
    match s {
        "cpu" => Some(Compute::Cpu),
        "metal" => Some(Compute::Metal),
        _ => {
            if let Some(d) = s.strip_prefix("rocm") {
                split_last_digit(d).map(Compute::Rocm)
            } else if let Some(d) = s.strip_prefix("xpu") {
                split_last_digit(d).map(Compute::Xpu)
            } else if let Some(d) = s.strip_prefix("cu") {
                split_last_digit(d).map(Compute::Cuda)
            } else {
                None
            }
        }
    }
}

const CPUS: [&str; 2] = ["x86_64", "aarch64"];
const OSES: [&str; 3] = ["linux", "darwin", "windows"];

impl FromStr for Variant {
    type Err = VariantParseError;
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let err = |why: &str| VariantParseError {
            name: name.to_string(),
            why: why.to_string(),
        };
        if name == "torch-universal" {
            return Ok(Variant::Universal);
        }
        // `<compute>-<cpu>-<os>` tail shared by the arch kinds.
        let tail = |parts: &[&str]| -> Result<(Compute, String, String), VariantParseError> {
            let [compute, cpu, os] = parts else {
                return Err(err(
                    "expected `<compute>-<cpu>-<os>` after the framework part",
                ));
            };
            let compute = parse_compute(compute).ok_or_else(|| {
                err("unknown compute part (expected cpu, metal, cuXY, rocmXY, xpuXY)")
            })?;
            if !CPUS.contains(cpu) {
                return Err(err("cpu must be x86_64 or aarch64"));
            }
            if !OSES.contains(os) {
                return Err(err("os must be linux, darwin or windows"));
            }
            Ok((compute, cpu.to_string(), os.to_string()))
        };
        if let Some(rest) = name.strip_prefix("torch-stable-abi") {
            let parts: Vec<&str> = rest.split('-').collect();
            let torch = split_first_digit(parts[0])
                .ok_or_else(|| err("expected torch-stable-abi<MAJ><MIN>"))?;
            let (compute, cpu, os) = tail(&parts[1..])?;
            return Ok(Variant::StableAbi {
                torch,
                compute,
                cpu,
                os,
            });
        }
        if let Some(rest) = name.strip_prefix("tvm-ffi") {
            let parts: Vec<&str> = rest.split('-').collect();
            let tvm_ffi =
                split_first_digit(parts[0]).ok_or_else(|| err("expected tvm-ffi<MAJ><MIN>"))?;
            let (compute, cpu, os) = tail(&parts[1..])?;
            return Ok(Variant::TvmFfi {
                tvm_ffi,
                compute,
                cpu,
                os,
            });
        }
        if let Some(backend) = name.strip_prefix("torch-") {
            let backend = if backend == "npu" {
                Ok(Backend::Cann)
            } else {
                backend.parse::<Backend>()
            };
            return match backend {
                Ok(Backend::Cann) if name == "torch-cann" => {
                    Err(err("the cann noarch variant is spelled torch-npu"))
                }
                Ok(backend) => Ok(Variant::Noarch { backend }),
                Err(_) => Err(err("unknown noarch backend")),
            };
        }
        let Some(rest) = name.strip_prefix("torch") else {
            return Err(err(
                "expected a name starting with torch, torch-stable-abi or tvm-ffi",
            ));
        };
        let parts: Vec<&str> = rest.split('-').collect();
        let torch = split_first_digit(parts[0]).ok_or_else(|| err("expected torch<MAJ><MIN>"))?;
        let (cxx11, tail_parts) = match parts.get(1) {
            Some(&"cxx11") => (Some(true), &parts[2..]),
            Some(&"cxx98") => (Some(false), &parts[2..]),
            _ => (None, &parts[1..]),
        };
        let (compute, cpu, os) = tail(tail_parts)?;
        if os == "linux" && cxx11.is_none() {
            return Err(err(
                "linux torch variants carry a cxx11 (or legacy cxx98) tag",
            ));
        }
        if os != "linux" && cxx11.is_some() {
            return Err(err("only linux torch variants carry a cxx11 tag"));
        }
        Ok(Variant::Torch {
            torch,
            cxx11,
            compute,
            cpu,
            os,
        })
    }
}

impl Variant {
    /// The backend this variant is for (`None` for the legacy universal variant).
    pub fn backend(&self) -> Option<Backend> {
        match self {
            Variant::Torch { compute, .. }
            | Variant::StableAbi { compute, .. }
            | Variant::TvmFfi { compute, .. } => Some(crate::plan::compute_backend(compute)),
            Variant::Noarch { backend } => Some(*backend),
            Variant::Universal => None,
        }
    }
}

/// The cpu part of a variant name for a machine architecture as the OS reports it
/// (`x86_64`/`amd64`/`AMD64` → `x86_64`, `aarch64`/`arm64`/`ARM64` → `aarch64`); other archs have no variants.
pub fn variant_cpu(machine: &str) -> Option<&'static str> {
    match machine {
        "x86_64" | "amd64" | "AMD64" => Some("x86_64"),
        "aarch64" | "arm64" | "ARM64" => Some("aarch64"),
        _ => None,
    }
}

/// The ops namespace / metadata id: `_<python_name>_<backend>_<id>`.
pub fn ops_name(python_name: &str, backend: Backend, id: &str) -> String {
    format!("_{python_name}_{}_{id}", backend.as_str())
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArchError {
    #[error(
        "invalid CUDA capability `{0}`: expected MAJOR.MINOR with optional `a`/`f` suffix and `+PTX` (e.g. \"9.0a\", \"8.0+PTX\")"
    )]
    BadCuda(String),
    #[error(
        "empty set of CUDA capabilities after intersecting {requested:?} with the archs of CUDA {cuda}: {supported:?}"
    )]
    EmptyCuda {
        requested: Vec<String>,
        cuda: String,
        supported: Vec<String>,
    },
    #[error(
        "empty set of ROCm archs after intersecting {requested:?} with the supported archs {supported:?}"
    )]
    EmptyRocm {
        requested: Vec<String>,
        supported: Vec<String>,
    },
}

/// Default kernel archs per CUDA toolkit (reference §4.3).
pub fn cuda_default_archs(cuda: &Version) -> Vec<String> {
    let list: &[&str] = if cuda.major() >= 13 {
        &[
            "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0", "12.1+PTX",
        ]
    } else if cuda.major() == 12 && cuda.minor() >= 8 {
        &[
            "7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "12.0+PTX",
        ]
    } else {
        &["7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0+PTX"]
    };
    list.iter().map(|s| s.to_string()).collect()
}

/// Supported HIP archs (reference §4.4 `HIP_SUPPORTED_ARCHS`).
pub const ROCM_SUPPORTED_ARCHS: [&str; 10] = [
    "gfx906", "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1101", "gfx1200",
    "gfx1201",
];

/// (major, minor, suffix) of "9.0a" with "+PTX" already removed.
fn cuda_key(arch: &str) -> Option<(u32, u32, String)> {
    let (maj, rest) = arch.split_once('.')?;
    let digits = rest.trim_end_matches(['a', 'f']);
    let suffix = &rest[digits.len()..];
    if maj.is_empty() || digits.is_empty() || suffix.len() > 1 {
        return None;
    }
    if !maj.bytes().all(|b| b.is_ascii_digit()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((maj.parse().ok()?, digits.parse().ok()?, suffix.to_string()))
}

/// The vLLM "loose intersection" of requested capabilities with the toolkit's archs (reference §4.3).
/// `requested = None` gives the default table for `cuda`.
pub fn cuda_archs(requested: Option<&[String]>, cuda: &Version) -> Result<Vec<String>, ArchError> {
    let defaults = cuda_default_archs(cuda);
    let Some(requested) = requested else {
        return Ok(defaults);
    };
    let targets: Vec<(u32, u32)> = defaults
        .iter()
        .filter_map(|t| cuda_key(t.trim_end_matches("+PTX")).map(|(a, b, _)| (a, b)))
        .collect();
    let mut ptx = Vec::new();
    let mut plain: Vec<(u32, u32)> = Vec::new();
    let mut out: Vec<(u32, u32, String)> = Vec::new();
    let mut remaining = targets.clone();
    for arch in requested {
        let (base, is_ptx) = match arch.strip_suffix("+PTX") {
            Some(b) => (b, true),
            None => (arch.as_str(), false),
        };
        let (maj, min, suffix) = cuda_key(base).ok_or_else(|| ArchError::BadCuda(arch.clone()))?;
        if is_ptx {
            ptx.push((maj, min, suffix.clone()));
        }
        if suffix.is_empty() {
            plain.push((maj, min));
        } else if targets.contains(&(maj, min)) {
            // An `a`/`f` arch is kept verbatim and claims its base target.
            remaining.retain(|t| *t != (maj, min));
            out.push((maj, min, suffix));
        }
    }
    plain.sort();
    plain.dedup();
    for (tmaj, tmin) in remaining {
        let best = plain
            .iter()
            .filter(|(smaj, smin)| {
                (*smaj, *smin) <= (tmaj, tmin)
                    && (*smaj == tmaj || ptx.contains(&(*smaj, *smin, String::new())))
            })
            .max();
        if let Some(&(smaj, smin)) = best {
            out.push((smaj, smin, String::new()));
        }
    }
    out.sort();
    out.dedup();
    if out.is_empty() {
        return Err(ArchError::EmptyCuda {
            requested: requested.to_vec(),
            cuda: cuda.to_string(),
            supported: defaults,
        });
    }
    Ok(out
        .into_iter()
        .map(|(maj, min, suffix)| {
            let ptx_tag = if ptx.contains(&(maj, min, suffix.clone())) {
                "+PTX"
            } else {
                ""
            };
            format!("{maj}.{min}{suffix}{ptx_tag}")
        })
        .collect())
}

/// Exact intersection of `rocm-archs` with the supported list, in the supported list's order;
/// `None` means every supported arch.
pub fn rocm_archs(requested: Option<&[String]>) -> Result<Vec<String>, ArchError> {
    let supported: Vec<String> = ROCM_SUPPORTED_ARCHS.iter().map(|s| s.to_string()).collect();
    let Some(requested) = requested else {
        return Ok(supported);
    };
    let out: Vec<String> = supported
        .iter()
        .filter(|a| requested.contains(a))
        .cloned()
        .collect();
    if out.is_empty() {
        return Err(ArchError::EmptyRocm {
            requested: requested.to_vec(),
            supported,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }
    fn strs(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn names_round_trip() {
        for name in [
            "torch211-cxx11-cu130-x86_64-linux",
            "torch211-cxx11-cpu-x86_64-linux",
            "torch211-cxx11-rocm71-x86_64-linux",
            "torch212-cxx11-xpu20253-x86_64-linux",
            "torch212-metal-aarch64-darwin",
            "torch27-cu124-x86_64-windows",
            "torch-stable-abi211-cu126-x86_64-linux",
            "tvm-ffi01-cu126-x86_64-linux",
            "torch26-cxx98-cu118-x86_64-linux",
            "torch-cuda",
            "torch-npu",
            "torch-universal",
        ] {
            let parsed: Variant = name.parse().unwrap();
            assert_eq!(parsed.to_string(), name);
        }
        let Variant::Torch { torch, compute, .. } =
            "torch212-cxx11-xpu20253-x86_64-linux".parse().unwrap()
        else {
            panic!("not a torch variant")
        };
        assert_eq!(torch, v("2.12"));
        assert_eq!(compute, Compute::Xpu(v("2025.3")));
        for bad in [
            "torch211-cxx11-cu130",
            "torch211-cu130-x86_64-linux",
            "torch-foo",
            "torch211-cxx11-cu130-riscv-linux",
        ] {
            assert!(bad.parse::<Variant>().is_err(), "{bad}");
        }
    }

    #[test]
    fn variant_backend_and_host_cpu() {
        let b = |n: &str| n.parse::<Variant>().unwrap().backend();
        assert_eq!(b("torch211-cxx11-cu130-x86_64-linux"), Some(Backend::Cuda));
        assert_eq!(b("torch212-metal-aarch64-darwin"), Some(Backend::Metal));
        assert_eq!(
            b("torch-stable-abi211-rocm71-x86_64-linux"),
            Some(Backend::Rocm)
        );
        assert_eq!(b("torch-npu"), Some(Backend::Cann));
        assert_eq!(b("torch-universal"), None);
        assert_eq!(variant_cpu("AMD64"), Some("x86_64"));
        assert_eq!(variant_cpu("arm64"), Some("aarch64"));
        assert_eq!(variant_cpu("riscv64"), None);
    }

    #[test]
    fn cuda_intersection() {
        assert_eq!(
            cuda_archs(Some(&strs(&["9.0a"])), &v("13.0")).unwrap(),
            strs(&["9.0a"])
        );
        assert_eq!(
            cuda_archs(Some(&strs(&["5.0", "7.5", "8.0", "9.0"])), &v("12.6")).unwrap(),
            strs(&["7.5", "8.0", "9.0"])
        );
        assert_eq!(
            cuda_archs(Some(&strs(&["8.0"])), &v("13.0")).unwrap(),
            strs(&["8.0"])
        );
        assert_eq!(
            cuda_archs(Some(&strs(&["8.0+PTX"])), &v("13.0")).unwrap(),
            strs(&["8.0+PTX"])
        );
        assert_eq!(
            cuda_archs(Some(&strs(&["10.0f", "9.0"])), &v("13.0")).unwrap(),
            strs(&["9.0", "10.0f"])
        );
        assert!(matches!(
            cuda_archs(Some(&strs(&["99999.0"])), &v("13.0")),
            Err(ArchError::EmptyCuda { .. })
        ));
        assert_eq!(
            cuda_archs(None, &v("12.8")).unwrap().last().unwrap(),
            "12.0+PTX"
        );
    }

    #[test]
    fn rocm_intersection() {
        assert_eq!(
            rocm_archs(Some(&strs(&["gfx940", "gfx942"]))).unwrap(),
            strs(&["gfx942"])
        );
        assert!(rocm_archs(Some(&strs(&["gfx99999"]))).is_err());
        assert_eq!(rocm_archs(None).unwrap().len(), 10);
        assert_eq!(
            ops_name("relu", Backend::Cuda, "7a4e5a7"),
            "_relu_cuda_7a4e5a7"
        );
    }
}
