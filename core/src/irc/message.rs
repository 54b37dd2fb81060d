//! Zero-copy IRC message parsing (RFC 1459 with IRCv3 message tags) and formatting.
//!
//! [`Message::parse`] borrows every field from the input line and allocates nothing; tag values are
//! unescaped lazily, and only when they contain an escape.

use std::borrow::Cow;

use super::forbidden::has_forbidden_byte;

/// RFC 1459 allows at most 15 parameters; a 15th parameter takes the rest of the line.
pub const MAX_PARAMS: usize = 15;

/// Why a line is not an IRC message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The line has no command.
    #[error("line has no command")]
    MissingCommand,
    /// The line is not valid UTF-8.
    #[error("line is not valid UTF-8")]
    InvalidUtf8,
    /// The line holds a NUL, CR or LF byte inside it.
    #[error("line contains a NUL, CR or LF byte")]
    ForbiddenByte,
    /// A tag section without the space that must end it.
    #[error("tag section is not followed by a command")]
    TagsWithoutCommand,
}

/// Why a message cannot be formatted as an IRC line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// A command must be letters or a three-digit numeric.
    #[error("invalid command {0:?}")]
    InvalidCommand(String),
    /// A parameter contains NUL, CR or LF.
    #[error("parameter {index} contains a NUL, CR or LF byte")]
    ForbiddenByte {
        /// Index of the offending parameter.
        index: usize,
    },
    /// Only the last parameter may be empty, contain a space or start with ':'.
    #[error("parameter {index} is empty, has a space or starts with ':' but is not last")]
    InvalidMiddle {
        /// Index of the offending parameter.
        index: usize,
    },
    /// More than [`MAX_PARAMS`] parameters.
    #[error("more than {MAX_PARAMS} parameters")]
    TooManyParams,
}

/// The source of a message: `nick!user@host` or a server name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source<'a> {
    /// The whole source as written, without the leading ':'.
    pub raw: &'a str,
    /// The nick (or server name when there is no `!`/`@`).
    pub nick: &'a str,
    /// The user part after `!`, if present.
    pub user: Option<&'a str>,
    /// The host part after `@`, if present.
    pub host: Option<&'a str>,
}

impl<'a> Source<'a> {
    /// Splits `nick!user@host`; any part may be missing.
    #[inline]
    pub fn parse(raw: &'a str) -> Self {
        let bytes = raw.as_bytes();
        let (rest, host) = match find_byte(bytes, 0, b'@') {
            Some(at) => (&raw[..at], Some(&raw[at + 1..])),
            None => (raw, None),
        };
        let (nick, user) = match find_byte(rest.as_bytes(), 0, b'!') {
            Some(bang) => (&rest[..bang], Some(&rest[bang + 1..])),
            None => (rest, None),
        };
        Source {
            raw,
            nick,
            user,
            host,
        }
    }
}

/// One parsed IRC line, borrowing from the input.
#[derive(Debug, Clone, Copy)]
pub struct Message<'a> {
    tags: Option<&'a str>,
    /// Who sent it, if the line has a source prefix.
    pub source: Option<Source<'a>>,
    /// The command as written (`PRIVMSG`, `001`, ...). Compare with [`Message::is`].
    pub command: &'a str,
    params: [&'a str; MAX_PARAMS],
    param_count: u8,
}

impl<'a> Message<'a> {
    /// Parses one line. A trailing `\r\n`, `\n` or `\r` is ignored; any other CR, LF or NUL is an
    /// error. Runs of spaces between parameters count as one separator.
    #[inline]
    pub fn parse(line: &'a [u8]) -> Result<Self, ParseError> {
        let line = trim_line_end(line);
        if has_forbidden_byte(line) {
            return Err(ParseError::ForbiddenByte);
        }
        // SIMD validation: std's `from_utf8` took over a third of the parse time on chat with a
        // few non-ASCII characters per line (benches/irc_parse.rs); simdutf8 cut the whole parse
        // from 1290 µs to 764 µs on that corpus.
        let line = simdutf8::basic::from_utf8(line).map_err(|_| ParseError::InvalidUtf8)?;
        Self::parse_str(line)
    }

