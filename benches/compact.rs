//! The flusher's compaction, on one core with its input in the cache: a
//! run of 1,024 ring records of one Table 3 call site through the function
//! the macro generates for the site (one call per run, and one call per
//! record, as when sites interleave), and the same records one at a time
//! through the interpreter that bridge sites use.
//! Nothing crosses between cores, so this is the cost of the code alone,
//! steady on a machine where the two-thread figures swing.
//! `cargo bench --bench compact`.

use std::hint::black_box;
use std::marker::PhantomData;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nanolog_runtime::compact::{__ring_record, compactor, ArgList, Interner};
use nanolog_runtime::wire::{put_varint, record};
use nanolog_runtime::ArgKind;

/// Records per iteration, appended to one buffer as the flusher does.
const RECORDS: usize = 1024;
/// The site id the records carry.
const SITE: u32 = 1;

fn p<T>() -> PhantomData<T> {
    PhantomData
}

fn raw(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

fn typed<T: ArgList>(c: &mut Criterion, name: &str, types: T, kinds: &[ArgKind], raw: &[u8]) {
    let mut g = c.benchmark_group("compact");
    g.throughput(Throughput::Elements(RECORDS as u64));
    // Ticks 10 apart, as a burst of calls has them.
    let ring: Vec<u8> = (0..RECORDS as u64)
        .flat_map(|i| __ring_record(SITE, 1000 + 10 * i, raw))
        .collect();
    let f = compactor(&types);
    let mut out = Vec::with_capacity(RECORDS * (raw.len() + 16));
    // The file's table of strings, as the flusher keeps it: a string
    // repeated is a reference from its third sighting on.
    let mut strings = Interner::new();
    // The run is taken whole (checked once, outside the timing).
    assert_eq!(
        f(&ring, SITE, &mut 1000, &mut out, usize::MAX, &mut strings),
        (ring.len(), RECORDS as u64)
    );
    // The run in one call, and the same records one call each, as the
    // flusher takes them when other sites' records come between (most
    // programs): what a call costs beyond its records (a call once
    // zero-filled 4 KiB of the output).
    let rec = ring.len() / RECORDS;
    for (kind, calls) in [("typed", ring.len()), ("interleaved", rec)] {
        g.bench_function(format!("{name}_{kind}"), |b| {
            b.iter(|| {
                out.clear();
                let mut prev = 1000;
                for r in ring.chunks_exact(calls) {
                    f(
                        black_box(r),
                        SITE,
                        &mut prev,
                        &mut out,
                        usize::MAX,
                        &mut strings,
                    );
                }
                black_box(&out);
            })
        });
    }
    // The flusher's per-record path for the same records: the two varints,
    // then the interpreter over the arguments (the header is not parsed
    // here: every record has `raw` and a tick 10 after the last).
    g.bench_function(format!("{name}_interpreted"), |b| {
        b.iter(|| {
            out.clear();
            for i in 0..RECORDS {
                put_varint(&mut out, u64::from(SITE));
                put_varint(&mut out, black_box(if i == 0 { 0 } else { 10 }));
                record::compact_with(black_box(kinds), black_box(raw), &mut out, &mut strings);
            }
            black_box(&out);
        })
    });
    g.finish();
}

fn bench(c: &mut Criterion) {
    let s = "basic+udp:host=192.168.1.140,port=12246";
    typed(
        c,
        "stringConcat",
        (p::<&str>(), ()),
        &[ArgKind::Str],
        &raw(&[&(s.len() as u32).to_le_bytes(), s.as_bytes()]),
    );
    typed(
        c,
        "singleInteger",
        (p::<i32>(), ()),
        &[ArgKind::I32],
        &181i32.to_le_bytes(),
    );
    typed(
        c,
        "twoIntegers",
        (p::<u64>(), (p::<u64>(), ())),
        &[ArgKind::U64, ArgKind::U64],
        &raw(&[&1032024u64.to_le_bytes(), &1016544u64.to_le_bytes()]),
    );
    typed(
        c,
        "singleDouble",
        (p::<f64>(), ()),
        &[ArgKind::F64],
        &0.4f64.to_le_bytes(),
    );
    typed(
        c,
        "complexFormat",
        (
            p::<u64>(),
            (p::<u32>(), (p::<u32>(), (p::<u32>(), (p::<f64>(), ())))),
        ),
        &[
            ArgKind::U64,
            ArgKind::U32,
            ArgKind::U32,
            ArgKind::U32,
            ArgKind::F64,
        ],
        &raw(&[
            &50000u64.to_le_bytes(),
            &97u32.to_le_bytes(),
            &50u32.to_le_bytes(),
            &0u32.to_le_bytes(),
            &26.2f64.to_le_bytes(),
        ]),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
