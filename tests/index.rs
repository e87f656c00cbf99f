//! A reader that wants a time window or a level (`LogFile::open_for`)
//! leaves out the writes the file's INDEX entries say hold none of its
//! records, and reads exactly the records the whole file's reader reads
//! under the same filter: for windows and levels at random, compressed and
//! plain, and `-n`'s last records; a killed writer's file, and an index
//! damaged or pointing where no records are (not used).

mod common;

use std::path::Path;

use common::{remove_with_kept, serial, temp};
use nanolog::reader::Totals;
use nanolog::reader::{Event, Filter, LogFile, Merge, Want};
use nanolog::Level;
use nanolog_runtime::wire::tag;

/// Logs for about `secs` seconds from two threads, in batches a few
/// milliseconds apart: requests, half of them in spans, at info, one in 10
/// at warn, one in 100 at error. Returns the records logged.
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
                for _ in 0..200 {
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
        for _ in 0..200 {
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
    // Half the records each in a span of its own (a context switch before
    // each), half outside any in runs of 50 (no switch between them).
    let _s = (i / 50)
        .is_multiple_of(2)
        .then(|| nanolog::span!("request", id = i));
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
    read_events(&mut Merge::new(files, filter))
}

fn read_events(merge: &mut Merge<'_>) -> Vec<String> {
    merge
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

/// A record's time and level (a gap: none), and its line as [`read`] has it.
type Keyed = (Option<(i64, Level)>, String);

/// The records and gaps of `files` read with no filter, each with its time
/// and level (a gap: none), and the damage the reading reported, sorted.
fn read_all(files: &[LogFile]) -> (Vec<Keyed>, Vec<String>) {
    let mut merge = Merge::new(files, Filter::default());
    let lines = read(files, Filter::default());
    let mut keys = Vec::new();
    for ev in merge.by_ref() {
        keys.push(match ev {
            Event::Record(r) => Some((r.unix_ns(), r.level())),
            Event::Gap(..) => None,
        });
    }
    let mut errors: Vec<String> = merge.take_errors().iter().map(|e| e.to_string()).collect();
    errors.sort();
    (keys.into_iter().zip(lines).collect(), errors)
}

/// What `want` passes of `all` (from [`read_all`]), by the test's own
/// reckoning rather than the reader's filter: the oracle for the reader's
/// window and level.
fn passed(all: &[Keyed], want: &Want) -> Vec<String> {
    all.iter()
        .filter(|(key, _)| match key {
            Some((ns, level)) => {
                want.since_ns.is_none_or(|s| *ns >= s)
                    && want.until_ns.is_none_or(|u| *ns <= u)
                    && want.min_level.is_none_or(|l| *level >= l)
            }
            None => true,
        })
        .map(|(_, line)| line.clone())
        .collect()
}

/// A level-filtered read (records of refused sites stepped over unread)
/// reads the records, and reports the damage, an unfiltered read does.
fn check_levels(files: &[LogFile], case: &str) {
    let (all, errors) = read_all(files);
    // Read serially, and with the stops found first on both cores (the
    // pre-scan a large set gets; made to run on these small files).
    for level in [Level::Warn, Level::Error] {
        for prescan in [false, true] {
            let want = Want::new(None, None, Some(level));
            let mut merge = Merge::new(files, filter(&want));
            if prescan {
                // Waves of a few extents each.
                merge = merge.__prescan(0, 64 << 10);
            }
            let got = read_events(&mut merge);
            let mut got_errors: Vec<String> =
                merge.take_errors().iter().map(|e| e.to_string()).collect();
            got_errors.sort();
            let how = format!("{case} {level:?} prescan {prescan}");
            assert_eq!(got, passed(&all, &want), "{how}");
            assert_eq!(got_errors, errors, "{how}");
        }
    }
}

/// Records' heads (`tally_extents`: values stepped over unread, what
/// `stats` counts) are the records' own, and a reading of some sites'
/// records (`scan_extents_of`) gives theirs; the damage is found where a
/// reading of the whole records finds it, for every extent range.
fn check_heads(file: &LogFile, case: &str) {
    type Seen = Vec<Result<(u32, u32, u64, usize), String>>;
    let n = file.extent_count();
    let ranges = [0..n, 0..n / 2, n / 2..n, n / 3..n / 3 + 1];
    for range in ranges {
        let mut read: Seen = Vec::new();
        file.scan_extents(range.clone(), |r| {
            read.push(
                r.map(|r| (r.site().id, r.thread(), r.tick(), r.encoded_len()))
                    .map_err(|e| e.to_string()),
            )
        });
        let mut heads: Seen = Vec::new();
        file.tally_extents(range.clone(), |h| {
            heads.push(
                h.map(|h| (h.site.id, h.thread, h.tick, h.len as usize))
                    .map_err(|e| e.to_string()),
            )
        });
        same(
            &heads,
            &read,
            &format!("{case}: heads of extents {range:?}"),
        );
        // Records of some sites, the others stepped over unread: those
        // records, and every damage, of the whole reading.
        for pick in [1u32, 2, 3] {
            let allowed: Vec<bool> = (0..16).map(|id: u32| id.is_multiple_of(pick)).collect();
            let want: Seen = read
                .iter()
                .filter(|r| r.as_ref().map_or(true, |r| allowed[r.0 as usize]))
                .cloned()
                .collect();
            let mut got: Seen = Vec::new();
            file.scan_extents_of(range.clone(), &allowed, |r| {
                got.push(
                    r.map(|r| (r.site().id, r.thread(), r.tick(), r.encoded_len()))
                        .map_err(|e| e.to_string()),
                )
            });
            same(
                &got,
                &want,
                &format!("{case}: sites of {pick}, extents {range:?}"),
            );
        }
    }
}

fn same<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    let first = got.iter().zip(want).position(|(g, w)| g != w);
    assert!(
        first.is_none() && got.len() == want.len(),
        "{what}: {} against {}; the first that differ: {:?}",
        got.len(),
        want.len(),
        first.map(|i| (&got[i], &want[i]))
    );
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
    let (keyed, _) = read_all(&whole);
    check_levels(&whole, "whole");
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
        // A window's end checked by the records a pre-scan stops at too.
        let mut prescanned = Merge::new(&part, filter(&want)).__prescan(0, 64 << 10);
        assert_eq!(read_events(&mut prescanned), got, "{want:?} prescan");
        let expected = read(&whole, filter(&want));
        assert_eq!(got, expected, "{want:?}");
        assert_eq!(expected, passed(&keyed, &want), "{want:?}");
        if narrow && i % 4 != 1 && i % 4 != 3 {
            held += part[0].records().count();
            of += all.len();
        }
    }
    (held, of)
}

