//! The format-string grammar of `std::fmt`, parsed once at compile time.
//!
//! This module knows nothing of `proc_macro`: it turns a literal's value into
//! [`Piece`]s or a [`ParseError`] message, so its table tests run as plain
//! unit tests. Resolution of argument references happens in `check.rs`.

/// One piece of a parsed format string.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Literal text, with `{{` and `}}` already unescaped.
    Lit(String),
    /// A `{...}` placeholder.
    Arg(Placeholder),
}

/// How a placeholder or a count names its argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgRef {
    /// `{}`: the next implicit positional argument.
    Next,
    /// `{0}`, `{:1$}`.
    Index(usize),
    /// `{name}`, `{:width$}`: a named argument or an inline capture.
    Name(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Count {
    Is(usize),
    Arg(ArgRef),
    /// `.*`: the precision is the next implicit positional argument.
    Star,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Center,
    Right,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Display,
    Debug,
    LowerHex,
    UpperHex,
    Octal,
    Binary,
    LowerExp,
    UpperExp,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Placeholder {
    pub arg: ArgRef,
    pub fill: Option<char>,
    pub align: Option<Align>,
    pub plus: bool,
    pub minus: bool,
    pub alternate: bool,
    pub zero: bool,
    pub width: Option<Count>,
    pub precision: Option<Count>,
    pub ty: Ty,
}

impl Placeholder {
    /// The spec text after `:` in canonical form, with width and precision
    /// arguments renamed to `w` and `p` (used to build the call-site `format!`).
    pub fn spec_text(&self, width_name: &str, prec_name: &str) -> String {
        let mut s = String::new();
        if let Some(a) = self.align {
            if let Some(f) = self.fill {
                s.push(f);
            }
            s.push(match a {
                Align::Left => '<',
                Align::Center => '^',
                Align::Right => '>',
            });
        }
        if self.plus {
            s.push('+');
        }
        if self.minus {
            s.push('-');
        }
        if self.alternate {
            s.push('#');
        }
        if self.zero {
            s.push('0');
        }
        match &self.width {
            None => {}
            Some(Count::Is(n)) => s.push_str(&n.to_string()),
            Some(_) => {
                s.push_str(width_name);
                s.push('$');
            }
        }
        match &self.precision {
            None => {}
            Some(Count::Is(n)) => {
                s.push('.');
                s.push_str(&n.to_string());
            }
            Some(_) => {
                s.push('.');
                s.push_str(prec_name);
                s.push('$');
            }
        }
        s.push_str(match self.ty {
            Ty::Display => "",
            Ty::Debug => "?",
            Ty::LowerHex => "x",
            Ty::UpperHex => "X",
            Ty::Octal => "o",
            Ty::Binary => "b",
            Ty::LowerExp => "e",
            Ty::UpperExp => "E",
        });
        s
    }
}

/// A format-string error: what is wrong, in the words rustc would use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

/// Parses a whole format string.
pub fn parse(src: &str) -> Result<Vec<Piece>, ParseError> {
    let mut pieces = Vec::new();
    let mut lit = String::new();
    let mut chars = src.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        match c {
            '{' => {
                if let Some((_, '{')) = chars.peek() {
                    chars.next();
                    lit.push('{');
                    continue;
                }
                let mut body = String::new();
                let mut closed = false;
                for (_, c) in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    if c == '{' {
                        return Err(ParseError(
                            "invalid format string: unexpected `{` inside a placeholder".into(),
                        ));
                    }
                    body.push(c);
                }
                if !closed {
                    return Err(ParseError(
                        "invalid format string: expected `}` but string was terminated; \
                         if you intended to print `{`, you can escape it using `{{`"
                            .into(),
                    ));
                }
                if !lit.is_empty() {
                    pieces.push(Piece::Lit(std::mem::take(&mut lit)));
                }
                pieces.push(Piece::Arg(parse_placeholder(&body)?));
            }
            '}' => {
                if let Some((_, '}')) = chars.peek() {
                    chars.next();
                    lit.push('}');
                } else {
                    return Err(ParseError(
                        "invalid format string: unmatched `}` found; \
                         if you intended to print `}`, you can escape it using `}}`"
                            .into(),
                    ));
                }
            }
            c => lit.push(c),
        }
    }
    if !lit.is_empty() {
        pieces.push(Piece::Lit(lit));
    }
    Ok(pieces)
}

fn parse_argument(s: &str) -> Result<ArgRef, ParseError> {
    if s.is_empty() {
        return Ok(ArgRef::Next);
    }
    if s.bytes().all(|b| b.is_ascii_digit()) {
        return s.parse().map(ArgRef::Index).map_err(|_| {
            ParseError(format!(
                "invalid format string: argument index `{s}` is too large"
            ))
        });
    }
    if is_identifier(s) {
        return Ok(ArgRef::Name(s.to_owned()));
    }
    Err(ParseError(format!(
        "invalid format string: invalid argument name `{s}`"
    )))
}

fn is_identifier(s: &str) -> bool {
    let mut it = s.chars();
    match it.next() {
        Some(c) if c == '_' || c.is_alphabetic() => {}
        _ => return false,
    }
    s != "_" && it.all(|c| c == '_' || c.is_alphanumeric())
}

