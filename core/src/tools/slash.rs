//! Slash commands (`docs/tools.md`, "Slash commands"): the user types `/read notes.txt` and the
//! same tool the model could call runs at once, user-authorised, without the model.
//!
//! Grammar: `/<tool> [key=value ...] [positional ...]` or `/<tool> {json object}`.
//! - Leading `key=value` words set the properties they name (quotes as in a shell:
//!   `cwd='/my dir'`).
//! - Positional words fill the schema's `required` properties in order; the last required
//!   string property takes the rest of the line exactly as typed, so `/bash ls -la | head`
//!   runs `ls -la | head` and `/write a.txt hello world` writes `hello world`.
//! - Values are converted to the property's type (`integer`, `number`, `boolean`; strings as
//!   they are).
//!
//! The result is a [`ToolCall`]; check it with [`super::authorize`] and [`Origin::User`]
//! (no approval prompt, but hidden tools and denials still hold).
//!
//! [`Origin::User`]: super::Origin::User

use serde_json::{Map, Value};

use super::registry::Registry;
use super::spec::{ToolCall, ToolSpec};
use crate::ids::IdGenerator;

/// Why a line is not a usable slash command. JSON: externally tagged, snake_case
/// (`"not_a_command"`, `{"unknown_command": {"name", "available"}}`, ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SlashError {
    /// The line does not start with `/` (send it to the model instead).
    #[error("not a slash command")]
    NotACommand,
    /// No tool has that name.
    #[error("unknown command /{name}; commands: {available}")]
    UnknownCommand {
        /// What was typed.
        name: String,
        /// The tools there are, `/a, /b`.
        available: String,
    },
    /// A quote was not closed.
    #[error("unterminated quote")]
    UnterminatedQuote,
    /// A required argument is missing.
    #[error("/{tool} needs {argument}")]
    MissingArgument {
        /// The tool.
        tool: String,
        /// The argument.
        argument: String,
    },
    /// More positional words than required arguments.
    #[error("/{tool} takes {expected} positional argument(s); use key=value for the others")]
    TooManyArguments {
        /// The tool.
        tool: String,
        /// How many it takes.
        expected: usize,
    },
    /// A value does not fit its property's type.
    #[error("{argument} must be {expected}, not {value:?}")]
    BadValue {
        /// The argument.
        argument: String,
        /// The JSON type.
        expected: String,
        /// What was typed.
        value: String,
    },
    /// `{...}` arguments are not a JSON object.
    #[error("arguments are not a JSON object: {0}")]
    BadJson(String),
}

/// Splits off one shell-like word from the start of `s`: returns it unquoted and the rest.
fn next_word(s: &str) -> Result<Option<(String, &str)>, SlashError> {
    let s = s.trim_start();
    if s.is_empty() {
        return Ok(None);
    }
    let mut word = String::new();
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            c if c.is_whitespace() => return Ok(Some((word, &s[i..]))),
            '\'' => loop {
                match chars.next() {
                    Some((_, '\'')) => break,
                    Some((_, c)) => word.push(c),
                    None => return Err(SlashError::UnterminatedQuote),
                }
            },
            '"' => loop {
                match chars.next() {
                    Some((_, '"')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, c)) => word.push(c),
                        None => return Err(SlashError::UnterminatedQuote),
                    },
                    Some((_, c)) => word.push(c),
                    None => return Err(SlashError::UnterminatedQuote),
                }
            },
            '\\' => {
                if let Some((_, c)) = chars.next() {
                    word.push(c);
                }
            }
            c => word.push(c),
        }
    }
    Ok(Some((word, "")))
}

fn property_type<'a>(spec: &'a ToolSpec, name: &str) -> Option<&'a str> {
    spec.properties()?.get(name)?.get("type")?.as_str()
}

