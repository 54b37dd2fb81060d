# DeskConnection: many DeskRpcClients on one IRC connection (ngircd), all served by one
# `rexd --irc` on one connection in every desk's channel (DESKWIRE_OFFICE_CHANNELS, as
# DESKWIRE_OFFICE_NICK), and the channels' chat and membership as signals, from and to a plain
# IRC client (tests/irc_link.gd).
extends "res://tests/suite.gd"

const IrcLink := preload("res://tests/irc_link.gd")


func office_channels() -> PackedStringArray:
	var channels := OS.get_environment("DESKWIRE_OFFICE_CHANNELS").split(" ", false)
	check(channels.size() >= 10, "DESKWIRE_OFFICE_CHANNELS names 10 channels (godot/run_tests.sh): %s" % [channels])
	return channels


## A DeskConnection in the tree as `nick`, not connected yet.
func office(nick: String) -> DeskConnection:
	var address := irc_address()
	var conn := DeskConnection.new()
	conn.server_host = address.get_slice(":", 0)
	conn.server_port = int(address.get_slice(":", 1))
	conn.nick = nick
	tree.root.add_child(conn)
	return conn


## A desk on `conn` in `channel`, served by the office's rexd, joined (connect_to_server).
func desk_on(conn: DeskConnection, channel: String) -> DeskRpcClient:
	var desk := DeskRpcClient.new()
	desk.connection = conn
	desk.channel = channel
	desk.remote_nick = OS.get_environment("DESKWIRE_OFFICE_NICK")
	conn.add_child(desk)
	check_eq(desk.connect_to_server(), OK, "desk in %s joins its connection" % channel)
	return desk


## Waits until every desk is ready (the connection registered, each channel joined, rexd there).
func all_ready(desks: Array, seconds: float) -> bool:
	var ready := await wait_until(func(): return desks.all(func(d): return d.state == "ready"), seconds)
	check(ready, "every desk ready: %s" % [desks.map(func(d): return "%s %s (%s)" % [d.channel, d.state, d.waiting_for()])])
	return ready


## A plain IRC client in `channel` as `nick`, registered and joined.
func watcher(nick: String, channel: String) -> IrcLink:
	var link := IrcLink.new()
	check_eq(link.open(irc_address(), nick, channel), OK, "the watcher connects")
	var joined := await pump_until(link, func(): return link.joined, 10.0)
	check(joined, "the watcher %s joined %s" % [nick, channel])
	return link


## Pumps `link` until a line it received contains `text`; that line, or "".
func line_with(link: IrcLink, text: String, seconds: float) -> String:
	var found := [""]
	await pump_until(link, func():
		for line in link.lines:
			if line.contains(text):
				found[0] = line
				return true
		return false, seconds)
	return found[0]


