//! FORMAT.md's worked example is decoded here, so the specification cannot
//! drift from the code: the hex dump in the document is parsed, checked
//! against bytes built with the writer's own encoders, and decoded.

use std::borrow::Cow;

use nanolog_runtime::reader::Role;
use nanolog_runtime::reader::{LogFile, Refresh, Value, Warning};
use nanolog_runtime::wire::{self, dict, header::Header, record, tag};
use nanolog_runtime::{ArgKind, Level, Piece, Spec};

fn entry(out: &mut Vec<u8>, t: u8, body: &[u8]) {
    out.push(t);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&wire::entry_crc(t, body).to_le_bytes());
    out.extend_from_slice(body);
}

/// The example file of FORMAT.md, built with the encoders.
fn example() -> Vec<u8> {
    let mut f = Header {
        version: 1,
        ticks_per_second: 1e9,
        base_tick: 1000,
        base_unix_ns: 1_795_000_000_000_000_000,
        pid: 42,
    }
    .encode()
    .to_vec();
    let pieces = [
        Piece::Lit(Cow::Borrowed("took ")),
        Piece::Arg(Spec::display(0)),
        Piece::Lit(Cow::Borrowed(" ms")),
    ];
    let mut b = Vec::new();
    dict::put_site(
        &mut b,
        &dict::SiteEntryRef {
            id: 1,
            level: Level::Info,
            file: "src/main.rs",
            line: 7,
            module: "app",
            format: "took {ms} ms",
            kinds: &[ArgKind::U32],
            pieces: &pieces,
            target: "app",
            names: &["ms"],
            role: Role::Record,
            message_pieces: usize::MAX,
            context_args: 0,
        },
    );
    entry(&mut f, tag::SITE, &b);
    b.clear();
    dict::put_thread(&mut b, 1, "main");
    entry(&mut f, tag::THREAD, &b);
    b.clear();
    wire::put_varint(&mut b, 1); // thread
    b.extend_from_slice(&2000u64.to_le_bytes()); // base tick
    for (delta, ms) in [(0u64, 12u32), (500, 300)] {
        wire::put_varint(&mut b, 1); // site
        wire::put_varint(&mut b, delta);
        record::compact(&[ArgKind::U32], &ms.to_le_bytes(), &mut b).unwrap();
    }
    entry(&mut f, tag::EXTENT, &b);
    b.clear();
    dict::put_clock(&mut b, 3000, 1_795_000_000_000_002_000);
    entry(&mut f, tag::CLOCK, &b);
    entry(&mut f, tag::END, &[]);
    f
}

/// The hex dump between the markers in FORMAT.md.
fn documented() -> Vec<u8> {
    let doc = include_str!("../../FORMAT.md");
    let start = doc.find("<!-- example:begin -->").expect("begin marker");
    let end = doc.find("<!-- example:end -->").expect("end marker");
    let mut bytes = Vec::new();
    for line in doc[start..end].lines() {
        let Some((_, hex)) = line.split_once(": ") else {
            continue;
        };
        let hex = hex.split("  ").next().unwrap_or("");
        for pair in hex.split_whitespace() {
            bytes.push(u8::from_str_radix(pair, 16).expect("hex byte"));
        }
    }
    bytes
}

