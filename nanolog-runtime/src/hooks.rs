//! What makes records survive the ways a process ends: an exit hook, a
//! panic hook and a fork handler (installed once per process by the first
//! `start()`), and the fatal-signal handlers of `Builder::flush_on_signals`.
//!
//! The signal handler may run on any thread at any instruction, so it uses
//! only what is async-signal-safe: atomic loads and stores, a futex wake
//! (`Thread::unpark`), `sched_yield`, `sigaction` and `raise`. It reaches
//! the logger through a raw pointer to a `Shared` that is never freed.

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Once};

use crate::channel::{
    running_from_hook, Shared, EXITING, EXIT_GENERATION, GENERATION, HOOK_FLUSH_LIMIT,
};
use crate::producer::report_own_drops;

/// The exit hook: write out everything logged so far, and make every later
/// call (from other exit hooks, thread-local destructors, threads still
/// running) flush its own record, since nothing else will.
pub(crate) fn on_exit() {
    EXITING.store(true, Ordering::Relaxed);
    GENERATION.store(EXIT_GENERATION, Ordering::Relaxed);
    flush_from_hook();
}

/// The panic hook's flush: bounded, and skipped on the flusher thread.
pub(crate) fn flush_from_hook() {
    let Some(shared) = running_from_hook() else {
        return;
    };
    if !shared.in_owner_process() || crate::channel::is_flusher_thread() {
        return;
    }
    report_own_drops();
    let flushed = shared.flush(false, Some(HOOK_FLUSH_LIMIT));
    // The process exits (not a panic hook's flush: a panic may be caught)
    // with every record written: the rings' file holds nothing the log
    // lacks. (Calls made later flush their own records.)
    #[cfg(all(unix, not(loom)))]
    if flushed.is_ok() && crate::channel::exiting() {
        shared.close_area();
    }
    let _ = flushed;
}

#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd"
))]
/// In a forked child: every call takes the slow path, which counts it as
/// dropped (the child has no flusher). Async-signal-safe: one store.
pub(crate) fn on_fork_child() {
    crate::channel::FORKED.store(true, Ordering::Relaxed);
    GENERATION.store(EXIT_GENERATION, Ordering::Relaxed);
    crate::span::mail::forked();
}

/// Installs the exit hook, the panic hook and the fork handler, once.
pub(crate) fn install_process_hooks() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // Before the previous hook (which may abort, as under
            // `panic = "abort"` the runtime does right after the hooks) and
            // after it (it may log the panic itself).
            flush_from_hook();
            previous(info);
            flush_from_hook();
        }));
        #[cfg(any(
            target_os = "linux",
            target_os = "android",
            target_vendor = "apple",
            target_os = "freebsd"
        ))]
        os::install_exit_and_fork_hooks();
        #[cfg(windows)]
        windows::install_exit_hook();
    });
}

/// The logger the signal handler flushes: a leaked `Arc`, so the pointer
/// stays valid however late a signal arrives. Null when none asked for it.
static SIGNAL_TARGET: AtomicPtr<Shared> = AtomicPtr::new(std::ptr::null_mut());

/// Points the signal handlers at `shared` (installing them on first use).
pub(crate) fn install_signal_handlers(shared: &Arc<Shared>) -> std::io::Result<()> {
    #[cfg(any(
        target_os = "linux",
        target_os = "android",
        target_vendor = "apple",
        target_os = "freebsd"
    ))]
    {
        use std::sync::OnceLock;
        static INSTALLED: OnceLock<std::io::Result<()>> = OnceLock::new();
        if let Err(e) = INSTALLED.get_or_init(os::install_signal_handlers) {
            return Err(std::io::Error::new(e.kind(), e.to_string()));
        }
        // Leaked on purpose (one small struct per logger started with
        // signals): a handler may still be reading it after the logger stops.
        let ptr = Arc::into_raw(Arc::clone(shared)).cast_mut();
        // Release pairs with the handler's Acquire load: it sees a fully
        // built `Shared`.
        let old = SIGNAL_TARGET.swap(ptr, Ordering::AcqRel);
        let _ = old; // the previous target stays leaked for the same reason
    }
    #[cfg(not(any(
        target_os = "linux",
        target_os = "android",
        target_vendor = "apple",
        target_os = "freebsd"
    )))]
    let _ = shared;
    Ok(())
}

/// Stops the signal handlers flushing `shared` (its logger is stopping).
pub(crate) fn forget_signal_target(shared: &Arc<Shared>) {
    let ptr = Arc::as_ptr(shared).cast_mut();
    let _ = SIGNAL_TARGET.compare_exchange(
        ptr,
        std::ptr::null_mut(),
        Ordering::AcqRel,
        Ordering::Relaxed,
    );
}

#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd"
))]
/// The signal handler's flush: wake the flusher and wait (bounded) until it
/// has written every record committed before the signal.
fn flush_for_signal() {
    // Acquire pairs with the Release swap in `install_signal_handlers`.
    let ptr = SIGNAL_TARGET.load(Ordering::Acquire);
    if ptr.is_null() {
        return;
    }
    // SAFETY: a non-null target is a leaked `Arc<Shared>` (never freed), so
    // it is valid for the life of the process.
    let shared: &Shared = unsafe { &*ptr };
    if !shared.running.load(Ordering::Acquire) || !shared.in_owner_process() {
        return;
    }
    // A fault on the flusher thread: it cannot flush while in this handler.
    if shared.flusher_id.load(Ordering::Relaxed) == crate::channel::thread_id() {
        return;
    }
    let ticket = shared.request_flush(false);
    // The longest the handler waits for the flusher.
    shared.wait_flushed_lock_free(ticket, std::time::Duration::from_secs(1));
}