fn parse_placeholder(body: &str) -> Result<Placeholder, ParseError> {
    let (arg, spec) = match body.find(':') {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let arg = parse_argument(arg.trim_end())?;
    let mut p = Placeholder {
        arg,
        fill: None,
        align: None,
        plus: false,
        minus: false,
        alternate: false,
        zero: false,
        width: None,
        precision: None,
        ty: Ty::Display,
    };
    let Some(spec) = spec else { return Ok(p) };
    let chars: Vec<char> = spec.chars().collect();
    let mut i = 0;
    let align_of = |c: char| match c {
        '<' => Some(Align::Left),
        '^' => Some(Align::Center),
        '>' => Some(Align::Right),
        _ => None,
    };
    // [[fill]align]
    if chars.len() >= 2 && align_of(chars[1]).is_some() {
        p.fill = Some(chars[0]);
        p.align = align_of(chars[1]);
        i = 2;
    } else if let Some(a) = chars.first().and_then(|&c| align_of(c)) {
        p.align = Some(a);
        i = 1;
    }
    // [sign]
    match chars.get(i) {
        Some('+') => {
            p.plus = true;
            i += 1;
        }
        Some('-') => {
            p.minus = true;
            i += 1;
        }
        _ => {}
    }
    if chars.get(i) == Some(&'#') {
        p.alternate = true;
        i += 1;
    }
    // '0' is the zero flag unless it starts a `0$` width parameter.
    if chars.get(i) == Some(&'0') && chars.get(i + 1) != Some(&'$') {
        p.zero = true;
        i += 1;
    }
    // [width]
    let (w, ni) = parse_count(&chars, i)?;
    p.width = w;
    i = ni;
    // ['.' precision]
    if chars.get(i) == Some(&'.') {
        i += 1;
        if chars.get(i) == Some(&'*') {
            p.precision = Some(Count::Star);
            i += 1;
        } else {
            let (c, ni) = parse_count(&chars, i)?;
            match c {
                Some(c) => p.precision = Some(c),
                None => {
                    return Err(ParseError(
                        "invalid format string: expected a precision after `.`".into(),
                    ))
                }
            }
            i = ni;
        }
    }
    let ty: String = chars[i..].iter().collect();
    p.ty = match ty.trim_end() {
        "" => Ty::Display,
        "?" => Ty::Debug,
        "x" => Ty::LowerHex,
        "X" => Ty::UpperHex,
        "o" => Ty::Octal,
        "b" => Ty::Binary,
        "e" => Ty::LowerExp,
        "E" => Ty::UpperExp,
        "x?" | "X?" => {
            return Err(ParseError(format!(
                "unsupported format spec `{spec}`: hexadecimal Debug (`x?`, `X?`) is not supported by nanolog"
            )))
        }
        other => {
            return Err(ParseError(format!(
                "unknown format trait `{other}` in format spec `{spec}`; \
                 expected one of ``, `?`, `x`, `X`, `o`, `b`, `e`, `E`"
            )))
        }
    };
    Ok(p)
}

/// `count := integer | argument '$'`; returns `None` if there is no count here.
fn parse_count(chars: &[char], start: usize) -> Result<(Option<Count>, usize), ParseError> {
    let mut j = start;
    while j < chars.len() && (chars[j] == '_' || chars[j].is_alphanumeric()) {
        j += 1;
    }
    if j == start {
        return Ok((None, start));
    }
    let word: String = chars[start..j].iter().collect();
    if chars.get(j) == Some(&'$') {
        let arg = parse_argument(&word)?;
        return Ok((Some(Count::Arg(arg)), j + 1));
    }
    // A plain integer: only the leading digits belong to it (`8x` is width 8, type x).
    let digits: String = word.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() {
        return Ok((None, start));
    }
    let n = digits.parse().map_err(|_| {
        ParseError(format!(
            "invalid format string: count `{digits}` is too large"
        ))
    })?;
    Ok((Some(Count::Is(n)), start + digits.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(spec: &str) -> Placeholder {
        match parse(spec).unwrap().as_slice() {
            [Piece::Arg(p)] => p.clone(),
            other => panic!("expected one placeholder, got {other:?}"),
        }
    }

    #[test]
    fn literals_and_escapes() {
        assert_eq!(
            parse("a {{b}} c").unwrap(),
            vec![Piece::Lit("a {b} c".into())]
        );
        assert_eq!(parse("").unwrap(), vec![]);
    }

    #[test]
    fn argument_forms() {
        assert_eq!(one("{}").arg, ArgRef::Next);
        assert_eq!(one("{2}").arg, ArgRef::Index(2));
        assert_eq!(one("{name}").arg, ArgRef::Name("name".into()));
        assert_eq!(one("{:?}").ty, Ty::Debug);
        assert!(one("{x:#?}").alternate);
    }

    #[test]
    fn specs() {
        let cases: &[(&str, &str)] = &[
            ("{:>8}", ">8"),
            ("{:<5.2}", "<5.2"),
            ("{:^+9.3e}", "^+9.3e"),
            ("{:#x}", "#x"),
            ("{:08.3}", "08.3"),
            ("{:*^10}", "*^10"),
            ("{:1$}", "w$"),
            ("{:.*}", ".p$"),
            ("{:w$.p$}", "w$.p$"),
            ("{:0$}", "w$"),
            ("{:-}", "-"),
            ("{:8x}", "8x"),
            ("{:#010b}", "#010b"),
            ("{:>>3}", ">>3"),
            ("{:E}", "E"),
        ];
        for (src, canon) in cases {
            assert_eq!(one(src).spec_text("w", "p"), *canon, "{src}");
        }
        assert_eq!(one("{:0$}").width, Some(Count::Arg(ArgRef::Index(0))));
        assert_eq!(one("{:.*}").precision, Some(Count::Star));
        assert_eq!(
            one("{:w$}").width,
            Some(Count::Arg(ArgRef::Name("w".into())))
        );
    }

    #[test]
    fn errors() {
        for bad in ["{", "}", "{:y}", "{:x?}", "a {0 x}", "{:.}", "{:<<<}"] {
            assert!(parse(bad).is_err(), "{bad} should fail");
        }
    }
}
