//! Sending a batch to the collector (OTLP/HTTP, `POST …/v1/logs`) until it
//! is accepted: connection errors, 429 and 5xx are retried with backoff
//! (the collector's `Retry-After` honoured); any other status is an error
//! that names it, as OTLP/HTTP's rules for a client say.

use std::io::{self, Write};
use std::time::Duration;

use super::options::Options;

/// The first wait after a failure; each further failure doubles it, up to
/// the client's limit.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// The collector refused a request for its size (413, or 400 saying "too
/// large"), or closed the connection on it again and again: the sender
/// splits it and tries the parts.
#[derive(Debug)]
pub(crate) struct TooLarge(pub(crate) String);

impl std::fmt::Display for TooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TooLarge {}

/// Connections closed in a row while sending one request larger than
/// [`CLOSED_LARGE`] before it is taken to be too large.
const CLOSED_TRIES: u32 = 3;
const CLOSED_LARGE: usize = 16 << 10;

/// Whether a failed request was cut off by the other end (reset, closed
/// before an answer), not refused or timed out.
fn closed_on_us(e: &ureq::Error) -> bool {
    use io::ErrorKind::*;
    match e {
        ureq::Error::Io(io) => matches!(
            io.kind(),
            ConnectionReset | BrokenPipe | UnexpectedEof | ConnectionAborted
        ),
        other => other.to_string().to_ascii_lowercase().contains("closed"),
    }
}

/// Whether `e` is a TLS handshake that failed on a certificate (the
/// server's did not verify, or the server refused ours): rustls says
/// "certificate" in each such error, directly or inside the I/O error its
/// stream gives.
fn certificate_failed(e: &ureq::Error) -> bool {
    let text = match e {
        ureq::Error::Io(io) => io.to_string(),
        other => other.to_string(),
    };
    let text = text.to_ascii_lowercase();
    text.contains("certificate") || text.contains("unknownissuer")
}

/// Whether `e` is a connection refused: nothing listens at the endpoint.
fn refused(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Io(io) => io.kind() == io::ErrorKind::ConnectionRefused,
        other => other.to_string().to_ascii_lowercase().contains("refused"),
    }
}

/// The collector's endpoint and how to reach it.
pub(crate) struct Client {
    agent: ureq::Agent,
    url: String,
    /// The URL as it is shown (credentials hidden).
    shown: String,
    /// `Authorization` for credentials given in the URL.
    auth: Option<String>,
    /// Headers of every request.
    headers: Vec<(String, String)>,
    /// Compress bodies with gzip.
    gzip: bool,
    /// Give up after failing this long without an accepted batch.
    give_up: Option<Duration>,
    max_backoff: Duration,
    /// Sends that failed and were tried again.
    pub(crate) retries: u64,
    /// xorshift state for the jitter of the waits.
    jitter: u64,
}

