//! Round trips: a model turn echoed in a provider's format (what the next request carries)
//! reads back, through that provider's response parser, as the same segments. Chat
//! Completions has one text and a list of calls per message, so there only the text and the
//! calls in order must survive.

use deskwire::ids::IdGenerator;
use deskwire::tools::ToolCall;
use deskwire::tools::providers::{
    self, Provider, ProviderResponse, Segment, anthropic, gemini, openai_chat, openai_responses,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn args() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(
        "[a-z_]{1,8}",
        prop_oneof![
            ".{0,12}".prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
            prop::collection::vec("[a-z]{0,4}", 0..3).prop_map(|v| json!(v)),
        ],
        0..4,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect()))
}

#[derive(Debug, Clone)]
enum Piece {
    Think(String),
    Text(String),
    Call(String, Value, Option<String>),
}

fn pieces() -> impl Strategy<Value = Vec<Piece>> {
    prop::collection::vec(
        prop_oneof![
            ".{0,20}".prop_map(Piece::Think),
            ".{1,20}".prop_map(Piece::Text),
            (
                "[a-zA-Z_][a-zA-Z0-9_-]{0,10}",
                args(),
                prop::option::of("[a-zA-Z0-9+/]{4,12}")
            )
                .prop_map(|(n, a, s)| Piece::Call(n, a, s)),
        ],
        0..6,
    )
}

/// Segments as a provider gives them back: adjacent texts joined, ids `c0`, `c1`, ...
fn response(pieces: &[Piece], provider: Provider) -> ProviderResponse {
    let mut r = ProviderResponse::default();
    for (i, p) in pieces.iter().enumerate() {
        match p {
            // Reasoning travels only where the provider has it.
            Piece::Think(t) => match provider {
                Provider::Anthropic => r.segments.push(Segment::Reasoning {
                    raw: json!({"type": "thinking", "thinking": t, "signature": format!("sig{i}")}),
                }),
                Provider::OpenAiResponses => r.segments.push(Segment::Reasoning {
                    raw: json!({"type": "reasoning", "id": format!("rs_{i}"), "summary": [{"type": "summary_text", "text": t}]}),
                }),
                _ => {}
            },
            Piece::Text(t) => {
                if let Some(Segment::Text { text }) = r.segments.last_mut() {
                    text.push_str(t);
                } else {
                    r.segments.push(Segment::Text { text: t.clone() });
                }
            }
            Piece::Call(name, args, sig) => {
                let mut call = ToolCall::new(format!("c{i}"), name.clone(), args.clone());
                match provider {
                    Provider::OpenAiResponses => call.item_id = Some(format!("fc_{i}")),
                    Provider::Gemini => call.thought_signature = sig.clone(),
                    _ => {}
                }
                r.segments.push(Segment::ToolCall { tool_call: call });
            }
        }
    }
    r
}

fn read_back(provider: Provider, r: &ProviderResponse) -> ProviderResponse {
    let body = match provider {
        Provider::OpenAiChat => {
            json!({"choices": [{"index": 0, "message": openai_chat::assistant_message(r)}]})
        }
        Provider::OpenAiResponses => json!({"output": openai_responses::input_items(r)}),
        Provider::Anthropic => json!({"content": anthropic::assistant_message(r)["content"]}),
        Provider::Gemini => json!({"candidates": [{"content": gemini::model_content(r)}]}),
    };
    providers::parse_response(
        provider,
        body.to_string().as_bytes(),
        &mut IdGenerator::new(0),
    )
    .unwrap()
}

proptest! {
    #[test]
    fn echo_reads_back(pieces in pieces()) {
        for provider in Provider::ALL {
            let r = response(&pieces, provider);
            let back = read_back(provider, &r);
            if provider == Provider::OpenAiChat {
                prop_assert_eq!(back.text(), r.text());
                let calls: Vec<&ToolCall> = r.tool_calls().collect();
                prop_assert_eq!(back.tool_calls().collect::<Vec<_>>(), calls);
            } else {
                prop_assert_eq!(&back.segments, &r.segments, "{}", provider.name());
            }
        }
    }
}
