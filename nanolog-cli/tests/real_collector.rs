//! `nanolog ship` into a real OpenTelemetry Collector (the core's OTLP
//! receiver over HTTP with its default body limit, the batch processor, and
//! contrib's file exporter), built from the Go module proxy by `.ci/run`
//! (`.ci/otelcol/`). Ignored unless asked for: `NANOLOG_OTELCOL=PATH cargo
//! test -p nanolog-cli --test real_collector -- --ignored`.
//!
//! What the collector wrote is compared with `nanolog decode` of the same
//! set: every record once, each time to the nanosecond, unique attribute
//! keys; and a record over the collector's 20 MiB limit arrives cut and
//! marked, with the record after it.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

mod common;
use common::SpawnReaped;

use common::{p, serial, shipped, succeed};

/// The collector's binary, which a run of these tests must be given.
fn otelcol() -> PathBuf {
    let path = std::env::var_os("NANOLOG_OTELCOL")
        .map(PathBuf::from)
        .expect("NANOLOG_OTELCOL=PATH: the collector these tests run (.ci/run builds it)");
    assert!(path.is_file(), "{}: no collector there", path.display());
    path
}

fn dir(name: &str) -> PathBuf {
    common::fresh_dir("otelcol", name)
}

/// A running collector, stopped (SIGTERM, so its file exporter writes what
/// it holds) when dropped or by [`Otelcol::stop`].
struct Otelcol {
    child: common::Reaped,
    port: u16,
    out: PathBuf,
    log: PathBuf,
}

/// The OTLP/HTTP receiver's TLS: its certificate and key, and the CA its
/// clients' certificates must verify against (mutual TLS), PEM files.
struct ReceiverTls<'a> {
    cert: &'a Path,
    key: &'a Path,
    client_ca: Option<&'a Path>,
}

impl Otelcol {
    fn start(d: &Path) -> Otelcol {
        Self::start_with(d, None)
    }

