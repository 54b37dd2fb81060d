//! Policy: allow, deny or ask a human, per tool and per argument pattern, plus the decisions a
//! human asked to remember.
//!
//! Every rule whose tool and condition match a call votes; the most restrictive vote wins
//! (deny over ask over allow), and the default applies when no rule matches. So a deny list can
//! never be undone by a broader allow, and "allow `git status`, ask for the rest" is an allow
//! rule under a default of ask. A remembered answer turns an "ask" into allow or deny; it never
//! overrides a deny rule.
//!
//! Command patterns are globs (`*`, `?`, `[..]`, `{a,b}`; `*` also crosses `/`) matched against
//! each simple command of a command line: the line is cut at `;`, `&`, `|`, newlines,
//! parentheses and backticks, leading `VAR=value` words are dropped and runs of blanks become
//! one space, so `cd /x && rm -rf /` matches `rm -rf *`. This is a speed bump for a model, not
//! a sandbox: quoting tricks can hide a command, and the real boundary is the executor (rexd's
//! allowed roots and its own policy). Path checks are lexical (`..` resolved, symlinks unseen)
//! for the same reason.

use std::collections::{BTreeMap, VecDeque};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::gating::Context;
use super::spec::ToolCall;

/// How risky a call is, for the approval prompt (mobile `tier`). JSON: `"low"`, `"medium"`,
/// `"high"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "uniffi", derive(uniffi::Enum))]
#[cfg_attr(feature = "uniffi", uniffi(name = "ToolTier"))]
pub enum Tier {
    /// Reads, harmless commands.
    Low,
    /// Writes inside the workspace.
    Medium,
    /// Destructive or outside the workspace.
    High,
}

impl Tier {
    /// `low`, `medium` or `high`.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Low => "low",
            Tier::Medium => "medium",
            Tier::High => "high",
        }
    }

    /// The tier named `name` (as [`as_str`](Self::as_str) writes it).
    pub fn from_name(name: &str) -> Option<Tier> {
        match name {
            "low" => Some(Tier::Low),
            "medium" => Some(Tier::Medium),
            "high" => Some(Tier::High),
            _ => None,
        }
    }
}

/// What a rule (or the default) says. JSON: `"allow"`, `{"ask": "high"}`, `{"deny": "reason"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Run it.
    Allow,
    /// Ask a human first.
    Ask(Tier),
    /// Refuse, with a reason for the model.
    Deny(String),
}

impl Action {
    fn severity(&self) -> u8 {
        match self {
            Action::Allow => 0,
            Action::Ask(_) => 1,
            Action::Deny(_) => 2,
        }
    }
}

/// When a rule applies to a call of its tool. JSON (as `tests/vectors/tools.json` writes it):
/// `"always"`, `{"commands": [globs]}`, `{"arg": "name", "patterns": [globs]}`,
/// `{"outside": [roots]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "ConditionJson", from = "ConditionJson")]
#[non_exhaustive]
pub enum Condition {
    /// Every call.
    Always,
    /// The `command` argument has a simple command matching one of the globs.
    CommandMatches(Vec<String>),
    /// The string argument `arg` matches one of the globs (whole value).
    ArgMatches {
        /// The argument's name.
        arg: String,
        /// The globs.
        patterns: Vec<String>,
    },
    /// A path argument (`path`, `cwd`, or the fixed prefix of a glob `pattern`) lies outside
    /// every root. Relative paths resolve against the context's `cwd`, else the first root.
    PathOutside {
        /// The allowed roots (absolute).
        roots: Vec<String>,
    },
}

/// One rule: for calls of `tool` (`*` for any tool) under `when`, do `action`. JSON:
/// `{"tool", "when", "action"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The tool's name, or `*`.
    pub tool: String,
    /// When it applies.
    pub when: Condition,
    /// What it says.
    pub action: Action,
}

impl Rule {
    /// Allows every call of `tool`.
    pub fn allow(tool: &str) -> Rule {
        Rule::new(tool, Condition::Always, Action::Allow)
    }

    /// Asks before every call of `tool`.
    pub fn ask(tool: &str, tier: Tier) -> Rule {
        Rule::new(tool, Condition::Always, Action::Ask(tier))
    }

    /// Refuses every call of `tool`.
    pub fn deny(tool: &str, reason: &str) -> Rule {
        Rule::new(tool, Condition::Always, Action::Deny(reason.to_owned()))
    }

