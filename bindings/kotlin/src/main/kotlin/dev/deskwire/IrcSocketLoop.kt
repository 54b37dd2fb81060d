package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.Job
import kotlinx.coroutines.async
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableSharedFlow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asSharedFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.launch
import kotlinx.coroutines.withTimeoutOrNull
import java.net.InetSocketAddress
import java.net.Socket

/** The calls [IrcSocketLoop] makes on a connection engine ([Desk] or [Remote]). */
internal interface ConnectionEngine {
    /** `handleBytes` then `drain`, in one native call ([ConnectionPump]). */
    fun feed(nowMs: Long, bytes: ByteArray): ConnectionDrain
    fun handleEof(nowMs: Long)
    fun handleTimeout(nowMs: Long)
    fun drain(nowMs: Long): ConnectionDrain
    fun quit(nowMs: Long, reason: String)
    fun state(): ConnectionState

    /** Lets go of the engine's [ConnectionPump] (the loop has ended). */
    fun release()
}

internal fun Desk.asEngine(): ConnectionEngine = object : ConnectionEngine {
    private val pump = ConnectionPump(this@asEngine)
    override fun feed(nowMs: Long, bytes: ByteArray) = pump.handleBytes(nowMs, bytes)
    override fun handleEof(nowMs: Long) = this@asEngine.handleEof(nowMs)
    override fun handleTimeout(nowMs: Long) = this@asEngine.handleTimeout(nowMs)
    override fun drain(nowMs: Long) = this@asEngine.drain(nowMs)
    override fun quit(nowMs: Long, reason: String) = this@asEngine.quit(nowMs, reason)
    override fun state() = this@asEngine.state()
    override fun release() = pump.close()
}

internal fun Remote.asEngine(): ConnectionEngine = object : ConnectionEngine {
    private val pump = ConnectionPump(this@asEngine)
    override fun feed(nowMs: Long, bytes: ByteArray) = pump.handleBytes(nowMs, bytes)
    override fun handleEof(nowMs: Long) = this@asEngine.handleEof(nowMs)
    override fun handleTimeout(nowMs: Long) = this@asEngine.handleTimeout(nowMs)
    override fun drain(nowMs: Long) = this@asEngine.drain(nowMs)
    override fun quit(nowMs: Long, reason: String) = this@asEngine.quit(nowMs, reason)
    override fun state() = this@asEngine.state()
    override fun release() = pump.close()
}

/**
 * The connection to the IRC server could not be made: the message names the host, the port and
 * the reason (`connect to irc.example.net:6697 failed: Connection refused`), or the TLS check
 * that failed (`TLS with localhost:6697 failed: ... (give the server's CA ...)`). [cause] is
 * the JDK's exception.
 */
class IrcConnectException(message: String, cause: Throwable) : java.io.IOException(message, cause)

/** How long the TLS handshake may take: a plain-text port answers a `ClientHello` with nothing. */
const val TLS_HANDSHAKE_TIMEOUT_MS: Int = 10_000

/**
 * A TCP socket to [host]:[port] with Nagle off (IRC lines are small and latency matters), and
 * with [tls] wrapped in TLS by that factory (JSSE: `SSLSocketFactory.getDefault()` for the
 * platform's CAs, or an `SSLContext`'s for a private CA or a client certificate), the server's
 * certificate and host name verified. The name lookup, the connect and the handshake block, so
 * they run on [Dispatchers.IO]: the caller's thread (an Android main thread) never waits on the
 * network. Cancelling the caller closes the socket, which ends a connect in progress.
 */
internal suspend fun connectSocket(
    host: String,
    port: Int,
    timeoutMs: Int,
    tls: javax.net.ssl.SSLSocketFactory? = null,
): Socket = coroutineScope {
    checkServer(host, port)
    val plain = Socket().apply { tcpNoDelay = true }
    var socket: Socket = plain
    val connecting = async(Dispatchers.IO) {
        try {
            plain.connect(InetSocketAddress(host, port), timeoutMs)
        } catch (e: java.net.UnknownHostException) {
            throw IrcConnectException("connect to $host:$port failed: the name $host does not resolve", e)
        } catch (e: java.io.IOException) {
            throw IrcConnectException("connect to $host:$port failed: ${e.message}", e)
        }
        if (tls != null) {
            val secure = tls.createSocket(plain, host, port, true) as javax.net.ssl.SSLSocket
            socket = secure
            // A raw SSLSocket checks no host name unless told to.
            secure.sslParameters = secure.sslParameters.apply { endpointIdentificationAlgorithm = "HTTPS" }
            secure.soTimeout = TLS_HANDSHAKE_TIMEOUT_MS
            try {
                secure.startHandshake()
            } catch (e: java.io.IOException) {
                throw IrcConnectException("TLS with $host:$port failed: ${tlsReason(e, host)}", e)
            }
            secure.soTimeout = 0
        }
    }
    try {
        connecting.await()
    } catch (e: Throwable) {
        socket.close()
        plain.close()
        throw e
    }
    socket
}

