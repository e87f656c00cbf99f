//! Format errors are compile errors with spans on the literal or the argument.
//! (and a `Logger` started and not kept is a `must_use` warning: logger_dropped.rs).
//! Expected output is pinned to the toolchain in rust-toolchain.toml; refresh
//! with `TRYBUILD=overwrite cargo test --test ui` and review the diff.

#[test]
fn format_errors_are_compile_errors() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