/// `-n`: the last `n` records of what `open_for` reads with `last` are
/// the whole file's last `n`, and for a few it reads a small part.
fn check_last(path: &Path) {
    let whole = [LogFile::open(path).unwrap()];
    let all = read(&whole, Filter::default());
    for n in [1u64, 20, 5_000, all.len() as u64 + 1] {
        let mut want = Want::new(None, None, None);
        want.last = Some(n);
        let part = [LogFile::open_for(path, &want).unwrap()];
        let got = read(&part, Filter::default());
        let tail = |v: &[String]| v[v.len().saturating_sub(n as usize)..].to_vec();
        assert_eq!(tail(&got), tail(&all), "-n {n}");
        if n == 20 {
            assert!(
                got.len() * 10 < all.len(),
                "-n 20 read {} of {} records",
                got.len(),
                all.len()
            );
        }
    }
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
        check_last(&path);
        // A killed writer's file (cut at 90%: no END, its last records
        // past its last clock pair): `-n` as well.
        let cut = temp(&format!("index-cut-last-{compress}"));
        std::fs::write(&cut, &bytes[..bytes.len() / 10 * 9]).unwrap();
        check_last(&cut);
        let _ = std::fs::remove_file(&cut);
        check_totals(&path);
        // A window of 1% of the log, 2 s of margin aside: most of the
        // file is not read.
        assert!(
            held * 2 < of,
            "compress {compress}: the narrow windows' files held {held} of {of} records ({n} logged)"
        );
        remove_with_kept(&path);
    }
}

