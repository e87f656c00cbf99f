//! Which calls are enabled: directives in `RUST_LOG` syntax
//! (`info,my_crate::net=debug,hyper=off`), decided once per call site and
//! cached in the site's static, as `tracing-core` caches a callsite's interest.
//!
//! A call reads its site's cached state with one relaxed load. The state is
//! decided on the site's first call and decided again, for every site seen so
//! far, whenever the directives change: at `start`, `set_filter`, `set_level`
//! and when the logger stops (everything off). The directive syntax is parsed
//! by `env_filter`, the parser behind `env_logger`.

use std::sync::{Mutex, PoisonError};

use crate::error::Error;
use crate::level::Level;

/// What a logger was configured with; compiled into a [`Directives`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Config {
    /// The default level, applied before the directives (a bare level among
    /// them overrides it).
    pub(crate) default: Option<Level>,
    /// The directives, in `RUST_LOG` syntax.
    pub(crate) directives: String,
    /// Set by `set_level`: the default level, overriding a bare level among
    /// the directives.
    pub(crate) level: Option<Level>,
}

impl Config {
    fn compile(&self) -> Result<Directives, String> {
        check_directives(&self.directives)?;
        let mut b = env_filter::Builder::new();
        if let Some(l) = self.default {
            b.filter_level(l.to_log().to_level_filter());
        }
        b.try_parse(&self.directives).map_err(|e| e.to_string())?;
        if let Some(l) = self.level {
            b.filter_level(l.to_log().to_level_filter());
        }
        Ok(Directives {
            config: self.clone(),
            inner: b.build(),
        })
    }
}

/// Refuses what `env_filter` parses but nanolog cannot honour: a message
/// filter (`/regex`), since calls are decided before their message exists.
fn check_directives(s: &str) -> Result<(), String> {
    if s.contains('/') {
        return Err(format!(
            "`{s}`: message filters (`/regex`) are not supported; filter on targets and levels"
        ));
    }
    Ok(())
}

/// The directives of an environment variable, lossily: each invalid
/// directive is skipped and named in the returned message.
pub(crate) fn lossy_directives(var: &str, value: &str) -> (String, Option<String>) {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for d in value.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let alone = Config {
            directives: d.to_owned(),
            ..Config::default()
        };
        if alone.compile().is_ok() {
            good.push(d);
        } else {
            bad.push(format!("`{d}`"));
        }
    }
    let warning = (!bad.is_empty()).then(|| {
        format!(
            "nanolog: {var}: skipping invalid directive{} {}",
            if bad.len() > 1 { "s" } else { "" },
            bad.join(", ")
        )
    });
    (good.join(","), warning)
}

/// Compiled directives.
#[derive(Debug)]
pub(crate) struct Directives {
    config: Config,
    inner: env_filter::Filter,
}

impl Directives {
    /// Compiles `config`; an invalid directive is an `Error::Config`.
    pub(crate) fn new(config: Config) -> Result<Directives, Error> {
        config
            .compile()
            .map_err(|e| Error::Config(format!("invalid filter directives: {e}")))
    }

    /// Whether a record of `level` and `target` passes.
    pub(crate) fn enabled(&self, level: Level, target: &str) -> bool {
        let meta = log::Metadata::builder()
            .level(level.to_log())
            .target(target)
            .build();
        self.inner.enabled(&meta)
    }

    /// The most verbose level any directive lets through (`None`: all off).
    #[cfg_attr(not(feature = "log"), allow(dead_code))]
    pub(crate) fn max_level(&self) -> Option<Level> {
        self.inner.filter().to_level().map(Level::from_log)
    }
}

/// Site states, as `Site::interest` holds them. `DISABLED` is 0 so that a
/// disabled call is one load and one test against zero.
pub(crate) const DISABLED: u8 = 0;
/// Not decided yet: the site's first call decides.
pub(crate) const UNDECIDED: u8 = 1;
/// Enabled.
pub(crate) const ENABLED: u8 = 2;

/// What the filter decides for: a call site with a level and a target,
/// which caches the decision (the macros' `Site`; a bridge's sites too).
/// The filter keeps every one it decided, to decide it again on a change.
pub(crate) trait Callsite: Sync {
    fn level(&self) -> Level;
    fn target(&self) -> &str;
    /// The cached decision: [`DISABLED`], [`UNDECIDED`] or [`ENABLED`].
    fn interest(&self) -> u8;
    fn set_interest(&self, interest: u8);
}

struct State {
    /// The running logger's directives; `None` while no logger runs, when
    /// every call is disabled.
    filter: Option<Directives>,
    /// Every site decided so far, to decide again when the filter changes.
    sites: Vec<&'static dyn Callsite>,
    /// Told the filter's most verbose level whenever it changes (a bridge
    /// whose own macros can skip what the filter disables), under the lock.
    listeners: Vec<fn(Option<Level>)>,
    /// Called after every change, once the lock is released (a bridge
    /// whose framework caches decisions that it asks this filter for
    /// again: tracing's interest cache).
    after_change: Vec<fn()>,
}

static STATE: Mutex<State> = Mutex::new(State {
    filter: None,
    sites: Vec::new(),
    listeners: Vec::new(),
    after_change: Vec::new(),
});

fn lock() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn interest(filter: Option<&Directives>, site: &dyn Callsite) -> u8 {
    match filter {
        Some(f) if f.enabled(site.level(), site.target()) => ENABLED,
        _ => DISABLED,
    }
}

