# The GDScript suite, run in a real engine:
#   godot --headless --path godot/demo -s tests/run.gd
# Exits 0 when every test passed, 1 otherwise. The IRC tests need DESKWIRE_IRC (host:port of an
# IRC server with `rexd --irc` serving RemoteBash in DESKWIRE_CHANNEL as DESKWIRE_REMOTE_NICK);
# without it they fail, since a run that skips them proves nothing about the link.
extends SceneTree

const SUITES := [
	"res://tests/test_values.gd",
	"res://tests/test_tool_gate.gd",
	"res://tests/test_desk_client.gd",
	"res://tests/test_desk_connection.gd",
	"res://tests/test_failures.gd",
	"res://tests/test_reconnect.gd",
	"res://tests/test_sasl.gd",
	"res://tests/test_readme.gd",
	"res://tests/test_demo.gd",
	"res://tests/test_addon.gd",
	"res://tests/test_bad_input.gd",
	"res://tests/test_oa1.gd",
	"res://tests/test_vectors.gd",
]

var passed := 0
var failed := 0


func _initialize() -> void:
	_run.call_deferred()


func _run() -> void:
	# What suites report beyond pass/fail (the vectors: cases run, and what cannot run and why).
	var notes: Array = []
	# DESKWIRE_GODOT_ONLY=test_x.gd,test_y.gd runs those suites only (while working on them;
	# CI runs all).
	var only := OS.get_environment("DESKWIRE_GODOT_ONLY").split(",", false)
	for path in SUITES:
		if not only.is_empty() and not only.has(path.get_file()):
			continue
		# A suite that does not parse is a failure, not a run that never ends.
		var script: GDScript = load(path)
		if script == null or not script.can_instantiate():
			failed += 1
			print("FAIL  %s does not load (see the parse error above)" % path.get_file())
			continue
		var suite: RefCounted = script.new()
		suite.tree = self
		for method in suite.get_method_list():
			var name: String = method.name
			if not name.begins_with("test_"):
				continue
			suite.failures = []
			await suite.call(name)
			if suite.failures.is_empty():
				passed += 1
				print("ok    %s :: %s" % [path.get_file(), name])
			else:
				failed += 1
				print("FAIL  %s :: %s" % [path.get_file(), name])
				for f in suite.failures:
					print("      ", f)
		if suite.has_method("summary"):
			notes.append_array(suite.summary())
	for line in notes:
		print(line)
	print("godot: %d passed, %d failed (engine %s)" % [passed, failed, Engine.get_version_info().string])
	quit(1 if failed > 0 or passed == 0 else 0)
