//! Any bytes as build.toml: parse, validate, migrate and render the diagnostics; none may panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let file = Path::new("fuzz/build.toml");
    let problems = match kforge_manifest::parse_manifest(&text, file) {
        Ok((manifest, warnings)) => {
            let _ = manifest.noarch_backends();
            let _ = kforge_manifest::plan::plan(&manifest, &kforge_manifest::plan::hf_build_matrix());
            let _ = kforge_manifest::migrate::migrate_to_edition5(&text, file);
            warnings
        }
        Err(e) => {
            assert!(e.errors().count() > 0, "a rejected manifest must name its errors");
            e.problems
        }
    };
    let handler =
        miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor());
    for p in &problems {
        let mut out = String::new();
        handler.render_report(&mut out, p).expect("rendering to a String");
    }
});
