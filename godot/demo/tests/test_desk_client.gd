# DeskRpcClient and RemoteBashTool against a real IRC server (ngircd) and rexd --irc.
extends "res://tests/suite.gd"


func test_a_call_completes_over_irc() -> void:
	var client := await connected_client("godesk1")
	var completed: Array = []
	client.request_completed.connect(func(id, text, truncated): completed.append([id, text, truncated]))
	var call := client.remote_bash("printf 'hello from %s\\n' \"$(echo rexd)\"")
	check(call.id != "", "the request has an id")
	check_eq(client.in_flight(), 1, "in flight")
	var result: Dictionary = await call.completed
	check_eq(result.ok, true, "ok: %s" % [result])
	check_eq(result.text, "hello from rexd\n", "the command's output")
	check_eq(result.truncated, false, "not truncated")
	check_eq(result.id, call.id, "the result names the request")
	check_eq(completed, [[call.id, "hello from rexd\n", false]], "request_completed")
	check_eq(client.in_flight(), 0, "nothing in flight")
	var stats: Dictionary = client.stats
	check(stats.oa1.frames_out >= 1 and stats.oa1.frames_in >= 1, "stats count frames: %s" % [stats.oa1])
	check(stats.irc.has("lines_in") or not stats.irc.is_empty(), "IRC session stats: %s" % [stats.irc])
	var states: Array = client.get_meta("states")
	# waiting_for_peer only shows when rexd is not in the channel yet at our JOIN.
	check(states.size() >= 3 and states[0] == "registering" and states[1] == "joining" and states[-1] == "ready", "connection_state_changed: %s" % [states])
	check(states.all(func(s): return s in ["registering", "joining", "waiting_for_peer", "ready"]), "known states: %s" % [states])
	var events: Array = client.get_meta("irc_events")
	check(events.has({"registered": {"nick": "godesk1"}}), "irc_event registered: %s" % [events])
	check(events.has({"joined": {"channel": OS.get_environment("DESKWIRE_CHANNEL")}}), "irc_event joined")
	check(events.has({"peer_joined": {"nick": OS.get_environment("DESKWIRE_REMOTE_NICK")}}), "irc_event peer_joined")
	client.close()
	check_eq(client.state, "closed", "closed")
	check_eq(states[-1], "closed", "closed signalled")
	client.queue_free()


func test_output_larger_than_a_frame_and_non_ascii() -> void:
	var client := await connected_client("godesk2")
	# Enough that it takes several frames even compressed (the default).
	var call := client.remote_bash("seq 1 3000; printf 'h\\303\\251 \\342\\234\\223\\n'", 20)
	var result := await finish(call, 25.0)
	check_eq(result.get("ok"), true, "ok: %s" % [result.get("message")])
	var text: String = result.get("text", "")
	check(text.begins_with("1\n2\n3\n") and text.contains("\n3000\n"), "every line arrived (%d bytes)" % text.length())
	check(text.ends_with("hé ✓\n"), "UTF-8 survives chunking: %s" % text.right(12))
	check(client.stats.oa1.frames_in > 1, "it took several frames")
	client.close()
	client.queue_free()


func test_a_timeout_fails_cleanly() -> void:
	var client := await connected_client("godesk3")
	var failed: Array = []
	client.request_failed.connect(func(id, error, message): failed.append([id, error]))
	var slow := client.remote_bash("sleep 8; echo too late", 1)
	var result := await finish(slow, 10.0)
	check_eq(result.get("ok"), false, "failed")
	check_eq(result.get("error"), "timeout", "error code")
	check_eq(failed, [[slow.id, "timeout"]], "request_failed")
	check_eq(client.in_flight(), 0, "the timed-out call is not in flight")
	check_eq(client.stats.oa1.timeouts, 1, "counted")
	# The link is still good: the next call goes through.
	var after := client.remote_bash("echo still here")
	result = await finish(after, 15.0)
	check_eq(result.get("text"), "still here\n", "a later call works: %s" % [result])
	client.close()
	client.queue_free()