/// Decides a site on its first call. Cold: once per site.
#[cold]
#[inline(never)]
pub(crate) fn decide(site: &'static dyn Callsite) -> bool {
    let mut st = lock();
    // Decided under the lock: a site is listed once, and a change of filter
    // running at the same time either sees it listed or runs before it.
    if site.interest() == UNDECIDED {
        st.sites.push(site);
        site.set_interest(interest(st.filter.as_ref(), site));
    }
    site.interest() == ENABLED
}

/// Decides every site seen so far again, under `filter` (`None`: all off).
/// Returns what must be called once the lock is released.
#[must_use]
fn apply(st: &mut State, filter: Option<Directives>) -> Vec<fn()> {
    st.filter = filter;
    for s in &st.sites {
        s.set_interest(interest(st.filter.as_ref(), *s));
    }
    let max = st.filter.as_ref().and_then(Directives::max_level);
    st.listeners.iter().for_each(|f| f(max));
    st.after_change.clone()
}

/// Calls what `apply` returned (the lock released: they may ask the filter).
fn notify(after: Vec<fn()>) {
    after.iter().for_each(|f| f());
}

/// A logger starts with these directives.
pub(crate) fn activate(filter: Directives) {
    let after = apply(&mut lock(), Some(filter));
    notify(after);
}

/// The logger stops: every call is disabled.
pub(crate) fn deactivate() {
    let after = apply(&mut lock(), None);
    notify(after);
}

/// Calls `f` after every change of the filter, with no lock held (once per
/// distinct `f`).
#[cfg(feature = "tracing")]
pub(crate) fn after_change(f: fn()) {
    let mut st = lock();
    if !st.after_change.contains(&f) {
        st.after_change.push(f);
    }
}

/// Whether a record of `level` and `target` would pass now (for bridges,
/// whose records have no static site to cache it in).
#[cfg(any(feature = "log", feature = "tracing"))]
pub(crate) fn enabled(level: Level, target: &str) -> bool {
    lock()
        .filter
        .as_ref()
        .is_some_and(|f| f.enabled(level, target))
}

/// Calls `f` with the filter's most verbose level (`None`: everything
/// off) now and whenever the filter changes, under the lock that orders it
/// with every change.
#[cfg(feature = "log")]
pub(crate) fn on_max_level_change(f: fn(Option<Level>)) {
    let mut st = lock();
    f(st.filter.as_ref().and_then(Directives::max_level));
    st.listeners.push(f);
}

/// Changes the directives of the running logger, at once: every call site
/// already seen is decided again. `directives` are in `RUST_LOG` syntax
/// (`info,my_crate::db=debug,hyper=off`); without a bare level, the default
/// level stays as it was. With no logger running, the directives are checked
/// and nothing else happens (a logger started later takes its builder's).
///
/// Fails, changing nothing, if a directive is invalid.
pub fn set_filter(directives: &str) -> Result<(), Error> {
    let mut st = lock();
    let config = match &st.filter {
        Some(f) => Config {
            default: f.config.level.or(f.config.default),
            directives: directives.to_owned(),
            level: None,
        },
        None => Config {
            directives: directives.to_owned(),
            ..Config::default()
        },
    };
    let filter = Directives::new(config)?;
    if st.filter.is_some() {
        let after = apply(&mut st, Some(filter));
        drop(st);
        notify(after);
    }
    Ok(())
}

/// Changes the default level of the running logger, at once, keeping its
/// per-target directives. (A logger started later takes its builder's level;
/// with no logger running this does nothing.)
pub fn set_level(level: Level) {
    let mut st = lock();
    let Some(f) = &st.filter else { return };
    let config = Config {
        level: Some(level),
        ..f.config.clone()
    };
    // The directives compiled before; only the default level changed.
    if let Ok(filter) = Directives::new(config) {
        let after = apply(&mut st, Some(filter));
        drop(st);
        notify(after);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(default: Option<Level>, d: &str) -> Directives {
        Directives::new(Config {
            default,
            directives: d.into(),
            level: None,
        })
        .unwrap()
    }

    #[test]
    fn longest_prefix_wins_and_bare_level_is_the_default() {
        let f = filter(
            Some(Level::Warn),
            "info,app::db=debug,app::db::pool=error,hyper=off",
        );
        assert!(f.enabled(Level::Info, "app::net"));
        assert!(!f.enabled(Level::Debug, "app::net"));
        assert!(f.enabled(Level::Debug, "app::db"));
        assert!(f.enabled(Level::Debug, "app::db::query"));
        assert!(!f.enabled(Level::Warn, "app::db::pool"));
        assert!(f.enabled(Level::Error, "app::db::pool"));
        assert!(!f.enabled(Level::Error, "hyper::client"));
        assert!(f.enabled(Level::Info, "audit"));
    }

    #[test]
    fn the_builder_level_is_the_default_without_a_bare_level() {
        let f = filter(Some(Level::Warn), "app=trace");
        assert!(f.enabled(Level::Trace, "app::x"));
        assert!(!f.enabled(Level::Info, "other"));
        assert!(f.enabled(Level::Warn, "other"));
        assert_eq!(f.max_level(), Some(Level::Trace));
    }

    #[test]
    fn invalid_directives_are_errors_and_lossy_skips_them() {
        for bad in ["app=loud", "a=b=c", "info/foo"] {
            let e = Directives::new(Config {
                directives: bad.into(),
                ..Config::default()
            });
            assert!(matches!(e, Err(Error::Config(_))), "{bad} accepted");
        }
        let (good, warn) = lossy_directives("RUST_LOG", "debug, app=loud ,hyper=off,x/y");
        assert_eq!(good, "debug,hyper=off");
        assert_eq!(
            warn.as_deref(),
            Some("nanolog: RUST_LOG: skipping invalid directives `app=loud`, `x/y`")
        );
        assert_eq!(lossy_directives("V", "info").1, None);
    }
}
