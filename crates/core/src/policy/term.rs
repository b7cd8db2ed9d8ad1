//! SMT-LIB terms of the paper's fragment: the untyped syntax tree, its parser and its printer.
//!
//! Statements from translators are parsed here and never spliced as text into a solver
//! script, so input like `x) (assert false` is a syntax error, not an injection.

use std::fmt;

/// Most characters a single term may have; longer input is rejected before parsing.
pub const MAX_TERM_CHARS: usize = 100_000;
/// Deepest nesting of parentheses accepted (bounds the parser's and later passes' recursion).
pub const MAX_TERM_DEPTH: usize = 200;

/// A byte range in the source text of a term. Equality ignores spans, so that a printed and
/// re-parsed term equals the original.
#[derive(Debug, Clone, Copy, Default)]
pub struct Span {
    /// Byte offset of the first character.
    pub start: usize,
    /// Byte offset one past the last character.
    pub end: usize,
}

impl PartialEq for Span {
    fn eq(&self, _: &Span) -> bool {
        true
    }
}

/// The operators of the fragment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `and`
    And,
    /// `or`
    Or,
    /// `not`
    Not,
    /// `=>`
    Implies,
    /// `=`
    Eq,
    /// `distinct`
    Distinct,
    /// `ite`
    Ite,
    /// `+`
    Add,
    /// `-` (binary or more: subtraction; one argument: negation)
    Sub,
    /// `*`
    Mul,
    /// `/` (real division)
    Div,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `to_real`
    ToReal,
}

impl Op {
    /// Every operator, for generators and documentation.
    pub const ALL: [Op; 16] = [
        Op::And,
        Op::Or,
        Op::Not,
        Op::Implies,
        Op::Eq,
        Op::Distinct,
        Op::Ite,
        Op::Add,
        Op::Sub,
        Op::Mul,
        Op::Div,
        Op::Lt,
        Op::Le,
        Op::Gt,
        Op::Ge,
        Op::ToReal,
    ];

    /// The SMT-LIB spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::And => "and",
            Op::Or => "or",
            Op::Not => "not",
            Op::Implies => "=>",
            Op::Eq => "=",
            Op::Distinct => "distinct",
            Op::Ite => "ite",
            Op::Add => "+",
            Op::Sub => "-",
            Op::Mul => "*",
            Op::Div => "/",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::ToReal => "to_real",
        }
    }

    /// The operator spelled `s`, if it is one of the fragment's.
    pub fn from_symbol(s: &str) -> Option<Op> {
        Op::ALL.into_iter().find(|op| op.as_str() == s)
    }
}

/// A term as written: literals, symbols (variables or enum values) and operator applications.
#[derive(Debug, Clone)]
pub struct Term {
    /// What the term is.
    pub kind: TermKind,
    /// Where it was in the source (zero for built terms).
    pub span: Span,
}

impl PartialEq for Term {
    fn eq(&self, other: &Term) -> bool {
        self.kind == other.kind
    }
}

/// The shapes a [`Term`] can have.
#[derive(Debug, Clone, PartialEq)]
pub enum TermKind {
    /// `true` or `false`.
    Bool(bool),
    /// A numeral such as `42` (SMT-LIB has no negative literals: `(- 42)`).
    Int(u128),
    /// A decimal such as `35.40`: `digits / 10^scale`, with `scale >= 1` digits after the point.
    Decimal {
        /// All digits, without the point.
        digits: u128,
        /// How many of them follow the point.
        scale: u32,
    },
    /// A variable or an enum value, resolved by the type checker.
    Symbol(String),
    /// An operator applied to arguments.
    App(Op, Vec<Term>),
}

impl Term {
    /// A term without a source position.
    pub fn new(kind: TermKind) -> Term {
        Term {
            kind,
            span: Span::default(),
        }
    }

    /// A symbol (variable or enum value).
    pub fn symbol(name: impl Into<String>) -> Term {
        Term::new(TermKind::Symbol(name.into()))
    }

