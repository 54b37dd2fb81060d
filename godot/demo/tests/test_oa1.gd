# Oa1Client and Oa1Server driven by a GDScript host loop on a virtual clock, Oa1's codec
# functions and IrcMessage, with what a host gets wrong.
extends "res://tests/suite.gd"

const DESK := {"channel": "#desk", "nick": "desk", "allowed_sender": "deskbot", "pacing": {"burst": 100, "interval_ms": 1000}}
const BOT := {"channel": "#desk", "nick": "deskbot", "allowed_sender": "desk", "pacing": {"burst": 100, "interval_ms": 1000}}


func _with(config: Dictionary, more: Dictionary) -> Dictionary:
	var out := config.duplicate(true)
	out.merge(more, true)
	return out


## Moves everything both endpoints have to say at `now` to the other (as the IRC server would
## relay a PRIVMSG, with the sender's prefix); returns the events, tagged "desk" / "bot".
func _pump(desk: Oa1Client, bot: Oa1Server, now: int) -> Array:
	var events := []
	for round in 100:
		var moved := false
		for side in [["desk", desk, bot, ":desk!u@desk.example "], ["bot", bot, desk, ":deskbot!u@bot.example "]]:
			while true:
				var out: Dictionary = side[1].poll_output(now)
				if out.has("transmit"):
					side[2].handle_line(now, side[3] + out.transmit)
					moved = true
				elif out.has("event"):
					events.append([side[0], out.event])
				else:
					check(out.has("timeout") and out.timeout >= now, "a drained endpoint gives a deadline: %s" % [out])
					break
		if not moved:
			return events
	check(false, "the endpoints never went quiet")
	return events


func _long_text() -> String:
	var lines := PackedStringArray()
	for i in 400:
		lines.append("%04d drwxr-xr-x  2 desk desk 4096 ./dir-%d\tok" % [i, i])
	return "\n".join(lines) + "\n"


func _round_trip(more: Dictionary) -> Dictionary:
	var desk := Oa1Client.create(_with(DESK, more), 7)
	var bot := Oa1Server.create(_with(BOT, more))
	var text := _long_text()
	var id := desk.request(1000, "ls -la /srv")
	check(id != "", "request: %s" % desk.last_error)
	check_eq(desk.in_flight(), 1, "in flight")
	var events := _pump(desk, bot, 1000)
	check_eq(events.size(), 1, "one event: %s" % [events])
	var request: Dictionary = events[0][1].get("request", {}) if events.size() > 0 else {}
	check_eq([request.get("id"), request.get("sender"), request.get("payload")], [id, "desk", "ls -la /srv"], "the server got the request")
	check_eq(bot.active(), 1, "the server works on it")
	check_eq(bot.respond(1000, id, text), OK, "respond")
	# Paced and flushed lines leave over the next seconds.
	var answer := {}
	for t in range(1000, 60000, 250):
		for e in _pump(desk, bot, t):
			if e[0] == "desk":
				answer = e[1]
		if not answer.is_empty():
			break
	check_eq(answer.get("response", {}).get("id"), id, "the desk got the answer: %s" % [answer.keys()])
	check_eq(answer.get("response", {}).get("text"), text, "the whole text, byte for byte")
	check_eq(answer.get("response", {}).get("truncated"), false, "not truncated")
	check_eq(desk.in_flight(), 0, "nothing in flight")
	return {"desk": desk.stats, "bot": bot.stats}


func test_a_long_answer_travels_in_frames_and_back() -> void:
	var stats := _round_trip({})
	check(stats.bot.frames_out > 10, "the answer took many frames: %d" % stats.bot.frames_out)
	check_eq(stats.desk.frames_in, stats.bot.frames_out, "every frame arrived")
	check_eq(stats.desk.ignored, 0, "nothing ignored")
	check_eq(stats.desk.bytes_buffered, 0, "nothing left buffered")


