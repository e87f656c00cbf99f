//! Generates the call site: a static descriptor, the level test, and a typed
//! encoder that writes exactly this call's arguments into the thread's ring.
//!
//! Expansions name only `::nanolog::__private`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::Expr;

use crate::check::{Origin, Resolved, ResolvedCount, ResolvedPiece};
use crate::format::{Align, Ty};

/// The level of a call: known at compile time (`info!`) or only at run time (`log!`).
pub enum LevelSpec {
    Static(&'static str),
    Dynamic(Expr),
}

/// A `span!`: its site (role span, named `name`), the record of its
/// fields and key, and the guard that exits it.
pub fn expand_span(name: &str, resolved: &Resolved) -> TokenStream {
    let p = quote!(::nanolog::__private);
    let (statics, body) = statics_and_body(resolved, quote!(#p::log_span), quote!(__nl_key,));
    quote! {{
        let __nl_key: u64 = #p::span_key();
        #statics
        static __NL_SITE_STATIC: #p::Site = #p::Site::span(
            #name, ::core::module_path!(), ::core::file!(), ::core::line!(),
            ::core::module_path!(), &__NL_PIECES, &__NL_NAMES,
        );
        let __NL_SITE: &'static #p::Site = &__NL_SITE_STATIC;
        #body
        #p::SpanGuard::entered(__nl_key)
    }}
}

pub fn expand(
    level: LevelSpec,
    target: Option<&Expr>,
    lit: &syn::LitStr,
    resolved: &Resolved,
) -> TokenStream {
    let p = quote!(::nanolog::__private);
    let target = match target {
        Some(t) => quote!(#t),
        None => quote!(::core::module_path!()),
    };
    let fmt_str = lit.value();
    let (statics, body) = statics_and_body(resolved, quote!(#p::log), quote!());
    match level {
        LevelSpec::Static(name) => {
            let lvl = syn::Ident::new(name, Span::call_site());
            quote! {{
                if #p::compiled_in(#p::Level::#lvl) {
                    #statics
                    static __NL_SITE_STATIC: #p::Site = #p::Site::new(
                        #p::Level::#lvl, #target, ::core::file!(), ::core::line!(),
                        ::core::module_path!(), #fmt_str, &__NL_PIECES, &__NL_NAMES,
                    );
                    let __NL_SITE: &'static #p::Site = &__NL_SITE_STATIC;
                    if __NL_SITE.enabled() {
                        #body
                    }
                }
            }}
        }
        LevelSpec::Dynamic(expr) => {
            // One site per level, built by the runtime in its own level order.
            quote! {{
                let __nl_level: #p::Level = #expr;
                if #p::compiled_in(__nl_level) {
                    #statics
                    static __NL_SITES: [#p::Site; #p::Level::ALL.len()] = #p::Site::per_level(
                        #target, ::core::file!(), ::core::line!(), ::core::module_path!(),
                        #fmt_str, &__NL_PIECES, &__NL_NAMES,
                    );
                    let __NL_SITE: &'static #p::Site = &__NL_SITES[__nl_level as usize];
                    if __NL_SITE.enabled() {
                        #body
                    }
                }
            }}
        }
    }
}

/// The call's static pieces and names, and the code that logs its record
/// at `__NL_SITE`.
/// The statics of a call's site and the body that writes its record through
/// `entry` (`log`, or `log_span` for a span's entry, whose first argument,
/// `lead`, is the span's key).
fn statics_and_body(
    resolved: &Resolved,
    entry: TokenStream,
    lead: TokenStream,
) -> (TokenStream, TokenStream) {
    let p = quote!(::nanolog::__private);
    // Each argument's name, for the log's named fields ("" if positional).
    let names = resolved.args.iter().map(|a| match &a.origin {
        Origin::Positional => String::new(),
        Origin::Named(id) | Origin::Captured(id) => id.to_string(),
    });
    let n_args = resolved.args.len();
    let pieces = pieces_tokens(resolved);
    let n_pieces = resolved.pieces.len();

    let arg_idents: Vec<_> = (0..resolved.args.len())
        .map(|i| format_ident!("__nl_a{}", i))
        .collect();
    let prep_idents: Vec<_> = (0..resolved.args.len())
        .map(|i| format_ident!("__nl_p{}", i))
        .collect();
    let arg_exprs = resolved.args.iter().map(|a| {
        let e = &a.expr;
        quote_spanned!(e.span()=> &(#e))
    });

    let preps = resolved.args.iter().enumerate().map(|(i, a)| {
        let ai = &arg_idents[i];
        let pi = &prep_idents[i];
        let span = a.expr.span();
        // An argument used only as a width or precision has no placeholder of
        // its own (N = 0) and is recorded raw; the `usize` that `format!`
        // demands is checked where it is used, in the closure below. rustc
        // reports a wrong type there as `format!`'s own error, spanned on the
        // macro call (marked at the value argument), not on the width
        // argument itself.
        let v = quote_spanned!(span=> __nl_v);
        let renders = a.value_uses.iter().map(|&ph_ix| {
            let ph = &resolved.placeholders[ph_ix];
            let spec = ph.spec.spec_text("__nl_w", "__nl_pr");
            let fmt = format!("{{:{spec}}}");
            let mut extra = TokenStream::new();
            if let Some(ResolvedCount::Arg(w)) = ph.width {
                let wi = &arg_idents[w];
                let sp = resolved.args[w].expr.span();
                extra.extend(quote_spanned!(sp=> , __nl_w = *#wi));
            }
            if let Some(ResolvedCount::Arg(pr)) = ph.precision {
                let pri = &arg_idents[pr];
                let sp = resolved.args[pr].expr.span();
                extra.extend(quote_spanned!(sp=> , __nl_pr = *#pri));
            }
            quote_spanned!(span=> ::std::format!(#fmt, #v #extra))
        });
        let n = a.value_uses.len();
        quote_spanned! {span=>
            let #pi = (&#p::Wrap(#ai)).__nl_prep(
                #p::fmt_closure(#ai, |#v| -> [::std::string::String; #n] { [#(#renders),*] }),
            );
        }
    });

    // The prepared arguments' types as a nested list, `(T0, (T1, ()))`, for
    // the site's own compaction function.
    let types = prep_idents
        .iter()
        .rev()
        .fold(quote!(()), |rest, pi| quote!((#p::type_of(&#pi), #rest)));
    let body = quote! {
        #[allow(unused_imports)]
        use #p::{PrepRaw as _, PrepFmt as _};
        #[allow(clippy::match_single_binding, unused_parens)]
        match (#(#arg_exprs,)*) {
            (#(#arg_idents,)*) => {
                #(#preps)*
                #entry(
                    #lead
                    __NL_SITE,
                    0 #(+ #p::encoded_len(&#prep_idents))*,
                    || (
                        [#(#p::kind_of(&#prep_idents)),*],
                        #p::compactor(&#types),
                    ),
                    |__nl_dst| {
                        #(let __nl_dst = #p::encode(&#prep_idents, __nl_dst);)*
                        let _ = __nl_dst;
                    },
                );
            }
        };
    };

    let statics = quote! {
        static __NL_PIECES: [#p::Piece; #n_pieces] = [#(#pieces),*];
        static __NL_NAMES: [&str; #n_args] = [#(#names),*];
    };
    (statics, body)
}

fn pieces_tokens(resolved: &Resolved) -> Vec<TokenStream> {
    let p = quote!(::nanolog::__private);
    resolved
        .pieces
        .iter()
        .map(|piece| match piece {
            ResolvedPiece::Lit(s) => quote!(#p::Piece::Lit(#p::Cow::Borrowed(#s))),
            ResolvedPiece::Arg(ix) => {
                let ph = &resolved.placeholders[*ix];
                let s = &ph.spec;
                let arg = ph.arg as u16;
                let use_ix = ph.use_ix as u16;
                let fill = s.fill.unwrap_or(' ');
                let align = match s.align {
                    None => quote!(#p::Align::Unknown),
                    Some(Align::Left) => quote!(#p::Align::Left),
                    Some(Align::Center) => quote!(#p::Align::Center),
                    Some(Align::Right) => quote!(#p::Align::Right),
                };
                // The runtime's own flag constants, so the two cannot drift.
                let mut flags = vec![quote!(0)];
                for (set, name) in [
                    (s.plus, "FLAG_PLUS"),
                    (s.minus, "FLAG_MINUS"),
                    (s.alternate, "FLAG_ALTERNATE"),
                    (s.zero, "FLAG_ZERO"),
                ] {
                    if set {
                        let c = syn::Ident::new(name, Span::call_site());
                        flags.push(quote!(#p::Spec::#c));
                    }
                }
                let count = |c: Option<ResolvedCount>| match c {
                    None => quote!(#p::Count::Implied),
                    Some(ResolvedCount::Is(n)) => {
                        let n = n as u32;
                        quote!(#p::Count::Is(#n))
                    }
                    Some(ResolvedCount::Arg(i)) => {
                        let i = i as u16;
                        quote!(#p::Count::Arg(#i))
                    }
                };
                let width = count(ph.width);
                let precision = count(ph.precision);
                let ty = match s.ty {
                    Ty::Display => quote!(#p::Ty::Display),
                    Ty::Debug => quote!(#p::Ty::Debug),
                    Ty::LowerHex => quote!(#p::Ty::LowerHex),
                    Ty::UpperHex => quote!(#p::Ty::UpperHex),
                    Ty::Octal => quote!(#p::Ty::Octal),
                    Ty::Binary => quote!(#p::Ty::Binary),
                    Ty::LowerExp => quote!(#p::Ty::LowerExp),
                    Ty::UpperExp => quote!(#p::Ty::UpperExp),
                };
                quote! {
                    #p::Piece::Arg(#p::Spec {
                        arg: #arg, use_ix: #use_ix, fill: #fill, align: #align, flags: #(#flags)|*,
                        width: #width, precision: #precision, ty: #ty,
                    })
                }
            }
        })
        .collect()
}
