//! Runs the provider golden fixtures in `tests/vectors/providers/<provider>.json`.
//!
//! Case kinds:
//! - `request`: `tools` (visible specs), optional `catalog`, `choice` (`"auto"`, `"none"`,
//!   `"required"` or `{"tool": name}`), `parallel_tool_calls`, `strict` → `expect`, the fields
//!   to merge into the request body. The result must also validate against the provider's
//!   request shape (`schemas/<provider>.request.schema.json`).
//! - `response`: a whole `body` (with `seed` for generated ids) → `expect` (the
//!   `{"segments": ...}` JSON of the protocol) or `error` (`NotJson`, `Shape`, `Provider`).
//! - `stream`: `events` (each an event's `data`, JSON) → `expect`. The runner writes them as a
//!   server-sent event stream (`event: <type>` lines for providers that name events, `data:
//!   [DONE]` last for OpenAI Chat) and feeds it whole, one byte at a time, and cut at every
//!   position: each must give `expect`.
//! - `echo`: a previous `response` (protocol JSON) and `results` → `expect.assistant` (the echo
//!   of the model turn) and `expect.results` (the result message or items).
//!
//! `DESKWIRE_BLESS=1` rewrites every `expect` with what the code produces (review the diff).

use deskwire::ids::IdGenerator;
use deskwire::tools::providers::{
    self, Limits, ParseError, Provider, ProviderResponse, StreamParser, ToolChoice, ToolRequest,
    anthropic, gemini, openai_chat, openai_responses,
};
use deskwire::tools::{ToolResult, ToolSpec};
use serde_json::{Value, json};

fn path(provider: Provider) -> String {
    format!(
        "{}/../tests/vectors/providers/{}.json",
        env!("CARGO_MANIFEST_DIR"),
        provider.name()
    )
}

fn load(file: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(file).expect(file)).expect("JSON")
}

fn specs(v: &Value) -> Vec<ToolSpec> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| serde_json::from_value::<ToolSpec>(s.clone()).unwrap())
                .collect()
        })
        .unwrap_or_default()
}

fn choice(v: &Value) -> ToolChoice {
    match v {
        Value::Null => ToolChoice::Auto,
        Value::String(s) if s == "auto" => ToolChoice::Auto,
        Value::String(s) if s == "none" => ToolChoice::None,
        Value::String(s) if s == "required" => ToolChoice::Required,
        Value::Object(o) => ToolChoice::Tool(o["tool"].as_str().unwrap().to_owned()),
        other => panic!("bad choice {other}"),
    }
}

pub fn request_json(provider: Provider, case: &Value) -> Value {
    let tools = specs(&case["tools"]);
    let catalog = case.get("catalog").map(specs);
    let request = ToolRequest {
        tools: tools.iter().collect(),
        catalog: catalog.as_ref().map(|c| c.iter().collect()),
        choice: choice(&case["choice"]),
        parallel_tool_calls: case["parallel_tool_calls"].as_bool(),
        strict: case["strict"].as_bool().unwrap_or(false),
    };
    let map = Value::Object(providers::request_tools(provider, &request));
    // The text writer is the same translation.
    let mut text = Vec::new();
    providers::write_request_tools(provider, &request, &mut text);
    assert_eq!(serde_json::from_slice::<Value>(&text).unwrap(), map);
    map
}

fn error_name(e: &ParseError) -> &'static str {
    match e {
        ParseError::NotJson(_) => "NotJson",
        ParseError::Shape(_) => "Shape",
        ParseError::Provider(_) => "Provider",
        ParseError::TooLarge(_) => "TooLarge",
        ParseError::Incomplete(_) => "Incomplete",
        _ => "other",
    }
}

fn outcome(r: Result<ProviderResponse, ParseError>) -> Value {
    match r {
        Ok(r) => json!({ "expect": r.to_value() }),
        Err(e) => json!({ "error": error_name(&e) }),
    }
}

/// The SSE text of a stream case.
pub fn sse_text(provider: Provider, events: &[Value]) -> String {
    let mut text = String::new();
    for e in events {
        if matches!(provider, Provider::Anthropic | Provider::OpenAiResponses)
            && let Some(t) = e["type"].as_str()
        {
            text.push_str(&format!("event: {t}\n"));
        }
        text.push_str(&format!("data: {e}\n\n"));
    }
    if provider == Provider::OpenAiChat {
        text.push_str("data: [DONE]\n\n");
    }
    text
}

fn stream(provider: Provider, seed: u64, pieces: &[&[u8]]) -> Result<ProviderResponse, ParseError> {
    let mut p = StreamParser::new(provider, Limits::default(), seed);
    for piece in pieces {
        p.feed(piece)?;
    }
    p.finish()
}

fn echo(provider: Provider, case: &Value) -> Value {
    let previous: ProviderResponse = serde_json::from_value(case["response"].clone()).unwrap();
    let results: Vec<ToolResult> = serde_json::from_value(case["results"].clone()).unwrap();
    match provider {
        Provider::OpenAiChat => json!({
            "assistant": openai_chat::assistant_message(&previous),
            "results": results.iter().map(openai_chat::tool_message).collect::<Vec<_>>(),
        }),
        Provider::OpenAiResponses => json!({
            "assistant": openai_responses::input_items(&previous),
            "results": results.iter().map(openai_responses::function_call_output).collect::<Vec<_>>(),
        }),
        Provider::Anthropic => json!({
            "assistant": anthropic::assistant_message(&previous),
            "results": anthropic::tool_results_message(&results),
        }),
        Provider::Gemini => json!({
            "assistant": gemini::model_content(&previous),
            "results": match gemini::function_responses(&previous, &results) {
                Ok(v) => v,
                Err(e) => json!({ "error": e.to_string() }),
            },
        }),
    }
}