func test_ten_desks_on_one_connection_each_get_their_own_answers() -> void:
	var conn := office("goffice1")
	var states: Array = []
	conn.connection_state_changed.connect(func(s): states.append(s))
	var desks: Array = []
	for channel in office_channels():
		desks.append(desk_on(conn, channel))
	check_eq(desks[0].state, "closed", "a desk waits for its connection")
	check_eq(conn.channels().size(), 10, "the connection carries every desk's channel")
	check_eq(conn.connect_to_server(), OK, "connect_to_server")
	if not await all_ready(desks, 30.0):
		conn.queue_free()
		return
	check_eq(conn.state, "ready", "the connection is ready")
	check_eq(states, ["registering", "ready"], "the connection's states")
	# Each desk's signals, to check none sees another's.
	var seen := {}
	for desk in desks:
		var mine: Array = []
		seen[desk.channel] = mine
		desk.request_completed.connect(func(id, text, truncated): mine.append(["completed", id, text]))
		desk.request_failed.connect(func(id, error, message): mine.append(["failed", id, error, message]))
	# All at once, each answer different and a few taking several lines of output.
	var calls: Array = []
	for i in desks.size():
		var repeat := 1 + (i % 3) * 200
		var command := "echo \"desk %d says $((%d * 7))\"; seq 1 %d" % [i, i, repeat]
		calls.append(desks[i].remote_bash(command, 60))
	var ids := {}
	for call in calls:
		ids[call.id] = true
	check_eq(ids.size(), desks.size(), "every request has its own id")
	for i in desks.size():
		var result := await finish(calls[i], 60.0)
		var repeat := 1 + (i % 3) * 200
		var text: String = result.get("text", "")
		check_eq(result.get("ok"), true, "desk %d ok: %s" % [i, result.get("message")])
		check(text.begins_with("desk %d says " % i), "desk %d got its own answer: %s" % [i, text.left(40)])
		check(text.ends_with("\n%d\n" % repeat), "desk %d got its whole answer (%d bytes)" % [i, text.length()])
	for i in desks.size():
		var mine: Array = seen[desks[i].channel]
		check_eq(mine.size(), 1, "desk %d: one signal, its own: %s" % [i, mine])
		if mine.size() == 1:
			check_eq([mine[0][0], mine[0][1]], ["completed", calls[i].id], "desk %d's request_completed names its call" % i)
		check_eq(desks[i].in_flight(), 0, "desk %d: nothing in flight" % i)
	var stats: Dictionary = conn.stats
	check_eq(stats.channels.size(), 10, "stats for each channel")
	check(stats.channels[desks[4].channel].frames_in >= 1, "desk 4's channel counted its frames: %s" % [stats.channels[desks[4].channel]])
	check_eq(desks[4].stats.oa1, stats.channels[desks[4].channel], "a desk's stats are its channel's")
	check(desks[0].members().has(OS.get_environment("DESKWIRE_OFFICE_NICK")), "members: %s" % [desks[0].members()])
	# A desk leaves, the others go on.
	desks[0].close()
	check_eq(desks[0].state, "closed", "a closed desk")
	check(not conn.channels().has(desks[0].channel), "its channel is left: %s" % [conn.channels()])
	var after := await finish(desks[1].remote_bash("echo still here"), 20.0)
	check_eq(after.get("text"), "still here\n", "another desk goes on: %s" % [after])
	var refused := await finish(desks[0].remote_bash("echo no"), 5.0)
	check_eq(refused.get("error"), "closed", "a closed desk refuses calls: %s" % [refused])
	# Joining again works on the open connection.
	check_eq(desks[0].connect_to_server(), OK, "the desk joins again")
	await all_ready([desks[0]], 20.0)
	var again := await finish(desks[0].remote_bash("echo back"), 20.0)
	check_eq(again.get("text"), "back\n", "the desk that joined again: %s" % [again])
	# Closing the connection fails what is in flight on every desk.
	var slow: RemoteCall = desks[2].remote_bash("sleep 20", 60)
	await wait_until(func(): return desks[2].stats.oa1.frames_out > 0, 10.0)
	conn.close("office closed")
	var gone := await finish(slow, 10.0)
	check_eq(gone.get("error"), "disconnected", "a call in flight when the connection closed: %s" % [gone])
	await wait_until(func(): return desks.all(func(d): return d.state == "closed"), 10.0)
	check(desks.all(func(d): return d.state == "closed"), "every desk closed: %s" % [desks.map(func(d): return d.state)])
	# Connected again, every desk joins again.
	check_eq(conn.connect_to_server(), OK, "connect_to_server again")
	if not await all_ready(desks, 30.0):
		conn.queue_free()
		return
	# Handlers that call back into the desk (and so into the connection) while it delivers:
	# desk 3 starts its next call from request_completed, desk 4 closes from it.
	var chained: Array = []
	desks[3].request_completed.connect(func(_id, _text, _truncated): chained.append(desks[3].remote_bash("echo second")), CONNECT_ONE_SHOT)
	desks[4].request_completed.connect(func(_id, _text, _truncated): desks[4].close("done here"), CONNECT_ONE_SHOT)
	var firsts := [desks[3].remote_bash("echo first"), desks[4].remote_bash("echo last")]
	for call in firsts:
		await finish(call, 20.0)
	check_eq(firsts.map(func(c): return c.result.get("text")), ["first\n", "last\n"], "after connecting again")
	check(await wait_until(func(): return chained.size() == 1 and chained[0].done, 20.0), "the call started from a handler completed")
	if chained.size() == 1:
		check_eq(chained[0].result.get("text"), "second\n", "the call started from a handler: %s" % [chained[0].result])
	check_eq(desks[4].state, "closed", "the desk closed from its handler")
	check(not conn.channels().has(desks[4].channel), "and left its channel: %s" % [conn.channels()])
	conn.queue_free()
	await tree.process_frame