    /// Refuses calls of `tool` whose command matches a pattern (a deny list).
    pub fn deny_commands<'a>(
        tool: &str,
        patterns: impl IntoIterator<Item = &'a str>,
        reason: &str,
    ) -> Rule {
        Rule::new(
            tool,
            Condition::CommandMatches(patterns.into_iter().map(str::to_owned).collect()),
            Action::Deny(reason.to_owned()),
        )
    }

    /// Allows calls of `tool` whose command matches a pattern.
    pub fn allow_commands<'a>(tool: &str, patterns: impl IntoIterator<Item = &'a str>) -> Rule {
        Rule::new(
            tool,
            Condition::CommandMatches(patterns.into_iter().map(str::to_owned).collect()),
            Action::Allow,
        )
    }

    /// Asks before calls of `tool` whose path lies outside `roots`.
    pub fn ask_outside<'a>(
        tool: &str,
        roots: impl IntoIterator<Item = &'a str>,
        tier: Tier,
    ) -> Rule {
        Rule::new(
            tool,
            Condition::PathOutside {
                roots: roots.into_iter().map(str::to_owned).collect(),
            },
            Action::Ask(tier),
        )
    }

    /// Refuses calls of `tool` whose path lies outside `roots`.
    pub fn deny_outside<'a>(
        tool: &str,
        roots: impl IntoIterator<Item = &'a str>,
        reason: &str,
    ) -> Rule {
        Rule::new(
            tool,
            Condition::PathOutside {
                roots: roots.into_iter().map(str::to_owned).collect(),
            },
            Action::Deny(reason.to_owned()),
        )
    }

    /// Any rule.
    pub fn new(tool: &str, when: Condition, action: Action) -> Rule {
        Rule {
            tool: tool.to_owned(),
            when,
            action,
        }
    }
}

/// A rule could not be compiled. JSON: externally tagged, snake_case.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PolicyError {
    /// A glob does not parse.
    #[error("invalid pattern {pattern:?}: {message}")]
    BadPattern {
        /// The pattern.
        pattern: String,
        /// globset's message.
        message: String,
    },
    /// A root is not an absolute path.
    #[error("root {0:?} is not an absolute path")]
    RelativeRoot(String),
}

/// [`Condition`]'s JSON.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum ConditionJson {
    Always(AlwaysWord),
    Commands(CommandsJson),
    Arg(ArgJson),
    Outside(OutsideJson),
}