impl Client {
    /// A client of the collector at `endpoint` (`http://host:4318`, to which
    /// `/v1/logs` is added before any query string, or a URL that already
    /// ends with it; `exact`: a signal-specific URL, used as it is). A URL
    /// that does not parse is refused here, not retried as if the
    /// collector were down.
    ///
    /// Headers and URL credentials go only over https:// or to a loopback
    /// address: anything else is refused here, before any connection. An
    /// https:// endpoint is verified against the system's roots or the CA
    /// given; one that does not verify fails every request, and nothing
    /// is sent.
    pub(crate) fn new(
        endpoint: &str,
        exact: bool,
        max_backoff: Duration,
        give_up: Option<Duration>,
        opts: Options,
    ) -> anyhow::Result<Client> {
        let e = Endpoint::parse(endpoint, exact)?;
        if !e.tls && !e.loopback && (e.auth.is_some() || !opts.headers.is_empty()) {
            let what = match (e.auth.is_some(), opts.headers.is_empty()) {
                (true, true) => "credentials in the URL".to_owned(),
                (false, _) => format!("headers ({})", header_names(&opts.headers)),
                (true, false) => format!(
                    "credentials in the URL and headers ({})",
                    header_names(&opts.headers)
                ),
            };
            anyhow::bail!(
                "{}: {what} would go in the clear over http:// to a host that is not this \
                 machine; not sent: use https://, or a collector on a loopback address",
                e.shown
            );
        }
        let (url, shown, auth) = (e.url, e.shown, e.auth);
        let tls = tls_config(&opts)?;
        let agent = ureq::Agent::config_builder()
            // A status is an answer to act on (retry or stop), not an error.
            .http_status_as_error(false)
            // A collector that accepts a connection and then hangs is a
            // failure to retry, not a reason to wait forever.
            .timeout_global(Some(opts.timeout.unwrap_or(Duration::from_secs(30))))
            .max_redirects(0)
            .tls_config(tls)
            .build()
            .into();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9E37_79B9, |d| d.subsec_nanos() as u64)
            | 1;
        Ok(Client {
            agent,
            url,
            shown,
            auth,
            headers: opts.headers,
            gzip: opts.gzip,
            give_up,
            max_backoff: max_backoff.max(FIRST_BACKOFF),
            retries: 0,
            jitter: seed,
        })
    }

    /// The URL batches are posted to, as it is shown (credentials hidden).
    pub(crate) fn shown_url(&self) -> &str {
        &self.shown
    }

    /// Sends `body` (an encoded `ExportLogsServiceRequest`) until the
    /// collector accepts it (2xx). Retries for as long as it takes while
    /// the failures are ones OTLP calls retryable; returns the error of a
    /// status that is not.
    pub(crate) fn send(&mut self, body: &[u8]) -> anyhow::Result<()> {
        let mut backoff = FIRST_BACKOFF;
        let mut failures = 0u32;
        let mut closed = 0u32;
        let first_try = std::time::Instant::now();
        // (A buffer a request: one a batch, a few a second.)
        let packed;
        let sent = if self.gzip {
            use std::io::Write as _;
            let mut z = flate2::write::GzEncoder::new(
                Vec::with_capacity(body.len() / 4),
                flate2::Compression::fast(),
            );
            z.write_all(body)?;
            packed = z.finish()?;
            &packed[..]
        } else {
            body
        };
        loop {
            let mut req = self
                .agent
                .post(&self.url)
                .header("Content-Type", "application/x-protobuf");
            if self.gzip {
                req = req.header("Content-Encoding", "gzip");
            }
            for (k, v) in &self.headers {
                req = req.header(k.as_str(), v.as_str());
            }
            if let Some(a) = &self.auth {
                req = req.header("Authorization", a);
            }
            let answer = req.send(sent);
            let (why, retry_after) = match answer {
                Ok(mut resp) => {
                    let status = resp.status();
                    if status.is_success() {
                        if failures > 0 {
                            let _ = writeln!(
                                io::stderr(),
                                "nanolog: the collector at {} accepts batches again",
                                self.shown
                            );
                        }
                        return Ok(());
                    }
                    let retry_after = resp
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs);
                    let content_type = resp
                        .headers()
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_owned();
                    let bytes = resp
                        .body_mut()
                        .with_config()
                        .limit(64 << 10)
                        .read_to_vec()
                        .unwrap_or_default();
                    let why = format!("{status}{}", reason(&content_type, &bytes));
                    let code = status.as_u16();
                    if code == 413 || code == 400 && why.to_ascii_lowercase().contains("too large")
                    {
                        return Err(TooLarge(format!(
                            "the collector at {} refused a request of {} bytes: {why}",
                            self.shown,
                            body.len()
                        ))
                        .into());
                    }
                    if !(code == 429 || (500..600).contains(&code)) {
                        anyhow::bail!(
                            "the collector at {} refused a batch: {why} (not retried: only 429 and 5xx are)",
                            self.shown
                        );
                    }
                    (why, retry_after)
                }
                Err(e) if certificate_failed(&e) => {
                    // Not retried: the same certificates fail again, and
                    // nothing may go to a peer that did not verify.
                    anyhow::bail!(
                        "TLS with the collector at {} failed on a certificate ({e}); nothing was \
                         sent. A server certificate that does not verify: give its CA with --ca \
                         (or OTEL_EXPORTER_OTLP_CERTIFICATE); a client certificate refused: see \
                         OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY",
                        self.shown
                    );
                }
                Err(e) => {
                    // A collector that closes the connection on a large
                    // body, again and again, will never take it whole. (A
                    // connection refused is a collector down: retried.)
                    if closed_on_us(&e) {
                        closed += 1;
                    } else {
                        closed = 0;
                    }
                    if closed >= CLOSED_TRIES && body.len() > CLOSED_LARGE {
                        return Err(TooLarge(format!(
                            "the collector at {} closed the connection {closed} times on a request of {} bytes ({e})",
                            self.shown,
                            body.len()
                        ))
                        .into());
                    }
                    if failures == 0 && refused(&e) {
                        let _ = writeln!(
                            io::stderr(),
                            "nanolog: nothing is listening at {} (connection refused): is the collector running? Trying again with backoff{}",
                            self.shown,
                            match self.give_up {
                                Some(l) => format!(
                                    ", giving up after {:.0} s without an accepted batch (--give-up-after)",
                                    l.as_secs_f64()
                                ),
                                None => " until it answers (--give-up-after sets a limit)".to_owned(),
                            }
                        );
                    }
                    (e.to_string(), None)
                }
            };
            failures += 1;
            if let Some(limit) = self.give_up.filter(|l| first_try.elapsed() >= *l) {
                anyhow::bail!(
                    "the collector at {} took no batch for {:.0} s ({failures} tries; the last: {why}): giving up",
                    self.shown,
                    limit.as_secs_f64()
                );
            }
            self.retries += 1;
            let mut wait = retry_after
                .unwrap_or_else(|| self.jittered(backoff))
                .min(self.max_backoff);
            // The last wait ends at the limit, not a backoff past it.
            if let Some(limit) = self.give_up {
                wait = wait.min(limit.saturating_sub(first_try.elapsed()));
            }
            let _ = writeln!(
                io::stderr(),
                "nanolog: warning: the collector at {}: {why}; trying again in {:.1} s",
                self.shown,
                wait.as_secs_f64()
            );
            // In steps, so that a SIGTERM is not kept waiting.
            let until = std::time::Instant::now() + wait;
            while std::time::Instant::now() < until {
                if super::stop::requested() {
                    return Err(super::stop::Stopped.into());
                }
                std::thread::sleep(Duration::from_millis(50).min(wait));
            }
            backoff = (backoff * 2).min(self.max_backoff);
        }
    }

    /// `d` give or take a quarter, so that many shippers do not come back at
    /// the same instant.
    fn jittered(&mut self, d: Duration) -> Duration {
        self.jitter ^= self.jitter << 13;
        self.jitter ^= self.jitter >> 7;
        self.jitter ^= self.jitter << 17;
        let f = 0.75 + (self.jitter % 1000) as f64 / 2000.0;
        d.mul_f64(f)
    }
}

