# What a user gets wrong, and what the IRC server or the remote does, reaches GDScript as a code
# and the core's words, never as a bare timeout: against a real IRC server (ngircd), with
# tests/irc_link.gd playing channel operator or remote where rexd cannot.
extends "res://tests/suite.gd"

## What a user saw in each case, printed after the run (see summary()).
var seen: Array[String] = []


## The messages, as a user meets them, printed at the end of the run.
func summary() -> Array:
	return seen.map(func(line): return "failures: " + line)


## Collects the warnings Godot reports (Logger, Godot 4.5+).
class Warnings extends Logger:
	var seen: Array[String] = []

	func _log_error(_function: String, _file: String, _line: int, code: String, rationale: String, _editor_notify: bool, error_type: int, _script_backtraces: Array[ScriptBacktrace]) -> void:
		if error_type == ERROR_TYPE_WARNING:
			seen.append(rationale if rationale != "" else code)


## A client for the suite's server in `channel`, waiting for `remote`; not connected yet.
func _client(nick: String, channel: String, remote: String) -> DeskRpcClient:
	var address := irc_address()
	var client := DeskRpcClient.new()
	client.server_host = address.get_slice(":", 0)
	client.server_port = int(address.get_slice(":", 1))
	client.nick = nick
	client.channel = channel
	client.remote_nick = remote
	var events: Array = []
	client.irc_event.connect(func(event): events.append(event))
	client.set_meta("irc_events", events)
	tree.root.add_child(client)
	return client


## An IRC link of our own in `channel`, joined (the first one in a channel is its operator).
func _link(nick: String, channel: String) -> RefCounted:
	var link := preload("res://tests/irc_link.gd").new()
	check_eq(link.open(irc_address(), nick, channel), OK, "%s connects" % nick)
	check(await pump_until(link, func(): return link.joined, 10.0), "%s joined %s" % [nick, channel])
	return link


## The first event of `kind` the client reported, or {}.
func _event(client: DeskRpcClient, kind: String) -> Dictionary:
	for event in client.get_meta("irc_events"):
		if event.has(kind):
			return event[kind]
	return {}


func test_the_remote_must_be_named_and_the_config_is_checked_first() -> void:
	var client := DeskRpcClient.new()
	tree.root.add_child(client)
	check_eq([client.nick, client.channel, client.remote_nick], ["desk", "#desk", "rexd"], "the defaults are rexd --irc's")
	client.remote_nick = ""
	check_eq(client.connect_to_server("127.0.0.1", 1), ERR_INVALID_PARAMETER, "no remote: refused")
	check_eq(client.last_error, "invalid_config", "last_error")
	var message: String = client.last_error_message
	seen.append("remote_nick = \"\": %s" % message)
	check(message.begins_with("remote_nick: ") and message.contains("`rexd`") and message.contains("\"*\""), "says what to set: %s" % message)
	check_eq(client.state, "closed", "nothing connected")
	check_eq(client.attach(), ERR_INVALID_PARAMETER, "attach refuses it too")
	client.remote_nick = "*"
	client.channel = "desk"
	check_eq(client.connect_to_server(), ERR_INVALID_PARAMETER, "a channel without its #")
	seen.append("channel = \"desk\": %s" % client.last_error_message)
	check(client.last_error_message.contains("desk"), "names the channel: %s" % client.last_error_message)
	client.channel = "#desk"
	client.nick = "a b"
	check_eq(client.connect_to_server(), ERR_INVALID_PARAMETER, "a nick the server would rename")
	check(client.last_error_message.contains("a b"), "names the nick: %s" % client.last_error_message)
	client.nick = "godesk20"
	check_eq(client.connect_to_server("127.0.0.1", 1), OK, "\"*\" is the explicit opt-out")
	check_eq([client.last_error, client.last_error_message], ["", ""], "cleared by a call that worked")
	client.close()
	client.queue_free()


func test_the_address_as_arguments_and_what_it_waits_for() -> void:
	var address := irc_address()
	var client := DeskRpcClient.new()
	client.nick = "godesk21"
	client.channel = OS.get_environment("DESKWIRE_CHANNEL")
	client.remote_nick = OS.get_environment("DESKWIRE_REMOTE_NICK")
	tree.root.add_child(client)
	check_eq(client.waiting_for(), "", "nothing to wait for before connecting")
	check_eq(client.connect_to_server(address.get_slice(":", 0), int(address.get_slice(":", 1))), OK, "connect_to_server(host, port)")
	check_eq([client.server_host, client.server_port], [address.get_slice(":", 0), int(address.get_slice(":", 1))], "the arguments set the properties")
	check(await wait_until(func(): return client.state == "ready", 15.0), "ready (state %s)" % client.state)
	check_eq(client.waiting_for(), "", "waits for nothing when ready")
	check(client.members().has(OS.get_environment("DESKWIRE_REMOTE_NICK")), "the remote is a member: %s" % [client.members()])
	var result := await finish(client.remote_bash("echo addressed"), 15.0)
	check_eq(result.get("text"), "addressed\n", "answered: %s" % [result])
	client.close()
	client.queue_free()