    /// Parses one line that is already known to be UTF-8 and free of NUL, CR and LF.
    ///
    /// Works on bytes: every split point is an ASCII space, so every slice taken is on a char
    /// boundary. Tokens are short and searched with [`find_byte`]; only the tag section, which can
    /// be 8 KiB, is searched with `memchr`.
    #[inline]
    fn parse_str(line: &'a str) -> Result<Self, ParseError> {
        let bytes = line.as_bytes();
        let mut pos = skip_spaces(bytes, 0);
        let mut tags = None;
        if bytes.get(pos) == Some(&b'@') {
            let end = memchr::memchr(b' ', &bytes[pos..])
                .map(|offset| pos + offset)
                .ok_or(ParseError::TagsWithoutCommand)?;
            tags = Some(&line[pos + 1..end]);
            pos = skip_spaces(bytes, end);
        }
        let mut source = None;
        if bytes.get(pos) == Some(&b':') {
            let end = find_space(bytes, pos).ok_or(ParseError::MissingCommand)?;
            source = Some(Source::parse(&line[pos + 1..end]));
            pos = skip_spaces(bytes, end);
        }
        let command_end = find_space(bytes, pos).unwrap_or(bytes.len());
        if command_end == pos {
            return Err(ParseError::MissingCommand);
        }
        let mut msg = Message {
            tags,
            source,
            command: &line[pos..command_end],
            params: [""; MAX_PARAMS],
            param_count: 0,
        };
        let mut count = 0;
        pos = command_end;
        loop {
            pos = skip_spaces(bytes, pos);
            if pos == bytes.len() {
                break;
            }
            if bytes[pos] == b':' {
                msg.params[count] = &line[pos + 1..];
                count += 1;
                break;
            }
            if count == MAX_PARAMS - 1 {
                msg.params[count] = &line[pos..];
                count += 1;
                break;
            }
            let end = find_space(bytes, pos).unwrap_or(bytes.len());
            msg.params[count] = &line[pos..end];
            count += 1;
            pos = end;
        }
        msg.param_count = count as u8;
        Ok(msg)
    }

    /// The parameters, the trailing one included (without its ':').
    #[inline]
    pub fn params(&self) -> &[&'a str] {
        &self.params[..self.param_count as usize]
    }

    /// Parameter `index`, if present.
    #[inline]
    pub fn param(&self, index: usize) -> Option<&'a str> {
        self.params().get(index).copied()
    }

    /// The last parameter (for `PRIVMSG`, the text).
    #[inline]
    pub fn trailing(&self) -> Option<&'a str> {
        self.params().last().copied()
    }

    /// Case-insensitive command comparison (`privmsg` is `PRIVMSG`).
    #[inline]
    pub fn is(&self, command: &str) -> bool {
        self.command.eq_ignore_ascii_case(command)
    }

    /// The nick of the source, if the line has one.
    #[inline]
    pub fn source_nick(&self) -> Option<&'a str> {
        self.source.map(|s| s.nick)
    }

    /// The raw, still escaped tag section without the leading '@'.
    #[inline]
    pub fn raw_tags(&self) -> Option<&'a str> {
        self.tags
    }

    /// The message tags, values unescaped. A key without a value has an empty value.
    pub fn tags(&self) -> impl Iterator<Item = (&'a str, Cow<'a, str>)> + 'a {
        self.tags
            .unwrap_or("")
            .split(';')
            .filter(|t| !t.is_empty())
            .map(|tag| match tag.split_once('=') {
                Some((key, value)) => (key, unescape_tag_value(value)),
                None => (tag, Cow::Borrowed("")),
            })
    }

    /// The value of tag `key` (the last one if it is repeated), unescaped.
    pub fn tag(&self, key: &str) -> Option<Cow<'a, str>> {
        self.tags()
            .filter(|(k, _)| *k == key)
            .last()
            .map(|(_, v)| v)
    }
}

