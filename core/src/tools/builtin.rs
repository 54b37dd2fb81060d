//! The tools deskwire ships: `RemoteBash` (`docs/oa1.md`, "`RemoteBash`") and REXD's logical
//! tools (`bash`, `read`, `write`, `list`, `glob`, `stat`), plus the runtime routing of a logical
//! call to the REXD request that carries it out (`docs/tools.md`, "The built-in tools": the model
//! sees one `read`, the runtime knows which machine it reads on).

use serde::Deserialize;
use serde_json::{Value, json};

use super::spec::{ToolCall, ToolSpec};
use crate::oa1::remote_bash;
use crate::rexd::{
    Encoding, ExecStartParams, FsGlobParams, FsListParams, FsReadParams, FsStatParams,
    FsWriteParams, Program, Request, WriteMode,
};

/// `RemoteBash`: the schema and description of [`crate::oa1::remote_bash`], the one source.
pub fn remote_bash() -> ToolSpec {
    ToolSpec::from_schema_text(
        remote_bash::TOOL_NAME,
        remote_bash::DESCRIPTION.as_str(),
        remote_bash::INPUT_SCHEMA,
    )
    .expect("the RemoteBash schema is a valid object schema")
}

/// The checks a built-in tool's arguments need beyond their schema's top level, so that a
/// call the gate lets through is one the tool takes: `RemoteBash`'s are
/// [`remote_bash::RemoteBashArgs::new`]'s (a command that is not empty or all white space and
/// has no NUL byte, a `timeout_sec` of at least 1). Other tools: nothing more.
pub fn check_args(call: &ToolCall) -> Result<(), String> {
    if call.name != remote_bash::TOOL_NAME {
        return Ok(());
    }
    remote_bash::RemoteBashArgs::deserialize(&call.args)
        .map_err(remote_bash::ArgsError::from)
        .and_then(|a| remote_bash::RemoteBashArgs::new(a.command, a.timeout_sec))
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Names of REXD's logical tools, in [`rexd_tools`] order.
pub const REXD_TOOL_NAMES: [&str; 6] = ["bash", "read", "write", "list", "glob", "stat"];

/// REXD's logical tools: one surface whatever machine the runtime routes them to. Arguments
/// are the REXD params the tool maps to (the same names `rexd --mcp` offers), and unknown ones
/// are refused (`additionalProperties: false`), so a misspelt argument is an error the model
/// sees, not an option silently ignored.
pub fn rexd_tools() -> Vec<ToolSpec> {
    let spec = |name: &str, description: &str, mut schema: Value| {
        schema["additionalProperties"] = json!(false);
        ToolSpec::new(name, description, schema).expect("built-in schemas are object schemas")
    };
    vec![
        spec(
            "bash",
            &format!(
                "Run a shell command (sh -c) on the current target machine and return its \
                 stdout, then its stderr after a [stderr] line. Each call starts a fresh shell; \
                 chain steps in one command (cd dir && make). Keep output small (head, tail, \
                 rg -n). {}",
                remote_bash::EXIT_MARKER_RULE
            ),
            json!({"type":"object","properties":{
                "command":{"type":"string","description":"The command line."},
                "cwd":{"type":"string","description":"Working directory (absolute, inside a workspace root)."},
                "timeout_ms":{"type":"integer","minimum":1,"description":"Kill the command after this many milliseconds."},
                "stdin":{"type":"string","description":"Text given to the command's stdin."}
            },"required":["command"]}),
        ),
        spec(
            "read",
            "Read a text file (or a byte range of it) on the current target machine.",
            json!({"type":"object","properties":{
                "path":{"type":"string","description":"The file."},
                "offset":{"type":"integer","minimum":0,"description":"First byte to read."},
                "length":{"type":"integer","minimum":0,"description":"Bytes to read at most."}
            },"required":["path"]}),
        ),
        spec(
            "write",
            "Write a text file atomically on the current target machine (replaces it by \
             default; create or append on request).",
            json!({"type":"object","properties":{
                "path":{"type":"string","description":"The file."},
                "content":{"type":"string","description":"The new text."},
                "mode":{"type":"string","enum":["create","replace","append"],"description":"create fails if the file exists; append adds to the end."},
                "mkdir_parents":{"type":"boolean","description":"Create missing parent directories."},
                "expected_mtime":{"type":"string","description":"Refuse unless the file's mtime is still this."}
            },"required":["path","content"]}),
        ),
        spec(
            "list",
            "List a directory's entries (type, size, mtime) on the current target machine.",
            json!({"type":"object","properties":{
                "path":{"type":"string","description":"The directory."},
                "recursive":{"type":"boolean","description":"Descend into subdirectories."},
                "max_entries":{"type":"integer","minimum":1,"description":"Entries to return at most."}
            },"required":["path"]}),
        ),
        spec(
            "glob",
            "Find files by glob pattern (*, ?, [..], {a,b}, ** for any directories) on the \
             current target machine.",
            json!({"type":"object","properties":{
                "pattern":{"type":"string","description":"The glob, e.g. src/**/*.rs."},
                "cwd":{"type":"string","description":"Base directory for a relative pattern."},
                "max_matches":{"type":"integer","minimum":1,"description":"Matches to return at most."}
            },"required":["pattern"]}),
        ),
        spec(
            "stat",
            "Tell whether a path exists, its type, size, modification time and mode.",
            json!({"type":"object","properties":{
                "path":{"type":"string","description":"The path."}
            },"required":["path"]}),
        ),
    ]
}

/// Why a logical call could not become a REXD request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// Not one of [`REXD_TOOL_NAMES`].
    #[error("{0:?} is not a REXD logical tool")]
    NotRexdTool(String),
    /// The arguments are not a JSON object.
    #[error("the arguments of {0} must be a JSON object")]
    NotAnObject(String),
    /// `command` is empty.
    #[error("`command` is empty")]
    EmptyCommand,
    /// The arguments do not fit the tool's schema.
    #[error("invalid arguments for {tool}: {source}")]
    InvalidArgs {
        /// The tool.
        tool: String,
        /// What serde found.
        source: serde_json::Error,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BashArgs {
    command: String,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    stdin: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    length: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
    #[serde(default)]
    mode: WriteMode,
    #[serde(default)]
    mkdir_parents: bool,
    #[serde(default)]
    expected_mtime: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    path: String,
    #[serde(default)]
    recursive: bool,
    #[serde(default)]
    max_entries: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GlobArgs {
    pattern: String,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    max_matches: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatArgs {
    path: String,
}

/// The REXD request that runs a logical call in `session_id` (the session the runtime opened
/// on the current target). `bash` runs in shell mode: the model writes command lines.
pub fn rexd_request(call: &ToolCall, session_id: &str) -> Result<Request, RouteError> {
    fn args<T: for<'de> Deserialize<'de>>(call: &ToolCall) -> Result<T, RouteError> {
        // Derived deserializers also take arrays (fields by position); tool arguments are named.
        if !call.args.is_object() {
            return Err(RouteError::NotAnObject(call.name.clone()));
        }
        T::deserialize(&call.args).map_err(|source| RouteError::InvalidArgs {
            tool: call.name.clone(),
            source,
        })
    }
    let session_id = session_id.to_owned();
    Ok(match call.name.as_str() {
        "bash" => {
            let a: BashArgs = args(call)?;
            if a.command.is_empty() {
                return Err(RouteError::EmptyCommand);
            }
            Request::ExecStart(ExecStartParams {
                session_id,
                program: Program::shell(a.command),
                cwd: a.cwd,
                stdin: a.stdin,
                timeout_ms: a.timeout_ms,
                ..ExecStartParams::default()
            })
        }
        "read" => {
            let a: ReadArgs = args(call)?;
            Request::FsRead(FsReadParams {
                session_id,
                path: a.path,
                offset: a.offset,
                length: a.length,
                encoding: Encoding::default(),
            })
        }
        "write" => {
            let a: WriteArgs = args(call)?;
            Request::FsWrite(FsWriteParams {
                session_id,
                path: a.path,
                content: a.content,
                mode: a.mode,
                mkdir_parents: a.mkdir_parents,
                atomic: true,
                expected_mtime: a.expected_mtime,
                ..FsWriteParams::default()
            })
        }
        "list" => {
            let a: ListArgs = args(call)?;
            Request::FsList(FsListParams {
                session_id,
                path: a.path,
                recursive: a.recursive,
                max_entries: a.max_entries,
            })
        }
        "glob" => {
            let a: GlobArgs = args(call)?;
            Request::FsGlob(FsGlobParams {
                session_id,
                pattern: a.pattern,
                cwd: a.cwd,
                max_matches: a.max_matches,
            })
        }
        "stat" => {
            let a: StatArgs = args(call)?;
            Request::FsStat(FsStatParams {
                session_id,
                path: a.path,
            })
        }
        other => return Err(RouteError::NotRexdTool(other.to_owned())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_bash_is_the_oa1_contract() {
        let spec = remote_bash();
        assert_eq!(spec.name, "RemoteBash");
        assert_eq!(spec.description, *remote_bash::DESCRIPTION);
        assert_eq!(
            spec.input_schema,
            serde_json::from_str::<Value>(remote_bash::INPUT_SCHEMA).unwrap()
        );
        assert_eq!(spec.required().collect::<Vec<_>>(), ["command"]);
    }

    #[test]
    fn logical_tools_route_to_rexd_methods() {
        let names: Vec<String> = rexd_tools().into_iter().map(|t| t.name).collect();
        assert_eq!(names, REXD_TOOL_NAMES);
        let cases = [
            (
                "bash",
                json!({"command":"git status","timeout_ms":500,"stdin":"y\n"}),
                json!({"method":"exec.start","params":{"session_id":"s_1","shell":true,"command":"git status","stdin":"y\n","timeout_ms":500,"detach":false}}),
            ),
            (
                "read",
                json!({"path":"/srv/a"}),
                json!({"method":"fs.read","params":{"session_id":"s_1","path":"/srv/a","encoding":"utf8"}}),
            ),
            (
                "write",
                json!({"path":"/srv/a","content":"x","mode":"append","mkdir_parents":true,"expected_mtime":"2026-11-22T10:00:00Z"}),
                json!({"method":"fs.write","params":{"session_id":"s_1","path":"/srv/a","content":"x","encoding":"utf8","mode":"append","mkdir_parents":true,"atomic":true,"expected_mtime":"2026-11-22T10:00:00Z"}}),
            ),
            (
                "list",
                json!({"path":"/srv","max_entries":10}),
                json!({"method":"fs.list","params":{"session_id":"s_1","path":"/srv","recursive":false,"max_entries":10}}),
            ),
            (
                "glob",
                json!({"pattern":"**/*.rs"}),
                json!({"method":"fs.glob","params":{"session_id":"s_1","pattern":"**/*.rs"}}),
            ),
            (
                "stat",
                json!({"path":"/srv"}),
                json!({"method":"fs.stat","params":{"session_id":"s_1","path":"/srv"}}),
            ),
        ];
        for (name, args, want) in cases {
            let req = rexd_request(&ToolCall::new("c", name, args), "s_1").unwrap();
            assert_eq!(serde_json::to_value(&req).unwrap(), want, "{name}");
        }
        assert!(matches!(
            rexd_request(&ToolCall::new("c", "RemoteBash", json!({})), "s"),
            Err(RouteError::NotRexdTool(_))
        ));
        assert!(matches!(
            rexd_request(&ToolCall::new("c", "read", json!({"path": 3})), "s"),
            Err(RouteError::InvalidArgs { .. })
        ));
        // Misspelt arguments are refused, not ignored; positional arrays are not arguments.
        assert!(matches!(
            rexd_request(
                &ToolCall::new("c", "read", json!({"path": "a", "lenght": 3})),
                "s"
            ),
            Err(RouteError::InvalidArgs { .. })
        ));
        assert!(matches!(
            rexd_request(&ToolCall::new("c", "read", json!(["a"])), "s"),
            Err(RouteError::NotAnObject(_))
        ));
        assert!(matches!(
            rexd_request(&ToolCall::new("c", "bash", json!({"command": ""})), "s"),
            Err(RouteError::EmptyCommand)
        ));
    }
}
