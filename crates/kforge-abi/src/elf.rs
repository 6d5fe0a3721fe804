//! The dynamic-linking view of an ELF shared object: symbols with versions, DT_NEEDED, RPATH/RUNPATH.

use std::path::Path;

use object::elf;
use object::read::elf::{FileHeader, Sym};

use crate::AbiError;

pub(crate) struct Undefined {
    pub name: String,
    /// e.g. `GLIBC_2.32`.
    pub version: Option<String>,
    /// The library the version belongs to (from `.gnu.version_r`).
    pub library: Option<String>,
    pub weak: bool,
}

pub(crate) struct ElfInfo {
    pub machine: u16,
    pub needed: Vec<String>,
    pub runpaths: Vec<String>,
    pub undefined: Vec<Undefined>,
    pub defined: Vec<String>,
    pub unique: Vec<String>,
}

/// Map a file read-only. Large torch libraries are only touched where their dynamic tables are.
pub(crate) fn map(path: &Path) -> Result<memmap2::Mmap, AbiError> {
    let file = std::fs::File::open(path).map_err(|source| AbiError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    // SAFETY: the mapping is read-only and dropped before this check returns; a concurrent truncation of
    // a library being checked is outside what the checker guards against.
    unsafe { memmap2::Mmap::map(&file) }.map_err(|source| AbiError::Io {
        path: path.to_path_buf(),
        source,
    })
}

pub(crate) fn machine_name(machine: u16) -> &'static str {
    match machine {
        m if m == elf::EM_X86_64.0 => "x86_64",
        m if m == elf::EM_AARCH64.0 => "aarch64",
        m if m == elf::EM_PPC64.0 => "ppc64le",
        m if m == elf::EM_S390.0 => "s390x",
        _ => "unknown",
    }
}

pub(crate) fn parse_elf(path: &Path, data: &[u8]) -> Result<ElfInfo, AbiError> {
    let perr = |e: object::read::Error| AbiError::Parse {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    let header = elf::FileHeader64::<object::Endianness>::parse(data).map_err(perr)?;
    let endian = header.endian().map_err(perr)?;
    let sections = header.sections(endian, data).map_err(perr)?;
    let dynsym = sections
        .symbols(endian, data, elf::SHT_DYNSYM)
        .map_err(perr)?;
    let versions = sections.versions(endian, data).map_err(perr)?;
    let mut info = ElfInfo {
        machine: header.e_machine(endian).0,
        needed: Vec::new(),
        runpaths: Vec::new(),
        undefined: Vec::new(),
        defined: Vec::new(),
        unique: Vec::new(),
    };
    for (index, sym) in dynsym.enumerate() {
        let name = String::from_utf8_lossy(sym.name(endian, dynsym.strings()).map_err(perr)?);
        if name.is_empty() {
            continue;
        }
        if sym.st_bind() == elf::STB_GNU_UNIQUE {
            info.unique.push(name.to_string());
        }
        if sym.is_undefined(endian) {
            let (mut version, mut library) = (None, None);
            if let Some(v) = &versions
                && let Ok(Some(ver)) = v.version(v.version_index(endian, index).index())
            {
                version = Some(String::from_utf8_lossy(ver.name()).to_string());
                library = ver.file().map(|f| String::from_utf8_lossy(f).to_string());
            }
            info.undefined.push(Undefined {
                name: name.to_string(),
                version,
                library,
                weak: sym.st_bind() == elf::STB_WEAK,
            });
        } else if sym.st_bind() != elf::STB_LOCAL {
            info.defined.push(name.to_string());
        }
    }
    let dynamic = sections.dynamic_table(endian, data).map_err(perr)?;
    for d in &dynamic {
        let value = || String::from_utf8_lossy(dynamic.string(d).unwrap_or_default()).to_string();
        if d.tag == elf::DT_NEEDED {
            info.needed.push(value());
        } else if d.tag == elf::DT_RPATH || d.tag == elf::DT_RUNPATH {
            info.runpaths.extend(
                value()
                    .split(':')
                    .filter(|s| !s.is_empty())
                    .map(String::from),
            );
        }
    }
    Ok(info)
}
