# The repository's conformance vectors (tests/vectors/) through the extension, in the engine:
# every file is run here or listed in NOT_RUNNABLE with the reason (docs/README.md), and a
# case a file's runner cannot run is listed in CASES_NOT_RUNNABLE with the reason. The run's
# summary prints what ran and what did not (summary()).
#
# - oa1.json: Oa1 (escape, unescape, frames, format, chunks, ERR payloads), and the scripted
#   exchanges through Oa1Client / Oa1Server on the vectors' virtual clock.
# - tools.json: ToolGate with REXD's tools, under the file's policy.
# - irc-msg-split.json: IrcMessage.parse.
#
# Godot's JSON parser makes every number a float; the loader turns whole ones back into ints, as
# the extension does with what GDScript hands it.
extends "res://tests/suite.gd"

## Files (or folders, ending in "/") of tests/vectors/ that do not run in Godot, and why.
const NOT_RUNNABLE := {
	"jsonrpc.json": "the JSON-RPC peer (REXD and sidecar dialects) is not exposed in Godot: the extension reaches rexd through OA1 on IRC, never over JSON-RPC",
	"rexd.json": "REXD's message types and schema are not exposed in Godot: the extension reaches rexd through OA1 on IRC (RemoteBash), never over REXD itself",
	"sidecar.json": "the sidecar IPC engine is not exposed in Godot (it is the desktop host's side: C and Python)",
	"gateway.json": "the gateway RPC engine is not exposed in Godot",
	"mobile.json": "the mobile companion engines (WebSocket pairing, sync) are not exposed in Godot (Kotlin and Python have them)",
	"providers/": "whole provider requests, responses and streams are not exposed in Godot: ToolGate and RemoteBashTool translate one tool list, one tool call and one tool result, and those translations are tested in test_tool_gate.gd",
}

## Cases inside files that run, by "file section: name", and why they cannot run.
const CASES_NOT_RUNNABLE := {
	"oa1.json escape: NUL, which IRC cannot carry": "the text holds U+0000, which no Godot String can (Godot's JSON parser and String turn it into U+FFFD)",
	"oa1.json unescape: every escape": "the expected text holds U+0000, which no Godot String can (Godot's JSON parser and String turn it into U+FFFD)",
}

## The files read so far (oa1.json is read once: Godot reports each U+0000 it replaces).
var docs := {}
## Cases compared per file, per section ("file" -> {"section": n}).
var ran := {}
## The CASES_NOT_RUNNABLE entries met in the files.
var skipped_cases := []


func vectors_dir() -> String:
	# The demo project is godot/demo in the repository.
	return ProjectSettings.globalize_path("res://").path_join("../../tests/vectors").simplify_path()


func load_vectors(file: String) -> Dictionary:
	if docs.has(file):
		return docs[file]
	var path := vectors_dir().path_join(file)
	var text := FileAccess.get_file_as_string(path)
	check(text != "", "read %s (%s)" % [path, error_string(FileAccess.get_open_error())])
	var doc = JSON.parse_string(text)
	check(doc is Dictionary, "%s is a JSON object" % file)
	docs[file] = whole_numbers(doc) if doc is Dictionary else {}
	return docs[file]


## `value` with every whole float made an int (JSON.parse_string reads 5 as 5.0).
func whole_numbers(value: Variant) -> Variant:
	match typeof(value):
		TYPE_FLOAT:
			return int(value) if value == floor(value) and absf(value) < 9.0e18 else value
		TYPE_ARRAY:
			return value.map(whole_numbers)
		TYPE_DICTIONARY:
			var out := {}
			for key in value:
				out[key] = whole_numbers(value[key])
			return out
	return value


## Whether the case runs; counts it under `file`/`section` when it does.
func runs(file: String, section: String, name: String) -> bool:
	var key := "%s %s: %s" % [file, section, name]
	if CASES_NOT_RUNNABLE.has(key):
		skipped_cases.append(key)
		return false
	var sections: Dictionary = ran.get_or_add(file, {})
	sections[section] = sections.get(section, 0) + 1
	return true


