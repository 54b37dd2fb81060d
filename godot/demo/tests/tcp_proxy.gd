# A TCP proxy on loopback between a client under test and the suite's IRC server, pumped every
# frame: the test cuts every connection through it (a lost link) or freezes it (a server that
# stops answering, as SIGSTOP does: the sockets stay open and nothing comes).
extends Node

var port := 0
var frozen := false
var _server := TCPServer.new()
var _host := ""
var _upstream_port := 0
## [client, upstream] pairs.
var _pairs: Array = []


## Listens on a free loopback port in front of `address` (host:port).
func open(address: String) -> Error:
	_host = address.get_slice(":", 0)
	_upstream_port = int(address.get_slice(":", 1))
	var error := _server.listen(0, "127.0.0.1")
	port = _server.get_local_port()
	return error


## Drops every connection through the proxy; new ones are proxied again.
func cut() -> void:
	for pair in _pairs:
		pair[0].disconnect_from_host()
		pair[1].disconnect_from_host()
	_pairs.clear()


## How many connections go through it now.
func connections() -> int:
	return _pairs.size()


func _process(_delta: float) -> void:
	while _server.is_connection_available():
		var upstream := StreamPeerTCP.new()
		upstream.connect_to_host(_host, _upstream_port)
		_pairs.append([_server.take_connection(), upstream])
	var open_pairs: Array = []
	for pair in _pairs:
		var client: StreamPeerTCP = pair[0]
		var upstream: StreamPeerTCP = pair[1]
		client.poll()
		upstream.poll()
		var ends := [client.get_status(), upstream.get_status()]
		if StreamPeerTCP.STATUS_ERROR in ends or StreamPeerTCP.STATUS_NONE in ends:
			client.disconnect_from_host()
			upstream.disconnect_from_host()
			continue
		if not frozen and upstream.get_status() == StreamPeerTCP.STATUS_CONNECTED:
			_move(client, upstream)
			_move(upstream, client)
		open_pairs.append(pair)
	_pairs = open_pairs


func _move(from: StreamPeerTCP, to: StreamPeerTCP) -> void:
	var available := from.get_available_bytes()
	if available > 0:
		var got: Array = from.get_data(available)
		if got[0] == OK:
			to.put_data(got[1])


func _exit_tree() -> void:
	cut()
	_server.stop()
