//! Configurations a desk or remote cannot work with are refused when the engine is built, with
//! a message naming the field (trial findings 1 and 5): zero timeouts, and the channel or nick
//! given twice with different values.

use deskwire::oa1::{ConfigError, ConnectionConfig, Desk, MultiDesk, Remote};

fn desk(json: &str) -> Result<Desk, String> {
    let config = ConnectionConfig::from_json(json).map_err(|e| e.to_string())?;
    Desk::new(config, 0, 1).map_err(|e| e.to_string())
}

#[test]
fn zero_timeouts_are_refused_naming_the_field() {
    for field in [
        "request_timeout_ms",
        "ready_timeout_ms",
        "partial_timeout_ms",
    ] {
        let json = format!(
            r##"{{"nick":"desk","channel":"#desk","oa1":{{"allowed_sender":"rexd","{field}":0}}}}"##
        );
        let err = desk(&json).unwrap_err();
        assert!(
            err.starts_with(&format!("oa1.{field} is 0")) && err.contains("at least 1"),
            "{field}: {err}"
        );
        let ok = json.replace(":0}", ":1}");
        assert!(desk(&ok).is_ok(), "{ok}");
    }
    let mut config = ConnectionConfig::new("desk", "#desk").with_peer("rexd");
    config.oa1.request_timeout_ms = 0;
    assert!(matches!(
        Desk::new(config, 0, 1),
        Err(ConfigError::ZeroTimeout {
            field: "oa1.request_timeout_ms",
            ..
        })
    ));
    // A remote makes no requests: only the stream gap timeout matters there.
    let mut config = ConnectionConfig::new("rexd", "#desk");
    config.oa1.request_timeout_ms = 0;
    config.oa1.ready_timeout_ms = 0;
    assert!(Remote::new(config.clone(), 0).is_ok());
    config.oa1.partial_timeout_ms = 0;
    assert!(matches!(
        Remote::new(config, 0),
        Err(ConfigError::ZeroTimeout {
            field: "oa1.partial_timeout_ms",
            ..
        })
    ));
}

#[test]
fn a_channel_or_nick_given_twice_must_agree() {
    for (json, names) in [
        (
            r##"{"nick":"desk","channel":"#desk","oa1":{"allowed_sender":"rexd","channel":"#other"}}"##,
            ["channel is \"#desk\"", "oa1.channel is \"#other\""],
        ),
        (
            r##"{"nick":"desk","channel":"#desk","oa1":{"allowed_sender":"rexd","nick":"other"}}"##,
            ["nick is \"desk\"", "oa1.nick is \"other\""],
        ),
        (
            r##"{"nick":"desk","channel":"#desk","session":{"nick":"other"},"oa1":{"allowed_sender":"rexd"}}"##,
            ["nick is \"desk\"", "session.nick is \"other\""],
        ),
        (
            r##"{"nick":"desk","channel":"#desk","session":{"channels":["#x"]},"oa1":{"allowed_sender":"rexd"}}"##,
            ["channel is \"#desk\"", "session.channels is [\"#x\"]"],
        ),
        (
            r##"{"nick":"desk","channel":"#desk","session":{"channels":["#desk","#x"]},"oa1":{"allowed_sender":"rexd"}}"##,
            ["channel is \"#desk\"", "session.channels"],
        ),
    ] {
        let err = desk(json).unwrap_err();
        for name in names {
            assert!(err.contains(name), "{json}: {err}");
        }
    }
    // Repeating the same value is fine.
    desk(r##"{"nick":"desk","channel":"#desk","session":{"nick":"desk","channels":["#desk"]},"oa1":{"allowed_sender":"rexd","channel":"#desk","nick":"desk"}}"##).unwrap();
    // A multi desk starts with no channel: session.channels may only be empty.
    let multi = |json: &str| {
        ConnectionConfig::from_json(json)
            .map_err(|e| e.to_string())
            .and_then(|c| {
                MultiDesk::new(c, 0, 1)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
    };
    multi(r#"{"nick":"desk","channel":"","session":{"channels":[]}}"#).unwrap();
    let err = multi(r##"{"nick":"desk","channel":"","session":{"channels":["#x"]}}"##).unwrap_err();
    assert!(err.contains("session.channels"), "{err}");
    // A Rust config whose oa1.channel was changed after new(): session.channels still names
    // the first channel, which the desk would also join.
    let mut config = ConnectionConfig::new("desk", "#desk").with_peer("rexd");
    config.oa1.channel = "#other".into();
    let err = Desk::new(config, 0, 1).unwrap_err();
    assert!(
        matches!(
            &err,
            ConfigError::Conflict {
                field: "oa1.channel",
                other: "session.channels",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("\"#other\"") && err.to_string().contains("\"#desk\""));
}
