//! Per-arch hardware limits and the occupancy estimate (waves per SIMD), computed the way LLVM's AMDGPU
//! backend does for its `Occupancy [waves/SIMD]` remark. Only the GCN/CDNA (gfx9) family is modelled;
//! RDNA archs get resource numbers but no occupancy.

use serde::Serialize;

/// Hardware limits of one gfx arch that a kernel must respect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ArchLimits {
    /// Most VGPRs one wave may hold (AGPRs included where the file is unified).
    pub max_vgprs: u32,
    /// Most SGPRs one wave may hold, counting the VCC/FLAT_SCRATCH/XNACK_MASK reserve.
    pub max_sgprs: u32,
    /// LDS bytes one workgroup may allocate.
    pub max_lds_bytes: u32,
    /// Most waves a SIMD keeps resident.
    pub max_waves_per_simd: u32,
    #[serde(skip)]
    vgpr_file: u32,
    #[serde(skip)]
    vgpr_granule: u32,
    #[serde(skip)]
    lds_per_cu: u32,
}

/// Addressable SGPRs on gfx9 (s0..s101) plus the 6 registers the compiler may reserve.
const GFX9_SGPRS: u32 = 102 + 6;

/// Limits for the GCN/CDNA archs kforge compiles for; None for archs not modelled (RDNA).
pub fn arch_limits(arch: &str) -> Option<ArchLimits> {
    // (VGPRs per lane the SIMD's file holds, allocation granule, max waves/SIMD, LDS per CU)
    let (vgpr_file, vgpr_granule, max_waves, lds) = match arch {
        "gfx906" => (256, 4, 10, 64 * 1024),
        // gfx908: separate 256-entry VGPR and AGPR files; .vgpr_count is max(arch, agpr).
        "gfx908" => (256, 4, 10, 64 * 1024),
        // Unified 512-entry file (arch VGPRs + AGPRs).
        "gfx90a" | "gfx942" => (512, 8, 8, 64 * 1024),
        "gfx950" => (512, 8, 8, 160 * 1024),
        _ => return None,
    };
    Some(ArchLimits {
        max_vgprs: if vgpr_file == 512 { 512 } else { 256 },
        max_sgprs: GFX9_SGPRS,
        max_lds_bytes: lds,
        max_waves_per_simd: max_waves,
        vgpr_file,
        vgpr_granule,
        lds_per_cu: lds,
    })
}

fn align_to(x: u32, granule: u32) -> u32 {
    x.div_ceil(granule) * granule
}

impl ArchLimits {
    /// Waves per SIMD allowed by the VGPR count (`vgpr_count` as the code object metadata reports it).
    pub fn waves_by_vgprs(&self, vgpr_count: u32) -> u32 {
        let per_wave = align_to(vgpr_count.max(1), self.vgpr_granule);
        (self.vgpr_file / per_wave).clamp(1, self.max_waves_per_simd)
    }

    /// Waves per SIMD allowed by the SGPR count (LLVM's table for gfx8/gfx9).
    pub fn waves_by_sgprs(&self, sgpr_count: u32) -> u32 {
        let waves = match sgpr_count {
            0..=80 => 10,
            81..=88 => 9,
            89..=100 => 8,
            101..=112 => 7,
            113..=128 => 6,
            129..=144 => 5,
            145..=168 => 4,
            169..=200 => 3,
            201..=256 => 2,
            _ => 1,
        };
        waves.min(self.max_waves_per_simd)
    }

    /// Waves per SIMD allowed by the workgroup's LDS, for workgroups of `workgroup_size` work-items.
    pub fn waves_by_lds(&self, lds_bytes: u32, workgroup_size: u32, wavefront_size: u32) -> u32 {
        if lds_bytes == 0 {
            return self.max_waves_per_simd;
        }
        let groups_per_cu = self.lds_per_cu / lds_bytes;
        let waves_per_group = workgroup_size.max(1).div_ceil(wavefront_size.max(1));
        // 4 SIMDs per CU on every gfx9 part.
        (groups_per_cu * waves_per_group / 4).clamp(1, self.max_waves_per_simd)
    }

    /// Waves per SIMD: the tightest of the three limits.
    pub fn occupancy(
        &self,
        vgpr_count: u32,
        sgpr_count: u32,
        lds_bytes: u32,
        workgroup_size: u32,
        wavefront_size: u32,
    ) -> u32 {
        self.waves_by_vgprs(vgpr_count)
            .min(self.waves_by_sgprs(sgpr_count))
            .min(self.waves_by_lds(lds_bytes, workgroup_size, wavefront_size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gfx942_vgpr_occupancy_follows_the_unified_file() {
        let l = arch_limits("gfx942").unwrap();
        assert_eq!(l.waves_by_vgprs(64), 8);
        assert_eq!(l.waves_by_vgprs(128), 4);
        assert_eq!(l.waves_by_vgprs(129), 3); // 136 per wave
        assert_eq!(l.waves_by_vgprs(322), 1);
        assert_eq!(l.waves_by_vgprs(512), 1);
    }

    #[test]
    fn sgpr_and_lds_limits() {
        let l = arch_limits("gfx942").unwrap();
        assert_eq!(l.waves_by_sgprs(100), 8);
        assert_eq!(l.waves_by_sgprs(106), 7);
        // 34 KiB per 256-thread group: one group (4 waves) per CU, one wave per SIMD.
        assert_eq!(l.waves_by_lds(34816, 256, 64), 1);
        // 16 KiB per 256-thread group: four groups, 16 waves per CU, 4 per SIMD.
        assert_eq!(l.waves_by_lds(16384, 256, 64), 4);
        assert_eq!(l.occupancy(96, 40, 0, 256, 64), 5);
    }

    #[test]
    fn rdna_is_not_modelled() {
        assert!(arch_limits("gfx1100").is_none());
        assert_eq!(arch_limits("gfx950").unwrap().max_lds_bytes, 160 * 1024);
    }
}