func test_a_remote_that_never_comes_fails_not_ready() -> void:
	var channel := OS.get_environment("DESKWIRE_CHANNEL")
	var client := _client("godesk22", channel, "nobody")
	client.config_overrides = {"oa1": {"ready_timeout_ms": 1500}}
	var failed: Array = []
	client.request_failed.connect(func(id, error, message): failed.append([id, error, message]))
	check_eq(client.connect_to_server(), OK, "connect")
	check(await wait_until(func(): return client.state == "waiting_for_peer", 15.0), "waiting_for_peer (state %s)" % client.state)
	var waiting := client.waiting_for()
	seen.append("waiting_for(): %s" % waiting)
	var rexd := OS.get_environment("DESKWIRE_REMOTE_NICK")
	check(waiting.contains("`nobody`") and waiting.contains(channel) and waiting.contains(rexd), "waiting_for says for whom and who is there: %s" % waiting)
	var call := client.remote_bash("echo never")
	var result := await finish(call, 15.0)
	check_eq(result.get("error"), "not_ready", "not_ready: %s" % [result])
	var message: String = result.get("message", "")
	seen.append("%s: %s" % [result.get("error"), message])
	check(message.contains("`nobody`") and message.contains(rexd), "the message says what it waited for and who was there: %s" % message)
	check_eq(failed, [[call.id, "not_ready", message]], "request_failed carries the same")
	check_eq(client.state, "waiting_for_peer", "still waiting")
	client.close()
	client.queue_free()


func test_a_refused_join_is_an_event_and_fails_the_calls_at_once() -> void:
	var channel := "#godot-invite-only"
	var op := await _link("goop1", channel)
	op.send("MODE %s +i" % channel)
	check(await pump_until(op, func(): return op.lines.any(func(l): return l.contains("MODE %s +i" % channel)), 10.0), "the channel is invite only")
	var client := _client("godesk23", channel, "goop1")
	check_eq(client.connect_to_server(), OK, "connect")
	var call := client.remote_bash("echo never", 60)
	var result := await finish(call, 15.0)
	check_eq(result.get("error"), "join_failed", "join_failed, not a timeout: %s" % [result])
	check(String(result.get("message", "")).contains("473"), "with the numeric: %s" % [result])
	var event := _event(client, "join_failed")
	seen.append("%s: %s; irc_event %s; waiting_for(): %s" % [result.get("error"), result.get("message"), {"join_failed": event}, client.waiting_for()])
	check_eq([event.get("channel"), event.get("numeric")], [channel, "473"], "irc_event join_failed: %s" % [event])
	check(String(event.get("text", "")) != "", "with the server's text: %s" % [event])
	check_eq(client.state, "joining", "it tries again later")
	check(client.waiting_for().contains("473"), "waiting_for says what the server said: %s" % client.waiting_for())
	client.close()
	client.queue_free()
	op.close()


func test_a_taken_nick_is_an_event() -> void:
	var channel := OS.get_environment("DESKWIRE_CHANNEL")
	var holder := await _link("godesk24", channel)
	var client := _client("godesk24", channel, OS.get_environment("DESKWIRE_REMOTE_NICK"))
	check_eq(client.connect_to_server(), OK, "connect")
	check(await wait_until(func(): return not _event(client, "nick_refused").is_empty(), 15.0), "nick_refused reported")
	var event := _event(client, "nick_refused")
	seen.append("irc_event %s" % {"nick_refused": event})
	check_eq([event.get("nick"), event.get("numeric"), event.get("next")], ["godesk24", "433", "godesk24_"], "nick_refused: %s" % [event])
	check(String(event.get("text", "")) != "", "with the server's text: %s" % [event])
	check(await wait_until(func(): return not _event(client, "registered").is_empty(), 15.0), "registered")
	check_eq(_event(client, "registered").get("nick"), "godesk24_", "under the next nick")
	client.close()
	client.queue_free()
	holder.close()