/// A quiet service: a record or two at a time, a pause after each, so
/// each write is a few dozen bytes (too small for an INDEX entry) and
/// runs of them are summed up by RUN entries (FORMAT.md, "RUN"). Returns
/// the records logged.
fn write_quiet(path: &Path, secs: f64) -> u64 {
    remove_with_kept(path);
    let logger = nanolog::Logger::builder().path(path).start().unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs_f64(secs);
    let mut n = 0u64;
    while std::time::Instant::now() < until {
        log_one(n);
        n += 1;
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    drop(logger);
    n
}

/// The RUN entries of `file` whose bodies were filled in: (start, end).
fn filled_runs(file: &[u8]) -> Vec<(usize, usize)> {
    common::entries(file)
        .into_iter()
        .filter(|e| e.2 == tag::RUN && file[e.0 + 9..e.1].iter().any(|&b| b != 0))
        .map(|e| (e.0, e.1))
        .collect()
}

/// A quiet service's file, its small writes summed up in RUN entries:
/// windows, levels, `-n` and what the file says of itself (`info`) read
/// what the whole file's reader reads, leaving most of it out; a RUN
/// entry left a placeholder (its writer killed before the run ended) or
/// read while it is filled in (its checksum failing) says nothing, is not
/// damage, and its run is read entry by entry.
#[test]
fn a_quiet_services_small_writes_are_left_out_by_their_runs() {
    let _s = serial();
    let path = temp("index-quiet");
    let n = write_quiet(&path, 3.0);
    let bytes = std::fs::read(&path).unwrap();
    let runs = filled_runs(&bytes);
    assert!(
        runs.len() >= 3,
        "{} RUN entries filled in ({n} records)",
        runs.len()
    );
    assert!(
        !common::entries(&bytes).iter().any(|e| e.2 == tag::INDEX),
        "the writes are small"
    );
    let (held, of) = check_windows(&path, 11);
    assert!(
        held * 2 < of,
        "the narrow windows' files held {held} of {of} records"
    );
    check_last(&path);
    check_totals(&path);
    // Each RUN entry as its placeholder (the run not ended: zeros, its
    // checksum made again) or with a byte of its body changed (its
    // checksum failing, as when it is read while being filled in).
    let whole = [LogFile::open(&path).unwrap()];
    let all = read(&whole, Filter::default());
    let unfilled = path.with_extension("unfilled");
    let torn = path.with_extension("torn");
    let (mut zeroed, mut flipped) = (bytes.clone(), bytes.clone());
    for &(start, end) in &runs {
        let body = start + 9..end;
        zeroed[body.clone()].fill(0);
        let crc = nanolog_runtime::wire::entry_crc(tag::RUN, &zeroed[body.clone()]);
        zeroed[start + 5..start + 9].copy_from_slice(&crc.to_le_bytes());
        flipped[body.start + 1] ^= 0x40;
    }
    std::fs::write(&unfilled, &zeroed).unwrap();
    std::fs::write(&torn, &flipped).unwrap();
    for copy in [&unfilled, &torn] {
        let f = [LogFile::open(copy).unwrap()];
        assert!(
            f[0].warnings().is_empty(),
            "{copy:?}: {:?}",
            f[0].warnings()
        );
        assert_eq!(read(&f, Filter::default()), all, "{copy:?}");
        let mut want = Want::new(None, None, None);
        want.last = Some(20);
        let part = [LogFile::open_for(copy, &want).unwrap()];
        assert!(
            part[0].warnings().is_empty(),
            "{copy:?}: {:?}",
            part[0].warnings()
        );
        let got = read(&part, Filter::default());
        assert_eq!(got[got.len() - 20..], all[all.len() - 20..], "{copy:?}");
        assert_eq!(got.len(), all.len(), "{copy:?}: no run left out");
        std::fs::remove_file(copy).unwrap();
    }
    remove_with_kept(&path);
}

/// A bit flipped in an entry's length, so that the length leads past the
/// entries after it to a later whole entry (in a quiet service's file of
/// small entries, a SPAN definition among them): the reader skips the
/// damaged entry alone, not the whole entries its length now spans, so the
/// records after it keep their spans (before, it trusted any length that
/// landed: a flip lost 153 bytes and a span where 25 were damaged).
#[test]
fn a_flipped_length_costs_its_own_entry_not_those_it_spans() {
    let _s = serial();
    let path = temp("index-flipped-length");
    write_quiet(&path, 1.0);
    let bytes = std::fs::read(&path).unwrap();
    let entries = common::entries(&bytes);
    let starts: std::collections::HashMap<usize, usize> =
        entries.iter().enumerate().map(|(i, e)| (e.0, i)).collect();
    // An EXTENT whose length, one bit flipped, lands on a whole entry
    // past a SPAN entry.
    let (at, end, bit) = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| e.2 == tag::EXTENT)
        .find_map(|(i, e)| {
            let len = e.1 - e.0 - 9;
            (0..8).find_map(|b| {
                let to = e.0 + 9 + (len ^ (1 << b));
                let j = *starts.get(&to)?;
                (j > i + 1 && entries[i + 1..j].iter().any(|x| x.2 == tag::SPAN))
                    .then_some((e.0, e.1, b))
            })
        })
        .expect("an extent whose flipped length lands past a SPAN entry");
    // The records of that extent: those at or after its start, less those
    // at or after its end.
    let original = LogFile::open(&path).unwrap();
    let own = counted_from(&original, at).records() - counted_from(&original, end).records();
    assert!(own > 0);
    let mut damaged = bytes.clone();
    damaged[at + 1] ^= 1 << bit;
    let copy = path.with_extension("flipped");
    std::fs::write(&copy, &damaged).unwrap();
    let all = read(&[LogFile::open(&path).unwrap()], Filter::default());
    let file = [LogFile::open(&copy).unwrap()];
    let got = read(&file, Filter::default());
    let warned: Vec<String> = file[0].warnings().iter().map(|w| w.to_string()).collect();
    assert_eq!(warned.len(), 1, "{warned:?}");
    let known: std::collections::HashSet<&String> = all.iter().collect();
    let changed: Vec<&String> = got.iter().filter(|l| !known.contains(l)).collect();
    assert!(changed.is_empty(), "records read otherwise: {changed:?}");
    assert_eq!(
        (all.len() - got.len()) as u64,
        own,
        "records lost to the damage of an extent of {own}"
    );
    std::fs::remove_file(&copy).unwrap();
    remove_with_kept(&path);
}

