package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.Job
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.ensureActive
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.StateFlow
import kotlinx.coroutines.flow.asStateFlow
import kotlinx.coroutines.launch
import java.net.Socket

/** Thrown by an [Oa1Handler] to answer `ERR code: message` (`code`: lowercase letters and `_`). */
class Oa1FailureException(val code: String, message: String) : Exception(message)

/** How a handler's coroutine learns that the desk cancelled its request (OA1 `CANCEL`). */
class Oa1CancelledException(val id: String, val reason: String) :
    CancellationException("request $id cancelled by the desk: $reason")

/** One request being served: what the desk asked, and a way to stream output back. */
class Oa1Call internal constructor(
    /** The request id. */
    val id: String,
    /** The desk's nick. */
    val sender: String,
    /** The request text (for `RemoteBash`, the command). */
    val payload: String,
    private val output: (String) -> Unit,
) {
    /**
     * Streams [text] to the desk now, ahead of the handler's return value (the engine chunks,
     * paces and, past `maxMessageBytes`, truncates it). Throws [CancellationException] once
     * the desk cancelled the request, so a loop that only sends still stops.
     */
    suspend fun send(text: String) {
        currentCoroutineContext().ensureActive()
        output(text)
    }
}

/** Serves one request; what it returns ends the response (after anything it [Oa1Call.send]). */
fun interface Oa1Handler {
    suspend fun handle(call: Oa1Call): String
}

/**
 * The remote's end of OA1 over a plain TCP socket to an IRC server, driving the [Remote]
 * engine: every request the desk sends runs [handler] in its own coroutine.
 *
 * ```kotlin
 * val config = connectionConfig(nick = "rexd", channel = "#desk", peer = "desk")
 * RemoteConnection.serve(host = "irc.example", port = 6667, config = config, scope = scope) { call ->
 *     call.send("working on ${call.payload}\n")   // streamed as it comes
 *     runTool(call.payload)                        // the rest of the answer; then it ends
 * }.use { remote -> remote.state.first { it == ConnectionState.CLOSED } }
 * ```
 *
 * The handler's return value ends the response; [Oa1FailureException] answers `ERR` with its
 * code, any other exception `ERR error: <message>`. When the desk sends `CANCEL` (or the
 * connection ends) the handler's coroutine is cancelled with [Oa1CancelledException] and
 * nothing more is sent for it. Closing (or cancelling `scope`) cancels every handler, sends
 * `QUIT` and closes the socket.
 *
 * With a [ReconnectPolicy] ([serve]'s `reconnect`) a lost link comes back with a new engine; the
 * handlers of the lost link are cancelled (their answers have nowhere to go).
 *
 * `config.oa1.allowedSender` (`peer` of [connectionConfig]) filters by nick or
 * `nick!user@host`; neither proves who asks (anyone may take the desk's nick once it quits).
 * Set `config.oa1.auth` (a shared secret) when the commands matter.
 */
