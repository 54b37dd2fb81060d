# The desk demo scene, driven as a user would: sit down, run a command, stand up.
extends "res://tests/suite.gd"


func test_the_desk_demo() -> void:
	var address := irc_address()
	OS.set_environment("DESKWIRE_DESK_NICK", "godemo")
	var demo: Control = load("res://desk.tscn").instantiate()
	tree.root.add_child(demo)
	var client: DeskRpcClient = demo.get_node("DeskRpcClient")
	check(await wait_until(func(): return client.state == "ready", 15.0), "the demo's desk connected to %s (state %s)" % [address, client.state])
	var tools: Label = demo.get_node("Layout/Tools")
	var output: Label = demo.get_node("Layout/Output")
	var sit: Button = demo.get_node("Layout/Controls/Sit")
	var run: Button = demo.get_node("Layout/Controls/Run")
	var command: LineEdit = demo.get_node("Layout/Controls/Command")
	check(not tools.text.contains("RemoteBash"), "standing: no RemoteBash (%s)" % tools.text)

	sit.pressed.emit()
	check(tools.text.contains("RemoteBash"), "seated: RemoteBash listed (%s)" % tools.text)
	command.text = "echo demo ok on $(uname -s)"
	run.pressed.emit()
	check(await wait_until(func(): return output.text.begins_with("demo ok on "), 15.0), "the result is on screen: %s" % output.text)

	sit.pressed.emit()
	check(not tools.text.contains("RemoteBash"), "stood up: RemoteBash gone (%s)" % tools.text)
	run.pressed.emit()
	check(output.text.begins_with("Refused: "), "a call now is refused on screen: %s" % output.text)
	demo.queue_free()
	await tree.process_frame
