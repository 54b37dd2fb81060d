# Bad input never crashes the host or wedges the engine: garbage, over-long and forged lines,
# floods, null objects, calls from other threads.
extends "res://tests/suite.gd"


## The engine's errors while it is installed (OS.add_logger), from any thread.
class ErrorLog extends Logger:
	var mutex := Mutex.new()
	var lines: Array[String] = []

	func _log_error(_function: String, _file: String, _line: int, code: String, rationale: String, _editor_notify: bool, _error_type: int, _script_backtraces: Array[ScriptBacktrace]) -> void:
		mutex.lock()
		lines.append("%s %s" % [code, rationale])
		mutex.unlock()

	func taken() -> Array[String]:
		mutex.lock()
		var copy := lines.duplicate()
		mutex.unlock()
		return copy


func _attached(nick: String) -> DeskRpcClient:
	var client := DeskRpcClient.new()
	client.nick = nick
	client.channel = "#desk"
	client.remote_nick = "deskbot"
	client.auto_poll = false
	tree.root.add_child(client)
	check_eq(client.attach(), OK, "attach")
	return client


func test_garbage_lines_are_counted_and_ignored() -> void:
	var client := _attached("desk")
	var signals: Array = []
	client.request_completed.connect(func(id, text, truncated): signals.append(["completed", id]))
	client.request_failed.connect(func(id, error, message): signals.append(["failed", id, error]))
	var sent: Array[String] = []
	client.line_to_send.connect(func(line): sent.append(line))
	var call := client.remote_bash("uname -a", 30)
	client.poll()
	check(sent.size() >= 1 and sent[-1].begins_with("PRIVMSG #desk :OA1 REQ " + call.id), "the request went out: %s" % [sent])
	var before: Dictionary = client.stats.oa1

	var garbage := [
		"",
		"\u0001\u0002\u0003",
		":deskbot!u@h PRIVMSG #desk :OA1",
		":deskbot!u@h PRIVMSG #desk :OA1 RES",
		":deskbot!u@h PRIVMSG #desk :OA1 RES %s 0 0 zero seq" % call.id,
		":deskbot!u@h PRIVMSG #desk :OA1 RES %s 01 0 leading zero" % call.id,
		":deskbot!u@h PRIVMSG #desk :OA1 RES %s 1 2 more is 0 or 1" % call.id,
		":deskbot!u@h PRIVMSG #desk :OA1 res %s 1 0 lower case" % call.id,
		":deskbot!u@h PRIVMSG #desk :OA1 RES bad/id 1 0 x",
		":deskbot!u@h PRIVMSG #desk :OA1 RES %s 99999999999 0 seq past u32" % call.id,
		":mallory!u@h PRIVMSG #desk :OA1 RES %s 1 0 forged by another nick" % call.id,
		":deskbot!u@h NOTICE #desk :OA1 RES %s 1 0 a notice" % call.id,
		":deskbot!u@h PRIVMSG #elsewhere :OA1 RES %s 1 0 another channel" % call.id,
		":deskbot!u@h PRIVMSG #desk :OA1 RES nosuchid 1 0 unknown id",
		":deskbot!u@h PRIVMSG #desk :" + "x".repeat(20000),
		"x".repeat(100000),
	]
	for line in garbage:
		check_eq(client.feed_line(line), OK, "fed %d bytes" % line.length())
	# A flood of chunks that never finish, for ids nobody asked for.
	for i in 5000:
		client.feed_line(":deskbot!u@h PRIVMSG #desk :OA1 RES flood%d 1 1 part" % i)
	client.poll()
	check_eq(signals, [], "no answer came from garbage")
	check(not call.done, "the request still waits")
	var after: Dictionary = client.stats.oa1
	check(after.malformed_frames > before.malformed_frames, "malformed frames counted: %s" % after.malformed_frames)
	check(after.disallowed_sender > before.disallowed_sender, "another nick counted: %s" % after.disallowed_sender)
	check(after.invalid_lines > before.invalid_lines, "the over-long line counted: %s" % after.invalid_lines)
	check(after.bytes_buffered < 1024 * 1024, "memory stays bounded: %d bytes buffered" % after.bytes_buffered)

	# The real answer still gets through, after all that.
	client.feed_line(":deskbot!u@h PRIVMSG #desk :OA1 RES %s 1 0 Linux\\n" % call.id)
	var result := await finish(call, 2.0)
	check_eq([result.get("ok"), result.get("text")], [true, "Linux\n"], "answered after the garbage")
	client.queue_free()