class RemoteConnection private constructor(
    first: Remote,
    socket: Socket,
    private val scope: CoroutineScope,
    private val clock: MonotonicClock,
    private val handler: Oa1Handler,
    /** How a lost link comes back; `null`: the connection ends with its link. */
    private val redialer: Redialer<Remote>?,
) : AutoCloseable {
    private val handlers = HashMap<String, Job>()
    private val _state = MutableStateFlow(ConnectionState.REGISTERING)
    private val _events = EventStream<ConnectionEvent>(capacity = 64)

    /** One connection's engine, socket loop and handlers' scope. */
    private inner class Link(val remote: Remote, socket: Socket) {
        /** The handlers' scope: a child of `scope`, where one failing handler fails no other. */
        val serving = CoroutineScope(scope.coroutineContext + SupervisorJob(scope.coroutineContext[Job]))
        val loop = IrcSocketLoop(socket, remote.asEngine(), scope, clock, { deliver(this, it) }, _state) {
            // The handlers of a lost link have nowhere to answer: OA1 promises nothing across
            // reconnects.
            serving.cancel("the connection is closed")
            ended(this)
        }
    }

    @Volatile private var link = Link(first, socket)

    @Volatile private var closing = false

    /** [serve] returned: a link lost from now on is reconnected (before, serve throws). */
    @Volatile private var established = false


    /** How many times the connection came back after the link was lost. */
    @Volatile var reconnects: Int = 0
        private set

    /**
     * Every event of the connection (IRC, OA1 requests and cancellations, link), of every link.
     * Collecting ends (`collect` returns) when the connection is closed.
     */
    val events: Flow<ConnectionEvent> = _events.flow

    /**
     * Where the connection stands (`READY` once the channel is joined; with a reconnect policy,
     * `REGISTERING` again while it comes back after a lost link).
     */
    val state: StateFlow<ConnectionState> = _state.asStateFlow()

    /** Requests being served now. */
    val active: Int get() = synchronized(handlers) { handlers.size }

    /** Counters of both layers (the current link's). */
    fun stats(): ConnectionStats = link.remote.stats()

    /** Cancels every handler, says goodbye (`QUIT`) and closes the socket. */
    override fun close() {
        closing = true
        val link = this.link
        runCatching { link.remote.quit(clock.nowMs(), "bye") }
        link.loop.wake()
        link.loop.close()
    }

    private fun ended(lost: Link) {
        if (lost !== link) return // a link already replaced
        if (closing || !established || redialer == null) {
            _events.end()
            return
        }
        _state.value = ConnectionState.REGISTERING
        scope.launch { comeBack() }
    }

    private suspend fun comeBack() {
        val (engine, socket) = redialer?.next { closing } ?: return
        val old = link
        link = Link(engine, socket)
        old.remote.close()
        reconnects++
    }

    /** Starts a handler for each request and cancels it on `CANCEL` (on the pump). */
    private suspend fun deliver(from: Link, event: ConnectionEvent) {
        if ((event as? ConnectionEvent.Link)?.event == LinkEvent.StateChanged(ConnectionState.READY)) redialer?.ready()
        _events.emit(event)
        val e = (event as? ConnectionEvent.Oa1)?.event ?: return
        when (e) {
            is Oa1Event.Request -> serve(from, e.id, e.sender, e.payload)
            is Oa1Event.Cancelled -> synchronized(handlers) { handlers.remove(e.id) }
                ?.cancel(Oa1CancelledException(e.id, e.reason))
            else -> {}
        }
    }

    private fun serve(link: Link, id: String, sender: String, payload: String) {
        val remote = link.remote
        val serving = link.serving
        val call = Oa1Call(id, sender, payload) { text -> command(link) { remote.send(clock.nowMs(), id, text) } }
        val job = serving.launch(start = CoroutineStart.LAZY) {
            val text = try {
                handler.handle(call)
            } catch (e: CancellationException) {
                throw e
            } catch (e: Oa1FailureException) {
                fail(link, id, e.code, e.message ?: "")
                return@launch
            } catch (e: Exception) {
                fail(link, id, "error", e.message ?: e.toString())
                return@launch
            }
            currentCoroutineContext().ensureActive()
            command(link) {
                remote.send(clock.nowMs(), id, text)
                remote.finish(clock.nowMs(), id)
            }
        }
        synchronized(handlers) { handlers[id] = job }
        job.invokeOnCompletion { synchronized(handlers) { if (handlers[id] === job) handlers.remove(id) } }
        job.start()
    }

    /** `ERR code: message`; a code the engine refuses becomes `error` (the answer still goes). */
    private fun fail(link: Link, id: String, code: String, message: String) = command(link) {
        try {
            link.remote.fail(clock.nowMs(), id, code, message)
        } catch (e: DeskwireException.Misuse) {
            if (e.kind != ErrorKind.INVALID_ERROR_CODE) throw e
            link.remote.fail(clock.nowMs(), id, "error", "$code: $message")
        }
    }

    /**
     * Runs an engine command for a handler and wakes the pump to send what it queued. A request
     * the engine no longer knows (cancelled meanwhile, connection closed) is not the handler's
     * business: that misuse, and a closed engine, are dropped.
     */
    private fun command(link: Link, block: () -> Unit) {
        try {
            block()
        } catch (e: DeskwireException.Misuse) {
            if (e.kind !in gone) throw e
        }
        link.loop.wake()
    }

    companion object {
        /** What a handler's late command meets when its request is no longer served. */
        private val gone = setOf(ErrorKind.UNKNOWN_REQUEST, ErrorKind.ALREADY_FINISHED, ErrorKind.CLOSED)

        /**
         * Connects to the IRC server at [host]:[port], suspends until the remote is in
         * `config.oa1.channel`, and serves requests with [handler] from then on. The network is
         * used on [kotlinx.coroutines.Dispatchers.IO] only.
         *
         * A nick or channel the server would refuse throws [DeskwireException.InvalidInput]
         * before anything is sent. Throws [Oa1ConnectException] when the server refuses the
         * join ([Oa1Failure.JoinFailed], at once), when the link ends
         * ([Oa1Failure.Disconnected]), or when it is not in the channel within
         * `config.oa1.readyTimeoutMs` ([Oa1Failure.NotReady]); a socket that cannot connect
         * throws [IrcConnectException] with the host, the port and the reason. With [tls] (e.g.
         * `SSLSocketFactory.getDefault() as SSLSocketFactory`, or an `SSLContext`'s socket
         * factory for a private CA or a client certificate) the link is TLS, the server's
         * certificate and host name verified; a failed check throws [IrcConnectException] naming
         * it. SASL and the server password are the config's (`session.sasl`, `session.password`).
         */
        suspend fun serve(
            host: String,
            port: Int = 6667,
            config: ConnectionConfig,
            scope: CoroutineScope,
            clock: MonotonicClock = MonotonicClock.System,
            connectTimeoutMs: Int = 10_000,
            tls: javax.net.ssl.SSLSocketFactory? = null,
            reconnect: ReconnectPolicy? = null,
            handler: Oa1Handler,
        ): RemoteConnection {
            suspend fun dial(): Pair<Remote, Socket> {
                val remote = Remote(config, clock.nowMs()) // a bad config throws before the socket opens
                val socket = try {
                    connectSocket(host, port, connectTimeoutMs, tls)
                } catch (e: Throwable) {
                    remote.close()
                    throw e
                }
                return remote to socket
            }
            val redialer = reconnect?.let { Redialer(it, ::dial) } // a bad policy throws before dialling
            val (remote, socket) = dial()
            val connection = RemoteConnection(remote, socket, scope, clock, handler, redialer)
            val channel = config.oa1.channel
            connection.link.loop.awaitReady(
                config.oa1.readyTimeoutMs,
                waitingFor = {
                    when (connection.state.value) {
                        ConnectionState.READY, ConnectionState.CLOSED -> null
                        ConnectionState.REGISTERING -> "registration with the server"
                        else -> "joining $channel"
                    }
                },
                members = { emptyList() },
            )
            connection.established = true
            return connection
        }
    }
}