/// What the code makes of a case: `{"expect": ...}` or `{"error": ...}`.
fn run_case(provider: Provider, case: &Value) -> Value {
    let seed = case["seed"].as_u64().unwrap_or(0);
    match case["kind"].as_str().unwrap() {
        "request" => json!({ "expect": request_json(provider, case) }),
        "response" => {
            let body = match &case["body"] {
                Value::String(raw) => raw.clone().into_bytes(),
                v => v.to_string().into_bytes(),
            };
            let mut ids = IdGenerator::new(seed);
            outcome(providers::parse_response(provider, &body, &mut ids))
        }
        "stream" => {
            let events = case["events"].as_array().unwrap();
            let text = sse_text(provider, events);
            let bytes = text.as_bytes();
            let whole = stream(provider, seed, &[bytes]);
            let by_byte: Vec<&[u8]> = bytes.chunks(1).collect();
            assert_eq!(
                stream(provider, seed, &by_byte),
                whole,
                "{}: one byte at a time",
                case["name"]
            );
            for cut in 0..=bytes.len() {
                assert_eq!(
                    stream(provider, seed, &[&bytes[..cut], &bytes[cut..]]),
                    whole,
                    "{}: cut at {cut}",
                    case["name"]
                );
            }
            outcome(whole)
        }
        "echo" => json!({ "expect": echo(provider, case) }),
        other => panic!("unknown kind {other}"),
    }
}

#[test]
fn provider_fixtures() {
    let bless = std::env::var("DESKWIRE_BLESS").is_ok_and(|v| v == "1");
    let mut failures = Vec::new();
    let mut total = 0;
    for provider in Provider::ALL {
        let file = path(provider);
        let mut doc = load(&file);
        assert_eq!(doc["provider"], provider.name());
        let shape = load(&format!(
            "{}/../tests/vectors/providers/schemas/{}.request.schema.json",
            env!("CARGO_MANIFEST_DIR"),
            provider.name()
        ));
        let validator = jsonschema::validator_for(&shape).expect("shape schema compiles");
        let cases = doc["cases"].as_array_mut().unwrap();
        assert!(
            cases.len() >= 8,
            "{}: {} cases",
            provider.name(),
            cases.len()
        );
        for case in cases.iter_mut() {
            total += 1;
            let name = format!("{}/{}", provider.name(), case["name"].as_str().unwrap());
            let got = run_case(provider, case);
            if case["kind"] == "request" {
                let errors: Vec<String> = validator
                    .iter_errors(&got["expect"])
                    .map(|e| format!("{} at {}", e, e.instance_path()))
                    .collect();
                if !errors.is_empty() {
                    failures.push(format!("{name}: request shape: {errors:?}"));
                }
            }
            if bless {
                let obj = case.as_object_mut().unwrap();
                obj.remove("expect");
                obj.remove("error");
                for (k, v) in got.as_object().unwrap() {
                    obj.insert(k.clone(), v.clone());
                }
                continue;
            }
            for key in ["expect", "error"] {
                if case.get(key) != got.get(key) {
                    failures.push(format!(
                        "{name}: {key}\n  want {}\n  got  {}",
                        case.get(key).unwrap_or(&Value::Null),
                        got.get(key).unwrap_or(&Value::Null)
                    ));
                }
            }
        }
        if bless {
            std::fs::write(&file, serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(total >= 40, "{total} cases");
}

/// Argument fragments cut anywhere assemble to the same call (the deltas themselves, not
/// only the transport, split at every position).
#[test]
fn argument_fragments_in_any_split() {
    let args = r#"{"command":"printf 'héllo\n' | wc -c","timeout_sec":5}"#;
    let want = json!({"command": "printf 'héllo\n' | wc -c", "timeout_sec": 5});
    let cuts: Vec<usize> = (0..=args.len())
        .filter(|&i| args.is_char_boundary(i))
        .collect();
    for &a in &cuts {
        for &b in cuts.iter().filter(|&&b| b >= a) {
            let frags = [&args[..a], &args[a..b], &args[b..]];
            for provider in [
                Provider::OpenAiChat,
                Provider::OpenAiResponses,
                Provider::Anthropic,
            ] {
                let mut p = StreamParser::new(provider, Limits::default(), 0);
                let events: Vec<Value> = match provider {
                    Provider::OpenAiChat => std::iter::once(json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"RemoteBash","arguments":""}}]}}]}))
                        .chain(frags.iter().map(|f| json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":f}}]}}]})))
                        .chain([json!({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})])
                        .collect(),
                    Provider::OpenAiResponses => std::iter::once(json!({"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"call_1","name":"RemoteBash","arguments":""}}))
                        .chain(frags.iter().map(|f| json!({"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":f})))
                        .chain([json!({"type":"response.completed","response":{"status":"completed"}})])
                        .collect(),
                    _ => std::iter::once(json!({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"call_1","name":"RemoteBash","input":{}}}))
                        .chain(frags.iter().map(|f| json!({"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":f}})))
                        .chain([json!({"type":"message_delta","delta":{"stop_reason":"tool_use"}})])
                        .collect(),
                };
                for e in &events {
                    p.push_data(e.to_string().as_bytes()).unwrap();
                }
                let r = p.finish().unwrap();
                let call = r.tool_calls().next().unwrap();
                assert_eq!((call.id.as_str(), &call.args), ("call_1", &want));
            }
        }
    }
}
