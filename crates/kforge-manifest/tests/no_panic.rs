//! Mutation fuzzing of the build.toml parser: random byte edits, splices and truncations of valid files
//! must give a manifest or diagnostics (rendered with miette), never a panic. The seed is fixed so a
//! failure reproduces; `KFORGE_FUZZ_ITERS` runs longer (the cargo-fuzz target in ../fuzz goes further).

use std::path::Path;

use kforge_manifest::migrate::migrate_to_edition5;
use kforge_manifest::parse_manifest;

const SEEDS: [&str; 4] = [
    r#"[general]
name = "relu"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda", "rocm"]
kernel-depends = [{ repo-id = "org/x", version = 1 }]

[general.hub]
repo-id = "org/relu"

[general.cuda]
minver = "12.6"
python-depends = ["nvidia-cutlass-dsl"]

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]
stable-abi = "2.11"

[kernel.relu_cpu]
backend = "cpu"
depends = ["torch"]
src = ["relu_cpu/relu.cpp"]

[kernel.relu]
backend = "cuda"
depends = ["torch", "cutlass_3_6"]
cuda-capabilities = ["8.0", "9.0a", "10.0f", "8.0+PTX"]
src = ["relu_cuda/relu.cu"]

[kernel.relu_rocm]
backend = "rocm"
depends = ["torch"]
rocm-archs = ["gfx942"]
src = ["relu_cuda/relu.cu"]
"#,
    "[general]\nname = \"tri\"\nversion = 1\nlicense = \"MIT\"\nbackends = [\"cuda\"]\n\n[torch-noarch]\ncuda_capabilities = [\"8.0\"]\n",
    "[general]\nname = \"act\"\nbackends = [\"cuda\"]\n[general.xpu]\npython-depends = [\"onednn\"]\n[tvm-ffi]\nsrc = []\n[[general.kernel-depends]]\nrepo-id = \"a/b\"\nrevision = \"r\"\n",
    "[general]\nname = \"x-y\"\nversion = 2\nedition = 5\nlicense = \"é\"\nbackends = [\"xpu\", \"metal\"]\n[torch.stable-abi]\nxpu = \"2.12\"\n[kernel.k]\nbackend = \"xpu\"\ndepends = [\"sycl_tla\"]\nsrc = []\nsycl-flags = [\"-O2\"]\n",
];

/// Bytes that tend to reach new parser states.
const TOKENS: [&[u8]; 16] = [
    b"[",
    b"]",
    b"\"",
    b"=",
    b"\n",
    b"{",
    b"}",
    b",",
    b".",
    b"#",
    b"'''",
    b"\\u00e9",
    b"\xc3\xa9",
    b"..",
    b"[[kernel.x]]",
    b"edition = 4\n",
];

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(v.len() + 1);
        match rng.below(8) {
            // Line-level edits keep the TOML valid more often, so key validation is exercised.
            0..=2 => {
                let text = String::from_utf8_lossy(&v).to_string();
                let mut lines: Vec<&str> = text.lines().collect();
                let donor: Vec<&str> = SEEDS[rng.below(SEEDS.len())].lines().collect();
                let line = donor[rng.below(donor.len())];
                let i = rng.below(lines.len());
                match rng.below(3) {
                    0 if !lines.is_empty() => {
                        lines.remove(i);
                    }
                    1 if !lines.is_empty() => lines[i] = line,
                    _ => lines.insert(i.min(lines.len()), line),
                }
                v = (lines.join("\n") + "\n").into_bytes();
            }
            3 if !v.is_empty() => {
                let end = (at + 1 + rng.below(8)).min(v.len());
                v.drain(at.min(end)..end);
            }
            4 => {
                let t = TOKENS[rng.below(TOKENS.len())];
                v.splice(at..at, t.iter().copied());
            }
            5 if at < v.len() => v[at] = rng.next() as u8,
            6 => {
                let other = SEEDS[rng.below(SEEDS.len())].as_bytes();
                let from = rng.below(other.len());
                let len = rng.below(64).min(other.len() - from);
                v.splice(at..at, other[from..from + len].iter().copied());
            }
            _ => v.truncate(at),
        }
    }
    v
}

fn exercise(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let file = Path::new("fuzz/build.toml");
    match parse_manifest(&text, file) {
        Ok((m, warnings)) => {
            let _ = m.noarch_backends();
            let _ = migrate_to_edition5(&text, file);
            render(&warnings);
        }
        Err(e) => {
            assert!(
                e.errors().count() > 0,
                "an error without problems for {text:?}"
            );
            render(&e.problems);
            let _ = e.to_string();
        }
    }
}

fn render(problems: &[kforge_manifest::Problem]) {
    let handler =
        miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor());
    for p in problems {
        let mut out = String::new();
        handler.render_report(&mut out, p).unwrap();
        let _ = p.summary();
    }
}

#[test]
fn mutated_manifests_never_panic() {
    let iters: usize = std::env::var("KFORGE_FUZZ_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    // How many mutants got past the TOML syntax check into key validation, and how many were valid.
    let (mut semantic, mut valid) = (0, 0);
    for i in 0..iters {
        let seed = SEEDS[i % SEEDS.len()].as_bytes();
        let input = mutate(&mut rng, seed);
        exercise(&input);
        match parse_manifest(&String::from_utf8_lossy(&input), Path::new("b.toml")) {
            Ok(_) => valid += 1,
            Err(e) if e.problems.iter().all(|p| p.code != "manifest::toml-syntax") => semantic += 1,
            Err(_) => {}
        }
    }
    // Otherwise the fuzzer would only exercise the TOML syntax check.
    assert!(
        semantic > iters / 5,
        "only {semantic} of {iters} mutants reached key validation"
    );
    assert!(valid > 0, "no mutant stayed valid");
}
