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
	gate.tools_changed.connect(func(npc_id): changed.append(npc_id))
	gate.bind_npc("alice", "desk-1")
	gate.bind_npc("bob", "desk-1")
	check(changed.has("alice") and changed.has("bob"), "both changed: %s" % [changed])
	check_eq(gate.visible_tool_names("alice"), PackedStringArray(), "alice stood up")
	check_eq(gate.visible_tool_names("bob"), PackedStringArray(["RemoteBash"]), "bob sits")
	check_eq(gate.npc_at("desk-1"), "bob", "the desk's NPC")
	check_eq(gate.desk_of("alice"), "", "alice has no desk")


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
