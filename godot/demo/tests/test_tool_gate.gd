# ToolGate: desk binding drives what the model sees and may call.
extends "res://tests/suite.gd"


func _names(tools: Array) -> Array:
	return tools.map(func(t): return t["function"]["name"])


func test_bind_and_unbind_toggle_remote_bash_and_emit_tools_changed() -> void:
	var gate := ToolGate.new()
	var changed: Array = []
	gate.tools_changed.connect(func(npc_id): changed.append(npc_id))
	check_eq(gate.visible_tools("npc-1"), [] as Array[Dictionary], "nothing before binding")

	check_eq(gate.bind_npc("npc-1", "desk-1"), OK, "bind_npc")
	check_eq(changed, ["npc-1"], "tools_changed on bind")
	var tools := gate.visible_tools("npc-1")
	check_eq(_names(tools), ["RemoteBash"], "RemoteBash listed while bound")
	check_eq(tools[0]["type"], "function", "OpenAI Chat shape")
	check_eq(tools[0]["function"]["parameters"]["required"], ["command"], "the spec's schema")
	check_eq(gate.visible_tools("npc-2"), [] as Array[Dictionary], "another NPC sees nothing")
	check_eq(gate.desk_of("npc-1"), "desk-1", "desk_of")
	check_eq(gate.npc_at("desk-1"), "npc-1", "npc_at")

	check_eq(gate.unbind_npc("npc-1"), OK, "unbind_npc")
	check_eq(changed, ["npc-1", "npc-1"], "tools_changed on unbind")
	check_eq(gate.visible_tools("npc-1"), [] as Array[Dictionary], "RemoteBash gone after unbinding")
	check_eq(gate.unbind_npc("npc-1"), ERR_DOES_NOT_EXIST, "unbinding twice")
	check_eq(changed.size(), 2, "no tools_changed for a no-op")


func test_one_npc_per_desk() -> void:
	var gate := ToolGate.new()
	var changed: Array = []
	var displaced: Array = []
	gate.tools_changed.connect(func(npc_id): changed.append(npc_id))
	# The handler reads the gate (it is settled by then); disconnected at the end, since a
	# lambda that holds the gate, connected to the gate, would keep it alive.
	var on_displaced := func(npc_id, desk_id, by): displaced.append([npc_id, desk_id, by, gate.desk_of(npc_id), gate.npc_at(desk_id)])
	gate.npc_displaced.connect(on_displaced)
	gate.bind_npc("alice", "desk-1")
	check_eq(gate.bind_npc("bob", "desk-1"), OK, "bob takes the desk")
	check(changed.has("alice") and changed.has("bob"), "both changed: %s" % [changed])
	check_eq(displaced, [["alice", "desk-1", "bob", "", "bob"]], "npc_displaced")
	check_eq(gate.visible_tool_names("alice"), PackedStringArray(), "alice stood up")
	check_eq(gate.visible_tool_names("bob"), PackedStringArray(["RemoteBash"]), "bob sits")
	check_eq(gate.npc_at("desk-1"), "bob", "the desk's NPC")
	check_eq(gate.desk_of("alice"), "", "alice has no desk")
	gate.bind_npc("bob", "desk-1")
	gate.bind_npc("bob", "desk-2")
	gate.bind_npc("alice", "desk-1")
	check_eq(displaced.size(), 1, "sitting down again, moving, or taking a free desk displaces nobody: %s" % [displaced])
	gate.npc_displaced.disconnect(on_displaced)


func test_authorize_refuses_remote_bash_for_an_unbound_npc() -> void:
	var gate := ToolGate.new()
	# What a model's message carries, parsed by Godot's JSON (numbers become floats).
	var call: Dictionary = JSON.parse_string('{"id": "call_1", "type": "function", "function": {"name": "RemoteBash", "arguments": "{\\"command\\": \\"uname -a\\", \\"timeout_sec\\": 5}"}}')
	var verdict := gate.authorize("npc-1", call)
	check_eq(verdict.allowed, false, "refused while unbound")
	check_eq(verdict.reason, "not_visible", "reason")
	check(String(verdict.observation).contains("not run"), "observation for the model: %s" % verdict.observation)

	gate.bind_npc("npc-1", "desk-1")
	verdict = gate.authorize("npc-1", call)
	check_eq(verdict.allowed, true, "allowed while bound: %s" % [verdict])
	verdict = gate.authorize("npc-2", call)
	check_eq(verdict.allowed, false, "another NPC is refused")

	gate.unbind_npc("npc-1")
	verdict = gate.authorize("npc-1", call)
	check_eq(verdict.allowed, false, "refused again after unbinding")


