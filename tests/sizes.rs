//! Records of every size: each that fits the ring reaches the file intact,
//! each larger one is dropped, counted and shown as a gap; none vanishes.
//! Its own test binary: a process runs one logger at a time.

mod common;

use nanolog::reader::{Event, Filter, LogFile, Merge};
use proptest::prelude::*;

/// Bytes a `"s {}"` record with a string of `len` bytes takes in the ring:
/// the 16-byte header, the string's u32 length and bytes, padded to 8.
fn ring_len(len: usize) -> usize {
    (16 + 4 + len + 7) & !7
}

/// What one run logged and what the file and the counters say of it.
struct Outcome {
    /// Lengths of the long strings, in the order logged.
    lens: Vec<usize>,
    stats: nanolog::Stats,
    /// The messages decoded, in order.
    messages: Vec<String>,
    /// Records the file reports as dropped (sum of its gaps).
    gap_records: u64,
}

/// Logs, for each length, a marker record, a record with a string of that
/// length, and another marker, into a ring of `cap` bytes (`None`: the
/// default); then reads the file back.
fn run(tag: &str, cap: Option<usize>, lens: &[usize]) -> Outcome {
    let _serial = common::serial();
    let path = common::temp(&format!("sizes-{tag}"));
    let _t = common::TempLog(path.clone());
    let mut b = nanolog::Logger::builder().path(&path);
    if let Some(cap) = cap {
        b = b.staging_capacity(cap);
    }
    let logger = b.start().unwrap();
    for (i, &len) in lens.iter().enumerate() {
        let s = char::from(b'a' + (i % 26) as u8).to_string().repeat(len);
        nanolog::info!("before {}", i);
        nanolog::info!("s {}", s);
        nanolog::info!("after {}", i);
    }
    logger.flush().unwrap();
    let stats = logger.stats();
    drop(logger);

    let files = [LogFile::open(&path).unwrap()];
    assert!(files[0].warnings().is_empty(), "{:?}", files[0].warnings());
    let mut messages = Vec::new();
    let mut gap_records = 0;
    for ev in Merge::new(&files, Filter::default()) {
        match ev {
            Event::Record(r) => messages.push(r.message()),
            Event::Gap(g, _) => gap_records += g.count,
        }
    }
    Outcome {
        lens: lens.to_vec(),
        stats,
        messages,
        gap_records,
    }
}

/// Checks an outcome against a ring of `cap` bytes: every call accounted
/// for (written or dropped), every string that fits decoded intact between
/// its markers, every one that does not counted as oversize and shown as a
/// gap.
fn check(o: &Outcome, cap: usize) -> Result<(), TestCaseError> {
    let calls = 3 * o.lens.len() as u64;
    prop_assert_eq!(
        o.stats.logged + o.stats.dropped,
        calls,
        "calls neither written nor dropped: {:?}",
        o.stats
    );
    let too_big = o.lens.iter().filter(|&&l| ring_len(l) > cap).count() as u64;
    prop_assert_eq!(o.stats.oversize, too_big, "oversize count");
    prop_assert_eq!(o.stats.dropped, too_big, "dropped count");
    prop_assert_eq!(o.gap_records, too_big, "records the file reports lost");
    prop_assert_eq!(o.messages.len() as u64, calls - too_big, "records decoded");
    let mut m = o.messages.iter();
    for (i, &len) in o.lens.iter().enumerate() {
        prop_assert_eq!(m.next().map(String::as_str), Some(&*format!("before {i}")));
        if ring_len(len) <= cap {
            let got = m.next().map(String::as_str).unwrap_or("");
            let c = char::from(b'a' + (i % 26) as u8);
            prop_assert!(
                got.len() == len + 2
                    && got.starts_with("s ")
                    && got[2..].bytes().all(|b| b == c as u8),
                "string of {} bytes (ring {}) decoded as {} bytes",
                len,
                cap,
                got.len()
            );
        }
        prop_assert_eq!(m.next().map(String::as_str), Some(&*format!("after {i}")));
    }
    Ok(())
}

/// The sizes around every boundary of a ring of `cap` bytes: the release
/// window (an eighth), a quarter, a half, an exact fit, one byte over, and
/// twice the ring.
fn boundaries(cap: usize) -> Vec<usize> {
    let exact = cap - 20;
    let mut v = vec![16, 100, 4000];
    for at in [cap / 8, cap / 4, cap / 2] {
        v.extend([at - 64, at - 20, at - 19, at, at + 8]);
    }
    v.extend([exact - 8, exact, exact + 1, cap, 2 * cap]);
    v
}

#[test]
fn every_record_that_fits_a_64k_ring_is_kept_and_every_larger_one_counted() {
    let cap = 64 << 10;
    let o = run("64k", Some(cap), &boundaries(cap));
    check(&o, cap).unwrap();
}

#[test]
fn every_record_that_fits_the_default_ring_is_kept_and_every_larger_one_counted() {
    let cap = 1 << 20;
    let o = run("default", None, &boundaries(cap));
    check(&o, cap).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Any ring size, any mix of record sizes up to twice the ring: no
    /// record is lost uncounted.
    #[test]
    fn no_record_is_lost_uncounted(
        shift in 12u32..19,
        fractions in proptest::collection::vec(0.0f64..2.0, 1..12),
    ) {
        let cap = 1usize << shift;
        let lens: Vec<usize> = fractions.iter().map(|f| (f * cap as f64) as usize).collect();
        let o = run("prop", Some(cap), &lens);
        check(&o, cap)?;
    }
}
