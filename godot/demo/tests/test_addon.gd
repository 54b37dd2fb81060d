# The addon folder as a user gets it (addons/deskwire, the release zip's content): its
# plugin.cfg and icon, and the editor plugin's message when the library is not there.
extends "res://tests/suite.gd"

const ADDON := "res://addons/deskwire/"


func test_plugin_cfg_and_icon() -> void:
	var config := ConfigFile.new()
	check_eq(config.load(ADDON + "plugin.cfg"), OK, "plugin.cfg reads")
	for key in ["name", "description", "author", "version", "script"]:
		check(str(config.get_value("plugin", key, "")) != "", "plugin.cfg has %s" % key)
	check(FileAccess.file_exists(ADDON + str(config.get_value("plugin", "script", ""))), "the plugin's script is there")
	var icon: Texture2D = load(ADDON + "icon.svg")
	check(icon != null, "icon.svg imports as a texture")
	if icon != null:
		check_eq(icon.get_size(), Vector2(128, 128), "a square 128 px icon")


func test_the_plugin_names_what_keeps_the_library_from_loading() -> void:
	var plugin: GDScript = load(ADDON + "plugin.gd")
	var gdextension := ADDON + "deskwire.gdextension"
	check_eq(plugin.library_problem(gdextension, true), "", "loaded: nothing to say")
	var missing := "user://missing.gdextension"
	var config := ConfigFile.new()
	config.set_value("configuration", "entry_symbol", "deskwire_init")
	config.set_value("libraries", "linux.x86_64", "res://addons/deskwire/bin/nowhere/libdeskwire_godot.so")
	config.set_value("libraries", "windows.x86_64", "res://addons/deskwire/bin/nowhere/deskwire_godot.dll")
	config.save(missing)
	var message: String = plugin.library_problem(missing, false)
	check(message.contains("is missing: res://addons/deskwire/bin/nowhere/libdeskwire_godot.so"), "names the missing file: %s" % message)
	var other := "user://other.gdextension"
	config = ConfigFile.new()
	config.set_value("libraries", "windows.x86_64", "res://x.dll")
	config.save(other)
	message = plugin.library_problem(other, false)
	check(message.contains("no library for this platform"), "a zip without this platform: %s" % message)
	message = plugin.library_problem(gdextension, false)
	check(message.contains("did not load"), "a library that is there but did not load: %s" % message)
	for path in [missing, other]:
		DirAccess.remove_absolute(ProjectSettings.globalize_path(path))
