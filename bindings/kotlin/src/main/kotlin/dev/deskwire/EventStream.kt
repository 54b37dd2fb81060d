package dev.deskwire

import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableSharedFlow
import kotlinx.coroutines.flow.map
import kotlinx.coroutines.flow.onSubscription
import kotlinx.coroutines.flow.takeWhile
import kotlinx.coroutines.launch

/**
 * A connection's hot stream of events that completes when the connection ends for good: each
 * collector gets the events from when it subscribed, in order, then its `collect` returns. A
 * collector that comes after the end returns at once. (A bare `SharedFlow` never completes, so
 * a program collecting it hangs after `close()`.)
 */
internal class EventStream<T : Any>(capacity: Int) {
    /** `null` is the end, after every event emitted before it. */
    private val shared = MutableSharedFlow<T?>(extraBufferCapacity = capacity)

    @Volatile private var ended = false

    val flow: Flow<T> = shared
        .onSubscription { if (ended) emit(null) }
        .takeWhile { it != null }
        .map { it!! }

    /** Hands [event] to every collector (suspends while one is [capacity] behind). */
    suspend fun emit(event: T) = shared.emit(event)

    /** Ends every collection after the events already emitted. Ending twice does nothing more. */
    fun end() {
        if (ended) return
        ended = true
        // A collector far behind holds the buffer full: the end waits for it, off this thread.
        if (!shared.tryEmit(null)) CoroutineScope(Dispatchers.Default).launch { shared.emit(null) }
    }
}
