//! `deskwire.tools`: the tool layer (registry, desk gating, policy, approvals) and the
//! translation to and from the OpenAI, Anthropic and Gemini APIs.

use deskwire::ids::IdGenerator;
use deskwire::tools::providers::{
    self, Limits, Provider, ProviderResponse, ToolChoice, ToolRequest,
};
use deskwire::tools::retrieval::{EmbeddingError, HostScores, ToolIndex as ToolIndexCore};
use deskwire::tools::{
    self as core, Context, Origin, Policy, Registry, ToolCall, ToolResult, ToolSpec, Visibility,
    builtin,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};

use crate::convert::{self, from_py, serde_event, to_py, value_of};
use crate::errors::{self, raise};
use crate::oa1::BULK_BYTES;
use crate::slot::Slot;

/// A provider from its name: `openai_chat`, `openai_responses`, `anthropic`, `gemini`.
fn provider(name: &str) -> PyResult<Provider> {
    Provider::from_name(name).ok_or_else(|| {
        errors::local(
            "invalid_value",
            format!("provider {name:?}: use openai_chat, openai_responses, anthropic or gemini"),
        )
    })
}

fn choice(value: Option<&Bound<'_, PyAny>>) -> PyResult<ToolChoice> {
    let Some(value) = value else {
        return Ok(ToolChoice::Auto);
    };
    if value.is_none() {
        return Ok(ToolChoice::Auto);
    }
    if let Ok(s) = value.cast::<PyString>() {
        return match &*s.to_cow()? {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            name => Ok(ToolChoice::Tool(name.to_owned())),
        };
    }
    if let Ok(d) = value.cast::<PyDict>()
        && let Some(tool) = d.get_item("tool")?
    {
        return Ok(ToolChoice::Tool(tool.extract()?));
    }
    Err(errors::local(
        "invalid_value",
        "choice: \"auto\", \"none\", \"required\", a tool name or {\"tool\": name}",
    ))
}

/// Bytes of a provider body given as bytes, str, or a JSON value (dict, SDK object).
fn body_bytes(body: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = body.cast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = body.cast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    Ok(value_of("response body", body)?.to_string().into_bytes())
}

fn request_fields<'py>(
    py: Python<'py>,
    provider_name: &str,
    request: &ToolRequest<'_>,
) -> PyResult<Bound<'py, PyAny>> {
    let map = providers::request_tools(provider(provider_name)?, request);
    convert::py_of_value(py, &serde_json::Value::Object(map))
}

/// The tool fields of a request body for `provider` (`tools`, `tool_choice`, `toolConfig`, ...)
/// for the given tool specs: merge them into the SDK call (`client.chat.completions.create(
/// model=..., messages=..., **fields)`).
#[pyfunction]
#[pyo3(signature = (provider, tools, *, choice = None, catalog = None, parallel_tool_calls = None, strict = false))]
fn request_tools<'py>(
    py: Python<'py>,
    provider: &str,
    tools: &Bound<'py, PyAny>,
    choice: Option<&Bound<'py, PyAny>>,
    catalog: Option<&Bound<'py, PyAny>>,
    parallel_tool_calls: Option<bool>,
    strict: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let specs: Vec<ToolSpec> = from_py("tools", tools)?;
    let catalog: Option<Vec<ToolSpec>> = catalog.map(|c| from_py("catalog", c)).transpose()?;
    let request = ToolRequest {
        tools: specs.iter().collect(),
        catalog: catalog.as_ref().map(|c| c.iter().collect()),
        choice: self::choice(choice)?,
        parallel_tool_calls,
        strict,
    };
    request_fields(py, provider, &request)
}

/// A whole (non-streamed) response of `provider` — bytes, str, a dict, or the SDK's own
/// response object (anything with `model_dump`) — normalised to
/// `{"segments": [...], "stop_reason": ...}`. Raises `ProtocolError` (not JSON, not the
/// provider's shape, too large) or `RemoteError` (the provider reported an error). The ids
/// Gemini leaves out come from the OS's entropy (`seed=` fixes them, for tests).
#[pyfunction]
#[pyo3(signature = (provider, body, *, seed = None))]
fn parse_response<'py>(
    py: Python<'py>,
    provider: &str,
    body: &Bound<'py, PyAny>,
    seed: Option<u64>,
) -> PyResult<Bound<'py, PyAny>> {
    let provider = self::provider(provider)?;
    let bytes = body_bytes(body)?;
    let mut ids = IdGenerator::new(seed_or_os(seed)?);
    let parsed = if bytes.len() >= BULK_BYTES {
        py.detach(|| providers::parse_response(provider, &bytes, &mut ids))
    } else {
        providers::parse_response(provider, &bytes, &mut ids)
    };
    to_py(py, &parsed.map_err(raise)?)
}

