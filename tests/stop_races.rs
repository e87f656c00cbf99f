//! Races around a logger's stop, each of which once lost or corrupted
//! records: a `start` during a drop, `set_level` during a drop, and a drop
//! whose flusher is stuck in a write.
//!
//! One logger runs per process, so these tests take turns.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nanolog::reader::{Event, Filter, LogFile, Merge};
use nanolog::{Level, Logger};

use common::{serial, temp};

/// A `start` at the same path while the previous logger is being dropped
/// waits for the drop: the two flushers never write one file together.
#[test]
fn start_during_a_drop_waits_for_it() {
    let _s = serial();
    let path = temp("start-during-drop");
    for round in 0..5 {
        let first = Logger::builder().path(&path).start().unwrap();
        for i in 0..400_000u32 {
            nanolog::info!("first {}", i);
        }
        let go = Arc::new(AtomicBool::new(false));
        let retry = {
            let (path, go) = (path.clone(), Arc::clone(&go));
            std::thread::spawn(move || {
                while !go.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                let deadline = Instant::now() + Duration::from_secs(60);
                loop {
                    match Logger::builder().path(&path).start() {
                        Ok(l) => return l,
                        Err(nanolog::Error::AlreadyRunning) if Instant::now() < deadline => {
                            std::thread::yield_now()
                        }
                        Err(e) => panic!("start failed: {e}"),
                    }
                }
            })
        };
        go.store(true, Ordering::Release);
        drop(first);
        let second = retry.join().unwrap();
        for i in 0..1000u32 {
            nanolog::info!("second {}", i);
        }
        drop(second);
        let file = [LogFile::open(&path).unwrap()];
        assert!(file[0].warnings().is_empty(), "{:?}", file[0].warnings());
        assert!(file[0].is_complete());
        let msgs: Vec<String> = Merge::new(&file, Filter::default())
            .filter_map(|e| match e {
                Event::Record(r) => Some(r.message()),
                Event::Gap(..) => None,
            })
            .collect();
        let want: Vec<String> = (0..1000).map(|i| format!("second {i}")).collect();
        // Had the second start not waited, the first flusher would still be
        // writing its backlog into the file the second one truncated.
        assert_eq!(
            msgs, want,
            "round {round}: the file holds exactly the second run"
        );
    }
    common::remove_with_kept(&path);
}

/// `set_level` racing a drop never turns logging back on with no logger.
#[test]
fn set_level_racing_a_drop_does_not_reenable_logging() {
    let _s = serial();
    let path = temp("set-level-race");
    let evaluated = AtomicU32::new(0);
    for _ in 0..200 {
        let logger = Logger::builder().path(&path).start().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let setter = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    nanolog::set_level(Level::Debug);
                }
            })
        };
        std::thread::sleep(Duration::from_micros(50));
        drop(logger);
        stop.store(true, Ordering::Relaxed);
        setter.join().unwrap();
        nanolog::error!("no logger {}", evaluated.fetch_add(1, Ordering::Relaxed));
    }
    assert_eq!(
        evaluated.load(Ordering::Relaxed),
        0,
        "arguments were evaluated with no logger running"
    );
    common::remove_with_kept(&path);
}

/// A flusher blocked for good in a write (a FIFO nobody reads) does not
/// hang the drop: it gives up after its stall limit, and blocked producers
/// give up with it.
#[test]
fn drop_with_a_stuck_flusher_returns() {
    let _s = serial();
    let path = temp("fifo");
    common::remove_with_kept(&path);
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // A reader that never reads, so the writer's open succeeds and its
    // writes block once the pipe buffer (64 KiB) is full.
    // SAFETY: as above.
    let rd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_NONBLOCK) };
    assert!(rd >= 0);
    let logger = Logger::builder()
        .path(&path)
        .staging_capacity(64 << 10)
        .start()
        .unwrap();
    let producer = std::thread::spawn(|| {
        let pad = "y".repeat(200);
        for i in 0..100_000u32 {
            nanolog::info!("stuck {} {}", pad.as_str(), i);
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    drop(logger);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(30), "drop took {took:?}");
    let joined = Instant::now();
    producer.join().unwrap();
    assert!(joined.elapsed() < Duration::from_secs(30));
    // SAFETY: closes the descriptor opened above.
    unsafe { libc::close(rd) };
    common::remove_with_kept(&path);
}