/**
 * An IRC server's address a socket can be opened to: a host that is not empty and a port of
 * 1 to 65535, else [DeskwireException.InvalidInput] (kind [ErrorKind.INVALID]) before anything
 * is dialled (the JDK would take `""` as this machine, and throw its own
 * `IllegalArgumentException` for the port).
 */
internal fun checkServer(host: String, port: Int) {
    if (host.isBlank()) {
        throw DeskwireException.InvalidInput(
            ErrorKind.INVALID,
            "the IRC server's host is empty; give its name or address (\"127.0.0.1\" for this machine)",
        )
    }
    if (port !in 1..65535) {
        throw DeskwireException.InvalidInput(ErrorKind.INVALID, "port is $port; an IRC server's port is 1 to 65535")
    }
}

/** A JSSE handshake failure with [host] in words a user can act on. */
private fun tlsReason(e: java.io.IOException, host: String): String {
    val chain = generateSequence<Throwable>(e) { it.cause }.toList()
    val text = chain.joinToString(": ") { it.message ?: it.javaClass.simpleName }
    return when {
        chain.any { it is java.security.cert.CertPathValidatorException } ||
            text.contains("PKIX path building failed") ->
            "its certificate is not signed by a CA this machine trusts (give the server's CA in " +
                "an SSLContext's TrustManagerFactory)"
        chain.any { it is java.security.cert.CertificateException } && text.contains("No subject alternative") -> {
            val why = chain.last { it is java.security.cert.CertificateException }.message
            "its certificate is not valid for the name $host" + (why?.let { " ($it)" } ?: "")
        }
        e is java.net.SocketTimeoutException ->
            "no answer to the TLS handshake within ${TLS_HANDSHAKE_TIMEOUT_MS / 1000} s " +
                "(a plain-text port? connect without tls)"
        text.contains("Unsupported or unrecognized SSL message") || text.contains("plaintext") ->
            "it does not speak TLS on this port (a plain-text port? connect without tls)"
        else -> text
    }
}

/**
 * Why a connection cannot be used, as the failures of a request would say it: the server
 * refused the join ([Oa1Failure.JoinFailed]), the link ended ([Oa1Failure.Disconnected]), or
 * it was not ready in time ([Oa1Failure.NotReady], saying what it waited for and what it saw).
 */
class Oa1ConnectException(
    /** The failure; [oa1FailureCode] gives `join_failed`, `disconnected` or `not_ready`. */
    val failure: Oa1Failure,
    /** The other members of the channel when it gave up (a desk's; empty for a remote). */
    val members: List<String> = emptyList(),
) : Exception("could not connect: ${oa1FailureCode(failure)}: ${oa1FailureMessage(failure)}")