func test_a_fraction_of_a_second_is_rounded_up_not_the_default() -> void:
	var client := await connected_client("godesk8")
	# 0.5 s waits 1 s: before, the fraction was cut to 0 and the call waited the default 30 s.
	var slow := client.remote_bash("sleep 8; echo too late", 0.5)
	var result := await finish(slow, 10.0)
	check_eq([result.get("ok"), result.get("error")], [false, "timeout"], "timed out after a second: %s" % [result])
	for bad in [-0.5, NAN, INF]:
		result = await finish(client.remote_bash("echo never", bad), 2.0)
		check_eq([result.get("ok"), result.get("error")], [false, "invalid_arguments"], "timeout %s refused: %s" % [bad, result])
	result = await finish(client.remote_bash("echo whole", 2), 15.0)
	check_eq(result.get("text"), "whole\n", "an int timeout still works: %s" % [result])
	client.close()
	client.queue_free()


func test_output_after_a_nul_byte_is_kept() -> void:
	var client := await connected_client("godesk9")
	var completed: Array = []
	client.request_completed.connect(func(id, text, truncated): completed.append(text))
	var result := await finish(client.remote_bash("printf 'a\\0b\\0c'; echo; printf 'zz'", 10), 15.0)
	# A Godot String ends at a NUL: each becomes U+FFFD and what follows arrives.
	var want := "a\uFFFDb\uFFFDc\nzz"
	check_eq(result.get("text"), want, "the whole output: %s" % [result])
	check_eq(completed, [want], "request_completed carries it too")
	client.close()
	client.queue_free()


func test_cancel() -> void:
	var client := await connected_client("godesk4")
	var call := client.remote_bash("sleep 8; echo never", 20)
	await tree.create_timer(0.5).timeout
	# Both signals come after cancel() returns, request_failed first, as for every failure.
	var order: Array = []
	client.request_failed.connect(func(id, code, _message): order.append("request_failed %s" % code))
	call.completed.connect(func(_result): order.append("completed"))
	check_eq(call.cancel("changed my mind"), OK, "cancel")
	check_eq(order, [], "no signal inside cancel()")
	var result := await finish(call, 2.0)
	check_eq([result.get("ok"), result.get("error"), result.get("message")], [false, "cancelled", "changed my mind"], "cancelled")
	check_eq(order, ["request_failed cancelled", "completed"], "the signals' order")
	check_eq(call.cancel(), ERR_DOES_NOT_EXIST, "twice")
	check_eq(client.in_flight(), 0, "nothing in flight")
	client.close()
	client.queue_free()


func test_remote_bash_tool_runs_a_model_tool_call() -> void:
	var client := await connected_client("godesk5")
	var gate := ToolGate.new()
	gate.bind_npc("npc-1", "desk-1")
	var tool_call: Dictionary = JSON.parse_string('{"id": "call_7", "type": "function", "function": {"name": "RemoteBash", "arguments": "{\\"command\\": \\"echo from the model\\", \\"timeout_sec\\": 10}"}}')
	check_eq(gate.authorize("npc-1", tool_call).allowed, true, "authorized")
	check(RemoteBashTool.handles(tool_call), "handles")
	var call := RemoteBashTool.run(client, tool_call)
	await finish(call, 15.0)
	check_eq(call.tool_message(), {"role": "tool", "tool_call_id": "call_7", "content": "from the model\n"}, "the tool message")
	var anthropic := {"type": "tool_use", "id": "toolu_1", "name": "RemoteBash", "input": {"command": "exit 3"}}
	call = RemoteBashTool.run(client, anthropic, "anthropic")
	await finish(call, 15.0)
	var message := call.tool_message()
	check_eq(message.role, "user", "an Anthropic user message")
	check_eq(message.content[0].tool_use_id, "toolu_1", "answers the call")
	var bad := {"id": "call_8", "type": "function", "function": {"name": "RemoteBash", "arguments": "{\"timeout_sec\": 5}"}}
	call = RemoteBashTool.run(client, bad)
	var result := await finish(call, 2.0)
	check_eq(result.get("error"), "invalid_arguments", "no command")
	var content: Dictionary = JSON.parse_string(call.tool_message().content)
	check_eq([content.ok, content.error], [false, "invalid_arguments"], "the model is told")
	check_eq(RemoteBashTool.definition()["function"]["name"], "RemoteBash", "definition")
	client.close()
	client.queue_free()


