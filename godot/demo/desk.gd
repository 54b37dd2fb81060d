# The desk demo: an NPC sits down at a desk, RemoteBash appears in the tools its model sees,
# a tool call runs on the remote machine through the desk's IRC channel (rexd --irc), and the
# output appears on the desk's screen. Stand up and RemoteBash disappears; a call then is
# refused, and the screen says why.
#
# Run it against an IRC server with rexd serving the channel (rexd's defaults: #desk, nick rexd):
#   rexd --irc 127.0.0.1:6667 --allow-from desk --unauthenticated
#   godot --path godot/demo        (DESKWIRE_IRC=host:port overrides irc_server)
#
# The room is 3D (a desk, its monitor, the NPC); the monitor shows ScreenView, a 2D viewport
# whose RichTextLabel keeps the last lines of a long output in view.
extends Control

## The IRC server, host:port.
@export var irc_server := "127.0.0.1:6667"
## The desk's channel.
@export var channel := "#desk"
## The desk's nick (rexd's --allow-from).
@export var desk_nick := "desk"
## rexd's nick (rexd --irc's default).
@export var remote_nick := "rexd"

const NPC := "npc-ada"
const DESK := "desk-1"
const STANDING := Vector3(0.95, 0, -1.1)    # across the room, behind the desk
const SEATED := Vector3(-0.9, 0, 0.3)        # at the desk, beside its screen
const SEATED_COLOR := Color(0.25, 0.55, 0.85)
const STANDING_COLOR := Color(0.6, 0.6, 0.65)
const FAILED_COLOR := Color(1.0, 0.45, 0.4)

var gate := ToolGate.new()
var calls := 0

@onready var desk_client: DeskRpcClient = $DeskRpcClient
@onready var status: Label = $Layout/Status
@onready var camera: Camera3D = $Layout/View/Room/Camera
@onready var screen: MeshInstance3D = $Layout/View/Room/Desk/Monitor/Screen
@onready var npc: Node3D = $Layout/View/Room/Npc
@onready var npc_tag: Label3D = $Layout/View/Room/Npc/Tag
@onready var npc_body: MeshInstance3D = $Layout/View/Room/Npc/Body
@onready var sit_button: Button = $Layout/Controls/Sit
@onready var command: LineEdit = $Layout/Controls/Command
@onready var run_button: Button = $Layout/Controls/Run
@onready var tools_label: Label = $Layout/Tools
@onready var screen_header: Label = $ScreenView/Header
@onready var output: RichTextLabel = $ScreenView/Output


func _ready() -> void:
	for setting in [["DESKWIRE_IRC", "irc_server"], ["DESKWIRE_CHANNEL", "channel"], ["DESKWIRE_DESK_NICK", "desk_nick"], ["DESKWIRE_REMOTE_NICK", "remote_nick"]]:
		var value := OS.get_environment(setting[0])
		if value != "":
			set(setting[1], value)
	# The monitor shows the screen viewport; unshaded, so the text reads whatever the light.
	var screen_material := StandardMaterial3D.new()
	screen_material.shading_mode = BaseMaterial3D.SHADING_MODE_UNSHADED
	screen_material.albedo_texture = $ScreenView.get_texture()
	screen.material_override = screen_material
	npc_body.material_override = StandardMaterial3D.new()
	camera.look_at(screen.global_position + Vector3(-0.3, -0.2, 0))

	gate.tools_changed.connect(_on_tools_changed)
	# While it waits (for the channel, or for rexd to be in it) the status says for what.
	desk_client.connection_state_changed.connect(func(state): status.text = "IRC %s %s as %s: %s %s" % [irc_server, channel, desk_nick, state, desk_client.waiting_for()])
	desk_client.irc_event.connect(_on_irc_event)
	sit_button.pressed.connect(toggle_sit)
	run_button.pressed.connect(run_command)
	command.text_submitted.connect(func(_text): run_command())
	desk_client.server_host = irc_server.get_slice(":", 0)
	desk_client.server_port = int(irc_server.get_slice(":", 1))
	desk_client.channel = channel
	desk_client.nick = desk_nick
	desk_client.remote_nick = remote_nick
	if desk_client.connect_to_server() != OK:
		status.text = "IRC %s: %s" % [irc_server, desk_client.last_error_message]
	_on_tools_changed(NPC)


## What the server refused (the channel, the nick) goes on screen, not only into the log.
func _on_irc_event(event: Dictionary) -> void:
	for kind in ["join_failed", "nick_refused", "kicked", "disconnected"]:
		if event.has(kind):
			status.text = "IRC %s: %s %s" % [irc_server, kind, event[kind]]


## The NPC sits down at the desk, or stands up.
func toggle_sit() -> void:
	if gate.desk_of(NPC) == "":
		gate.bind_npc(NPC, DESK)
	else:
		gate.unbind_npc(NPC)


## Bound or not, it shows: where the NPC is, its colour and tag, the screen's header, the
## tools its model sees.
func _on_tools_changed(npc_id: String) -> void:
	var seated := gate.desk_of(npc_id) != ""
	var names := gate.visible_tool_names(npc_id)
	tools_label.text = "Tools the model of %s sees: %s" % [npc_id, ", ".join(names) if names.size() > 0 else "(none)"]
	sit_button.text = "Stand up" if seated else "Sit down"
	npc.position = SEATED if seated else STANDING
	(npc_body.material_override as StandardMaterial3D).albedo_color = SEATED_COLOR if seated else STANDING_COLOR
	npc_tag.text = "Ada, at %s" % DESK if seated else "Ada, standing"
	screen_header.text = "%s: %s bound" % [DESK, npc_id] if seated else "%s: nobody seated" % DESK


## What the NPC's model would do: call RemoteBash (OpenAI Chat format), checked by the gate.
func run_command() -> void:
	calls += 1
	var tool_call := {
		"id": "call_%d" % calls,
		"type": "function",
		"function": {"name": "RemoteBash", "arguments": JSON.stringify({"command": command.text})},
	}
	var verdict := gate.authorize(NPC, tool_call)
	if not verdict.allowed:
		_show("Refused: " + verdict.observation, FAILED_COLOR)
		return
	_show("$ %s\nrunning..." % command.text)
	var call := RemoteBashTool.run(desk_client, tool_call)
	var result: Dictionary = await call.completed
	if result.ok:
		_show("$ %s\n%s" % [command.text, result.text])
	else:
		_show("$ %s\nFailed (%s): %s" % [command.text, result.error, result.message], FAILED_COLOR)


## The screen's text; with scroll_following the last lines of a long output stay in view.
func _show(text: String, color := Color(0.5, 0.95, 0.55)) -> void:
	output.clear()
	output.push_color(color)
	output.add_text(text.strip_edges(false, true))
	output.pop()
