//! The runtime's layers (`LAYERS.md`) hold against its code: every file of
//! `src/` is in exactly one layer, and every import of a file (`use crate::`,
//! `use super::`, a `crate::` path in its code) reaches its own layer or one
//! its layer may use. Tests (`#[cfg(test)] mod tests`) are left out: a test
//! may reach anything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A layer as `LAYERS.md` states it.
struct Layer {
    name: String,
    paths: Vec<String>,
    uses: BTreeSet<String>,
}

/// The rows of the table in `LAYERS.md`.
fn layers(md: &str) -> Vec<Layer> {
    let mut out = Vec::new();
    for line in md.lines() {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | name | files | uses | says |: six cells with the empty ends.
        if cells.len() != 6 || cells[1] == "layer" || cells[1].starts_with("---") {
            continue;
        }
        let paths = cells[2]
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        out.push(Layer {
            name: cells[1].to_owned(),
            paths,
            uses: cells[3].split_whitespace().map(str::to_owned).collect(),
        });
    }
    out
}

/// Every `.rs` file under `dir`, as paths relative to `root` with `/`.
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(root, &p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy();
            out.push(rel.replace('\\', "/"));
        }
    }
}

/// The file's code: comments cut off, its tests module left out.
fn code(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]")
            && lines
                .peek()
                .is_some_and(|n| n.trim_start().starts_with("mod tests"))
        {
            break;
        }
        // (A `//` inside a string cuts the line short: an import is then
        // missed, never made up.)
        let line = line.split("//").next().unwrap_or("");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The module path of a file (`reader/file.rs` → `reader::file`; a
/// `mod.rs` or `lib.rs` is its folder's).
fn module_of(file: &str) -> Vec<String> {
    let stem = file.trim_end_matches(".rs");
    let mut parts: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The paths an import names: `a::{b, c::{d, e}}` → `a::b`, `a::c::d`,
/// `a::c::e` (`self` is the path itself; renames are cut).
fn expand(tree: &str) -> Vec<Vec<String>> {
    // Renames cut while the words stand apart (`as` inside a name, `crash`,
    // is no rename).
    let words: Vec<&str> = tree.split_whitespace().collect();
    let mut kept = String::new();
    let mut i = 0;
    while i < words.len() {
        if words[i] == "as" && i + 1 < words.len() {
            // The new name, up to a separator it may carry (`e},`).
            let next = words[i + 1];
            let cut = next.find([',', '}']).unwrap_or(next.len());
            kept.push_str(&next[cut..]);
            i += 2;
            continue;
        }
        kept.push_str(words[i]);
        i += 1;
    }
    let tree = kept;
    let mut out = Vec::new();
    expand_into(&tree, &[], &mut out);
    out
}

fn expand_into(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    // The items of a brace list, split at top-level commas.
    let mut depth = 0;
    let mut start = 0;
    let mut items = Vec::new();
    for (i, c) in tree.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&tree[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&tree[start..]);
    for item in items.into_iter().filter(|i| !i.is_empty()) {
        match item.find("::{") {
            Some(at) if item.ends_with('}') => {
                let mut p = prefix.to_vec();
                p.extend(item[..at].split("::").map(str::to_owned));
                expand_into(&item[at + 3..item.len() - 1], &p, out);
            }
            _ if item.starts_with('{') && item.ends_with('}') => {
                expand_into(&item[1..item.len() - 1], prefix, out);
            }
            _ => {
                let mut p = prefix.to_vec();
                p.extend(
                    item.split("::")
                        .filter(|s| !s.is_empty() && *s != "self" && *s != "*")
                        .map(str::to_owned),
                );
                out.push(p);
            }
        }
    }
}

/// The paths after each `crate::` or `super::` in `code` (imports, and paths
/// written out in the code), as written: `(is_super, tree)`.
fn imports(code: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for (key, is_super) in [("crate::", false), ("super::", true)] {
        let mut from = 0;
        while let Some(at) = code[from..].find(key) {
            let start = from + at;
            from = start + key.len();
            // `my_crate::` or `a::super::` is not one.
            let before = code[..start].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[from..];
            // The path: identifiers and `::`, with one brace list (a `use`).
            let mut end = 0;
            let mut depth = 0;
            for (i, c) in rest.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth > 0 => depth -= 1,
                    c if depth > 0 || c.is_alphanumeric() || c == '_' || c == ':' => {}
                    c if c.is_whitespace() && depth > 0 => {}
                    ',' if depth > 0 => {}
                    _ => {
                        end = i;
                        break;
                    }
                }
                end = i + c.len_utf8();
            }
            let mut tree = rest[..end].trim_end_matches(':').to_owned();
            if depth > 0 {
                tree.clear();
            }
            out.push((is_super, tree));
        }
    }
    out
}

