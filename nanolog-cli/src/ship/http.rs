//! Sending a batch to the collector (OTLP/HTTP, `POST …/v1/logs`) until it
//! is accepted: connection errors, 429 and 5xx are retried with backoff
//! (the collector's `Retry-After` honoured); any other status is an error
//! that names it, as OTLP/HTTP's rules for a client say.

use std::io::{self, Write};
use std::time::Duration;

/// The first wait after a failure; each further failure doubles it, up to
/// the client's limit.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);

/// The collector's endpoint and how to reach it.
pub(crate) struct Client {
    agent: ureq::Agent,
    url: String,
    max_backoff: Duration,
    /// Sends that failed and were tried again.
    pub(crate) retries: u64,
    /// xorshift state for the jitter of the waits.
    jitter: u64,
}

impl Client {
    /// A client of the collector at `endpoint` (`http://host:4318`, to which
    /// `/v1/logs` is added, or a URL that already ends with it).
    pub(crate) fn new(endpoint: &str, max_backoff: Duration) -> anyhow::Result<Client> {
        let endpoint = endpoint.trim_end_matches('/');
        if endpoint.starts_with("https://") {
            anyhow::bail!(
                "{endpoint}: this nanolog ships over plain HTTP only (no TLS is built in); \
                 send to a collector agent on the host or the pod (http://localhost:4318)"
            );
        }
        if !endpoint.starts_with("http://") {
            anyhow::bail!("{endpoint}: not an http:// URL (e.g. http://localhost:4318)");
        }
        let url = if endpoint.ends_with("/v1/logs") {
            endpoint.to_string()
        } else {
            format!("{endpoint}/v1/logs")
        };
        let agent = ureq::Agent::config_builder()
            // A status is an answer to act on (retry or stop), not an error.
            .http_status_as_error(false)
            // A collector that accepts a connection and then hangs is a
            // failure to retry, not a reason to wait forever.
            .timeout_global(Some(Duration::from_secs(30)))
            .max_redirects(0)
            .build()
            .into();
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9E37_79B9, |d| d.subsec_nanos() as u64)
            | 1;
        Ok(Client {
            agent,
            url,
            max_backoff: max_backoff.max(FIRST_BACKOFF),
            retries: 0,
            jitter: seed,
        })
    }

    /// The URL batches are posted to.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Sends `body` (an encoded `ExportLogsServiceRequest`) until the
    /// collector accepts it (2xx). Retries for as long as it takes while
    /// the failures are ones OTLP calls retryable; returns the error of a
    /// status that is not.
    pub(crate) fn send(&mut self, body: &[u8]) -> anyhow::Result<()> {
        let mut backoff = FIRST_BACKOFF;
        let mut failures = 0u32;
        loop {
            let answer = self
                .agent
                .post(&self.url)
                .header("Content-Type", "application/x-protobuf")
                .send(body);
            let (why, retry_after) = match answer {
                Ok(mut resp) => {
                    let status = resp.status();
                    if status.is_success() {
                        if failures > 0 {
                            let _ = writeln!(
                                io::stderr(),
                                "nanolog: the collector at {} accepts batches again",
                                self.url
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
                    let text = resp
                        .body_mut()
                        .with_config()
                        .limit(4096)
                        .read_to_string()
                        .unwrap_or_default();
                    let why = format!("{status}{}", excerpt(&text));
                    let code = status.as_u16();
                    if !(code == 429 || (500..600).contains(&code)) {
                        anyhow::bail!(
                            "the collector at {} refused a batch: {why} (not retried: only 429 and 5xx are)",
                            self.url
                        );
                    }
                    (why, retry_after)
                }
                Err(e) => (e.to_string(), None),
            };
            failures += 1;
            self.retries += 1;
            let wait = retry_after
                .unwrap_or_else(|| self.jittered(backoff))
                .min(self.max_backoff);
            let _ = writeln!(
                io::stderr(),
                "nanolog: warning: the collector at {}: {why}; trying again in {:.1} s",
                self.url,
                wait.as_secs_f64()
            );
            std::thread::sleep(wait);
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
