//! How `ship` makes its requests, from its flags and the OpenTelemetry
//! exporter specification's variables for OTLP/HTTP logs, as every
//! OpenTelemetry SDK's exporter reads them: the `LOGS_` form over the
//! general one (`OTEL_EXPORTER_OTLP_LOGS_HEADERS` over
//! `OTEL_EXPORTER_OTLP_HEADERS`), and a flag over both.
//!
//! | what | flag | variables (`OTEL_EXPORTER_OTLP_[LOGS_]...`) |
//! |---|---|---|
//! | headers | `--header K=V` | `HEADERS`: `k=v,k2=v2`, values percent-decoded |
//! | compression | `--compression gzip\|none` | `COMPRESSION` |
//! | timeout of a request | | `TIMEOUT`, milliseconds |
//! | a private CA | `--ca FILE` | `CERTIFICATE` |
//! | mutual TLS | | `CLIENT_CERTIFICATE`, `CLIENT_KEY` |
//!
//! and `OTEL_RESOURCE_ATTRIBUTES` (`k=v,...`), added to each request's
//! resource.

use std::io::{self, Write};
use std::path::PathBuf;
use std::time::Duration;

use crate::cli::ShipArgs;

/// How requests are made beyond the endpoint: what OpenTelemetry's
/// exporter variables and ship's flags say (see [`options`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct Options {
    /// Headers sent with every request (an API key, a tenant): names and
    /// values, values never printed.
    pub(crate) headers: Vec<(String, String)>,
    /// Bodies sent gzip-compressed (`Content-Encoding: gzip`).
    pub(crate) gzip: bool,
    /// How long one request may take (OTLP's default: 10 s).
    pub(crate) timeout: Option<Duration>,
    /// A private CA's certificates (PEM) that https:// endpoints are
    /// verified against, instead of the system's roots.
    pub(crate) ca: Option<PathBuf>,
    /// The client's certificate chain and key (PEM), for mutual TLS.
    pub(crate) client_cert: Option<PathBuf>,
    pub(crate) client_key: Option<PathBuf>,
}

/// The variable `OTEL_EXPORTER_OTLP_LOGS_{name}`, else
/// `OTEL_EXPORTER_OTLP_{name}` (set and not blank), with the name of the
/// one read.
fn exporter_var(name: &str) -> Option<(String, String)> {
    [
        format!("OTEL_EXPORTER_OTLP_LOGS_{name}"),
        format!("OTEL_EXPORTER_OTLP_{name}"),
    ]
    .into_iter()
    .find_map(|k| {
        std::env::var(&k)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| (k, v))
    })
}

/// `k=v,k2=v2` as the specification writes headers and resource
/// attributes (W3C Baggage's list, without properties): keys trimmed,
/// values trimmed and percent-decoded. An entry without `=` or with an
/// empty key is refused, naming the variable (and never its values).
pub(crate) fn key_values(var: &str, text: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for (i, item) in text.split(',').enumerate() {
        if item.trim().is_empty() {
            continue;
        }
        let Some((k, v)) = item.split_once('=') else {
            anyhow::bail!("{var}: entry {} is not key=value", i + 1);
        };
        let k = k.trim();
        if k.is_empty() {
            anyhow::bail!("{var}: entry {} has no key", i + 1);
        }
        out.push((k.to_owned(), percent_decode(v.trim())));
    }
    Ok(out)
}

/// `%XX` escapes decoded (a `%` not followed by two hex digits is kept):
/// the exporter variables' values, and a URL's user information.
pub(crate) fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a header name is one HTTP takes (a token: no spaces,
/// separators or controls).
fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// The request options of `a`'s flags and the exporter variables.
pub(crate) fn options(a: &ShipArgs) -> anyhow::Result<Options> {
    // Headers: the variable's, then the flags' (a flag's value for a name
    // the variable gives too replaces it).
    let mut headers = match exporter_var("HEADERS") {
        Some((var, text)) => key_values(&var, &text)?,
        None => Vec::new(),
    };
    for h in &a.header {
        let (k, v) = h
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--header: give NAME=VALUE"))?;
        let k = k.trim();
        headers.retain(|(name, _)| !name.eq_ignore_ascii_case(k));
        headers.push((k.to_owned(), v.trim().to_owned()));
    }
    for (k, v) in &headers {
        if !is_token(k) {
            anyhow::bail!("header name {k:?}: not a valid HTTP header name");
        }
        if v.bytes().any(|b| b.is_ascii_control()) {
            anyhow::bail!("header {k}: its value holds a control character");
        }
    }
    let compression = match &a.compression {
        Some(c) => Some(("--compression".to_owned(), c.clone())),
        None => exporter_var("COMPRESSION"),
    };
    let gzip = match compression {
        None => false,
        Some((from, c)) => match c.trim().to_ascii_lowercase().as_str() {
            "gzip" => true,
            "none" => false,
            other => {
                anyhow::bail!("{from}: {other:?} is not a compression ship offers (gzip, none)")
            }
        },
    };
    let timeout = match exporter_var("TIMEOUT") {
        None => None,
        Some((var, ms)) => match ms.trim().parse::<u64>() {
            Ok(ms) if ms > 0 => Some(Duration::from_millis(ms)),
            _ => {
                // As the specification asks of an invalid value: said, and
                // the default taken.
                let _ = writeln!(
                    io::stderr(),
                    "nanolog: warning: {var}={ms}: not a timeout in milliseconds; 10000 taken"
                );
                Some(Duration::from_secs(10))
            }
        },
    };
    let file = |flag: Option<&PathBuf>, name: &str| -> Option<PathBuf> {
        flag.cloned()
            .or_else(|| exporter_var(name).map(|(_, v)| PathBuf::from(v.trim())))
    };
    Ok(Options {
        headers,
        gzip,
        timeout,
        ca: file(a.ca.as_ref(), "CERTIFICATE"),
        client_cert: file(None, "CLIENT_CERTIFICATE"),
        client_key: file(None, "CLIENT_KEY"),
    })
}

/// `OTEL_RESOURCE_ATTRIBUTES`, as key-values (empty when unset).
pub(crate) fn resource_attributes() -> anyhow::Result<Vec<(String, String)>> {
    match std::env::var("OTEL_RESOURCE_ATTRIBUTES") {
        Ok(text) if !text.trim().is_empty() => key_values("OTEL_RESOURCE_ATTRIBUTES", &text),
        _ => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_values_are_trimmed_and_percent_decoded() {
        let kv = key_values("V", " api-key = a%2Cb%3Dc , tenant=t1,,empty=").unwrap();
        assert_eq!(
            kv,
            [
                ("api-key".to_owned(), "a,b=c".to_owned()),
                ("tenant".to_owned(), "t1".to_owned()),
                ("empty".to_owned(), String::new()),
            ]
        );
        let err = key_values("V", "ok=1,secret-without-key").unwrap_err();
        assert_eq!(err.to_string(), "V: entry 2 is not key=value");
        assert!(key_values("V", "=v").is_err());
    }

    #[test]
    fn header_names_are_tokens() {
        assert!(is_token("x-api-key"));
        assert!(is_token("Authorization"));
        assert!(!is_token("bad name"));
        assert!(!is_token("a:b"));
        assert!(!is_token(""));
    }
}