/// The provider's assistant turn to append to the conversation for a parsed response
/// (`{"segments": ...}`), with the tool calls and reasoning echoed as the API wants them.
#[pyfunction]
fn assistant_message<'py>(
    py: Python<'py>,
    provider: &str,
    response: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let response: ProviderResponse = from_py("response", response)?;
    let value = providers::assistant_turn(self::provider(provider)?, &response);
    convert::py_of_value(py, &value)
}

/// The tool results in the provider's shape, to append after the assistant turn: a list of
/// `tool` messages (OpenAI Chat), a list of `function_call_output` items (Responses), one
/// `user` message of `tool_result` blocks (Anthropic), one `user` content of
/// `functionResponse` parts (Gemini, which needs the `response` the calls came in).
/// `results` are `{"callId", "content", "isError"?}`.
#[pyfunction]
#[pyo3(signature = (provider, results, response = None))]
fn tool_results<'py>(
    py: Python<'py>,
    provider: &str,
    results: &Bound<'py, PyAny>,
    response: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let results: Vec<ToolResult> = from_py("results", results)?;
    let provider = self::provider(provider)?;
    // Only Gemini needs the turn the results answer (it names each function from it).
    let previous = match (provider, response) {
        (Provider::Gemini, None) => {
            return Err(errors::local(
                "invalid_value",
                "gemini answers calls by name: pass the response the calls came in",
            ));
        }
        (_, Some(response)) => from_py("response", response)?,
        (_, None) => ProviderResponse::default(),
    };
    let value = providers::tool_results(provider, &previous, &results)
        .map_err(|e| errors::local("invalid_value", e.to_string()))?;
    convert::py_of_value(py, &value)
}

/// Assembles a streamed response (server-sent events) of `provider`: `feed` the raw bytes of
/// the HTTP body as they come (any split), or `push_data` the data of one event (bytes, str, a
/// dict, or an SDK event object); `finish` gives the normalised response.
#[pyclass(module = "deskwire.tools", name = "StreamParser")]
pub struct StreamParser(Slot<providers::StreamParser>);

#[pymethods]
impl StreamParser {
    #[new]
    #[pyo3(signature = (provider, *, seed = None, max_bytes = None, max_items = None))]
    fn new(
        provider: &str,
        seed: Option<u64>,
        max_bytes: Option<usize>,
        max_items: Option<usize>,
    ) -> PyResult<Self> {
        let mut limits = Limits::default();
        if let Some(n) = max_bytes {
            limits.max_bytes = n;
        }
        if let Some(n) = max_items {
            limits.max_items = n;
        }
        Ok(StreamParser(Slot::new(
            providers::StreamParser::new(self::provider(provider)?, limits, seed_or_os(seed)?),
            "stream parser",
        )))
    }

    /// Raw bytes of the event stream.
    fn feed(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let result = if data.len() >= BULK_BYTES {
            py.detach(|| self.0.with(|p| p.feed(data)))?
        } else {
            self.0.with(|p| p.feed(data))?
        };
        result.map_err(raise)
    }

    /// The data of one event: bytes, str, a dict or an SDK event object.
    fn push_data(&self, data: &Bound<'_, PyAny>) -> PyResult<()> {
        let bytes = body_bytes(data)?;
        self.0.with(|p| p.push_data(&bytes))?.map_err(raise)
    }

    /// Ends the stream: the normalised response `{"segments": [...], "stop_reason": ...}`.
    /// The parser is closed afterwards.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let parser = self
            .0
            .take()
            .ok_or_else(|| errors::closed("stream parser"))?;
        to_py(py, &parser.finish().map_err(raise)?)
    }
}

/// The tool layer for many agents: what each may see (`RemoteBash` only while its NPC sits at
/// the desk), whether a call may run under the policy, and the approvals in between.
///
/// `Toolbox(policy=None, builtins=True)`: `policy` in the core's shape (`{"default":
/// "allow", "rules": [...]}`; `None` allows everything); `builtins` registers `RemoteBash` and
/// REXD's `bash`, `read`, `write`, `list`, `glob`, `stat`. Approval and call ids come from the
/// OS's entropy (`seed=` fixes them, for tests).
#[pyclass(module = "deskwire.tools", name = "Toolbox")]
pub struct Toolbox(Slot<core::Toolbox>);

