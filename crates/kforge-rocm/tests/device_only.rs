//! Device-only builds with the real clang/llvm-objdump (scripts/install-rocm-tools.sh installs them).

use std::path::{Path, PathBuf};
use std::process::Command;

use kforge_rocm::{Component, DeviceOnlyOptions, RocmError, Tools, compile_components};

const PRELUDE: &str = "#define __global__ __attribute__((global))\n\
#define __shared__ __attribute__((shared))\n\
#define TID() __builtin_amdgcn_workitem_id_x()\n";

// One MFMA FP8 kernel with LDS and a launch bound, one plain elementwise kernel.
const MFMA_SRC: &str = r#"
typedef float f32x4 __attribute__((ext_vector_type(4)));
extern "C" __global__ __attribute__((amdgpu_flat_work_group_size(1, 256)))
void mma(const long* a, const long* b, float* c) {
  __shared__ long tile[512];
  int t = TID();
  tile[t] = a[t];
  __builtin_amdgcn_s_barrier();
  f32x4 acc = {0.f, 0.f, 0.f, 0.f};
  acc = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(tile[(t + 1) % 256], b[t], acc, 0, 0, 0);
  for (int i = 0; i < 4; ++i) c[t * 4 + i] = acc[i];
}
"#;

const RELU_SRC: &str = r#"
extern "C" __global__ void relu(float* out, const float* in, int n) {
  int i = TID() + __builtin_amdgcn_workgroup_id_x() * 256;
  if (i < n) out[i] = in[i] > 0.f ? in[i] : 0.f;
}
"#;

