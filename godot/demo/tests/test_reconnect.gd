# Links that die and come back: DeskRpcClient with `reconnect` through a proxy the test cuts
# (the link lost) or freezes (a server that stops answering), against the suite's ngircd and
# rexd --irc, in the real engine.
extends "res://tests/suite.gd"

var seen: Array[String] = []


func summary() -> Array:
	return seen.map(func(line): return "reconnect: " + line)


## A proxy in the tree in front of the suite's server.
func _proxy() -> Node:
	var proxy: Node = preload("res://tests/tcp_proxy.gd").new()
	tree.root.add_child(proxy)
	check_eq(proxy.open(irc_address()), OK, "the proxy listens")
	return proxy


## A client with reconnect on, through `proxy`, ready (rexd in the channel).
func _client_via(proxy: Node, nick: String, overrides: Dictionary = {}) -> DeskRpcClient:
	var client := DeskRpcClient.new()
	client.server_host = "127.0.0.1"
	client.server_port = proxy.port
	client.nick = nick
	client.channel = OS.get_environment("DESKWIRE_CHANNEL")
	client.remote_nick = OS.get_environment("DESKWIRE_REMOTE_NICK")
	client.reconnect = true
	client.reconnect_first_ms = 200
	client.reconnect_max_ms = 1000
	client.config_overrides = overrides
	var states: Array = []
	client.connection_state_changed.connect(func(state): states.append(state))
	client.set_meta("states", states)
	tree.root.add_child(client)
	check_eq(client.connect_to_server(), OK, "connect_to_server")
	check(await wait_until(func(): return client.state == "ready", 15.0), "%s ready (state %s)" % [nick, client.state])
	return client


func test_a_lost_link_comes_back_and_the_next_request_is_answered() -> void:
	var proxy := _proxy()
	var client := await _client_via(proxy, "desk-rc")
	var slow := client.remote_bash("sleep 20; echo never")
	await wait_until(func(): return client.get_stats().get("oa1", {}).get("frames_out", 0) > 0, 5.0)
	await tree.create_timer(0.5).timeout # rexd has it and runs it
	proxy.cut()
	var lost := await finish(slow, 10.0)
	check_eq(lost.get("error"), "disconnected", "the call in flight fails disconnected: %s" % [lost])
	# At once, while the client comes back: the call waits for the next connection.
	var after := client.remote_bash("echo after")
	var result := await finish(after, 30.0)
	check(result.get("ok", false), "answered after the reconnect: %s" % [result])
	check_eq(result.get("text"), "after\n", "its output")
	check(client.reconnects >= 1, "reconnects counted (%d)" % client.reconnects)
	check("reconnecting" in client.get_meta("states"), "state went reconnecting: %s" % [client.get_meta("states")])
	check(not ("closed" in client.get_meta("states")), "never closed while it came back: %s" % [client.get_meta("states")])
	check_eq(client.state, "ready", "ready again")
	client.close()
	await wait_until(func(): return client.state == "closed", 5.0)
	await tree.create_timer(1.5).timeout
	check_eq(client.state, "closed", "closed for good after close()")
	check_eq(proxy.connections(), 0, "no connection after close()")
	client.queue_free()
	proxy.queue_free()


func test_a_server_that_stops_answering_is_noticed_and_left() -> void:
	var proxy := _proxy()
	var keepalive := {"session": {"ping_interval_ms": 1000, "ping_timeout_ms": 1500}}
	var client := await _client_via(proxy, "desk-dead", keepalive)
	proxy.frozen = true
	var frozen_at := Time.get_ticks_msec()
	var events: Array = []
	client.irc_event.connect(func(event): events.append(event))
	check(await wait_until(func(): return client.state != "ready", 10.0), "the dead link is noticed")
	var noticed := (Time.get_ticks_msec() - frozen_at) / 1000.0
	# Found by the keepalive (no answer to its PING): the proxy keeps the socket open.
	check(events.any(func(e): return e.get("disconnected", {}).get("reason") == "timed_out"), "ended timed_out: %s" % [events])
	proxy.frozen = false
	var resumed_at := Time.get_ticks_msec()
	var result := await finish(client.remote_bash("echo back"), 30.0)
	check_eq(result.get("text"), "back\n", "answered once the server answers: %s" % [result])
	seen.append("dead link noticed after %.2f s; answered %.2f s after it answered again" % [noticed, (Time.get_ticks_msec() - resumed_at) / 1000.0])
	client.close()
	client.queue_free()
	proxy.queue_free()


func test_a_refused_connect_names_the_address_and_is_tried_again() -> void:
	var client := DeskRpcClient.new()
	client.server_host = "127.0.0.1"
	var listener := TCPServer.new()
	listener.listen(0, "127.0.0.1")
	var port := listener.get_local_port()
	listener.stop() # nothing listens there now
	client.server_port = port
	client.remote_nick = OS.get_environment("DESKWIRE_REMOTE_NICK")
	tree.root.add_child(client)
	check_eq(client.connect_to_server(), OK, "connect_to_server starts")
	# A call made while the connect is failing says why, not that a connection was lost.
	var early := client.remote_bash("echo too soon")
	check(await wait_until(func(): return client.last_error == "cant_connect", 10.0), "the failure is named")
	check(client.last_error_message.begins_with("connect to 127.0.0.1:%d failed: " % port), client.last_error_message)
	var early_result := await finish(early, 5.0)
	check_eq(early_result.get("error"), "disconnected", "the early call fails: %s" % [early_result])
	check(str(early_result.get("message")).ends_with(client.last_error_message), "it names the connect's failure: %s" % [early_result])
	seen.append("a refused connect: %s" % client.last_error_message)
	# With reconnect, the same failure is tried again: the engine and its request wait.
	client.reconnect = true
	client.reconnect_first_ms = 100
	client.reconnect_max_ms = 200
	check_eq(client.connect_to_server(), OK, "connect_to_server with reconnect")
	var call := client.remote_bash("echo nowhere")
	check(await wait_until(func(): return client.state == "reconnecting", 5.0), "reconnecting (state %s)" % client.state)
	await tree.create_timer(1.0).timeout
	check(not call.done, "the request waits")
	check_eq(client.state, "reconnecting", "still trying")
	client.close()
	var result := await finish(call, 5.0)
	check_eq(result.get("error"), "disconnected", "close() ends the wait: %s" % [result])
	client.queue_free()
