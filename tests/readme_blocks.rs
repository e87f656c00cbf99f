//! Every Rust block of the README, as a user pastes it: a new Cargo project
//! whose `[dependencies]` are the README's Install block (its `path` pointed
//! at this checkout, nothing else changed), each block one binary of it,
//! built with cargo and run in a directory of its own. A block that needs a
//! crate the Install block does not list fails to build here, as it would
//! for the user. The set-up block's log must hold its `tracing` fields and
//! its `log` key-values.
//!
//! The project uses this workspace's Cargo.lock (the versions CI tested,
//! already downloaded, so it builds offline) and a target directory of its
//! own under `target/`, kept between runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nanolog::reader::{Event, Filter, LogFile, Merge};

mod common;
use common::SpawnReaped;

const README: &str = include_str!("../README.md");

/// The body of the first fenced block of `lang` after `heading`.
fn block_after(heading: &str, lang: &str) -> String {
    let at = README
        .find(heading)
        .unwrap_or_else(|| panic!("README has no {heading:?}"));
    fenced(&README[at..], lang)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no {lang} block after {heading:?}"))
}

/// Every fenced block of `lang` in `text`, its indentation (a block in a
/// list item) taken off.
fn fenced(text: &str, lang: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let indent = line.len() - line.trim_start().len();
        if line.trim_start() != format!("```{lang}") {
            continue;
        }
        let mut body = String::new();
        for l in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                break;
            }
            body.push_str(l.get(indent..).unwrap_or(l.trim_start()));
            body.push('\n');
        }
        blocks.push(body);
    }
    blocks
}

/// Runs `cmd` to its end, at most `limit`; panics with its output if it
/// fails or runs over.
fn run(cmd: &mut Command, limit: Duration, what: &str) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let (out, err) = (dir.join("readme-blocks.out"), dir.join("readme-blocks.err"));
    let mut child = cmd
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn_reaped();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "{what}: not done in {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = |p: &PathBuf| std::fs::read_to_string(p).unwrap_or_default();
    assert!(
        status.success(),
        "{what}: {status}\nstdout:\n{}\nstderr:\n{}",
        text(&out),
        text(&err)
    );
}

/// The messages of every record of the log at `path` (its finished files
/// too), as `nanolog decode` prints them.
fn messages(path: &Path) -> Vec<String> {
    let mut files = vec![LogFile::open(path).unwrap()];
    for (f, _) in nanolog::reader::finished_files(path).unwrap_or_default() {
        files.push(LogFile::open(f).unwrap());
    }
    Merge::new(&files, Filter::default())
        .filter_map(|e| match e {
            Event::Record(r) => Some(r.message()),
            _ => None,
        })
        .collect()
}

#[test]
fn every_readme_rust_block_builds_and_runs_with_the_install_dependencies() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let deps = block_after("## Install", "toml");
    assert!(deps.contains("[dependencies]"), "{deps}");
    let pointed = deps.replace(
        "path = \"../nanolog\"",
        &format!("path = {:?}", repo.to_str().unwrap()),
    );
    assert_ne!(pointed, deps, "the Install block names nanolog by path");
    let blocks = fenced(README, "rust");
    assert!(blocks.len() >= 3, "{} rust blocks", blocks.len());

    // Under target/ (the toolchain file above it applies), a workspace of
    // its own.
    let project = repo.join("target/readme-blocks");
    let bins = project.join("src/bin");
    let _ = std::fs::remove_dir_all(project.join("src"));
    std::fs::create_dir_all(&bins).unwrap();
    std::fs::write(
        project.join("Cargo.toml"),
        format!(
            "[package]\nname = \"readme-blocks\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n{pointed}\n[workspace]\n"
        ),
    )
    .unwrap();
    std::fs::copy(repo.join("Cargo.lock"), project.join("Cargo.lock")).unwrap();
    for (i, b) in blocks.iter().enumerate() {
        std::fs::write(bins.join(format!("block{i}.rs")), b).unwrap();
    }
    run(
        Command::new(env!("CARGO"))
            .args(["build", "--offline", "--bins", "--target-dir"])
            .arg(project.join("target"))
            .current_dir(&project)
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("RUSTFLAGS")
            .stdin(Stdio::null()),
        Duration::from_secs(20 * 60),
        "building the README's blocks",
    );

    for (i, b) in blocks.iter().enumerate() {
        let dir = project.join(format!("run/block{i}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        run(
            Command::new(project.join(format!("target/debug/block{i}")))
                .current_dir(&dir)
                .env_remove("RUST_LOG")
                .stdin(Stdio::null()),
            Duration::from_secs(60),
            &format!("README block {i}:\n{b}"),
        );
        // Each block logs into a file under its directory: the set-up's
        // `logs/app.nlog`, the rolled example's `logs/rolled.nlog`, the
        // first block's `app.nlog`.
        let path = ["logs/app.nlog", "logs/rolled.nlog", "app.nlog"]
            .into_iter()
            .find(|p| b.contains(&format!("\"{p}\"")))
            .unwrap_or_else(|| panic!("block {i} names none of the known log paths"));
        let got = messages(&dir.join(path));
        assert!(!got.is_empty(), "block {i} logged nothing");
        if b.contains("capture_log") {
            assert!(
                got.iter()
                    .any(|m| m.contains("order placed") && m.contains("order=7")),
                "the tracing event's field: {got:?}"
            );
            assert!(
                got.iter()
                    .any(|m| m.contains("connection checked out") && m.contains("conn=3")),
                "the log record's key-value: {got:?}"
            );
        }
    }
}