/// A `PRIVMSG` in the shape servers relay it, `:source PRIVMSG target :text`, read without
/// looking at the text's bytes beyond NUL, CR and LF.
///
/// This is the fast path for the lines OA1 lives on: it skips the general tokeniser, the
/// parameter table and the UTF-8 check of the text, which the OA1 engines do once per
/// reassembled message instead of once per line. [`Privmsg::parse`] answers `None` for every
/// other shape (tags, other commands, extra spaces, a text without `:`), and then
/// [`Message::parse`] is the way to read the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Privmsg<'a> {
    /// Who sent it.
    pub source: Source<'a>,
    /// The channel or nick it was sent to.
    pub target: &'a str,
    /// The text, not checked for UTF-8.
    pub text: &'a [u8],
}

impl<'a> Privmsg<'a> {
    /// Reads `line` (a trailing `\r\n`, `\n` or `\r` is ignored) if it has the relayed shape.
    /// Whenever this answers `Some`, [`Message::parse`] reads the same source, target and text
    /// (or fails only because the text is not UTF-8).
    #[inline]
    pub fn parse(line: &'a [u8]) -> Option<Self> {
        let line = trim_line_end(line);
        if line.first() != Some(&b':') || has_forbidden_byte(line) {
            return None;
        }
        let source_end = find_space(line, 1)?;
        let command: [u8; 8] = line.get(source_end + 1..source_end + 9)?.try_into().ok()?;
        if source_end == 1 || !is_privmsg_and_space(command) {
            return None;
        }
        let target_start = source_end + 9;
        let target_end = find_space(line, target_start)?;
        if target_end == target_start || line.get(target_end + 1) != Some(&b':') {
            return None;
        }
        let source = short_str(&line[1..source_end])?;
        let target = short_str(&line[target_start..target_end])?;
        Some(Privmsg {
            source: Source::parse(source),
            target,
            text: &line[target_end + 2..],
        })
    }
}

/// `bytes` as text when it is UTF-8, for the short fields of a line (nicks, channels, ids).
///
/// Those are nearly always ASCII: checking that inline and skipping the general UTF-8 check took
/// the decode of 128 KiB of OA1 frames from 14% of its time in `str::from_utf8` (three calls a
/// line, benches/oa1_codec.rs) to nothing measurable.
#[inline(always)]
#[allow(unsafe_code)]
pub(crate) fn short_str(bytes: &[u8]) -> Option<&str> {
    // A fold, inlined: `<[u8]>::is_ascii` is an out-of-line call, and with it and this function
    // not inlined these 5- to 30-byte fields took 7% of the decode time.
    if bytes.iter().fold(0, |high, &b| high | b) < 0x80 {
        // SAFETY: ASCII is UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(bytes) })
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

/// Whether `command` is `PRIVMSG ` in any case, with one compare instead of a byte loop (an
/// out-of-line call, 6% of the decode time). Setting bit 5 lowercases a letter and keeps the
/// space; the only other bytes it maps onto `privmsg ` are NUL (onto the space), which a line
/// cannot hold, and none onto the letters.
#[inline]
fn is_privmsg_and_space(command: [u8; 8]) -> bool {
    u64::from_ne_bytes(command) | u64::from_ne_bytes([0x20; 8]) == u64::from_ne_bytes(*b"privmsg ")
}

/// The first index at or after `from` that is not a space.
#[inline]
fn skip_spaces(bytes: &[u8], mut from: usize) -> usize {
    while bytes.get(from) == Some(&b' ') {
        from += 1;
    }
    from
}

/// The index of the first space at or after `from`.
#[inline]
fn find_space(bytes: &[u8], from: usize) -> Option<usize> {
    find_byte(bytes, from, b' ')
}

/// The index of the first `needle` at or after `from`, eight bytes at a time.
///
/// IRC tokens (commands, nicks, channels, sources) are 3 to 60 bytes long, too short for
/// `memchr`'s SIMD set-up to pay off: the benchmark corpus (benches/irc_parse.rs) parsed in
/// 411 µs with this word-at-a-time search against 480 µs with `memchr` for every token (best of
/// 300 runs each).
#[inline]
pub(crate) fn find_byte(bytes: &[u8], from: usize, needle: u8) -> Option<usize> {
    const LOW: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    let pattern = u64::from_ne_bytes([needle; 8]);
    let mut pos = from;
    while let Some(chunk) = bytes.get(pos..pos + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8])) ^ pattern;
        // A zero byte in `word` is a match; the lowest flagged byte is always a true one.
        let found = word.wrapping_sub(LOW) & !word & HIGH;
        if found != 0 {
            return Some(pos + (found.trailing_zeros() / 8) as usize);
        }
        pos += 8;
    }
    bytes
        .get(pos..)?
        .iter()
        .position(|&b| b == needle)
        .map(|offset| pos + offset)
}

