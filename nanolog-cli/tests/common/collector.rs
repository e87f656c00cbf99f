//! A collector stand-in on 127.0.0.1 for `nanolog ship`: an HTTP/1.1
//! server that decodes each request body with the official OTLP
//! definitions (the `opentelemetry-proto` crate) and answers as it is told
//! (200, a status, or a dropped connection). Shared by tests/ship.rs and
//! benches/ship.rs (which has it discard what it receives).
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
use prost::Message;

/// How the stand-in answers a request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Answer {
    Accept,
    Status(u16),
    /// Read the request, then close the connection without an answer.
    Drop,
    /// A status with a `google.rpc.Status` body (protobuf) carrying this
    /// message, as the OpenTelemetry Collector answers.
    StatusWith(u16, &'static str),
}

/// A log record as the collector received it.
#[derive(Debug, Clone, PartialEq)]
pub struct Got {
    pub time_ns: u64,
    pub severity: i32,
    pub severity_text: String,
    pub body: String,
    pub attrs: BTreeMap<String, Option<V>>,
    pub resource: BTreeMap<String, Option<V>>,
    /// The LogRecord's trace context (empty ids, 0 flags: none).
    pub trace_id: Vec<u8>,
    pub span_id: Vec<u8>,
    pub flags: u32,
}

#[derive(Default)]
pub struct State {
    /// Answers to give, in order; then `Accept`.
    pub script: VecDeque<Answer>,
    /// The batches accepted, in order.
    pub accepted: Vec<Vec<Got>>,
    /// Requests seen, whatever the answer.
    pub requests: u64,
    /// A pause before each answer.
    pub delay: Duration,
    /// Count the records, keep nothing (a benchmark's receiver).
    pub discard: bool,
    /// Records received (in discard mode: requests, as nothing is decoded).
    pub received: u64,
    /// The request target of each request (`/v1/logs?x=y`).
    pub targets: Vec<String>,
    /// The last `Authorization` header seen.
    pub authorization: Option<String>,
    /// Each request's headers (names lowercased), in order.
    pub headers: Vec<Vec<(String, String)>>,
    /// Each request's body as it came (compressed or not): its length.
    pub wire_bytes: Vec<usize>,
    /// Refuse bodies over this many bytes as the OpenTelemetry Collector
    /// does: 400 with a `google.rpc.Status` "request body too large".
    pub max_body: Option<usize>,
    /// Close the connection, unanswered, on bodies over this many bytes.
    pub close_over: Option<usize>,
}

pub struct Collector {
    pub port: u16,
    pub state: Arc<Mutex<State>>,
}

impl Collector {
    pub fn start() -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        Self::serve(listener)
    }

    pub fn serve(listener: TcpListener) -> Collector {
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State::default()));
        let st = Arc::clone(&state);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let st = Arc::clone(&st);
                std::thread::spawn(move || handle(conn, &st));
            }
        });
        Collector { port, state }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn script(&self, answers: &[Answer]) {
        self.state.lock().unwrap().script.extend(answers);
    }

    pub fn records(&self) -> Vec<Got> {
        let s = self.state.lock().unwrap();
        s.accepted.iter().flatten().cloned().collect()
    }

    pub fn count(&self) -> usize {
        let s = self.state.lock().unwrap();
        s.accepted.iter().map(Vec::len).sum()
    }
}