#[test]
fn documented_example_matches_the_encoders_and_decodes() {
    let built = example();
    if std::env::var_os("NANOLOG_PRINT_EXAMPLE").is_some() {
        for (i, chunk) in built.chunks(16).enumerate() {
            let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
            println!("{:04x}: {}", i * 16, hex.join(" "));
        }
    }
    assert_eq!(
        documented(),
        built,
        "FORMAT.md's hex dump differs from what the encoders write"
    );

    let log = LogFile::from_bytes("FORMAT.md", documented()).unwrap();
    assert!(log.is_complete());
    assert!(log.warnings().is_empty());
    let recs: Vec<_> = log.records().map(Result::unwrap).collect();
    assert_eq!(recs.len(), 2);
    assert_eq!(recs[0].message(), "took 12 ms");
    assert_eq!(recs[1].message(), "took 300 ms");
    assert_eq!(recs[0].arg(0), Some(Value::Uint(12)));
    assert_eq!(recs[0].site().target, "app");
    assert_eq!(recs[0].site().name(0), Some("ms"));
    assert_eq!(recs[0].unix_ns(), 1_795_000_000_000_001_000);
    assert_eq!(recs[1].unix_ns(), 1_795_000_000_000_001_500);
    assert_eq!(recs[1].thread_name(), Some("main"));
    let ts = nanolog_runtime::text::utc::rfc3339(recs[0].unix_ns());
    assert_eq!(ts, "2026-11-18T11:06:40.000001000Z");
    assert!(include_str!("../../FORMAT.md")
        .contains("2026-11-18 11:06:40.000001000 src/main.rs:7 INFO[main:1]: took 12 ms"));
}

/// Every prefix of a log (a writer that died at any byte) and every single
/// bit flip: the reader never panics, never invents a record, and reports
/// what it skipped.
#[test]
fn every_prefix_and_bit_flip_is_handled() {
    let good = example();
    let decode = |bytes: Vec<u8>| -> Option<(Vec<String>, usize)> {
        let log = LogFile::from_bytes("x", bytes).ok()?;
        let msgs = log
            .records()
            .filter_map(Result::ok)
            .map(|r| r.message())
            .collect();
        Some((msgs, log.warnings().len()))
    };
    let valid = ["took 12 ms", "took 300 ms"];
    // Where entries end: a prefix cut there is a clean (if unfinished) log.
    let mut boundaries = vec![wire::HEADER_LEN];
    let mut at = wire::HEADER_LEN;
    while at < good.len() {
        let len = u32::from_le_bytes(good[at + 1..at + 5].try_into().unwrap()) as usize;
        at += wire::FRAME_LEN + len;
        boundaries.push(at);
    }
    for n in 0..good.len() {
        match decode(good[..n].to_vec()) {
            None => assert!(n < wire::HEADER_LEN, "prefix {n} refused"),
            Some((msgs, warnings)) => {
                assert!(
                    msgs.iter().all(|m| valid.contains(&m.as_str())),
                    "prefix {n}: {msgs:?}"
                );
                let at_boundary = boundaries.contains(&n);
                assert!(
                    at_boundary || warnings > 0,
                    "prefix {n} cut an entry without a warning"
                );
            }
        }
    }
    for i in 0..good.len() {
        for bit in 0..8 {
            let mut b = good.clone();
            b[i] ^= 1 << bit;
            if let Some((msgs, warnings)) = decode(b) {
                assert!(
                    msgs.iter().all(|m| valid.contains(&m.as_str())),
                    "flip {i}.{bit}: {msgs:?}"
                );
                assert!(
                    warnings > 0 || msgs.len() == 2,
                    "flip {i}.{bit} lost records silently"
                );
            }
        }
    }
}

/// A live log: opened while the writer is mid-entry, then refreshed as it
/// grows, indexes only what is new and ends up with every record.
#[test]
fn refresh_indexes_what_a_growing_file_gained() {
    let good = example();
    let path = std::env::temp_dir().join(format!("nanolog-refresh-{}.nlog", std::process::id()));
    std::fs::write(&path, &good[..140]).unwrap();
    let mut log = LogFile::open(&path).unwrap();
    assert_eq!(log.records().count(), 0, "the extent is not whole yet");
    assert!(log
        .warnings()
        .iter()
        .any(|w| matches!(w, Warning::TornTail { .. })));
    assert_eq!(log.refresh().unwrap(), Refresh::Unchanged, "nothing new");
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(&good[140..]).unwrap();
    }
    assert_eq!(log.refresh().unwrap(), Refresh::Grew);
    let msgs: Vec<String> = log.records().map(|r| r.unwrap().message()).collect();
    assert_eq!(msgs, ["took 12 ms", "took 300 ms"]);
    assert!(log.warnings().is_empty(), "{:?}", log.warnings());
    assert!(log.is_complete());
    assert_eq!(log.valid_len(), good.len());
    let _ = std::fs::remove_file(&path);
}