    fn start_with(d: &Path, tls: Option<ReceiverTls<'_>>) -> Otelcol {
        let tls = tls.map_or(String::new(), |t| {
            let mut y = format!(
                "
        tls:
          cert_file: {}
          key_file: {}",
                t.cert.display(),
                t.key.display()
            );
            if let Some(ca) = t.client_ca {
                y.push_str(&format!(
                    "
          client_ca_file: {}",
                    ca.display()
                ));
            }
            y
        });
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let out = d.join("collector-out.json");
        let log = d.join("collector.log");
        let config = d.join("collector.yaml");
        std::fs::write(
            &config,
            format!(
                "receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{port}{tls}
processors:
  batch:
exporters:
  file:
    path: {}
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      processors: [batch]
      exporters: [file]
",
                out.display()
            ),
        )
        .unwrap();
        let child = Command::new(otelcol())
            .arg("--config")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn_reaped();
        let c = Otelcol {
            child,
            port,
            out,
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut c = c;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = c.child.try_wait().unwrap() {
                panic!("the collector exited ({status}): {}", c.said());
            }
            assert!(
                Instant::now() < deadline,
                "the collector did not listen in 60 s: {}",
                c.said()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        c
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Stops the collector and returns the log records its file exporter
    /// wrote, each as (record, its resource's attributes).
    fn stop(&mut self) -> Vec<(Json, Json)> {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("the collector did not stop in 60 s: {}", self.said());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut records = Vec::new();
        let Ok(f) = std::fs::File::open(&self.out) else {
            return records;
        };
        for line in std::io::BufReader::new(f).lines() {
            let line = line.unwrap();
            if line.trim().is_empty() {
                continue;
            }
            let v: Json = serde_json::from_str(&line).unwrap();
            for rl in v["resourceLogs"].as_array().unwrap() {
                let resource = rl["resource"]["attributes"].clone();
                for sl in rl["scopeLogs"].as_array().unwrap() {
                    for r in sl["logRecords"].as_array().unwrap() {
                        records.push((r.clone(), resource.clone()));
                    }
                }
            }
        }
        records
    }
}

impl Drop for Otelcol {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The attributes of an OTLP JSON record as (key, value) pairs.
fn attrs(list: &Json) -> Vec<(String, Json)> {
    list.as_array()
        .map(|a| {
            a.iter()
                .map(|kv| (kv["key"].as_str().unwrap().to_owned(), kv["value"].clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// A rolled set of 30,000 records from two threads, with typed fields and
/// a field named like one of nanolog's own keys: what the collector wrote
/// is what `decode` of the set prints, each record once, to the nanosecond,
/// with unique keys and the writer's host.
#[test]
#[ignore = "needs a real OpenTelemetry Collector: NANOLOG_OTELCOL=PATH (built by .ci/run)"]
fn a_rolled_set_arrives_in_a_real_collector_as_decode_prints_it() {
    let _s = serial();
    let d = dir("set");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&base)
        .rotate_bytes(32 << 10)
        .start()
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..2u64 {
            s.spawn(move || {
                for i in 0..15_000u64 {
                    nanolog::info!(
                        "order {id} side {side} px {px} target {target}",
                        id = t * 15_000 + i,
                        side = if i % 2 == 0 { "buy" } else { "sell" },
                        px = i as f64 / 4.0,
                        target = "desk"
                    );
                }
            });
        }
    });
    drop(logger);
    let mut set: Vec<PathBuf> = nanolog_runtime::finished_files(&base)
        .unwrap()
        .into_iter()
        .map(|(f, _)| f)
        .collect();
    assert!(set.len() > 2, "the set rolled: {} files", set.len());
    set.push(base.clone());

    let mut c = Otelcol::start(&d);
    let (status, err) = shipped(
        &[
            "--endpoint",
            &c.endpoint(),
            "--service",
            "checkout",
            "--once",
            p(&base),
        ],
        180,
        "ship",
    );
    assert!(status.success(), "{err}\ncollector: {}", c.said());
    let got = c.stop();

    let mut args = vec!["decode", "--format", "json"];
    args.extend(set.iter().map(|f| p(f)));
    let want: std::collections::HashMap<String, u64> = String::from_utf8(succeed(&args).stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Json = serde_json::from_str(l).unwrap();
            (
                v["msg"].as_str().unwrap().to_owned(),
                v["ts_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(want.len(), 30_000);
    assert_eq!(got.len(), 30_000, "records the collector wrote");
    let host = nanolog_runtime::host_name();
    let mut seen = std::collections::HashSet::new();
    for (r, resource) in &got {
        let body = r["body"]["stringValue"].as_str().unwrap();
        assert!(seen.insert(body.to_owned()), "{body} twice");
        let time: u64 = r["timeUnixNano"].as_str().unwrap().parse().unwrap();
        assert_eq!(Some(&time), want.get(body), "{body}");
        assert_eq!(r["severityText"], "INFO");
        let keys = attrs(&r["attributes"]);
        let mut names: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "repeated keys: {keys:?}");
        let get = |k: &str| keys.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let side = get("side").unwrap()["stringValue"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(body.contains(&format!(" side {side} ")), "{body}: {keys:?}");
        assert!(get("px").unwrap()["doubleValue"].is_number(), "{keys:?}");
        // The user's `target` field kept under its documented key, beside
        // nanolog's own.
        assert_eq!(get("field.target").unwrap()["stringValue"], "desk");
        let resource = attrs(resource);
        let rget = |k: &str| {
            resource
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(rget("service.name").unwrap()["stringValue"], "checkout");
        assert_eq!(rget("host.name").unwrap()["stringValue"], host.as_str());
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A record larger than the collector's 20 MiB body limit, with ship told
/// to send bodies of up to 64 MiB: the collector refuses the request as too
/// large (its own reason shown), ship sends smaller parts, the big record
/// arrives cut and marked, and the record after it arrives.
#[test]
#[ignore = "needs a real OpenTelemetry Collector: NANOLOG_OTELCOL=PATH (built by .ci/run)"]
fn a_record_over_the_collectors_limit_arrives_cut_and_nothing_is_stuck() {
    let _s = serial();
    let d = dir("limit");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder()
        .path(&base)
        .staging_capacity(32 << 20)
        .start()
        .unwrap();
    for i in 0..1_000u64 {
        nanolog::info!("before {}", i);
    }
    let big = "x".repeat(24 << 20);
    nanolog::info!("big {}", big.as_str());
    drop(big);
    nanolog::info!("after the big one");
    drop(logger);

    let mut c = Otelcol::start(&d);
    let (status, err) = shipped(
        &[
            "--endpoint",
            &c.endpoint(),
            "--once",
            "--max-body-kib",
            "65536",
            "--max-backoff",
            "100ms",
            p(&base),
        ],
        180,
        "ship",
    );
    assert!(status.success(), "{err}\ncollector: {}", c.said());
    assert!(err.contains("too large"), "the collector's refusal: {err}");
    let got = c.stop();
    assert_eq!(got.len(), 1_002, "{err}");
    let bodies: Vec<&str> = got
        .iter()
        .map(|(r, _)| r["body"]["stringValue"].as_str().unwrap())
        .collect();
    assert!(bodies.contains(&"after the big one"));
    let (cut, _) = got
        .iter()
        .find(|(r, _)| {
            r["body"]["stringValue"]
                .as_str()
                .unwrap()
                .starts_with("big ")
        })
        .unwrap();
    let len = cut["body"]["stringValue"].as_str().unwrap().len();
    assert!(len < 20 << 20, "{len} bytes");
    let keys = attrs(&cut["attributes"]);
    let truncated = keys
        .iter()
        .find(|(k, _)| k == "nanolog.truncated_bytes")
        .map(|(_, v)| v["intValue"].as_str().unwrap().parse::<u64>().unwrap());
    assert!(truncated.is_some_and(|n| n > 24 << 20), "{keys:?}");
    let _ = std::fs::remove_dir_all(&d);
}

/// README "Trace context" through a real collector: records made inside spans that
/// carry W3C ids arrive with the LogRecord's `traceId`, `spanId` and
/// `flags` of the innermost such span (the collector's OTLP JSON writes
/// the ids as lowercase hex); records outside have none.
#[test]
#[ignore = "needs a real OpenTelemetry Collector: NANOLOG_OTELCOL=PATH (built by .ci/run)"]
fn records_in_traced_spans_arrive_in_a_real_collector_with_their_ids() {
    let _s = serial();
    let d = dir("trace-ids");
    let base = d.join("app.nlog");
    common::traced_log(&base, 50);
    let mut c = Otelcol::start(&d);
    let (status, err) = shipped(
        &["--endpoint", &c.endpoint(), "--once", p(&base)],
        120,
        "ship",
    );
    assert!(status.success(), "{err}\ncollector: {}", c.said());
    let got = c.stop();
    assert_eq!(got.len(), 150, "records the collector wrote");
    for (r, _) in &got {
        let body = r["body"]["stringValue"].as_str().unwrap();
        let ids = (
            r.get("traceId").and_then(Json::as_str).unwrap_or(""),
            r.get("spanId").and_then(Json::as_str).unwrap_or(""),
            r.get("flags").and_then(Json::as_u64).unwrap_or(0) as u32,
        );
        assert_eq!(ids, common::traced_ids(body), "{body}: {r}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// A private CA in a test's directory (`NAME-ca.pem`), and the
/// certificates it signs (rcgen: ECDSA P-256 keys, PEM files).
struct Ca {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: PathBuf,
}

impl Ca {
    fn new(d: &Path, name: &str) -> Ca {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("nanolog test CA {name}"));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        let pem = d.join(format!("{name}-ca.pem"));
        std::fs::write(&pem, cert.pem()).unwrap();
        Ca {
            issuer: rcgen::Issuer::new(params, key),
            pem,
        }
    }

    /// A certificate signed by the CA for `sans` (a server's) or a client:
    /// its certificate and key files.
    fn issue(&self, d: &Path, name: &str, sans: &[&str], client: bool) -> (PathBuf, PathBuf) {
        use rcgen::{CertificateParams, DnType, ExtendedKeyUsagePurpose, KeyPair};
        let key = KeyPair::generate().unwrap();
        let sans: Vec<String> = sans.iter().map(|s| (*s).to_owned()).collect();
        let mut params = CertificateParams::new(sans).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let (c, k) = (d.join(format!("{name}.pem")), d.join(format!("{name}.key")));
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }
}

/// `nanolog ship ARGS` with exactly the `OTEL_*` variables `env` gives.
fn ship_env(args: &[&str], env: &[(&str, &Path)]) -> (std::process::ExitStatus, String) {
    common::shipped_with_env(args, env, 120)
}

/// Ship over https:// into a real Collector whose OTLP/HTTP receiver has
/// TLS with a private CA (issue #88): every record arrives, gzip'd, with
/// the CA given by `--ca`; with mutual TLS (the receiver's
/// `client_ca_file`) and the client's certificate and key from the
/// exporter variables; a client without a certificate, a collector whose
/// certificate another CA signed, and one checked against the system's
/// roots are refused with a message that says so, and the collector
/// receives nothing.
#[test]
#[ignore = "needs a real OpenTelemetry Collector: NANOLOG_OTELCOL=PATH (built by .ci/run)"]
fn https_with_a_private_ca_and_mutual_tls_reaches_a_real_collector() {
    let _s = serial();
    let d = dir("tls");
    let base = d.join("app.nlog");
    let logger = nanolog::Logger::builder().path(&base).start().unwrap();
    for i in 0..5_000u64 {
        nanolog::info!("order {} placed", i);
    }
    drop(logger);
    let ca = Ca::new(&d, "private");
    let (server_cert, server_key) = ca.issue(&d, "collector", &["127.0.0.1", "localhost"], false);
    let (client_cert, client_key) = ca.issue(&d, "client", &["client.nanolog.test"], true);
    let other = Ca::new(&d, "other");
    let bodies = |got: &[(Json, Json)]| -> std::collections::HashSet<String> {
        got.iter()
            .map(|(r, _)| r["body"]["stringValue"].as_str().unwrap().to_owned())
            .collect()
    };

    // TLS, the CA given by flag, gzip'd, a header: every record.
    let tls = ReceiverTls {
        cert: &server_cert,
        key: &server_key,
        client_ca: None,
    };
    let mut c = Otelcol::start_with(&d, Some(tls));
    let https = format!("https://127.0.0.1:{}", c.port);
    let (status, err) = ship_env(
        &[
            "--endpoint",
            &https,
            "--ca",
            p(&ca.pem),
            "--compression",
            "gzip",
            "--header",
            "x-tenant=blue",
            "--once",
            p(&base),
        ],
        &[],
    );
    assert!(status.success(), "{err}\ncollector: {}", c.said());
    // Another CA's, or the system's roots: refused, nothing sent.
    for (ca_args, what) in [
        (vec!["--ca", p(&other.pem)], "another CA"),
        (vec![], "the system's roots"),
    ] {
        let mut args = vec!["--endpoint", https.as_str()];
        args.extend(ca_args);
        args.extend(["--once", p(&base)]);
        let t = Instant::now();
        let (status, err) = ship_env(&args, &[]);
        assert!(!status.success(), "{what}: {err}");
        assert!(
            err.contains("failed on a certificate") && err.contains("nothing was sent"),
            "{what}: {err}"
        );
        assert!(t.elapsed() < Duration::from_secs(30), "{what}: not retried");
    }
    let got = c.stop();
    assert_eq!(
        got.len(),
        5_000,
        "records over https, and none of the refused runs'"
    );
    assert_eq!(bodies(&got).len(), 5_000);

    // Mutual TLS: the client's certificate from the exporter variables.
    let tls = ReceiverTls {
        cert: &server_cert,
        key: &server_key,
        client_ca: Some(&ca.pem),
    };
    let mut c = Otelcol::start_with(&d, Some(tls));
    let https = format!("https://127.0.0.1:{}", c.port);
    let (status, err) = ship_env(
        &["--endpoint", &https, "--once", p(&base)],
        &[("OTEL_EXPORTER_OTLP_CERTIFICATE", &ca.pem)],
    );
    assert!(!status.success(), "no client certificate: {err}");
    assert!(err.contains("nothing was sent"), "{err}");
    let (status, err) = ship_env(
        &["--endpoint", &https, "--once", p(&base)],
        &[
            ("OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE", &ca.pem),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", &client_cert),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", &client_key),
        ],
    );
    assert!(status.success(), "{err}\ncollector: {}", c.said());
    let got = c.stop();
    assert_eq!(got.len(), 5_000);
    assert_eq!(bodies(&got).len(), 5_000);
    let _ = std::fs::remove_dir_all(&d);
}
