//! Compressed batches (format version 4, BLOCK entries): the same records
//! as a file written without them, in fewer bytes; batches of a reader (a
//! follower's cursor) never fall inside a block; a block a reader cannot
//! inflate is reported and the rest of the file read.

mod common;

use common::{remove_with_kept, serial, temp};
use nanolog::reader::{Event, Filter, LogFile, Merge};
use nanolog_runtime::wire::tag;

const ROUTES: [&str; 4] = [
    "/api/v1/orders",
    "/api/v1/fills",
    "/healthz",
    "/api/v1/quotes",
];

/// A logger that compresses its batches, on a fresh log at `path`.
fn start_compressed(path: &std::path::Path) -> nanolog::Logger {
    remove_with_kept(path);
    nanolog::Logger::builder()
        .path(path)
        .compress(true)
        .start()
        .unwrap()
}

/// Request `i`'s record, inside its span.
fn request(i: u64) {
    let route = ROUTES[(i % 4) as usize];
    let _s = nanolog::span!("request", route = route, user = "ann");
    nanolog::info!("served {} in {} us status={}", route, 100 + i % 37, 200);
}

/// Logs a service-like workload into `path`, flushed every 100 records
/// with a pause after (so the file holds many batches, and the flusher has
/// the time to compress them); returns the records logged.
fn write_log(path: &std::path::Path, compress: bool) -> u64 {
    write_batches(
        path,
        compress,
        5_000,
        100,
        std::time::Duration::from_millis(1),
    )
}

/// `n` requests into a fresh log at `path`, flushed every `batch` of them,
/// each flush followed by `pause`; returns `n`.
fn write_batches(
    path: &std::path::Path,
    compress: bool,
    n: u64,
    batch: u64,
    pause: std::time::Duration,
) -> u64 {
    remove_with_kept(path);
    let logger = nanolog::Logger::builder()
        .path(path)
        .compress(compress)
        .start()
        .unwrap();
    for i in 0..n {
        request(i);
        if i % batch == batch - 1 {
            logger.flush().unwrap();
            std::thread::sleep(pause);
        }
    }
    drop(logger);
    n
}

/// The tags of the entries at the top level of `file` (blocks not opened).
fn tags(file: &[u8]) -> Vec<u8> {
    common::entries(file).into_iter().map(|e| e.2).collect()
}