/// The collector's own reason for a status: the `message` of the
/// `google.rpc.Status` an OTLP/HTTP collector answers with (protobuf, or
/// JSON), else the first line of a text body; `: REASON`, or nothing.
fn reason(content_type: &str, body: &[u8]) -> String {
    if content_type.contains("protobuf") {
        if let Some(m) = status_message(body).filter(|m| !m.is_empty()) {
            return excerpt(&m);
        }
    }
    let text = String::from_utf8_lossy(body);
    if content_type.contains("json") {
        if let Some(m) = serde_json_message(&text) {
            return excerpt(&m);
        }
    }
    excerpt(&text)
}

/// `google.rpc.Status`, as an OTLP/HTTP collector answers a refusal (its
/// `details` left out: prost skips them).
#[derive(Clone, PartialEq, prost::Message)]
struct Status {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// The `message` of a protobuf `google.rpc.Status`.
fn status_message(b: &[u8]) -> Option<String> {
    <Status as prost::Message>::decode(b)
        .ok()
        .map(|s| s.message)
}

/// `"message": "..."` of a JSON `Status` (a plain scan: no JSON parser in
/// the binary for this).
fn serde_json_message(text: &str) -> Option<String> {
    let at = text.find("\"message\"")?;
    let rest = text[at + 9..].trim_start().strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(out),
            '\\' => out.push(chars.next()?),
            c => out.push(c),
        }
    }
    None
}