/// Whether `text` defines an item named `name` (a function, type, constant
/// or static, at any depth).
fn defines(text: &str, name: &str) -> bool {
    ["fn", "struct", "enum", "type", "const", "static", "trait"]
        .iter()
        .any(|kw| {
            text.match_indices(&format!("{kw} {name}")).any(|(i, m)| {
                let after = text[i + m.len()..].chars().next();
                !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
        })
}

#[test]
fn every_file_is_in_one_layer_and_imports_only_what_its_layer_may_use() {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let md = std::fs::read_to_string(manifest.join("LAYERS.md")).expect("LAYERS.md");
    let layers = layers(&md);
    assert!(layers.len() >= 5, "LAYERS.md has {} layers", layers.len());
    let names: BTreeSet<&str> = layers.iter().map(|l| l.name.as_str()).collect();
    for l in &layers {
        for u in &l.uses {
            assert!(
                names.contains(u.as_str()),
                "{} uses {u}: no such layer",
                l.name
            );
        }
    }

    let src = manifest.join("src");
    let mut files = Vec::new();
    rust_files(&src, &src, &mut files);
    // Each file's layer.
    let mut layer_of: BTreeMap<&str, &str> = BTreeMap::new();
    let mut problems = Vec::new();
    for f in &files {
        let owners: Vec<&str> = layers
            .iter()
            .filter(|l| {
                l.paths
                    .iter()
                    .any(|p| p == f || (p.ends_with('/') && f.starts_with(p.as_str())))
            })
            .map(|l| l.name.as_str())
            .collect();
        match owners[..] {
            [one] => {
                layer_of.insert(f, one);
            }
            [] => problems.push(format!("{f} is in no layer")),
            _ => problems.push(format!("{f} is in layers {owners:?}")),
        }
    }
    for l in &layers {
        for p in &l.paths {
            if !files
                .iter()
                .any(|f| f == p || (p.ends_with('/') && f.starts_with(p.as_str())))
            {
                problems.push(format!("{}: {p} holds no file", l.name));
            }
        }
    }

    // The names lib.rs re-exports (`crate::Level`), to their modules.
    let lib = code(&std::fs::read_to_string(src.join("lib.rs")).unwrap());
    let mut reexports: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for stmt in lib.split(';') {
        let s = stmt.trim();
        let Some(tree) = s
            .strip_prefix("pub use ")
            .or_else(|| s.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        for path in expand(tree) {
            if let Some((name, module)) = path.split_last() {
                reexports.insert(name.clone(), module.to_vec());
            }
        }
    }
    let module_files: BTreeMap<Vec<String>, &str> =
        files.iter().map(|f| (module_of(f), f.as_str())).collect();
    // The file a path (from the crate's root) is in: its longest prefix that
    // is a module.
    let file_of = |path: &[String]| -> &str {
        let mut path = path.to_vec();
        // (A module's name is the module, whatever lib.rs re-exports by it.)
        let is_module = path
            .first()
            .is_some_and(|n| module_files.contains_key(std::slice::from_ref(n)));
        if let Some(target) = path
            .first()
            .filter(|_| !is_module)
            .and_then(|n| reexports.get(n))
        {
            let mut p = target.clone();
            p.extend(path[1..].iter().cloned());
            path = p;
        }
        for k in (0..=path.len()).rev() {
            if let Some(f) = module_files.get(&path[..k]) {
                return f;
            }
        }
        "lib.rs"
    };

    let mut edges = 0;
    for f in &files {
        let text = std::fs::read_to_string(src.join(f)).unwrap();
        let here = module_of(f);
        for (is_super, tree) in imports(&code(&text)) {
            for path in expand(&tree) {
                // `super::` in a module inline in the file (`mod imp { .. }`)
                // names the file's own items.
                if is_super && path.first().is_some_and(|n| defines(&text, n)) {
                    continue;
                }
                let full = if is_super {
                    let mut p = here[..here.len().saturating_sub(1)].to_vec();
                    p.extend(path);
                    p
                } else {
                    path
                };
                let to = file_of(&full);
                if to == f {
                    continue;
                }
                edges += 1;
                let (a, b) = (layer_of.get(f.as_str()), layer_of.get(to));
                let (Some(&a), Some(&b)) = (a, b) else {
                    continue;
                };
                let allowed = a == b
                    || layers
                        .iter()
                        .find(|l| l.name == a)
                        .is_some_and(|l| l.uses.contains(b));
                if !allowed {
                    problems.push(format!(
                        "{f} ({a}) uses {to} ({b}) through `{}`",
                        full.join("::")
                    ));
                }
            }
        }
    }
    assert!(
        edges > 100,
        "only {edges} imports read: the reading is broken"
    );
    problems.sort();
    problems.dedup();
    assert!(
        problems.is_empty(),
        "the layers of LAYERS.md do not hold:\n{}",
        problems.join("\n")
    );
}

/// The reading of imports itself: brace lists, nesting, renames, `self`.
#[test]
fn imports_are_read_as_written() {
    let paths = |s: &str| -> Vec<String> {
        imports(s)
            .into_iter()
            .flat_map(|(sup, t)| {
                expand(&t)
                    .into_iter()
                    .map(move |p| format!("{}{}", if sup { "super::" } else { "" }, p.join("::")))
            })
            .collect()
    };
    assert_eq!(
        paths("use crate::wire::{dict, frame::{begin_entry, end_entry as e}, self};"),
        [
            "wire::dict",
            "wire::frame::begin_entry",
            "wire::frame::end_entry",
            "wire"
        ]
    );
    assert_eq!(
        paths("let x = crate::channel::thread_id(); my_crate::no; use super::{A, b::C};"),
        ["channel::thread_id", "super::A", "super::b::C"]
    );
    assert_eq!(paths("use crate::{\n    a::B,\n    c,\n};"), ["a::B", "c"]);
    // `as` inside a name is no rename.
    assert_eq!(
        paths("use crate::crash::{Area, layout::PAGE as P}; crate::crash::Slot"),
        ["crash::Area", "crash::layout::PAGE", "crash::Slot"]
    );
}
