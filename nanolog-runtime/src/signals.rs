//! Handing a signal on to the handler installed before ours: what the
//! fatal-signal handlers (`hooks`) and the reader's SIGBUS handler (a
//! mapped file cut short) share. Async-signal-safe: `sigaction` and plain
//! calls only.

/// Calls `prev`, the action installed before ours, if it is a handler
/// (neither `SIG_DFL` nor `SIG_IGN`), with the kernel's own arguments;
/// false if it is not one, for the caller to decide what the default is.
pub(crate) fn call_previous(
    prev: &libc::sigaction,
    sig: libc::c_int,
    info: *mut libc::siginfo_t,
    ctx: *mut libc::c_void,
) -> bool {
    if prev.sa_sigaction == libc::SIG_DFL || prev.sa_sigaction == libc::SIG_IGN {
        return false;
    }
    if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: installed with SA_SIGINFO, the previous handler has this
        // signature; we pass on the kernel's own arguments.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(prev.sa_sigaction) };
        f(sig, info, ctx);
    } else {
        // SAFETY: without SA_SIGINFO the previous handler is a plain
        // `void (*)(int)`.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(prev.sa_sigaction) };
        f(sig);
    }
    true
}

/// Restores the default action of `sig` (async-signal-safe).
pub(crate) fn restore_default(sig: libc::c_int) {
    // SAFETY: all-zero bytes are a valid sigaction whose handler is
    // SIG_DFL, with no flags and an empty mask; `sigaction` is
    // async-signal-safe.
    unsafe {
        let dfl: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
    }
}

/// The calling thread's `errno` slot, for a handler to keep the value the
/// interrupted code may be about to read.
pub(crate) fn errno() -> *mut libc::c_int {
    // Each returns the calling thread's errno slot, valid for the thread's
    // life; none has preconditions, and all are async-signal-safe (a
    // thread-local address).
    #[cfg(any(target_os = "linux", target_os = "android"))]
    // SAFETY: as said above, for Linux's and Android's libc.
    let slot = unsafe { libc::__errno_location() };
    #[cfg(any(target_vendor = "apple", target_os = "freebsd"))]
    // SAFETY: as said above, for Apple's and FreeBSD's libc.
    let slot = unsafe { libc::__error() };
    slot
}