func test_attached_to_the_projects_own_irc_link() -> void:
	var address := irc_address()
	var link := preload("res://tests/irc_link.gd").new()
	var channel := OS.get_environment("DESKWIRE_CHANNEL")
	check_eq(link.open(address, "godesk6", channel), OK, "the project's link connects")
	check(await pump_until(link, func(): return link.joined, 10.0), "the project's link joined")
	var client := DeskRpcClient.new()
	client.nick = "godesk6"
	client.channel = channel
	client.remote_nick = OS.get_environment("DESKWIRE_REMOTE_NICK")
	tree.root.add_child(client)
	client.line_to_send.connect(link.send)
	check_eq(client.attach(), OK, "attach")
	check_eq(client.state, "ready", "attached is ready")
	var call := client.remote_bash("echo through the project link")
	var fed := func():
		for line in link.poll():
			client.feed_line(line)
		return call.done
	check(await pump_until(null, fed, 15.0), "completed through fed lines")
	check_eq(call.result.get("text"), "through the project link\n", "output: %s" % [call.result])
	check(client.stats.oa1.lines_in > 0, "fed lines counted")
	check_eq(client.feed_line(""), OK, "an empty line is ignored")
	client.close()
	check_eq(client.state, "closed", "detached")
	check_eq(client.feed_line("PING x"), ERR_UNCONFIGURED, "feed_line after close")
	link.close()
	client.queue_free()


func test_calls_without_a_connection_fail_and_still_complete() -> void:
	var client := DeskRpcClient.new()
	tree.root.add_child(client)
	var failed: Array = []
	client.request_failed.connect(func(id, error, message): failed.append([id, error, message]))
	var call := client.remote_bash("echo x")
	check(not call.done, "completion comes later, so awaiting never misses it")
	check_eq(failed, [], "request_failed comes later too, once the caller has the call")
	check(call.id != "", "a call that never left still has an id")
	var result: Dictionary = await call.completed
	check_eq([result.error, result.id], ["not_connected", call.id], "not connected: %s" % [result])
	check_eq(failed.size(), 1, "one request_failed: %s" % [failed])
	if failed.size() == 1:
		check_eq(failed[0].slice(0, 2), [call.id, "not_connected"], "request_failed names the call and the failure")
		check(failed[0][2].contains("connect_to_server()"), "and says what to call: %s" % failed[0][2])
	# A second call gets an id of its own.
	check(client.remote_bash("echo y").id not in ["", call.id], "ids differ")
	client.config_overrides = {"oa1": {"no_such_option": 1}}
	check_eq(client.connect_to_server(), ERR_INVALID_PARAMETER, "a bad override is refused")
	client.config_overrides = {}
	client.server_port = 70000
	check_eq(client.connect_to_server(), ERR_INVALID_PARAMETER, "a bad port is refused")
	# After a refused connect, the call says why it could not leave.
	result = await finish(client.remote_bash("echo z"), 2.0)
	check_eq(result.get("error"), "not_connected", "still not connected")
	check(str(result.get("message")).contains("port 70000 is out of range"), "with the connect's reason: %s" % [result])
	# Invalid arguments fail the same way, through request_failed with an id.
	failed.clear()
	result = await finish(client.remote_bash("echo x", -1), 2.0)
	check_eq([result.get("error"), failed.size()], ["invalid_arguments", 1], "invalid arguments: %s %s" % [result, failed])
	client.queue_free()


func test_a_call_after_close_fails_closed_through_request_failed() -> void:
	var client := DeskRpcClient.new()
	client.auto_poll = false
	tree.root.add_child(client)
	check_eq(client.attach(), OK, "attach")
	client.close()
	var failed: Array = []
	client.request_failed.connect(func(id, error, _message): failed.append([id, error]))
	var call := client.remote_bash("echo x")
	var result := await finish(call, 2.0)
	check_eq(result.get("error"), "closed", "closed, not never connected: %s" % [result])
	check_eq(failed, [[call.id, "closed"]], "through request_failed")
	client.queue_free()


