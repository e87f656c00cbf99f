//! Procedural macros behind `nanolog::{trace, debug, info, warn, error, log}`.
//!
//! Use them through the `nanolog` facade crate, never directly: expansions name
//! `::nanolog::__private`. Each call's format string is parsed and checked here
//! at compile time (Rust `format!` syntax); the expansion holds a static call-site
//! descriptor with the pre-parsed pieces, the level test, and an encoder typed to
//! exactly the call's arguments.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

mod args;
mod check;
mod codegen;
mod format;

use proc_macro::TokenStream;

use codegen::LevelSpec;

fn expand_static(level: &'static str, input: TokenStream) -> TokenStream {
    let parsed = syn::parse_macro_input!(input as args::TargetAndFormat);
    let (target, format) = (parsed.target.as_ref(), &parsed.format);
    match check::resolve(format) {
        Ok(r) => codegen::expand(LevelSpec::Static(level), target, &format.lit, &r).into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Logs at [`Level::Trace`](../nanolog/enum.Level.html).
#[proc_macro]
pub fn trace(input: TokenStream) -> TokenStream {
    expand_static("Trace", input)
}

/// Logs at `Level::Debug`.
#[proc_macro]
pub fn debug(input: TokenStream) -> TokenStream {
    expand_static("Debug", input)
}

/// Logs at `Level::Info`.
#[proc_macro]
pub fn info(input: TokenStream) -> TokenStream {
    expand_static("Info", input)
}

/// Logs at `Level::Warn`.
#[proc_macro]
pub fn warn(input: TokenStream) -> TokenStream {
    expand_static("Warn", input)
}

/// Logs at `Level::Error`.
#[proc_macro]
pub fn error(input: TokenStream) -> TokenStream {
    expand_static("Error", input)
}

/// Logs at a level known only at run time: `log!(level, "fmt", args...)`.
///
/// Every macro takes an optional `target: "name",` first, as the `log`
/// crate's do; the target defaults to the module path.
#[proc_macro]
pub fn log(input: TokenStream) -> TokenStream {
    let parsed = syn::parse_macro_input!(input as args::LevelAndFormat);
    match check::resolve(&parsed.format) {
        Ok(r) => codegen::expand(
            LevelSpec::Dynamic(parsed.level),
            parsed.target.as_ref(),
            &parsed.format.lit,
            &r,
        )
        .into(),
        Err(e) => e.to_compile_error().into(),
    }
}
