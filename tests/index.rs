//! A reader that wants a time window or a level (`LogFile::open_for`)
//! leaves out the writes the file's INDEX entries say hold none of its
//! records, and reads exactly the records the whole file's reader reads
//! under the same filter: for windows and levels at random, compressed and
//! plain, a killed writer's file (no index past its last), and an index
//! damaged or pointing where no records are (not used).

mod common;

use std::path::Path;

use common::{remove_with_kept, serial, temp};
use nanolog::reader::{Event, Filter, LogFile, Merge, Want};
use nanolog::Level;
use nanolog_runtime::wire::tag;

/// Logs for about `secs` seconds from two threads, in batches a few
/// milliseconds apart: requests in spans at info, one in 10 at warn, one
/// in 100 at error. Returns the records logged.
fn write(path: &Path, compress: bool, secs: f64) -> u64 {
    remove_with_kept(path);
    let logger = nanolog::Logger::builder()
        .path(path)
        .compress(compress)
        .start()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    let worker = std::thread::Builder::new()
        .name("worker".into())
        .spawn(move || {
            let mut n = 0u64;
            while std::time::Instant::now() < until {
                for _ in 0..50 {
                    log_one(n);
                    n += 1;
                }
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
            n
        })
        .unwrap();
    let mut n = 0u64;
    while std::time::Instant::now() < until {
        for _ in 0..50 {
            log_one(n + 1_000_000);
            n += 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    n += worker.join().unwrap();
    drop(logger);
    n
}

fn log_one(i: u64) {
    let _s = nanolog::span!("request", id = i);
    if i.is_multiple_of(100) {
        nanolog::error!("request {} failed", i);
    } else if i.is_multiple_of(10) {
        nanolog::warn!("request {} slow: {} ms", i, i % 977);
    } else {
        nanolog::info!("request {} served in {} us", i, i % 977);
    }
}

/// The records `filter` passes, as `decode` would show them: time,
/// thread, level, message and spans.
fn read(files: &[LogFile], filter: Filter) -> Vec<String> {
    Merge::new(files, filter)
        .map(|ev| match ev {
            Event::Record(r) => {
                let mut s = format!(
                    "{} {} {:?} {}",
                    r.unix_ns(),
                    r.thread(),
                    r.level(),
                    r.message()
                );
                for span in r.spans() {
                    span.render(&mut s);
                }
                s
            }
            Event::Gap(g, _) => format!("gap {} {}", g.thread, g.count),
        })
        .collect()
}

fn filter(w: &Want) -> Filter {
    Filter {
        since_ns: w.since_ns,
        until_ns: w.until_ns,
        min_level: w.min_level,
        ..Filter::default()
    }
}

/// A small generator of the windows (no dependency for it).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Windows and levels at random over `path`: what `open_for` reads equals
/// what the whole file's reader reads; returns how many of the file's
/// records the narrow windows' files held, against all of them.
fn check_windows(path: &Path, seed: u64) -> (usize, usize) {
    let whole = [LogFile::open(path).unwrap()];
    assert!(whole[0].warnings().is_empty(), "{:?}", whole[0].warnings());
    let all = read(&whole, Filter::default());
    let times: Vec<i64> = whole[0].records().map(|r| r.unwrap().unix_ns()).collect();
    let (first, last) = (*times.iter().min().unwrap(), *times.iter().max().unwrap());
    let span = (last - first) as f64;
    let mut rng = Lcg(seed);
    let (mut held, mut of) = (0, 0);
    for i in 0..16 {
        let since = first + (rng.next() * span) as i64;
        let narrow = i % 2 == 0;
        let len = if narrow {
            span / 100.0
        } else {
            rng.next() * span / 2.0
        };
        let until = since + len as i64;
        let level = [None, Some(Level::Warn), Some(Level::Error)][i % 3];
        let want = match i % 4 {
            // Open at one end, or both given.
            1 => Want::new(Some(since), None, level),
            3 => Want::new(None, Some(until), level),
            _ => Want::new(Some(since), Some(until), level),
        };
        let part = [LogFile::open_for(path, &want).unwrap()];
        assert!(part[0].warnings().is_empty(), "{:?}", part[0].warnings());
        let got = read(&part, filter(&want));
        let expected = read(&whole, filter(&want));
        assert_eq!(got, expected, "{want:?}");
        if narrow && i % 4 != 1 && i % 4 != 3 {
            held += part[0].records().count();
            of += all.len();
        }
    }
    (held, of)
}

#[test]
fn windows_and_levels_read_what_the_whole_file_reads_leaving_out_the_rest() {
    let _s = serial();
    for compress in [true, false] {
        let path = temp(&format!("index-{compress}"));
        let n = write(&path, compress, 6.0);
        let bytes = std::fs::read(&path).unwrap();
        assert!(
            common::entries(&bytes).iter().any(|e| e.2 == tag::INDEX),
            "the writer indexes its writes"
        );
        let (held, of) = check_windows(&path, 7 + u64::from(compress));
        // A window of 1% of the log, 2 s of margin aside: most of the
        // file is not read.
        assert!(
            held * 2 < of,
            "compress {compress}: the narrow windows' files held {held} of {of} records ({n} logged)"
        );
        remove_with_kept(&path);
    }
}

/// A killed writer's file has no index past its last INDEX entry (here:
/// none at all, its END never written); an index whose bytes are damaged
/// is not used; nor are rows that point inside an entry, past their INDEX
/// entry, or at what is not whole entries of records. Each is read whole where its index cannot be trusted, with the
/// same answer.
#[test]
fn an_index_that_cannot_be_trusted_is_not_used() {
    let _s = serial();
    let path = temp("index-trust");
    write(&path, true, 1.0);
    let bytes = std::fs::read(&path).unwrap();
    let entries = common::entries(&bytes);
    let index = *entries.iter().rfind(|e| e.2 == tag::INDEX).unwrap();
    let end = *entries.iter().rfind(|e| e.2 == tag::END).unwrap();
    assert!(
        index.1 <= end.0,
        "the last INDEX entry goes ahead of the END"
    );
    let dir = temp("index-trust-cases");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let case = |name: &str, b: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, b).unwrap();
        p
    };
    // Cut before the last INDEX entry: a writer killed before its END.
    let killed = case("killed.nlog", &bytes[..index.0]);
    // A bit flipped in the INDEX entry's body (its checksum fails).
    let mut flipped = bytes.clone();
    flipped[index.0 + 12] ^= 0x04;
    let flipped = case("flipped.nlog", &flipped);
    // A well-made INDEX entry (good checksum) in place of the last, whose
    // rows point one byte into an entry, past where the entry stands, and
    // at bytes that are not whole entries (the file's END).
    let rows = nanolog_runtime::wire::index::get_index(&bytes[index.0 + 9..index.1]).unwrap();
    let first_records = rows[0].offset;
    let mut lying = Vec::new();
    for (offset, len) in [
        (first_records + 1, rows[0].len),
        (index.1 as u64, (end.0 - index.1) as u64),
        (end.0 as u64, 3),
    ] {
        lying.push(nanolog_runtime::wire::index::Row {
            offset,
            len,
            records: 1,
            first_tick: 0,
            last_tick: 0,
            levels: 1,
            threads: 1,
        });
    }
    let mut body = Vec::new();
    nanolog_runtime::wire::index::put_index(&mut body, &lying);
    let mut lied = bytes[..index.0].to_vec();
    lied.push(tag::INDEX);
    lied.extend_from_slice(&(body.len() as u32).to_le_bytes());
    lied.extend_from_slice(&nanolog_runtime::wire::entry_crc(tag::INDEX, &body).to_le_bytes());
    lied.extend_from_slice(&body);
    lied.extend_from_slice(&bytes[index.1..]);
    let lied = case("lied.nlog", &lied);
    for p in [&killed, &flipped, &lied] {
        let whole = [LogFile::open(p).unwrap()];
        // Every window leaves the whole file in (nothing trusted to leave
        // out) and reads what the whole file's reader reads.
        let want = Want::new(Some(i64::MAX - 1), None, Some(Level::Error));
        let part = [LogFile::open_for(p, &want).unwrap()];
        assert_eq!(
            part[0].records().count(),
            whole[0].records().count(),
            "{}",
            p.display()
        );
        assert_eq!(read(&part, filter(&want)), read(&whole, filter(&want)));
        let want = Want::new(None, None, Some(Level::Warn));
        let part = [LogFile::open_for(p, &want).unwrap()];
        assert_eq!(read(&part, filter(&want)), read(&whole, filter(&want)));
    }
    let _ = std::fs::remove_dir_all(&dir);
    remove_with_kept(&path);
}
