package dev.deskwire

import com.sun.jna.Native
import java.nio.ByteBuffer
import java.util.concurrent.atomic.AtomicBoolean

/**
 * The call a socket loop makes on every read, in one native call: `handleBytes` with the
 * bytes read, then `drain`, giving the same [ConnectionDrain] that `drain()` gives.
 *
 * It does what `desk.handleBytes(now, bytes); desk.drain(now)` does at a fraction of the cost
 * (see `HandleBytesBench.kt`). Each uniffi call clones the object's handle first (a second
 * native call) and passes a call-status structure, the borrowed bytes and the returned buffer
 * as JNA `Structure`s, which JNA allocates and copies by reflection on every call; the buffer
 * then goes back through a third call. A pump takes a handle of its own once, passes only
 * numbers and direct buffers, and reads the drain (serialised as uniffi serialises it) out of
 * a direct buffer it keeps (`src/pump.rs` is the Rust side).
 *
 * The pump holds its own reference to the engine: closing the engine's Kotlin object does not
 * end it; close the pump too ([close], or let the cleaner do it). Calls are serialised on the
 * pump, and with the engine's other calls through its mutex, so any thread may use it.
 */
class ConnectionPump private constructor(private val handle: Long, private val remote: Boolean) : AutoCloseable {
    /** A pump for [desk]. */
    constructor(desk: Desk) : this(desk.uniffiCloneHandle(), false)

    /** A pump for [remote]. */
    constructor(remote: Remote) : this(remote.uniffiCloneHandle(), true)

    private var out: ByteBuffer = ByteBuffer.allocateDirect(INITIAL_OUT)
    private var input: ByteBuffer? = null
    private val closed = AtomicBoolean(false)
    private val cleanable = UniffiLib.CLEANER.register(this, Release(handle, remote))

    /**
     * The bytes from [bytes]'s position to its limit (a direct buffer, read in place; its
     * position does not move), then everything the engine wants done.
     */
    @Synchronized
    fun handleBytes(nowMs: Long, bytes: ByteBuffer): ConnectionDrain {
        require(bytes.isDirect) { "handleBytes needs a direct ByteBuffer (ByteBuffer.allocateDirect)" }
        check(!closed.get()) { "ConnectionPump is closed" }
        // The engine's own refusal (`handleBytes` through uniffi says the same).
        if (nowMs < 0) throw DeskwireException.InvalidInput(ErrorKind.NEGATIVE, "nowMs is $nowMs; the clock starts at 0")
        // JNA passes a direct buffer as its address at its position: the input from there,
        // the output from the start.
        out.clear()
        var n = if (remote) {
            PumpLib.deskwire_uniffi_remote_feed(handle, nowMs, bytes, bytes.remaining(), out, out.capacity())
        } else {
            PumpLib.deskwire_uniffi_desk_feed(handle, nowMs, bytes, bytes.remaining(), out, out.capacity())
        }
        if (n == PANIC) throw InternalException("deskwire panicked in handleBytes (a bug; the engine goes on)")
        if (n < 0) {
            // The drain did not fit: it waits on this thread; take it into a buffer that fits.
            out = ByteBuffer.allocateDirect(maxOf(-n, out.capacity() * 2L).coerceAtMost(Int.MAX_VALUE.toLong()).toInt())
            n = PumpLib.deskwire_uniffi_take_spill(out, out.capacity())
            check(n >= 0) { "deskwire's drain did not fit in ${out.capacity()} bytes" }
        }
        out.limit(n.toInt())
        return FfiConverterTypeConnectionDrain.read(out)
    }

    /** [handleBytes] for bytes in an array (copied into a direct buffer the pump keeps). */
    @Synchronized
    fun handleBytes(nowMs: Long, bytes: ByteArray, offset: Int = 0, length: Int = bytes.size - offset): ConnectionDrain {
        var buffer = input
        if (buffer == null || buffer.capacity() < length) {
            buffer = ByteBuffer.allocateDirect(maxOf(length, 4 * 1024))
            input = buffer
        }
        buffer!!.clear()
        buffer.put(bytes, offset, length).flip()
        return handleBytes(nowMs, buffer)
    }

    /**
     * Lets go of the pump's reference to the engine; later calls throw. Synchronized with
     * [handleBytes], so a call in flight on another thread ends before the reference goes.
     */
    @Synchronized
    override fun close() {
        if (closed.compareAndSet(false, true)) cleanable.clean()
    }

    // A class, not a closure, so that the cleaner does not hold the pump itself.
    private class Release(private val handle: Long, private val remote: Boolean) : Runnable {
        override fun run() {
            val status = UniffiRustCallStatus()
            if (remote) {
                UniffiLib.uniffi_deskwire_uniffi_fn_free_remote(handle, status)
            } else {
                UniffiLib.uniffi_deskwire_uniffi_fn_free_desk(handle, status)
            }
        }
    }

    private companion object {
        const val INITIAL_OUT = 4 * 1024

        /** What the Rust side returns when the engine panicked (`pump::PANIC`). */
        const val PANIC = Long.MIN_VALUE
    }
}

/**
 * The Rust functions of `src/pump.rs`, JNA direct-mapped: numbers and direct buffers only (a
 * buffer goes across as its address at its position).
 */
internal object PumpLib {
    init {
        // The library uniffi's generated code loads, with the same override.
        val name = System.getProperty("uniffi.component.deskwire_uniffi.libraryOverride") ?: "deskwire_uniffi"
        Native.register(PumpLib::class.java, name)
    }

    external fun deskwire_uniffi_desk_feed(
        handle: Long, nowMs: Long, input: ByteBuffer, length: Int, out: ByteBuffer, outCap: Int,
    ): Long

    external fun deskwire_uniffi_remote_feed(
        handle: Long, nowMs: Long, input: ByteBuffer, length: Int, out: ByteBuffer, outCap: Int,
    ): Long

    external fun deskwire_uniffi_take_spill(out: ByteBuffer, outCap: Int): Long
}