fn convert(spec: &ToolSpec, name: &str, raw: String) -> Result<Value, SlashError> {
    let bad = |expected: &str, raw: String| SlashError::BadValue {
        argument: name.to_owned(),
        expected: expected.to_owned(),
        value: raw,
    };
    match property_type(spec, name) {
        Some("integer") => raw
            .parse::<i64>()
            .map(Value::from)
            .map_err(|_| bad("an integer", raw)),
        Some("number") => match raw
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
        {
            Some(n) => Ok(Value::Number(n)),
            None => Err(bad("a number", raw)),
        },
        Some("boolean") => match raw.as_str() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(bad("true or false", raw)),
        },
        Some("array") | Some("object") => serde_json::from_str(&raw).map_err(|_| bad("JSON", raw)),
        _ => Ok(Value::String(raw)),
    }
}

/// Parses `line` into a call of a registered tool; `ids` makes the call id (`slash_…`).
pub fn parse(
    line: &str,
    registry: &Registry,
    ids: &mut IdGenerator,
) -> Result<ToolCall, SlashError> {
    let body = line
        .trim_start()
        .strip_prefix('/')
        .ok_or(SlashError::NotACommand)?;
    let name_end = body.find(char::is_whitespace).unwrap_or(body.len());
    let (name, mut rest) = body.split_at(name_end);
    let entry = registry
        .get(name)
        .or_else(|| {
            let mut ci = registry
                .entries()
                .iter()
                .filter(|e| e.spec.name.eq_ignore_ascii_case(name));
            match (ci.next(), ci.next()) {
                (Some(one), None) => Some(one),
                _ => None,
            }
        })
        .ok_or_else(|| SlashError::UnknownCommand {
            name: name.to_owned(),
            available: registry
                .entries()
                .iter()
                .map(|e| format!("/{}", e.spec.name))
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let spec = &entry.spec;
    let id = format!("slash_{}", ids.next_id());

    let trimmed = rest.trim();
    if trimmed.starts_with('{') {
        return match serde_json::from_str::<Value>(trimmed) {
            Ok(args @ Value::Object(_)) => Ok(ToolCall::new(id, spec.name.clone(), args)),
            Ok(_) => Err(SlashError::BadJson("not an object".into())),
            Err(e) => Err(SlashError::BadJson(e.to_string())),
        };
    }

    let mut args = Map::new();
    // Leading key=value words.
    while let Some((word, after)) = next_word(rest)? {
        let Some((key, value)) = word.split_once('=') else {
            break;
        };
        if spec.properties().is_none_or(|p| !p.contains_key(key)) {
            break;
        }
        args.insert(key.to_owned(), convert(spec, key, value.to_owned())?);
        rest = after;
    }
    // Positional words for the required properties not set yet.
    let wanted: Vec<&str> = spec.required().filter(|r| !args.contains_key(*r)).collect();
    for (i, key) in wanted.iter().enumerate() {
        let last = i + 1 == wanted.len();
        if last && matches!(property_type(spec, key), Some("string") | None) {
            let raw = rest.trim();
            if raw.is_empty() {
                break;
            }
            // One quoted word stays a word (`/read "my notes.txt"`); anything longer is taken
            // exactly as typed.
            let value = match next_word(raw)? {
                Some((w, tail)) if tail.trim().is_empty() => w,
                _ => raw.to_owned(),
            };
            args.insert((*key).to_owned(), Value::String(value));
            rest = "";
            break;
        }
        let Some((word, after)) = next_word(rest)? else {
            break;
        };
        args.insert((*key).to_owned(), convert(spec, key, word)?);
        rest = after;
    }
    if !rest.trim().is_empty() {
        return Err(SlashError::TooManyArguments {
            tool: spec.name.clone(),
            expected: wanted.len(),
        });
    }
    if let Some(missing) = spec.required().find(|r| !args.contains_key(*r)) {
        return Err(SlashError::MissingArgument {
            tool: spec.name.clone(),
            argument: missing.to_owned(),
        });
    }
    Ok(ToolCall::new(id, spec.name.clone(), Value::Object(args)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::gating::{Authorization, Context, Origin, authorize};
    use crate::tools::policy::{Policy, Tier};
    use serde_json::json;

    fn parse_ok(line: &str) -> ToolCall {
        parse(line, &Registry::with_builtins(), &mut IdGenerator::new(1)).unwrap()
    }

    fn parse_err(line: &str) -> SlashError {
        parse(line, &Registry::with_builtins(), &mut IdGenerator::new(1)).unwrap_err()
    }

    #[test]
    fn positional_and_rest_of_line() {
        let c = parse_ok("/read notes.txt");
        assert_eq!(
            (c.name.as_str(), &c.args),
            ("read", &json!({"path": "notes.txt"}))
        );
        assert!(c.id.starts_with("slash_"));
        assert_eq!(
            parse_ok("/read \"my notes.txt\"").args,
            json!({"path": "my notes.txt"})
        );
        assert_eq!(
            parse_ok("/bash ls -la 'a b' | head -n 3").args,
            json!({"command": "ls -la 'a b' | head -n 3"})
        );
        assert_eq!(
            parse_ok("/write a.txt hello   world").args,
            json!({"path": "a.txt", "content": "hello   world"})
        );
        assert_eq!(
            parse_ok("/bash cwd='/srv/my app' timeout_ms=500 make test").args,
            json!({"command": "make test", "cwd": "/srv/my app", "timeout_ms": 500})
        );
        assert_eq!(
            parse_ok("/list path=/srv recursive=true").args,
            json!({"path": "/srv", "recursive": true})
        );
        assert_eq!(
            parse_ok(r#"/RemoteBash {"command": "uptime", "timeout_sec": 5}"#).args,
            json!({"command": "uptime", "timeout_sec": 5})
        );
        assert_eq!(parse_ok("/remotebash uptime").name, "RemoteBash");
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(parse_err("read notes"), SlashError::NotACommand);
        assert!(
            matches!(parse_err("/cat x"), SlashError::UnknownCommand { available, .. } if available.starts_with("/RemoteBash, /bash"))
        );
        assert_eq!(
            parse_err("/read"),
            SlashError::MissingArgument {
                tool: "read".into(),
                argument: "path".into()
            }
        );
        assert_eq!(parse_err("/write 'a.txt"), SlashError::UnterminatedQuote);
        assert!(matches!(
            parse_err("/bash timeout_ms=soon ls"),
            SlashError::BadValue { .. }
        ));
        assert_eq!(parse_ok("/stat a b").args, json!({"path": "a b"}));
        let mut r = Registry::new();
        let sleep = json!({"type":"object","properties":{"seconds":{"type":"integer"}},"required":["seconds"]});
        r.register(
            ToolSpec::new("sleep", "", sleep).unwrap(),
            crate::tools::Visibility::Always,
        )
        .unwrap();
        let mut ids = IdGenerator::new(1);
        assert_eq!(
            parse("/sleep 5", &r, &mut ids).unwrap().args,
            json!({"seconds": 5})
        );
        assert_eq!(
            parse("/sleep 5 6", &r, &mut ids),
            Err(SlashError::TooManyArguments {
                tool: "sleep".into(),
                expected: 1
            })
        );
        assert!(matches!(
            parse_err("/read {\"path\": 1"),
            SlashError::BadJson(_)
        ));
    }

    #[test]
    fn user_authorised_but_still_gated() {
        let registry = Registry::with_builtins();
        let policy = Policy::ask_all(Tier::High);
        let call = parse("/read notes.txt", &registry, &mut IdGenerator::new(1)).unwrap();
        let ctx = Context::default();
        assert_eq!(
            authorize(&registry, &policy, &call, "npc", &ctx, Origin::User),
            Authorization::Allowed
        );
        assert_eq!(
            authorize(&registry, &policy, &call, "npc", &ctx, Origin::Model),
            Authorization::NeedsApproval { tier: Tier::High }
        );
        let rb = parse("/RemoteBash uptime", &registry, &mut IdGenerator::new(1)).unwrap();
        assert!(matches!(
            authorize(&registry, &policy, &rb, "npc", &ctx, Origin::User),
            Authorization::Denied { .. }
        ));
    }
}
