//! Tokens with their byte offsets. Keywords are not tokens of their own: they are
//! identifiers compared case-insensitively by the parser, so that `match`, `MATCH` and a
//! property named `count` all work.

use crate::detail::Detail;

/// A token kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    Ident(String),
    /// `` `quoted name` ``: never a keyword.
    Quoted(String),
    Int(i64),
    Float(f64),
    /// Digits running into a name (`12h5`): a bad number where an expression stands,
    /// a plain syntax error where a name does (`{1B2: 1}`).
    BadNumber(String),
    Str(String),
    Param(String),
    Punct(&'static str),
    Eof,
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Ident(s) => write!(f, "'{s}'"),
            Tok::Quoted(s) => write!(f, "`{s}`"),
            Tok::Int(i) => write!(f, "{i}"),
            Tok::Float(x) => write!(f, "{x}"),
            Tok::BadNumber(s) => write!(f, "'{s}'"),
            Tok::Str(s) => write!(f, "string '{s}'"),
            Tok::Param(p) => write!(f, "${p}"),
            Tok::Punct(p) => write!(f, "'{p}'"),
            Tok::Eof => write!(f, "the end of the query"),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    /// Byte offset of the token's first character.
    pub offset: usize,
}

/// A lexical error at a byte offset.
#[derive(Debug, Clone, PartialEq)]
pub struct LexError {
    pub offset: usize,
    pub message: String,
    pub detail: Detail,
}

/// Longest first, so that `<=` wins over `<`.
/// `!` and `&` stand only in label expressions (`:!A`, `:A&B`).
const PUNCT: [&str; 32] = [
    "..", "<=", ">=", "<>", "!=", "=~", "->", "<-", "+=", "(", ")", "[", "]", "{", "}", ",", ".",
    ":", ";", "|", "=", "<", ">", "+", "-", "*", "/", "%", "^", "$", "!", "&",
];