    /// An application of `op`.
    pub fn app(op: Op, args: Vec<Term>) -> Term {
        Term::new(TermKind::App(op, args))
    }

    /// Number of nodes, for size limits.
    pub fn size(&self) -> usize {
        match &self.kind {
            TermKind::App(_, args) => 1 + args.iter().map(Term::size).sum::<usize>(),
            _ => 1,
        }
    }

    /// Every symbol occurring in the term, in order of first occurrence.
    pub fn symbols(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect_symbols(&mut out);
        out
    }

    fn collect_symbols<'a>(&'a self, out: &mut Vec<&'a str>) {
        match &self.kind {
            TermKind::Symbol(s) if !out.contains(&s.as_str()) => out.push(s),
            TermKind::App(_, args) => args.iter().for_each(|a| a.collect_symbols(out)),
            _ => {}
        }
    }
}

/// Whether `s` can be printed as an SMT-LIB simple symbol (otherwise it is printed `|quoted|`).
pub(crate) fn is_simple_symbol(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if is_symbol_char(c) && !c.is_ascii_digit() => {}
        _ => return false,
    }
    chars.all(is_symbol_char)
}

fn is_symbol_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "~!@$%^&*_-+=<>.?/".contains(c)
}

/// The integer and fraction digits of `digits / 10^scale`, with at least one integer digit.
pub(crate) fn decimal_parts(digits: u128, scale: u32) -> (String, String) {
    let text = digits.to_string();
    let scale = scale as usize;
    let padded = if text.len() <= scale {
        format!("{}{}", "0".repeat(scale + 1 - text.len()), text)
    } else {
        text
    };
    let (int, frac) = padded.split_at(padded.len() - scale);
    (int.to_string(), frac.to_string())
}

fn fmt_decimal(f: &mut fmt::Formatter<'_>, digits: u128, scale: u32) -> fmt::Result {
    let (int, frac) = decimal_parts(digits, scale);
    write!(f, "{int}.{frac}")
}

