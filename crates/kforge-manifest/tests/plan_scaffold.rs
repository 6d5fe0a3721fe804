//! Variant planning against build targets, and the project `kforge init` writes.

use std::path::Path;

use kforge_manifest::plan::{BuildTarget, hf_build_matrix, plan};
use kforge_manifest::scaffold::{InitError, InitOptions, init, render};
use kforge_manifest::{Backend, Compute, Version, load_project, parse_manifest};

fn target(torch: &str, compute: Compute) -> BuildTarget {
    BuildTarget {
        torch: torch.parse().unwrap(),
        compute,
        cpu: "x86_64".into(),
        os: "linux".into(),
        tvm_ffi: None,
    }
}

fn cu(v: &str) -> Compute {
    Compute::Cuda(v.parse().unwrap())
}

fn manifest(toml: &str) -> kforge_manifest::Manifest {
    parse_manifest(toml, Path::new("build.toml"))
        .unwrap_or_else(|e| panic!("{e}"))
        .0
}

const RELU: &str = r#"[general]
name = "relu"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda", "metal"]

[torch]
src = []
maxver = "2.12"

[kernel.relu_cpu]
backend = "cpu"
depends = ["torch"]
src = []

[kernel.relu]
backend = "cuda"
depends = ["torch"]
cuda-capabilities = ["8.0", "9.0a"]
src = []

[kernel.relu_new]
backend = "cuda"
depends = ["torch"]
cuda-minver = "13.0"
src = []
"#;

#[test]
fn arch_variants_components_and_archs() {
    let m = manifest(RELU);
    let targets = [
        target("2.11", Compute::Cpu),
        target("2.11", cu("12.8")),
        target("2.11", cu("13.0")),
        target("2.13", cu("13.0")),
    ];
    let p = plan(&m, &targets);
    let names: Vec<&str> = p.variants.iter().map(|v| v.variant.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "torch211-cxx11-cpu-x86_64-linux",
            "torch211-cxx11-cu128-x86_64-linux",
            "torch211-cxx11-cu130-x86_64-linux",
            "torch-metal",
        ]
    );
    let cu128 = &p.variants[1];
    assert_eq!(cu128.components.len(), 1);
    assert_eq!(cu128.components[0].name, "relu");
    assert_eq!(
        cu128.components[0].archs.as_deref().unwrap(),
        ["8.0", "9.0a"]
    );
    assert_eq!(cu128.skipped[0].component, "relu_new");
    assert_eq!(
        cu128.skipped[0].reason,
        "cuda-minver 13.0 is newer than CUDA 12.8"
    );
    let cu130 = &p.variants[2];
    assert_eq!(cu130.components.len(), 2);
    // relu_new has no capabilities: the CUDA 13.0 default table; the union is sorted as strings.
    assert_eq!(
        cu130.archs.as_deref().unwrap(),
        [
            "10.0", "11.0", "12.0", "12.1+PTX", "7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "9.0a"
        ]
    );
    assert_eq!(p.variants[3].kind, "noarch");
    assert!(p.variants[0].archs.is_none());
    assert!(p.unplanned.is_empty());
}

#[test]
fn bounds_and_missing_targets_are_explained() {
    let m = manifest(RELU);
    let p = plan(&m, &[target("2.13", Compute::Cpu)]);
    assert_eq!(p.variants.len(), 1, "{:?}", p.variants);
    assert_eq!(p.unplanned.len(), 2);
    assert_eq!(p.unplanned[0].backend, Backend::Cpu);
    assert_eq!(
        p.unplanned[0].reason,
        "torch 2.13 is outside [torch] minver/maxver"
    );
    assert_eq!(
        p.unplanned[1].reason,
        "no configured build target has backend cuda"
    );
}

#[test]
fn stable_abi_tvm_ffi_and_noarch() {
    let stable = RELU.replace("maxver = \"2.12\"", "stable-abi = \"2.11\"");
    let p = plan(
        &manifest(&stable),
        &[target("2.12", cu("13.0")), target("2.13", cu("13.0"))],
    );
    let names: Vec<&str> = p.variants.iter().map(|v| v.variant.as_str()).collect();
    assert_eq!(
        names,
        vec!["torch-stable-abi211-cu130-x86_64-linux", "torch-metal"]
    );

    let tvm = RELU
        .replace("[torch]", "[tvm-ffi]")
        .replace("maxver = \"2.12\"\n", "");
    let mut with_tvm = target("2.12", cu("12.6"));
    with_tvm.tvm_ffi = Some(Version::new(&[0, 1]));
    let p = plan(&manifest(&tvm), &[target("2.12", cu("13.0")), with_tvm]);
    assert_eq!(p.variants[0].variant, "tvm-ffi01-cu126-x86_64-linux");

    let noarch = "[general]\nname = \"tri\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cuda\", \"rocm\"]\n\n[torch-noarch]\nrocm-archs = [\"gfx942\", \"gfx90a\"]\n";
    let p = plan(&manifest(noarch), &[]);
    assert_eq!(p.variants[0].variant, "torch-cuda");
    assert_eq!(p.variants[0].archs, None);
    assert_eq!(p.variants[1].variant, "torch-rocm");
    assert_eq!(
        p.variants[1].archs.as_deref().unwrap(),
        ["gfx90a", "gfx942"]
    );
}