/// `--thread ID`: a thread that logs only in the second half of a file
/// (a batch job's thread beside a service's): reading for it leaves out
/// the runs of the first half, whose INDEX entries name other threads
/// only, and gives what the whole file gives for it; for a thread in
/// every run, the whole answer too.
#[test]
fn a_thread_wanted_leaves_out_the_runs_that_hold_none_of_its_records() {
    let _s = serial();
    let path = temp("index-threads");
    remove_with_kept(&path);
    let logger = nanolog::Logger::builder().path(&path).start().unwrap();
    let log_for = |who: &'static str, n: u64| {
        std::thread::Builder::new()
            .name(who.into())
            .spawn(move || {
                for i in 0..n {
                    nanolog::info!("{} record {} of its run", who, i);
                    if i % 500 == 499 {
                        std::thread::sleep(std::time::Duration::from_millis(2));
                    }
                }
            })
            .unwrap()
            .join()
            .unwrap();
        logger.flush().unwrap();
    };
    log_for("early", 100_000);
    log_for("late", 100_000);
    drop(logger);
    let whole = [LogFile::open(&path).unwrap()];
    let ids: Vec<(u32, String)> = whole[0].threads().map(|t| (t.id, t.name)).collect();
    assert_eq!(ids.len(), 2, "{ids:?}");
    for (id, name) in &ids {
        let mut want = Want::new(None, None, None);
        want.threads = Some(vec![*id]);
        let part = [LogFile::open_for(&path, &want).unwrap()];
        let only = || Filter {
            threads: Some(vec![*id]),
            ..Filter::default()
        };
        let got = read(&part, only());
        assert_eq!(got, read(&whole, only()), "{name}");
        assert_eq!(got.len(), 100_000, "{name}");
        // Each half's runs name one thread: the other half is left out.
        assert!(
            part[0].records().count() < 150_000,
            "{name}: {} of 200000 read",
            part[0].records().count()
        );
    }
    remove_with_kept(&path);
}

/// What a file's records hold, counted from a whole read: the records by
/// site and by thread, their ticks' range, the drops by thread, the lost.
fn counted(log: &LogFile) -> Totals {
    counted_from(log, 0)
}

/// [`counted`] of the records and gaps at or after byte `min_offset`.
fn counted_from(log: &LogFile, min_offset: usize) -> Totals {
    let mut t = Totals::new();
    let files = std::slice::from_ref(log);
    let filter = Filter {
        min_offset,
        ..Filter::default()
    };
    for ev in Merge::unsorted(files, filter) {
        match ev {
            Event::Record(r) => {
                let len = r.encoded_len() as u64;
                t.count(r.site().id, r.thread(), 1, len, r.tick(), r.tick());
                t.first_tick = t.first_tick.min(r.tick());
            }
            Event::Gap(g, _) if g.is_lost() => t.lost += g.count,
            Event::Gap(g, _) => t.dropped(g.thread, g.count),
        }
    }
    t.settle();
    t
}