/// The names of `headers`, for messages (their values are never shown).
fn header_names(headers: &[(String, String)]) -> String {
    headers
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The TLS set-up of `opts`: the system's roots, or the CA given; the
/// client's certificate and key for mutual TLS. A file that cannot be read
/// or holds no certificate (no key) is refused here.
fn tls_config(opts: &Options) -> anyhow::Result<ureq::tls::TlsConfig> {
    use ureq::tls::{parse_pem, ClientCert, PemItem, RootCerts, TlsConfig};
    let read = |what: &str, path: &std::path::Path| {
        std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("{what} {}: cannot read it: {e}", path.display()))
    };
    let certs_of = |what: &str, path: &std::path::Path| -> anyhow::Result<Vec<_>> {
        let pem = read(what, path)?;
        let certs: Vec<_> = parse_pem(&pem)
            .filter_map(|item| match item {
                Ok(PemItem::Certificate(c)) => Some(c),
                _ => None,
            })
            .collect();
        if certs.is_empty() {
            anyhow::bail!("{what} {}: no PEM certificate in it", path.display());
        }
        Ok(certs)
    };
    let mut tls = TlsConfig::builder();
    tls = match &opts.ca {
        Some(path) => tls.root_certs(RootCerts::new_with_certs(&certs_of(
            "the CA certificate",
            path,
        )?)),
        None => tls.root_certs(RootCerts::PlatformVerifier),
    };
    match (&opts.client_cert, &opts.client_key) {
        (Some(cert), Some(key)) => {
            let chain = certs_of("the client certificate", cert)?;
            let pem = read("the client key", key)?;
            let key = parse_pem(&pem)
                .find_map(|item| match item {
                    Ok(PemItem::PrivateKey(k)) => Some(k),
                    _ => None,
                })
                .ok_or_else(|| {
                    anyhow::anyhow!("the client key {}: no PEM private key in it", key.display())
                })?;
            tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
        }
        (None, None) => {}
        _ => anyhow::bail!(
            "a client certificate and its key go together (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY): one is missing"
        ),
    }
    Ok(tls.build())
}

/// Whether `host` (an URL's host, its port after it) is this machine's
/// loopback: `localhost`, `127.0.0.0/8` or `[::1]`.
fn is_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A collector endpoint, parsed: where requests go, how it is shown, and
/// the basic authentication its `user:password@` asks for.
struct Endpoint {
    url: String,
    shown: String,
    auth: Option<String>,
    /// An https:// endpoint.
    tls: bool,
    /// Its host is this machine's loopback.
    loopback: bool,
}

impl Endpoint {
    fn parse(raw: &str, exact: bool) -> anyhow::Result<Endpoint> {
        let raw = raw.trim();
        let hide = |s: &str| -> String {
            // For messages about a URL that did not parse: no credentials.
            match (s.find("://"), s.rfind('@')) {
                (Some(p), Some(at)) if at > p => format!("{}***{}", &s[..p + 3], &s[at..]),
                _ => s.to_owned(),
            }
        };
        let tls = raw.starts_with("https://");
        if !tls && !raw.starts_with("http://") {
            anyhow::bail!(
                "{}: not an http:// or https:// URL (e.g. http://localhost:4318)",
                hide(raw)
            );
        }
        let scheme = if tls { "https" } else { "http" };
        let uri: ureq::http::Uri = raw
            .parse()
            .map_err(|e| anyhow::anyhow!("{}: not a valid URL: {e}", hide(raw)))?;
        let authority = uri
            .authority()
            .ok_or_else(|| anyhow::anyhow!("{}: no host in the URL", hide(raw)))?;
        let (userinfo, host) = match authority.as_str().rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority.as_str()),
        };
        if host.is_empty() {
            anyhow::bail!("{}: no host in the URL", hide(raw));
        }
        let path = uri.path().trim_end_matches('/');
        let path = if exact || path.ends_with("/v1/logs") {
            if path.is_empty() {
                "/".to_owned()
            } else {
                path.to_owned()
            }
        } else {
            format!("{path}/v1/logs")
        };
        let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
        let url = format!("{scheme}://{host}{path}{query}");
        let auth = userinfo.map(|u| {
            let decoded = super::options::percent_decode(u);
            format!("Basic {}", base64(decoded.as_bytes()))
        });
        let shown = match userinfo {
            Some(_) => format!("{scheme}://***@{host}{path}{query}"),
            None => url.clone(),
        };
        Ok(Endpoint {
            url,
            shown,
            auth,
            tls,
            loopback: is_loopback(host),
        })
    }
}