/// The longest tag section a server sends, the `@` and the space after the tags included
/// (IRCv3 message-tags: 8191 bytes; a client's own tags are held to 4096, and deskwire sends none).
pub const MAX_TAG_SECTION_BYTES: usize = 8191;

/// Whether a line (its line end not counted) keeps IRC's two limits, each counted on its own as
/// IRCv3 says: a tag section of at most [`MAX_TAG_SECTION_BYTES`], and the rest within
/// `line_limit` with CRLF (512, or the server's `LINELEN`). A line over either is one no
/// conforming server sends.
#[inline]
pub fn within_line_limits(line: &[u8], line_limit: usize) -> bool {
    let line = trim_line_end(line);
    let rest = match line.first() {
        Some(b'@') => {
            let Some(space) = memchr::memchr(b' ', line) else {
                return line.len() <= MAX_TAG_SECTION_BYTES;
            };
            let rest_start = skip_spaces(line, space);
            if rest_start > MAX_TAG_SECTION_BYTES {
                return false;
            }
            &line[rest_start..]
        }
        _ => line,
    };
    rest.len() + 2 <= line_limit
}

fn trim_line_end(mut line: &[u8]) -> &[u8] {
    while let [rest @ .., b'\r' | b'\n'] = line {
        line = rest;
    }
    line
}

/// Unescapes an IRCv3 tag value: `\:` `;`, `\s` space, `\\` `\`, `\r`, `\n`; a backslash before
/// any other character is dropped, and a trailing lone backslash is dropped.
pub fn unescape_tag_value(value: &str) -> Cow<'_, str> {
    if !value.contains('\\') {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some(':') => out.push(';'),
            Some('s') => out.push(' '),
            Some('\\') => out.push('\\'),
            Some('r') => out.push('\r'),
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    Cow::Owned(out)
}