#[pymethods]
impl Toolbox {
    #[new]
    #[pyo3(signature = (policy = None, *, seed = None, builtins = true, config = None))]
    fn new(
        policy: Option<&Bound<'_, PyAny>>,
        seed: Option<u64>,
        builtins: bool,
        config: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let policy = match policy {
            Some(p) if !p.is_none() => from_py::<Policy>("policy", p)?,
            _ => Policy::allow_all(),
        };
        let config = match config {
            Some(c) => from_py("toolbox config", c)?,
            None => core::toolbox::Config::default(),
        };
        let registry = if builtins {
            Registry::with_builtins()
        } else {
            Registry::new()
        };
        Ok(Toolbox(Slot::new(
            core::Toolbox::new(registry, policy, config, seed_or_os(seed)?),
            "toolbox",
        )))
    }

    /// Registers a tool `{"name", "description", "input_schema"}`; `visibility` is `"always"`
    /// or the core's shape (e.g. `{"bound_npc": ...}`).
    #[pyo3(signature = (spec, visibility = None))]
    fn register(
        &self,
        spec: &Bound<'_, PyAny>,
        visibility: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let spec: ToolSpec = from_py("tool spec", spec)?;
        let visibility: Visibility = match visibility {
            Some(v) => from_py("visibility", v)?,
            None => Visibility::Always,
        };
        self.0
            .with(|t| t.register(spec, visibility))?
            .map_err(raise)
    }

    /// Sets what `agent` is doing (`{"bound_npc_id": ..., "target": ..., "cwd": ...}`); a change
    /// of its visible tools queues a `ToolsChanged` event.
    fn set_context(&self, agent: &str, context: &Bound<'_, PyAny>) -> PyResult<()> {
        let context: Context = from_py("context", context)?;
        self.0
            .with(|t| t.set_context(agent, context))?
            .map_err(raise)
    }

    /// Binds `agent` to the desk of `npc_id` (its NPC sits down): `RemoteBash` appears.
    fn bind(&self, agent: &str, npc_id: &str) -> PyResult<()> {
        self.0
            .with(|t| t.set_context(agent, Context::bound_to(npc_id)))?
            .map_err(raise)
    }

    /// Unbinds `agent` (its NPC stood up): `RemoteBash` disappears.
    fn unbind(&self, agent: &str) -> PyResult<()> {
        self.0
            .with(|t| t.set_context(agent, Context::default()))?
            .map_err(raise)
    }

    /// Forgets `agent` (its NPC left the office); `True` if it was known. At most
    /// `config["max_agents"]` (1024) agents are remembered at once.
    fn remove_agent(&self, agent: &str) -> PyResult<bool> {
        self.0.with(|t| t.remove_agent(agent))
    }