/// Standard base64 with padding.
fn base64(b: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                out.push(T[(n >> shift) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `: TEXT` of a response body worth showing (its first line, shortened),
/// or nothing.
fn excerpt(body: &str) -> String {
    let line = body.lines().next().unwrap_or("").trim();
    if line.is_empty() || !line.chars().all(|c| !c.is_control()) {
        return String::new();
    }
    let cut: String = line.chars().take(200).collect();
    format!(": {cut}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_keep_queries_hide_credentials_and_refuse_bad_urls() {
        let e = Endpoint::parse("http://collector:4318/?tenant=a", false).unwrap();
        assert_eq!(e.url, "http://collector:4318/v1/logs?tenant=a");
        let e = Endpoint::parse("http://u:p%40ss@collector:4318", false).unwrap();
        assert_eq!(e.url, "http://collector:4318/v1/logs");
        assert_eq!(e.shown, "http://***@collector:4318/v1/logs");
        assert_eq!(e.auth.as_deref(), Some("Basic dTpwQHNz"));
        let e = Endpoint::parse("http://c:4318/custom/path", true).unwrap();
        assert_eq!(e.url, "http://c:4318/custom/path");
        let e = Endpoint::parse("http://c:4318/v1/logs", false).unwrap();
        assert_eq!(e.url, "http://c:4318/v1/logs");
        for bad in ["http://a b", "http://", "ftp://x", "http://u:secret@a b"] {
            let err = Endpoint::parse(bad, false).err().unwrap().to_string();
            assert!(!err.contains("secret"), "{err}");
        }
    }

    #[test]
    fn https_endpoints_and_loopback_hosts_are_told_apart() {
        let e = Endpoint::parse("https://u:p@collector.example:4318", false).unwrap();
        assert_eq!(e.url, "https://collector.example:4318/v1/logs");
        assert_eq!(e.shown, "https://***@collector.example:4318/v1/logs");
        assert!(e.tls && !e.loopback);
        for (url, loopback) in [
            ("http://localhost:4318", true),
            ("http://LOCALHOST", true),
            ("http://127.0.0.1:4318", true),
            ("http://127.9.9.9", true),
            ("http://[::1]:4318", true),
            ("http://[::2]:4318", false),
            ("http://128.0.0.1:4318", false),
            ("http://collector:4318", false),
            ("http://localhost.example.com", false),
        ] {
            let e = Endpoint::parse(url, false).unwrap();
            assert_eq!(e.loopback, loopback, "{url}");
            assert!(!e.tls, "{url}");
        }
    }

    /// Headers or URL credentials over http:// to a host that is not this
    /// machine are refused before any connection (the host here does not
    /// resolve: a connection would fail otherwise); header values are
    /// never in the message.
    #[test]
    fn secrets_are_not_sent_in_the_clear() {
        let opts = |headers: &[(&str, &str)]| Options {
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Options::default()
        };
        let new = |url: &str, o: Options| {
            Client::new(url, false, Duration::from_secs(1), None, o).map(|_| ())
        };
        let err = new(
            "http://collector.invalid:4318",
            opts(&[("x-api-key", "s3cret-value")]),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("headers (x-api-key)"), "{err}");
        assert!(!err.contains("s3cret-value"), "{err}");
        let err = new("http://me:s3cret@collector.invalid:4318", opts(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("credentials in the URL"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
        // To this machine, or over https://, or with nothing secret: taken.
        new("http://127.0.0.1:4318", opts(&[("x-api-key", "k")])).unwrap();
        new("http://u:p@localhost:4318", opts(&[])).unwrap();
        new(
            "https://collector.invalid:4318",
            opts(&[("x-api-key", "k")]),
        )
        .unwrap();
        new("http://collector.invalid:4318", opts(&[])).unwrap();
    }

    #[test]
    fn the_collectors_reason_is_read_from_its_status() {
        // google.rpc.Status { code: 3, message: "http: request body too large" }
        let mut b = vec![0x08, 0x03, 0x12, 28];
        b.extend_from_slice(b"http: request body too large");
        assert_eq!(
            reason("application/x-protobuf", &b),
            ": http: request body too large"
        );
        assert_eq!(
            reason("application/json", br#"{"code":3,"message":"too \"big\""}"#),
            ": too \"big\""
        );
        assert_eq!(reason("text/plain", b"busy\nmore"), ": busy");
        assert_eq!(base64(b"any carnal pleas"), "YW55IGNhcm5hbCBwbGVhcw==");
    }
}