func test_authenticated_and_compressed() -> void:
	var plain := _round_trip({})
	var secured := _round_trip({"auth": {"secret": "correct horse battery staple", "epoch_unix_ms": 1790000000000}, "compression": true})
	check_eq(secured.desk.compressed_in, 1, "the answer came compressed")
	check(secured.bot.frames_out < plain.bot.frames_out, "in fewer frames: %d < %d" % [secured.bot.frames_out, plain.bot.frames_out])
	check_eq([secured.desk.forged, secured.bot.forged, secured.desk.unauthenticated], [0, 0, 0], "every frame authenticated")
	# A desk with another secret hears nothing it can trust.
	var desk := Oa1Client.create(_with(DESK, {"auth": {"secret": "wrong", "epoch_unix_ms": 1790000000000}}), 7)
	var bot := Oa1Server.create(_with(BOT, {"auth": {"secret": "correct horse battery staple", "epoch_unix_ms": 1790000000000}}))
	desk.request(1000, "uptime")
	check_eq(_pump(desk, bot, 1000), [], "the server dropped the forged request")
	check(bot.stats.forged > 0, "counted as forged: %s" % bot.stats.forged)


func test_timeout_cancel_and_disconnect() -> void:
	var desk := Oa1Client.create(DESK, 3)
	var bot := Oa1Server.create(BOT)
	var slow := desk.request(0, "sleep 100", 5000)
	var cancelled := desk.request(0, "sleep 200")
	var events := _pump(desk, bot, 0)
	check_eq(events.size(), 2, "two requests arrived: %s" % [events])
	check_eq(desk.cancel(100, cancelled, "the player walked away"), OK, "cancel")
	events = _pump(desk, bot, 100)
	check_eq(events, [["bot", {"cancelled": {"id": cancelled, "reason": "the player walked away"}}]], "the server learns of the cancel")
	events = _pump(desk, bot, 5000)
	check_eq(events.size(), 2, "the timeout fails the request and cancels it at the server: %s" % [events])
	var failed: Dictionary = events[0][1].get("failed", {}) if events.size() > 0 else {}
	check_eq([failed.get("id"), failed.get("error")], [slow, "timeout"], "failed with timeout")
	check_eq(desk.stats.timeouts, 1, "counted")
	# A connection that ends fails what is in flight.
	var last := desk.request(6000, "uptime")
	desk.disconnect(6000)
	var out := desk.poll_output(6000)
	check_eq(out.get("event", {}).get("failed", {}).get("error"), "disconnected", "disconnected: %s" % [out])
	check_eq(out.get("event", {}).get("failed", {}).get("id"), last, "the one in flight")


func test_local_errors_name_themselves() -> void:
	var desk := Oa1Client.create(_with(DESK, {"max_message_bytes": 8}), 1)
	check_eq(desk.request(0, "far more than eight bytes"), "", "refused")
	check_eq([desk.last_error, desk.last_error_message.contains("8 byte")], ["too_large", true], "too_large: %s" % desk.last_error_message)
	check(desk.request(0, "ok") != "", "a request that fits")
	check_eq(desk.last_error, "", "a success clears the error")
	check_eq(desk.cancel(0, "nope"), ERR_DOES_NOT_EXIST, "cancel an unknown id")
	check_eq(desk.last_error, "unknown_request", "named")
	var bot := Oa1Server.create(BOT)
	check_eq(bot.respond(0, "nope", "x"), ERR_DOES_NOT_EXIST, "respond to an unknown id")
	check_eq(bot.last_error, "unknown_request", "named")
	bot.handle_line(0, ":desk!u@h PRIVMSG #desk :OA1 REQ r1 1 0 uptime")
	check_eq(bot.poll_output(0).get("event", {}).get("request", {}).get("id"), "r1", "a request")
	check_eq(bot.fail(0, "r1", "Bad Code", "x"), ERR_INVALID_PARAMETER, "fail with a bad code")
	check_eq(bot.last_error, "invalid_error_code", "named")
	check_eq(bot.fail(0, "r1", "not_found", "no such file"), OK, "fail")
	check_eq(bot.poll_output(0), {"transmit": "PRIVMSG #desk :OA1 ERR r1 1 0 not_found: no such file"}, "ERR code: message")
	check_eq(bot.finish(0, "r1"), ERR_DOES_NOT_EXIST, "finishing a failed request")


