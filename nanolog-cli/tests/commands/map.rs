//! The README's map of the rooms ("Where things are") holds against the
//! tree: every source file of every crate is in a row (its own, or its
//! folder's, which names it), and every row and every file a folder's row
//! names is there.

use std::path::{Path, PathBuf};

/// The workspace's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The map's rows: the room (a file, or a folder ending in `/`) and what
/// the row says of it.
fn rows(readme: &str) -> Vec<(String, String)> {
    let at = readme
        .find("### Where things are")
        .expect("the README's map");
    readme[at..]
        .lines()
        .skip_while(|l| !l.starts_with("| room |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[1].trim_matches('`').to_owned(), cells[2].to_owned())
        })
        .collect()
}

/// Every `.rs` file under `dir`, relative to the root, with `/`.
fn rust_files(dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p.strip_prefix(root()).unwrap().to_string_lossy();
            out.push(rel.replace('\\', "/"));
        }
    }
}

/// The names in backticks of `text` that are files or folders (`x.rs`,
/// `dir/`, `dir/x.rs`).
fn named(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|n| n.ends_with(".rs") || n.ends_with('/'))
        .collect()
}

#[test]
fn the_readme_map_names_every_source_file_and_nothing_gone() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let rows = rows(&readme);
    assert!(rows.len() > 20, "{} rows", rows.len());
    let mut missing = Vec::new();
    for (room, says) in &rows {
        let path = root().join(room);
        if !path.exists() {
            missing.push(format!("{room} (a row)"));
            continue;
        }
        if room.ends_with('/') {
            // What a folder's row names is in it (at any depth).
            let mut inside = Vec::new();
            rust_files(&path, &mut inside);
            for n in named(says) {
                let found = inside.iter().any(|f| {
                    let rel = &f[room.len()..];
                    rel == n
                        || rel.ends_with(&format!("/{n}"))
                        || (n.ends_with('/') && rel.contains(n))
                });
                if !found {
                    missing.push(format!("{room}{n} (named in {room}'s row)"));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the map names what is not there: {missing:#?}"
    );

    let mut files = Vec::new();
    for dir in [
        "src",
        "nanolog-macros/src",
        "nanolog-runtime/src",
        "nanolog-cli/src",
    ] {
        rust_files(&root().join(dir), &mut files);
    }
    let mut unmapped = Vec::new();
    for f in &files {
        let own = rows.iter().any(|(room, _)| room == f);
        let folder = rows.iter().any(|(room, says)| {
            room.ends_with('/') && f.starts_with(room.as_str()) && {
                let rel = &f[room.len()..];
                let name = rel.rsplit('/').next().unwrap_or(rel);
                says.contains(&format!("`{rel}`")) || says.contains(&format!("`{name}`"))
            }
        });
        if !own && !folder {
            unmapped.push(f.clone());
        }
    }
    assert!(
        unmapped.is_empty(),
        "source files in no row of the README's map (\"Where things are\"): {unmapped:#?}"
    );
}

/// The project's documents stand alone: no source file, manifest or
/// document of the repository cites a document outside it (the team's
/// interface contract, cited by its name and a section number, which
/// users never see).
#[test]
fn no_file_cites_a_document_outside_the_repository() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                if !matches!(name.as_str(), "target" | ".git" | "node_modules") {
                    walk(&p, out);
                }
            } else if ["rs", "md", "toml", "sh"]
                .iter()
                .any(|x| name.ends_with(&format!(".{x}")))
                || name == "run"
            {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&root(), &mut files);
    assert!(files.len() > 100, "{} files", files.len());
    let citing: Vec<String> = files
        .iter()
        .filter(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains(concat!("CONTRACT", " §"))))
        .map(|f| f.display().to_string())
        .collect();
    assert!(
        citing.is_empty(),
        "files citing a document outside the repository: {citing:#?}"
    );
}
