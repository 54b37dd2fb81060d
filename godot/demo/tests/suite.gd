# Base of the test suites: assertions that record failures instead of stopping the run.
extends RefCounted

var tree: SceneTree
var failures: Array = []


func check(cond: bool, what: String) -> void:
	if not cond:
		failures.append(what)


func check_eq(got: Variant, want: Variant, what: String) -> void:
	if typeof(got) != typeof(want) or got != want:
		failures.append("%s: got %s (%s), want %s (%s)" % [what, var_to_str(got), type_string(typeof(got)), var_to_str(want), type_string(typeof(want))])


## Waits for `sig` at most `seconds` (engine frames keep running); returns its arguments, or
## null on timeout.
func wait_signal(sig: Signal, seconds: float) -> Variant:
	var box := {"args": null, "done": false}
	var on_emit := func(a = null, b = null, c = null, d = null):
		box.args = [a, b, c, d]
		box.done = true
	sig.connect(on_emit, CONNECT_ONE_SHOT)
	var deadline := Time.get_ticks_msec() + int(seconds * 1000)
	while not box.done and Time.get_ticks_msec() < deadline:
		await tree.process_frame
	if not box.done and sig.is_connected(on_emit):
		sig.disconnect(on_emit)
	return box.args


## Pumps `link` (anything with a `poll()`: an IRC link, a DeskRpcClient outside the tree) until `done.call()` is true or `seconds` pass; returns whether it became true.
func pump_until(link: Object, done: Callable, seconds: float) -> bool:
	var deadline := Time.get_ticks_msec() + int(seconds * 1000)
	while Time.get_ticks_msec() < deadline:
		if link != null:
			link.poll()
		if done.call():
			return true
		await tree.process_frame
	return done.call()


## Waits until `done.call()` is true or `seconds` pass (engine frames keep running).
func wait_until(done: Callable, seconds: float) -> bool:
	return await pump_until(null, done, seconds)


## The IRC server the suite talks to (set by godot/run_tests.sh), or "" with a failure.
func irc_address() -> String:
	var address := OS.get_environment("DESKWIRE_IRC")
	check(address != "", "DESKWIRE_IRC is not set: the IRC tests need ngircd and rexd --irc (godot/run_tests.sh starts them)")
	return address


## A DeskRpcClient in the tree, connected to the suite's server as `nick`, waiting for rexd.
func connected_client(nick: String) -> DeskRpcClient:
	var address := irc_address()
	var client := DeskRpcClient.new()
	client.server_host = address.get_slice(":", 0)
	client.server_port = int(address.get_slice(":", 1))
	client.nick = nick
	client.channel = OS.get_environment("DESKWIRE_CHANNEL")
	client.remote_nick = OS.get_environment("DESKWIRE_REMOTE_NICK")
	tree.root.add_child(client)
	var states: Array = []
	var events: Array = []
	client.connection_state_changed.connect(func(state): states.append(state))
	client.irc_event.connect(func(event): events.append(event))
	client.set_meta("states", states)
	client.set_meta("irc_events", events)
	check_eq(client.connect_to_server(), OK, "connect_to_server")
	var ready := await wait_until(func(): return client.state == "ready", 15.0)
	check(ready, "%s reached ready (state %s)" % [nick, client.state])
	return client


## Awaits a RemoteCall at most `seconds`; its result, or {} when it did not complete.
func finish(call: RemoteCall, seconds: float) -> Dictionary:
	var done := await wait_until(func(): return call.done, seconds)
	check(done, "call %s completed within %ss" % [call.id, seconds])
	return call.result
