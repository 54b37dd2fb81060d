# Bad input never crashes the host or wedges the engine: garbage, over-long and forged lines,
# floods, null objects, calls from other threads.
extends "res://tests/suite.gd"


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
	check_eq(RemoteBashTool.handles({}), false, "an empty Dictionary is not a call")
	check_eq(RemoteBashTool.definition("nonsense"), {}, "an unknown provider")
	var gate := ToolGate.new()
	check_eq(gate.bind_npc("", "desk-1"), ERR_INVALID_PARAMETER, "an empty npc id")
	check_eq(gate.authorize("npc", {"id": "c", "type": "function", "function": null}).allowed, false, "function: null")
	check_eq(gate.authorize("npc", {"id": "c", "type": "function", "function": {"name": "RemoteBash", "arguments": 42}}).allowed, false, "arguments: 42")


func test_calls_from_other_threads_are_refused() -> void:
	var client := _attached("desk")
	var gate := ToolGate.new()
	var emitted: Array = []
	client.line_to_send.connect(func(line): emitted.append(line))
	gate.tools_changed.connect(func(npc): emitted.append(npc))
	var thread := Thread.new()
	thread.start(func():
		return [client.feed_line(":deskbot!u@h PRIVMSG #desk :hello"), gate.bind_npc("npc", "desk")])
	var answers: Array = thread.wait_to_finish()
	check_eq(answers, [ERR_UNAVAILABLE, ERR_UNAVAILABLE], "refused off the main thread")
	check_eq(emitted, [], "nothing was emitted off the main thread")
	check_eq(gate.desk_of("npc"), "", "nothing changed")
	client.queue_free()
