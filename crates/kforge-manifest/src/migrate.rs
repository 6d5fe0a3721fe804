//! `update-build`: rewrite an edition 3/4 `build.toml` as edition 5, editing the TOML document in place
//! so that comments and formatting survive.

use std::path::Path;

use toml_edit::{DocumentMut, Item, Table, value};

use crate::{ProjectError, parse_manifest};

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("{0}")]
    Invalid(ProjectError),
    #[error(
        "{}: a legacy build.toml without `general.license` cannot be migrated: add e.g. `license = \"Apache-2.0\"` to [general] and run update-build again",
        .0.display()
    )]
    MissingLicense(std::path::PathBuf),
    #[error("{}: internal error: the migrated file does not validate: {message}", file.display())]
    Unvalidated {
        file: std::path::PathBuf,
        message: String,
    },
}

/// The edition-5 text of `text`, or `None` when it already is edition 5.
pub fn migrate_to_edition5(text: &str, file: &Path) -> Result<Option<String>, MigrateError> {
    let (manifest, _) = parse_manifest(text, file).map_err(MigrateError::Invalid)?;
    if manifest.edition == 5 {
        return Ok(None);
    }
    if manifest.general.license.is_none() {
        return Err(MigrateError::MissingLicense(file.to_path_buf()));
    }
    let mut doc: DocumentMut =
        text.parse()
            .map_err(|e: toml_edit::TomlError| MigrateError::Unvalidated {
                file: file.to_path_buf(),
                message: e.to_string(),
            })?;
    let had_framework = ["torch", "torch-noarch", "tvm-ffi"]
        .iter()
        .any(|k| doc.contains_key(k));
    let general = doc
        .get_mut("general")
        .and_then(Item::as_table_mut)
        .ok_or_else(|| MigrateError::Unvalidated {
            file: file.to_path_buf(),
            message: "[general] is not a standard table".to_string(),
        })?;
    // Keep the original key order; `version` (default 1) and `edition` go right after `name`/`version`.
    let mut order: Vec<String> = general.iter().map(|(k, _)| k.to_string()).collect();
    let anchor = |order: &Vec<String>, k: &str| order.iter().position(|x| x == k);
    if !general.contains_key("version") {
        general.insert("version", value(1));
        let at = anchor(&order, "name").map_or(0, |i| i + 1);
        order.insert(at, "version".to_string());
    }
    general.insert("edition", value(5));
    let at = anchor(&order, "version").map_or(order.len(), |i| i + 1);
    order.insert(at, "edition".to_string());
    let rank = |k: &str| order.iter().position(|x| x == k).unwrap_or(usize::MAX);
    general.sort_values_by(|k1, _, k2, _| rank(k1.get()).cmp(&rank(k2.get())));
    if !had_framework {
        // Legacy files without a framework table are noarch kernels.
        doc.insert("torch-noarch", Item::Table(Table::new()));
    }
    let out = doc.to_string();
    match parse_manifest(&out, file) {
        Ok((m, _)) if m.edition == 5 => Ok(Some(out)),
        Ok(_) => Err(MigrateError::Unvalidated {
            file: file.to_path_buf(),
            message: "the result is not edition 5".to_string(),
        }),
        Err(e) => Err(MigrateError::Unvalidated {
            file: file.to_path_buf(),
            message: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edition4_gains_edition_and_keeps_comments() {
        let v4 = "# my kernel\n[general]\nname = \"relu\" # the name\nversion = 2\nlicense = \"MIT\"\nbackends = [\"cpu\"]\n\n# binding\n[torch]\nsrc = []\n";
        let out = migrate_to_edition5(v4, Path::new("build.toml"))
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            "# my kernel\n[general]\nname = \"relu\" # the name\nversion = 2\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cpu\"]\n\n# binding\n[torch]\nsrc = []\n"
        );
        // Idempotent: an edition 5 file needs nothing.
        assert!(
            migrate_to_edition5(&out, Path::new("build.toml"))
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn legacy_gets_version_and_noarch() {
        let v3 = "[general]\nname = \"act\"\nlicense = \"MIT\"\nbackends = [\"cuda\"]\n";
        let out = migrate_to_edition5(v3, Path::new("build.toml"))
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            "[general]\nname = \"act\"\nversion = 1\nedition = 5\nlicense = \"MIT\"\nbackends = [\"cuda\"]\n\n[torch-noarch]\n"
        );
        let (m, _) = parse_manifest(&out, Path::new("build.toml")).unwrap();
        assert_eq!(m.general.version, Some(1));
    }

    #[test]
    fn legacy_without_license_is_refused() {
        let v3 = "[general]\nname = \"act\"\nbackends = [\"cuda\"]\n";
        let err = migrate_to_edition5(v3, Path::new("k/build.toml")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "k/build.toml: a legacy build.toml without `general.license` cannot be migrated: add e.g. `license = \"Apache-2.0\"` to [general] and run update-build again"
        );
    }

    #[test]
    fn invalid_files_are_not_migrated() {
        let bad = "[general]\nname = \"act\"\nlicense = \"MIT\"\nbackends = [\"cdua\"]\n";
        let err = migrate_to_edition5(bad, Path::new("build.toml")).unwrap_err();
        assert!(matches!(err, MigrateError::Invalid(_)));
        assert!(err.to_string().contains("unknown backend `cdua`"), "{err}");
    }
}
