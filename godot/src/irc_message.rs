//! `IrcMessage`: one IRC line split into its parts by the core's parser.
//!
//! `irc::Message` borrows from the line and has no serde shape, so its fields are written
//! here one by one, named as the Python binding names them.

use deskwire::irc::Message;
use godot::prelude::*;
use serde_json::{Map, Value, json};

use crate::variant;

/// IRC lines split into their parts, by the same parser the desk engine uses.
///
/// For projects that run their own IRC client and want to look at what it receives.
///
/// ```gdscript
/// var msg := IrcMessage.parse(":deskbot!~bot@10.0.0.2 PRIVMSG #desk :OA1 RES k3p2 1 0 done")
/// if msg.command == "PRIVMSG":
///     print(msg.nick, " said ", msg.params[1], " in ", msg.params[0])
/// ```
#[derive(GodotClass)]
#[class(no_init, base = Object)]
pub struct IrcMessage {
    base: Base<Object>,
}

#[godot_api]
impl IrcMessage {
    /// [param line] (with or without its line ending) as `{"tags": {key: value}, "source",
    /// "nick", "user", "host", "command", "params": [...]}`: tag values unescaped (the last of
    /// a repeated key kept), `source` as written without its `:` and split into
    /// `nick!user@host` (each `null` when absent), the trailing parameter without its
    /// `:`. An empty Dictionary (and an error) when it is not an IRC line: empty, a CR, LF
    /// or NUL inside, or not UTF-8.
    #[func]
    fn parse(line: GString) -> VarDictionary {
        match message_json(line.to_string().as_bytes()) {
            Ok(msg) => variant::dictionary_of(&msg),
            Err(e) => {
                godot_error!("IrcMessage.parse: {e}");
                VarDictionary::new()
            }
        }
    }
}

/// One IRC line as `{"tags": {key: value}, "source", "nick", "user", "host", "command",
/// "params": [...]}` (tag values unescaped, the last of a repeated key kept; `source` and its
/// parts `null` when absent), or why it is not one.
pub fn message_json(line: &[u8]) -> Result<Value, String> {
    let msg = Message::parse(line).map_err(|e| e.to_string())?;
    let mut tags = Map::new();
    for (key, value) in msg.tags() {
        tags.insert(key.to_owned(), Value::String(value.into_owned()));
    }
    let source = msg.source;
    Ok(json!({
        "tags": tags,
        "source": source.map(|s| s.raw),
        "nick": source.map(|s| s.nick),
        "user": source.and_then(|s| s.user),
        "host": source.and_then(|s| s.host),
        "command": msg.command,
        "params": msg.params(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn irc_lines_as_their_parts() {
        let m =
            message_json(b"@a=b\\sc;k;a=d :nick!user@host PRIVMSG #desk :hello there\r\n").unwrap();
        assert_eq!(
            m,
            json!({"tags": {"a": "d", "k": ""}, "source": "nick!user@host", "nick": "nick",
                   "user": "user", "host": "host", "command": "PRIVMSG",
                   "params": ["#desk", "hello there"]})
        );
        let bare = message_json(b"PING").unwrap();
        assert_eq!(
            bare,
            json!({"tags": {}, "source": null, "nick": null, "user": null, "host": null,
                   "command": "PING", "params": []})
        );
        assert!(message_json(b"a\rb").is_err());
        assert!(message_json(b"PRIVMSG #d :\xff").is_err());
        assert!(message_json(b"").is_err());
    }
}