func test_bad_configs_clocks_and_lines() -> void:
	check(Oa1Client.create({"channel": "#d"}) == null, "no nick")
	check(Oa1Client.create({"channel": "#d", "nick": "d", "max_streams": "many"}) == null, "a wrong type")
	check(Oa1Server.create({"channel": "#d", "nick": "d", "surprise": 1}) == null, "an unknown key")
	check(Oa1Server.create({"channel": "#d", "nick": "d", "where": Vector2.ONE}) == null, "a value JSON cannot hold")
	var desk := Oa1Client.create(DESK)
	check_eq(desk.poll_output(-1), {}, "a negative clock is refused")
	check_eq(desk.request(-1, "x"), "", "a negative clock is refused")
	check_eq(desk.cancel(-5, "x"), ERR_INVALID_PARAMETER, "a negative clock is refused")
	for line in ["", "\u0001", "PRIVMSG", ":deskbot!u@h PRIVMSG #desk :OA1 RES x 0 0 y", "x".repeat(100000), ":deskbot!u@h PRIVMSG #desk :" + "é".repeat(20000)]:
		desk.handle_line(0, line)
	check_eq(desk.stats.lines_in, 6, "every line counted")
	check_eq(desk.stats.ignored, 6, "and ignored")
	check_eq(desk.poll_output(0).has("timeout"), true, "nothing came of them")


func test_codec_functions() -> void:
	check_eq(Oa1.escape("a\\b\nc"), "a\\\\b\\nc", "escape")
	check_eq(Oa1.unescape("a\\\\b\\nc").get_string_from_utf8(), "a\\b\nc", "unescape")
	check_eq(Oa1.unescape("\\0"), PackedByteArray([0]), "\\0 is a NUL byte")
	check_eq(Oa1.parse_frame("OA1 REQ abc 1 0 uname -a"), {"type": "REQ", "id": "abc", "seq": 1, "more": false, "payload": "uname -a"}, "a frame")
	check_eq(Oa1.parse_frame("hello"), {}, "not a frame")
	check_eq(Oa1.format_frame("RES", "abc", 2, true, "x"), "OA1 RES abc 2 1 x", "format")
	check_eq(Oa1.format_frame("RES", "a b", 1, false), "", "a bad id is refused")
	check_eq(Oa1.format_frame("NOPE", "abc", 1, false), "", "an unknown type is refused")
	check_eq(Oa1.format_frame("RES", "abc", 0, false), "", "seq 0 is refused")
	check_eq(Oa1.split("abcdefghij", 4), PackedStringArray(["abcd", "efgh", "ij"]), "split")
	check_eq(Oa1.split("abc", 3), PackedStringArray(), "a budget below 4 is refused")
	check_eq(Oa1.parse_err_payload("timeout: too slow"), {"code": "timeout", "message": "too slow"}, "ERR payload")


func test_irc_message_parse() -> void:
	var msg := IrcMessage.parse("@time=2026-01-01T00:00:00Z :deskbot!~bot@10.0.0.2 PRIVMSG #desk :OA1 RES k 1 0 done\r\n")
	check_eq(msg, {"tags": {"time": "2026-01-01T00:00:00Z"}, "source": "deskbot!~bot@10.0.0.2", "nick": "deskbot", "user": "~bot", "host": "10.0.0.2", "command": "PRIVMSG", "params": ["#desk", "OA1 RES k 1 0 done"]}, "parts")
	check_eq(IrcMessage.parse(""), {}, "an empty line")
	check_eq(IrcMessage.parse("PRIVMSG #a :x\ry"), {}, "a CR inside")
