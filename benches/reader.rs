//! Criterion: the reader on a log of 1,000,000 records from 4 threads (the
//! same mix as `examples/gen_log.rs`): merging into time order, merging and
//! rendering every message, and aggregating one argument from the binary
//! values. `benches/offline.sh` measures the `nanolog` command end to end.

use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nanolog::reader::{Event, Filter, LogFile, Merge};

#[path = "../examples/common/workload.rs"]
mod workload;

const RECORDS: u64 = 1_000_000;

fn bench(c: &mut Criterion) {
    let path =
        std::env::temp_dir().join(format!("nanolog-bench-reader-{}.nlog", std::process::id()));
    workload::write_log(&path, 4, RECORDS);
    let files = [LogFile::open(&path).expect("open")];
    let mut g = c.benchmark_group("reader");
    g.throughput(Throughput::Elements(RECORDS));
    g.bench_function("merge_only", |b| {
        b.iter(|| Merge::new(&files, Filter::default()).count())
    });
    g.bench_function("merge_and_render", |b| {
        let mut out = String::with_capacity(1 << 20);
        b.iter(|| {
            let mut n = 0usize;
            for ev in Merge::new(&files, Filter::default()) {
                if let Event::Record(r) = ev {
                    r.render(&mut out);
                    n += out.len();
                    out.clear();
                }
            }
            n
        })
    });
    g.bench_function("aggregate_arg0", |b| {
        b.iter(|| {
            let (mut n, mut sum) = (0u64, 0f64);
            let all = 0..files[0].extent_count();
            for r in files[0].records_of_extents(all).flatten() {
                if r.site().format == "Hello World # {}" {
                    if let Some(v) = r.arg(0).and_then(|v| v.as_f64()) {
                        n += 1;
                        sum += v;
                    }
                }
            }
            (n, sum)
        })
    });
    g.finish();
    let _ = std::fs::remove_file(&path);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