/**
 * The host loop of one IRC connection engine over a socket, as coroutines: one reads the
 * socket, one pumps the engine (bytes read → `handleBytes` and `drain` in one call through a
 * [ConnectionPump], or `drain` alone; writing its lines and delivering its events; wait for
 * the deadline, the next read or a [wake]). No protocol rule
 * lives here. The pump ends once the engine is closed (after `quit`, or the end
 * of the socket), closing the socket.
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
    /** Where the state goes: the loop's own flow, or one that outlives it (a reconnecting desk's). */
    stateSink: MutableStateFlow<ConnectionState>? = null,
    private val onClose: () -> Unit,
) {
    private sealed interface Input {
        class Bytes(val bytes: ByteArray) : Input
        data object Eof : Input
        data object Wake : Input
    }

    private val inputs = Channel<Input>(capacity = 64)
    private val _events = MutableSharedFlow<ConnectionEvent>(extraBufferCapacity = 64)
    private val _state = (stateSink ?: MutableStateFlow(engine.state())).also { it.value = engine.state() }

    /**
     * How the start ended: `null` once the state is `READY`, or the failure (a refused join,
     * the end of the link) that came first. Completed on the pump.
     */
    private val started = CompletableDeferred<Oa1Failure?>()

    val events: Flow<ConnectionEvent> = _events.asSharedFlow()
    val state: StateFlow<ConnectionState> = _state.asStateFlow()

    /** [close] was called: the state reads `CLOSED` from then on, whatever the pump still does. */
    private var closedHere = false

    /** Sets the state, unless [close] made it `CLOSED` (under the flow's lock, so close wins). */
    private fun setState(state: ConnectionState) = synchronized(_state) {
        _state.value = if (closedHere) ConnectionState.CLOSED else state
    }

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
        // What the last read gave back (bytes in and the drain come in one call), done first.
        var fed: ConnectionDrain? = null
        try {
            while (true) {
                val deadline = drain(fed) { out.write(it) }
                fed = null
                out.flush()
                if (_state.value == ConnectionState.CLOSED) break
                val wait = delayUntil(clock.nowMs(), deadline)
                val input = inputs.receiveWithin(wait)
                when (input) {
                    null -> engine.handleTimeout(clock.nowMs())
                    is Input.Bytes -> fed = engine.feed(clock.nowMs(), input.bytes)
                    Input.Eof -> engine.handleEof(clock.nowMs())
                    Input.Wake -> {}
                }
            }
        } finally {
            runCatching {
                fed?.let { act(it) { bytes -> out.write(bytes) } }
                engine.quit(clock.nowMs(), "bye")
                drain(null) { out.write(it) }
                out.flush()
            }
            engine.release()
            socket.close()
            reader.cancel()
            started.complete(Oa1Failure.Disconnected("the connection was closed"))
            onClose()
        }
    }

    /** Whether the pump has ended (the connection is closed). */
    val isClosed: Boolean get() = pump.isCompleted

    /** Makes the pump drain the engine now (after a command queued output in it). */
    fun wake() {
        inputs.trySend(Input.Wake)
    }

    /**
     * Says goodbye (`QUIT`, on the pump) and closes the socket. The engine refuses later
     * commands itself (`Misuse`, kind `CLOSED`): the caller quits it first.
     */
    fun close() {
        synchronized(_state) {
            closedHere = true
            _state.value = ConnectionState.CLOSED
        }
        pump.cancel()
        reader.cancel()
        runCatching { socket.shutdownInput() }
    }

    /**
     * Suspends until the state is `READY`; throws [Oa1ConnectException] at once when the
     * server refuses the join or the link ends, and after [timeoutMs] with
     * [Oa1Failure.NotReady] saying [waitingFor] (what the engine waits for). The connection
     * is closed when it throws, and when the caller is cancelled meanwhile.
     */
    suspend fun awaitReady(timeoutMs: Long, waitingFor: () -> String?, members: () -> List<String>) {
        val failure = try {
            // withTimeoutOrNull, not withTimeout: a caller's own withTimeout around this call
            // must end it as the caller's timeout, not be taken for this one.
            when (val outcome = withTimeoutOrNull(timeoutMs) { Started(started.await()) }) {
                null -> {
                    val what = waitingFor() ?: return // ready at the last moment
                    Oa1Failure.NotReady("not ready after ${formatMs(timeoutMs)}: waiting for $what")
                }
                else -> outcome.failure ?: return
            }
        } catch (e: Throwable) {
            close()
            throw e
        }
        val seen = members()
        close()
        throw Oa1ConnectException(failure, seen)
    }

    /**
     * Does what the engine asks (its lines written, then its events delivered, in order) until
     * it only has a deadline left; returns the deadline. [fed] is the drain that came back with
     * the bytes last read, if any: it is the engine's drain for this turn.
     */
    private suspend fun drain(fed: ConnectionDrain?, write: (ByteArray) -> Unit): Long =
        act(fed ?: engine.drain(clock.nowMs()), write)

    private suspend fun act(out: ConnectionDrain, write: (ByteArray) -> Unit): Long {
        if (out.bytes.isNotEmpty()) write(out.bytes)
        for (event in out.events) {
            val change = (event as? ConnectionEvent.Link)?.event as? LinkEvent.StateChanged
            if (change != null) setState(change.state) // before anyone hears of it
            watchStart(event)
            deliver(event)
            _events.emit(event)
        }
        setState(engine.state())
        return out.deadlineMs
    }

    private fun watchStart(event: ConnectionEvent) {
        when (event) {
            is ConnectionEvent.Link -> if (event.event == LinkEvent.StateChanged(ConnectionState.READY)) {
                started.complete(null)
            }
            is ConnectionEvent.Irc -> when (val e = event.event) {
                is IrcSessionEvent.JoinFailed -> started.complete(
                    Oa1Failure.JoinFailed("the server refused to let us into ${e.channel}: ${e.numeric} ${e.text}"),
                )
                is IrcSessionEvent.Disconnected -> started.complete(
                    Oa1Failure.Disconnected(ircDisconnectReasonMessage(e.reason)),
                )
                else -> {}
            }
            is ConnectionEvent.Oa1 -> {}
        }
    }
}

/** How the start ended, boxed: `null` from `withTimeoutOrNull` is its timeout. */
private class Started(val failure: Oa1Failure?)
