package dev.deskwire

import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableSharedFlow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asSharedFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.launch
import kotlinx.coroutines.withTimeoutOrNull
import java.net.InetSocketAddress
import java.net.Socket

/** The calls [IrcSocketLoop] makes on a connection engine ([Desk] or [Remote]). */
internal interface ConnectionEngine {
    fun handleBytes(nowMs: ULong, bytes: ByteArray)
    fun handleEof(nowMs: ULong)
    fun handleTimeout(nowMs: ULong)
    fun pollOutput(nowMs: ULong): ConnectionOutput
    fun quit(nowMs: ULong, reason: String)
    fun state(): ConnectionState
}

internal fun Desk.asEngine(): ConnectionEngine = object : ConnectionEngine {
    override fun handleBytes(nowMs: ULong, bytes: ByteArray) = this@asEngine.handleBytes(nowMs, bytes)
    override fun handleEof(nowMs: ULong) = this@asEngine.handleEof(nowMs)
    override fun handleTimeout(nowMs: ULong) = this@asEngine.handleTimeout(nowMs)
    override fun pollOutput(nowMs: ULong) = this@asEngine.pollOutput(nowMs)
    override fun quit(nowMs: ULong, reason: String) = this@asEngine.quit(nowMs, reason)
    override fun state() = this@asEngine.state()
}

internal fun Remote.asEngine(): ConnectionEngine = object : ConnectionEngine {
    override fun handleBytes(nowMs: ULong, bytes: ByteArray) = this@asEngine.handleBytes(nowMs, bytes)
    override fun handleEof(nowMs: ULong) = this@asEngine.handleEof(nowMs)
    override fun handleTimeout(nowMs: ULong) = this@asEngine.handleTimeout(nowMs)
    override fun pollOutput(nowMs: ULong) = this@asEngine.pollOutput(nowMs)
    override fun quit(nowMs: ULong, reason: String) = this@asEngine.quit(nowMs, reason)
    override fun state() = this@asEngine.state()
}

/** A TCP socket to [host]:[port] with Nagle off (IRC lines are small and latency matters). */
internal fun connectSocket(host: String, port: Int, timeoutMs: Int): Socket = Socket().apply {
    tcpNoDelay = true
    connect(InetSocketAddress(host, port), timeoutMs)
}

/**
 * The host loop of one IRC connection engine over a socket, as coroutines: one reads the
 * socket, one pumps the engine (bytes read → `handleBytes`; drain `pollOutput`, writing every
 * transmit and delivering every event; wait for the deadline, the next read or a [wake]). No
 * protocol rule lives here.
 *
 * [deliver] runs on the pump for every event before it is emitted on [events]; [onClose] runs
 * once when the pump ends, after `QUIT` went out and the socket closed.
 */
internal class IrcSocketLoop(
    private val socket: Socket,
    private val engine: ConnectionEngine,
    scope: CoroutineScope,
    private val clock: MonotonicClock,
    private val deliver: suspend (ConnectionEvent) -> Unit,
    private val onClose: () -> Unit,
) {
    private sealed interface Input {
        class Bytes(val bytes: ByteArray) : Input
        object Eof : Input
        object Wake : Input
    }

    private val inputs = Channel<Input>(capacity = 64)
    private val _events = MutableSharedFlow<ConnectionEvent>(extraBufferCapacity = 64)
    private val _state = MutableStateFlow(engine.state())

    val events: Flow<ConnectionEvent> = _events.asSharedFlow()
    val state: StateFlow<ConnectionState> = _state.asStateFlow()

    private val reader: Job = scope.launch(Dispatchers.IO) {
        val stream = socket.getInputStream()
        val buffer = ByteArray(16 * 1024)
        try {
            while (true) {
                val n = stream.read(buffer)
                if (n < 0) break
                inputs.send(Input.Bytes(buffer.copyOf(n)))
            }
        } catch (_: java.io.IOException) {
            // The socket failed or was closed: the engine learns it as end of stream.
        } finally {
            inputs.trySend(Input.Eof)
        }
    }

    private val pump: Job = scope.launch(Dispatchers.IO) {
        val out = socket.getOutputStream()
        try {
            while (true) {
                val deadline = drain { out.write(it) }
                out.flush()
                val wait = delayUntil(clock.now(), deadline)
                val input = if (wait == 0L) inputs.tryReceive().getOrNull()
                else withTimeoutOrNull(wait) { inputs.receive() }
                when (input) {
                    null -> engine.handleTimeout(clock.now())
                    is Input.Bytes -> engine.handleBytes(clock.now(), input.bytes)
                    Input.Eof -> engine.handleEof(clock.now())
                    Input.Wake -> {}
                }
            }
        } finally {
            runCatching {
                engine.quit(clock.now(), "bye")
                drain { out.write(it) }
                out.flush()
            }
            socket.close()
            onClose()
        }
    }

    /** Whether the pump has ended (the connection is closed). */
    val isClosed: Boolean get() = pump.isCompleted

    /** Makes the pump drain the engine now (after a command queued output in it). */
    fun wake() {
        inputs.trySend(Input.Wake)
    }

    /** Says goodbye (`QUIT`) and closes the socket. */
    fun close() {
        pump.cancel()
        reader.cancel()
        runCatching { socket.shutdownInput() }
    }

    /** Does what the engine asks until it only has a deadline left; returns the deadline. */
    private suspend fun drain(write: (ByteArray) -> Unit): ULong {
        while (true) {
            when (val out = engine.pollOutput(clock.now())) {
                is ConnectionOutput.Transmit -> write(out.bytes)
                is ConnectionOutput.Event -> {
                    deliver(out.event)
                    _events.emit(out.event)
                }
                is ConnectionOutput.Timeout -> {
                    _state.value = engine.state()
                    return out.deadlineMs
                }
            }
        }
    }
}
