# Test only (godot/run_tests.sh copies it into a scratch copy of the demo): opens the editor's
# help page of each deskwire class, as a user would with F1, and writes the text the page shows
# to $DESKWIRE_DOC_OUT with each class's methods, properties and signals as ClassDB lists them
# (the run checks every one has its description on the page), then quits the editor.
@tool
extends EditorPlugin

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
	var members := {}
	var script_editor := EditorInterface.get_script_editor()
	# Every class the extension registered, not a list kept here.
	var classes := Array(ClassDB.get_class_list()).filter(func(c): return ClassDB.class_get_api_type(c) == ClassDB.API_EXTENSION)
	for name in classes:
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
		members[name] = _members(name)
	var out := FileAccess.open(OS.get_environment("DESKWIRE_DOC_OUT"), FileAccess.WRITE)
	var plugin_enabled := EditorInterface.is_plugin_enabled("deskwire")
	out.store_string(JSON.stringify({"pages": pages, "members": members, "deskwire_plugin_enabled": plugin_enabled}, "  "))
	out.close()
	get_tree().quit()


## The class's own members as the help lists them: methods (without the properties' getters
## and setters, which the page shows under the property), properties and signals.
func _members(name: String) -> Dictionary:
	var accessors := {}
	var properties: Array = []
	for p in ClassDB.class_get_property_list(name, true):
		if p.usage & (PROPERTY_USAGE_GROUP | PROPERTY_USAGE_CATEGORY | PROPERTY_USAGE_SUBGROUP):
			continue
		properties.append({"name": p.name, "getter": ClassDB.class_get_property_getter(name, p.name)})
		accessors[ClassDB.class_get_property_getter(name, p.name)] = true
		accessors[ClassDB.class_get_property_setter(name, p.name)] = true
	var methods: Array = []
	for m in ClassDB.class_get_method_list(name, true):
		if not accessors.has(StringName(m.name)):
			methods.append(m.name)
	var signals: Array = ClassDB.class_get_signal_list(name, true).map(func(s): return s.name)
	return {"methods": methods, "properties": properties, "signals": signals}