/// Prints SMT-LIB that [`parse_term`] reads back to an equal term.
impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            TermKind::Bool(b) => write!(f, "{b}"),
            TermKind::Int(n) => write!(f, "{n}"),
            TermKind::Decimal { digits, scale } => fmt_decimal(f, *digits, *scale),
            TermKind::Symbol(s) if is_simple_symbol(s) && s != "true" && s != "false" => {
                f.write_str(s)
            }
            TermKind::Symbol(s) => write!(f, "|{s}|"),
            TermKind::App(op, args) => {
                write!(f, "({}", op.as_str())?;
                for a in args {
                    write!(f, " {a}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// Why a term could not be parsed; `offset` is a byte offset into the term's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The text is longer than [`MAX_TERM_CHARS`].
    #[error("the term is {len} characters long; at most {max} are accepted")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Nothing but whitespace and comments.
    #[error("the term is empty")]
    Empty,
    /// A character that cannot start any token.
    #[error("unexpected character {ch:?} at offset {offset}")]
    UnexpectedChar {
        /// The character.
        ch: char,
        /// Where.
        offset: usize,
    },
    /// A `(` without its `)`.
    #[error("unbalanced parentheses: the `(` at offset {offset} is never closed")]
    Unclosed {
        /// Where the open parenthesis is.
        offset: usize,
    },
    /// A `)` without its `(`, or other input after a complete term.
    #[error("unexpected {found} at offset {offset} after a complete term (unbalanced parentheses or more than one term)")]
    Trailing {
        /// What was found, quoted.
        found: String,
        /// Where.
        offset: usize,
    },
    /// A `)` where a term was expected.
    #[error("unexpected `)` at offset {offset}: expected a term")]
    UnexpectedClose {
        /// Where.
        offset: usize,
    },
    /// `()`.
    #[error("empty application `()` at offset {offset}")]
    EmptyApp {
        /// Where.
        offset: usize,
    },
    /// An operator outside the fragment (`let`, `forall`, `assert`, ...).
    #[error("unsupported operator `{name}` at offset {offset}: the fragment allows and, or, not, =>, =, distinct, ite, +, -, *, /, <, <=, >, >=, to_real")]
    UnknownOperator {
        /// The operator as written.
        name: String,
        /// Where.
        offset: usize,
    },
    /// An application whose head is not a symbol, like `((f) x)`.
    #[error("the application at offset {offset} must start with an operator name")]
    BadHead {
        /// Where.
        offset: usize,
    },
    /// Nesting deeper than [`MAX_TERM_DEPTH`].
    #[error("the term nests deeper than {max} levels at offset {offset}")]
    TooDeep {
        /// Where the limit was hit.
        offset: usize,
        /// The limit.
        max: usize,
    },
    /// A numeral too large to represent.
    #[error("the number `{text}` at offset {offset} is too large")]
    NumberTooLarge {
        /// The number as written.
        text: String,
        /// Where.
        offset: usize,
    },
    /// A malformed number, quoted symbol or keyword.
    #[error("malformed token `{text}` at offset {offset}: {problem}")]
    BadToken {
        /// The token.
        text: String,
        /// Where.
        offset: usize,
        /// What is wrong with it.
        problem: &'static str,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Open,
    Close,
    Atom(TermKind),
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
}

/// Whether SMT-LIB text holds a comment: a `;` outside a `|quoted symbol|`, which hides the
/// rest of its line from a solver while a reader still sees it.
pub fn holds_comment(text: &str) -> bool {
    let mut quoted = false;
    text.chars().any(|c| {
        if c == '|' {
            quoted = !quoted;
        }
        c == ';' && !quoted
    })
}

impl<'a> Lexer<'a> {
    fn skip_trivia(&mut self) {
        let bytes = self.src.as_bytes();
        while self.pos < bytes.len() {
            match bytes[self.pos] {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b';' => {
                    while self.pos < bytes.len() && bytes[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    /// The next token and its span, or `None` at the end.
    fn next(&mut self) -> Result<Option<(Token, Span)>, ParseError> {
        self.skip_trivia();
        let start = self.pos;
        let Some(c) = self.src[start..].chars().next() else {
            return Ok(None);
        };
        let token = match c {
            '(' => {
                self.pos += 1;
                Token::Open
            }
            ')' => {
                self.pos += 1;
                Token::Close
            }
            '|' => {
                let rest = &self.src[start + 1..];
                let Some(len) = rest.find('|') else {
                    return Err(ParseError::BadToken {
                        text: self.src[start..].chars().take(20).collect(),
                        offset: start,
                        problem: "quoted symbol without closing `|`",
                    });
                };
                let name = &rest[..len];
                if name.contains('\\') || name.is_empty() {
                    return Err(ParseError::BadToken {
                        text: format!("|{name}|"),
                        offset: start,
                        problem: "quoted symbols must be non-empty and contain no `\\`",
                    });
                }
                self.pos = start + len + 2;
                Token::Atom(TermKind::Symbol(name.to_string()))
            }
            c if c.is_ascii_digit() => {
                let len = self.src[start..]
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(self.src.len() - start);
                self.pos = start + len;
                Token::Atom(number(&self.src[start..self.pos], start)?)
            }
            c if is_symbol_char(c) => {
                let len = self.src[start..]
                    .find(|c: char| !is_symbol_char(c))
                    .unwrap_or(self.src.len() - start);
                self.pos = start + len;
                let text = &self.src[start..self.pos];
                Token::Atom(match text {
                    "true" => TermKind::Bool(true),
                    "false" => TermKind::Bool(false),
                    _ => TermKind::Symbol(text.to_string()),
                })
            }
            ch => return Err(ParseError::UnexpectedChar { ch, offset: start }),
        };
        Ok(Some((
            token,
            Span {
                start,
                end: self.pos,
            },
        )))
    }
}

fn number(text: &str, offset: usize) -> Result<TermKind, ParseError> {
    let bad = |problem| ParseError::BadToken {
        text: text.to_string(),
        offset,
        problem,
    };
    let too_large = || ParseError::NumberTooLarge {
        text: text.to_string(),
        offset,
    };
    let (int, frac) = match text.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (text, None),
    };
    if int.len() > 1 && int.starts_with('0') {
        return Err(bad("numerals must not have leading zeros"));
    }
    match frac {
        None => int
            .parse::<u128>()
            .map(TermKind::Int)
            .map_err(|_| too_large()),
        Some(f) if f.is_empty() || f.contains('.') => {
            Err(bad("a decimal needs digits after exactly one point"))
        }
        Some(f) => {
            let scale = u32::try_from(f.len()).map_err(|_| too_large())?;
            let digits = format!("{int}{f}")
                .parse::<u128>()
                .map_err(|_| too_large())?;
            Ok(TermKind::Decimal { digits, scale })
        }
    }
}

/// Parses exactly one SMT-LIB term of the fragment. Never panics; every error says where.
pub fn parse_term(src: &str) -> Result<Term, ParseError> {
    if src.len() > MAX_TERM_CHARS {
        return Err(ParseError::TooLong {
            len: src.len(),
            max: MAX_TERM_CHARS,
        });
    }
    let mut lexer = Lexer { src, pos: 0 };
    let Some(first) = lexer.next()? else {
        return Err(ParseError::Empty);
    };
    let term = parse_from(&mut lexer, first, 0)?;
    if let Some((token, span)) = lexer.next()? {
        let found = match token {
            Token::Close => "`)`".to_string(),
            Token::Open => "`(`".to_string(),
            Token::Atom(_) => format!("`{}`", &src[span.start..span.end]),
        };
        return Err(ParseError::Trailing {
            found,
            offset: span.start,
        });
    }
    Ok(term)
}

fn parse_from(
    lexer: &mut Lexer<'_>,
    (token, span): (Token, Span),
    depth: usize,
) -> Result<Term, ParseError> {
    match token {
        Token::Atom(kind) => Ok(Term { kind, span }),
        Token::Close => Err(ParseError::UnexpectedClose { offset: span.start }),
        Token::Open => {
            if depth >= MAX_TERM_DEPTH {
                return Err(ParseError::TooDeep {
                    offset: span.start,
                    max: MAX_TERM_DEPTH,
                });
            }
            let open = span.start;
            let op = match lexer.next()? {
                None => return Err(ParseError::Unclosed { offset: open }),
                Some((Token::Close, _)) => return Err(ParseError::EmptyApp { offset: open }),
                Some((Token::Atom(TermKind::Symbol(name)), s)) => {
                    Op::from_symbol(&name).ok_or(ParseError::UnknownOperator {
                        name,
                        offset: s.start,
                    })?
                }
                Some((Token::Atom(_), s)) => {
                    return Err(ParseError::UnknownOperator {
                        name: lexer.src[s.start..s.end].to_string(),
                        offset: s.start,
                    })
                }
                Some((Token::Open, _)) => return Err(ParseError::BadHead { offset: open }),
            };
            let mut args = Vec::new();
            loop {
                match lexer.next()? {
                    None => return Err(ParseError::Unclosed { offset: open }),
                    Some((Token::Close, s)) => {
                        return Ok(Term {
                            kind: TermKind::App(op, args),
                            span: Span {
                                start: open,
                                end: s.end,
                            },
                        })
                    }
                    Some(next) => args.push(parse_from(lexer, next, depth + 1)?),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_papers_rule() {
        let t = parse_term("(=> isLowSeason (= admissionFee (* 0.75 baseFee)))").unwrap();
        assert_eq!(
            t.to_string(),
            "(=> isLowSeason (= admissionFee (* 0.75 baseFee)))"
        );
        assert_eq!(t.symbols(), vec!["isLowSeason", "admissionFee", "baseFee"]);
        assert_eq!(t.size(), 7);
    }

    #[test]
    fn decimals_keep_their_digits() {
        for s in ["35.4", "35.40", "0.05", "0.0", "100.125"] {
            assert_eq!(parse_term(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn rejects_smuggled_assertions() {
        let e = parse_term("x) (assert false").unwrap_err();
        assert_eq!(
            e,
            ParseError::Trailing {
                found: "`)`".into(),
                offset: 1
            }
        );
        assert!(e.to_string().contains("unbalanced parentheses"));
        let e = parse_term("(assert false)").unwrap_err();
        assert!(
            matches!(e, ParseError::UnknownOperator { ref name, offset: 1 } if name == "assert")
        );
    }

    #[test]
    fn reports_unclosed_parenthesis_position() {
        assert_eq!(
            parse_term("(and a (or b c)").unwrap_err(),
            ParseError::Unclosed { offset: 0 }
        );
        assert_eq!(parse_term("  ").unwrap_err(), ParseError::Empty);
        assert_eq!(
            parse_term("()").unwrap_err(),
            ParseError::EmptyApp { offset: 0 }
        );
        assert_eq!(
            parse_term(")").unwrap_err(),
            ParseError::UnexpectedClose { offset: 0 }
        );
    }

    #[test]
    fn rejects_bad_numbers_and_characters() {
        assert!(matches!(
            parse_term("007").unwrap_err(),
            ParseError::BadToken { .. }
        ));
        assert!(matches!(
            parse_term("1.2.3").unwrap_err(),
            ParseError::BadToken { .. }
        ));
        assert!(matches!(
            parse_term("99999999999999999999999999999999999999999").unwrap_err(),
            ParseError::NumberTooLarge { .. }
        ));
        assert!(matches!(
            parse_term("\"str\"").unwrap_err(),
            ParseError::UnexpectedChar { ch: '"', offset: 0 }
        ));
    }

    #[test]
    fn depth_is_limited() {
        let deep = format!("{}x{}", "(not ".repeat(500), ")".repeat(500));
        assert!(matches!(
            parse_term(&deep).unwrap_err(),
            ParseError::TooDeep { .. }
        ));
    }

    #[test]
    fn quoted_symbols_round_trip() {
        let t = parse_term("(= |a b| 1)").unwrap();
        assert_eq!(t.symbols(), vec!["a b"]);
        assert_eq!(t.to_string(), "(= |a b| 1)");
    }

    fn arb_term() -> impl Strategy<Value = Term> {
        let leaf = prop_oneof![
            any::<bool>().prop_map(|b| Term::new(TermKind::Bool(b))),
            any::<u64>().prop_map(|n| Term::new(TermKind::Int(n as u128))),
            (any::<u32>(), 1u32..6).prop_map(|(d, scale)| Term::new(TermKind::Decimal {
                digits: d as u128,
                scale
            })),
            "[a-zA-Z_][a-zA-Z0-9_.]{0,8}".prop_map(Term::symbol),
            "[a-z ]{1,6}".prop_map(Term::symbol),
        ];
        leaf.prop_recursive(6, 64, 4, |inner| {
            (
                proptest::sample::select(Op::ALL.to_vec()),
                prop::collection::vec(inner, 0..4),
            )
                .prop_map(|(op, args)| Term::app(op, args))
        })
    }

    proptest! {
        #[test]
        fn parser_never_panics(s in "\\PC{0,200}") {
            let _ = parse_term(&s);
        }

        #[test]
        fn parser_never_panics_on_smtlib_like_input(s in "[()a-z0-9. |;=<>+*/-]{0,200}") {
            let _ = parse_term(&s);
        }

        #[test]
        fn print_then_parse_is_identity(t in arb_term()) {
            let printed = t.to_string();
            let reparsed = parse_term(&printed);
            prop_assert_eq!(reparsed, Ok(t), "printed as {}", printed);
        }
    }
}
