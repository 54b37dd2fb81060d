//! JSON Schema → the OpenAPI 3.0 subset Gemini's `parameters` accept.
//!
//! Following AI SDK's `convert-json-schema-to-openapi-schema.ts` and Gemini's documented subset:
//! `$ref` inlined from `$defs` / `definitions` (recursion stops at a depth, as an open
//! object), `type: [T, "null"]` → `type: T` + `nullable`, several types → `anyOf`, a `null`
//! member of `anyOf` / `oneOf` → `nullable`, `oneOf` → `anyOf`, `allOf` merged, `const` →
//! `enum`, and keywords Gemini does not know (`$schema`, `additionalProperties`, `examples`,
//! ...) dropped. An empty root object means no `parameters` at all.

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value, json};

/// `$ref` chains followed at most before a recursive schema is cut.
const MAX_DEPTH: usize = 16;

/// Keywords copied as they are.
const KEPT: [&str; 14] = [
    "title",
    "description",
    "format",
    "required",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "pattern",
    "minProperties",
    "maxProperties",
    "propertyOrdering",
];

/// Whether a root schema takes no arguments (an object without properties that allows no
/// additional ones): Gemini wants `parameters` left out then.
pub fn is_empty_object(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
        && schema
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
        && !schema
            .get("additionalProperties")
            .is_some_and(|a| a != &Value::Bool(false))
}

/// The Gemini form of a tool's input schema; `None` when it takes no arguments.
pub fn convert_parameters(schema: &Value) -> Option<Value> {
    if is_empty_object(schema) {
        return None;
    }
    Some(convert(schema, schema, 0))
}

fn resolve<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    let name = reference
        .strip_prefix("#/$defs/")
        .map(|n| ("$defs", n))
        .or_else(|| {
            reference
                .strip_prefix("#/definitions/")
                .map(|n| ("definitions", n))
        })?;
    root.get(name.0)?.get(name.1)
}

/// Converts one schema node; `root` holds the definitions `$ref` points into.
pub fn convert(schema: &Value, root: &Value, depth: usize) -> Value {
    let Some(obj) = schema.as_object() else {
        // `true` (anything) and `false`: Gemini has no such schemas; anything goes.
        return json!({});
    };
    let mut out = Map::new();
    if let Some(reference) = obj.get("$ref").and_then(Value::as_str) {
        match resolve(root, reference) {
            Some(target) if depth < MAX_DEPTH => {
                if let Value::Object(m) = convert(target, root, depth + 1) {
                    out = m;
                }
            }
            _ => {
                out.insert("type".into(), json!("object"));
            }
        }
    }
    for key in KEPT {
        if let Some(v) = obj.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    match obj.get("type") {
        Some(Value::Array(types)) => {
            let non_null: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
            if non_null.len() < types.len() {
                out.insert("nullable".into(), Value::Bool(true));
            }
            match non_null.as_slice() {
                [] => {
                    out.insert("type".into(), json!("null"));
                }
                [one] => {
                    out.insert("type".into(), (*one).clone());
                }
                many => {
                    let any: Vec<Value> = many.iter().map(|t| json!({"type": t})).collect();
                    out.insert("anyOf".into(), Value::Array(any));
                }
            }
        }
        Some(t @ Value::String(_)) => {
            out.insert("type".into(), t.clone());
        }
        _ => {}
    }
    if let Some(c) = obj.get("const") {
        out.insert("enum".into(), json!([c]));
    }
    if let Some(Value::Array(values)) = obj.get("enum") {
        // Gemini's enums hold strings; a `null` member means nullable.
        if values.contains(&Value::Null) {
            out.insert("nullable".into(), Value::Bool(true));
        }
        let kept: Vec<Value> = values.iter().filter(|v| !v.is_null()).cloned().collect();
        out.insert("enum".into(), Value::Array(kept));
    }
    if obj.get("nullable") == Some(&Value::Bool(true)) {
        out.insert("nullable".into(), Value::Bool(true));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let converted: Map<String, Value> = props
            .iter()
            .map(|(k, v)| (k.clone(), convert(v, root, depth)))
            .collect();
        out.insert("properties".into(), Value::Object(converted));
    }
    match obj.get("items") {
        Some(Value::Array(tuple)) if !tuple.is_empty() => {
            let any: Vec<Value> = tuple.iter().map(|s| convert(s, root, depth)).collect();
            out.insert("items".into(), json!({ "anyOf": any }));
        }
        Some(items @ (Value::Object(_) | Value::Bool(_))) => {
            out.insert("items".into(), convert(items, root, depth));
        }
        _ => {}
    }
    for key in ["anyOf", "oneOf"] {
        let Some(members) = obj.get(key).and_then(Value::as_array) else {
            continue;
        };
        let is_null = |m: &&Value| m.get("type").and_then(Value::as_str) == Some("null");
        let non_null: Vec<&Value> = members.iter().filter(|m| !is_null(m)).collect();
        if non_null.len() < members.len() {
            out.insert("nullable".into(), Value::Bool(true));
        }
        match non_null.as_slice() {
            [] => {}
            [one] => {
                if let Value::Object(m) = convert(one, root, depth) {
                    for (k, v) in m {
                        out.entry(k).or_insert(v);
                    }
                }
            }
            many => {
                let any: Vec<Value> = many.iter().map(|m| convert(m, root, depth)).collect();
                out.insert("anyOf".into(), Value::Array(any));
            }
        }
    }
    if let Some(all) = obj.get("allOf").and_then(Value::as_array) {
        for member in all {
            let Value::Object(m) = convert(member, root, depth) else {
                continue;
            };
            for (k, v) in m {
                match (out.get_mut(&k), v) {
                    (Some(Value::Object(mine)), Value::Object(theirs)) if k == "properties" => {
                        for (pk, pv) in theirs {
                            mine.entry(pk).or_insert(pv);
                        }
                    }
                    (Some(Value::Array(mine)), Value::Array(theirs)) if k == "required" => {
                        for r in theirs {
                            if !mine.contains(&r) {
                                mine.push(r);
                            }
                        }
                    }
                    (None, v) => {
                        out.insert(k, v);
                    }
                    _ => {}
                }
            }
        }
    }
    Value::Object(out)
}

/// [`convert`] written straight to a serializer, without building the converted tree: the
/// request writer's fast path. Nodes whose conversion merges schemas (`$ref`, `allOf`, an
/// `anyOf` / `oneOf` that collapses to one member, or two sources of `anyOf`) go through
/// [`convert`]; everything else streams. Both give the same JSON (tested).
pub struct Converted<'a> {
    schema: &'a Value,
    root: &'a Value,
    depth: usize,
}

