# The README's GDScript: every gdscript block of its Godot section, which godot/run_tests.sh
# writes to DESKWIRE_README_GD under the name its first line gives, runs here as a reader would
# use it: desk_node.gd against the `rexd --irc` the README says to start (#desk, nick rexd,
# --allow-from desk), secret_desk.gd against the rexd that shares a secret (from its file, then
# from the environment), office.gd against the rexd serving ten channels on one connection (three
# of them, and a person asking for !status in one), npc_tools.gd with a model's message. A README change that breaks a block
# fails here; a block this file does not know fails too, so every block is run.
extends "res://tests/suite.gd"

const KNOWN := ["desk_node.gd", "secret_desk.gd", "office.gd", "npc_tools.gd"]


## The block named `name`, compiled; null (and a failure) when it is missing or does not parse.
func _block(name: String) -> GDScript:
	var dir := OS.get_environment("DESKWIRE_README_GD")
	check(dir != "", "DESKWIRE_README_GD is not set: godot/run_tests.sh extracts the README's scripts")
	var path := dir.path_join(name)
	if not FileAccess.file_exists(path):
		check(false, "the README's Godot section has no gdscript block named %s" % name)
		return null
	var script := GDScript.new()
	script.source_code = FileAccess.get_file_as_string(path)
	var err := script.reload()
	check_eq(err, OK, "%s (the README's block) compiles" % name)
	return script if err == OK else null


func _names(tools: Array) -> Array:
	return tools.map(func(t): return t["function"]["name"])


func test_every_block_is_run_here() -> void:
	var dir := OS.get_environment("DESKWIRE_README_GD")
	var found := Array(DirAccess.get_files_at(dir)) if dir != "" else []
	check(not found.is_empty(), "the README's blocks were extracted to %s" % dir)
	for name in found:
		check(name in KNOWN, "the README's block %s has no test in test_readme.gd" % name)
	for name in KNOWN:
		check(name in found, "the README lost its block %s" % name)


func test_desk_node_runs_uname_through_rexd() -> void:
	var script := _block("desk_node.gd")
	if script == null:
		return
	var address := irc_address()
	var node: Node = script.new()
	node.irc_host = address.get_slice(":", 0)
	node.irc_port = int(address.get_slice(":", 1))
	var desk: DeskRpcClient = node.desk
	var answers: Array = []
	desk.request_completed.connect(func(_id, text, _truncated): answers.append(text))
	desk.request_failed.connect(func(_id, error, message): answers.append("%s: %s" % [error, message]))
	var states: Array = []
	desk.connection_state_changed.connect(func(state): states.append(state))
	tree.root.add_child(node)
	check(await wait_until(func(): return not answers.is_empty(), 40.0), "the README's desk got an answer (states %s)" % [states])
	# rexd runs on the machine that started the suite; its uname -a is the expected answer.
	check_eq(answers, [OS.get_environment("DESKWIRE_UNAME") + "\n"], "uname -a from rexd")
	check_eq(desk.remote_nick, "rexd", "the README's remote is rexd --irc's default nick")
	check(await wait_until(func(): return desk.state == "closed", 10.0), "it closed (state %s)" % desk.state)
	check_eq(states.front() if not states.is_empty() else "", "registering", "states: %s" % [states])
	node.queue_free()
	await tree.process_frame


## secret_desk.gd's node for the suite's rexd with a secret, connected and ready; null on failure.
func _secret_desk(script: GDScript, nick: String, secret_file: String) -> Node:
	var address := irc_address()
	var node: Node = script.new()
	node.irc_host = address.get_slice(":", 0)
	node.irc_port = int(address.get_slice(":", 1))
	node.secret_file = secret_file
	var desk: DeskRpcClient = node.desk
	desk.nick = nick
	desk.channel = OS.get_environment("DESKWIRE_AUTH_CHANNEL")
	desk.remote_nick = OS.get_environment("DESKWIRE_AUTH_NICK")
	tree.root.add_child(node)
	check(await wait_until(func(): return desk.state == "ready", 15.0), "%s is ready (state %s)" % [nick, desk.state])
	return node


