//! A stand-in for an OpenTelemetry Collector, to try `nanolog ship` without
//! building one: it listens for OTLP/HTTP protobuf on the address given
//! (default 127.0.0.1:4318), accepts every batch and prints each log record
//! it receives as one line: time, severity, the resource's service.name,
//! the body, then the attributes as `key=value`.
//!
//! ```sh
//! cargo run -p nanolog-cli --example otlp_print -- 127.0.0.1:4318 &
//! nanolog ship --once --endpoint http://127.0.0.1:4318 --service checkout app.nlog
//! ```
//!
//! It is a way to see what `ship` sends, not a collector: one request at a
//! time, no TLS, no gRPC, nothing stored.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use prost::Message;

fn main() -> io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:4318".to_owned());
    let listener = TcpListener::bind(&addr)?;
    eprintln!(
        "otlp_print: listening on http://{} (POST /v1/logs)",
        listener.local_addr()?
    );
    for conn in listener.incoming() {
        match conn {
            Ok(conn) => {
                if let Err(e) = serve(conn) {
                    eprintln!("otlp_print: connection ended: {e}");
                }
            }
            Err(e) => eprintln!("otlp_print: accept failed: {e}"),
        }
    }
    Ok(())
}

/// Answers the requests of one connection until the client closes it.
fn serve(conn: TcpStream) -> io::Result<()> {
    let mut r = BufReader::new(conn.try_clone()?);
    let mut w = conn;
    loop {
        let mut request_line = String::new();
        if r.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if r.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; len];
        r.read_exact(&mut body)?;
        if !request_line.starts_with("POST ") {
            w.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")?;
            continue;
        }
        match ExportLogsServiceRequest::decode(&body[..]) {
            Ok(req) => {
                print(&req)?;
                w.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n")?;
            }
            Err(e) => {
                eprintln!("otlp_print: not an OTLP logs request: {e}");
                w.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")?;
            }
        }
    }
}

/// One line per log record of `req`.
fn print(req: &ExportLogsServiceRequest) -> io::Result<()> {
    let mut out = io::stdout().lock();
    for rl in &req.resource_logs {
        let service = rl
            .resource
            .as_ref()
            .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
            .map_or_else(|| "-".to_owned(), |kv| shown(kv.value.as_ref()));
        for lr in rl.scope_logs.iter().flat_map(|s| &s.log_records) {
            let secs = lr.time_unix_nano / 1_000_000_000;
            let nanos = lr.time_unix_nano % 1_000_000_000;
            write!(
                out,
                "{secs}.{nanos:09} {:<5} {service}: {}",
                lr.severity_text,
                shown(lr.body.as_ref())
            )?;
            for kv in &lr.attributes {
                write!(out, " {}", pair(kv))?;
            }
            writeln!(out)?;
        }
    }
    out.flush()
}

fn pair(kv: &KeyValue) -> String {
    format!("{}={}", kv.key, shown(kv.value.as_ref()))
}

/// A value as text: strings as they are, lists and maps in brackets.
fn shown(v: Option<&AnyValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        None => "-".to_owned(),
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        Some(Value::BytesValue(b)) => format!("<{} bytes>", b.len()),
        Some(Value::StringValueStrindex(i)) => format!("<string #{i}>"),
        Some(Value::ArrayValue(a)) => {
            let items: Vec<String> = a.values.iter().map(|v| shown(Some(v))).collect();
            format!("[{}]", items.join(", "))
        }
        Some(Value::KvlistValue(l)) => {
            let items: Vec<String> = l.values.iter().map(pair).collect();
            format!("{{{}}}", items.join(" "))
        }
    }
}