#[test]
fn hf_matrix_names() {
    let m = manifest(&RELU.replace("maxver = \"2.12\"\n", ""));
    let p = plan(&m, &hf_build_matrix());
    let names: Vec<&str> = p.variants.iter().map(|v| v.variant.as_str()).collect();
    for expected in [
        "torch212-cxx11-cpu-x86_64-linux",
        "torch212-cxx11-cpu-aarch64-linux",
        "torch212-cpu-aarch64-darwin",
        "torch213-cxx11-cu132-aarch64-linux",
        "torch212-cxx11-cu126-x86_64-linux",
        "torch-metal",
    ] {
        assert!(names.contains(&expected), "{expected} not in {names:?}");
    }
    // 2 torch × (3 cpu platforms + 2 platforms × 3 CUDA) + noarch metal.
    assert_eq!(names.len(), 2 * (3 + 6) + 1, "{names:?}");
}

#[test]
fn init_writes_a_project_that_checks_clean() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("mykernel");
    let opts = InitOptions {
        name: "org/my-kernel".into(),
        backends: vec![Backend::Cpu, Backend::Cuda, Backend::Rocm],
        license: "Apache-2.0".into(),
        overwrite: false,
    };
    let files = init(&dir, &opts).unwrap();
    assert!(
        files
            .iter()
            .any(|f| f == Path::new("torch-ext/my_kernel/__init__.py"))
    );
    let p = load_project(&dir).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    let m = &p.manifest;
    assert_eq!(m.general.name, "my-kernel");
    assert_eq!(
        m.general.hub.as_ref().unwrap().repo_id.as_deref(),
        Some("org/my-kernel")
    );
    assert_eq!(
        m.kernels.keys().collect::<Vec<_>>(),
        ["my_kernel_cpu", "my_kernel_cuda", "my_kernel_rocm"]
    );
    assert_eq!(
        m.kernels["my_kernel_rocm"].src,
        m.kernels["my_kernel_cuda"].src
    );
    let binding = std::fs::read_to_string(dir.join("torch-ext/torch_binding.cpp")).unwrap();
    assert!(binding.contains("ops.def(\"my_kernel(Tensor! out, Tensor input) -> ()\");"));
    assert!(binding.contains("ops.impl(\"my_kernel\", c10::kCPU, &my_kernel);"));
    let test = std::fs::read_to_string(dir.join("tests/test_my_kernel.py")).unwrap();
    assert!(test.contains("kernel.my_kernel(x)"));
    assert!(!test.contains("{{"));
    // No temporary directory is left next to the project.
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert_eq!(left.len(), 1);

    // A second init refuses to overwrite, --overwrite replaces.
    let err = init(&dir, &opts).unwrap_err();
    assert!(matches!(err, InitError::Exists(_)), "{err}");
    assert!(
        err.to_string()
            .ends_with("already exists; pass --overwrite to replace the generated files")
    );
    init(
        &dir,
        &InitOptions {
            overwrite: true,
            ..opts
        },
    )
    .unwrap();
}

#[test]
fn init_rejects_bad_input() {
    let opts = |name: &str, backends: Vec<Backend>| InitOptions {
        name: name.into(),
        backends,
        license: "MIT".into(),
        overwrite: false,
    };
    assert_eq!(
        render(&opts("My_Kernel", vec![Backend::Cpu]))
            .unwrap_err()
            .to_string(),
        "invalid kernel name `My_Kernel`: expected lowercase letters, digits and `-`, starting with a letter and not ending with `-` (e.g. `my-kernel` or `org/my-kernel`)"
    );
    assert!(matches!(
        render(&opts("a/b/c", vec![Backend::Cpu])),
        Err(InitError::BadName(_))
    ));
    assert_eq!(
        render(&opts("relu", vec![Backend::Metal]))
            .unwrap_err()
            .to_string(),
        "`kforge init` has no template for backend metal; use cpu, cuda and/or rocm"
    );
    assert!(matches!(
        render(&opts("relu", vec![])),
        Err(InitError::NoBackends)
    ));
    let cpu_only = render(&opts("relu", vec![Backend::Cpu])).unwrap();
    let binding = &cpu_only
        .iter()
        .find(|(p, _)| p == Path::new("torch-ext/torch_binding.cpp"))
        .unwrap()
        .1;
    assert!(!binding.contains("kCUDA"));
    assert!(
        !cpu_only
            .iter()
            .any(|(p, _)| p.to_string_lossy().ends_with(".cu"))
    );
}
