//! `--grep` decided per call site where it can be, so that the records of
//! a site that cannot match are stepped over unread (a filter that refuses
//! sites: see `Merge`) and the writes of a finished file whose index names
//! none of the sites that may match are not read at all
//! (`inputs::open_log`).
//!
//! Two cases are decided. A site whose message has no argument renders the
//! same text every time: its records all pass or none does. A site whose
//! arguments are all numbers or bools, under a pattern every match of which
//! starts with one of a few literal strings (`disk full`, `^timeout`,
//! `timeout|refused`, `(?i)error`, `took .* ms`: the regex parser's own
//! prefix literals), or ends with one (`\d+ ms`): each of its arguments renders as one or more
//! characters of a small alphabet (digits, signs, `.`, the letters of hex,
//! exponents, `inf`, `NaN`, `true`, `false`, and its fill when it has a
//! width). So a run of a literal's characters outside that alphabet can
//! only come from the site's own text between two arguments, and a site
//! where, for each literal, some such run is found in none of those texts
//! never matches. Every other site may match, and its records have their
//! messages rendered and matched as before.

use nanolog_runtime::reader::SiteEntry;
use nanolog_runtime::wire::format::{ArgKind, Count, Piece, Spec, Ty};
use regex::Regex;
use regex_syntax::hir::literal::{ExtractKind, Extractor};

/// A `--grep` pattern and literal strings one of which every match starts
/// with, when it has a few.
#[derive(Clone)]
pub(crate) struct Grep {
    re: Regex,
    literals: Option<Vec<String>>,
}

impl Grep {
    /// The pattern `re` (valid: it compiled).
    pub(crate) fn new(re: Regex) -> Grep {
        let literals = literals_of(re.as_str());
        Grep { re, literals }
    }

    /// Whether a record of `site` may match (false only when none can).
    pub(crate) fn site_may_match(&self, site: &SiteEntry) -> bool {
        if site.kinds.is_empty() {
            let mut msg = String::new();
            nanolog_runtime::text::render::format_message(&site.pieces, &site.kinds, &[], &mut msg);
            return self.re.is_match(&msg);
        }
        self.may_occur(&site.pieces, &site.kinds)
    }

    /// Whether a message of `pieces` whose arguments are of `kinds` may
    /// hold a match (see the module's doc).
    fn may_occur(&self, pieces: &[Piece], kinds: &[ArgKind]) -> bool {
        match &self.literals {
            Some(lits) => lits.iter().any(|lit| literal_may_occur(lit, pieces, kinds)),
            None => true,
        }
    }
}

/// Literal strings one of which every match of `pattern` starts with (the
/// parser's prefix literals; none may be empty), else one of which every
/// match ends with (its suffix literals: `\d+ ms`); `None` when it has no
/// such few either way (`\d+`, or too many). (An empty list: the pattern
/// matches nothing.)
fn literals_of(pattern: &str) -> Option<Vec<String>> {
    let hir = regex_syntax::parse(pattern).ok()?;
    let of = |kind| {
        let seq = Extractor::new().kind(kind).extract(&hir);
        seq.literals()?
            .iter()
            .map(|l| {
                String::from_utf8(l.as_bytes().to_vec())
                    .ok()
                    .filter(|s| !s.is_empty())
            })
            .collect::<Option<Vec<String>>>()
    };
    of(ExtractKind::Prefix).or_else(|| of(ExtractKind::Suffix))
}

/// Whether `lit` may occur in a message of `pieces` whose arguments are of
/// `kinds` (see the module's doc): false only when some run of its
/// characters that no argument can render is in none of the message's
/// texts between arguments.
fn literal_may_occur(lit: &str, pieces: &[Piece], kinds: &[ArgKind]) -> bool {
    // The characters the arguments can render, and the texts between them
    // (consecutive literal pieces joined: nothing renders between them).
    let mut alphabet = String::new();
    let mut texts = vec![String::new()];
    for p in pieces {
        match p {
            Piece::Lit(s) => texts.last_mut().map_or((), |t| t.push_str(s)),
            Piece::Arg(spec) => {
                let Some(&kind) = kinds.get(usize::from(spec.arg)) else {
                    return true;
                };
                match renders(kind, spec) {
                    Some(chars) => alphabet.push_str(chars),
                    // A string, a char, or a value that may render as
                    // nothing: anything may come of it.
                    None => return true,
                }
                if spec.width != Count::Implied {
                    alphabet.push(spec.fill);
                    alphabet.push(' ');
                }
                texts.push(String::new());
            }
        }
    }
    lit.split(|c| alphabet.contains(c))
        .filter(|run| !run.is_empty())
        .all(|run| texts.iter().any(|t| t.contains(run)))
}