pub fn lex(text: &str) -> Result<Vec<Token>, LexError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        // Unicode white space (a no-break space pasted from a document) separates too.
        if c >= 0x80 {
            if let Some(ch) = text[i..].chars().next().filter(|ch| ch.is_whitespace()) {
                i += ch.len_utf8();
                continue;
            }
        }
        if text[i..].starts_with("//") {
            i = text[i..].find('\n').map_or(b.len(), |k| i + k);
            continue;
        }
        if text[i..].starts_with("/*") {
            match text[i + 2..].find("*/") {
                Some(k) => i = i + 2 + k + 2,
                None => {
                    return Err(LexError {
                        offset: i,
                        message: "unterminated comment".into(),
                        detail: Detail::UnexpectedSyntax,
                    })
                }
            }
            continue;
        }
        let start = i;
        // Names: letters and digits of any script and '_'. Other characters outside
        // ASCII (a dash pasted for a minus) are refused by name below.
        let ident_char = |ch: char| ch.is_alphanumeric() || ch == '_';
        if c.is_ascii_alphabetic()
            || c == b'_'
            || (c >= 0x80 && text[i..].chars().next().is_some_and(char::is_alphabetic))
        {
            while let Some(ch) = text[i..].chars().next().filter(|&ch| ident_char(ch)) {
                i += ch.len_utf8();
            }
            out.push(Token {
                tok: Tok::Ident(text[start..i].to_string()),
                offset: start,
            });
            continue;
        }
        if c == b'`' {
            let end = text[i + 1..].find('`').ok_or(LexError {
                offset: i,
                message: "unterminated `quoted name`".into(),
                detail: Detail::UnexpectedSyntax,
            })?;
            out.push(Token {
                tok: Tok::Quoted(text[i + 1..i + 1 + end].to_string()),
                offset: start,
            });
            i += end + 2;
            continue;
        }
        // `0x1F` and `0o17`: hexadecimal and octal integers. A magnitude of exactly 2^63
        // lexes as i64::MIN, which only a minus sign in front makes valid (the parser
        // checks), so that `-0x8000000000000000` is the smallest integer.
        if c == b'0' && i + 1 < b.len() && matches!(b[i + 1], b'x' | b'X' | b'o' | b'O') {
            let radix = if matches!(b[i + 1], b'x' | b'X') {
                16
            } else {
                8
            };
            let mut j = i + 2;
            while j < b.len() && (b[j] as char).is_ascii_alphanumeric() {
                j += 1;
            }
            let digits = &text[i + 2..j];
            let v = u64::from_str_radix(digits, radix).map_err(|_| {
                if digits.chars().all(|d| d.is_digit(radix)) && !digits.is_empty() {
                    LexError {
                        offset: start,
                        message: format!("integer {} is too large", &text[start..j]),
                        detail: Detail::IntegerOverflow,
                    }
                } else {
                    LexError {
                        offset: start,
                        message: format!(
                            "bad {} number {}",
                            if radix == 16 { "hexadecimal" } else { "octal" },
                            &text[start..j]
                        ),
                        detail: Detail::InvalidNumberLiteral,
                    }
                }
            })?;
            let tok = match i64::try_from(v) {
                Ok(v) => Tok::Int(v),
                Err(_) if v == 1 << 63 => Tok::Int(i64::MIN),
                Err(_) => {
                    return Err(LexError {
                        offset: start,
                        message: format!("integer {} is too large", &text[start..j]),
                        detail: Detail::IntegerOverflow,
                    })
                }
            };
            out.push(Token { tok, offset: start });
            i = j;
            continue;
        }
        // `.5`: a float without integer digits (not the `..5` of a range).
        let leading_dot = c == b'.'
            && b.get(i + 1).is_some_and(u8::is_ascii_digit)
            && (i == 0 || b[i - 1] != b'.');
        if c.is_ascii_digit() || leading_dot {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            let mut float = false;
            // A '.' followed by a digit continues the number; `1..3` is a range.
            if i + 1 < b.len() && b[i] == b'.' && b[i + 1].is_ascii_digit() {
                float = true;
                i += 1;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
            }
            if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                let mut j = i + 1;
                if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                    j += 1;
                }
                if j < b.len() && b[j].is_ascii_digit() {
                    float = true;
                    i = j;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                }
            }
            // `12h5`: a number runs into a name.
            if text[i..].chars().next().is_some_and(ident_char) {
                let end = i + text[i..]
                    .find(|c: char| !ident_char(c))
                    .unwrap_or(text.len() - i);
                out.push(Token {
                    tok: Tok::BadNumber(text[start..end].to_string()),
                    offset: start,
                });
                i = end;
                continue;
            }
            let s = &text[start..i];
            let tok = if float {
                let x: f64 = s.parse().map_err(|_| LexError {
                    offset: start,
                    message: format!("bad number {s}"),
                    detail: Detail::InvalidNumberLiteral,
                })?;
                if x.is_infinite() {
                    return Err(LexError {
                        offset: start,
                        message: format!("float {s} is too large"),
                        detail: Detail::FloatingPointOverflow,
                    });
                }
                Tok::Float(x)
            } else {
                Tok::Int(match s.parse::<i64>() {
                    Ok(v) => v,
                    Err(_) if s.parse::<u64>() == Ok(1 << 63) => i64::MIN,
                    Err(_) => {
                        return Err(LexError {
                            offset: start,
                            message: format!("integer {s} is too large"),
                            detail: Detail::IntegerOverflow,
                        })
                    }
                })
            };
            out.push(Token { tok, offset: start });
            continue;
        }
        if c == b'\'' || c == b'"' {
            let mut s = String::new();
            i += 1;
            loop {
                let Some(ch) = text[i..].chars().next() else {
                    return Err(LexError {
                        offset: start,
                        message: "unterminated string".into(),
                        detail: Detail::UnexpectedSyntax,
                    });
                };
                i += ch.len_utf8();
                if ch as u32 == c as u32 {
                    break;
                }
                if ch == '\\' {
                    let Some(e) = text[i..].chars().next() else {
                        return Err(LexError {
                            offset: start,
                            message: "unterminated string".into(),
                            detail: Detail::UnexpectedSyntax,
                        });
                    };
                    i += e.len_utf8();
                    s.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'b' => '\u{8}',
                        'f' => '\u{c}',
                        '0' => '\0',
                        // `\u01FF`: four hexadecimal digits (`\U` takes eight).
                        'u' | 'U' => {
                            let n = if e == 'u' { 4 } else { 8 };
                            let hex = text.get(i..i + n).filter(|h| {
                                h.bytes().all(|d| d.is_ascii_hexdigit())
                            });
                            let ch = hex
                                .and_then(|h| u32::from_str_radix(h, 16).ok())
                                .and_then(char::from_u32)
                                .ok_or_else(|| LexError {
                                    offset: i - 2,
                                    message: format!(
                                        "invalid Unicode literal: \\{e} takes {n} hexadecimal digits of a character"
                                    ),
                                    detail: Detail::InvalidUnicodeLiteral,
                                })?;
                            i += n;
                            ch
                        }
                        other => other,
                    });
                } else {
                    s.push(ch);
                }
            }
            out.push(Token {
                tok: Tok::Str(s),
                offset: start,
            });
            continue;
        }
        if c == b'$' && b.get(i + 1) == Some(&b'(') {
            // `$(expr)`: a dynamic label or type (Neo4j 5.26).
            out.push(Token {
                tok: Tok::Punct("$"),
                offset: start,
            });
            i += 1;
            continue;
        }
        if c == b'$' {
            i += 1;
            let n0 = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            if i == n0 {
                return Err(LexError {
                    offset: start,
                    message: "expected a parameter name after '$'".into(),
                    detail: Detail::UnexpectedSyntax,
                });
            }
            out.push(Token {
                tok: Tok::Param(text[n0..i].to_string()),
                offset: start,
            });
            continue;
        }
        match PUNCT.iter().find(|p| text[i..].starts_with(**p)) {
            Some(p) => {
                out.push(Token {
                    tok: Tok::Punct(p),
                    offset: start,
                });
                i += p.len();
            }
            None => {
                let ch = text[i..].chars().next().unwrap_or('?');
                return Err(LexError {
                    offset: i,
                    message: if ch.is_ascii() {
                        format!("unexpected character '{ch}'")
                    } else {
                        format!(
                            "unexpected character '{ch}' (U+{:04X}); Cypher's operators are ASCII (a dash is '-')",
                            ch as u32
                        )
                    },
                    detail: if ch.is_ascii() {
                        Detail::UnexpectedSyntax
                    } else {
                        Detail::InvalidUnicodeCharacter
                    },
                });
            }
        }
    }
    out.push(Token {
        tok: Tok::Eof,
        offset: b.len(),
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(t: &str) -> Vec<Tok> {
        lex(t).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn tokens() {
        assert_eq!(
            kinds("MATCH (n:User {id: $id})-[*1..3]->(m) // c\nRETURN 1.5e3, 'a\\'b', `x y`"),
            vec![
                Tok::Ident("MATCH".into()),
                Tok::Punct("("),
                Tok::Ident("n".into()),
                Tok::Punct(":"),
                Tok::Ident("User".into()),
                Tok::Punct("{"),
                Tok::Ident("id".into()),
                Tok::Punct(":"),
                Tok::Param("id".into()),
                Tok::Punct("}"),
                Tok::Punct(")"),
                Tok::Punct("-"),
                Tok::Punct("["),
                Tok::Punct("*"),
                Tok::Int(1),
                Tok::Punct(".."),
                Tok::Int(3),
                Tok::Punct("]"),
                Tok::Punct("->"),
                Tok::Punct("("),
                Tok::Ident("m".into()),
                Tok::Punct(")"),
                Tok::Ident("RETURN".into()),
                Tok::Float(1500.0),
                Tok::Punct(","),
                Tok::Str("a'b".into()),
                Tok::Punct(","),
                Tok::Quoted("x y".into()),
                Tok::Eof,
            ]
        );
    }

    #[test]
    fn errors() {
        assert_eq!(lex("RETURN 'abc").unwrap_err().offset, 7);
        assert!(lex("RETURN 99999999999999999999")
            .unwrap_err()
            .message
            .contains("too large"));
        assert_eq!(lex("RETURN #").unwrap_err().offset, 7);
    }
}