/// A finished file says at its end (its TOTALS entry) what a whole read of
/// it counts, and a reading that leaves every indexed run out (what `info`
/// does) finds it there, with the same dictionary, threads and blocks.
fn check_totals(path: &Path) {
    let whole = LogFile::open(path).unwrap();
    let head = LogFile::open_for(path, &Want::nothing()).unwrap();
    let want = counted(&whole);
    assert!(want.records() > 1000);
    assert_eq!(whole.totals(), Some(&want));
    assert_eq!(head.totals(), Some(&want));
    assert!(
        head.extent_count() * 4 < whole.extent_count(),
        "the records were left out"
    );
    assert_eq!(head.block_stats(), whole.block_stats());
    assert_eq!(
        head.sites().map(|s| s.id).collect::<Vec<_>>(),
        whole.sites().map(|s| s.id).collect::<Vec<_>>()
    );
    assert_eq!(
        head.threads().collect::<Vec<_>>(),
        whole.threads().collect::<Vec<_>>()
    );
    assert_eq!(head.time_map().pairs(), whole.time_map().pairs());
}

/// Drops (a full ring under `OnFull::Drop`) are counted by thread in the
/// file's TOTALS as a whole read counts them; a TOTALS entry whose counts
/// do not add up, or that stands anywhere but right ahead of the END, is
/// not taken.
#[test]
fn totals_count_drops_and_are_taken_only_whole_and_last() {
    let _s = serial();
    let path = temp("index-totals-drops");
    remove_with_kept(&path);
    let logger = nanolog::Logger::builder()
        .path(&path)
        .compress(false)
        .staging_capacity(256)
        .on_full(nanolog::OnFull::Drop)
        .start()
        .unwrap();
    // Bursts until the rings have dropped some (at once on a quiet
    // machine; with every core busy the flusher may keep up for a while).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while logger.stats().dropped == 0 && std::time::Instant::now() < deadline {
        std::thread::scope(|s| {
            for t in 0..2u64 {
                s.spawn(move || {
                    for i in 0..200_000u64 {
                        nanolog::info!("thread {} record {} of a burst", t, i);
                    }
                });
            }
        });
    }
    drop(logger);
    let whole = LogFile::open(&path).unwrap();
    let want = counted(&whole);
    assert!(
        want.threads.iter().any(|(_, c)| c.dropped > 0),
        "the rings dropped records: {want:?}"
    );
    assert_eq!(whole.totals().cloned(), Some(want));
    // The TOTALS entry (plain: a top-level entry right ahead of the END).
    let bytes = std::fs::read(&path).unwrap();
    let entries = common::entries(&bytes);
    let i = entries.iter().rposition(|e| e.2 == tag::TOTALS).unwrap();
    assert_eq!(entries[i + 1].2, tag::END);
    let (at, len) = (entries[i].0, entries[i].1 - entries[i].0 - 9);
    let case = temp("index-totals-case");
    // Its record count one more than its sites' (checksum made good).
    let mut b = bytes.clone();
    b[at + 9] += 1;
    let crc = nanolog_runtime::wire::entry_crc(tag::TOTALS, &b[at + 9..at + 9 + len]);
    b[at + 5..at + 9].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&case, &b).unwrap();
    let read = LogFile::open_for(&case, &Want::nothing()).unwrap();
    assert!(read.warnings().is_empty() && read.totals().is_none());
    // Another entry between it and the END: a tag reserved for later
    // revisions, skipped, but not a TOTALS right ahead of the END.
    let mut b = bytes[..at + 9 + len].to_vec();
    let body = [0u8; 3];
    b.push(15);
    b.extend_from_slice(&3u32.to_le_bytes());
    b.extend_from_slice(&nanolog_runtime::wire::entry_crc(15, &body).to_le_bytes());
    b.extend_from_slice(&body);
    b.extend_from_slice(&bytes[at + 9 + len..]);
    std::fs::write(&case, &b).unwrap();
    let read = LogFile::open(&case).unwrap();
    assert!(read.warnings().is_empty() && read.is_complete());
    assert!(read.totals().is_none());
    let _ = std::fs::remove_file(&case);
    remove_with_kept(&path);
}