func test_a_negative_timeout_is_refused_by_the_core_contract() -> void:
	var client := _attached("desk")
	var sent: Array[String] = []
	client.line_to_send.connect(func(line): sent.append(line))
	var result := await finish(client.remote_bash("uname -a", -5), 2.0)
	check_eq([result.get("ok"), result.get("error")], [false, "invalid_arguments"], "refused: %s" % [result])
	check(str(result.get("message")).contains("negative"), "says why: %s" % [result])
	var call_dict := {"id": "c1", "type": "function", "function": {"name": "RemoteBash", "arguments": "{\"command\": \"ls\", \"timeout_sec\": 0}"}}
	result = await finish(RemoteBashTool.run(client, call_dict), 2.0)
	check_eq([result.get("ok"), result.get("error")], [false, "invalid_arguments"], "timeout_sec 0 from the model: %s" % [result])
	client.poll()
	check_eq(sent, [], "nothing was sent")
	client.queue_free()


func test_null_and_wrong_objects() -> void:
	var call_dict := {"id": "c1", "type": "function", "function": {"name": "RemoteBash", "arguments": "{\"command\": \"ls\"}"}}
	var call := RemoteBashTool.run(null, call_dict)
	var result := await finish(call, 2.0)
	check_eq(result.get("error"), "closed", "no client: %s" % [result])
	# The model's tool call still gets its answer, under its own id.
	check_eq([call.id, result.get("id")], ["c1", "c1"], "the failure carries the tool call's id")
	var message := call.tool_message()
	check_eq([message.get("role"), message.get("tool_call_id")], ["tool", "c1"], "a tool message for the model: %s" % [message])
	check(str(message.get("content")).contains("closed"), "it says the desk is closed: %s" % [message])
	result = await finish(RemoteBashTool.run(null, {"id": "c2", "type": "function", "function": null}), 2.0)
	check_eq(result.get("error"), "invalid_arguments", "no client and a call that does not read: %s" % [result])
	check_eq(RemoteBashTool.handles({}), false, "an empty Dictionary is not a call")
	check_eq(RemoteBashTool.definition("nonsense"), {}, "an unknown provider")
	var gate := ToolGate.new()
	check_eq(gate.bind_npc("", "desk-1"), ERR_INVALID_PARAMETER, "an empty npc id")
	check_eq(gate.authorize("npc", {"id": "c", "type": "function", "function": null}).allowed, false, "function: null")
	check_eq(gate.authorize("npc", {"id": "c", "type": "function", "function": {"name": "RemoteBash", "arguments": 42}}).allowed, false, "arguments: 42")


func test_calls_from_other_threads_are_refused() -> void:
	var client := _attached("desk")
	var gate := ToolGate.new()
	var made_here := client.remote_bash("echo made on the main thread", 5)
	var emitted: Array = []
	client.line_to_send.connect(func(line): emitted.append(line))
	gate.tools_changed.connect(func(npc): emitted.append(npc))
	var error_log := ErrorLog.new()
	OS.add_logger(error_log)
	var thread := Thread.new()
	# Typed calls with every argument given: godot-rust 0.5 can make no Variant off the main
	# thread, so an untyped call, or one that leaves an argument to its default, panics in
	# godot-rust's own glue before the method runs (it catches the panic; the caller gets null).
	thread.start(func():
		var got := [client.feed_line(":deskbot!u@h PRIVMSG #desk :hello"), gate.bind_npc("npc", "desk"),
			client.remote_bash("echo from thread", 5), client.cancel("nosuch", "cancelled"),
			made_here.cancel("from a thread")]
		client.poll()
		client.close("bye")
		return got)
	# Untyped: a panic in the thread returns null, which fails the check instead of the script.
	var answers = thread.wait_to_finish()
	OS.remove_logger(error_log)
	check(answers is Array and answers.size() == 5, "the thread finished: %s" % [answers])
	if answers is Array and answers.size() == 5:
		check_eq([answers[0], answers[1], answers[3], answers[4]], [ERR_UNAVAILABLE, ERR_UNAVAILABLE, ERR_UNAVAILABLE, ERR_UNAVAILABLE], "refused off the main thread")
		check(answers[2] == null, "remote_bash gives null off the main thread: %s" % [answers[2]])
	check_eq(emitted, [], "nothing was emitted off the main thread")
	var errors := error_log.taken()
	check(errors.any(func(e): return e.contains("DeskRpcClient.remote_bash: call it from the main thread")), "remote_bash says why: %s" % [errors])
	# A panic in the binding (godot-rust reports it as an error) is a crash averted, not a refusal.
	check(not errors.any(func(e): return e.contains("panic") or e.contains("different thread")), "no panic in the binding: %s" % [errors])
	check_eq(client.in_flight(), 1, "only the call made on the main thread is in flight")
	check(not made_here.done, "a cancel from a thread left it alone")
	check_eq(gate.desk_of("npc"), "", "nothing changed")
	client.queue_free()