/// Escapes an IRCv3 tag value (the inverse of [`unescape_tag_value`]).
pub fn escape_tag_value(value: &str) -> Cow<'_, str> {
    if !value.contains([';', ' ', '\\', '\r', '\n']) {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            ';' => out.push_str("\\:"),
            ' ' => out.push_str("\\s"),
            '\\' => out.push_str("\\\\"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Formats `COMMAND p1 p2 :last` (no source, no CRLF) into `out`.
///
/// The last parameter is written as a trailing parameter (`:`-prefixed) when it needs to be: when
/// it is empty, contains a space or starts with ':'.
pub fn format_line(out: &mut String, command: &str, params: &[&str]) -> Result<(), FormatError> {
    let numeric = command.len() == 3 && command.bytes().all(|b| b.is_ascii_digit());
    if command.is_empty() || !(numeric || command.bytes().all(|b| b.is_ascii_alphabetic())) {
        return Err(FormatError::InvalidCommand(command.to_owned()));
    }
    if params.len() > MAX_PARAMS {
        return Err(FormatError::TooManyParams);
    }
    for (index, param) in params.iter().enumerate() {
        if has_forbidden_byte(param.as_bytes()) {
            return Err(FormatError::ForbiddenByte { index });
        }
        let last = index + 1 == params.len();
        if !last && (param.is_empty() || param.contains(' ') || param.starts_with(':')) {
            return Err(FormatError::InvalidMiddle { index });
        }
    }
    out.push_str(command);
    for (index, param) in params.iter().enumerate() {
        out.push(' ');
        let last = index + 1 == params.len();
        if last && (param.is_empty() || param.contains(' ') || param.starts_with(':')) {
            out.push(':');
        }
        out.push_str(param);
    }
    Ok(())
}

/// Formats a `PRIVMSG target :text` line (no CRLF).
pub fn privmsg(target: &str, text: &str) -> Result<String, FormatError> {
    let mut line = String::with_capacity(12 + target.len() + text.len());
    // Always use the trailing form for the text, so that a text starting with a letter and
    // without spaces is written the same way as any other.
    if target.is_empty() || target.contains(' ') || target.starts_with(':') {
        return Err(FormatError::InvalidMiddle { index: 0 });
    }
    format_line(&mut line, "PRIVMSG", &[target])?;
    if has_forbidden_byte(text.as_bytes()) {
        return Err(FormatError::ForbiddenByte { index: 1 });
    }
    line.push_str(" :");
    line.push_str(text);
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Message<'_> {
        Message::parse(line.as_bytes()).unwrap()
    }

    #[test]
    fn full_line_with_tags_source_and_trailing() {
        let m = parse(
            "@a=b\\\\and\\nk;c=72\\s45;d=gh\\:764 :nick!~user@host PRIVMSG #desk :OA1 RES x 1 0 hi there\r\n",
        );
        assert_eq!(m.command, "PRIVMSG");
        let s = m.source.unwrap();
        assert_eq!(
            (s.nick, s.user, s.host),
            ("nick", Some("~user"), Some("host"))
        );
        assert_eq!(m.params(), &["#desk", "OA1 RES x 1 0 hi there"]);
        let tags: Vec<_> = m.tags().collect();
        assert_eq!(
            tags,
            vec![
                ("a", Cow::Borrowed("b\\and\nk")),
                ("c", Cow::Borrowed("72 45")),
                ("d", Cow::Borrowed("gh;764"))
            ]
        );
    }

    #[test]
    fn params_and_spacing() {
        let m = parse("foo bar baz asdf");
        assert_eq!(
            (m.command, m.params()),
            ("foo", &["bar", "baz", "asdf"][..])
        );
        let m = parse(":src AWAY");
        assert_eq!(m.params().len(), 0);
        let m = parse("foo bar baz ::asdf");
        assert_eq!(m.params(), &["bar", "baz", ":asdf"]);
        let m = parse("foo bar baz :");
        assert_eq!(m.params(), &["bar", "baz", ""]);
        let m = parse(":coolguy   foo   bar  baz :  asdf quux ");
        assert_eq!(m.params(), &["bar", "baz", "  asdf quux "]);
        assert_eq!(m.source_nick(), Some("coolguy"));
    }

    #[test]
    fn fifteenth_param_takes_the_rest() {
        let m = parse("CMD 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17");
        assert_eq!(m.params().len(), 15);
        assert_eq!(m.param(14), Some("15 16 17"));
    }

    #[test]
    fn duplicate_tags_keep_the_last_and_bare_keys() {
        let m = parse("@a=1;b;a=2;c=\\ :x CMD");
        assert_eq!(m.tag("a").as_deref(), Some("2"));
        assert_eq!(m.tag("b").as_deref(), Some(""));
        assert_eq!(m.tag("c").as_deref(), Some(""));
        assert_eq!(m.tag("z"), None);
    }

    #[test]
    fn errors() {
        assert_eq!(Message::parse(b"").unwrap_err(), ParseError::MissingCommand);
        assert_eq!(
            Message::parse(b":only-source").unwrap_err(),
            ParseError::MissingCommand
        );
        assert_eq!(
            Message::parse(b"@tags-only").unwrap_err(),
            ParseError::TagsWithoutCommand
        );
        assert_eq!(
            Message::parse(b"PRIVMSG #a :\xff").unwrap_err(),
            ParseError::InvalidUtf8
        );
        assert_eq!(
            Message::parse(b"PRIVMSG #a :a\0b").unwrap_err(),
            ParseError::ForbiddenByte
        );
        assert_eq!(
            Message::parse(b"PRIVMSG #a :a\rb").unwrap_err(),
            ParseError::ForbiddenByte
        );
    }

    #[test]
    fn tag_escape_round_trip() {
        for v in ["", "plain", "a;b c\\d\re\nf", "\\s\\:", "ünï ;"] {
            assert_eq!(unescape_tag_value(&escape_tag_value(v)), v);
        }
        assert_eq!(unescape_tag_value("a\\bc\\"), "abc");
    }

    /// What the fast path promises: whenever it reads a line, the full parser reads the same
    /// source, target and text, unless the text alone is not UTF-8.
    fn check_privmsg_agrees(line: &[u8]) -> Result<(), proptest::test_runner::TestCaseError> {
        let Some(fast) = Privmsg::parse(line) else {
            return Ok(());
        };
        match Message::parse(line) {
            Ok(msg) => {
                proptest::prop_assert!(msg.is("PRIVMSG"));
                proptest::prop_assert_eq!(msg.source, Some(fast.source));
                proptest::prop_assert_eq!(msg.params().len(), 2);
                proptest::prop_assert_eq!(msg.params()[0], fast.target);
                proptest::prop_assert_eq!(msg.params()[1].as_bytes(), fast.text);
            }
            Err(error) => {
                proptest::prop_assert_eq!(error, ParseError::InvalidUtf8);
                proptest::prop_assert!(std::str::from_utf8(fast.text).is_err());
            }
        }
        Ok(())
    }

    #[test]
    fn privmsg_fast_path() {
        let fast = Privmsg::parse(b":desk!~d@host PRIVMSG #desk :OA1 RES a 1 0 hi\r\n").unwrap();
        assert_eq!(fast.source.nick, "desk");
        assert_eq!(fast.source.host, Some("host"));
        assert_eq!(
            (fast.target, fast.text),
            ("#desk", &b"OA1 RES a 1 0 hi"[..])
        );
        let fast = Privmsg::parse(b":n PRIVMSG me :\xff\xfe").unwrap();
        assert_eq!(fast.text, b"\xff\xfe");
        assert_eq!(Privmsg::parse(b":n privmsg #c :x").unwrap().text, b"x");
        for other in [
            &b"@t=1 :n!u@h PRIVMSG #c :x"[..],
            b":n!u@h NOTICE #c :x",
            b":n!u@h PRIVMSG #c x",
            b":n!u@h  PRIVMSG #c :x",
            b":n!u@h PRIVMSG  #c :x",
            b":n!u@h PRIVMSG #c",
            b"PRIVMSG #c :x",
            b": PRIVMSG #c :x",
            b":n!u@h PRIVMSG #c :a\0b",
            b":n!u@h PRIVMSG #c :a\rb",
            b":n\xff PRIVMSG #c :x",
        ] {
            assert_eq!(
                Privmsg::parse(other),
                None,
                "{:?}",
                String::from_utf8_lossy(other)
            );
        }
        for line in [
            &b":n!u@h PRIVMSG #c :a\xffb"[..],
            b":desk!~d@host PRIVMSG #desk :",
        ] {
            check_privmsg_agrees(line).unwrap();
        }
    }

    proptest::proptest! {
        #[test]
        fn privmsg_agrees_with_the_full_parser(
            source in "(:[a-z!@~. \\x00\u{e9}]{0,12})?",
            sep in "( |  )",
            command in "(PRIVMSG|privmsg|PRIVMSGX|NOTICE|PRIV)",
            target in "[#a-z \u{e9}]{0,6}",
            colon in ":?",
            text in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12),
            end in "(\r\n|\n|)",
        ) {
            let mut line = format!("{source}{sep}{command} {target} {colon}").into_bytes();
            line.extend_from_slice(&text);
            line.extend_from_slice(end.as_bytes());
            check_privmsg_agrees(&line)?;
        }

        #[test]
        fn find_byte_matches_a_plain_search(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![proptest::prelude::Just(b' '), proptest::prelude::any::<u8>()],
                0..40,
            ),
            from in 0usize..45,
            needle in proptest::prelude::any::<u8>(),
        ) {
            let expected = bytes
                .get(from..)
                .and_then(|rest| rest.iter().position(|&b| b == needle))
                .map(|offset| from + offset);
            proptest::prop_assert_eq!(find_byte(&bytes, from, needle), expected);
        }
    }

    #[test]
    fn format_and_reparse() {
        let mut out = String::new();
        format_line(&mut out, "USER", &["desk", "0", "*", "Desk bot"]).unwrap();
        assert_eq!(out, "USER desk 0 * :Desk bot");
        out.clear();
        format_line(&mut out, "JOIN", &["#desk"]).unwrap();
        assert_eq!(out, "JOIN #desk");
        out.clear();
        format_line(&mut out, "PONG", &[":x"]).unwrap();
        assert_eq!(out, "PONG ::x");
        assert!(format_line(&mut out, "PRIV MSG", &[]).is_err());
        assert_eq!(
            format_line(&mut out, "PRIVMSG", &["a b", "x"]),
            Err(FormatError::InvalidMiddle { index: 0 })
        );
        assert_eq!(
            privmsg("#desk", "a\nb"),
            Err(FormatError::ForbiddenByte { index: 1 })
        );
        let line = privmsg("#desk", "OA1 REQ id 1 0").unwrap();
        assert_eq!(line, "PRIVMSG #desk :OA1 REQ id 1 0");
        assert_eq!(parse(&line).trailing(), Some("OA1 REQ id 1 0"));
    }

    #[test]
    fn line_limits_count_the_tag_section_apart_from_the_rest() {
        let rest = |n: usize| format!(":s NOTICE d :{}", "x".repeat(n - ":s NOTICE d :".len()));
        assert!(within_line_limits(rest(510).as_bytes(), 512));
        assert!(!within_line_limits(rest(511).as_bytes(), 512));
        assert!(within_line_limits(
            format!("{}\r\n", rest(510)).as_bytes(),
            512
        ));
        assert!(within_line_limits(rest(1000).as_bytes(), 1024));
        let tags = |n: usize| format!("@a={}", "t".repeat(n - "@a= ".len()));
        // The tag section counts its `@` and the spaces after it; the rest keeps its own 512.
        assert!(within_line_limits(
            format!("{} {}", tags(8191), rest(510)).as_bytes(),
            512
        ));
        assert!(within_line_limits(
            format!("{}  {}", tags(8190), rest(510)).as_bytes(),
            512
        ));
        assert!(!within_line_limits(
            format!("{} {}", tags(8192), rest(20)).as_bytes(),
            512
        ));
        assert!(!within_line_limits(
            format!("{} {}", tags(100), rest(511)).as_bytes(),
            512
        ));
        assert!(!within_line_limits("@".repeat(9000).as_bytes(), 512));
    }
}