func test_chat_and_membership_arrive_as_signals() -> void:
	var channel: String = office_channels()[0]
	var conn := office("goffice2")
	conn.chat_enabled = true
	conn.membership_enabled = true
	var quiet := office("goffice3")  # chat off (the default): never says a word
	var chat: Array = []
	var members: Array = []
	var quiet_chat: Array = []
	conn.chat_received.connect(func(ch, sender, kind, text, tags): chat.append([ch, sender.get_slice("!", 0), kind, text, tags]))
	conn.membership_changed.connect(func(ch, kind, nick, details): members.append([ch, kind, nick, details]))
	quiet.chat_received.connect(func(ch, sender, kind, text, tags): quiet_chat.append(text))
	quiet.membership_changed.connect(func(ch, kind, nick, details): quiet_chat.append(kind))
	var desk := desk_on(conn, channel)
	var quiet_desk := desk_on(quiet, channel)
	check_eq(conn.connect_to_server(), OK, "connect")
	check_eq(quiet.connect_to_server(), OK, "connect the quiet one")
	if not await all_ready([desk, quiet_desk], 30.0):
		conn.queue_free()
		quiet.queue_free()
		return
	var rexd := OS.get_environment("DESKWIRE_OFFICE_NICK")
	check(members.has([channel, "joined", "goffice2", {}]), "our own join: %s" % [members])
	var names: Array = members.filter(func(m): return m[1] == "names")
	check(names.size() == 1 and rexd in names[0][3].nicks and "goffice2" in names[0][3].nicks and names[0][2] == "", "the member list: %s" % [names])
	var link := await watcher("gchatter", channel)
	link.send("PRIVMSG %s :hello desks" % channel)
	link.send("NOTICE %s :a notice" % channel)
	link.send("PRIVMSG %s :\u0001ACTION waves\u0001" % channel)
	link.send("PRIVMSG %s :héllo ✓ wörld" % channel)
	await pump_until(link, func(): return chat.size() >= 4, 10.0)
	check_eq(chat, [
		[channel, "gchatter", "privmsg", "hello desks", {}],
		[channel, "gchatter", "notice", "a notice", {}],
		[channel, "gchatter", "action", "waves", {}],
		[channel, "gchatter", "privmsg", "héllo ✓ wörld", {}],
	], "chat_received")
	check(members.has([channel, "joined", "gchatter", {}]), "the watcher's join: %s" % [members])
	# OA1 beside chat: the desk's own call still works, and its frames are not chat.
	var result := await finish(desk.remote_bash("echo beside chat"), 20.0)
	check_eq(result.get("text"), "beside chat\n", "a call beside chat: %s" % [result])
	check(chat.size() == 4, "OA1 frames are not chat: %s" % [chat.slice(4)])
	link.send("PART %s :off to lunch" % channel)
	await pump_until(link, func(): return members.any(func(m): return m[1] == "parted"), 10.0)
	check(members.has([channel, "parted", "gchatter", {"reason": "off to lunch"}]), "parted: %s" % [members])
	link.send("JOIN %s" % channel)
	await pump_until(link, func(): return members.filter(func(m): return m[2] == "gchatter" and m[1] == "joined").size() == 2, 10.0)
	link.send("NICK gchatter2")
	await pump_until(link, func(): return members.any(func(m): return m[1] == "renamed"), 10.0)
	check(members.has([channel, "renamed", "gchatter", {"new_nick": "gchatter2"}]), "renamed: %s" % [members])
	link.close()
	await wait_until(func(): return members.any(func(m): return m[1] == "quit"), 10.0)
	var quits: Array = members.filter(func(m): return m[1] == "quit")
	check(quits.size() == 1 and quits[0][2] == "gchatter2" and quits[0][0] == channel, "quit: %s" % [quits])
	check_eq(quiet_chat, [], "a connection that did not ask gets no chat and no membership")
	check_eq(conn.stats.chat_dropped, 0, "nothing dropped")
	# Turned off, nothing more comes.
	conn.chat_enabled = false
	var link2 := await watcher("gchatter3", channel)
	link2.send("PRIVMSG %s :unheard" % channel)
	var marker := await finish(desk.remote_bash("echo after"), 20.0)
	check_eq(marker.get("text"), "after\n", "a call after chat was turned off")
	check(chat.size() == 4, "chat turned off: %s" % [chat.slice(4)])
	link2.close()
	conn.queue_free()
	quiet.queue_free()
	await tree.process_frame