func test_a_freed_client_with_calls_in_flight_leaves_nothing_behind() -> void:
	var channel := OS.get_environment("DESKWIRE_CHANNEL")
	var watcher := preload("res://tests/irc_link.gd").new()
	check_eq(watcher.open(irc_address(), "watcher", channel), OK, "watcher connects")
	check(await pump_until(watcher, func(): return watcher.joined, 10.0), "watcher joined")
	await tree.process_frame
	var objects_before := Performance.get_monitor(Performance.OBJECT_COUNT)
	var nodes_before := Performance.get_monitor(Performance.OBJECT_NODE_COUNT)

	var client := await connected_client("godesk7")
	var first := client.remote_bash("sleep 6; echo late", 20)
	var second := client.remote_bash("sleep 6; echo later", 20)
	var ids := [first.id, second.id]
	# Both requests reach the channel; pacing lets the CANCELs out at once two seconds later.
	check(await pump_until(watcher, func(): return watcher.lines.filter(func(l): return l.contains("OA1 REQ")).size() >= 2, 10.0), "the watcher saw both requests")
	await tree.create_timer(2.5).timeout
	client.free()
	client = null

	var r1 := await finish(first, 2.0)
	var r2 := await finish(second, 2.0)
	check_eq([r1.get("error"), r2.get("error")], ["closed", "closed"], "calls in flight complete as closed")
	var quit := func(): return watcher.lines.any(func(l): return l.begins_with(":godesk7!") and l.contains(" QUIT"))
	check(await pump_until(watcher, quit, 10.0), "the connection said QUIT")
	for id in ids:
		check(watcher.lines.any(func(l): return l.contains("OA1 CANCEL " + id)), "the remote was told to stop %s" % id)
	first = null
	second = null
	r1 = {}
	r2 = {}
	await tree.process_frame
	await tree.process_frame
	check_eq(Performance.get_monitor(Performance.OBJECT_NODE_COUNT), nodes_before, "no node left")
	check_eq(Performance.get_monitor(Performance.OBJECT_COUNT), objects_before, "no object left")
	watcher.close()


func test_compressed_answers() -> void:
	var client := DeskRpcClient.new()
	client.compression = true
	tree.root.add_child(client)
	var address := irc_address()
	client.server_host = address.get_slice(":", 0)
	client.server_port = int(address.get_slice(":", 1))
	client.nick = "godesk8"
	client.channel = OS.get_environment("DESKWIRE_CHANNEL")
	client.remote_nick = OS.get_environment("DESKWIRE_REMOTE_NICK")
	check_eq(client.connect_to_server(), OK, "connect")
	var call := client.remote_bash("for i in $(seq 1 300); do echo \"line $i of a repetitive answer\"; done", 30)
	var result := await finish(call, 40.0)
	var text: String = result.get("text", "")
	check(text.begins_with("line 1 of a repetitive answer\n") and text.ends_with("line 300 of a repetitive answer\n"), "the whole answer (%d bytes)" % text.length())
	var oa1: Dictionary = client.stats.oa1
	check_eq(oa1.compressed_in, 1, "the answer came compressed")
	# 9.6 KB of text in readable mode takes 40+ frames of 240 bytes.
	check(oa1.frames_in < 20, "in fewer frames: %d" % oa1.frames_in)
	client.close()
	client.queue_free()


func _auth_client(nick: String, secret: String) -> DeskRpcClient:
	var client := DeskRpcClient.new()
	var address := irc_address()
	client.server_host = address.get_slice(":", 0)
	client.server_port = int(address.get_slice(":", 1))
	client.nick = nick
	client.channel = OS.get_environment("DESKWIRE_AUTH_CHANNEL")
	client.remote_nick = OS.get_environment("DESKWIRE_AUTH_NICK")
	client.auth_secret = secret
	tree.root.add_child(client)
	check_eq(client.connect_to_server(), OK, "connect %s" % nick)
	check(await wait_until(func(): return client.state == "ready", 15.0), "%s ready" % nick)
	return client