    /// The tool specs `agent` may see now.
    fn visible_tools<'py>(&self, py: Python<'py>, agent: &str) -> PyResult<Bound<'py, PyAny>> {
        let specs: Vec<ToolSpec> = self
            .0
            .with(|t| t.visible_tools(agent).into_iter().cloned().collect())?;
        to_py(py, &specs)
    }

    /// The fields to pass to `provider`'s SDK for `agent` now (`tools=`, `tool_choice=`, ...):
    /// `client.chat.completions.create(model=..., messages=..., **toolbox.tool_request(agent,
    /// "openai_chat"))`. `keep_list` sends the full stable list restricted to the visible tools
    /// where the API can (cache-friendly).
    #[pyo3(signature = (agent, provider, *, choice = None, keep_list = false, parallel_tool_calls = None, strict = false))]
    // The Python keyword arguments, one each.
    #[allow(clippy::too_many_arguments)]
    fn tool_request<'py>(
        &self,
        py: Python<'py>,
        agent: &str,
        provider: &str,
        choice: Option<&Bound<'py, PyAny>>,
        keep_list: bool,
        parallel_tool_calls: Option<bool>,
        strict: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let choice = self::choice(choice)?;
        let map = self.0.with(|t| {
            let mut request = t.tool_request(agent, keep_list);
            request.choice = choice;
            request.parallel_tool_calls = parallel_tool_calls;
            request.strict = strict;
            Provider::from_name(provider).map(|p| providers::request_tools(p, &request))
        })?;
        let Some(map) = map else {
            return Err(self::provider(provider)
                .err()
                .unwrap_or_else(|| errors::local("invalid_value", "provider")));
        };
        convert::py_of_value(py, &serde_json::Value::Object(map))
    }

    /// Whether `call` (`{"id", "name", "args"}`) may run for `agent`, changing nothing: the
    /// core's authorization (`{"kind": "allowed" | "needs_approval" | "denied" | "unknown",
    /// ...}`).
    #[pyo3(signature = (agent, call, origin = "model"))]
    fn authorize<'py>(
        &self,
        py: Python<'py>,
        agent: &str,
        call: &Bound<'py, PyAny>,
        origin: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let call: ToolCall = from_py("call", call)?;
        let origin = origin_of(py, origin)?;
        to_py(py, &self.0.with(|t| t.authorize(agent, &call, origin))?)
    }

    /// What to do with `call` now: `tools.Run()`, `tools.Refuse(observation)` (send it back
    /// as the call's error result) or `tools.Pending(approval_id)` (a human decides:
    /// `ApprovalDecided` follows).
    #[pyo3(signature = (now_ms, agent, call, origin = "model"))]
    fn check_call<'py>(
        &self,
        py: Python<'py>,
        now_ms: u64,
        agent: &str,
        call: &Bound<'py, PyAny>,
        origin: &str,
    ) -> PyResult<Bound<'py, PyAny>> {
        let call: ToolCall = from_py("call", call)?;
        let origin = origin_of(py, origin)?;
        let verdict = self
            .0
            .with(|t| t.check_call(now_ms, agent, &call, origin))?
            .map_err(raise)?;
        serde_event(py, "tools.verdict", &verdict)
    }

    /// A human answered approval `{"id", "approved", "remember"?, "reason"?}` (`approved` a bool; `remember` applies the same answer to such calls from now on); returns the settlement.
    fn respond<'py>(
        &self,
        py: Python<'py>,
        now_ms: u64,
        response: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let response: core::ApprovalResponse = from_py("approval response", response)?;
        let decided = self
            .0
            .with(|t| t.respond(now_ms, &response))?
            .map_err(raise)?;
        to_py(py, &decided)
    }

    /// Withdraws the waiting approval `id`.
    fn cancel_approval<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        let decided = self.0.with(|t| t.cancel_approval(id))?.map_err(raise)?;
        to_py(py, &decided)
    }

    /// The waiting approvals.
    fn pending_approvals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let pending: Vec<core::ApprovalRequest> =
            self.0.with(|t| t.pending_approvals().cloned().collect())?;
        to_py(py, &pending)
    }

    /// Parses a slash command (`/bash ls -la`) into a call of a registered tool, with an id of
    /// its own (`seed=` makes the id from that seed instead, for tests).
    #[pyo3(signature = (line, *, seed = None))]
    fn parse_slash<'py>(
        &self,
        py: Python<'py>,
        line: &str,
        seed: Option<u64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let call = self.0.with(|t| match seed {
            Some(seed) => core::slash::parse(line, t.registry(), &mut IdGenerator::new(seed)),
            None => t.parse_slash(line),
        })?;
        match call {
            Ok(call) => to_py(py, &call),
            Err(e) => {
                let code = match serde_json::to_value(&e) {
                    Ok(serde_json::Value::String(s)) => s,
                    Ok(serde_json::Value::Object(o)) => {
                        o.keys().next().cloned().unwrap_or_default()
                    }
                    _ => "slash_error".to_owned(),
                };
                Err(errors::local(&code, e.to_string()))
            }
        }
    }

    /// The deadline of the last `Timeout` passed (approvals time out).
    fn handle_timeout(&self, now_ms: u64) -> PyResult<()> {
        self.0.with(|t| t.handle_timeout(now_ms))
    }

    /// An event (`ToolsChanged`, `ApprovalRequested`, `ApprovalDecided`) or a `Timeout`.
    fn poll_output<'py>(&self, py: Python<'py>, now_ms: u64) -> PyResult<Bound<'py, PyAny>> {
        match self.0.with(|t| t.poll_output(now_ms))? {
            core::Output::Event(event) => serde_event(py, "tools", &event),
            core::Output::Timeout(at) => convert::timeout(py, at),
            other => Err(errors::local(
                "unknown_event",
                format!("an output this binding does not know: {other:?}"),
            )),
        }
    }
}

fn origin_of(py: Python<'_>, name: &str) -> PyResult<Origin> {
    from_py("origin", PyString::new(py, name).as_any())
}

/// A search index over tools (`docs/tools.md`, "Retrieval"): with many tools, offer the
/// model only the best few for the user's intent. BM25 over names and descriptions, optionally
/// blended with the host's own scores or embeddings. Built from tool specs (`{"name",
/// "description", "input_schema"}`), e.g. `Toolbox.visible_tools(agent)`.
#[pyclass(module = "deskwire.tools", name = "ToolIndex")]
pub struct ToolIndex(Slot<ToolIndexCore>);