func files_under(dir: String, prefix: String) -> Array:
	var out := []
	var d := DirAccess.open(dir)
	check(d != null, "open %s" % dir)
	if d == null:
		return out
	for f in d.get_files():
		out.append(prefix + f)
	for sub in d.get_directories():
		out.append_array(files_under(dir.path_join(sub), prefix + sub + "/"))
	return out


func listed_reason(file: String) -> String:
	for entry in NOT_RUNNABLE:
		if file == entry or (entry.ends_with("/") and file.begins_with(entry)):
			return NOT_RUNNABLE[entry]
	return ""


func test_every_vector_file_runs_or_is_listed() -> void:
	var runners := ["oa1.json", "tools.json", "irc-msg-split.json"]
	var files := files_under(vectors_dir(), "")
	check(files.size() >= 10, "found the vector files in %s: %s" % [vectors_dir(), files])
	for file in files:
		var listed := listed_reason(file) != ""
		check(listed != runners.has(file), "%s is run here or listed in NOT_RUNNABLE, and not both" % file)
	for entry in NOT_RUNNABLE:
		check(files.any(func(f): return f == entry or (entry.ends_with("/") and f.begins_with(entry))), "NOT_RUNNABLE names %s, which is not in tests/vectors" % entry)
	# Every case listed as not runnable is still in its file ("file section: name").
	for key in CASES_NOT_RUNNABLE:
		var file: String = key.get_slice(" ", 0)
		var section: String = key.get_slice(" ", 1).trim_suffix(":")
		var name: String = key.substr(file.length() + section.length() + 3)
		var cases: Array = load_vectors(file).get(section, [])
		check(cases.any(func(c): return c.get("name") == name), "CASES_NOT_RUNNABLE names %s, which is not in %s" % [key, file])


# ---------------------------------------------------------------- oa1.json: the codec


func test_oa1_escape_and_unescape() -> void:
	var doc := load_vectors("oa1.json")
	for c in doc.escape:
		if runs("oa1.json", "escape", c.name):
			check_eq(Oa1.escape(c.text), c.escaped, "escape: " + c.name)
	for c in doc.unescape:
		if runs("oa1.json", "unescape", c.name):
			check_eq(Oa1.unescape(c.escaped), c.text.to_utf8_buffer(), "unescape: " + c.name)


func test_oa1_frames_and_format() -> void:
	var doc := load_vectors("oa1.json")
	for c in doc.frames:
		if runs("oa1.json", "frames", c.name):
			var got := Oa1.parse_frame(c.text)
			check_eq(null if got.is_empty() else got, c.frame, "frames: " + c.name)
	for c in doc.format:
		if runs("oa1.json", "format", c.name):
			var f: Dictionary = c.frame
			var text := Oa1.format_frame(f.type, f.id, f.seq, f.more, f.payload)
			check_eq(text, c.text, "format: " + c.name)
			check_eq(Oa1.parse_frame(text), f, "format: %s reads back" % c.name)


func test_oa1_chunks_and_err_payloads() -> void:
	var doc := load_vectors("oa1.json")
	for c in doc.chunks:
		if runs("oa1.json", "chunks", c.name):
			var payloads := Oa1.split(c.text, c.budget)
			check_eq(Array(payloads), c.payloads, "chunks: " + c.name)
			# Each fits its budget, and together they decode to the text.
			var joined := PackedByteArray()
			for p in payloads:
				check(p.to_utf8_buffer().size() <= maxi(c.budget, 4), "chunks: %s: %s over the budget" % [c.name, p])
				joined.append_array(Oa1.unescape(p))
			check_eq(joined, c.text.to_utf8_buffer(), "chunks: %s decode to the text" % c.name)
	for c in doc.err_payloads:
		if runs("oa1.json", "err_payloads", c.name):
			check_eq(Oa1.parse_err_payload(c.payload), {"code": c.code, "message": c.message}, "err_payloads: " + c.name)


# ---------------------------------------------------------------- oa1.json: the exchanges


