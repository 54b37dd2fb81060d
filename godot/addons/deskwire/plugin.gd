# deskwire's editor plugin. The classes come from deskwire.gdextension, which Godot loads
# without any plugin; what this adds is a clear message in the editor when that failed, most
# often because the zip had no library for this platform or it sits elsewhere.
@tool
extends EditorPlugin

const GDEXTENSION := "res://addons/deskwire/deskwire.gdextension"


func _enter_tree() -> void:
	var problem := library_problem(GDEXTENSION, ClassDB.class_exists("DeskRpcClient"))
	if problem != "":
		push_error(problem)


## What keeps the extension from loading here, or "" when it is [param loaded]: no library for
## this platform in [param gdextension], or the library it names is missing.
static func library_problem(gdextension: String, loaded: bool) -> String:
	if loaded:
		return ""
	var config := ConfigFile.new()
	if config.load(gdextension) != OK:
		return "deskwire: cannot read %s" % gdextension
	for key in config.get_section_keys("libraries"):
		var tags: PackedStringArray = key.split(".")
		if Array(tags).all(func(tag): return OS.has_feature(tag)):
			var path: String = config.get_value("libraries", key)
			if not FileAccess.file_exists(path):
				return "deskwire: the library for this platform (%s) is missing: %s. Build it (cargo build --release -p deskwire-godot) or take the release zip, and put it there." % [key, path]
			return "deskwire: %s did not load (see the errors above); it needs Godot %s or newer" % [path, config.get_value("configuration", "compatibility_minimum", "4.4")]
	return "deskwire: %s names no library for this platform (%s)" % [gdextension, ", ".join([OS.get_name(), Engine.get_architecture_name()])]
