//! MFMA instructions per kernel, read from `llvm-objdump -d` of a code object.

use std::collections::BTreeMap;

/// Matrix-core instruction mnemonics counted per function symbol of a disassembly listing.
pub(crate) fn matrix_instructions(listing: &str) -> BTreeMap<String, BTreeMap<String, u32>> {
    let mut out: BTreeMap<String, BTreeMap<String, u32>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in listing.lines() {
        // Function headers look like `0000000000001900 <name>:`.
        if let Some(rest) = line.strip_suffix(">:")
            && let Some((addr, name)) = rest.split_once(" <")
            && !addr.is_empty()
            && addr.chars().all(|c| c.is_ascii_hexdigit())
        {
            current = Some(name.to_string());
            continue;
        }
        let Some(func) = &current else { continue };
        let Some(mnemonic) = line.split_whitespace().next() else {
            continue;
        };
        if mnemonic.starts_with("v_mfma") || mnemonic.starts_with("v_smfmac") {
            *out.entry(func.clone())
                .or_default()
                .entry(mnemonic.to_string())
                .or_default() += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_mfma_per_function() {
        let listing = "\
g.co:\tfile format elf64-amdgpu

Disassembly of section .text:

0000000000001900 <gemm>:
\ts_load_dwordx2 s[0:1], s[0:1], 0x0                        // 000000001900: C0060000 00000000
\tv_mfma_f32_32x32x16_fp8_fp8 a[0:15], v[2:3], v[6:7], 0     // 000000002ADC: D3F78000 02020D02
\tv_mfma_f32_32x32x16_fp8_fp8 a[16:31], v[2:3], v[10:11], 0  // 000000002AE8: D3F78010 02021502
\ts_endpgm

0000000000002c00 <relu>:
\tv_max_f32_e32 v1, 0, v1
\tv_mfma_f32_16x16x32_fp8_fp8 v[0:3], v[4:5], v[6:7], 0
";
        let m = matrix_instructions(listing);
        assert_eq!(m["gemm"]["v_mfma_f32_32x32x16_fp8_fp8"], 2);
        assert_eq!(m["relu"]["v_mfma_f32_16x16x32_fp8_fp8"], 1);
        assert_eq!(m.len(), 2);
    }
}
