//! A 500-tool registry: `visible_tools` for one agent plus translation to each provider's
//! request JSON, written to bytes, next to `serde_json::to_vec` of the same finished JSON
//! (the floor: what writing the request costs anyway).
//!
//! `cargo bench -p deskwire --bench tools -- --warm-up-time 1 --measurement-time 3`
//!
//! - `<provider>/translate`: `Registry::visible_tools` + `providers::write_request_tools`
//!   (JSON text straight from the borrowed specs).
//! - `<provider>/translate_map`: `Registry::visible_tools` + `providers::request_tools` (a
//!   `serde_json::Map`, schemas copied) + `serde_json::to_vec` of it.
//! - `<provider>/to_vec`: `serde_json::to_vec` of the finished request fields alone.
//! - `visible_tools`: the gating alone.
//!
//! Measured on the shared 2-core dev machine while other builds ran (load average 3 to 6), so
//! absolute times swing by up to 2x between runs. Medians, translate / to_vec, two runs:
//! - openai_chat: 0.75 / 0.92 ms and 1.31 / 1.12 ms (0.8x to 1.2x); translate_map 6.0 to 9.0 ms
//! - openai_responses: 1.51 / 1.35 ms and 0.90 / 1.01 ms (0.9x to 1.1x); translate_map 6.8 to 8.1 ms
//! - anthropic: 0.91 / 1.19 ms and 0.82 / 1.46 ms (0.6x to 0.8x); translate_map 5.6 to 6.9 ms
//! - gemini: 2.85 / 1.55 ms and 2.08 / 0.88 ms (1.8x to 2.4x: the schema conversion);
//!   translate_map 6.4 to 9.9 ms
//! - visible_tools: 5.0 and 9.3 µs
//!
//! Ratios under 1 are noise around "the same work": translate writes the same bytes from the
//! same `Value`s, without an intermediate tree.
//!
//! The registry: 500 tools, a third visible only while bound to a desk, a third behind a flag;
//! schemas of 2 to 6 properties (strings, integers, enums, nullable unions, arrays, a nested
//! object, a `$ref`), descriptions of ~120 bytes. The agent is bound and has the flag, so all
//! 500 are visible and every translation does the whole list. Responses and Gemini are given
//! the catalog (cache-keeping gating).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use deskwire::tools::providers::{self, Provider, ToolRequest};
use deskwire::tools::{Context, Registry, ToolSpec, Visibility};
use serde_json::{Value, json};

fn schema(i: usize) -> Value {
    let mut props = serde_json::Map::new();
    props.insert(
        "path".into(),
        json!({"type": "string", "description": "A path inside the workspace."}),
    );
    props.insert(
        "limit".into(),
        json!({"type": "integer", "minimum": 1, "description": "At most this many."}),
    );
    if i.is_multiple_of(2) {
        props.insert(
            "mode".into(),
            json!({"type": "string", "enum": ["fast", "safe", "dry-run"]}),
        );
    }
    if i.is_multiple_of(3) {
        props.insert(
            "note".into(),
            json!({"type": ["string", "null"], "description": "Optional note."}),
        );
    }
    if i.is_multiple_of(4) {
        props.insert(
            "tags".into(),
            json!({"type": "array", "items": {"type": "string"}}),
        );
    }
    if i.is_multiple_of(5) {
        props.insert("target".into(), json!({"$ref": "#/$defs/target"}));
    }
    json!({
        "type": "object",
        "properties": props,
        "required": ["path"],
        "$defs": {"target": {"type": "object", "properties": {
            "host": {"type": "string"}, "port": {"type": "integer"}}, "required": ["host"]}}
    })
}

fn registry() -> Registry {
    let mut r = Registry::new();
    for i in 0..500 {
        let spec = ToolSpec::new(
            format!(
                "tool_{i:03}_{}",
                ["files", "net", "build", "vcs", "db"][i % 5]
            ),
            format!(
                "Tool number {i}: does one thing to the workspace and reports what changed. \
                 Prefer small outputs; use limit for long lists."
            ),
            schema(i),
        )
        .unwrap();
        let vis = match i % 3 {
            0 => Visibility::Always,
            1 => Visibility::WhileBound,
            _ => Visibility::WithFlag("ops".into()),
        };
        r.register(spec, vis).unwrap();
    }
    r
}

fn bench(c: &mut Criterion) {
    let registry = registry();
    let mut ctx = Context::bound_to("npc-1");
    ctx.flags.insert("ops".into());
    assert_eq!(registry.visible_tools("npc-1", &ctx).len(), 500);

    c.bench_function("tools/visible_tools", |b| {
        b.iter(|| black_box(registry.visible_tools(black_box("npc-1"), &ctx)))
    });

    for provider in Provider::ALL {
        let keep_list = matches!(provider, Provider::OpenAiResponses | Provider::Gemini);
        let translate = || {
            let request = ToolRequest {
                tools: registry.visible_tools("npc-1", &ctx),
                catalog: keep_list.then(|| registry.specs()),
                ..ToolRequest::default()
            };
            providers::request_tools(provider, &request)
        };
        let finished = Value::Object(translate());
        let bytes = serde_json::to_vec(&finished).unwrap().len();
        println!("{}: {bytes} bytes of request JSON", provider.name());

        let mut group = c.benchmark_group(format!("tools/{}", provider.name()));
        group.bench_function("translate", |b| {
            b.iter(|| {
                let request = ToolRequest {
                    tools: registry.visible_tools("npc-1", &ctx),
                    catalog: keep_list.then(|| registry.specs()),
                    ..ToolRequest::default()
                };
                let mut out = Vec::new();
                providers::write_request_tools(provider, &request, &mut out);
                black_box(out)
            })
        });
        group.bench_function("translate_map", |b| {
            b.iter(|| black_box(serde_json::to_vec(&translate()).unwrap()))
        });
        group.bench_function("to_vec", |b| {
            b.iter(|| black_box(serde_json::to_vec(black_box(&finished)).unwrap()))
        });
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