#[pymethods]
impl ToolIndex {
    #[new]
    fn new(tools: &Bound<'_, PyAny>) -> PyResult<Self> {
        let specs: Vec<ToolSpec> = from_py("tools", tools)?;
        let index = ToolIndexCore::new(&specs.iter().collect::<Vec<_>>());
        Ok(ToolIndex(Slot::new(index, "tool index")))
    }

    /// Stores tool `name`'s embedding (a sequence of floats), compared by cosine with a
    /// `query_embedding` given to `top_n`. Every embedding of an index has the first one's
    /// dimension; a tool the index does not hold, an empty embedding, a value that is not
    /// finite and another dimension raise `LocalError` (`invalid_value`).
    fn set_embedding(&self, name: &str, embedding: Vec<f32>) -> PyResult<()> {
        self.0
            .with(|index| index.set_embedding(name, embedding))?
            .map_err(embedding_error)
    }

    /// The `n` best tools for `query`, best first, as `(name, score)` pairs. Alone, the score is
    /// BM25 and only tools sharing a word with the query come back. With `scores` (tool name →
    /// 0..1, computed by the host) or `query_embedding` (compared with `set_embedding`'s), the
    /// score is `lexical_weight` × BM25 normalised to 0..1 plus the rest × the host's score.
    #[pyo3(signature = (query, n = 5, *, scores = None, query_embedding = None, lexical_weight = 0.5))]
    fn top_n(
        &self,
        query: &str,
        n: usize,
        scores: Option<std::collections::HashMap<String, f64>>,
        query_embedding: Option<Vec<f32>>,
        lexical_weight: f64,
    ) -> PyResult<Vec<(String, f64)>> {
        let host = match (scores, query_embedding) {
            (None, None) => None,
            (Some(scores), None) => Some(HostScores::Scores(scores.into_iter().collect())),
            (None, Some(embedding)) => Some(HostScores::QueryEmbedding(embedding)),
            (Some(_), Some(_)) => {
                return Err(errors::local(
                    "invalid_value",
                    "give scores or query_embedding, not both",
                ));
            }
        };
        if !lexical_weight.is_finite() {
            return Err(errors::local(
                "invalid_value",
                "lexical_weight must be a finite number",
            ));
        }
        let ranked = self
            .0
            .with(|index| match &host {
                None => Ok(index.top_n(query, n)),
                Some(host) => index.top_n_hybrid(query, n, host, lexical_weight),
            })?
            .map_err(embedding_error)?;
        Ok(ranked.into_iter().map(|s| (s.name, s.score)).collect())
    }
}

/// An embedding the index cannot compare: the caller's value (`invalid_value`).
fn embedding_error(e: EmbeddingError) -> PyErr {
    errors::local("invalid_value", e.to_string())
}

/// The REXD request that runs a model's call of one of REXD's logical tools (`bash`, `read`,
/// `write`, `list`, `glob`, `stat`) in `session_id`, as `(method, params)` for
/// `RexdClient.call`. `LocalError` (`not_rexd_tool`) for another tool; `ProtocolError`
/// (`invalid_args`) when the model's arguments do not fit the tool (answer it with an error
/// result).
#[pyfunction]
fn rexd_request<'py>(
    py: Python<'py>,
    call: &Bound<'py, PyAny>,
    session_id: &str,
) -> PyResult<(String, Bound<'py, PyAny>)> {
    let call: ToolCall = from_py("call", call)?;
    let request = builtin::rexd_request(&call, session_id).map_err(raise)?;
    let mut value = serde_json::to_value(&request)
        .map_err(|e| errors::local("unserializable", e.to_string()))?;
    let method = value["method"].as_str().unwrap_or_default().to_owned();
    let params = value
        .get_mut("params")
        .map(serde_json::Value::take)
        .unwrap_or_default();
    Ok((method, convert::py_of_value(py, &params)?))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rexd_request, m)?)?;
    m.add_class::<ToolIndex>()?;
    m.add_function(wrap_pyfunction!(request_tools, m)?)?;
    m.add_function(wrap_pyfunction!(parse_response, m)?)?;
    m.add_function(wrap_pyfunction!(assistant_message, m)?)?;
    m.add_function(wrap_pyfunction!(tool_results, m)?)?;
    m.add_class::<StreamParser>()?;
    m.add_class::<Toolbox>()?;
    m.add("REMOTE_BASH", deskwire::oa1::remote_bash::TOOL_NAME)?;
    Ok(())
}

/// `seed`, else 64 bits from the OS's entropy: ids two processes make never meet.
fn seed_or_os(seed: Option<u64>) -> PyResult<u64> {
    seed.map_or_else(crate::oa1::os_seed, Ok)
}