func test_a_kick_fails_the_call_in_flight() -> void:
	var channel := "#godot-kick"
	var op := await _link("goop2", channel)
	var client := _client("godesk25", channel, "goop2")
	check_eq(client.connect_to_server(), OK, "connect")
	check(await wait_until(func(): return client.state == "ready", 15.0), "ready with goop2 there")
	var call := client.remote_bash("echo never answered", 60)
	check(await pump_until(op, func(): return op.lines.any(func(l): return l.contains("OA1 REQ " + call.id)), 10.0), "the request reached the channel")
	op.send("KICK %s godesk25 :desk closed" % channel)
	var result := await finish(call, 15.0)
	check_eq(result.get("error"), "kicked", "kicked, not a timeout: %s" % [result])
	seen.append("%s: %s" % [result.get("error"), result.get("message")])
	check(String(result.get("message", "")).contains("goop2"), "says who: %s" % [result])
	check_eq(_event(client, "kicked").get("reason"), "desk closed", "irc_event kicked: %s" % [client.get_meta("irc_events")])
	client.close()
	client.queue_free()
	op.close()


func test_a_remote_that_leaves_fails_the_call_peer_left() -> void:
	var channel := "#godot-peer-left"
	var remote := await _link("goremote", channel)
	var client := _client("godesk26", channel, "goremote")
	client.config_overrides = {"peer_grace_ms": 300}
	check_eq(client.connect_to_server(), OK, "connect")
	check(await wait_until(func(): return client.state == "ready", 15.0), "ready with goremote there")
	var call := client.remote_bash("echo never answered", 60)
	check(await pump_until(remote, func(): return remote.lines.any(func(l): return l.contains("OA1 REQ " + call.id)), 10.0), "the request reached the remote")
	remote.send("PART %s :gone" % channel)
	var result := await finish(call, 15.0)
	check_eq(result.get("error"), "peer_left", "peer_left, not a timeout: %s" % [result])
	seen.append("%s: %s" % [result.get("error"), result.get("message")])
	check(String(result.get("message", "")).contains("goremote"), "says who: %s" % [result])
	check_eq(_event(client, "peer_left").get("nick"), "goremote", "irc_event peer_left")
	check_eq(client.state, "waiting_for_peer", "waits for it again")
	client.close()
	client.queue_free()
	remote.close()


func test_a_client_outside_the_tree_warns_and_pumps_by_hand() -> void:
	var address := irc_address()
	var logger := Warnings.new()
	OS.add_logger(logger)
	var client := DeskRpcClient.new()   # never given to add_child: _process never runs
	client.nick = "godesk27"
	client.channel = OS.get_environment("DESKWIRE_CHANNEL")
	client.remote_nick = OS.get_environment("DESKWIRE_REMOTE_NICK")
	check_eq(client.connect_to_server(address.get_slice(":", 0), int(address.get_slice(":", 1))), OK, "connect")
	var call := client.remote_bash("echo pumped by hand")
	OS.remove_logger(logger)
	var warned := logger.seen.filter(func(w): return w.contains("not in the scene tree"))
	seen.append_array(warned.map(func(w): return "warning: " + w))
	check_eq(warned.size(), 1, "warned once: %s" % [logger.seen])
	check(warned.size() == 1 and warned[0].contains("add_child") and warned[0].contains("poll()"), "says what to do: %s" % [warned])
	await tree.create_timer(1.0).timeout
	check_eq(client.state, "registering", "nothing moved without poll()")
	check(await pump_until(client, func(): return call.done, 15.0), "poll() by hand completes it")
	check_eq(call.result.get("text"), "pumped by hand\n", "answered: %s" % [call.result])
	client.close()
	client.free()

	var inside := DeskRpcClient.new()
	tree.root.add_child(inside)
	logger = Warnings.new()
	OS.add_logger(logger)
	inside.remote_nick = "*"
	inside.connect_to_server("127.0.0.1", 1)
	inside.remote_bash("echo x")
	OS.remove_logger(logger)
	var in_tree := logger.seen.filter(func(w): return w.contains("scene tree"))
	check_eq(in_tree.size(), 0, "no warning in the tree: %s" % [in_tree])
	inside.queue_free()