func test_send_text_reaches_the_channel() -> void:
	var channels := office_channels()
	var conn := office("goffice4")
	var desk := desk_on(conn, channels[1])
	var other := desk_on(conn, channels[2])
	check_eq(conn.connect_to_server(), OK, "connect")
	var link := await watcher("glistener", channels[1])
	if not await all_ready([desk, other], 30.0):
		conn.queue_free()
		link.close()
		return
	check_eq(conn.send_text(channels[1], "hello from godot"), OK, "send_text")
	check_eq(conn.last_send_error, "", "no error")
	check(await line_with(link, "PRIVMSG %s :hello from godot" % channels[1], 10.0) != "", "the PRIVMSG reached the channel")
	check_eq(conn.send_text(channels[1], "heads up", true), OK, "send_text as a notice")
	check(await line_with(link, "NOTICE %s :heads up" % channels[1], 10.0) != "", "the NOTICE reached the channel")
	# Long text is cut into lines, at spaces, in order, none over the line budget.
	var words: Array = []
	for i in 300:
		words.append("wörd%d" % i)
	var long := " ".join(words)
	check_eq(conn.send_text(channels[1], long), OK, "long text")
	var last := await line_with(link, "wörd299", 60.0)
	check(last != "", "the long text's last line arrived")
	var prefix := "PRIVMSG %s :" % channels[1]
	var parts: Array = []
	for line in link.lines:
		var at: int = line.find(prefix)
		if at >= 0 and line.contains("wörd"):
			parts.append(line.substr(at + prefix.length()))
			check(line.to_utf8_buffer().size() <= 510, "a line within IRC's 512 bytes (%d)" % line.to_utf8_buffer().size())
	check(parts.size() > 1, "cut into several lines: %d" % parts.size())
	check_eq(" ".join(parts), long, "the text whole and in order")
	# And OA1 still works beside it on the same connection.
	var result := await finish(other.remote_bash("echo beside text"), 20.0)
	check_eq(result.get("text"), "beside text\n", "a call beside chat: %s" % [result])
	link.close()
	conn.queue_free()
	await tree.process_frame


func test_send_text_refusals() -> void:
	var channels := office_channels()
	var never := DeskConnection.new()
	check_eq(never.send_text(channels[0], "hi"), ERR_UNCONFIGURED, "not connected")
	check_eq(never.last_send_error, "closed", "named closed")
	never.free()
	var conn := office("goffice5")
	var desk := desk_on(conn, channels[3])
	check_eq(conn.connect_to_server(), OK, "connect")
	var cases := [
		["#nobody-here", "hi", ERR_DOES_NOT_EXIST, "unknown_channel"],
		[channels[3], "", ERR_INVALID_PARAMETER, "empty"],
		[channels[3], "OA1 REQ abc 1/1 :ls", ERR_INVALID_PARAMETER, "reserved_prefix"],
		[channels[3], "OA1A x", ERR_INVALID_PARAMETER, "reserved_prefix"],
		[channels[3], "two\nlines", ERR_INVALID_PARAMETER, "forbidden_byte"],
		[channels[3], "carriage\rreturn", ERR_INVALID_PARAMETER, "forbidden_byte"],
	]
	for c in cases:
		check_eq(conn.send_text(c[0], c[1]), c[2], "send_text(%s, %s)" % [c[0], var_to_str(c[1])])
		check_eq(conn.last_send_error, c[3], "named %s" % c[3])
		check(conn.last_send_error_message != "", "said why: %s" % conn.last_send_error_message)
	# Text that only contains "OA1 " later is fine.
	check_eq(conn.send_text(channels[3], "see OA1 docs"), OK, "OA1 inside the text")
	# 64 KiB wait at most per channel: before the channel is even joined, they pile up.
	var chunk := "x".repeat(1000)
	var results := {}
	for i in 80:
		var err := conn.send_text(channels[3], chunk)
		results[err] = results.get(err, 0) + 1
	check(results.get(OK, 0) >= 50 and results.get(ERR_BUSY, 0) >= 1, "OK until the queue is full, then ERR_BUSY: %s" % [results])
	check_eq(conn.last_send_error, "queue_full", "named queue_full")
	# Closing drops the queue; the connection refuses more.
	conn.close()
	check_eq(conn.send_text(channels[3], "bye"), ERR_UNCONFIGURED, "after close")
	check_eq(conn.last_send_error, "closed", "named closed after close")
	conn.queue_free()
	await tree.process_frame


