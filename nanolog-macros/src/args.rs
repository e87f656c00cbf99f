//! The macro's input: an optional level expression, the format literal and its arguments.

use syn::parse::{Parse, ParseStream};
use syn::{Expr, Ident, LitStr, Token};

/// `"fmt", a, b, name = c`
pub struct FormatArgs {
    pub lit: LitStr,
    pub positional: Vec<Expr>,
    pub named: Vec<(Ident, Expr)>,
}

/// `[target: expr,] "fmt", args...` for `info!` and the other levels.
pub struct TargetAndFormat {
    pub target: Option<Expr>,
    pub format: FormatArgs,
}

/// `[target: expr,] level, "fmt", args...` for `log!`.
pub struct LevelAndFormat {
    pub target: Option<Expr>,
    pub level: Expr,
    pub format: FormatArgs,
}

/// An optional `target: expr,` prefix, as the `log` crate's macros take.
fn parse_target(input: ParseStream) -> syn::Result<Option<Expr>> {
    if !(input.peek(Ident) && input.peek2(Token![:]) && !input.peek2(Token![::])) {
        return Ok(None);
    }
    let kw: Ident = input.fork().parse()?;
    if kw != "target" {
        return Ok(None);
    }
    input.parse::<Ident>()?;
    input.parse::<Token![:]>()?;
    let target: Expr = input.parse()?;
    if input.is_empty() {
        return Err(input.error("expected a format string after the target"));
    }
    input.parse::<Token![,]>()?;
    Ok(Some(target))
}

impl Parse for TargetAndFormat {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let target = parse_target(input)?;
        let format = input.parse()?;
        Ok(TargetAndFormat { target, format })
    }
}

impl Parse for FormatArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if input.is_empty() {
            return Err(input.error("requires at least a format string argument"));
        }
        let lit = if input.peek(LitStr) {
            input.parse::<LitStr>()?
        } else {
            let expr: Expr = input.parse()?;
            return Err(syn::Error::new_spanned(
                expr,
                "format argument must be a string literal",
            ));
        };
        let mut positional = Vec::new();
        let mut named: Vec<(Ident, Expr)> = Vec::new();
        while !input.is_empty() {
            input.parse::<Token![,]>()?;
            if input.is_empty() {
                break;
            }
            if input.peek(Ident) && input.peek2(Token![=]) && !input.peek2(Token![==]) {
                let name: Ident = input.parse()?;
                input.parse::<Token![=]>()?;
                let expr: Expr = input.parse()?;
                if named.iter().any(|(n, _)| *n == name) {
                    return Err(syn::Error::new_spanned(
                        &name,
                        format!("duplicate argument named `{name}`"),
                    ));
                }
                named.push((name, expr));
            } else {
                let expr: Expr = input.parse()?;
                if let Some((name, _)) = named.last() {
                    return Err(syn::Error::new_spanned(
                        expr,
                        format!(
                            "positional arguments cannot follow named arguments such as `{name}`"
                        ),
                    ));
                }
                positional.push(expr);
            }
        }
        Ok(FormatArgs {
            lit,
            positional,
            named,
        })
    }
}

impl Parse for LevelAndFormat {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let target = parse_target(input)?;
        let level: Expr = input.parse()?;
        if input.is_empty() {
            return Err(input.error("expected a format string after the level"));
        }
        input.parse::<Token![,]>()?;
        let format = input.parse()?;
        Ok(LevelAndFormat {
            target,
            level,
            format,
        })
    }
}

/// `"name", field = value, %shown = value, captured, ...` for `span!`.
pub struct SpanArgs {
    pub name: LitStr,
    /// Each field: its name, its value, and whether it shows as `Display`
    /// (`%value`) rather than `Debug` (the default, as in `tracing`).
    pub fields: Vec<(Ident, Expr, bool)>,
}

impl Parse for SpanArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        if !input.peek(LitStr) {
            return Err(input.error("expected the span's name, a string literal"));
        }
        let name: LitStr = input.parse()?;
        let mut fields: Vec<(Ident, Expr, bool)> = Vec::new();
        while !input.is_empty() {
            input.parse::<Token![,]>()?;
            if input.is_empty() {
                break;
            }
            // `%x` / `?x` alone, `x` alone, or `x = [%|?]value`.
            let sigil = |input: ParseStream| -> syn::Result<bool> {
                if input.peek(Token![%]) {
                    input.parse::<Token![%]>()?;
                    Ok(true)
                } else {
                    if input.peek(Token![?]) {
                        input.parse::<Token![?]>()?;
                    }
                    Ok(false)
                }
            };
            let shorthand_display = sigil(input)?;
            let field: Ident = input.parse()?;
            let (value, display) = if input.peek(Token![=]) && !input.peek(Token![==]) {
                input.parse::<Token![=]>()?;
                let display = sigil(input)? || shorthand_display;
                (input.parse::<Expr>()?, display)
            } else {
                (syn::parse_quote!(#field), shorthand_display)
            };
            if fields.iter().any(|(n, _, _)| *n == field) {
                return Err(syn::Error::new_spanned(
                    &field,
                    format!("duplicate field `{field}`"),
                ));
            }
            fields.push((field, value, display));
        }
        Ok(SpanArgs { name, fields })
    }
}
