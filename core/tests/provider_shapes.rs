//! Property: any registry and any agent context give, for every provider, a request whose
//! tool fields validate against that provider's documented shape
//! (`tests/vectors/providers/schemas/<provider>.request.schema.json`), including schemas that
//! use what Gemini cannot take (`$ref`, `const`, type arrays, `oneOf`, `allOf`).

use deskwire::tools::providers::{self, Provider, ToolChoice, ToolRequest};
use deskwire::tools::{Context, Registry, ToolSpec, Visibility};
use proptest::prelude::*;
use serde_json::{Value, json};

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": "integer", "minimum": 0})),
        Just(json!({"type": "number"})),
        Just(json!({"type": "boolean", "description": "a flag"})),
        Just(json!({"type": ["string", "null"]})),
        Just(json!({"type": ["integer", "string"]})),
        Just(json!({"const": "fixed"})),
        Just(json!({"type": "string", "enum": ["a", "b", null]})),
        Just(json!({"$ref": "#/$defs/point"})),
        Just(json!({"anyOf": [{"type": "string"}, {"type": "null"}]})),
        Just(json!({"oneOf": [{"type": "string"}, {"type": "integer"}]})),
        Just(json!({"type": "string", "format": "date-time", "examples": ["x"]})),
        Just(json!(true)),
    ]
}

fn schema() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            inner
                .clone()
                .prop_map(|items| json!({"type": "array", "items": items})),
            prop::collection::btree_map("[a-z]{1,6}", inner.clone(), 0..4).prop_map(|props| {
                let required: Vec<&String> = props.keys().take(1).collect();
                json!({"type": "object", "properties": props, "required": required,
                       "additionalProperties": false})
            }),
            (inner.clone(), inner).prop_map(|(a, b)| json!({"allOf": [
                {"type": "object", "properties": {"a": a}},
                {"properties": {"b": b}, "required": ["b"]}
            ]})),
        ]
    })
}

fn tool() -> impl Strategy<Value = (ToolSpec, Visibility)> {
    (
        "[a-zA-Z_][a-zA-Z0-9_-]{0,20}",
        ".{0,40}",
        prop::collection::btree_map("[a-z_]{1,8}", schema(), 0..5),
        any::<bool>(),
        0..3u8,
    )
        .prop_map(|(name, description, props, closed, vis)| {
            let required: Vec<&String> = props.keys().step_by(2).collect();
            let mut schema = json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object", "properties": props, "required": required,
                "$defs": {"point": {"type": "object", "properties": {
                    "x": {"type": "number"}, "next": {"$ref": "#/$defs/point"}}}}
            });
            if closed {
                schema["additionalProperties"] = json!(false);
            }
            let visibility = match vis {
                0 => Visibility::Always,
                1 => Visibility::WhileBound,
                _ => Visibility::WithFlag("admin".into()),
            };
            (
                ToolSpec::new(name, description, schema).unwrap(),
                visibility,
            )
        })
}

fn choice() -> impl Strategy<Value = ToolChoice> {
    prop_oneof![
        Just(ToolChoice::Auto),
        Just(ToolChoice::None),
        Just(ToolChoice::Required),
        "[a-zA-Z_][a-zA-Z0-9_-]{0,3}".prop_map(ToolChoice::Tool),
    ]
}

fn validators() -> Vec<(Provider, jsonschema::Validator)> {
    Provider::ALL
        .into_iter()
        .map(|p| {
            let file = format!(
                "{}/../tests/vectors/providers/schemas/{}.request.schema.json",
                env!("CARGO_MANIFEST_DIR"),
                p.name()
            );
            let schema: Value =
                serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
            (p, jsonschema::validator_for(&schema).unwrap())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn every_request_has_the_providers_shape(
        tools in prop::collection::vec(tool(), 0..8),
        bound in prop::option::of(prop_oneof![Just("npc-1"), Just("npc-2")]),
        admin in any::<bool>(),
        choice in choice(),
        gated in any::<bool>(),
        strict in any::<bool>(),
        parallel in prop::option::of(any::<bool>()),
    ) {
        let mut registry = Registry::new();
        for (spec, vis) in tools {
            let _ = registry.register(spec, vis); // duplicate names are refused, fine
        }
        let mut ctx = Context {
            bound_npc_id: bound.map(str::to_owned),
            ..Context::default()
        };
        if admin {
            ctx.flags.insert("admin".into());
        }
        let visible = registry.visible_tools("npc-1", &ctx);
        let request = ToolRequest {
            tools: visible.clone(),
            catalog: gated.then(|| registry.specs()),
            choice,
            parallel_tool_calls: parallel,
            strict,
        };
        thread_local!(static V: Vec<(Provider, jsonschema::Validator)> = validators());
        V.with(|validators| {
            for (provider, validator) in validators {
                let json = Value::Object(providers::request_tools(*provider, &request));
                let mut text = Vec::new();
                providers::write_request_tools(*provider, &request, &mut text);
                prop_assert_eq!(&serde_json::from_slice::<Value>(&text).unwrap(), &json);
                let errors: Vec<String> = validator
                    .iter_errors(&json)
                    .map(|e| format!("{e} at {}", e.instance_path()))
                    .collect();
                prop_assert!(errors.is_empty(), "{}: {:?}\n{}", provider.name(), errors, json);
                // Gating: a hidden tool is never offered to a provider that gates by removal.
                if matches!(provider, Provider::OpenAiChat | Provider::Anthropic) {
                    let offered = json["tools"].as_array().map_or(0, Vec::len);
                    prop_assert!(offered <= visible.len());
                }
            }
            Ok(())
        })?;
    }
}

proptest! {
    /// The streaming Gemini schema writer and the tree-building converter agree.
    #[test]
    fn gemini_schema_writer_matches_the_converter(props in prop::collection::btree_map("[a-z_]{1,8}", schema(), 0..6), extra in schema()) {
        use deskwire::tools::providers::gemini_schema::{Converted, convert_parameters};
        let root = json!({
            "type": "object", "properties": props, "required": [],
            "$defs": {"point": {"type": "object", "properties": {
                "x": {"type": "number"}, "next": {"$ref": "#/$defs/point"}}}}
        });
        let streamed = Converted::parameters(&root).map(|c| serde_json::to_value(c).unwrap());
        prop_assert_eq!(streamed, convert_parameters(&root));
        // Any node, not only object roots.
        let node = json!({"type": "object", "properties": {"x": extra}});
        let streamed = Converted::parameters(&node).map(|c| serde_json::to_value(c).unwrap());
        prop_assert_eq!(streamed, convert_parameters(&node));
    }
}
