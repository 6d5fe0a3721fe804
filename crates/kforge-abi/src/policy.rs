//! manylinux policy data (PEP 600 levels): the newest symbol version of each versioned system library a
//! level allows, per architecture, and the system libraries a wheel may expect on the user's machine.
//! Facts from auditwheel's policy file, reduced to maxima (its allow-lists have no gaps that matter).

/// Newest allowed version per symbol-version namespace for one (level, arch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolLimits {
    pub glibc: &'static [u32],
    pub glibcxx: &'static [u32],
    pub cxxabi: &'static [u32],
    pub gcc: &'static [u32],
}

impl SymbolLimits {
    /// The limit for a namespace such as `GLIBCXX`; None when the namespace is not restricted.
    pub fn max_for(&self, namespace: &str) -> Option<&'static [u32]> {
        match namespace {
            "GLIBC" => Some(self.glibc),
            "GLIBCXX" => Some(self.glibcxx),
            "CXXABI" => Some(self.cxxabi),
            "GCC" => Some(self.gcc),
            _ => None,
        }
    }
}

struct Level {
    name: &'static str,
    alias: Option<&'static str>,
    x86_64: SymbolLimits,
    aarch64: Option<SymbolLimits>,
}

const fn limits(
    glibc: &'static [u32],
    glibcxx: &'static [u32],
    cxxabi: &'static [u32],
    gcc: &'static [u32],
) -> SymbolLimits {
    SymbolLimits {
        glibc,
        glibcxx,
        cxxabi,
        gcc,
    }
}

const LEVELS: &[Level] = &[
    Level {
        name: "manylinux_2_5",
        alias: Some("manylinux1"),
        x86_64: limits(&[2, 5], &[3, 4, 8], &[1, 3, 1], &[4, 2, 0]),
        aarch64: None,
    },
    Level {
        name: "manylinux_2_12",
        alias: Some("manylinux2010"),
        x86_64: limits(&[2, 12], &[3, 4, 13], &[1, 3, 3], &[4, 3, 0]),
        aarch64: None,
    },
    Level {
        name: "manylinux_2_17",
        alias: Some("manylinux2014"),
        x86_64: limits(&[2, 17], &[3, 4, 19], &[1, 3, 7], &[4, 8, 0]),
        aarch64: Some(limits(&[2, 18], &[3, 4, 19], &[1, 3, 7], &[4, 7, 0])),
    },
    Level {
        name: "manylinux_2_24",
        alias: None,
        x86_64: limits(&[2, 24], &[3, 4, 22], &[1, 3, 10], &[4, 8, 0]),
        aarch64: Some(limits(&[2, 24], &[3, 4, 22], &[1, 3, 10], &[4, 7, 0])),
    },
    Level {
        name: "manylinux_2_28",
        alias: None,
        x86_64: limits(&[2, 28], &[3, 4, 24], &[1, 3, 11], &[7, 0, 0]),
        aarch64: Some(limits(&[2, 28], &[3, 4, 24], &[1, 3, 11], &[7, 0, 0])),
    },
    Level {
        name: "manylinux_2_31",
        alias: None,
        x86_64: limits(&[2, 31], &[3, 4, 28], &[1, 3, 12], &[7, 0, 0]),
        aarch64: Some(limits(&[2, 31], &[3, 4, 28], &[1, 3, 12], &[7, 0, 0])),
    },
    Level {
        name: "manylinux_2_34",
        alias: None,
        x86_64: limits(&[2, 34], &[3, 4, 29], &[1, 3, 13], &[7, 0, 0]),
        aarch64: Some(limits(&[2, 34], &[3, 4, 29], &[1, 3, 13], &[11, 0])),
    },
    Level {
        name: "manylinux_2_35",
        alias: None,
        x86_64: limits(&[2, 35], &[3, 4, 30], &[1, 3, 13], &[12, 0, 0]),
        aarch64: Some(limits(&[2, 35], &[3, 4, 30], &[1, 3, 13], &[11, 0])),
    },
];

/// Every known level name (aliases excluded), oldest first.
pub fn level_names() -> Vec<&'static str> {
    LEVELS.iter().map(|l| l.name).collect()
}

/// The canonical name for a level or alias (`manylinux2014` → `manylinux_2_17`).
pub fn canonical_name(name: &str) -> Option<&'static str> {
    LEVELS
        .iter()
        .find(|l| l.name == name || l.alias == Some(name))
        .map(|l| l.name)
}

/// Symbol limits of `level` for an ELF machine ("x86_64" / "aarch64"); None when the level does not
/// cover that architecture.
pub fn symbol_limits(level: &str, arch: &str) -> Option<&'static SymbolLimits> {
    let l = LEVELS
        .iter()
        .find(|l| l.name == level || l.alias == Some(level))?;
    match arch {
        "x86_64" => Some(&l.x86_64),
        "aarch64" => l.aarch64.as_ref(),
        _ => None,
    }
}

/// System libraries every manylinux level lets a wheel load from the user's machine.
const SYSTEM_LIBS: &[&str] = &[
    "libatomic.so.1",
    "libgcc_s.so.1",
    "libstdc++.so.6",
    "libm.so.6",
    "libanl.so.1",
    "libdl.so.2",
    "librt.so.1",
    "libc.so.6",
    "libnsl.so.1",
    "libutil.so.1",
    "libpthread.so.0",
    "libX11.so.6",
    "libXext.so.6",
    "libXrender.so.1",
    "libICE.so.6",
    "libSM.so.6",
    "libGL.so.1",
    "libgobject-2.0.so.0",
    "libgthread-2.0.so.0",
    "libglib-2.0.so.0",
    "libresolv.so.2",
    "libexpat.so.1",
    "libz.so.1",
];

/// Whether `lib` may be a DT_NEEDED of a wheel at `level` without shipping it (the dynamic loader counts).
pub fn is_system_lib(level: &str, lib: &str) -> bool {
    if lib.starts_with("ld-linux") {
        return true;
    }
    // libmvec joined the list with the glibc 2.2x levels.
    if lib == "libmvec.so.1" {
        return !matches!(
            canonical_name(level),
            Some("manylinux_2_5" | "manylinux_2_12" | "manylinux_2_17")
        );
    }
    SYSTEM_LIBS.contains(&lib)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_aliases() {
        assert_eq!(canonical_name("manylinux2014"), Some("manylinux_2_17"));
        assert_eq!(canonical_name("manylinux_2_28"), Some("manylinux_2_28"));
        assert_eq!(canonical_name("manylinux_2_29"), None);
        let l = symbol_limits("manylinux_2_28", "x86_64").unwrap();
        assert_eq!(l.max_for("GLIBCXX"), Some(&[3, 4, 24][..]));
        assert_eq!(l.max_for("GCC"), Some(&[7, 0, 0][..]));
        assert_eq!(l.max_for("ZLIB"), None);
        assert!(symbol_limits("manylinux_2_5", "aarch64").is_none());
        assert_eq!(
            symbol_limits("manylinux_2_17", "aarch64").unwrap().glibc,
            &[2, 18]
        );
    }

    #[test]
    fn system_libs() {
        assert!(is_system_lib("manylinux_2_28", "libstdc++.so.6"));
        assert!(is_system_lib("manylinux_2_28", "ld-linux-x86-64.so.2"));
        assert!(is_system_lib("manylinux_2_28", "libmvec.so.1"));
        assert!(!is_system_lib("manylinux_2_17", "libmvec.so.1"));
        assert!(!is_system_lib("manylinux_2_28", "libcurl.so.4"));
        assert!(!is_system_lib("manylinux_2_28", "libpython3.11.so.1.0"));
    }
}
