//! Provider responses and streams on arbitrary bytes.
//!
//! - `parse_response` of every provider never panics; a parsed response echoes back into that
//!   provider's next-turn shapes without panicking, and every tool call's arguments are an
//!   object.
//! - `StreamParser` of every provider, with small limits, never panics and gives the same
//!   result (or the same error) whether the body comes whole or cut at an arbitrary point.
#![no_main]

use deskwire::ids::IdGenerator;
use deskwire::tools::ToolResult;
use deskwire::tools::providers::{
    self, Limits, Provider, ProviderResponse, StreamParser, anthropic, gemini, openai_chat,
    openai_responses,
};
use libfuzzer_sys::fuzz_target;

fn stream(provider: Provider, pieces: &[&[u8]]) -> Result<ProviderResponse, providers::ParseError> {
    let limits = Limits {
        max_bytes: 4096,
        max_items: 8,
    };
    let mut p = StreamParser::new(provider, limits, 1);
    for piece in pieces {
        if let Err(e) = p.feed(piece) {
            // The error sticks: finishing gives it again.
            assert_eq!(p.finish().unwrap_err(), e);
            return Err(e);
        }
    }
    p.finish()
}

fuzz_target!(|data: &[u8]| {
    let cut = data.first().map_or(0, |&b| b as usize).min(data.len());
    for provider in Provider::ALL {
        if let Ok(r) = providers::parse_response(provider, data, &mut IdGenerator::new(3)) {
            assert!(r.tool_calls().all(|c| c.args.is_object()));
            let results: Vec<ToolResult> = r
                .tool_calls()
                .map(|c| ToolResult::error(c.id.clone(), "x"))
                .collect();
            match provider {
                Provider::OpenAiChat => {
                    openai_chat::assistant_message(&r);
                }
                Provider::OpenAiResponses => {
                    openai_responses::input_items(&r);
                }
                Provider::Anthropic => {
                    anthropic::assistant_message(&r);
                    anthropic::tool_results_message(&results);
                }
                Provider::Gemini => {
                    gemini::model_content(&r);
                    assert!(gemini::function_responses(&r, &results).is_ok());
                }
            }
        }
        let whole = stream(provider, &[data]);
        let split = stream(provider, &[&data[..cut], &data[cut..]]);
        assert_eq!(whole, split, "{}", provider.name());
    }
});