impl<'a> Converted<'a> {
    /// The Gemini form of a tool's input schema, to serialize; `None` when it takes no
    /// arguments (as [`convert_parameters`]).
    pub fn parameters(schema: &'a Value) -> Option<Converted<'a>> {
        (!is_empty_object(schema)).then_some(Converted {
            schema,
            root: schema,
            depth: 0,
        })
    }

    fn child(&self, schema: &'a Value) -> Converted<'a> {
        Converted {
            schema,
            root: self.root,
            depth: self.depth,
        }
    }
}

fn non_null_count(members: &[Value]) -> usize {
    members
        .iter()
        .filter(|m| m.get("type").and_then(Value::as_str) != Some("null"))
        .count()
}

/// The keywords of one node, found in a single pass over its keys (a lookup per keyword
/// cost more than the writing itself).
#[derive(Default)]
struct Node<'a> {
    kept: Vec<(&'a str, &'a Value)>,
    ty: Option<&'a Value>,
    enumeration: Option<&'a Value>,
    constant: Option<&'a Value>,
    nullable: bool,
    properties: Option<&'a Map<String, Value>>,
    items: Option<&'a Value>,
    any_of: Option<&'a Vec<Value>>,
    one_of: Option<&'a Vec<Value>>,
    merges: bool,
}

impl<'a> Node<'a> {
    fn read(obj: &'a Map<String, Value>) -> Node<'a> {
        let mut n = Node::default();
        for (k, v) in obj {
            match k.as_str() {
                "type" => n.ty = Some(v),
                "enum" => n.enumeration = Some(v),
                "const" => n.constant = Some(v),
                "nullable" => n.nullable = v == &Value::Bool(true),
                "properties" => n.properties = v.as_object(),
                "items" => n.items = Some(v),
                "anyOf" => n.any_of = v.as_array(),
                "oneOf" => n.one_of = v.as_array(),
                "$ref" | "allOf" => n.merges = true,
                k if KEPT.contains(&k) => n.kept.push((k, v)),
                _ => {}
            }
        }
        n
    }

    /// Whether [`Converted`] must fall back to building the node with [`convert`].
    fn needs_merge(&self) -> bool {
        let many_types = self
            .ty
            .and_then(Value::as_array)
            .is_some_and(|t| t.iter().filter(|t| *t != "null").count() > 1);
        let unions = usize::from(self.any_of.is_some()) + usize::from(self.one_of.is_some());
        self.merges
            || unions > 1
            || (many_types && unions > 0)
            || self
                .any_of
                .into_iter()
                .chain(self.one_of)
                .any(|u| non_null_count(u) <= 1)
    }
}

impl Serialize for Converted<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Some(obj) = self.schema.as_object() else {
            return s.serialize_map(Some(0))?.end();
        };
        let node = Node::read(obj);
        if node.needs_merge() {
            return convert(self.schema, self.root, self.depth).serialize(s);
        }
        let mut m = s.serialize_map(None)?;
        for (k, v) in &node.kept {
            m.serialize_entry(k, v)?;
        }
        let is_null = |v: &Value| v.get("type").and_then(Value::as_str) == Some("null");
        let union = node.any_of.or(node.one_of);
        let mut nullable = node.nullable
            || node
                .enumeration
                .and_then(Value::as_array)
                .is_some_and(|e| e.contains(&Value::Null))
            || union.is_some_and(|u| u.iter().any(is_null));
        match node.ty {
            Some(Value::Array(types)) => {
                let non_null: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                nullable |= non_null.len() < types.len();
                match non_null.as_slice() {
                    [] => m.serialize_entry("type", "null")?,
                    [one] => m.serialize_entry("type", one)?,
                    many => {
                        let any = many.iter().map(|t| json!({ "type": t }));
                        m.serialize_entry("anyOf", &super::SeqOf(any))?;
                    }
                }
            }
            Some(t @ Value::String(_)) => m.serialize_entry("type", t)?,
            _ => {}
        }
        if let Some(Value::Array(values)) = node.enumeration {
            m.serialize_entry(
                "enum",
                &super::SeqOf(values.iter().filter(|v| !v.is_null())),
            )?;
        } else if let Some(c) = node.constant {
            m.serialize_entry("enum", &[c])?;
        }
        if nullable {
            m.serialize_entry("nullable", &true)?;
        }
        if let Some(props) = node.properties {
            struct Props<'p, 'a>(&'p Converted<'a>, &'a Map<String, Value>);
            impl Serialize for Props<'_, '_> {
                fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    s.collect_map(self.1.iter().map(|(k, v)| (k, self.0.child(v))))
                }
            }
            m.serialize_entry("properties", &Props(self, props))?;
        }
        match node.items {
            Some(Value::Array(tuple)) if !tuple.is_empty() => {
                let any: Vec<Value> = tuple
                    .iter()
                    .map(|t| convert(t, self.root, self.depth))
                    .collect();
                m.serialize_entry("items", &json!({ "anyOf": any }))?;
            }
            Some(items @ (Value::Object(_) | Value::Bool(_))) => {
                m.serialize_entry("items", &self.child(items))?;
            }
            _ => {}
        }
        if let Some(members) = union {
            let any = members
                .iter()
                .filter(|v| !is_null(v))
                .map(|v| self.child(v));
            m.serialize_entry("anyOf", &super::SeqOf(any))?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_to_the_openapi_subset() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "name": {"type": ["string", "null"], "description": "who"},
                "id": {"type": ["string", "integer"]},
                "kind": {"const": "file"},
                "mode": {"oneOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]},
                "child": {"$ref": "#/$defs/node"},
                "tags": {"type": "array", "items": {"type": "string", "examples": ["x"]}},
                "both": {"allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer"}}, "required": ["b"]}
                ]}
            },
            "required": ["name"],
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}
        });
        let out = convert_parameters(&schema).unwrap();
        let p = &out["properties"];
        assert_eq!(out["required"], json!(["name"]));
        assert!(out.get("additionalProperties").is_none() && out.get("$schema").is_none());
        assert!(out.get("$defs").is_none());
        assert_eq!(
            p["name"],
            json!({"type": "string", "nullable": true, "description": "who"})
        );
        assert_eq!(
            p["id"],
            json!({"anyOf": [{"type": "string"}, {"type": "integer"}]})
        );
        assert_eq!(p["kind"], json!({"enum": ["file"]}));
        assert_eq!(
            p["mode"],
            json!({"type": "string", "enum": ["a", "b"], "nullable": true})
        );
        assert_eq!(
            p["tags"],
            json!({"type": "array", "items": {"type": "string"}})
        );
        assert_eq!(
            p["both"],
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a", "b"]})
        );
        // The recursive definition is inlined down to the depth limit, then cut.
        let mut node = &p["child"];
        let mut depth = 0;
        while let Some(next) = node.get("properties").and_then(|p| p.get("next")) {
            node = next;
            depth += 1;
        }
        assert_eq!(depth, MAX_DEPTH);
        assert_eq!(node, &json!({"type": "object"}));
        assert!(!out.to_string().contains("$ref"));
    }

    #[test]
    fn empty_root_means_no_parameters() {
        assert_eq!(convert_parameters(&json!({"type": "object"})), None);
        assert_eq!(
            convert_parameters(
                &json!({"type": "object", "properties": {}, "additionalProperties": false})
            ),
            None
        );
        assert!(
            convert_parameters(
                &json!({"type": "object", "additionalProperties": {"type": "string"}})
            )
            .is_some()
        );
    }
}