func test_authorize_reads_bad_calls_as_refusals() -> void:
	var gate := ToolGate.new()
	gate.bind_npc("npc-1", "desk-1")
	var bad_args := {"id": "c", "type": "function", "function": {"name": "RemoteBash", "arguments": "{not json"}}
	check_eq(gate.authorize("npc-1", bad_args).reason, "invalid_arguments", "malformed arguments")
	var no_command := {"id": "c", "type": "function", "function": {"name": "RemoteBash", "arguments": "{}"}}
	check_eq(gate.authorize("npc-1", no_command).reason, "invalid_arguments", "missing command")
	var unknown := {"id": "c", "type": "function", "function": {"name": "rm_rf", "arguments": "{}"}}
	var verdict := gate.authorize("npc-1", unknown)
	check_eq(verdict.kind, "unknown", "unknown tool")
	check(String(verdict.observation).contains("RemoteBash"), "names the tools it has: %s" % verdict.observation)
	check_eq(gate.authorize("npc-1", {"hello": "world"}).kind, "unreadable", "not a call")
	var vector := {"id": "c", "type": "function", "function": {"name": "RemoteBash", "arguments": Vector2(1, 2)}}
	verdict = gate.authorize("npc-1", vector)
	check_eq(verdict.kind, "unreadable", "a Vector2 has no JSON form")
	check(String(verdict.observation).contains("$.function.arguments"), "the path: %s" % verdict.observation)


