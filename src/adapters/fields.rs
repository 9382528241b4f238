//! The small part of Structured Field Values (RFC 9651) that the `RateLimit` and
//! `RateLimit-Policy` fields use: a List of Items, each a bare item with
//! Parameters. Reading keeps what a client needs (each item's name and its integer
//! parameters); writing is done by the server's header builder.

/// One member of a `RateLimit` or `RateLimit-Policy` list: the policy's name (a
/// String or Token bare item) and its integer parameters (`q`, `w`, `r`, `t`, ...).
/// Parameters of other types (`pk`, `qu`) are checked for syntax and skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Item {
    pub name: String,
    pub params: Vec<(String, i64)>,
}

impl Item {
    /// The integer parameter `key`, if present (the last one wins, as in RFC 9651).
    pub fn param(&self, key: &str) -> Option<i64> {
        self.params
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| *v)
    }
}

/// Parses a List of Items. Any syntax error makes the whole field `None` (the draft:
/// "Malformed RateLimit header fields MUST be ignored").
pub(crate) fn parse_list(text: &str) -> Option<Vec<Item>> {
    let mut input = Input {
        bytes: text.as_bytes(),
        at: 0,
    };
    let mut items = Vec::new();
    input.skip(|b| b == b' ');
    if input.done() {
        return Some(items);
    }
    loop {
        items.push(input.item()?);
        input.skip(|b| b == b' ' || b == b'\t');
        if input.done() {
            return Some(items);
        }
        input.expect(b',')?;
        input.skip(|b| b == b' ' || b == b'\t');
        if input.done() {
            return None; // a trailing comma
        }
    }
}

struct Input<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// A bare item's value, as far as this reader keeps it.
enum Bare {
    Text(String),
    Integer(i64),
    Other,
}

impl Input<'_> {
    fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip(&mut self, what: impl Fn(u8) -> bool) {
        while self.peek().is_some_and(&what) {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn item(&mut self) -> Option<Item> {
        let name = match self.bare()? {
            Bare::Text(name) => name,
            Bare::Integer(n) => n.to_string(),
            Bare::Other => String::new(),
        };
        let mut params = Vec::new();
        while self.peek() == Some(b';') {
            self.at += 1;
            self.skip(|b| b == b' ');
            let key = self.key()?;
            let value = if self.peek() == Some(b'=') {
                self.at += 1;
                self.bare()?
            } else {
                Bare::Other // a boolean true
            };
            if let Bare::Integer(n) = value {
                params.push((key, n));
            }
        }
        Some(Item { name, params })
    }

    fn key(&mut self) -> Option<String> {
        let start = self.at;
        let first = self.peek()?;
        if !(first.is_ascii_lowercase() || first == b'*') {
            return None;
        }
        self.skip(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_-.*".contains(&b));
        Some(String::from_utf8_lossy(&self.bytes[start..self.at]).into_owned())
    }

    fn bare(&mut self) -> Option<Bare> {
        match self.peek()? {
            b'"' => self.string().map(Bare::Text),
            b'-' | b'0'..=b'9' => self.number(),
            b':' => {
                // A Byte Sequence: base64 between colons.
                self.at += 1;
                self.skip(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
                self.expect(b':')?;
                Some(Bare::Other)
            }
            b'?' => {
                self.at += 1;
                matches!(self.peek()?, b'0' | b'1').then(|| self.at += 1)?;
                Some(Bare::Other)
            }
            b if b.is_ascii_alphabetic() || b == b'*' => {
                let start = self.at;
                self.skip(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&b));
                let token = String::from_utf8_lossy(&self.bytes[start..self.at]).into_owned();
                Some(Bare::Text(token))
            }
            _ => None,
        }
    }

    fn string(&mut self) -> Option<String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            let byte = self.peek()?;
            self.at += 1;
            match byte {
                b'"' => return Some(out),
                b'\\' => {
                    let escaped = self.peek()?;
                    if escaped != b'"' && escaped != b'\\' {
                        return None;
                    }
                    self.at += 1;
                    out.push(char::from(escaped));
                }
                0x20..=0x7e => out.push(char::from(byte)),
                _ => return None,
            }
        }
    }

    /// An Integer (at most 15 digits); a Decimal is syntax-checked and skipped.
    fn number(&mut self) -> Option<Bare> {
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let start = self.at;
        self.skip(|b| b.is_ascii_digit());
        let digits = self.at - start;
        if digits == 0 || digits > 15 {
            return None;
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            let fraction = self.at;
            self.skip(|b| b.is_ascii_digit());
            let places = self.at - fraction;
            return (digits <= 12 && (1..=3).contains(&places)).then_some(Bare::Other);
        }
        let text = std::str::from_utf8(&self.bytes[start..self.at]).ok()?;
        let value: i64 = text.parse().ok()?;
        Some(Bare::Integer(if negative { -value } else { value }))
    }
}

/// Writes `name` as an sf-string: quoted, with `"` and `\` escaped. Characters
/// outside printable ASCII are not allowed in an sf-string and are replaced by `?`.
pub(crate) fn push_string(out: &mut String, name: &str) {
    out.push('"');
    for c in name.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, params: &[(&str, i64)]) -> Item {
        Item {
            name: name.into(),
            params: params.iter().map(|(k, v)| ((*k).into(), *v)).collect(),
        }
    }

    #[test]
    fn reads_the_drafts_examples() {
        assert_eq!(
            parse_list(r#""default";r=50;t=30"#),
            Some(vec![item("default", &[("r", 50), ("t", 30)])])
        );
        assert_eq!(
            parse_list(r#""permin";q=50;w=60,"perhr";q=1000;w=3600"#),
            Some(vec![
                item("permin", &[("q", 50), ("w", 60)]),
                item("perhr", &[("q", 1000), ("w", 3600)]),
            ])
        );
        assert_eq!(
            parse_list(r#""peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:"#),
            Some(vec![item("peruser", &[("q", 65535), ("w", 10)])])
        );
        assert_eq!(
            parse_list(r#"default;r=1;t=7 ,  "b\"q";r=0;flag"#),
            Some(vec![
                item("default", &[("r", 1), ("t", 7)]),
                item("b\"q", &[("r", 0)]),
            ])
        );
        assert_eq!(parse_list(""), Some(vec![]));
    }

    #[test]
    fn malformed_lists_are_none() {
        for bad in [
            r#""open;r=1"#,
            r#""a";r=1,"#,
            r#""a";R=1"#,
            r#""a";r=1234567890123456"#,
            r#""a";r=1 "b";r=2"#,
            r#""a";r=:abc"#,
            "\"a\u{e9}\";r=1",
        ] {
            assert_eq!(parse_list(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn written_strings_read_back() {
        let mut out = String::new();
        push_string(&mut out, "we\"ird\\name");
        out.push_str(";r=3");
        assert_eq!(
            parse_list(&out),
            Some(vec![item("we\"ird\\name", &[("r", 3)])])
        );
        let mut out = String::new();
        push_string(&mut out, "caf\u{e9}");
        assert_eq!(out, "\"caf?\"");
    }
}
