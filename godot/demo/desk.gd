# The desk demo: an NPC sits down at a desk, RemoteBash appears in the tools its model sees,
# a tool call runs on the remote machine through the desk's IRC channel (rexd --irc), and the
# result is shown. Stand up and RemoteBash disappears; a call then is refused.
#
# Run it against an IRC server with rexd serving the channel (rexd's defaults: #desk, nick rexd):
#   rexd --irc 127.0.0.1:6667 --allow-from desk --unauthenticated
#   godot --path godot/demo        (DESKWIRE_IRC=host:port overrides irc_server)
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

var gate := ToolGate.new()
var calls := 0

@onready var desk_client: DeskRpcClient = $DeskRpcClient
@onready var status: Label = $Layout/Status
@onready var npc: ColorRect = $Layout/Room/Npc
@onready var sit_button: Button = $Layout/Controls/Sit
@onready var tools_label: Label = $Layout/Tools
@onready var command: LineEdit = $Layout/Controls/Command
@onready var run_button: Button = $Layout/Controls/Run
@onready var output: Label = $Layout/Output


func _ready() -> void:
	for setting in [["DESKWIRE_IRC", "irc_server"], ["DESKWIRE_CHANNEL", "channel"], ["DESKWIRE_DESK_NICK", "desk_nick"], ["DESKWIRE_REMOTE_NICK", "remote_nick"]]:
		var value := OS.get_environment(setting[0])
		if value != "":
			set(setting[1], value)
	gate.tools_changed.connect(_on_tools_changed)
	# While it waits (for the channel, or for rexd to be in it) the status says for what.
	desk_client.connection_state_changed.connect(func(state): status.text = "IRC %s %s as %s: %s %s" % [irc_server, channel, desk_nick, state, desk_client.waiting_for()])
	desk_client.irc_event.connect(_on_irc_event)
	sit_button.pressed.connect(toggle_sit)
	run_button.pressed.connect(run_command)
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


func _on_tools_changed(npc_id: String) -> void:
	var seated := gate.desk_of(npc_id) != ""
	var names := gate.visible_tool_names(npc_id)
	tools_label.text = "Tools the model of %s sees: %s" % [npc_id, ", ".join(names) if names.size() > 0 else "(none)"]
	sit_button.text = "Stand up" if seated else "Sit down"
	npc.position.x = 200.0 if seated else 360.0   # at the desk, or across the room


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
		output.text = "Refused: " + verdict.observation
		return
	output.text = "Running %s ..." % command.text
	var call := RemoteBashTool.run(desk_client, tool_call)
	await call.completed
	output.text = call.tool_message().content