## `value` with `{name}` replaced by the ids bound so far, in every string.
func bind(value: Variant, ids: Dictionary) -> Variant:
	match typeof(value):
		TYPE_STRING:
			var s: String = value
			for name in ids:
				s = s.replace("{%s}" % name, ids[name])
			return s
		TYPE_ARRAY:
			return value.map(func(v): return bind(v, ids))
		TYPE_DICTIONARY:
			var out := {}
			for key in value:
				out[key] = bind(value[key], ids)
			return out
	return value


## An output as the vectors write it: a `failed` event keeps its message only where the
## expectation has one (the texts of timeout and incomplete are not protocol).
func shaped(output: Dictionary, expected: Variant) -> Dictionary:
	var failed = output.get("event", {}).get("failed")
	if failed is Dictionary:
		var wants: bool = expected is Dictionary and expected.get("event", {}).get("failed", {}).has("message")
		if not wants:
			failed.erase("message")
	return output


## Runs one host call; returns the local error's name, or "" when it succeeded.
func host_call(endpoint: RefCounted, now: int, step: Dictionary, ids: Dictionary, at: String) -> String:
	var status := OK
	if step.has("request"):
		var r: Dictionary = step.request
		var id: String = endpoint.request(now, r.payload, r.get("timeout_ms", 0))
		if id == "":
			check(endpoint.last_error != "", "%s: an empty id names its error" % at)
			return endpoint.last_error
		if step.has("bind"):
			ids[step.bind] = id
	elif step.has("cancel"):
		status = endpoint.cancel(now, step.cancel.id, step.cancel.reason)
	elif step.has("send"):
		status = endpoint.send(now, step.send.id, step.send.text)
	elif step.has("finish"):
		status = endpoint.finish(now, step.finish.id)
	elif step.has("respond"):
		status = endpoint.respond(now, step.respond.id, step.respond.text)
	elif step.has("fail"):
		status = endpoint.fail(now, step.fail.id, step.fail.code, step.fail.message)
	else:
		check(false, "%s: unknown step" % at)
	check((status == OK) == (endpoint.last_error == ""), "%s: status %s goes with last_error %s" % [at, error_string(status), endpoint.last_error])
	return endpoint.last_error


func run_exchange(exchange: Dictionary) -> void:
	var name: String = exchange.name
	var endpoint: RefCounted
	if exchange.endpoint == "client":
		endpoint = Oa1Client.create(exchange.config, exchange.seed)
	else:
		endpoint = Oa1Server.create(exchange.config)
	check(endpoint != null, "%s: the endpoint takes the config %s" % [name, exchange.config])
	if endpoint == null:
		return
	var ids := {}
	for index in exchange.steps.size():
		var raw: Dictionary = exchange.steps[index]
		var step: Dictionary = bind(raw, ids)
		var now: int = step.at
		var at := "exchanges: %s, step %d %s" % [name, index, JSON.stringify(raw)]
		if step.has("line"):
			endpoint.handle_line(now, step.line)
		elif step.has("poll"):
			var expected: Array = step.poll
			var got := []
			while true:
				var out: Dictionary = endpoint.poll_output(now)
				got.append(shaped(out, expected[got.size()] if got.size() < expected.size() else null))
				if out.has("timeout") or out.is_empty():
					break
				if got.size() > expected.size() + 50:
					check(false, "%s: poll does not end" % at)
					break
			check_eq(got, expected, at)
		elif step.has("stats"):
			var stats: Dictionary = endpoint.stats
			for counter in step.stats:
				check(stats.has(counter), "%s: unknown counter %s" % [at, counter])
				check_eq(stats.get(counter), step.stats[counter], "%s: %s" % [at, counter])
		else:
			check_eq(host_call(endpoint, now, step, ids, at), step.get("expect_error", ""), at)


func test_oa1_exchanges() -> void:
	var doc := load_vectors("oa1.json")
	check(doc.exchanges.size() > 0, "oa1.json has exchanges")
	for exchange in doc.exchanges:
		if runs("oa1.json", "exchanges", exchange.name):
			run_exchange(exchange)


# ---------------------------------------------------------------- tools.json


