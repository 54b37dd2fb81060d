# The desk demo scene, driven as a user would: sit down, run a command, stand up. What the scene
# shows is read through its nodes here; tests/screenshot.gd checks the pixels of a real frame.
extends "res://tests/suite.gd"


func test_the_desk_demo() -> void:
	var address := irc_address()
	OS.set_environment("DESKWIRE_DESK_NICK", "godemo")
	var demo: Control = load("res://desk.tscn").instantiate()
	tree.root.add_child(demo)
	var client: DeskRpcClient = demo.get_node("DeskRpcClient")
	check(await wait_until(func(): return client.state == "ready", 15.0), "the demo's desk connected to %s (state %s)" % [address, client.state])
	var tools: Label = demo.get_node("Layout/Tools")
	var screen: RichTextLabel = demo.get_node("ScreenView/Output")
	var header: Label = demo.get_node("ScreenView/Header")
	var tag: Label3D = demo.get_node("Layout/View/Room/Npc/Tag")
	var npc: Node3D = demo.get_node("Layout/View/Room/Npc")
	var sit: Button = demo.get_node("Layout/Controls/Sit")
	var run: Button = demo.get_node("Layout/Controls/Run")
	var command: LineEdit = demo.get_node("Layout/Controls/Command")
	check(not tools.text.contains("RemoteBash"), "standing: no RemoteBash (%s)" % tools.text)
	check(tag.text.contains("standing") and header.text.contains("nobody"), "standing shows: %s / %s" % [tag.text, header.text])
	var standing_at := npc.position

	sit.pressed.emit()
	check(tools.text.contains("RemoteBash"), "seated: RemoteBash listed (%s)" % tools.text)
	check(tag.text.contains("at desk-1") and header.text.contains("npc-ada bound"), "seated shows: %s / %s" % [tag.text, header.text])
	check(npc.position.distance_to(standing_at) > 1.0, "the NPC moved to the desk")
	command.text = "echo demo ok on $(uname -s)"
	run.pressed.emit()
	check(await wait_until(func(): return screen.get_parsed_text().contains("demo ok on "), 15.0), "the result is on the desk's screen: %s" % screen.get_parsed_text())

	sit.pressed.emit()
	check(not tools.text.contains("RemoteBash"), "stood up: RemoteBash gone (%s)" % tools.text)
	run.pressed.emit()
	check(screen.get_parsed_text().begins_with("Refused: "), "a call now is refused on screen: %s" % screen.get_parsed_text())

	# A failure is shown in words: seated again, with the connection closed.
	sit.pressed.emit()
	client.close()
	run.pressed.emit()
	check(await wait_until(func(): return screen.get_parsed_text().contains("Failed (closed)"), 5.0), "a failed call says so on screen: %s" % screen.get_parsed_text())
	demo.queue_free()
	await tree.process_frame
