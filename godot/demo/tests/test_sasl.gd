# TLS and SASL against a server that has both: InspIRCd 3 linked to Atheme services (run_tests.sh
# starts them), with a rexd --irc there that serves only the account `bob` (--allow-from
# account:bob). An answer proves the desk logged in: rexd takes the server's word for who sent it.
extends "res://tests/suite.gd"

## What a user saw, printed after the run.
var seen: Array[String] = []


func summary() -> Array:
	return seen.map(func(line): return "sasl: " + line)


## A desk over TLS to the services' `port` (their TLS port unless given), logged in as `user`
## with `password`; connecting.
func _client(nick: String, user: String, password: String, port := int(OS.get_environment("DESKWIRE_SASL_TLS_PORT"))) -> DeskRpcClient:
	var ca := X509Certificate.new()
	check_eq(ca.load(OS.get_environment("DESKWIRE_SASL_CA")), OK, "the services' CA")
	var client := DeskRpcClient.new()
	client.server_host = "127.0.0.1"
	client.server_port = port
	client.use_tls = true
	client.tls_server_name = "localhost"
	client.tls_trusted_certificate = ca
	client.sasl_username = user
	client.sasl_password = password
	client.nick = nick
	client.channel = OS.get_environment("DESKWIRE_SASL_CHANNEL")
	client.remote_nick = OS.get_environment("DESKWIRE_SASL_REMOTE")
	var events: Array = []
	client.irc_event.connect(func(event): events.append(event))
	client.set_meta("irc_events", events)
	tree.root.add_child(client)
	check_eq(client.connect_to_server(), OK, "connect %s" % nick)
	return client


func test_a_desk_logged_in_over_tls_is_served_by_its_account() -> void:
	check(OS.get_environment("DESKWIRE_SASL_TLS_PORT") != "", "run_tests.sh started the services (DESKWIRE_SASL_TLS_PORT)")
	var account := OS.get_environment("DESKWIRE_SASL_ACCOUNT")
	var client := _client("gobob1", account, OS.get_environment("DESKWIRE_SASL_PASSWORD"))
	check(await wait_until(func(): return client.state == "ready", 20.0), "ready over TLS with SASL (state %s, %s)" % [client.state, client.last_error_message])
	var logged_in: Array = client.get_meta("irc_events").filter(func(e): return e.has("logged_in"))
	check(not logged_in.is_empty() and logged_in[0]["logged_in"]["account"] == account, "logged in as %s: %s" % [account, client.get_meta("irc_events")])
	var result := await finish(client.remote_bash("echo as bob"), 20.0)
	check_eq(result.get("text"), "as bob\n", "rexd, serving only account:%s, answered: %s" % [account, result])
	client.close()
	client.queue_free()


func test_a_wrong_password_is_named_and_not_retried() -> void:
	var client := _client("gobob2", OS.get_environment("DESKWIRE_SASL_ACCOUNT"), "not-the-password")
	client.reconnect = true
	client.reconnect_first_ms = 100
	check(await wait_until(func(): return client.last_error == "login_failed", 20.0), "login_failed (last_error %s: %s)" % [client.last_error, client.last_error_message])
	check("904" in client.last_error_message, "the server's numeric: %s" % client.last_error_message)
	seen.append("a wrong password: %s" % client.last_error_message)
	await tree.create_timer(1.0).timeout
	check_eq(client.state, "closed", "not tried again")
	client.queue_free()


func test_tls_to_a_server_that_says_nothing_is_named_within_the_handshake_bound() -> void:
	# InspIRCd's plain-text port says nothing to a TLS hello: the handshake is given up after
	# 10 s and named, instead of waiting for the 60 s registration bound.
	var client := _client("gobob3", "", "", int(OS.get_environment("DESKWIRE_SASL_PORT")))
	var call := client.remote_bash("echo never")
	var result := await finish(call, 20.0)
	check_eq(result.get("error"), "disconnected", "the call fails: %s" % [result])
	check("no answer to the handshake within 10 s" in client.last_error_message, "named: %s" % client.last_error_message)
	seen.append("TLS to a plain-text port: %s" % client.last_error_message)
	client.queue_free()
