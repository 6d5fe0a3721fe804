//! Checks the shared naming/arch vectors in tests/vectors/variants.json.

use kforge_manifest::{Backend, Compute, Variant, Version, cuda_archs, ops_name, rocm_archs};
use serde_json::{Value, json};

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/vectors/variants.json"
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn compute_json(c: &Compute) -> Value {
    match c {
        Compute::Cpu => json!({"type": "cpu"}),
        Compute::Metal => json!({"type": "metal"}),
        Compute::Cuda(v) => json!({"type": "cuda", "version": v.to_string()}),
        Compute::Rocm(v) => json!({"type": "rocm", "version": v.to_string()}),
        Compute::Xpu(v) => json!({"type": "xpu", "version": v.to_string()}),
    }
}

fn variant_json(name: &str, v: &Variant) -> Value {
    let mut o = match v {
        Variant::Torch {
            torch,
            cxx11,
            compute,
            cpu,
            os,
        } => {
            let mut o = json!({"kind": "torch", "torch": torch.to_string(), "compute": compute_json(compute), "cpu": cpu, "os": os});
            if let Some(c) = cxx11 {
                o["cxx11"] = json!(c);
            }
            o
        }
        Variant::StableAbi {
            torch,
            compute,
            cpu,
            os,
        } => {
            json!({"kind": "stable-abi", "torch": torch.to_string(), "compute": compute_json(compute), "cpu": cpu, "os": os})
        }
        Variant::TvmFfi {
            tvm_ffi,
            compute,
            cpu,
            os,
        } => {
            json!({"kind": "tvm-ffi", "tvm_ffi": tvm_ffi.to_string(), "compute": compute_json(compute), "cpu": cpu, "os": os})
        }
        Variant::Noarch { backend } => json!({"kind": "noarch", "backend": backend.as_str()}),
        Variant::Universal => json!({"kind": "universal"}),
    };
    o["name"] = json!(name);
    o
}

fn strings(v: &Value) -> Option<Vec<String>> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
}

#[test]
fn variant_names_parse_and_print() {
    let vec = vectors();
    for case in vec["names"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let parsed: Variant = name.parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parsed.to_string(), name);
        assert_eq!(&variant_json(name, &parsed), case, "fields of {name}");
    }
    for case in vec["invalid_names"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        assert!(
            name.parse::<Variant>().is_err(),
            "{name} should be rejected ({})",
            case["why"]
        );
    }
}

#[test]
fn ops_names() {
    for case in vectors()["ops_names"].as_array().unwrap() {
        let backend: Backend = case["backend"].as_str().unwrap().parse().unwrap();
        let got = ops_name(
            case["python_name"].as_str().unwrap(),
            backend,
            case["id"].as_str().unwrap(),
        );
        assert_eq!(got, case["expected"].as_str().unwrap());
    }
}

#[test]
fn arch_intersections() {
    let vec = vectors();
    for case in vec["cuda_intersection"].as_array().unwrap() {
        let cuda: Version = case["cuda"].as_str().unwrap().parse().unwrap();
        let requested = strings(&case["requested"]);
        let got = cuda_archs(requested.as_deref(), &cuda).ok();
        assert_eq!(got, strings(&case["expected"]), "{case}");
    }
    for case in vec["rocm_intersection"].as_array().unwrap() {
        let requested = strings(&case["requested"]);
        let got = rocm_archs(requested.as_deref()).ok();
        assert_eq!(got, strings(&case["expected"]), "{case}");
    }
}