func test_desk_refusals_and_lifetimes() -> void:
	var channels := office_channels()
	var conn := office("goffice6")
	var first := desk_on(conn, channels[5])
	# Not connected yet: a call fails not_connected.
	var failed: Array = []
	first.request_failed.connect(func(id, error, message): failed.append(error))
	var early := await finish(first.remote_bash("echo early"), 5.0)
	check_eq(early.get("error"), "not_connected", "a call before the connection connects: %s" % [early])
	check_eq(failed, ["not_connected"], "request_failed too")
	# One desk per channel on a connection.
	var twin := DeskRpcClient.new()
	twin.connection = conn
	twin.channel = channels[5].to_upper()
	twin.remote_nick = "rexd"
	conn.add_child(twin)
	check_eq(twin.connect_to_server(), ERR_INVALID_PARAMETER, "a second desk in the same channel")
	check(twin.last_error_message.contains("already"), "said: %s" % twin.last_error_message)
	# The server is the connection's.
	check_eq(twin.connect_to_server("127.0.0.1", 6667), ERR_INVALID_PARAMETER, "host and port with a connection")
	check_eq(twin.attach(), ERR_INVALID_PARAMETER, "attach with a connection")
	twin.channel = "no-prefix"
	check_eq(twin.connect_to_server(), ERR_INVALID_PARAMETER, "a bad channel")
	check_eq(twin.last_error, "invalid_config", "named invalid_config")
	twin.channel = channels[6]
	twin.remote_nick = ""
	check_eq(twin.connect_to_server(), ERR_INVALID_PARAMETER, "no remote")
	twin.free()
	check_eq(conn.channels(), PackedStringArray([channels[5]]), "refused desks are not on the connection")
	# A bad connection configuration.
	var bad := DeskConnection.new()
	bad.nick = "no spaces allowed"
	check_eq(bad.connect_to_server("127.0.0.1", 1), ERR_INVALID_PARAMETER, "a bad nick")
	check_eq(bad.last_error, "invalid_config", "named invalid_config")
	bad.config_overrides = {"no_such_key": 1}
	bad.nick = "fine"
	check_eq(bad.connect_to_server("127.0.0.1", 1), ERR_INVALID_PARAMETER, "an unknown override")
	bad.free()
	check_eq(conn.connect_to_server(), OK, "connect")
	var second := desk_on(conn, channels[6])
	if not await all_ready([first, second], 30.0):
		conn.queue_free()
		return
	# A desk freed with a call in flight: the call completes closed, the channel is left.
	var orphan := second.remote_bash("sleep 20", 60)
	second.free()
	var orphaned := await finish(orphan, 5.0)
	check_eq(orphaned.get("error"), "closed", "a freed desk's call: %s" % [orphaned])
	check_eq(conn.channels(), PackedStringArray([channels[5]]), "a freed desk left")
	# The connection freed with a call in flight: the desk's call completes closed.
	var stranded := first.remote_bash("sleep 20", 60)
	first.reparent(tree.root)
	conn.free()
	var stranded_result := await finish(stranded, 5.0)
	check_eq(stranded_result.get("error"), "closed", "a call whose connection was freed: %s" % [stranded_result])
	check_eq(first.state, "closed", "the desk is closed")
	check(first.connection == null, "the desk let go of the freed connection")
	var after := await finish(first.remote_bash("echo no"), 5.0)
	check_eq(after.get("error"), "closed", "and refuses calls: %s" % [after])
	first.queue_free()
	await tree.process_frame