/// FORMAT.md: tags 8 to 32 are reserved for later revisions and skipped
/// (checksum checked, no warning); tag 0 and tags above 32 are damage.
#[test]
fn reserved_tags_are_skipped_and_others_are_damage() {
    let good = example();
    // Before the END entry (the last 9 bytes: an empty body).
    let cut = good.len() - wire::FRAME_LEN;
    for (t, is_damage) in [
        (8u8, false),
        (20, false),
        (32, false),
        (33, true),
        (200, true),
    ] {
        let mut f = good[..cut].to_vec();
        entry(&mut f, t, b"from a later revision");
        f.extend_from_slice(&good[cut..]);
        let log = LogFile::from_bytes("tags.nlog", f).unwrap();
        let msgs: Vec<String> = log.records().map(|r| r.unwrap().message()).collect();
        assert_eq!(msgs, ["took 12 ms", "took 300 ms"], "tag {t}");
        assert!(log.is_complete(), "tag {t}");
        let damaged = log
            .warnings()
            .iter()
            .any(|w| matches!(w, Warning::SkippedCorrupt { .. }));
        assert_eq!(damaged, is_damage, "tag {t}: {:?}", log.warnings());
    }
}

/// FORMAT.md's tables and sizes are the code's: the version it describes
/// (title, header table, the versions a reader takes), the header's
/// length, every tag's number and name (its table and its section), and
/// the RUN placeholder's body length. (Before 2026-12-06 the header table
/// still named version 8 the newest and the RUN body 326 bytes, where the
/// code said 9 and 336.)
#[test]
fn format_md_tables_are_the_codes_constants() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../FORMAT.md"))
        .expect("FORMAT.md beside the workspace");
    let v = wire::VERSION;
    let has = |text: &str| {
        assert!(
            doc.contains(text),
            "FORMAT.md does not say {text:?} (the code's constants say it)"
        )
    };
    has(&format!("# The nanolog file format, version {v}\n"));
    has(&format!(
        "| 8 | 2 | format version, u16: `{v}` (`{}` to `{}` for files of earlier writers) |",
        wire::MIN_VERSION,
        v - 1
    ));
    has(&format!("version is not {} to {v} (", wire::MIN_VERSION));
    has(&format!("A file is a {}-byte header", wire::HEADER_LEN));
    has(&format!("### Header ({} bytes)", wire::HEADER_LEN));
    has(&format!(
        "| 12 | 4 | header length, u32: `{}` |",
        wire::HEADER_LEN
    ));
    has(&format!(
        "when its length is the one\nwriters give ({} bytes)",
        wire::index::RUN_BODY
    ));

    let tags = [
        ("SITE", tag::SITE),
        ("THREAD", tag::THREAD),
        ("EXTENT", tag::EXTENT),
        ("CLOCK", tag::CLOCK),
        ("DROP", tag::DROP),
        ("ROTATE", tag::ROTATE),
        ("END", tag::END),
        ("SPAN", tag::SPAN),
        ("CONTEXT", tag::CONTEXT),
        ("SET", tag::SET),
        ("STRINGS", tag::STRINGS),
        ("BLOCK", tag::BLOCK),
        ("INDEX", tag::INDEX),
        ("TOTALS", tag::TOTALS),
        ("RUN", tag::RUN),
    ];
    // The table of tags: `| n | NAME | ... |` rows after its head.
    let table: Vec<(String, u8)> = doc
        .split("| tag | name | body |\n|---|---|---|\n")
        .nth(1)
        .expect("FORMAT.md's table of tags")
        .lines()
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            (cells[2].to_owned(), cells[1].parse().expect("a tag number"))
        })
        .collect();
    let code: Vec<(String, u8)> = tags.iter().map(|&(n, t)| (n.to_owned(), t)).collect();
    assert_eq!(table, code, "FORMAT.md's table of tags against wire::tag");
    for (name, t) in tags {
        has(&format!("### {name} (tag {t})"));
    }
}
