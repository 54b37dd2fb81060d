package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.ExperimentalCoroutinesApi
import kotlinx.coroutines.channels.ReceiveChannel
import kotlinx.coroutines.selects.onTimeout
import kotlinx.coroutines.selects.select

/**
 * The monotonic millisecond clock the engines take as `nowMs`. On Android pass
 * `{ SystemClock.elapsedRealtime() }` (it keeps counting in deep sleep); the default,
 * [System.nanoTime], is monotonic on every JVM.
 */
fun interface MonotonicClock {
    /** Milliseconds since an arbitrary fixed point; never goes backwards. */
    fun nowMs(): Long

    companion object {
        /** [System.nanoTime] in milliseconds, counted from the first call. */
        val System: MonotonicClock = object : MonotonicClock {
            private val origin = java.lang.System.nanoTime()
            override fun nowMs(): Long = (java.lang.System.nanoTime() - origin) / 1_000_000
        }
    }
}

/** `nowMs` as the engines take it. */
internal fun MonotonicClock.now(): ULong = nowMs().coerceAtLeast(0).toULong()

/** How long to wait from [now] until [deadline], in milliseconds (0 when it passed). */
internal fun delayUntil(now: ULong, deadline: ULong): Long =
    if (deadline <= now) 0 else (deadline - now).coerceAtMost(Long.MAX_VALUE.toULong()).toLong()

/** How long to wait from [now] until [deadline], in milliseconds (0 when it passed). */
internal fun delayUntil(now: Long, deadline: Long): Long = if (deadline <= now) 0 else deadline - now

/**
 * The next element of this channel, waiting at most [waitMs] (`null`: none came in time). A
 * `select` with `onTimeout` either takes an element or times out, never both: a receive inside
 * `withTimeoutOrNull` that gets an element just as the time runs out throws it away (the
 * prompt cancellation guarantee), and a pump that waits on a deadline loses bytes that way.
 */
@OptIn(ExperimentalCoroutinesApi::class)
internal suspend fun <T> ReceiveChannel<T>.receiveWithin(waitMs: Long): T? =
    if (waitMs <= 0L) tryReceive().getOrNull()
    else select {
        onReceive { it }
        onTimeout(waitMs) { null }
    }

/** `1500` → `1.5 s`, as the core writes durations in its messages. */
internal fun formatMs(ms: Long): String = when {
    ms < 1000 -> "$ms ms"
    ms % 1000 == 0L -> "${ms / 1000} s"
    else -> "%.1f s".format(java.util.Locale.ROOT, ms / 1000.0)
}