func test_providers_and_project_tools() -> void:
	var gate := ToolGate.new()
	check_eq(gate.register_tool({"name": "wave", "description": "Wave at someone.", "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}}}), OK, "register_tool")
	check_eq(gate.register_tool({"name": "wave"}), ERR_ALREADY_EXISTS, "duplicate")
	check_eq(gate.register_tool({"name": "bad name"}), ERR_INVALID_PARAMETER, "invalid name")
	check_eq(_names(gate.visible_tools("npc-1")), ["wave"], "a project tool is always listed")
	gate.bind_npc("npc-1", "desk-1")
	check_eq(_names(gate.visible_tools("npc-1")), ["RemoteBash", "wave"], "registration order")
	var anthropic := gate.visible_tools("npc-1", "anthropic")
	check_eq(anthropic[0]["name"], "RemoteBash", "Anthropic shape")
	check(anthropic[0].has("input_schema"), "Anthropic input_schema")
	var gemini := gate.visible_tools("npc-1", "gemini")
	check_eq(gemini.size(), 1, "Gemini: one functionDeclarations entry")
	check_eq(gemini[0]["functionDeclarations"].size(), 2, "both tools declared")
	var fields := gate.request_tools("npc-1", "openai_responses")
	check_eq(fields["tools"].size(), 2, "Responses tools")
	gate.provider = "anthropic"
	var call := {"type": "tool_use", "id": "toolu_1", "name": "RemoteBash", "input": {"command": "ls"}}
	check_eq(gate.authorize("npc-1", call).allowed, true, "an Anthropic call with provider = anthropic")
	check_eq(gate.read_tool_call(call), {"id": "toolu_1", "name": "RemoteBash", "args": {"command": "ls"}}, "read_tool_call")
	gate.provider = "nonsense"
	check_eq(gate.provider, "anthropic", "an unknown provider keeps the old one")
	check(gate.unregister_tool("wave"), "unregister_tool")
	check_eq(gate.visible_tool_names("npc-1"), PackedStringArray(["RemoteBash"]), "wave gone")


const POLICY := {"default": "allow", "rules": [
	{"tool": "RemoteBash", "when": {"commands": ["rm -rf *"]}, "action": {"deny": "nothing is deleted from a desk"}},
	{"tool": "RemoteBash", "when": {"commands": ["sudo *"]}, "action": {"ask": "high"}},
	{"tool": "*", "when": {"outside": ["/srv/app"]}, "action": {"ask": "medium"}},
]}


func _bash(command: String) -> Dictionary:
	return {"id": "c1", "type": "function", "function": {"name": "RemoteBash", "arguments": JSON.stringify({"command": command})}}


func test_a_policy_denies_and_asks() -> void:
	var gate := ToolGate.new()
	gate.policy = POLICY
	var written: Dictionary = gate.policy
	check_eq(written.get("rules", []).size(), 3, "the policy reads back: %s" % [written])
	gate.bind_npc("npc-1", "desk-1")
	check_eq(gate.authorize("npc-1", _bash("uptime")), {"allowed": true, "kind": "allowed"}, "allowed")
	var denied := gate.authorize("npc-1", _bash("cd /tmp && rm -rf build"))
	check_eq([denied.allowed, denied.kind, denied.reason, denied.message], [false, "denied", "policy", "nothing is deleted from a desk"], "denied: %s" % [denied])
	check(String(denied.observation).contains("not run"), "an observation for the model")
	var ask := gate.authorize("npc-1", _bash("sudo reboot"))
	check_eq([ask.allowed, ask.kind, ask.tier], [false, "needs_approval", "high"], "asks a human: %s" % [ask])
	check_eq(gate.authorize("npc-1", _bash("sudo reboot"), "user").allowed, true, "the player typed it: no approval")
	check_eq(gate.authorize("npc-1", _bash("rm -rf /"), "user").reason, "policy", "a denial holds for the player too")
	# An invalid policy is refused and the old one stays.
	gate.policy = {"default": "maybe"}
	gate.policy = {"default": "allow", "rules": [{"tool": "*", "when": {"outside": ["relative/root"]}, "action": "allow"}]}
	check_eq(gate.policy, written, "the old policy stays")


func test_slash_commands_become_user_calls() -> void:
	var gate := ToolGate.new()
	var typed := gate.parse_slash("/RemoteBash uptime -p")
	check_eq(typed.call.name, "RemoteBash", "the call: %s" % [typed])
	check_eq(typed.call.args, {"command": "uptime -p"}, "the rest of the line is the command")
	check_eq(gate.authorize("npc-1", typed.call, "user", "deskwire").reason, "not_visible", "not while unbound")
	gate.bind_npc("npc-1", "desk-1")
	check_eq(gate.authorize("npc-1", typed.call, "user", "deskwire").allowed, true, "allowed while bound")
	var json := gate.parse_slash('/RemoteBash {"command": "uptime", "timeout_sec": 5}')
	check_eq(json.call.args, {"command": "uptime", "timeout_sec": 5}, "JSON arguments")
	check_eq(gate.parse_slash("hello there"), {"error": "not_a_command", "message": "not a slash command"}, "chat is not a command")
	var unknown := gate.parse_slash("/dance")
	check_eq(unknown.error, "unknown_command", "an unknown command")
	check(String(unknown.message).contains("/RemoteBash"), "the message names the commands: %s" % unknown.message)
	check_eq(gate.parse_slash("/RemoteBash").error, "missing_argument", "no command")
	check_eq(gate.authorize("npc-1", typed.call, "admin", "deskwire").kind, "unreadable", "an unknown origin")


func test_an_npc_context_survives_binding() -> void:
	var gate := ToolGate.new()
	gate.policy = POLICY
	check_eq(gate.register_rexd_tools(), OK, "register_rexd_tools")
	check_eq(gate.visible_tool_names("npc-1"), PackedStringArray(["bash", "read", "write", "list", "glob", "stat"]), "REXD's tools, always")
	check_eq(gate.register_rexd_tools(), ERR_ALREADY_EXISTS, "twice")
	gate.provider = "deskwire"
	var read := {"id": "c", "name": "read", "args": {"path": "notes.txt"}}
	check_eq(gate.set_context("npc-1", {"cwd": "/home/npc"}), OK, "set_context")
	check_eq(gate.authorize("npc-1", read).kind, "needs_approval", "outside /srv/app")
	check_eq(gate.set_context("npc-1", {"cwd": "/srv/app"}), OK, "set_context")
	check_eq(gate.authorize("npc-1", read).kind, "allowed", "inside /srv/app")
	gate.bind_npc("npc-1", "desk-1")
	check_eq(gate.authorize("npc-1", read).kind, "allowed", "the cwd stays when it sits down")
	check_eq(gate.visible_tool_names("npc-1")[0], "RemoteBash", "and it is bound")
	check_eq(gate.set_context("npc-1", {"cwd": "/srv/app", "flags": ["admin"]}), OK, "a new context")
	check_eq(gate.visible_tool_names("npc-1")[0], "RemoteBash", "keeps the binding")
	check_eq(gate.set_context("npc-1", {"cwd": "/home/npc"}), OK, "set_context while bound")
	gate.unbind_npc("npc-1")
	check_eq(gate.authorize("npc-1", read).kind, "needs_approval", "the cwd stays when it stands up")
	check_eq(gate.set_context("npc-1", {}), OK, "an empty context")
	# With no cwd a relative path is not placed anywhere, so no root rule applies.
	check_eq(gate.authorize("npc-1", read).kind, "allowed", "the cwd is forgotten")
	check_eq(gate.set_context("npc-1", {"bound_npc_id": "npc-1"}), ERR_INVALID_PARAMETER, "binding is bind_npc's")
	check_eq(gate.set_context("npc-1", {"desk": "d"}), ERR_INVALID_PARAMETER, "an unknown key")
	check_eq(gate.set_context("npc-1", {"cwd": 5}), ERR_INVALID_PARAMETER, "a wrong type")