func test_negative_settings_are_refused_with_their_value() -> void:
	var client := DeskRpcClient.new()
	tree.root.add_child(client)
	client.reconnect = true
	client.reconnect_first_ms = -1
	check_eq(client.connect_to_server("127.0.0.1", 1), ERR_INVALID_PARAMETER, "reconnect_first_ms -1 refused")
	check(client.last_error_message.contains("-1"), "names -1: %s" % client.last_error_message)
	client.reconnect_first_ms = 500
	client.reconnect_max_ms = -3
	check_eq(client.connect_to_server("127.0.0.1", 1), ERR_INVALID_PARAMETER, "reconnect_max_ms -3 refused")
	check(client.last_error_message.contains("-3"), "names -3: %s" % client.last_error_message)
	client.reconnect_max_ms = 10000
	client.request_timeout_sec = -7
	check_eq(client.connect_to_server("127.0.0.1", 1), ERR_INVALID_PARAMETER, "request_timeout_sec -7 refused, not the 30 s default")
	check(client.last_error_message.contains("request_timeout_sec") and client.last_error_message.contains("-7"), "names it: %s" % client.last_error_message)
	check_eq(client.attach(), ERR_INVALID_PARAMETER, "attach refuses it too")
	check_eq(client.state, "closed", "nothing connected")
	client.queue_free()
	var connection := DeskConnection.new()
	tree.root.add_child(connection)
	connection.reconnect = true
	connection.reconnect_first_ms = -1
	check_eq(connection.connect_to_server("127.0.0.1", 1), ERR_INVALID_PARAMETER, "DeskConnection: reconnect_first_ms -1 refused")
	check(connection.last_error_message.contains("-1"), "DeskConnection names -1: %s" % connection.last_error_message)
	connection.queue_free()


func test_a_refused_connect_changes_nothing() -> void:
	var client := DeskRpcClient.new()
	tree.root.add_child(client)
	client.server_host = "irc.example"
	client.server_port = 6667
	for port in [-1, 70000]:
		check_eq(client.connect_to_server("127.0.0.1", port), ERR_INVALID_PARAMETER, "port %d refused" % port)
		check(client.last_error_message.contains("out of range"), "says why: %s" % client.last_error_message)
		check_eq([client.server_host, client.server_port], ["irc.example", 6667], "port %d: the address is as it was" % port)
	client.remote_nick = ""
	check_eq(client.connect_to_server("127.0.0.1", 6668), ERR_INVALID_PARAMETER, "a bad config refused")
	check_eq([client.server_host, client.server_port], ["irc.example", 6667], "bad config: the address is as it was")
	client.queue_free()
	var connection := DeskConnection.new()
	tree.root.add_child(connection)
	connection.server_host = "irc.example"
	connection.server_port = 6667
	check_eq(connection.connect_to_server("127.0.0.1", -1), ERR_INVALID_PARAMETER, "DeskConnection: port -1 refused")
	check_eq([connection.server_host, connection.server_port], ["irc.example", 6667], "DeskConnection: the address is as it was")
	connection.queue_free()