## Gives `agent` the vector's context. The vectors name the NPC bound to the agent's desk
## (`bound_npc_id`); in ToolGate that is who sits at the desk: seating another NPC there
## stands the agent up. The rest of the context goes through set_context.
func seat(gate: ToolGate, agent: String, context: Dictionary, at: String) -> void:
	var rest := context.duplicate()
	var bound = rest.get("bound_npc_id")
	rest.erase("bound_npc_id")
	if bound == null:
		gate.unbind_npc(agent)  # ERR_DOES_NOT_EXIST when it was not seated
	else:
		check_eq(gate.bind_npc(bound, "desk-1"), OK, "%s: bind %s" % [at, bound])
	check_eq(gate.desk_of(agent), "desk-1" if bound == agent else "", "%s: %s's desk" % [at, agent])
	check_eq(gate.set_context(agent, rest), OK, "%s: set_context" % at)


func test_tools() -> void:
	var doc := load_vectors("tools.json")
	check_eq(doc.get("protocol"), "tools", "tools.json protocol")
	# The registry the file names: RemoteBash while bound (ToolGate has it), then REXD's tools.
	var gate := ToolGate.new()
	gate.provider = "deskwire"
	check_eq(gate.register_rexd_tools(), OK, "register_rexd_tools")
	gate.policy = doc.policy
	var written: Dictionary = gate.policy
	written.erase("max_remembered")
	check_eq(written, doc.policy, "the policy reads back")
	var changed := []
	gate.tools_changed.connect(func(npc): changed.append(npc))
	for c in doc.cases:
		if not runs("tools.json", c.kind, c.name):
			continue
		var at: String = "tools: " + c.name
		var got: Variant = null
		match c.kind:
			"authorize":
				seat(gate, c.agent, c.context, at)
				var verdict := gate.authorize(c.agent, c.call, c.get("origin", "model"))
				check_eq(verdict.get("allowed"), verdict.get("kind") == "allowed", "%s: allowed" % at)
				verdict.erase("allowed")
				got = verdict
			"slash":
				var r := gate.parse_slash(c.line)
				if r.has("call"):
					got = {"name": r.call.name, "args": r.call.args}
				else:
					check(r.get("message", "") != "", "%s: the error has a message" % at)
					got = {"error": r.get("error")}
			"visible":
				seat(gate, c.agent, c.context, at)
				got = Array(gate.visible_tool_names(c.agent))
			_:
				check(false, "%s: unknown kind %s" % [at, c.kind])
		check_eq(got, c.expect, at)
	check(changed.has("npc-1"), "tools_changed was emitted for npc-1: %s" % [changed])


# ---------------------------------------------------------------- irc-msg-split.json


func test_irc_msg_split() -> void:
	var doc := load_vectors("irc-msg-split.json")
	for t in doc.tests:
		if not runs("irc-msg-split.json", "tests", t.input):
			continue
		var atoms: Dictionary = t.atoms
		var msg := IrcMessage.parse(t.input)
		var at: String = "irc-msg-split: %s" % JSON.stringify(t.input)
		check_eq(msg.get("command"), atoms.verb, at + ": verb")
		check_eq(msg.get("source"), atoms.get("source"), at + ": source")
		check_eq(msg.get("params"), atoms.get("params", []), at + ": params")
		check_eq(msg.get("tags"), atoms.get("tags", {}), at + ": tags")


# ---------------------------------------------------------------- the summary


## Lines for the run's summary: cases compared per file, files and cases not runnable.
func summary() -> Array:
	var lines := []
	for file in ran:
		var sections: Dictionary = ran[file]
		var total := 0
		var parts := []
		for section in sections:
			total += sections[section]
			parts.append("%s %d" % [section, sections[section]])
		var skipped := skipped_cases.filter(func(k): return k.begins_with(file + " "))
		lines.append("vectors %s: %d cases run (%s), %d not runnable" % [file, total, ", ".join(parts), skipped.size()])
		for key in skipped:
			lines.append("  not runnable: %s: %s" % [key.trim_prefix(file + " "), CASES_NOT_RUNNABLE[key]])
	for entry in NOT_RUNNABLE:
		lines.append("vectors %s: skipped: %s" % [entry, NOT_RUNNABLE[entry]])
	return lines