func test_a_call_nothing_pumps_fails_not_polled_after_its_timeout() -> void:
	var address := irc_address()
	var outside := DeskRpcClient.new()   # never given to add_child: _process never runs
	outside.nick = "godesk28"
	outside.channel = OS.get_environment("DESKWIRE_CHANNEL")
	outside.remote_nick = OS.get_environment("DESKWIRE_REMOTE_NICK")
	check_eq(outside.connect_to_server(address.get_slice(":", 0), int(address.get_slice(":", 1))), OK, "connect")
	var failed: Array = []
	outside.request_failed.connect(func(id, error, message): failed.append([id, error, message]))
	var started := Time.get_ticks_msec()
	var call := outside.remote_bash("echo never sent", 1)
	await tree.process_frame
	check(not call.done, "it waits for its timeout (1 s) first")
	var result := await finish(call, 5.0)
	var waited := Time.get_ticks_msec() - started
	check_eq(result.get("error"), "not_polled", "named: %s" % [result])
	check(str(result.get("message")).contains("add_child()"), "says what to do: %s" % [result])
	check_eq(failed.map(func(f): return f.slice(0, 2)), [[call.id, "not_polled"]], "through request_failed")
	# The wait is the scene tree's timer for the call's timeout; printed, not asserted.
	seen.append("a call outside the tree, after %d ms: %s" % [waited, result.get("message")])
	outside.close()
	outside.free()

	# In the tree with auto_poll off and no poll(): the same, saying so.
	var unpolled := DeskRpcClient.new()
	unpolled.auto_poll = false
	tree.root.add_child(unpolled)
	check_eq(unpolled.attach(), OK, "attach")
	result = await finish(unpolled.remote_bash("echo x", 1), 5.0)
	check_eq(result.get("error"), "not_polled", "auto_poll off: %s" % [result])
	check(str(result.get("message")).contains("auto_poll is false"), "says why: %s" % [result])
	# Polled, the engine's own timeout applies (nobody answers an attached client here).
	var polled := unpolled.remote_bash("echo y", 1)
	check(await pump_until(unpolled, func(): return polled.done, 5.0), "the polled call ended")
	check_eq(polled.result.get("error"), "timeout", "the engine's timeout, not not_polled: %s" % [polled.result])
	unpolled.queue_free()


func test_secrets_are_masked_and_never_saved_in_a_scene() -> void:
	var client := DeskRpcClient.new()
	client.name = "Desk"
	client.nick = "saved-nick"
	client.auth_secret = "auth-secret-4711"
	client.sasl_password = "sasl-password-4711"
	client.server_password = "server-password-4711"
	var props := {}
	for p in client.get_property_list():
		props[p.name] = p
	for name in ["auth_secret", "sasl_password", "server_password"]:
		check_eq(props[name].hint, PROPERTY_HINT_PASSWORD, "%s is masked in the inspector" % name)
		check(props[name].usage & PROPERTY_USAGE_EDITOR != 0, "%s shows in the inspector" % name)
		check(props[name].usage & PROPERTY_USAGE_STORAGE == 0, "%s is not stored" % name)
	var scene := PackedScene.new()
	check_eq(scene.pack(client), OK, "pack")
	var path := "user://secret_check.tscn"
	check_eq(ResourceSaver.save(scene, path), OK, "save")
	var text := FileAccess.get_file_as_string(path)
	check(text.contains("saved-nick"), "the scene keeps the other properties: %s" % text)
	check(not text.contains("4711"), "no secret in the .tscn: %s" % text)
	var loaded: DeskRpcClient = load(path).instantiate()
	check_eq(loaded.auth_secret, "", "a loaded scene has no secret: set it from code")
	loaded.free()
	client.free()
	DirAccess.remove_absolute(ProjectSettings.globalize_path(path))


func test_a_required_sasl_login_the_server_cannot_do_is_named_and_not_retried() -> void:
	# The suite's ngircd has no SASL: a required login ends the connection, says why, and is not
	# tried again even with reconnect on; one that is not required goes on unauthenticated.
	var client := _client("gosasl1", OS.get_environment("DESKWIRE_CHANNEL"), OS.get_environment("DESKWIRE_REMOTE_NICK"))
	client.sasl_username = "bob"
	client.sasl_password = "hunter22"
	client.reconnect = true
	client.reconnect_first_ms = 100
	check_eq(client.connect_to_server(), OK, "connect_to_server")
	check(await wait_until(func(): return client.last_error == "login_failed", 10.0), "login_failed (last_error %s)" % client.last_error)
	check("SASL" in client.last_error_message, client.last_error_message)
	seen.append("required SASL on ngircd: %s" % client.last_error_message)
	await tree.create_timer(1.0).timeout
	check_eq(client.state, "closed", "not tried again")
	var optional := _client("gosasl2", OS.get_environment("DESKWIRE_CHANNEL"), OS.get_environment("DESKWIRE_REMOTE_NICK"))
	optional.sasl_username = "bob"
	optional.sasl_password = "hunter22"
	optional.sasl_required = false
	check_eq(optional.connect_to_server(), OK, "connect_to_server, login not required")
	check(await wait_until(func(): return optional.state == "ready", 15.0), "ready unauthenticated (state %s)" % optional.state)
	check(not _event(optional, "login_failed").is_empty(), "the failed login is an irc_event: %s" % [optional.get_meta("irc_events")])
	client.queue_free()
	optional.close()
	optional.queue_free()
