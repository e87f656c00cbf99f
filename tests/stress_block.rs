//! 4 threads x 1,000,000 records through small rings with `OnFull::Block`:
//! nothing lost, nothing duplicated, each thread in order, merge in time order.

use nanolog::reader::{Event, Filter, LogFile, Merge, Value};

const THREADS: u64 = 4;
const PER_THREAD: u64 = if cfg!(miri) { 1_000 } else { 1_000_000 };

#[test]
fn four_threads_block_mode_lose_nothing_and_merge_in_time_order() {
    let path = std::env::temp_dir().join(format!("nanolog-stress-{}.nlog", std::process::id()));
    let logger = nanolog::Logger::builder()
        .path(&path)
        .staging_capacity(4096)
        .on_full(nanolog::OnFull::Block)
        .start()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            s.spawn(move || {
                for i in 0..PER_THREAD {
                    nanolog::info!("thread {} record {} of {}", t, i, "stress");
                }
            });
        }
    });
    logger.flush().unwrap();
    let stats = logger.stats();
    drop(logger);
    assert_eq!(stats.dropped, 0);
    assert_eq!(stats.logged, THREADS * PER_THREAD);

    let files = [LogFile::open(&path).unwrap()];
    let mut next = vec![0u64; THREADS as usize];
    let mut last_ns = i64::MIN;
    let mut total = 0u64;
    for ev in Merge::new(&files, Filter::default()) {
        let Event::Record(r) = ev else {
            panic!("unexpected gap")
        };
        let ns = r.unix_ns();
        assert!(ns >= last_ns, "merged output went back in time");
        last_ns = ns;
        let (Some(Value::Uint(t)), Some(Value::Uint(i))) = (r.arg(0), r.arg(1)) else {
            panic!("unexpected arguments in {r:?}")
        };
        assert_eq!(
            i as u64, next[t as usize],
            "thread {t} out of order or duplicated"
        );
        next[t as usize] += 1;
        total += 1;
    }
    assert_eq!(total, THREADS * PER_THREAD);
    assert!(next.iter().all(|&n| n == PER_THREAD), "{next:?}");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(path.with_extension("nlog.lock"));
}