func test_authenticated_frames() -> void:
	var secret := OS.get_environment("DESKWIRE_AUTH_SECRET")
	check(secret != "", "DESKWIRE_AUTH_SECRET is set")
	var client := await _auth_client("godesk9", secret)
	var result := await finish(client.remote_bash("echo signed and sealed", 10), 15.0)
	check_eq(result.get("text"), "signed and sealed\n", "answered with the shared secret: %s" % [result])
	check_eq(client.stats.oa1.forged, 0, "nothing forged")
	client.close()
	client.queue_free()

	var wrong := await _auth_client("godesk10", secret + "x")
	result = await finish(wrong.remote_bash("echo nope", 2), 5.0)
	check_eq(result.get("error"), "timeout", "a wrong secret gets no answer: %s" % [result])
	wrong.close()
	wrong.queue_free()

	var plain := await _auth_client("godesk11", "")
	result = await finish(plain.remote_bash("echo nope", 2), 5.0)
	check_eq(result.get("error"), "timeout", "no secret gets no answer: %s" % [result])
	plain.close()
	plain.queue_free()


func _tls_client(nick: String, server_name: String, trusted: X509Certificate) -> DeskRpcClient:
	var client := DeskRpcClient.new()
	client.server_host = irc_address().get_slice(":", 0)
	client.server_port = int(OS.get_environment("DESKWIRE_IRC_TLS_PORT"))
	client.use_tls = true
	client.tls_server_name = server_name
	client.tls_trusted_certificate = trusted
	client.nick = nick
	client.channel = OS.get_environment("DESKWIRE_CHANNEL")
	client.remote_nick = OS.get_environment("DESKWIRE_REMOTE_NICK")
	tree.root.add_child(client)
	check_eq(client.connect_to_server(), OK, "connect %s" % nick)
	return client


func test_tls() -> void:
	var cert := X509Certificate.new()
	check_eq(cert.load(OS.get_environment("DESKWIRE_TLS_CERT")), OK, "the server's certificate")
	var client := await _tls_client("godesk12", "localhost", cert)
	check(await wait_until(func(): return client.state == "ready", 15.0), "ready over TLS (state %s)" % client.state)
	var result := await finish(client.remote_bash("echo over tls"), 15.0)
	check_eq(result.get("text"), "over tls\n", "answered over TLS: %s" % [result])
	client.close()
	client.queue_free()

	# A certificate for another name, and one nobody vouches for: no connection, and the
	# call made meanwhile fails instead of hanging.
	for case in [["godesk13", "elsewhere.example", cert], ["godesk14", "localhost", null]]:
		var refused := await _tls_client(case[0], case[1], case[2])
		var call := refused.remote_bash("echo never")
		result = await finish(call, 10.0)
		check_eq(result.get("error"), "disconnected", "%s: the call fails: %s" % [case[1], result])
		check_eq(refused.state, "closed", "%s: closed" % case[1])
		check_eq(refused.last_error, "cant_connect", "%s: last_error" % case[1])
		check("the server's certificate is not signed by a trusted CA or is not for" in refused.last_error_message, "%s: named: %s" % [case[1], refused.last_error_message])
		refused.queue_free()


func test_nothing_listening() -> void:
	var client := DeskRpcClient.new()
	client.server_host = "127.0.0.1"
	client.server_port = 1  # nothing listens on port 1 here
	client.nick = "godesk15"
	tree.root.add_child(client)
	check_eq(client.connect_to_server(), OK, "connecting starts")
	var result := await finish(client.remote_bash("echo never"), 10.0)
	check_eq(result.get("error"), "disconnected", "the call fails: %s" % [result])
	# The reason the connection ended, not only that it did.
	var message: String = result.get("message", "")
	check(message.begins_with("the IRC connection ended before the response: ") and not message.ends_with(": "), "with the reason: %s" % message)
	check_eq(client.state, "closed", "closed")
	# A call made after the connection ended says why it ended, not only that it did.
	var later := await finish(client.remote_bash("echo never"), 10.0)
	check_eq(later.get("error"), "closed", "a later call: %s" % [later])
	check(str(later.get("message", "")).contains("connect to 127.0.0.1:1 failed"), "with the reason: %s" % [later])
	client.queue_free()
