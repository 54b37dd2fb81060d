# A plain IRC connection written in GDScript: what a VR Office project's own IRC link does
# (registers, joins, hands every line on). The tests use it as the project's link for
# DeskRpcClient.attach() and as a watcher that sees what others send in the channel.
extends RefCounted

var tcp := StreamPeerTCP.new()
var nick: String
var channel: String
var lines: Array[String] = []   # every line received, in order
var joined := false
var _buffer := PackedByteArray()


func open(address: String, p_nick: String, p_channel: String) -> Error:
	nick = p_nick
	channel = p_channel
	var host := address.get_slice(":", 0)
	var port := int(address.get_slice(":", 1))
	var err := tcp.connect_to_host(host, port)
	if err != OK:
		return err
	send("NICK " + nick)
	send("USER %s 0 * :deskwire test link" % nick)
	return OK


var _pending := PackedByteArray()


func send(line: String) -> void:
	_pending.append_array((line + "\r\n").to_utf8_buffer())
	_flush()


func _flush() -> void:
	if _pending.is_empty() or tcp.get_status() != StreamPeerTCP.STATUS_CONNECTED:
		return
	var answer: Array = tcp.put_partial_data(_pending)
	if answer[0] == OK:
		_pending = _pending.slice(answer[1])


## Reads what arrived; returns the new lines (PING is answered, JOIN noted).
func poll() -> Array[String]:
	tcp.poll()
	_flush()
	var fresh: Array[String] = []
	if tcp.get_status() != StreamPeerTCP.STATUS_CONNECTED:
		return fresh
	var available := tcp.get_available_bytes()
	if available > 0:
		var answer: Array = tcp.get_partial_data(available)
		if answer[0] == OK:
			_buffer.append_array(answer[1])
	while true:
		var end := _buffer.find(10)
		if end < 0:
			break
		var line := _buffer.slice(0, end).get_string_from_utf8().strip_edges(false, true)
		_buffer = _buffer.slice(end + 1)
		fresh.append(line)
		lines.append(line)
		if line.begins_with("PING "):
			send("PONG " + line.substr(5))
		elif line.contains(" 001 "):
			send("JOIN " + channel)
		elif line.contains(" 366 "):
			joined = true
	return fresh


func close() -> void:
	if tcp.get_status() == StreamPeerTCP.STATUS_CONNECTED:
		send("QUIT :done")
	tcp.disconnect_from_host()