/// The characters an argument of `kind` formatted by `spec` renders (at
/// least one of them, always), or `None` when it may render anything or
/// nothing.
fn renders(kind: ArgKind, spec: &Spec) -> Option<&'static str> {
    use ArgKind::*;
    const DECIMAL: &str = "0123456789+-";
    // Hex, octal and binary with their `0x`/`0o`/`0b`, exponents, and
    // Debug's `{:x?}`: every letter any of them writes.
    const RADIX: &str = "0123456789+-.abcdefABCDEFxXobeE";
    const FLOAT: &str = "0123456789+-.eEinfNa";
    match kind {
        U8 | U16 | U32 | U64 | U128 | Usize | I8 | I16 | I32 | I64 | I128 | Isize => {
            Some(if spec.ty == Ty::Display {
                DECIMAL
            } else {
                RADIX
            })
        }
        F32 | F64 => Some(FLOAT),
        // `{:.0}` of a bool is empty (its precision cuts its text).
        Bool if spec.precision == Count::Implied => Some("truefals"),
        Bool | Char | Str | Rendered => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nanolog_runtime::wire::format::Align;
    use nanolog_runtime::wire::record::Value;

    fn lit(s: &str) -> Piece {
        Piece::Lit(s.to_string().into())
    }

    /// Argument `arg` as `{:ty}`, with a width and fill, a precision, flags.
    fn arg(
        arg: u16,
        ty: Ty,
        width: Option<(u32, char)>,
        precision: Option<u32>,
        flags: u8,
    ) -> Piece {
        let mut spec = Spec::display(arg);
        spec.ty = ty;
        if let Some((w, fill)) = width {
            spec.width = Count::Is(w);
            spec.fill = fill;
            spec.align = Align::Center;
        }
        if let Some(p) = precision {
            spec.precision = Count::Is(p);
        }
        spec.flags = flags;
        Piece::Arg(spec)
    }

    fn display(a: u16) -> Piece {
        arg(a, Ty::Display, None, None, 0)
    }

    #[test]
    fn literals_are_a_patterns_prefixes() {
        let lits = |p: &str| {
            literals_of(p).map(|mut l| {
                l.sort();
                l
            })
        };
        let one = |s: &str| Some(vec![s.to_owned()]);
        assert_eq!(lits("disk full"), one("disk full"));
        assert_eq!(lits("^disk full$"), one("disk full"));
        assert_eq!(lits(r"a\.b"), one("a.b"));
        assert_eq!(lits("took .* ms"), one("took "));
        assert_eq!(
            lits("timeout|refused"),
            Some(vec!["refused".to_owned(), "timeout".to_owned()])
        );
        // o or O, then k, K or the Kelvin sign (K's case folding).
        assert_eq!(lits("(?i)ok").map(|l| l.len()), Some(6));
        assert_eq!(lits("a?b"), Some(vec!["ab".to_owned(), "b".to_owned()]));
        // Ends with: a pattern that may start anywhere.
        assert_eq!(lits(r"\d+ ms"), one(" ms"));
        assert_eq!(lits(".*x"), one("x"));
        for p in ["", "^$", r"\d+", "[a-z]+", r"\w.*\w"] {
            assert_eq!(lits(p), None, "{p}");
        }
    }

    /// `f(pieces, kinds, message, a piece of it, another string)` for
    /// `count` messages of each of some formats, their values at random, rendered
    /// by the reader's own renderer.
    fn random_messages(count: usize, mut f: impl FnMut(&[Piece], &[ArgKind], &str, &str, &str)) {
        let alt = Spec::FLAG_ALTERNATE;
        let formats: Vec<Vec<Piece>> = vec![
            vec![lit("took "), display(0), lit(" ms")],
            vec![lit("disk full: "), display(0), lit(" bytes lost")],
            vec![
                lit("h"),
                arg(0, Ty::LowerHex, None, None, 0),
                lit("y"),
                arg(1, Ty::UpperHex, None, None, alt),
                lit("z"),
                arg(2, Ty::Octal, None, None, alt),
                arg(0, Ty::Binary, None, None, alt),
            ],
            vec![
                arg(0, Ty::Display, Some((8, ' ')), None, 0),
                lit("|"),
                arg(1, Ty::Display, Some((9, '*')), None, 0),
                lit("|"),
                arg(2, Ty::Display, None, None, Spec::FLAG_PLUS),
            ],
            vec![
                arg(0, Ty::LowerExp, None, None, 0),
                lit(" and "),
                arg(1, Ty::UpperExp, None, None, 0),
                lit(" of "),
                arg(2, Ty::Debug, None, None, 0),
            ],
            vec![
                lit("ratio "),
                arg(0, Ty::Display, None, Some(3), 0),
                lit(" of "),
                display(1),
            ],
            vec![display(0), display(1), display(2)],
            vec![lit("q="), display(0), lit(" s="), display(1)],
        ];
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        for pieces in &formats {
            let n = pieces
                .iter()
                .filter_map(|p| match p {
                    Piece::Arg(s) => Some(usize::from(s.arg) + 1),
                    Piece::Lit(_) => None,
                })
                .max()
                .unwrap_or(0);
            for _ in 0..count {
                let (kinds, values): (Vec<ArgKind>, Vec<Value>) = (0..n)
                    .map(|_| match next() % 5 {
                        0 => (ArgKind::U64, Value::Uint(u128::from(next() % 100_000))),
                        1 => (ArgKind::I32, Value::Int(i128::from(next() as i32))),
                        2 => {
                            const ODD: [f64; 6] = [
                                f64::NAN,
                                f64::INFINITY,
                                f64::NEG_INFINITY,
                                1e-7,
                                -2.5e21,
                                0.0,
                            ];
                            let bits = next();
                            let v = match ODD.get((bits % 12) as usize) {
                                Some(&v) => v,
                                None => f64::from_bits(bits),
                            };
                            (ArgKind::F64, Value::F64(v))
                        }
                        3 => (ArgKind::F32, Value::F32((next() % 1000) as f32 / 7.0)),
                        _ => (ArgKind::Bool, Value::Bool(next() % 2 == 0)),
                    })
                    .unzip();
                let mut msg = String::new();
                nanolog_runtime::text::render::format_message(pieces, &kinds, &values, &mut msg);
                let chars: Vec<char> = msg.chars().collect();
                let a = next() as usize % chars.len();
                let b = a + 1 + next() as usize % (chars.len() - a);
                let cut: String = chars[a..b].iter().collect();
                let other: String = cut.chars().rev().chain("kz".chars()).collect();
                f(pieces, &kinds, &msg, &cut, &other);
            }
        }
    }

    /// Every message a site renders, cut anywhere, is a literal the site is
    /// said to maybe hold: the rule never rules out a match.
    #[test]
    fn a_site_ruled_out_never_renders_a_match() {
        let mut ruled_out = 0;
        random_messages(2000, |pieces, kinds, msg, cut, other| {
            assert!(literal_may_occur(cut, pieces, kinds), "{cut:?} in {msg:?}");
            // And another literal, which it may rule out.
            if !literal_may_occur(other, pieces, kinds) {
                assert!(!msg.contains(other));
                ruled_out += 1;
            }
        });
        assert!(ruled_out > 100, "the rule rules sites out: {ruled_out}");
    }

    /// Every message a pattern matches is one whose site the pattern may
    /// match: patterns made of pieces of the messages (cut, in another
    /// case, in alternations, followed by more, anchored).
    #[test]
    fn a_site_ruled_out_by_a_pattern_never_renders_a_match() {
        let (mut matched, mut ruled_out) = (0, 0);
        random_messages(300, |pieces, kinds, msg, cut, other| {
            let cut_re = regex::escape(cut);
            for pattern in [
                cut_re.clone(),
                format!("(?i){}", regex::escape(&cut.to_uppercase())),
                format!("{}|{cut_re}", regex::escape(other)),
                format!("{cut_re}.*"),
                format!("^{cut_re}"),
                format!(r"\d*{cut_re}"),
                format!(r"[a-z ]*{cut_re}$"),
                regex::escape(other),
                format!("(?i){}", regex::escape(other)),
            ] {
                let re = Regex::new(&pattern).unwrap();
                let may = Grep::new(re.clone()).may_occur(pieces, kinds);
                if re.is_match(msg) {
                    assert!(may, "{pattern:?} matches {msg:?}");
                    matched += 1;
                } else if !may {
                    ruled_out += 1;
                }
            }
        });
        assert!(matched > 1000 && ruled_out > 50, "{matched} {ruled_out}");
    }

    #[test]
    fn sites_are_ruled_out_by_their_text_where_their_arguments_cannot_render_it() {
        let pieces = [
            lit("request "),
            display(0),
            lit(" served in "),
            display(1),
            lit(" us"),
        ];
        let kinds = [ArgKind::U64, ArgKind::U32];
        assert!(!literal_may_occur("disk full", &pieces, &kinds));
        assert!(literal_may_occur("served", &pieces, &kinds));
        assert!(literal_may_occur("7 served in 1", &pieces, &kinds));
        // Digits alone: any number may render them.
        assert!(literal_may_occur("404", &pieces, &kinds));
        assert!(literal_may_occur("request 12 ", &pieces, &kinds));
        // A string argument: anything.
        assert!(literal_may_occur(
            "disk full",
            &pieces,
            &[ArgKind::Str, ArgKind::U32]
        ));
        // A bool cut to nothing joins the texts around it.
        let cut = [lit("dis"), arg(0, Ty::Display, None, Some(0), 0), lit("k")];
        assert!(literal_may_occur("disk", &cut, &[ArgKind::Bool]));
    }
}