fn messages(log: &LogFile) -> Vec<String> {
    let mut v: Vec<String> = log
        .records()
        .map(|r| {
            let r = r.unwrap();
            let mut s = r.message();
            for span in r.spans() {
                span.render(&mut s);
            }
            if r.spans_lost() {
                s.push_str(LOST);
            }
            format!("{} {}", r.tick(), s)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn compressed_and_plain_files_hold_the_same_records() {
    let _s = serial();
    let (plain, packed) = (temp("blocks-plain"), temp("blocks-packed"));
    let n = write_log(&plain, false);
    write_log(&packed, true);
    let (p, c) = (
        std::fs::read(&plain).unwrap(),
        std::fs::read(&packed).unwrap(),
    );
    assert!(!tags(&p).contains(&12), "compress(false) wrote a block");
    let blocks = tags(&c).iter().filter(|&&t| t == 12).count();
    assert!(blocks > 10, "{blocks} blocks");
    // Far smaller (68% of the plain file's size in three runs here).
    assert!(c.len() * 4 < p.len() * 3, "{} against {}", c.len(), p.len());
    let (lp, lc) = (
        LogFile::open(&plain).unwrap(),
        LogFile::open(&packed).unwrap(),
    );
    assert!(lc.warnings().is_empty(), "{:?}", lc.warnings());
    assert!(lc.is_complete());
    // Each file's records, spans and strings: only the ticks differ.
    let strip = |v: Vec<String>| -> Vec<String> {
        let mut v: Vec<String> = v
            .into_iter()
            .map(|s| s.split_once(' ').unwrap().1.to_owned())
            .collect();
        v.sort();
        v
    };
    let (mp, mc) = (strip(messages(&lp)), strip(messages(&lc)));
    assert_eq!(mc.len() as u64, n);
    assert_eq!(mp, mc);
    // What the file is uncompressed: about the plain file's size.
    let raw = lc.raw_len() as f64;
    assert!(
        (raw / p.len() as f64 - 1.0).abs() < 0.2,
        "{raw} vs {}",
        p.len()
    );
    remove_with_kept(&plain);
    remove_with_kept(&packed);
}

/// Each `Compression` writes the blocks it says, and every file holds the
/// same records: `None` no block; `Fast` LZ4 blocks (codec 2) only;
/// `Small`, with a flusher that idles between batches, deflate blocks
/// (codec 3), in fewer bytes than `Fast`'s.
#[test]
fn each_compression_writes_its_codec_and_the_same_records() {
    let _s = serial();
    let mut sizes = Vec::new();
    let mut read = Vec::new();
    for (name, compression) in [
        ("none", nanolog::Compression::None),
        ("fast", nanolog::Compression::Fast),
        ("small", nanolog::Compression::Small),
    ] {
        let path = temp(&format!("blocks-codec-{name}"));
        remove_with_kept(&path);
        let logger = nanolog::Logger::builder()
            .path(&path)
            .compression(compression)
            .start()
            .unwrap();
        for i in 0..3_000 {
            request(i);
            if i % 100 == 99 {
                logger.flush().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        }
        drop(logger);
        let bytes = std::fs::read(&path).unwrap();
        let codecs: Vec<u8> = common::entries(&bytes)
            .into_iter()
            .filter(|e| e.2 == tag::BLOCK)
            .map(|e| bytes[e.0 + 9])
            .collect();
        match compression {
            nanolog::Compression::None => assert!(codecs.is_empty(), "{codecs:?}"),
            nanolog::Compression::Fast => {
                assert!(
                    codecs.len() > 10 && codecs.iter().all(|&c| c == 2),
                    "{codecs:?}"
                )
            }
            _ => assert!(
                codecs.iter().filter(|&&c| c == 3).count() > 10,
                "{codecs:?}"
            ),
        }
        let log = LogFile::open(&path).unwrap();
        assert!(log.warnings().is_empty(), "{:?}", log.warnings());
        let mut m: Vec<String> = messages(&log)
            .into_iter()
            .map(|s| s.split_once(' ').unwrap().1.to_owned())
            .collect();
        m.sort();
        assert_eq!(m.len(), 3_000);
        read.push(m);
        sizes.push(bytes.len());
        remove_with_kept(&path);
    }
    assert!(read[0] == read[1] && read[1] == read[2]);
    assert!(sizes[2] < sizes[1] && sizes[1] < sizes[0], "{sizes:?}");
}

/// A reader taking the file in batches (as `ship` and a follower's cursor
/// do) gets every record once: a batch ends between blocks, never in one.
#[test]
fn batches_of_a_compressed_file_take_every_record_once() {
    let _s = serial();
    let path = temp("blocks-batches");
    let n = write_log(&path, true);
    let log = LogFile::open(&path).unwrap();
    let all = messages(&log);
    assert_eq!(all.len() as u64, n);
    for max_bytes in [1, 100, 1000, 10_000] {
        let mut got = Vec::new();
        let mut from = 0;
        let mut batches = 0;
        while from < log.valid_len() {
            let to = log.batch_end(from, max_bytes);
            assert!(to > from, "a batch from {from} makes no progress");
            let filter = Filter {
                min_offset: from,
                max_offset: Some(to),
                ..Filter::default()
            };
            for ev in Merge::unsorted(std::slice::from_ref(&log), filter) {
                if let Event::Record(r) = ev {
                    let mut s = r.message();
                    for span in r.spans() {
                        span.render(&mut s);
                    }
                    got.push(format!("{} {}", r.tick(), s));
                }
            }
            batches += 1;
            from = to;
        }
        got.sort();
        assert_eq!(got, all, "batches of {max_bytes} bytes");
        // (Small batches: one a block at least, and there are over 10.)
        let least = if max_bytes <= 100 { 10 } else { 1 };
        assert!(batches > least, "{batches} batches of {max_bytes} bytes");
    }
    remove_with_kept(&path);
}

/// What `messages` adds to a record that says some of its spans are lost.
const LOST: &str = " (spans lost)";

/// Whether `got` (as `messages` shows a record) is one of `all` as written,
/// or one of them that says its spans were lost, its tick and message as
/// written (a write's records outlive a damaged block of its dictionary
/// entries, whose SPAN entries are not written again).
fn as_written(all: &Written, got: &str) -> bool {
    let tick = |m: &str| {
        m.split_once(' ')
            .map_or(String::new(), |(t, _)| t.to_owned())
    };
    let same_tick = all.get(&tick(got)).map_or(&[][..], Vec::as_slice);
    if same_tick.iter().any(|a| a == got) {
        return true;
    }
    got.strip_suffix(LOST)
        .is_some_and(|head| same_tick.iter().any(|a| a.starts_with(head)))
}

/// A file's records as `messages` shows them, by tick.
type Written = std::collections::HashMap<String, Vec<String>>;

fn written(all: &[String]) -> Written {
    let mut w = Written::new();
    for m in all {
        let tick = m.split_once(' ').map_or("", |(t, _)| t);
        w.entry(tick.to_owned()).or_default().push(m.clone());
    }
    w
}

/// Where the file's BLOCK entries that hold records start (a write's
/// dictionary entries are a block of their own): each block read alone,
/// after the file's header, by the reader, which finds extents in it.
fn record_regions(file: &[u8]) -> Vec<usize> {
    common::entries(file)
        .into_iter()
        .filter(|e| e.2 == tag::BLOCK)
        .filter(|&(start, end, _)| {
            let mut alone = file[..48].to_vec();
            alone.extend_from_slice(&file[start..end]);
            LogFile::from_bytes("block.nlog", alone).is_ok_and(|log| log.records().next().is_some())
        })
        .map(|e| e.0)
        .collect()
}

/// Changes the body of the `nth` (from 1) of the file's BLOCK entries that
/// hold records (a write's dictionary entries are a block of their own)
/// with `change`, and makes its checksum good again: damage a checksum
/// cannot see.
fn change_block(file: &mut [u8], nth: usize, change: impl FnOnce(&mut [u8])) {
    let at = record_regions(file)
        .into_iter()
        .filter(|&at| file[at] == tag::BLOCK)
        .nth(nth - 1)
        .expect("that many blocks of records");
    let len = u32::from_le_bytes(file[at + 1..at + 5].try_into().unwrap()) as usize;
    change(&mut file[at + 9..at + 9 + len]);
    let crc = nanolog_runtime::wire::entry_crc(12, &file[at + 9..at + 9 + len]);
    file[at + 5..at + 9].copy_from_slice(&crc.to_le_bytes());
}

/// A block of a codec this reader does not know (a later writer's) is
/// skipped with a warning that says so; the file's other blocks read.
#[test]
fn a_block_of_an_unknown_codec_is_reported_and_skipped() {
    let _s = serial();
    let path = temp("blocks-codec");
    let n = write_log(&path, true);
    let mut file = std::fs::read(&path).unwrap();
    change_block(&mut file, 3, |body| body[0] = 9);
    let log = LogFile::from_bytes("codec.nlog", file).unwrap();
    let said: Vec<String> = log.warnings().iter().map(ToString::to_string).collect();
    assert_eq!(said.len(), 1, "{said:?}");
    assert!(
        said[0].contains("codec 9, which this reader does not know"),
        "{said:?}"
    );
    let read = log.records().filter(|r| r.is_ok()).count() as u64;
    assert!(read < n && read > n / 2, "{read} of {n}");
    remove_with_kept(&path);
}

/// A block whose raw size is a lie (one more or one less than its bytes
/// inflate to) is reported and skipped; every other record reads as it was
/// written, those of the blocks after it too (their bytes close up behind
/// it in the reader's memory).
#[test]
fn a_block_that_lies_about_its_size_is_reported_and_the_rest_read() {
    let _s = serial();
    let path = temp("blocks-size");
    let n = write_log(&path, true);
    let whole = LogFile::open(&path).unwrap();
    let all = messages(&whole);
    // (Not the first blocks: they define the sites and strings all the
    // others' records use, and losing them loses those records too.)
    for nth in [3, 6, 9] {
        let mut file = std::fs::read(&path).unwrap();
        // The size's first varint byte, its continuation bit kept.
        change_block(&mut file, nth, |body| body[1] ^= 1);
        let log = LogFile::from_bytes("size.nlog", file).unwrap();
        let said: Vec<String> = log.warnings().iter().map(ToString::to_string).collect();
        assert_eq!(said.len(), 1, "{said:?}");
        let got = messages(&log);
        assert!(
            got.len() < all.len() && got.len() as u64 > n / 2,
            "{} of {n}",
            got.len()
        );
        // Each record left is one of the file's as it was written (tick,
        // message and spans).
        let all_set: std::collections::HashSet<&String> = all.iter().collect();
        assert!(got.iter().all(|m| all_set.contains(m)), "block {nth}");
    }
    remove_with_kept(&path);
}

/// One bad byte in the first write, which defines the sites, strings and
/// thread names every later record uses, costs at most the records of that
/// write and no others: each write's sites, strings and thread names are
/// written again at the head of the next. In a compressed file the first
/// write is two blocks, its dictionary entries' and its records' (a
/// checksum fails: that block is skipped); in a plain file, the first SITE,
/// STRINGS and THREAD entries are hit. Every record left reads as it was
/// written, spans and strings included, or says its spans were lost (SPAN
/// entries are not restated: see `State::restate`).
#[test]
fn a_bad_byte_in_the_first_write_costs_only_its_records() {
    let _s = serial();
    // The entries hit: the first of each tag, or the first write's records.
    let first_of = |tags: &'static [u8]| {
        move |file: &[u8]| -> Vec<(usize, usize)> {
            tags.iter()
                .map(|&t| {
                    let e = common::entries(file)
                        .into_iter()
                        .find(|e| e.2 == t)
                        .unwrap();
                    (e.0, e.1)
                })
                .collect()
        }
    };
    let first_records = |file: &[u8]| -> Vec<(usize, usize)> {
        let at = record_regions(file)[0];
        let e = common::entries(file)
            .into_iter()
            .find(|e| e.0 == at)
            .unwrap();
        assert_eq!(e.2, tag::BLOCK, "the first write's records are a block");
        vec![(e.0, e.1)]
    };
    type Hit = Box<dyn Fn(&[u8]) -> Vec<(usize, usize)>>;
    let cases: [(bool, &str, Hit); 5] = [
        (
            true,
            "its dictionary's block",
            Box::new(first_of(&[tag::BLOCK])),
        ),
        (true, "its records' block", Box::new(first_records)),
        (false, "SITE", Box::new(first_of(&[tag::SITE]))),
        (false, "STRINGS", Box::new(first_of(&[tag::STRINGS]))),
        (
            false,
            "SITE, STRINGS, THREAD",
            Box::new(first_of(&[tag::SITE, tag::STRINGS, tag::THREAD])),
        ),
    ];
    for (compress, what, hit) in cases {
        let path = temp("blocks-first");
        let n = write_log(&path, compress);
        let whole = LogFile::open(&path).unwrap();
        let all = messages(&whole);
        assert_eq!(all.len() as u64, n);
        let mut file = std::fs::read(&path).unwrap();
        for (start, end) in hit(&file) {
            // A bit flipped in the middle of the entry (its checksum left
            // as it was).
            file[(start + 9 + end) / 2] ^= 0x10;
        }
        let log = LogFile::from_bytes("first.nlog", file).unwrap();
        assert!(!log.warnings().is_empty(), "{what}: the damage is reported");
        let got = messages(&log);
        // The first write holds 100 records at most (the writer flushes
        // every 100); a lost SITE, STRINGS or THREAD entry costs none, its
        // copy in the second write standing in for it.
        let least = if compress { n - 100 } else { n };
        assert!(
            got.len() as u64 >= least,
            "{what} hit: {} of {n} records read",
            got.len()
        );
        let all = written(&all);
        let wrong: Vec<&String> = got.iter().filter(|m| !as_written(&all, m)).collect();
        assert!(
            wrong.is_empty(),
            "{what} hit: records not as written: {wrong:?}"
        );
    }
}

/// A reader following a live compressed log (`LogFile::open_live`, then
/// `refresh` after each of the writer's batches) indexes the blocks each
/// refresh finds after those it already holds: at the end it has what a
/// reader opening the finished file has, record for record.
#[test]
fn a_live_compressed_log_refreshed_batch_by_batch_reads_as_the_whole_file() {
    let _s = serial();
    let path = temp("blocks-live");
    let logger = start_compressed(&path);
    let batch = |from: u64| {
        for i in from..from + 100 {
            request(i);
        }
        logger.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    batch(0);
    let mut live = LogFile::open_live(&path).unwrap();
    let mut grew = 0;
    for b in 1..40 {
        batch(b * 100);
        if live.refresh().unwrap() == nanolog::reader::Refresh::Grew {
            grew += 1;
        }
    }
    drop(logger);
    live.refresh().unwrap();
    assert!(grew > 20, "{grew} refreshes found more");
    let blocks = tags(&std::fs::read(&path).unwrap())
        .iter()
        .filter(|&&t| t == 12)
        .count();
    assert!(blocks > 10, "{blocks} blocks");
    assert!(live.warnings().is_empty(), "{:?}", live.warnings());
    let whole = LogFile::open(&path).unwrap();
    assert_eq!(live.raw_len(), whole.raw_len());
    let got = messages(&live);
    assert_eq!(got.len(), 4_000);
    assert_eq!(got, messages(&whole));
    remove_with_kept(&path);
}

/// A follower reads a compressed file as the writer writes it: at every
/// cut point inside a block (the writer's write seen half done) the live
/// reader waits for the rest of the block, and once it is there reads the
/// file as a fresh reader of the whole file does, with no warning. Read as
/// a finished file (its writer died there), the same cut is one torn tail
/// from the block's frame on, and the records are those of the entries
/// before the block. (LZ4 keeps some entries byte for byte, so a
/// half-written block holds whole entries with good checksums: they must
/// never be taken for the file's.)
#[test]
fn a_block_seen_half_written_is_waited_for_at_every_cut_point() {
    let _s = serial();
    let path = temp("blocks-cut");
    let logger = start_compressed(&path);
    // Batches of records, each from a new thread with a name of its own:
    // every block defines a thread (and the first the call sites), entries
    // LZ4 keeps byte for byte.
    for b in 0..6u64 {
        std::thread::Builder::new()
            .name(format!(
                "worker-{b}-{:x}",
                b.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ))
            .spawn(move || {
                for i in b * 60..b * 60 + 60 {
                    request(i);
                }
            })
            .unwrap()
            .join()
            .unwrap();
        logger.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    drop(logger);
    let file = std::fs::read(&path).unwrap();
    remove_with_kept(&path);
    let whole = LogFile::from_bytes("whole.nlog", file.clone()).unwrap();
    let want = messages(&whole);
    assert_eq!(want.len(), 360);
    // The first three blocks.
    let blocks: Vec<_> = common::entries(&file)
        .into_iter()
        .filter(|e| e.2 == 12)
        .take(3)
        .collect();
    assert_eq!(blocks.len(), 3, "the log has blocks");
    let cut_path = temp("blocks-cut-live");
    let mut cuts = 0;
    for &(start, end, _) in &blocks {
        let before = messages(&LogFile::from_bytes("before.nlog", file[..start].to_vec()).unwrap());
        for cut in (start + 1..end).step_by(1) {
            let dead = LogFile::from_bytes("cut.nlog", file[..cut].to_vec()).unwrap();
            let said: Vec<String> = dead.warnings().iter().map(|w| w.to_string()).collect();
            assert_eq!(
                said,
                [format!(
                    "cut.nlog: torn tail: {} bytes after offset {start} are not a whole entry (decoded up to the last whole record)",
                    cut - start
                )],
                "cut at {cut}, read as finished"
            );
            assert_eq!(messages(&dead), before, "cut at {cut}, read as finished");
            std::fs::write(&cut_path, &file[..cut]).unwrap();
            let mut live = LogFile::open_live(&cut_path).unwrap();
            assert!(
                live.warnings()
                    .iter()
                    .all(|w| w.to_string().contains("torn tail")),
                "cut at {cut}: {:?}",
                live.warnings()
            );
            assert!(
                live.valid_len() <= start,
                "cut at {cut}: read into the block"
            );
            // The rest arrives.
            std::fs::write(&cut_path, &file).unwrap();
            live.refresh().unwrap();
            assert!(
                live.warnings().is_empty(),
                "cut at {cut}: {:?}",
                live.warnings()
            );
            assert_eq!(messages(&live), want, "cut at {cut}");
            cuts += 1;
        }
    }
    eprintln!("{cuts} cut points inside {} blocks", blocks.len());
    assert!(cuts > 500, "{cuts} cut points");
    let _ = std::fs::remove_file(&cut_path);
}

/// A length damaged in a file a follower reads live: the live reader waits
/// behind it (it cannot tell it from a write half done), and once the
/// follower is done with the file ([`LogFile::settle`]) the damage is
/// skipped and every entry after it read, as a reader of the finished
/// file reads it.
#[test]
fn a_damaged_length_in_a_live_file_is_skipped_once_the_file_is_settled() {
    let _s = serial();
    let path = temp("blocks-settle");
    write_log(&path, true);
    let mut file = std::fs::read(&path).unwrap();
    remove_with_kept(&path);
    // The third block says it is 16 MiB long.
    let (start, _, _) = common::entries(&file)
        .into_iter()
        .filter(|e| e.2 == 12)
        .nth(2)
        .unwrap();
    file[start + 1..start + 5].copy_from_slice(&(16u32 << 20).to_le_bytes());
    let finished = LogFile::from_bytes("finished.nlog", file.clone()).unwrap();
    assert!(
        finished
            .warnings()
            .iter()
            .any(|w| w.to_string().contains("skipped")),
        "{:?}",
        finished.warnings()
    );
    let damaged = temp("blocks-settle-live");
    std::fs::write(&damaged, &file).unwrap();
    let mut live = LogFile::open_live(&damaged).unwrap();
    assert!(
        live.valid_len() <= start,
        "the live reader waits at the damage"
    );
    let before = messages(&live).len();
    assert!(live.settle(), "settling reads past the damage");
    assert!(!live.settle(), "once");
    assert_eq!(messages(&live), messages(&finished));
    assert!(messages(&live).len() > before);
    let _ = std::fs::remove_file(&damaged);
}

/// The measure (#46): one bit flipped in the first block of a
/// 200,000-record log (requests in spans, with interned strings, written
/// in batches of 1,000) leaves at least 199,000 records, each as written
/// (or saying its spans were lost, when the block is the first write's
/// dictionary entries). The first write is two blocks, its dictionary's
/// and its records'; each is hit in turn. A flip in the block's body skips
/// that block alone, by its length (one warning, nothing searched inside
/// it: a block's compressed bytes can hold entries byte for byte); a flip
/// in its length too, the block's end found from its own body (its raw
/// length and LZ4 sequences).
#[test]
fn one_bit_flipped_in_the_first_block_of_200k_records_loses_one_block() {
    const N: u64 = 200_000;
    let _s = serial();
    let path = temp("blocks-200k");
    write_batches(&path, true, N, 1000, std::time::Duration::from_micros(500));
    let bytes = std::fs::read(&path).unwrap();
    let all = messages(&LogFile::open(&path).unwrap());
    assert_eq!(all.len() as u64, N);
    let all = written(&all);
    let blocks = common::entries(&bytes);
    let dictionary = blocks.iter().find(|e| e.2 == tag::BLOCK).unwrap();
    let first_records = record_regions(&bytes)[0];
    let records = blocks.iter().find(|e| e.0 == first_records).unwrap();
    assert_eq!(records.2, tag::BLOCK);
    assert!(dictionary.0 < records.0);
    for &(start, end, _) in [dictionary, records] {
        for at in [
            (start + 9 + end) / 2,
            start + 9,
            end - 1,
            start + 2,
            start + 3,
        ] {
            let mut file = bytes.clone();
            file[at] ^= 0x10;
            let log = LogFile::from_bytes("flipped.nlog", file).unwrap();
            let said: Vec<String> = log.warnings().iter().map(ToString::to_string).collect();
            let whole = format!("skipped {} corrupt bytes at offset {start}", end - start);
            assert_eq!(said.len(), 1, "flip at {at}: {said:?}");
            assert!(said[0].contains(&whole), "flip at {at}: {said:?}");
            let got = messages(&log);
            assert!(
                got.len() as u64 >= N - 1000,
                "flip at {at}: {} of {N} records read",
                got.len()
            );
            let wrong = got.iter().filter(|m| !as_written(&all, m)).count();
            assert_eq!(wrong, 0, "flip at {at}: records not as written");
        }
    }
    remove_with_kept(&path);
}

/// 1,000 bit flips anywhere after the header of a service-like log (spans,
/// interned strings; batches of 100 records), half of them plain and half
/// compressed, and 400 cuts: no panic; every record read is one that was
/// written, with its spans, or says its spans were lost (its message still
/// as written); a flip costs at most the records of the write it hit (100).
#[test]
fn bit_flips_and_cuts_anywhere_cost_at_most_their_write() {
    let _s = serial();
    for compress in [false, true] {
        let path = temp("blocks-flips");
        let n = write_log(&path, compress);
        let bytes = std::fs::read(&path).unwrap();
        let whole = LogFile::open(&path).unwrap();
        let all: std::collections::HashSet<String> = messages(&whole).into_iter().collect();
        let bare: std::collections::HashSet<String> = whole
            .records()
            .map(|r| r.unwrap())
            .map(|r| format!("{} {}", r.tick(), r.message()))
            .collect();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(compress);
        let check = |log: &LogFile, what: &str| -> u64 {
            let mut read = 0u64;
            for r in log.records().flatten() {
                read += 1;
                let mut s = r.message();
                let lost = r.spans_lost();
                for span in r.spans() {
                    span.render(&mut s);
                }
                let line = format!("{} {}", r.tick(), s);
                if lost {
                    let head = format!("{} {}", r.tick(), r.message());
                    assert!(bare.contains(&head), "{what}: {line:?}");
                } else {
                    assert!(all.contains(&line), "{what}: {line:?} not written");
                }
            }
            read
        };
        for _ in 0..200 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = 48 + (seed % (bytes.len() as u64 - 48)) as usize;
            let log = LogFile::from_bytes("cut.nlog", bytes[..at].to_vec()).unwrap();
            check(&log, &format!("cut at {at} (compress {compress})"));
        }
        for _ in 0..500 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = 48 + (seed % (bytes.len() as u64 - 48)) as usize;
            let bit = 1u8 << (seed >> 60 & 7);
            let mut file = bytes.clone();
            file[at] ^= bit;
            let log = LogFile::from_bytes("flip.nlog", file).unwrap();
            let read = check(&log, &format!("flip {at}/{bit} (compress {compress})"));
            assert!(
                read + 100 >= n,
                "flip at {at} (bit {bit}, compress {compress}): {read} of {n} read"
            );
        }
        remove_with_kept(&path);
    }
}

/// A span whose parent's SPAN entry was lost (in an earlier write) keeps
/// what the file holds: its records show the inner span and say the chain
/// above it is lost; the outer span's own records show none and say so.
#[test]
fn a_lost_parent_cuts_the_chain_and_its_records_say_so() {
    let _s = serial();
    let path = temp("blocks-cut-chain");
    remove_with_kept(&path);
    let logger = nanolog::Logger::builder()
        .path(&path)
        .compress(false)
        .start()
        .unwrap();
    {
        let _outer = nanolog::span!("outer", n = 1u64);
        nanolog::info!("in outer");
        logger.flush().unwrap();
        let _inner = nanolog::span!("inner", m = 2u64);
        nanolog::info!("in inner");
        logger.flush().unwrap();
    }
    nanolog::info!("outside");
    drop(logger);
    let mut file = std::fs::read(&path).unwrap();
    let (start, end, _) = common::entries(&file)
        .into_iter()
        .find(|e| e.2 == tag::SPAN)
        .unwrap();
    file[(start + 9 + end) / 2] ^= 0x10;
    let log = LogFile::from_bytes("cut.nlog", file).unwrap();
    let got: Vec<(String, Vec<String>, bool)> = log
        .records()
        .map(|r| {
            let r = r.unwrap();
            let spans = r.spans().iter().map(|s| s.name().to_owned()).collect();
            (r.message(), spans, r.spans_lost())
        })
        .collect();
    assert_eq!(
        got,
        [
            ("in outer".to_owned(), vec![], true),
            ("in inner".to_owned(), vec!["inner".to_owned()], true),
            ("outside".to_owned(), vec![], false),
        ]
    );
    remove_with_kept(&path);
}

/// A file read as it is indexed (`LogFile::open_streamed`, as `stats`
/// reads) gives every record once, with its spans, as the opened file
/// holds them: a compressed file in runs of a few MiB of its blocks, a
/// plain one, and a compressed one with a damaged block.
#[test]
fn a_file_read_as_it_is_indexed_gives_each_record_once() {
    let _s = serial();
    // Records with long texts of their own, paced so the flusher has the
    // time to compress: 14 MB of entries, most of it in blocks.
    let packed = temp("blocks-streamed");
    let logger = start_compressed(&packed);
    let pad = "lorem ipsum dolor sit amet ".repeat(12);
    for i in 0..40_000u64 {
        let _s = nanolog::span!("request", id = i % 7);
        // (The number first: a text ending in digits after a prefix seen
        // before is written as the prefix's id and the number, a few bytes.)
        let text = format!("{i:08} {pad}");
        nanolog::info!(
            "served {} in {} us: {}",
            ROUTES[(i % 4) as usize],
            i % 977,
            text
        );
        if i % 25 == 24 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    drop(logger);
    let plain = temp("blocks-streamed-plain");
    write_log(&plain, false);
    let flipped = temp("blocks-streamed-flipped");
    let mut bytes = std::fs::read(&packed).unwrap();
    let (start, end, _) = common::entries(&bytes)
        .into_iter()
        .filter(|e| e.2 == tag::BLOCK)
        .nth(3)
        .unwrap();
    bytes[(start + end) / 2] ^= 0x10;
    std::fs::write(&flipped, bytes).unwrap();
    for (path, runs_least) in [(&packed, 2), (&plain, 1), (&flipped, 2)] {
        let mut got = Vec::new();
        let mut runs = 0;
        let opened = LogFile::open_streamed(path, |wave| {
            runs += 1;
            wave.scan_extents(0..wave.extent_count(), |r| {
                let r = r.unwrap();
                let mut s = r.message();
                for span in r.spans() {
                    span.render(&mut s);
                }
                got.push(format!("{} {}", r.tick(), s));
            });
        })
        .unwrap();
        got.sort();
        let want = messages(&LogFile::open(path).unwrap());
        assert!(
            want.len() > 4_000,
            "{}: {} records",
            path.display(),
            want.len()
        );
        assert!(
            got == want,
            "{}: {} records read as indexed, {} opened",
            path.display(),
            got.len(),
            want.len()
        );
        assert!(runs >= runs_least, "{}: {runs} runs", path.display());
        // The file it gives is the opened file.
        assert_eq!(messages(&opened), want);
        assert_eq!(
            opened.warnings().len(),
            usize::from(path == &flipped),
            "{:?}",
            opened.warnings()
        );
    }
    for p in [&packed, &plain, &flipped] {
        remove_with_kept(p);
    }
}
