//! Prints the CRDs as YAML, or with `--write` rewrites the committed copies:
//! `crds/yaml/*.yaml` and `charts/ankusa/templates/crds/*.yaml`.

use std::path::{Path, PathBuf};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--write") {
        let root = args
            .get(1)
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".."));
        let yaml_dir = root.join("crds/yaml");
        let chart_dir = root.join("charts/ankusa/templates/crds");
        for dir in [&yaml_dir, &chart_dir] {
            std::fs::create_dir_all(dir).expect("create output dir");
        }
        for (file, crd) in ankusa_crds::all() {
            std::fs::write(yaml_dir.join(file), ankusa_crds::to_yaml(&crd)).expect("write CRD");
            std::fs::write(chart_dir.join(file), ankusa_crds::to_chart_template(&crd))
                .expect("write chart CRD");
            eprintln!("wrote {file}");
        }
        return;
    }
    if !args.is_empty() {
        eprintln!("usage: crdgen [--write [REPO_ROOT]]");
        std::process::exit(2);
    }
    for (_, crd) in ankusa_crds::all() {
        print!("---\n{}", ankusa_crds::to_yaml(&crd));
    }
}
