package dev.deskwire

import java.nio.ByteBuffer

// The engines read their input in place: `handleBytes`, `handleLine` and `handleMessage` take a
// direct `ByteBuffer` (from its position to its limit) whose memory Rust borrows for the call,
// with nothing copied across. A `ByteArray` lives on the JVM heap, which native code cannot
// borrow, so the overloads below copy it into a direct buffer kept per thread, and pass that.

/** Arrays up to this size go through the thread's buffer; larger ones get a buffer of their own. */
private const val REUSED_MAX = 64 * 1024

private val scratch: ThreadLocal<ByteBuffer> = ThreadLocal.withInitial { ByteBuffer.allocateDirect(4 * 1024) }

/**
 * [bytes] in a direct buffer, valid until the next call on this thread: pass it straight to
 * an engine (the call is synchronous and the engine keeps nothing of it).
 */
internal fun direct(bytes: ByteArray): ByteBuffer {
    if (bytes.size > REUSED_MAX) return ByteBuffer.allocateDirect(bytes.size).put(bytes).flip()
    var buffer = scratch.get()
    if (buffer.capacity() < bytes.size) {
        buffer = ByteBuffer.allocateDirect(maxOf(bytes.size, minOf(buffer.capacity() * 2, REUSED_MAX)))
        scratch.set(buffer)
    }
    buffer.clear()
    buffer.put(bytes)
    return buffer.flip()
}

/** [DeskInterface.handleBytes] for bytes in an array (copied into a direct buffer first). */
fun DeskInterface.handleBytes(nowMs: Long, bytes: ByteArray) = handleBytes(nowMs, direct(bytes))

/** [RemoteInterface.handleBytes] for bytes in an array (copied into a direct buffer first). */
fun RemoteInterface.handleBytes(nowMs: Long, bytes: ByteArray) = handleBytes(nowMs, direct(bytes))

/** [IrcSessionInterface.handleBytes] for bytes in an array (copied into a direct buffer first). */
fun IrcSessionInterface.handleBytes(nowMs: Long, bytes: ByteArray) = handleBytes(nowMs, direct(bytes))

/** [IrcSessionInterface.handleLine] for a line in an array (copied into a direct buffer first). */
fun IrcSessionInterface.handleLine(nowMs: Long, line: ByteArray) = handleLine(nowMs, direct(line))

/** [Oa1ClientInterface.handleLine] for a line in an array (copied into a direct buffer first). */
fun Oa1ClientInterface.handleLine(nowMs: Long, line: ByteArray) = handleLine(nowMs, direct(line))

/** [Oa1ServerInterface.handleLine] for a line in an array (copied into a direct buffer first). */
fun Oa1ServerInterface.handleLine(nowMs: Long, line: ByteArray) = handleLine(nowMs, direct(line))

/** [JsonRpcPeerInterface.handleBytes] for bytes in an array (copied into a direct buffer first). */
fun JsonRpcPeerInterface.handleBytes(nowMs: ULong, bytes: ByteArray) = handleBytes(nowMs, direct(bytes))

/** [GatewayInterface.handleMessage] for a message in an array (copied into a direct buffer first). */
fun GatewayInterface.handleMessage(nowMs: ULong, conn: ULong, bytes: ByteArray) =
    handleMessage(nowMs, conn, direct(bytes))
