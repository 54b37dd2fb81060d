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