func test_calls_from_other_threads_are_refused() -> void:
	var conn := DeskConnection.new()
	var emitted: Array = []
	conn.connection_state_changed.connect(func(s): emitted.append(s))
	var thread := Thread.new()
	thread.start(func():
		# Every argument given: gdext makes a default argument's Variant on the main thread only.
		return [conn.connect_to_server("127.0.0.1", 1), conn.send_text("#office-0", "hi", false)])
	var answers: Array = thread.wait_to_finish()
	check_eq(answers, [ERR_UNAVAILABLE, ERR_UNAVAILABLE], "refused off the main thread")
	check_eq(emitted, [], "nothing was emitted off the main thread")
	check_eq(conn.state, "closed", "nothing changed")
	conn.free()


func test_a_kick_is_a_membership_change_and_the_desks_irc_event() -> void:
	# The watcher makes the channel, so it is its operator and may kick.
	var channel := "#office-kick"
	var link := await watcher("gkicker", channel)
	var conn := office("goffice7")
	conn.membership_enabled = true
	var members: Array = []
	conn.membership_changed.connect(func(ch, kind, nick, details): members.append([ch, kind, nick, details]))
	var desk := DeskRpcClient.new()
	desk.connection = conn
	desk.channel = channel
	desk.remote_nick = "gkicker"   # present, so the desk gets to ready
	conn.add_child(desk)
	var events: Array = []
	desk.irc_event.connect(func(event): events.append(event))
	check_eq(desk.connect_to_server(), OK, "the desk joins")
	check_eq(conn.connect_to_server(), OK, "connect")
	if not await all_ready([desk], 20.0):
		link.close()
		conn.queue_free()
		return
	link.send("KICK %s goffice7 :out you go" % channel)
	var kicked := await pump_until(link, func(): return members.any(func(m): return m[1] == "kicked"), 10.0)
	check(kicked, "a kick came: %s" % [members])
	check(members.has([channel, "kicked", "goffice7", {"by": "gkicker", "reason": "out you go"}]), "kicked: %s" % [members])
	check(events.any(func(e): return e.has("kicked")), "the desk's irc_event says kicked: %s" % [events])
	link.close()
	conn.queue_free()
	await tree.process_frame


## A DeskConnection over TLS to the services (InspIRCd with Atheme), logged in as `user`, with a
## desk in the channel of the rexd there that serves only that account; connecting.
func _sasl_office(nick: String, user: String, password: String) -> DeskConnection:
	var ca := X509Certificate.new()
	check_eq(ca.load(OS.get_environment("DESKWIRE_SASL_CA")), OK, "the services' CA")
	var conn := DeskConnection.new()
	conn.server_host = "127.0.0.1"
	conn.server_port = int(OS.get_environment("DESKWIRE_SASL_TLS_PORT"))
	conn.use_tls = true
	conn.tls_server_name = "localhost"
	conn.tls_trusted_certificate = ca
	conn.sasl_username = user
	conn.sasl_password = password
	conn.nick = nick
	var events: Array = []
	conn.irc_event.connect(func(event): events.append(event))
	conn.set_meta("irc_events", events)
	tree.root.add_child(conn)
	var desk := DeskRpcClient.new()
	desk.connection = conn
	desk.channel = OS.get_environment("DESKWIRE_SASL_CHANNEL")
	desk.remote_nick = OS.get_environment("DESKWIRE_SASL_REMOTE")
	conn.add_child(desk)
	check_eq(desk.connect_to_server(), OK, "the desk joins")
	check_eq(conn.connect_to_server(), OK, "connect %s" % nick)
	return conn


