//! The decoded message of every record equals `format!` of the same literal
//! and arguments (README "Using nanolog in an existing service"), for every format feature and argument type.

use std::fmt;

#[macro_use]
mod common;

use nanolog::reader::{Event, Filter, LogFile, Merge};

struct Point {
    x: i32,
    y: i32,
}
impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {})", self.x, self.y)
    }
}
impl fmt::Debug for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Point")
            .field("x", &self.x)
            .field("y", &self.y)
            .finish()
    }
}

/// Display that uses the formatter's padding, to check specs reach it.
struct Padded(&'static str);
impl fmt::Display for Padded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.0)
    }
}

#[derive(Debug)]
#[allow(dead_code)]
enum Shape {
    Circle { r: f64 },
    Empty,
}

#[test]
fn decoded_message_equals_format() {
    let path = std::env::temp_dir().join(format!("nanolog-oracle-{}.nlog", std::process::id()));
    let _t = common::TempLog(path.clone());
    let logger = nanolog::Logger::builder()
        .path(&path)
        .level(nanolog::Level::Trace)
        .start()
        .unwrap();
    let mut e: Vec<String> = Vec::new();

    // Literals and escapes.
    case!(e, "plain text");
    case!(e, "");
    case!(e, "{{braces}} and }}{{");
    case!(e, "unicode: héllo wörld ✓ 日本語 🎉");

    // Integers at their extremes, every type.
    case!(
        e,
        "{} {} {} {} {}",
        u8::MAX,
        u16::MAX,
        u32::MAX,
        u64::MAX,
        u128::MAX
    );
    case!(
        e,
        "{} {} {} {} {}",
        i8::MIN,
        i16::MIN,
        i32::MIN,
        i64::MIN,
        i128::MIN
    );
    case!(
        e,
        "{} {} {} {} {}",
        i8::MAX,
        i16::MAX,
        i32::MAX,
        i64::MAX,
        i128::MAX
    );
    case!(e, "{} {} {} {}", usize::MAX, isize::MIN, isize::MAX, 0usize);
    case!(e, "{} {} {}", 0u8, -1i64, 1i128 << 100);
    case!(e, "{} {}", u64::MAX as u128 + 1, -(u64::MAX as i128) - 1);
    for v in [
        0i64,
        1,
        -1,
        127,
        128,
        -128,
        -129,
        255,
        256,
        65535,
        -65536,
        1 << 40,
        -(1 << 55),
        i64::MAX - 1,
    ] {
        case!(e, "int {} {:?} {:x} {:#X} {:o} {:#b}", v, v, v, v, v, v);
    }

    // Radix, sign, alternate, zero, width, fill, align.
    case!(e, "{:x} {:X} {:o} {:b}", 255u8, 255u8, 8u8, 5u8);
    case!(e, "{:#x} {:#X} {:#o} {:#b}", 255u32, 255u32, 8u32, 5u32);
    case!(e, "{:x} {:x} {:x} {:x}", -1i8, -1i16, -1i32, -1i128);
    case!(e, "{:+x} {:+} {:+} {:+}", -1i32, 5, 0, -5);
    case!(e, "[{:5}] [{:<5}] [{:^5}] [{:>5}]", 42, 42, 42, 42);
    case!(e, "[{:*^9}] [{:->7}] [{:_<6}] [{:é^8}]", 42, -42, 7u8, 1);
    case!(
        e,
        "[{:08}] [{:+08}] [{:08}] [{:#010x}] [{:#06b}]",
        42,
        42,
        -42,
        255,
        5
    );
    case!(e, "[{:<08}] [{:^08}] [{:>+08}]", 7, 7, 7);
    case!(e, "[{:2}] [{:0}] [{:1}]", 12345, 7, -7);
    case!(
        e,
        "[{:e}] [{:E}] [{:.2e}] [{:10.1e}] [{:+e}]",
        1234,
        1_000_000u64,
        12345,
        -987654,
        5
    );

    // Floats: precision, specials, signed zero, exponent.
    case!(e, "{} {} {} {}", 1.0f64, 0.1f64, 1e20f64, 1e-7f64);
    case!(e, "{} {} {}", 1.5f32, 0.1f32, f32::MAX);
    case!(e, "{} {} {}", f64::MAX, f64::MIN_POSITIVE, f64::EPSILON);
    case!(
        e,
        "{} {} {} {}",
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -0.0f64
    );
    case!(e, "{:?} {:?} {:?} {:?}", f64::NAN, 1e20f64, -0.0f64, 0.1f32);
    case!(
        e,
        "{:.0} {:.1} {:.3} {:.10}",
        2.5f64,
        0.05f64,
        std::f64::consts::PI,
        1.0f64 / 3.0
    );
    case!(
        e,
        "[{:8.2}] [{:<8.2}] [{:^8.2}] [{:+.2}] [{:08.3}]",
        3.14158,
        3.14158,
        3.14158,
        3.14158,
        -3.14158
    );
    case!(
        e,
        "[{:08}] [{:08}] [{:+08}] [{:8}]",
        f64::NAN,
        f64::NEG_INFINITY,
        f64::INFINITY,
        f64::NAN
    );
    case!(
        e,
        "[{:+}] [{:+}] [{:+}] [{:+.1}]",
        0.0f64,
        -0.0f64,
        f64::NAN,
        2.25f32
    );
    case!(
        e,
        "[{:e}] [{:E}] [{:.3e}] [{:^+12.2e}] [{:e}]",
        1234.5f64,
        0.00012f64,
        6.02214076e23f64,
        299792458.0f64,
        f32::MIN
    );
    case!(e, "[{:#}] [{:#?}] [{:#e}]", 1.5f64, 2.5f64, 3.5f64);
    case!(e, "[{:10?}] [{:<10.2?}]", 1.5f64, 2.0f32);

    // bool, char, str, String: Display, Debug, width, precision.
    case!(e, "{} {} {:?} {:>6} {:<7}|", true, false, true, true, false);
    case!(e, "[{:.2}] [{:^9.3}] [{:05}]", true, false, true);
    case!(e, "{} {:?} {:?} {:?} {:?}", 'a', 'a', '\n', '\'', '"');
    case!(
        e,
        "[{:>3}] [{:<3}] [{:^5}] [{:03}] [{:.0}]",
        'x',
        'y',
        'z',
        'w',
        'v'
    );
    case!(e, "{:?} {:?} {:?}", 'é', '\u{0}', '\u{7f}');
    let s = "tab\there \"quoted\" back\\slash\nnewline \u{1b}[31m";
    case!(e, "{} | {:?} | {:#?}", s, s, s);
    case!(
        e,
        "[{:10}] [{:>10}] [{:^10}] [{:.3}] [{:>8.2}] [{:-^11.5}]",
        "abc",
        "abc",
        "abc",
        "abcdef",
        "abcdef",
        "héllo wörld"
    );
    case!(e, "[{:05}] [{:+}] [{:#}]", "ab", "cd", "ef");
    case!(e, "[{:>10?}] [{:.1?}] [{:10?}]", "ab", "cd", 'x');
    let owned = String::from("owned string");
    case!(e, "{} {:?} {:>15}", owned, owned, owned);
    let r: &str = &owned;
    let rr: &&str = &r;
    case!(e, "{} {}", r, rr);
    case!(e, "{}|{:?}|{:5}|", "", "", "");
    let big: String = "0123456789abcdef".repeat(4096);
    case!(e, "64 KiB: {}", big);
    case!(e, "{:.*}|{:>2$}", 3, "truncate me", 12);

    // Width and precision from arguments.
    case!(
        e,
        "[{:1$}] [{:>1$}] [{:.*}] [{:>w$.p$}]",
        7,
        6,
        2,
        1.23456,
        9.87654,
        w = 10,
        p = 3
    );
    case!(
        e,
        "[{:w$}] [{:.p$}] [{0:>w$.p$}]",
        2.5f64,
        1.0f64 / 7.0,
        w = 8,
        p = 2
    );
    let width = 12;
    let prec = 4;
    case!(
        e,
        "[{:width$.prec$}] [{:>width$}]",
        std::f64::consts::E,
        "cap"
    );

    // Positional, named, captured, reused.
    case!(e, "{0} {1} {0} {}", "a", "b");
    case!(e, "{1} {} {0} {}", 1, 2);
    case!(e, "{name} is {age} years; {name:?}", name = "Ann", age = 42);
    let x = 5;
    let label = "cap";
    case!(e, "captured {x} {label} {x:>4} {label:?}");
    case!(e, "mixed {} {named} {x} {0:?}", 1.5, named = 'n');
    case!(e, "{0:x} {0:X} {0:o} {0:b} {0:e} {0}", 1000u32);

    // The slow path: user Display/Debug types, with specs.
    let p = Point { x: 3, y: -4 };
    case!(e, "{} {:?} {:#?}", p, p, p);
    case!(
        e,
        "[{:>12}] [{:<12}] [{:^12}]",
        Padded("pad"),
        Padded("pad"),
        Padded("pad")
    );
    case!(
        e,
        "{:?} {:?} {:?}",
        Shape::Circle { r: 1.5 },
        Shape::Empty,
        Some(3)
    );
    case!(
        e,
        "{:?} {:?} {:?}",
        vec![1, 2, 3],
        (1, "two", 3.0),
        Option::<u8>::None
    );
    case!(e, "{:?} {:?}", [1.5f32, -0.0], ["a\"b"]);
    case!(e, "{:>w$} {0:.p$?}", Point { x: 1, y: 2 }, w = 14, p = 1);
    let ip = std::net::Ipv4Addr::new(10, 0, 0, 1);
    case!(e, "{} {:?} {:>16}", ip, ip, ip);
    case!(e, "{}", std::path::Path::new("/tmp/x").display());

    // Each level's macro, and `log!` with a runtime level.
    nanolog::trace!("trace {}", 1);
    e.push("trace 1".into());
    nanolog::debug!("debug {}", 2);
    e.push("debug 2".into());
    nanolog::warn!("warn {}", 3);
    e.push("warn 3".into());
    nanolog::error!("error {}", 4);
    e.push("error 4".into());
    for lvl in nanolog::Level::ALL {
        nanolog::log!(lvl, "dynamic {} at {lvl}", 7);
        e.push(format!("dynamic {} at {lvl}", 7));
    }

    logger.flush().unwrap();
    drop(logger);

    let files = [LogFile::open(&path).unwrap()];
    assert!(files[0].warnings().is_empty(), "{:?}", files[0].warnings());
    let got: Vec<String> = Merge::new(&files, Filter::default())
        .filter_map(|ev| match ev {
            Event::Record(r) => Some(r.message()),
            Event::Gap(..) => None,
        })
        .collect();
    assert_eq!(got.len(), e.len(), "record count");
    for (i, (g, w)) in got.iter().zip(&e).enumerate() {
        assert_eq!(g, w, "case {i}: decoded message differs from format!");
    }
}
