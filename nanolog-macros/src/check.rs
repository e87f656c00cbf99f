//! Resolves placeholders to arguments and checks them as `format!` does:
//! every reference in range, every argument used, inline captures collected.

use proc_macro2::Span;
use syn::{Expr, Ident};

use crate::args::FormatArgs;
use crate::format::{self, ArgRef, Count, Piece, Placeholder};

/// Where an argument came from.
pub enum Origin {
    Positional,
    Named(Ident),
    /// `{x}` with no `x = ...`: captured from the enclosing scope.
    Captured(Ident),
}

pub struct Arg {
    pub expr: Expr,
    pub origin: Origin,
    /// Placeholders that format this argument, in piece order.
    pub value_uses: Vec<usize>,
    /// Used as a width or precision.
    pub count_use: bool,
}

#[derive(Clone, Copy)]
pub enum ResolvedCount {
    Is(usize),
    Arg(usize),
}

pub struct ResolvedPlaceholder {
    pub spec: Placeholder,
    pub arg: usize,
    /// Index of this placeholder among `args[arg].value_uses`.
    pub use_ix: usize,
    pub width: Option<ResolvedCount>,
    pub precision: Option<ResolvedCount>,
}

pub enum ResolvedPiece {
    Lit(String),
    Arg(usize),
}

pub struct Resolved {
    pub args: Vec<Arg>,
    pub placeholders: Vec<ResolvedPlaceholder>,
    pub pieces: Vec<ResolvedPiece>,
}

struct Resolver<'a> {
    args: Vec<Arg>,
    n_positional: usize,
    next: usize,
    /// Highest implicit position asked for, to report "N positional arguments".
    implicit_wanted: usize,
    lit_span: Span,
    input: &'a FormatArgs,
}

impl Resolver<'_> {
    fn reference(&mut self, r: &ArgRef) -> syn::Result<usize> {
        match r {
            ArgRef::Next => {
                let i = self.next;
                self.next += 1;
                self.implicit_wanted = self.implicit_wanted.max(self.next);
                Ok(i)
            }
            ArgRef::Index(i) => {
                let explicit = self.n_positional + self.input.named.len();
                if *i >= explicit {
                    return Err(syn::Error::new(
                        self.lit_span,
                        format!(
                            "invalid reference to positional argument {i} ({})",
                            plural_args(self.n_positional)
                        ),
                    ));
                }
                Ok(*i)
            }
            ArgRef::Name(name) => {
                if let Some(pos) = self.input.named.iter().position(|(n, _)| n == name) {
                    return Ok(self.n_positional + pos);
                }
                if let Some(pos) = self
                    .args
                    .iter()
                    .position(|a| matches!(&a.origin, Origin::Captured(id) if id == name))
                {
                    return Ok(pos);
                }
                let ident = Ident::new(name, self.lit_span);
                self.args.push(Arg {
                    expr: syn::parse_quote!(#ident),
                    origin: Origin::Captured(ident),
                    value_uses: Vec::new(),
                    count_use: false,
                });
                Ok(self.args.len() - 1)
            }
        }
    }

    fn count(&mut self, c: &Option<Count>) -> syn::Result<Option<ResolvedCount>> {
        Ok(match c {
            None => None,
            Some(Count::Is(n)) => Some(ResolvedCount::Is(*n)),
            Some(Count::Star) => Some(ResolvedCount::Arg(self.reference(&ArgRef::Next)?)),
            Some(Count::Arg(r)) => Some(ResolvedCount::Arg(self.reference(r)?)),
        })
    }
}

fn plural_args(n: usize) -> String {
    match n {
        0 => "no arguments were given".to_owned(),
        1 => "there is 1 argument".to_owned(),
        n => format!("there are {n} arguments"),
    }
}

pub fn resolve(input: &FormatArgs) -> syn::Result<Resolved> {
    let lit_span = input.lit.span();
    let pieces = format::parse(&input.lit.value()).map_err(|e| syn::Error::new(lit_span, e.0))?;
    let mut args: Vec<Arg> = input
        .positional
        .iter()
        .map(|e| Arg {
            expr: e.clone(),
            origin: Origin::Positional,
            value_uses: Vec::new(),
            count_use: false,
        })
        .collect();
    args.extend(input.named.iter().map(|(n, e)| Arg {
        expr: e.clone(),
        origin: Origin::Named(n.clone()),
        value_uses: Vec::new(),
        count_use: false,
    }));
    let mut r = Resolver {
        args,
        n_positional: input.positional.len(),
        next: 0,
        implicit_wanted: 0,
        lit_span,
        input,
    };
    let mut placeholders = Vec::new();
    let mut out_pieces = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Lit(s) => out_pieces.push(ResolvedPiece::Lit(s)),
            Piece::Arg(p) => {
                // `format!` resolves width, then precision (`.*` takes the next
                // implicit argument before the value), then the value.
                let width = r.count(&p.width)?;
                let precision = r.count(&p.precision)?;
                let arg = r.reference(&p.arg)?;
                let ix = placeholders.len();
                placeholders.push(ResolvedPlaceholder {
                    spec: p,
                    arg,
                    use_ix: 0,
                    width,
                    precision,
                });
                out_pieces.push(ResolvedPiece::Arg(ix));
            }
        }
    }
    if r.implicit_wanted > r.n_positional {
        let wanted = r.implicit_wanted;
        return Err(syn::Error::new(
            lit_span,
            format!(
                "{wanted} positional argument{} in format string, but {}",
                if wanted == 1 { "" } else { "s" },
                plural_args(r.n_positional)
            ),
        ));
    }
    let mut args = r.args;
    for (ix, ph) in placeholders.iter_mut().enumerate() {
        let a = &mut args[ph.arg];
        ph.use_ix = a.value_uses.len();
        a.value_uses.push(ix);
        for c in [ph.width, ph.precision].into_iter().flatten() {
            if let ResolvedCount::Arg(i) = c {
                args[i].count_use = true;
            }
        }
    }
    for a in &args {
        if a.value_uses.is_empty() && !a.count_use {
            return Err(match &a.origin {
                Origin::Named(n) => syn::Error::new_spanned(n, "named argument never used"),
                _ => syn::Error::new_spanned(&a.expr, "argument never used"),
            });
        }
    }
    Ok(Resolved {
        args,
        placeholders,
        pieces: out_pieces,
    })
}