func test_secret_desk_reads_its_secret_from_a_file_or_the_environment() -> void:
	var script := _block("secret_desk.gd")
	if script == null:
		return
	var secret_file := OS.get_environment("DESKWIRE_AUTH_SECRET_FILE")
	check(secret_file != "", "DESKWIRE_AUTH_SECRET_FILE is set (godot/run_tests.sh)")
	var node := await _secret_desk(script, "gosecret1", secret_file)
	var result := await finish(node.desk.remote_bash("echo read from the file", 10), 15.0)
	check_eq(result.get("text"), "read from the file\n", "the file's secret is rexd's: %s" % [result])
	node.desk.close()
	node.queue_free()

	OS.set_environment("DESKWIRE_SECRET", OS.get_environment("DESKWIRE_AUTH_SECRET"))
	node = await _secret_desk(script, "gosecret2", "user://no-such.secret")
	OS.unset_environment("DESKWIRE_SECRET")
	result = await finish(node.desk.remote_bash("echo from the environment", 10), 15.0)
	check_eq(result.get("text"), "from the environment\n", "the environment's secret: %s" % [result])
	node.desk.close()
	node.queue_free()
	await tree.process_frame


func test_office_runs_three_desks_on_one_connection() -> void:
	var script := _block("office.gd")
	if script == null:
		return
	var address := irc_address()
	var channels := OS.get_environment("DESKWIRE_OFFICE_CHANNELS").split(" ", false).slice(0, 3)
	var node: Node = script.new()
	node.irc_host = address.get_slice(":", 0)
	node.irc_port = int(address.get_slice(":", 1))
	node.office_nick = "gooffice"
	node.remote_nick = OS.get_environment("DESKWIRE_OFFICE_NICK")
	node.desk_channels.assign(Array(channels))
	tree.root.add_child(node)
	check(await wait_until(func(): return node.answers.size() == 3, 40.0), "every desk answered: %s" % [node.answers])
	for channel in channels:
		check_eq(node.answers.get(channel), "the desk in %s\n" % channel, "the desk in %s got its own answer" % channel)
	var office: DeskConnection = node.office
	check_eq(office.channels(), PackedStringArray(channels), "one connection carries the three desks")
	var link := preload("res://tests/irc_link.gd").new()
	check_eq(link.open(address, "gperson", channels[1]), OK, "a person connects")
	await pump_until(link, func(): return link.joined, 10.0)
	link.send("PRIVMSG %s :!status" % channels[1])
	var said := "PRIVMSG %s :3 desks, 3 answered" % channels[1]
	var answered := await pump_until(link, func(): return link.lines.any(func(l): return l.contains(said)), 15.0)
	check(answered, "office.gd answered !status in the channel")
	link.close()
	node.queue_free()
	await tree.process_frame


func test_npc_tools_lists_gates_and_runs_tool_calls() -> void:
	var script := _block("npc_tools.gd")
	if script == null:
		return
	var node: Node = script.new()
	node.desk = await connected_client("goreadme")
	tree.root.add_child(node)
	var gate: ToolGate = node.gate
	var displaced: Array = []
	gate.npc_displaced.connect(func(npc_id, desk_id, by): displaced.append([npc_id, desk_id, by]))

	check_eq(_names(node.tool_schemas("npc-1")), ["wave"], "standing: only the always-listed tool")
	node.sit("npc-1", "desk-1")
	check_eq(_names(node.tool_schemas("npc-1")), ["RemoteBash", "wave", "type"], "seated: RemoteBash and the while-bound tool")
	var message := {"role": "assistant", "content": null, "tool_calls": [
		{"id": "call_1", "type": "function", "function": {"name": "RemoteBash", "arguments": JSON.stringify({"command": "echo from the readme", "timeout_sec": 10})}},
		{"id": "call_2", "type": "function", "function": {"name": "wave", "arguments": JSON.stringify({"who": "ada"})}},
		{"id": "call_3", "type": "function", "function": {"name": "rm_rf", "arguments": "{}"}},
	]}
	var replies: Array = await node.run_tool_calls("npc-1", message)
	check_eq(replies.size(), 3, "one reply per call: %s" % [replies])
	if replies.size() == 3:
		check_eq(replies[0], {"role": "tool", "tool_call_id": "call_1", "content": "from the readme\n"}, "RemoteBash ran on rexd")
		check_eq(replies[1], {"role": "tool", "tool_call_id": "call_2", "content": "done"}, "the project's tool")
		check_eq([replies[2].tool_call_id, String(replies[2].content).contains("RemoteBash")], ["call_3", true], "an unknown tool is refused with the list: %s" % [replies[2]])

	node.sit("npc-2", "desk-1")
	check_eq(displaced, [["npc-1", "desk-1", "npc-2"]], "npc_displaced")
	replies = await node.run_tool_calls("npc-1", {"tool_calls": [message.tool_calls[0]]})
	check(replies.size() == 1 and String(replies[0].content).contains("not run"), "npc-1 stood up: refused, not run: %s" % [replies])
	node.stand("npc-2")
	check_eq(_names(node.tool_schemas("npc-2")), ["wave"], "stood up")
	node.desk.close()
	node.desk.queue_free()
	node.queue_free()
	await tree.process_frame
