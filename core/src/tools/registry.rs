//! The registry: every tool the runtime knows, each with the rule that says when an agent may
//! see it. Order is registration order, so provider requests list tools the same way every
//! turn (a stable prefix keeps provider prompt caches warm).

use std::collections::HashMap;

use super::builtin;
use super::gating::{Context, Visibility};
use super::spec::{SpecError, ToolSpec};

/// A registered tool. JSON: `{"spec": tool spec, "visibility": ...}`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// What the model sees.
    pub spec: ToolSpec,
    /// When the model may see it.
    pub visibility: Visibility,
}

/// Why a registration was refused. JSON: externally tagged, snake_case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RegistryError {
    /// A tool of that name is registered already.
    #[error("a tool named {0:?} is registered already")]
    Duplicate(String),
    /// The spec breaks a rule every provider holds (its name, or a schema whose root is not an
    /// object): sent on, the provider would refuse the whole request.
    #[error(transparent)]
    Invalid(#[from] SpecError),
}

/// The tools, by name, in registration order.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// `RemoteBash` (visible while the agent's NPC is bound to a desk) and REXD's logical
    /// tools (always visible).
    pub fn with_builtins() -> Registry {
        let mut r = Registry::new();
        r.register(builtin::remote_bash(), Visibility::WhileBound)
            .expect("empty registry");
        for spec in builtin::rexd_tools() {
            r.register(spec, Visibility::Always)
                .expect("built-in names are distinct");
        }
        r
    }

    /// Adds a tool.
    pub fn register(
        &mut self,
        spec: ToolSpec,
        visibility: Visibility,
    ) -> Result<(), RegistryError> {
        // A spec that came in as JSON (a host's dict) was not checked on the way in.
        spec.check()?;
        if self.index.contains_key(&spec.name) {
            return Err(RegistryError::Duplicate(spec.name));
        }
        self.index.insert(spec.name.clone(), self.entries.len());
        self.entries.push(Entry { spec, visibility });
        Ok(())
    }

    /// Removes a tool; returns it when it was there.
    pub fn remove(&mut self, name: &str) -> Option<Entry> {
        let i = self.index.remove(name)?;
        let entry = self.entries.remove(i);
        for slot in self.index.values_mut() {
            if *slot > i {
                *slot -= 1;
            }
        }
        Some(entry)
    }

    /// Changes when a tool is visible; false when there is no such tool.
    pub fn set_visibility(&mut self, name: &str, visibility: Visibility) -> bool {
        match self.index.get(name) {
            Some(&i) => {
                self.entries[i].visibility = visibility;
                true
            }
            None => false,
        }
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.index.get(name).map(|&i| &self.entries[i])
    }

    /// Every tool, in registration order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Every spec, in registration order (the full catalog, for gating by `allowed_tools` /
    /// `allowedFunctionNames` without changing the tool list).
    pub fn specs(&self) -> Vec<&ToolSpec> {
        self.entries.iter().map(|e| &e.spec).collect()
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The tools `agent` may see in `ctx`, in registration order.
    pub fn visible_tools<'a>(&'a self, agent: &str, ctx: &Context) -> Vec<&'a ToolSpec> {
        self.entries
            .iter()
            .filter(|e| e.visibility.allows(agent, ctx))
            .map(|e| &e.spec)
            .collect()
    }

    /// The names of [`visible_tools`](Self::visible_tools).
    pub fn visible_names(&self, agent: &str, ctx: &Context) -> Vec<String> {
        self.entries
            .iter()
            .filter(|e| e.visibility.allows(agent, ctx))
            .map(|e| e.spec.name.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> ToolSpec {
        ToolSpec::new(name, "", json!({"type": "object"})).unwrap()
    }

    #[test]
    fn keeps_registration_order_and_refuses_duplicates() {
        let mut r = Registry::new();
        for n in ["c", "a", "b"] {
            r.register(tool(n), Visibility::Always).unwrap();
        }
        assert_eq!(
            r.register(tool("a"), Visibility::Always),
            Err(RegistryError::Duplicate("a".into()))
        );
        let names: Vec<&str> = r.specs().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["c", "a", "b"]);
        assert!(r.remove("c").is_some());
        assert!(r.remove("c").is_none());
        assert_eq!(r.get("b").unwrap().spec.name, "b");
        assert_eq!(r.len(), 2);
    }

    /// A spec read from JSON (a host's dict) is checked as `ToolSpec::new` checks: a provider
    /// would refuse the whole request over one bad tool.
    #[test]
    fn refuses_a_spec_no_provider_takes() {
        let mut r = Registry::new();
        let spec = |v| serde_json::from_value::<ToolSpec>(v).unwrap();
        let long = "a".repeat(65);
        for (bad, why) in [
            (
                json!({"name": "1bad name", "description": "", "input_schema": {"type": "object"}}),
                SpecError::InvalidName("1bad name".into()),
            ),
            (
                json!({"name": "", "description": "", "input_schema": {"type": "object"}}),
                SpecError::InvalidName(String::new()),
            ),
            (
                json!({"name": long, "description": "", "input_schema": {"type": "object"}}),
                SpecError::InvalidName(long.clone()),
            ),
            (
                json!({"name": "s", "description": "", "input_schema": {"type": "string"}}),
                SpecError::SchemaNotObject("s".into()),
            ),
        ] {
            assert_eq!(
                r.register(spec(bad), Visibility::Always),
                Err(RegistryError::Invalid(why))
            );
        }
        assert_eq!(r.len(), 0);
        r.register(tool(&"a".repeat(64)), Visibility::Always)
            .unwrap();
    }

    #[test]
    fn builtins() {
        let r = Registry::with_builtins();
        assert_eq!(r.len(), 7);
        let ctx = Context::default();
        assert_eq!(
            r.visible_names("npc-1", &ctx),
            ["bash", "read", "write", "list", "glob", "stat"]
        );
        let bound = Context::bound_to("npc-1");
        assert_eq!(r.visible_names("npc-1", &bound)[0], "RemoteBash");
        assert_eq!(r.visible_names("npc-2", &bound).len(), 6);
    }
}
