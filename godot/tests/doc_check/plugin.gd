# Test only (godot/run_tests.sh copies it into a scratch copy of the demo): opens the editor's
# help page of each deskwire class, as a user would with F1, and writes the text the page shows
# to $DESKWIRE_DOC_OUT, then quits the editor.
@tool
extends EditorPlugin

const CLASSES := ["DeskRpcClient", "RemoteCall", "ToolGate", "RemoteBashTool", "Oa1Client", "Oa1Server", "Oa1", "IrcMessage"]


func _enter_tree() -> void:
	_check.call_deferred()


func _find_help(node: Node) -> Node:
	if node.get_class() == "EditorHelp" and node.is_visible_in_tree():
		return node
	for child in node.get_children(true):
		var found := _find_help(child)
		if found != null:
			return found
	return null


func _text(help: Node) -> String:
	var best := ""
	for child in help.find_children("*", "RichTextLabel", true, false):
		var text: String = child.get_parsed_text()
		if text.length() > best.length():
			best = text
	return best


func _check() -> void:
	var pages := {}
	var script_editor := EditorInterface.get_script_editor()
	for name in CLASSES:
		var text := ""
		# The help loads its pages in a thread; ask again until the page has content.
		for attempt in 100:
			script_editor.goto_help("class_name:" + name)
			await get_tree().process_frame
			var help := _find_help(script_editor)
			if help != null:
				text = _text(help)
				if text.contains("Description"):
					break
			await get_tree().create_timer(0.1).timeout
		pages[name] = text
	var out := FileAccess.open(OS.get_environment("DESKWIRE_DOC_OUT"), FileAccess.WRITE)
	out.store_string(JSON.stringify(pages, "  "))
	out.close()
	get_tree().quit()