func test_over_tls_with_sasl_the_desks_are_served_by_the_account() -> void:
	check(OS.get_environment("DESKWIRE_SASL_TLS_PORT") != "", "run_tests.sh started the services (DESKWIRE_SASL_TLS_PORT)")
	var account := OS.get_environment("DESKWIRE_SASL_ACCOUNT")
	var conn := _sasl_office("goffbob1", account, OS.get_environment("DESKWIRE_SASL_PASSWORD"))
	var desk: DeskRpcClient = conn.get_child(0)
	check(await wait_until(func(): return desk.state == "ready", 20.0), "ready over TLS with SASL (state %s, %s)" % [desk.state, conn.last_error_message])
	var logged_in: Array = conn.get_meta("irc_events").filter(func(e): return e.has("logged_in"))
	check(not logged_in.is_empty() and logged_in[0]["logged_in"]["account"] == account, "logged in as %s: %s" % [account, conn.get_meta("irc_events")])
	var result := await finish(desk.remote_bash("echo as bob on a shared connection"), 20.0)
	check_eq(result.get("text"), "as bob on a shared connection\n", "rexd, serving only account:%s, answered: %s" % [account, result])
	conn.queue_free()
	await tree.process_frame


func test_a_wrong_password_is_named_on_the_connection() -> void:
	var conn := _sasl_office("goffbob2", OS.get_environment("DESKWIRE_SASL_ACCOUNT"), "not-the-password")
	var desk: DeskRpcClient = conn.get_child(0)
	check(await wait_until(func(): return conn.last_error == "login_failed", 20.0), "login_failed (last_error %s: %s)" % [conn.last_error, conn.last_error_message])
	check("904" in conn.last_error_message, "the server's numeric: %s" % conn.last_error_message)
	check(await wait_until(func(): return conn.state == "closed" and desk.state == "closed", 10.0), "the connection and its desk closed (%s, %s)" % [conn.state, desk.state])
	var result := await finish(desk.remote_bash("echo never"), 5.0)
	check_eq(result.get("error"), "closed", "a call on the closed connection: %s" % [result])
	conn.queue_free()
	await tree.process_frame


func test_with_reconnect_a_lost_link_comes_back_with_every_desk() -> void:
	var proxy: Node = preload("res://tests/tcp_proxy.gd").new()
	tree.root.add_child(proxy)
	check_eq(proxy.open(irc_address()), OK, "the proxy listens")
	var channels := office_channels()
	var conn := DeskConnection.new()
	conn.server_host = "127.0.0.1"
	conn.server_port = proxy.port
	conn.nick = "goffice8"
	conn.reconnect = true
	conn.reconnect_first_ms = 200
	conn.reconnect_max_ms = 1000
	var states: Array = []
	conn.connection_state_changed.connect(func(s): states.append(s))
	tree.root.add_child(conn)
	var desks := [desk_on(conn, channels[7]), desk_on(conn, channels[8])]
	check_eq(conn.connect_to_server(), OK, "connect through the proxy")
	if not await all_ready(desks, 30.0):
		conn.queue_free()
		proxy.queue_free()
		return
	var slow: RemoteCall = desks[0].remote_bash("sleep 20; echo never", 60)
	await wait_until(func(): return desks[0].stats.oa1.frames_out > 0, 5.0)
	proxy.cut()
	var lost := await finish(slow, 10.0)
	check_eq(lost.get("error"), "disconnected", "the call in flight fails disconnected: %s" % [lost])
	check(await wait_until(func(): return conn.reconnects == 1, 20.0), "the connection came back (reconnects %d, states %s)" % [conn.reconnects, states])
	check("reconnecting" in states, "state went reconnecting: %s" % [states])
	check(not ("closed" in states), "never closed while it came back: %s" % [states])
	if not await all_ready(desks, 30.0):
		conn.queue_free()
		proxy.queue_free()
		return
	for i in desks.size():
		var result := await finish(desks[i].remote_bash("echo back %d" % i), 20.0)
		check_eq(result.get("text"), "back %d\n" % i, "desk %d answered after the reconnect: %s" % [i, result])
	check_eq(proxy.connections(), 1, "one connection through the proxy: the replacement, for both desks")
	conn.close()
	check_eq(conn.state, "closed", "closed")
	await tree.create_timer(1.5).timeout
	check_eq(conn.state, "closed", "close() is not undone by reconnect")
	check_eq(conn.reconnects, 1, "no more reconnects")
	conn.queue_free()
	proxy.queue_free()
	await tree.process_frame