/// Serves one connection: requests until the client closes it.
fn handle(conn: TcpStream, st: &Mutex<State>) {
    conn.set_read_timeout(Some(Duration::from_secs(30))).ok();
    let mut r = BufReader::new(conn.try_clone().unwrap());
    let mut w = conn;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let target = line
            .strip_prefix("POST ")
            .and_then(|l| l.trim_end().strip_suffix(" HTTP/1.1"))
            .unwrap_or_else(|| panic!("not an OTLP/HTTP request: {line}"))
            .to_owned();
        st.lock().unwrap().targets.push(target);
        let mut len = 0usize;
        let mut content_type = String::new();
        let mut encoding = String::new();
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap();
            headers.push((k.to_ascii_lowercase(), v.trim().to_string()));
            match k.to_ascii_lowercase().as_str() {
                "content-length" => len = v.trim().parse().unwrap(),
                "content-type" => content_type = v.trim().to_string(),
                "content-encoding" => encoding = v.trim().to_ascii_lowercase(),
                "authorization" => st.lock().unwrap().authorization = Some(v.trim().to_string()),
                _ => {}
            }
        }
        let mut body = vec![0; len];
        if r.read_exact(&mut body).is_err() {
            return;
        }
        {
            let mut s = st.lock().unwrap();
            s.headers.push(headers);
            s.wire_bytes.push(len);
        }
        let discard = st.lock().unwrap().discard;
        match encoding.as_str() {
            "" | "identity" => {}
            // (A benchmark's receiver counts requests: nothing decoded.)
            "gzip" if discard => {}
            "gzip" => {
                let mut plain = Vec::new();
                flate2::read::GzDecoder::new(&body[..])
                    .read_to_end(&mut plain)
                    .expect("a gzip body");
                body = plain;
            }
            other => panic!("a Content-Encoding the collector does not take: {other}"),
        }
        // (The size the limits below judge: the body as it decodes.)
        let len = body.len();
        assert_eq!(content_type, "application/x-protobuf");
        let (answer, delay) = {
            let mut s = st.lock().unwrap();
            s.requests += 1;
            let answer = if s.close_over.is_some_and(|m| len > m) {
                Answer::Drop
            } else if s.max_body.is_some_and(|m| len > m) {
                Answer::StatusWith(400, "http: request body too large")
            } else {
                s.script.pop_front().unwrap_or(Answer::Accept)
            };
            (answer, s.delay)
        };
        std::thread::sleep(delay);
        match answer {
            Answer::Drop => return,
            Answer::StatusWith(code, message) => {
                let mut b = vec![0x08, 0x03, 0x12, message.len() as u8];
                b.extend_from_slice(message.as_bytes());
                let _ = write!(
                    w,
                    "HTTP/1.1 {code} Bad Request\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    b.len()
                );
                let _ = w.write_all(&b);
                return;
            }
            Answer::Status(code) => {
                let _ = write!(
                    w,
                    "HTTP/1.1 {code} Nope\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope"
                );
                return;
            }
            Answer::Accept => {
                // Recorded as accepted as the answer goes out: a client
                // killed now has had its batch taken.
                let mut s = st.lock().unwrap();
                if s.discard {
                    s.received += 1;
                } else {
                    let req = ExportLogsServiceRequest::decode(&body[..]).expect("an OTLP request");
                    let got = flatten(&req);
                    s.received += got.len() as u64;
                    s.accepted.push(got);
                }
                if w
                    .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n")
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}

pub fn attrs(
    kvs: &[opentelemetry_proto::tonic::common::v1::KeyValue],
) -> BTreeMap<String, Option<V>> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), kv.value.clone().and_then(|v| v.value)))
        .collect()
}

fn flatten(req: &ExportLogsServiceRequest) -> Vec<Got> {
    let mut out = Vec::new();
    for rl in &req.resource_logs {
        let resource = attrs(&rl.resource.as_ref().unwrap().attributes);
        for sl in &rl.scope_logs {
            assert_eq!(sl.scope.as_ref().unwrap().name, "nanolog");
            for lr in &sl.log_records {
                let body = match lr.body.as_ref().and_then(|b| b.value.clone()) {
                    Some(V::StringValue(s)) => s,
                    other => panic!("body {other:?}"),
                };
                out.push(Got {
                    time_ns: lr.time_unix_nano,
                    severity: lr.severity_number,
                    severity_text: lr.severity_text.clone(),
                    body,
                    attrs: attrs(&lr.attributes),
                    resource: resource.clone(),
                    trace_id: lr.trace_id.clone(),
                    span_id: lr.span_id.clone(),
                    flags: lr.flags,
                });
            }
        }
    }
    out
}