#[derive(Serialize, Deserialize)]
enum AlwaysWord {
    #[serde(rename = "always")]
    Always,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandsJson {
    commands: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ArgJson {
    arg: String,
    patterns: Vec<String>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutsideJson {
    outside: Vec<String>,
}

impl From<Condition> for ConditionJson {
    fn from(c: Condition) -> Self {
        match c {
            Condition::Always => ConditionJson::Always(AlwaysWord::Always),
            Condition::CommandMatches(commands) => {
                ConditionJson::Commands(CommandsJson { commands })
            }
            Condition::ArgMatches { arg, patterns } => {
                ConditionJson::Arg(ArgJson { arg, patterns })
            }
            Condition::PathOutside { roots } => {
                ConditionJson::Outside(OutsideJson { outside: roots })
            }
        }
    }
}

impl From<ConditionJson> for Condition {
    fn from(c: ConditionJson) -> Self {
        match c {
            ConditionJson::Always(_) => Condition::Always,
            ConditionJson::Commands(c) => Condition::CommandMatches(c.commands),
            ConditionJson::Arg(a) => Condition::ArgMatches {
                arg: a.arg,
                patterns: a.patterns,
            },
            ConditionJson::Outside(o) => Condition::PathOutside { roots: o.outside },
        }
    }
}

#[derive(Debug, Clone)]
enum Matcher {
    Always,
    Command(GlobSet),
    Arg(String, GlobSet),
    Outside(Vec<String>),
}

fn globs(patterns: &[String]) -> Result<GlobSet, PolicyError> {
    let mut set = GlobSetBuilder::new();
    for p in patterns {
        let glob = GlobBuilder::new(p)
            .literal_separator(false)
            .build()
            .map_err(|e| PolicyError::BadPattern {
                pattern: p.clone(),
                message: e.kind().to_string(),
            })?;
        set.add(glob);
    }
    set.build().map_err(|e| PolicyError::BadPattern {
        pattern: patterns.join(" "),
        message: e.kind().to_string(),
    })
}

/// Decisions remembered, oldest dropped first beyond the limit.
#[derive(Debug, Clone)]
struct Memory {
    decisions: BTreeMap<(String, String), bool>,
    order: VecDeque<(String, String)>,
    max: usize,
}

/// Rules, a default, and remembered answers.
///
/// JSON: `{"default": action, "rules": [rule, ...], "max_remembered": n}` (`rules` and
/// `max_remembered` may be left out; `default` may not, so a typo cannot open everything).
/// Reading compiles every rule, so a bad glob or a relative root is a deserialization error.
/// Remembered answers are state, not configuration: they are not written.
#[derive(Debug, Clone)]
pub struct Policy {
    rules: Vec<(Rule, Matcher)>,
    default: Action,
    memory: Memory,
}

/// Remembered decisions kept at most, by default.
pub const DEFAULT_MAX_REMEMBERED: usize = 1024;

impl Policy {
    /// No rules; `default` for every call.
    pub fn new(default: Action) -> Policy {
        Policy {
            rules: Vec::new(),
            default,
            memory: Memory {
                decisions: BTreeMap::new(),
                order: VecDeque::new(),
                max: DEFAULT_MAX_REMEMBERED,
            },
        }
    }

    /// Allow unless a rule says otherwise.
    pub fn allow_all() -> Policy {
        Policy::new(Action::Allow)
    }

    /// Ask unless a rule says otherwise.
    pub fn ask_all(tier: Tier) -> Policy {
        Policy::new(Action::Ask(tier))
    }

    /// Keeps at most `max` remembered decisions.
    pub fn with_max_remembered(mut self, max: usize) -> Policy {
        self.memory.max = max;
        self
    }

    /// Adds a rule.
    pub fn push(&mut self, rule: Rule) -> Result<(), PolicyError> {
        let matcher = match &rule.when {
            Condition::Always => Matcher::Always,
            Condition::CommandMatches(p) => Matcher::Command(globs(p)?),
            Condition::ArgMatches { arg, patterns } => Matcher::Arg(arg.clone(), globs(patterns)?),
            Condition::PathOutside { roots } => {
                let mut norm = Vec::new();
                for r in roots {
                    if !r.starts_with('/') {
                        return Err(PolicyError::RelativeRoot(r.clone()));
                    }
                    norm.push(normalize("/", r));
                }
                Matcher::Outside(norm)
            }
        };
        self.rules.push((rule, matcher));
        Ok(())
    }

    /// What the rules and remembered answers say about `call` in `ctx`.
    pub fn evaluate(&self, call: &ToolCall, ctx: &Context) -> Action {
        let mut verdict: Option<&Action> = None;
        for (rule, matcher) in &self.rules {
            if (rule.tool == "*" || rule.tool == call.name)
                && matches(matcher, call, ctx)
                && verdict.is_none_or(|v| rule.action.severity() > v.severity())
            {
                verdict = Some(&rule.action);
            }
        }
        let action = verdict.unwrap_or(&self.default).clone();
        if let Action::Ask(_) = action {
            match self.remembered(call) {
                Some(true) => return Action::Allow,
                Some(false) => {
                    return Action::Deny("the user denied this call before".into());
                }
                None => {}
            }
        }
        action
    }

    /// The remembered answer for calls like `call` (same tool, same subject).
    pub fn remembered(&self, call: &ToolCall) -> Option<bool> {
        self.memory
            .decisions
            .get(&(call.name.clone(), call.subject()))
            .copied()
    }

    /// Remembers a human's answer for calls like `call`.
    pub fn remember(&mut self, call: &ToolCall, approved: bool) {
        let key = (call.name.clone(), call.subject());
        if self.memory.max == 0 {
            return;
        }
        if self
            .memory
            .decisions
            .insert(key.clone(), approved)
            .is_none()
        {
            self.memory.order.push_back(key);
            while self.memory.order.len() > self.memory.max {
                if let Some(old) = self.memory.order.pop_front() {
                    self.memory.decisions.remove(&old);
                }
            }
        }
    }

    /// Forgets every remembered answer.
    pub fn forget_all(&mut self) {
        self.memory.decisions.clear();
        self.memory.order.clear();
    }

    /// How many answers are remembered.
    pub fn remembered_len(&self) -> usize {
        self.memory.decisions.len()
    }
}

#[derive(Serialize)]
struct PolicyOut<'a> {
    default: &'a Action,
    rules: Vec<&'a Rule>,
    max_remembered: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyIn {
    default: Action,
    #[serde(default)]
    rules: Vec<Rule>,
    #[serde(default = "default_max_remembered")]
    max_remembered: usize,
}

fn default_max_remembered() -> usize {
    DEFAULT_MAX_REMEMBERED
}

impl Serialize for Policy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        PolicyOut {
            default: &self.default,
            rules: self.rules.iter().map(|(rule, _)| rule).collect(),
            max_remembered: self.memory.max,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Policy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let json = PolicyIn::deserialize(d)?;
        let mut policy = Policy::new(json.default).with_max_remembered(json.max_remembered);
        for rule in json.rules {
            policy.push(rule).map_err(serde::de::Error::custom)?;
        }
        Ok(policy)
    }
}

fn matches(matcher: &Matcher, call: &ToolCall, ctx: &Context) -> bool {
    match matcher {
        Matcher::Always => true,
        Matcher::Command(set) => call
            .args
            .get("command")
            .and_then(Value::as_str)
            .is_some_and(|cmd| {
                let whole = collapse(cmd);
                set.is_match(&whole) || simple_commands(cmd).iter().any(|c| set.is_match(c))
            }),
        Matcher::Arg(arg, set) => call
            .args
            .get(arg)
            .and_then(Value::as_str)
            .is_some_and(|v| set.is_match(v)),
        Matcher::Outside(roots) => {
            let base = ctx
                .cwd
                .as_deref()
                .filter(|c| c.starts_with('/'))
                .or(roots.first().map(String::as_str))
                .unwrap_or("/");
            path_args(&call.args).any(|p| {
                let p = normalize(base, p);
                !roots.iter().any(|r| inside(&p, r))
            })
        }
    }
}

/// The path-like arguments of a call: `path`, `cwd`, and a glob's fixed prefix.
fn path_args(args: &Value) -> impl Iterator<Item = &str> {
    let path = args.get("path").and_then(Value::as_str);
    let cwd = args.get("cwd").and_then(Value::as_str);
    let pattern = args.get("pattern").and_then(Value::as_str).map(|p| {
        let fixed = p.find(['*', '?', '[', '{']).map_or(p, |i| &p[..i]);
        // Up to the last separator: `src/ma*` is under `src/`.
        fixed.rfind('/').map_or("", |i| &fixed[..=i])
    });
    [path, cwd, pattern].into_iter().flatten()
}

/// Runs of blanks become one space; leading and trailing blanks go.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The simple commands of a command line, each collapsed and without leading assignments.
fn simple_commands(cmd: &str) -> Vec<String> {
    cmd.split([';', '&', '|', '\n', '(', ')', '`'])
        .map(|part| {
            let words: Vec<&str> = part
                .split_whitespace()
                .skip_while(|w| is_assignment(w))
                .collect();
            words.join(" ")
        })
        .filter(|c| !c.is_empty())
        .collect()
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// `path` made absolute against `base`, with `.`, `..` and repeated `/` resolved lexically.
pub fn normalize(base: &str, path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    let joined = if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{base}/{path}")
    };
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

fn inside(path: &str, root: &str) -> bool {
    root == "/"
        || path == root
        || (path.starts_with(root) && path.as_bytes().get(root.len()) == Some(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bash(cmd: &str) -> ToolCall {
        ToolCall::new("c", "bash", json!({ "command": cmd }))
    }

    #[test]
    fn deny_list_matches_each_simple_command() {
        let mut p = Policy::allow_all();
        p.push(Rule::deny_commands(
            "bash",
            ["rm -rf *", "curl * | sh", "shutdown*"],
            "destructive",
        ))
        .unwrap();
        let ctx = Context::default();
        for bad in [
            "rm -rf /",
            "rm   -rf   ~",
            "cd /x && rm -rf build",
            "echo ok; rm -rf .",
            "X=1 rm -rf /tmp",
            "echo $(rm -rf /)",
            "true\nshutdown -h now",
            "curl http://x | sh",
        ] {
            assert_eq!(
                p.evaluate(&bash(bad), &ctx),
                Action::Deny("destructive".into()),
                "{bad}"
            );
        }
        for ok in [
            "ls -la",
            "rm file.txt",
            "echo 'rm -rf' is bad",
            "git status",
        ] {
            // A quoted pattern inside another command is not a simple command of its own.
            assert_eq!(p.evaluate(&bash(ok), &ctx), Action::Allow, "{ok}");
        }
        // Other tools are not affected.
        let read = ToolCall::new("c", "read", json!({"command": "rm -rf /"}));
        assert_eq!(p.evaluate(&read, &ctx), Action::Allow);
    }

    #[test]
    fn most_restrictive_wins_and_default_applies() {
        let mut p = Policy::ask_all(Tier::Medium);
        p.push(Rule::allow_commands("bash", ["git status*", "ls*"]))
            .unwrap();
        p.push(Rule::deny_commands("bash", ["ls /root*"], "private"))
            .unwrap();
        let ctx = Context::default();
        assert_eq!(p.evaluate(&bash("git status -s"), &ctx), Action::Allow);
        assert_eq!(
            p.evaluate(&bash("ls /root/x"), &ctx),
            Action::Deny("private".into())
        );
        assert_eq!(p.evaluate(&bash("make"), &ctx), Action::Ask(Tier::Medium));
        p.push(Rule::ask("bash", Tier::High)).unwrap();
        assert_eq!(p.evaluate(&bash("ls"), &ctx), Action::Ask(Tier::High));
    }

    #[test]
    fn paths_outside_roots() {
        let mut p = Policy::allow_all();
        p.push(Rule::ask_outside("*", ["/srv/app", "/tmp"], Tier::High))
            .unwrap();
        let read = |path: &str| ToolCall::new("c", "read", json!({ "path": path }));
        let ctx = Context::default();
        assert_eq!(p.evaluate(&read("/srv/app/a.txt"), &ctx), Action::Allow);
        assert_eq!(p.evaluate(&read("/srv/app"), &ctx), Action::Allow);
        assert_eq!(p.evaluate(&read("src/main.rs"), &ctx), Action::Allow);
        for outside in [
            "/etc/passwd",
            "/srv/application/x",
            "/srv/app/../../etc/shadow",
            "../x",
        ] {
            assert_eq!(
                p.evaluate(&read(outside), &ctx),
                Action::Ask(Tier::High),
                "{outside}"
            );
        }
        let in_home = Context {
            cwd: Some("/home/u".into()),
            ..Context::default()
        };
        assert_eq!(
            p.evaluate(&read("a.txt"), &in_home),
            Action::Ask(Tier::High)
        );
        let glob = |pat: &str| ToolCall::new("c", "glob", json!({ "pattern": pat }));
        assert_eq!(p.evaluate(&glob("/srv/app/**/*.rs"), &ctx), Action::Allow);
        assert_eq!(
            p.evaluate(&glob("/etc/*.conf"), &ctx),
            Action::Ask(Tier::High)
        );
        assert_eq!(
            p.push(Rule::deny_outside("*", ["rel"], "x")),
            Err(PolicyError::RelativeRoot("rel".into()))
        );
        assert!(matches!(
            p.push(Rule::deny_commands("bash", ["a[b"], "x")),
            Err(PolicyError::BadPattern { .. })
        ));
    }

    #[test]
    fn remembered_answers_settle_asks_but_not_denials() {
        let mut p = Policy::ask_all(Tier::Low).with_max_remembered(2);
        p.push(Rule::deny_commands("bash", ["rm *"], "no")).unwrap();
        let ctx = Context::default();
        p.remember(&bash("make"), true);
        p.remember(&bash("make test"), false);
        p.remember(&bash("rm x"), true);
        assert_eq!(p.evaluate(&bash("rm x"), &ctx), Action::Deny("no".into()));
        assert!(matches!(
            p.evaluate(&bash("make test"), &ctx),
            Action::Deny(_)
        ));
        // The oldest of three was dropped (limit 2).
        assert_eq!(p.remembered_len(), 2);
        assert_eq!(p.evaluate(&bash("make"), &ctx), Action::Ask(Tier::Low));
        p.forget_all();
        assert_eq!(p.evaluate(&bash("make test"), &ctx), Action::Ask(Tier::Low));
    }

    #[test]
    fn normalizes_lexically() {
        assert_eq!(normalize("/a/b", "../c/./d//e"), "/a/c/d/e");
        assert_eq!(normalize("/", "../../x"), "/x");
        assert_eq!(normalize("/a", "/"), "/");
    }
}
