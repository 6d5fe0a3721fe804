//! Fetches the real pinned wheels (once, into the shared cache) and checks the assembled toolchains work.

use std::process::Command;

use kforge_toolchain::{Cache, build_sets, prepare};

#[test]
fn every_build_set_assembles_a_working_toolchain() {
    let cache = Cache::from_env();
    for set in build_sets().unwrap() {
        let tc = prepare(&cache, &set).unwrap();
        assert!(
            tc.torch_includes[0].join("torch/library.h").is_file(),
            "{}: torch headers missing in {:?}",
            set.key(),
            tc.torch_includes
        );
        for lib in ["libtorch.so", "libtorch_cpu.so", "libc10.so"] {
            assert!(tc.torch_lib.join(lib).is_file(), "{}: {lib}", set.key());
        }
        assert_eq!(tc.id.len(), 16);
        match set.backend.as_str() {
            "cuda" => {
                let root = tc.cuda_root.as_ref().expect("cuda root");
                assert!(root.join("lib/libcudart.so.13").is_file());
                assert!(root.join("include/cuda_runtime.h").is_file());
                let out = Command::new(tc.nvcc().unwrap())
                    .arg("--version")
                    .output()
                    .unwrap();
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success() && text.contains("release 13.0"),
                    "{text}"
                );
            }
            _ => assert!(tc.cuda_root.is_none()),
        }
    }
}
