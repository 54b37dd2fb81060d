package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.channels.Channel
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.launch
import kotlinx.coroutines.withTimeout

/** Collects a hot flow from the moment it is made, so a test can take the events in order. */
class EventQueue<E>(scope: CoroutineScope, flow: Flow<E>) {
    private val channel = Channel<E>(Channel.UNLIMITED)
    val history = mutableListOf<E>()
    private val job = scope.launch(start = CoroutineStart.UNDISPATCHED) { flow.collect { channel.send(it) } }

    /** The next event, whatever it is. */
    suspend fun next(timeoutMs: Long = 20_000): E =
        withTimeout(timeoutMs) { channel.receive() }.also { history.add(it) }

    /** Skips events until one is an [T] matching [predicate]. */
    suspend inline fun <reified T : E> expect(
        timeoutMs: Long = 20_000,
        crossinline predicate: (T) -> Boolean = { true },
    ): T {
        while (true) {
            val event = next(timeoutMs)
            if (event is T && predicate(event)) return event
        }
    }

    fun stop() = job.cancel()
}