#[cfg(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    target_os = "freebsd"
))]
mod os {
    use super::*;
    use std::sync::OnceLock;

    /// The signals `flush_on_signals` handles.
    const SIGNALS: [libc::c_int; 9] = [
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGILL,
        libc::SIGFPE,
        libc::SIGABRT,
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
    ];

    /// The handlers that were installed before nanolog's, by signal, written
    /// once before nanolog's handlers are installed.
    static PREVIOUS: OnceLock<[libc::sigaction; SIGNALS.len()]> = OnceLock::new();

    extern "C" fn at_exit() {
        super::on_exit();
    }

    extern "C" fn at_fork_child() {
        super::on_fork_child();
    }

    pub(super) fn install_exit_and_fork_hooks() {
        // SAFETY: both callbacks are `extern "C" fn()` that live for the
        // whole program; atexit and pthread_atfork only record them.
        unsafe {
            libc::atexit(at_exit);
            libc::pthread_atfork(None, None, Some(at_fork_child));
        }
    }

    pub(super) fn install_signal_handlers() -> std::io::Result<()> {
        let mut previous = [zeroed_action(); SIGNALS.len()];
        for (i, &sig) in SIGNALS.iter().enumerate() {
            // SAFETY: a null new action only reads the current one into a
            // valid, writable sigaction.
            if unsafe { libc::sigaction(sig, std::ptr::null(), &mut previous[i]) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        // Stored before any of our handlers can run, so a handler always
        // finds the previous actions.
        let _ = PREVIOUS.set(previous);
        for &sig in &SIGNALS {
            let mut action = zeroed_action();
            let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                on_signal;
            action.sa_sigaction = handler as usize;
            // SA_ONSTACK: run on the alternate stack std sets up, so a stack
            // overflow's SIGSEGV still reaches the handler (and then std's).
            action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
            // SAFETY: `action.sa_mask` is a valid sigset_t to initialise.
            unsafe { libc::sigemptyset(&mut action.sa_mask) };
            // SAFETY: `action` is a fully initialised sigaction whose handler
            // is an `extern "C"` function of the SA_SIGINFO signature.
            if unsafe { libc::sigaction(sig, &action, std::ptr::null_mut()) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    }

    fn zeroed_action() -> libc::sigaction {
        // SAFETY: sigaction is a plain C struct for which all-zero bytes are
        // a valid value (SIG_DFL, empty mask, no flags).
        unsafe { std::mem::zeroed() }
    }

    extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        // The interrupted code may be between a failing call and its read
        // of errno: keep it as it was.
        let slot = crate::signals::errno();
        // SAFETY: the calling thread's own errno slot (see `errno`).
        let errno = unsafe { *slot };
        if ends_the_process(sig) {
            // The default action follows: the file ends cleanly (the
            // flusher writes END with this flush). Two atomic stores.
            EXITING.store(true, Ordering::Relaxed);
            GENERATION.store(EXIT_GENERATION, Ordering::Relaxed);
        }
        flush_for_signal();
        chain(sig, info, ctx);
        // SAFETY: as above.
        unsafe { *slot = errno };
    }

    /// Whether no handler was installed before ours for `sig`, so its
    /// default action (ending the process) follows this one. A previous
    /// handler may let the process go on.
    fn ends_the_process(sig: libc::c_int) -> bool {
        PREVIOUS
            .get()
            .and_then(|p| SIGNALS.iter().position(|&s| s == sig).map(|i| p[i]))
            .is_none_or(|p| p.sa_sigaction == libc::SIG_DFL)
    }

    /// Hands the signal on: to the handler installed before ours, else to
    /// the default action (restored, and the signal raised again; it is
    /// delivered when this handler returns, so the process ends as the
    /// signal would have ended it).
    fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
        let prev = PREVIOUS
            .get()
            .and_then(|p| SIGNALS.iter().position(|&s| s == sig).map(|i| p[i]));
        match prev {
            Some(p) if p.sa_sigaction == libc::SIG_IGN => {}
            Some(p) if crate::signals::call_previous(&p, sig, info, ctx) => {}
            _ => {
                crate::signals::restore_default(sig);
                // SAFETY: raise is async-signal-safe; the default action is
                // back, so the signal ends the process once we return.
                unsafe { libc::raise(sig) };
            }
        }
    }
}

/// Windows: the C runtime's `atexit` (run by `exit`, which returning from
/// `main` and `std::process::exit` call, before the process's other threads
/// end), so records logged before exit are written as on Unix. No fork, no
/// signal flush there.
#[cfg(windows)]
mod windows {
    extern "C" fn at_exit() {
        super::on_exit();
    }

    pub(super) fn install_exit_hook() {
        // SAFETY: the callback is an `extern "C" fn()` that lives for the
        // whole program; atexit only records it.
        unsafe {
            libc::atexit(at_exit);
        }
    }
}