/// A killed writer's file, cut inside a run of records its INDEX entry
/// announced (the run goes past the end: not jumped to); an INDEX entry whose bytes are damaged; and well-made INDEX
/// entries (good checksums) that say a run ends inside an entry or past the
/// end of the file: none of them is trusted, the run is read as any
/// entries are, and the answer is the whole file's.
#[test]
fn an_index_that_cannot_be_trusted_is_not_used() {
    let _s = serial();
    let path = temp("index-trust");
    write(&path, true, 1.0);
    let bytes = std::fs::read(&path).unwrap();
    let entries = common::entries(&bytes);
    let first = *entries.iter().find(|e| e.2 == tag::INDEX).unwrap();
    let row = nanolog_runtime::wire::index::get_index(
        &bytes[first.0 + 9..first.1],
        first.1 as u64,
        nanolog_runtime::wire::VERSION,
    )
    .unwrap();
    let run_end = first.1 + row.len as usize;
    assert!(
        entries.iter().any(|e| e.0 == run_end),
        "the run ends where an entry starts"
    );
    let dir = temp("index-trust-cases");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let case = |name: &str, b: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, b).unwrap();
        p
    };
    // Cut inside the first run: a writer killed while writing it.
    let killed = case("killed.nlog", &bytes[..first.1 + row.len as usize / 2]);
    // A bit flipped in the INDEX entry's body (its checksum fails).
    let mut flipped = bytes.clone();
    flipped[first.0 + 10] ^= 0x04;
    let flipped = case("flipped.nlog", &flipped);
    // The first INDEX entry made again, well made, saying its run ends 3
    // bytes early (inside its last entry) or past the end of the file.
    let lied = |name: &str, len: u64| {
        let mut body = Vec::new();
        nanolog_runtime::wire::index::put_index(
            &mut body,
            &nanolog_runtime::wire::index::Row { len, ..row.clone() },
        );
        let mut b = bytes[..first.0].to_vec();
        b.push(tag::INDEX);
        b.extend_from_slice(&(body.len() as u32).to_le_bytes());
        b.extend_from_slice(&nanolog_runtime::wire::entry_crc(tag::INDEX, &body).to_le_bytes());
        b.extend_from_slice(&body);
        b.extend_from_slice(&bytes[first.1..]);
        case(name, &b)
    };
    let short = lied("short.nlog", row.len - 3);
    let long = lied("long.nlog", row.len + (bytes.len() as u64));
    // (The killed writer's cut run is a torn block: none of it reads; the
    // others' first run is read whole.)
    for (p, first_read) in [
        (&killed, false),
        (&flipped, true),
        (&short, true),
        (&long, true),
    ] {
        let whole = [LogFile::open(p).unwrap()];
        // A window no record is in: everything an index can be trusted
        // with is left out. Here the first run is not, and reads as the
        // whole file's reader reads it.
        let want = Want::new(Some(i64::MAX - 1), None, Some(Level::Error));
        let part = [LogFile::open_for(p, &want).unwrap()];
        let of_first = |log: &LogFile| {
            log.records()
                .filter_map(Result::ok)
                .filter(|r| r.tick() >= row.first_tick && r.tick() <= row.last_tick)
                .count()
        };
        assert_eq!(
            of_first(&part[0]) > 0,
            first_read,
            "{}: its first run is read",
            p.display()
        );
        assert_eq!(read(&part, filter(&want)), read(&whole, filter(&want)));
        let want = Want::new(None, None, Some(Level::Warn));
        let part = [LogFile::open_for(p, &want).unwrap()];
        assert_eq!(read(&part, filter(&want)), read(&whole, filter(&want)));
    }
    // The file as written: the first run is left out for that window.
    let want = Want::new(Some(i64::MAX - 1), None, Some(Level::Error));
    let part = LogFile::open_for(&path, &want).unwrap();
    assert!(part.records().count() < LogFile::open(&path).unwrap().records().count());
    let _ = std::fs::remove_dir_all(&dir);
    remove_with_kept(&path);
}

/// Bits flipped and cuts anywhere in an indexed file: `open_for` never
/// panics, and every record it reads in a window is one the whole file's
/// reader reads in it (a damaged run is either read as the whole reader
/// reads it, or left out when its intact INDEX entry says it is outside the
/// window); with no damage reported by either, the same records. The same
/// of a quiet service's file, its small writes summed up by RUN entries
/// (a flip in a RUN entry's body, in a stretch it keeps or in the records
/// between them).
#[test]
fn flips_and_cuts_in_an_indexed_file_never_give_a_record_the_whole_read_does_not() {
    let _s = serial();
    let path = temp("index-flips");
    write(&path, false, 1.0);
    check_flips(&path, 300);
    remove_with_kept(&path);
    let quiet = temp("index-flips-quiet");
    write_quiet(&quiet, 1.5);
    assert!(filled_runs(&std::fs::read(&quiet).unwrap()).len() >= 2);
    check_flips(&quiet, 300);
    remove_with_kept(&quiet);
}

