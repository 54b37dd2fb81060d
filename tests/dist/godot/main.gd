# The main scene of the release test: the addon's DeskRpcClient asks `rexd --irc` (the released
# static binary) for a RemoteBash, and the engine exits 0 only when the answer is right.
# DESKWIRE_IRC is host:port; DESKWIRE_EXPECT is what `echo` must print.
extends Node

var desk := DeskRpcClient.new()


func _ready() -> void:
	var address := OS.get_environment("DESKWIRE_IRC").split(":")
	var expect := OS.get_environment("DESKWIRE_EXPECT")
	if address.size() != 2 or expect.is_empty():
		_finish(2, "DESKWIRE_IRC (host:port) and DESKWIRE_EXPECT must be set")
		return
	desk.nick = "desk"
	desk.channel = "#desk"
	desk.remote_nick = "rexd"
	add_child(desk)
	if desk.connect_to_server(address[0], int(address[1])) != OK:
		_finish(1, "connect_to_server: %s" % desk.last_error_message)
		return
	var result: Dictionary = await desk.remote_bash("echo %s" % expect, 30).completed
	desk.close("done")
	if not result.ok:
		_finish(1, "RemoteBash failed: %s: %s" % [result.error, result.message])
	elif result.text.strip_edges() != expect:
		_finish(1, "RemoteBash answered %s, expected %s" % [result.text, expect])
	else:
		_finish(0, "RemoteBash over IRC: %s" % result.text.strip_edges())


func _finish(code: int, message: String) -> void:
	print("addon check: ", message)
	get_tree().quit(code)
