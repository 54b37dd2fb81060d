//! The tools deskwire ships: `RemoteBash` (OA1 spec §10) and REXD's logical tools (`bash`,
//! `read`, `write`, `list`, `glob`, `stat`), plus the runtime routing of a logical call to the
//! REXD request that carries it out (`rexd-v1.md` "Runtime Routing Model": the model sees one
//! `read`, the runtime knows which machine it reads on).

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
        remote_bash::DESCRIPTION,
        remote_bash::INPUT_SCHEMA,
    )
    .expect("the RemoteBash schema is a valid object schema")
}

/// Names of REXD's logical tools, in [`rexd_tools`] order.
pub const REXD_TOOL_NAMES: [&str; 6] = ["bash", "read", "write", "list", "glob", "stat"];

/// REXD's logical tools: one surface whatever machine the runtime routes them to.
pub fn rexd_tools() -> Vec<ToolSpec> {
    let spec = |name: &str, description: &str, schema: Value| {
        ToolSpec::new(name, description, schema).expect("built-in schemas are object schemas")
    };
    vec![
        spec(
            "bash",
            "Run a shell command on the current target machine and return its exit code, \
             stdout and stderr. Each call starts a fresh shell; chain steps in one command \
             (cd dir && make). Keep output small (head, tail, rg -n).",
            json!({"type":"object","properties":{
                "command":{"type":"string","description":"The shell command line."},
                "cwd":{"type":"string","description":"Working directory (default: the session's)."},
                "timeout_ms":{"type":"integer","description":"Kill the command after this many milliseconds."}
            },"required":["command"]}),
        ),
        spec(
            "read",
            "Read a text file on the current target machine.",
            json!({"type":"object","properties":{
                "path":{"type":"string","description":"The file."},
                "offset":{"type":"integer","description":"First byte to read."},
                "length":{"type":"integer","description":"Bytes to read at most."}
            },"required":["path"]}),
        ),
        spec(
            "write",
            "Write a text file on the current target machine (replaces it by default).",
            json!({"type":"object","properties":{
                "path":{"type":"string","description":"The file."},
                "content":{"type":"string","description":"The new text."},
                "mode":{"type":"string","enum":["create","replace","append"],"description":"create fails if the file exists; append adds to the end."}
            },"required":["path","content"]}),
        ),
        spec(
            "list",
            "List a directory on the current target machine.",
            json!({"type":"object","properties":{
                "path":{"type":"string","description":"The directory."},
                "recursive":{"type":"boolean","description":"Descend into subdirectories."}
            },"required":["path"]}),
        ),
        spec(
            "glob",
            "Find files by glob pattern (*, ?, [..], {a,b}, ** for any directories) on the \
             current target machine.",
            json!({"type":"object","properties":{
                "pattern":{"type":"string","description":"The glob, e.g. src/**/*.rs."},
                "cwd":{"type":"string","description":"Base directory for a relative pattern."}
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
struct BashArgs {
    command: String,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    length: Option<u64>,
}

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
    #[serde(default)]
    mode: WriteMode,
}

#[derive(Deserialize)]
struct ListArgs {
    path: String,
    #[serde(default)]
    recursive: bool,
}

#[derive(Deserialize)]
struct GlobArgs {
    pattern: String,
    #[serde(default)]
    cwd: Option<String>,
}

#[derive(Deserialize)]
struct StatArgs {
    path: String,
}

/// The REXD request that runs a logical call in `session_id` (the session the runtime opened
/// on the current target). `bash` runs in shell mode: the model writes command lines.
pub fn rexd_request(call: &ToolCall, session_id: &str) -> Result<Request, RouteError> {
    fn args<T: for<'de> Deserialize<'de>>(call: &ToolCall) -> Result<T, RouteError> {
        T::deserialize(&call.args).map_err(|source| RouteError::InvalidArgs {
            tool: call.name.clone(),
            source,
        })
    }
    let session_id = session_id.to_owned();
    Ok(match call.name.as_str() {
        "bash" => {
            let a: BashArgs = args(call)?;
            Request::ExecStart(ExecStartParams {
                session_id,
                program: Program::shell(a.command),
                cwd: a.cwd,
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
                atomic: true,
                ..FsWriteParams::default()
            })
        }
        "list" => {
            let a: ListArgs = args(call)?;
            Request::FsList(FsListParams {
                session_id,
                path: a.path,
                recursive: a.recursive,
                max_entries: None,
            })
        }
        "glob" => {
            let a: GlobArgs = args(call)?;
            Request::FsGlob(FsGlobParams {
                session_id,
                pattern: a.pattern,
                cwd: a.cwd,
                max_matches: None,
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
        assert_eq!(spec.description, remote_bash::DESCRIPTION);
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
                json!({"command":"git status","timeout_ms":500}),
                json!({"method":"exec.start","params":{"session_id":"s_1","shell":true,"command":"git status","timeout_ms":500,"detach":false}}),
            ),
            (
                "read",
                json!({"path":"/srv/a"}),
                json!({"method":"fs.read","params":{"session_id":"s_1","path":"/srv/a","encoding":"utf8"}}),
            ),
            (
                "write",
                json!({"path":"/srv/a","content":"x","mode":"append"}),
                json!({"method":"fs.write","params":{"session_id":"s_1","path":"/srv/a","content":"x","encoding":"utf8","mode":"append","mkdir_parents":false,"atomic":true}}),
            ),
            (
                "list",
                json!({"path":"/srv"}),
                json!({"method":"fs.list","params":{"session_id":"s_1","path":"/srv","recursive":false}}),
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
    }
}