/// [`flips_and_cuts_in_an_indexed_file_never_give_a_record_the_whole_read_does_not`]
/// of the file at `path`, `cases` flips and cuts.
fn check_flips(path: &Path, cases: usize) {
    let bytes = std::fs::read(path).unwrap();
    let whole = [LogFile::open(path).unwrap()];
    let times: Vec<i64> = whole[0].records().map(|r| r.unwrap().unix_ns()).collect();
    let (first, last) = (*times.iter().min().unwrap(), *times.iter().max().unwrap());
    let want = Want::new(
        Some(first + (last - first) / 2),
        Some(first + (last - first) / 2 + (last - first) / 20),
        None,
    );
    // The damages drawn first, then tried on every core: each case reads
    // its file a dozen times over (83 s of CI's test run when serial).
    let mut rng = Lcg(42);
    // Where each case cuts the file or flips a bit (the bit: `i % 8`).
    let damages: Vec<(bool, usize)> = (0..cases)
        .map(|i| {
            (
                i % 3 == 2,
                48 + (rng.next() * (bytes.len() - 48) as f64) as usize,
            )
        })
        .collect();
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for core in 0..cores {
            let (bytes, damages, want) = (&bytes, &damages, &want);
            scope.spawn(move || {
                let case = temp(&format!("index-flips-case-{core}"));
                for (i, &(cut, at)) in damages.iter().enumerate().skip(core).step_by(cores) {
                    let mut b = bytes.clone();
                    if cut {
                        b.truncate(at);
                    } else {
                        b[at] ^= 1 << (i % 8);
                    }
                    check_flip(path, &case, i, &b, want);
                }
                let _ = std::fs::remove_file(&case);
            });
        }
    });
}

/// One case of [`check_flips`]: the damaged bytes `b`, written at `case`.
fn check_flip(path: &Path, case: &Path, i: usize, b: &[u8], want: &Want) {
    std::fs::write(case, b).unwrap();
    let damaged = [LogFile::open(case).unwrap()];
    let part = [LogFile::open_for(case, want).unwrap()];
    let all = read(&damaged, filter(want));
    let got = read(&part, filter(want));
    check_levels(&damaged, &format!("case {i}"));
    check_heads(&damaged[0], &format!("case {i}"));
    let seen: std::collections::HashSet<&String> = all.iter().collect();
    assert!(
        got.iter().all(|r| seen.contains(r)),
        "{path:?} case {i}: {:?} {:?} {:?}",
        got.iter().find(|r| !seen.contains(r)),
        damaged[0].warnings(),
        part[0].warnings()
    );
    if damaged[0].warnings().is_empty() && part[0].warnings().is_empty() {
        assert_eq!(got, all, "case {i}");
    }
    // What `info` reads: the file's TOTALS only when they say what a
    // whole read counts (damage the whole read finds in the lead
    // regions or the end: not taken; in the runs left out: not seen,
    // the writer's counts stand).
    let head = LogFile::open_for(case, &Want::nothing()).unwrap();
    if let (Some(t), true) = (head.totals(), damaged[0].warnings().is_empty()) {
        assert_eq!(t.clone(), counted(&damaged[0]), "case {i}");
    }
}

/// Every extent of a file cut short by a byte, its frame sealed again (a
/// writer's bug, not a torn write): the last record of each runs past its
/// extent. A reader that steps over a refused level's records finds and
/// reports the same damage, at the same places, as one that reads them
/// all, and keeps the same records.
#[test]
fn records_stepped_over_unread_are_checked_as_read_ones() {
    let _s = serial();
    let path = temp("index-cut-extents");
    write(&path, false, 0.3);
    let bytes = std::fs::read(&path).unwrap();
    let mut cut = bytes[..48].to_vec();
    let mut extents = 0;
    for (start, end, t) in common::entries(&bytes) {
        let body = &bytes[start + 9..end];
        if t != tag::EXTENT || body.len() < 16 {
            cut.extend_from_slice(&bytes[start..end]);
            continue;
        }
        extents += 1;
        let body = &body[..body.len() - 1];
        cut.push(t);
        cut.extend_from_slice(&(body.len() as u32).to_le_bytes());
        cut.extend_from_slice(&nanolog_runtime::wire::entry_crc(t, body).to_le_bytes());
        cut.extend_from_slice(body);
    }
    assert!(extents > 3, "{extents} extents");
    let case = temp("index-cut-extents-case");
    std::fs::write(&case, &cut).unwrap();
    let files = [LogFile::open(&case).unwrap()];
    let (_, errors) = read_all(&files);
    assert!(
        errors
            .iter()
            .filter(|e| e.contains("malformed record"))
            .count()
            > 3,
        "{errors:?}"
    );
    check_levels(&files, "cut extents");
    check_heads(&files[0], "cut extents");
    let _ = std::fs::remove_file(&case);
    remove_with_kept(&path);
}

