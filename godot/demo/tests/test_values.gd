# Dictionaries and Arrays from the core's JSON shapes, and back.
extends "res://tests/suite.gd"


func test_json_types_arrive_as_godot_types() -> void:
	var gate := ToolGate.new()
	gate.register_tool({"name": "t", "input_schema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "enum": [1, 2.5, true, null, "x"]}}}})
	var schema: Dictionary = gate.visible_tools("npc")[0]["function"]["parameters"]
	var e: Array = schema["properties"]["n"]["enum"]
	check_eq(typeof(schema["properties"]["n"]["minimum"]), TYPE_INT, "an integer stays an int")
	check_eq(e, [1, 2.5, true, null, "x"], "each JSON type")
	check_eq([typeof(e[0]), typeof(e[1]), typeof(e[2]), typeof(e[3]), typeof(e[4])], [TYPE_INT, TYPE_FLOAT, TYPE_BOOL, TYPE_NIL, TYPE_STRING], "Variant types")


func test_godot_values_cross_as_json() -> void:
	var gate := ToolGate.new()
	gate.provider = "deskwire"
	# StringName keys and values, packed arrays and whole floats all have a JSON form.
	var call := {&"id": "c", "name": &"t", "args": {"list": PackedStringArray(["a", "b"]), "n": 3.0, "f": PackedFloat32Array([0.5])}}
	check_eq(gate.read_tool_call(call), {"id": "c", "name": "t", "args": {"list": ["a", "b"], "n": 3, "f": [0.5]}}, "converted")
	var nested := []
	var inner := nested
	for i in 200:
		var next := []
		inner.append(next)
		inner = next
	var verdict := gate.authorize("npc", {"id": "c", "name": "t", "args": {"deep": nested}})
	check_eq(verdict.kind, "unreadable", "200 levels are refused")
	check(String(verdict.observation).contains("nested deeper"), verdict.observation)
	var looped := []
	looped.append(looped)
	verdict = gate.authorize("npc", {"id": "c", "name": "t", "args": {"loop": looped}})
	check(String(verdict.observation).contains("nested deeper"), "an array holding itself: %s" % verdict.observation)
	verdict = gate.authorize("npc", {"id": "c", "name": "t", "args": {"x": NAN}})
	check(String(verdict.observation).contains("no JSON form"), "NaN: %s" % verdict.observation)
	verdict = gate.authorize("npc", {1: "c"})
	check(String(verdict.observation).contains("keys must be strings"), "int key: %s" % verdict.observation)