fn tools() -> Tools {
    Tools::detect()
        .expect("clang-19/llvm-objdump-19 are required: run scripts/install-rocm-tools.sh")
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn component(name: &str, src: &[&str]) -> Component {
    Component {
        name: name.into(),
        src: src.iter().map(PathBuf::from).collect(),
        rocm_archs: Some(vec!["gfx942".into()]),
        ..Default::default()
    }
}

/// The compiler's own resource remarks for one kernel, as (key, value) pairs.
fn remarks(tools: &Tools, src: &Path, kernel: &str) -> Vec<(String, String)> {
    let out = Command::new(&tools.clang)
        .args([
            "-x",
            "hip",
            "--offload-arch=gfx942",
            "-nogpuinc",
            "-nogpulib",
        ])
        .args([
            "--cuda-device-only",
            "--no-gpu-bundle-output",
            "-O3",
            "-std=c++17",
        ])
        .args(["-DUSE_ROCM=1", "-DROCM_KERNEL"])
        .arg("-Rpass-analysis=kernel-resource-usage")
        .arg(src)
        .arg("-o")
        .arg(src.with_extension("remark.co"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stderr);
    let mut found = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let Some((_, rest)) = line.split_once("remark: ") else {
            continue;
        };
        let rest = rest.split(" [-Rpass").next().unwrap().trim();
        if let Some(name) = rest.strip_prefix("Function Name: ") {
            inside = name == kernel;
        } else if inside && let Some((k, v)) = rest.split_once(": ") {
            found.push((k.to_string(), v.to_string()));
        }
    }
    assert!(!found.is_empty(), "no remarks for {kernel} in:\n{text}");
    found
}

fn remark(r: &[(String, String)], key: &str) -> u32 {
    r.iter()
        .find(|(k, _)| k == key)
        .unwrap_or_else(|| panic!("no remark {key} in {r:?}"))
        .1
        .parse()
        .unwrap()
}

#[test]
fn compiles_inspects_and_matches_the_compilers_own_numbers() {
    let tools = tools();
    let root = tempfile::tempdir().unwrap();
    write(
        root.path(),
        "k_rocm/mma.hip",
        &format!("{PRELUDE}{MFMA_SRC}"),
    );
    write(
        root.path(),
        "r_rocm/relu.hip",
        &format!("{PRELUDE}{RELU_SRC}"),
    );
    write(root.path(), "r_rocm/host.cpp", "int host_only;\n");
    let out = root.path().join("build/device/rocm");
    let options = DeviceOnlyOptions {
        archs: None,
        out_dir: out.clone(),
    };
    let mut relu = component("r_rocm", &["r_rocm/relu.hip", "r_rocm/host.cpp"]);
    relu.rocm_archs = Some(vec!["gfx90a".into(), "gfx942".into(), "gfx940".into()]);
    let report = compile_components(
        &tools,
        root.path(),
        &[component("k_rocm", &["k_rocm/mma.hip"]), relu],
        &options,
    )
    .unwrap();

    // gfx940 is not a supported arch: dropped by the exact intersection.
    let placed: Vec<(String, String)> = report
        .code_objects
        .iter()
        .map(|c| (c.component.clone(), c.arch.clone()))
        .collect();
    assert_eq!(
        placed,
        [
            ("k_rocm", "gfx942"),
            ("r_rocm", "gfx90a"),
            ("r_rocm", "gfx942")
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    assert!(out.join("gfx942/k_rocm.co").is_file());
    assert!(out.join("gfx90a/r_rocm.co").is_file());
    assert_eq!(
        report.skipped_sources["r_rocm"],
        vec![PathBuf::from("r_rocm/host.cpp")]
    );
    assert!(!report.executed);

    let mma = &report.code_objects[0];
    assert_eq!(mma.target.as_deref(), Some("amdgcn-amd-amdhsa--gfx942"));
    assert_eq!(mma.kernels.len(), 1);
    let k = &mma.kernels[0];
    assert_eq!(k.name, "mma");
    assert_eq!(k.mfma.get("v_mfma_f32_16x16x32_fp8_fp8"), Some(&1));
    assert_eq!(k.lds_bytes, 512 * 8);
    assert_eq!(k.workgroup_size, 256);
    assert_eq!(k.wavefront_size, 64);

    // Every number must agree with what LLVM itself reports for the same source.
    let r = remarks(&tools, &root.path().join("k_rocm/mma.hip"), "mma");
    // gfx942's unified file: architected VGPRs rounded up to 4, then the AGPRs.
    let (arch, acc) = (remark(&r, "VGPRs"), remark(&r, "AGPRs"));
    assert_eq!(k.agprs, acc);
    let total = if acc > 0 {
        arch.div_ceil(4) * 4 + acc
    } else {
        arch
    };
    assert_eq!(k.vgprs, total);
    assert_eq!(k.sgprs, remark(&r, "SGPRs"));
    assert_eq!(k.scratch_bytes, remark(&r, "ScratchSize [bytes/lane]"));
    assert_eq!(k.lds_bytes, remark(&r, "LDS Size [bytes/block]"));
    assert_eq!(k.occupancy, Some(remark(&r, "Occupancy [waves/SIMD]")));
    assert_eq!(k.vgpr_spills, remark(&r, "VGPRs Spill"));
    assert_eq!(k.sgpr_spills, remark(&r, "SGPRs Spill"));

    let relu = &report.code_objects[2].kernels[0];
    assert!(relu.mfma.is_empty());
    let r = remarks(&tools, &root.path().join("r_rocm/relu.hip"), "relu");
    assert_eq!(relu.occupancy, Some(remark(&r, "Occupancy [waves/SIMD]")));
    assert_eq!(relu.workgroup_size, 1024);

    let text = report.to_string();
    assert!(text.contains("never executed"), "{text}");
    assert!(text.contains("v_mfma_f32_16x16x32_fp8_fp8 x1"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&report.to_json()).unwrap();
    assert_eq!(json["code_objects"][0]["kernels"][0]["lds_bytes"], 4096);
}

#[test]
fn arch_filter_links_several_sources_and_skips_unselected_components() {
    let tools = tools();
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "a/one.hip", &format!("{PRELUDE}{RELU_SRC}"));
    write(
        root.path(),
        "a/two.hip",
        &format!("{PRELUDE}extern \"C\" __global__ void twice(float* x) {{ x[TID()] *= 2.f; }}\n"),
    );
    write(root.path(), "b/mma.hip", &format!("{PRELUDE}{MFMA_SRC}"));
    let mut a = component("a", &["a/one.hip", "a/two.hip"]);
    a.rocm_archs = None; // every supported arch, narrowed by --archs below
    let mut b = component("b", &["b/mma.hip"]);
    b.rocm_archs = Some(vec!["gfx942".into()]);
    let options = DeviceOnlyOptions {
        archs: Some(vec!["gfx90a".into()]),
        out_dir: root.path().join("out"),
    };
    let report = compile_components(&tools, root.path(), &[a, b], &options).unwrap();
    assert_eq!(report.code_objects.len(), 1);
    let mut names: Vec<&str> = report.code_objects[0]
        .kernels
        .iter()
        .map(|k| k.name.as_str())
        .collect();
    names.sort();
    assert_eq!(names, ["relu", "twice"]);
    assert_eq!(report.skipped_components, ["b"]);
    assert!(!root.path().join("out/gfx942").exists());
}

#[test]
fn bad_input_gets_errors_that_say_what_to_do() {
    let tools = tools();
    let root = tempfile::tempdir().unwrap();
    let out = root.path().join("out");
    let options = DeviceOnlyOptions {
        archs: None,
        out_dir: out.clone(),
    };
    write(root.path(), "c/relu.cu", "__global__ void relu() {}\n");
    let err = compile_components(
        &tools,
        root.path(),
        &[component("c", &["c/relu.cu"])],
        &options,
    )
    .unwrap_err();
    assert!(matches!(err, RocmError::CudaSource { .. }), "{err}");
    assert!(
        err.to_string().contains("[kernel.c] src c/relu.cu"),
        "{err}"
    );

    let err = compile_components(
        &tools,
        root.path(),
        &[component("m", &["m/nope.hip"])],
        &options,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("m/nope.hip: no such file"),
        "{err}"
    );

    write(root.path(), "h/only.h", "#pragma once\n");
    let err = compile_components(
        &tools,
        root.path(),
        &[component("h", &["h/only.h"])],
        &options,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("no .hip source (found: h/only.h)"),
        "{err}"
    );

    let mut bad_arch = options.clone();
    bad_arch.archs = Some(vec!["gfx941".into()]);
    write(root.path(), "k/k.hip", &format!("{PRELUDE}{RELU_SRC}"));
    let err = compile_components(
        &tools,
        root.path(),
        &[component("k", &["k/k.hip"])],
        &bad_arch,
    )
    .unwrap_err();
    assert!(err.to_string().contains("--archs gfx941"), "{err}");
    assert!(err.to_string().contains("gfx942"), "{err}");

    let mut none = component("k", &["k/k.hip"]);
    none.rocm_archs = Some(vec!["gfx940".into()]);
    let err = compile_components(&tools, root.path(), &[none], &options).unwrap_err();
    assert!(err.to_string().contains("[kernel.k] rocm-archs"), "{err}");

    // A compile error: the message carries the command and the compiler's diagnostic; no code object is left.
    write(root.path(), "e/e.hip", "#include <hip/hip_runtime.h>\n");
    let err = compile_components(
        &tools,
        root.path(),
        &[component("e", &["e/e.hip"])],
        &options,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("compiling [kernel.e] for gfx942 failed"),
        "{msg}"
    );
    assert!(msg.contains("--offload-arch=gfx942"), "{msg}");
    assert!(msg.contains("hip_runtime.h"), "{msg}");
    assert!(
        msg.contains("hint: device-only builds have no HIP headers"),
        "{msg}"
    );
    let left: Vec<_> = std::fs::read_dir(out.join("gfx942"))
        .unwrap()
        .flatten()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The repository's fp8-gemm project, through its build.toml: the gfx942 MFMA kernel must use FP8 MFMA,
/// not spill, and fit two workgroups per CU.
#[test]
fn fp8_gemm_project_compiles_for_gfx942_without_spills() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../kernels/fp8-gemm");
    let project = kforge_manifest::load_project(&dir).unwrap();
    let out = tempfile::tempdir().unwrap();
    let options = DeviceOnlyOptions {
        archs: None,
        out_dir: out.path().to_path_buf(),
    };
    let report = kforge_rocm::compile_device_only(&project, &options).unwrap();
    assert_eq!(report.code_objects.len(), 1);
    let co = &report.code_objects[0];
    assert_eq!(
        (co.component.as_str(), co.arch.as_str()),
        ("gemm_rocm", "gfx942")
    );
    assert!(out.path().join("gfx942/gemm_rocm.co").is_file());
    let gemm = co
        .kernels
        .iter()
        .find(|k| k.name == "fp8_gemm_blockscaled_gfx942")
        .unwrap();
    // 4 waves x (2x2 tiles of 32x32) x 8 K-steps of 16 per 128-K block.
    assert_eq!(
        gemm.mfma.get("v_mfma_f32_32x32x16_fp8_fp8"),
        Some(&32),
        "{report}"
    );
    assert_eq!(
        (gemm.vgpr_spills, gemm.sgpr_spills, gemm.scratch_bytes),
        (0, 0, 0)
    );
    assert!(gemm.vgprs <= 256, "{report}");
    assert_eq!(gemm.lds_bytes, 32768);
    assert_eq!(gemm.occupancy, Some(2), "{report}");
    assert!(gemm.warnings.is_empty(), "{report}");
    let conv = co
        .kernels
        .iter()
        .find(|k| k.name == "fp8_fn_to_fnuz")
        .unwrap();
    assert!(conv.mfma.is_empty());
    assert_eq!(
        report.skipped_sources["gemm_rocm"],
        vec![PathBuf::from("gemm_rocm/hip_shim.h")]
    );
}

#[test]
fn project_without_rocm_backend_is_rejected() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "build.toml",
        "[general]\nname = \"only-cpu\"\nversion = 1\nbackends = [\"cpu\"]\n\n[torch]\nsrc = [\"torch-ext/torch_binding.cpp\"]\n\n[kernel.k]\nbackend = \"cpu\"\ndepends = [\"torch\"]\nsrc = [\"k/k.cpp\"]\n",
    );
    write(dir.path(), "torch-ext/torch_binding.cpp", "\n");
    write(dir.path(), "torch-ext/only_cpu/__init__.py", "\n");
    write(dir.path(), "k/k.cpp", "\n");
    let project = kforge_manifest::load_project(dir.path()).unwrap();
    let options = DeviceOnlyOptions {
        archs: None,
        out_dir: dir.path().join("out"),
    };
    let err = kforge_rocm::compile_device_only(&project, &options).unwrap_err();
    assert!(
        err.to_string().contains("backends does not list \"rocm\""),
        "{err}"
    );
}