/// Records' heads, read for `stats` without their values, compressed and
/// plain, with string arguments (stepped over by their kinds) and numbers
/// (by their nibble codes), and with the file cut anywhere.
#[test]
fn records_heads_are_their_records_own() {
    let _s = serial();
    for compress in [false, true] {
        let path = temp("index-heads");
        remove_with_kept(&path);
        let logger = nanolog::Logger::builder()
            .path(&path)
            .compress(compress)
            .start()
            .unwrap();
        for i in 0..20_000u64 {
            let _s = (i / 50)
                .is_multiple_of(2)
                .then(|| nanolog::span!("request", id = i));
            match i % 4 {
                0 => nanolog::info!("user {} at {}", "x".repeat((i % 40) as usize), i),
                1 => nanolog::warn!("{} {} {} {}", i as f64 / 3.0, i % 2 == 0, 'c', -(i as i64)),
                2 => nanolog::info!("static"),
                _ => nanolog::error!("{}", i.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            }
            if i % 2_000 == 0 {
                logger.flush().unwrap();
            }
        }
        drop(logger);
        let bytes = std::fs::read(&path).unwrap();
        let whole = LogFile::open(&path).unwrap();
        assert_eq!(whole.records().count(), 20_000);
        check_heads(&whole, &format!("compress {compress}"));
        let case = temp("index-heads-case");
        let mut rng = Lcg(7);
        for i in 0..40 {
            let cut = 48 + (rng.next() * (bytes.len() - 48) as f64) as usize;
            std::fs::write(&case, &bytes[..cut]).unwrap();
            let f = LogFile::open(&case).unwrap();
            check_heads(&f, &format!("compress {compress}, cut {i} at {cut}"));
        }
        let _ = std::fs::remove_file(&case);
        remove_with_kept(&path);
    }
}

/// A file still being written, or a killed writer's, has checkpoints (a
/// TOTALS entry after the write that takes it 4 MiB past the last; here
/// every 64 KiB): read from its last checkpoint on, the checkpoint's counts
/// and the records after it add up to what a whole read counts, at every
/// cut; a reading that finds damage (a checkpoint whose checksum fails)
/// takes none; and a finished file still ends with its END.
#[test]
fn a_live_files_last_checkpoint_and_what_follows_count_what_a_whole_read_does() {
    let _s = serial();
    nanolog_runtime::__set_checkpoint_bytes(64 << 10);
    let path = temp("index-checkpoints");
    write(&path, true, 1.5);
    nanolog_runtime::__set_checkpoint_bytes(0);
    let bytes = std::fs::read(&path).unwrap();
    assert!(
        LogFile::open(&path).unwrap().is_complete(),
        "END stays last"
    );
    let checkpoints: Vec<(usize, usize)> = common::entries(&bytes)
        .into_iter()
        .filter(|e| e.2 == tag::TOTALS)
        .map(|e| (e.0, e.1))
        .collect();
    assert!(checkpoints.len() > 5, "{} checkpoints", checkpoints.len());
    let case = temp("index-checkpoints-case");
    let check = |b: &[u8], what: &str| -> bool {
        std::fs::write(&case, b).unwrap();
        let whole = LogFile::open(&case).unwrap();
        let part = LogFile::open_for(&case, &Want::since_checkpoint()).unwrap();
        let Some((from, t)) = part.checkpoint() else {
            return false;
        };
        let mut sum = t.clone();
        sum.add(&counted_from(&part, from));
        assert_eq!(sum, counted(&whole), "{what}");
        true
    };
    let mut rng = Lcg(5);
    let mut used = 0;
    for i in 0..40 {
        let cut = bytes.len() / 4 + (rng.next() * (bytes.len() * 3 / 4) as f64) as usize;
        used += usize::from(check(&bytes[..cut], &format!("cut {i} at {cut}")));
    }
    assert!(used > 30, "the checkpoints were used at {used} of 40 cuts");
    // The last checkpoint's body damaged, the file cut after it: the
    // reading finds the damage, and takes no checkpoint (read it whole).
    let (start, end) = checkpoints[checkpoints.len() - 2];
    let mut b = bytes[..end + (bytes.len() - end) / 2].to_vec();
    b[start + 12] ^= 0x10;
    assert!(!check(&b, "damaged checkpoint"), "taken despite the damage");
    // A finished file's last TOTALS is its END's, not a checkpoint.
    assert!(!check(&bytes, "finished"), "a finished file's TOTALS");
    let _ = std::fs::remove_file(&case);
    remove_with_kept(&path);
}
