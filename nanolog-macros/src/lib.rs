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

/// Enters a span on this thread: `span!("request", id = 7, user = name)`.
#[proc_macro]
pub fn span(input: TokenStream) -> TokenStream {
    let parsed = syn::parse_macro_input!(input as args::SpanArgs);
    // The span's text, `name{id=7 user="ann"}`, as a format string over the
    // fields: its pieces render it, checked and encoded as any call's.
    let name = parsed.name.value();
    let mut fmt = name.replace('{', "{{").replace('}', "}}");
    if !parsed.fields.is_empty() {
        fmt.push_str("{{");
        for (i, (field, _, display)) in parsed.fields.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            let spec = if *display { "" } else { ":?" };
            fmt.push_str(&format!("{sep}{field}={{{field}{spec}}}"));
        }
        fmt.push_str("}}");
    }
    let format = args::FormatArgs {
        lit: syn::LitStr::new(&fmt, parsed.name.span()),
        positional: Vec::new(),
        named: parsed
            .fields
            .iter()
            .map(|(f, v, _)| (f.clone(), v.clone()))
            .collect(),
    };
    match check::resolve(&format) {
        Ok(mut r) => {
            // The span's key last, recorded raw, named by no placeholder.
            r.args.push(check::Arg {
                expr: syn::parse_quote!(__nl_key),
                origin: check::Origin::Positional,
                value_uses: Vec::new(),
                count_use: false,
            });
            codegen::expand_span(&name, &r).into()
        }
        Err(e) => e.to_compile_error().into(),
    }
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
