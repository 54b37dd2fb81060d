package dev.deskwire

import dev.deskwire.core.*
import java.nio.ByteBuffer

/**
 * Per-call cost from Kotlin of one relayed `PRIVMSG` line into a desk that is in its channel
 * with its remote, then everything it wants done: `handleBytes` (a direct buffer, borrowed)
 * then `drain`, the loop of `benches/handle_bytes.rs` through JNA and uniffi; the same through
 * a [ConnectionPump] (one native call, no JNA structures); beside them the pieces, and what
 * a bare call, a call status and a handle clone cost here. A warm loop timed in rounds (the first round
 * of each is warm-up); prints the median ns per call. Not a test (speed is never asserted);
 * run it with the test class path, e.g.
 *
 * ```sh
 * cargo build --release -p deskwire-uniffi
 * mvn -q -f bindings/kotlin/pom.xml test-compile
 * mvn -q -f bindings/kotlin/pom.xml dependency:build-classpath -Dmdep.outputFile=cp.txt
 * java -Djna.library.path=target/release \
 *     -cp bindings/kotlin/target/classes:bindings/kotlin/target/test-classes:$(cat cp.txt) \
 *     dev.deskwire.HandleBytesBenchKt
 * ```
 */
private const val ROUNDS = 11
private const val CALLS = 20_000

private fun rounds(call: () -> Unit): Double {
    repeat(CALLS) { call() }
    return (0 until ROUNDS).map {
        val start = System.nanoTime()
        repeat(CALLS) { call() }
        (System.nanoTime() - start).toDouble() / CALLS
    }.sorted()[ROUNDS / 2]
}

fun main() {
    val welcome = (
        ":srv 001 desk :Welcome desk!~desk@127.0.0.1\r\n:desk!~desk@127.0.0.1 JOIN #desk\r\n" +
            ":srv 353 desk = #desk :desk deskbot\r\n:srv 366 desk #desk :End of NAMES list\r\n"
        ).toByteArray()
    val line = ":deskbot!~bot@10.0.0.2 PRIVMSG #desk :hello from the remote end of the desk\r\n".toByteArray()
    val direct = ByteBuffer.allocateDirect(line.size).put(line).flip()
    val config = connectionConfig(nick = "desk", channel = "#desk", peer = "deskbot")
    val desk = Desk(config, 0L, 1L)
    desk.handleBytes(0L, welcome)
    desk.drain(0L)
    check(desk.state() == ConnectionState.READY)

    val drained = rounds {
        desk.handleBytes(1L, direct)
        desk.drain(1L)
    }
    val polled = rounds {
        desk.handleBytes(1L, direct)
        while (desk.pollOutput(1L) !is ConnectionOutput.Timeout) {}
    }
    val fromArray = rounds {
        desk.handleBytes(1L, line)
        desk.drain(1L)
    }
    val pump = ConnectionPump(desk)
    val pumped = rounds { pump.handleBytes(1L, direct) }
    val pumpedArray = rounds { pump.handleBytes(1L, line) }
    val handleOnly = rounds { desk.handleBytes(1L, direct) }
    val drainOnly = rounds { desk.drain(1L) }
    val stateOnly = rounds { desk.state() }
    val scalarOnly = rounds { desk.inFlight() }
    println("kotlin handleBytes(direct buffer) + drain:       %.1f ns/call".format(drained))
    println("kotlin handleBytes(direct buffer) + pollOutput:  %.1f ns/call".format(polled))
    println("kotlin handleBytes(ByteArray) + drain:           %.1f ns/call".format(fromArray))
    println("kotlin ConnectionPump.handleBytes(direct buffer): %.1f ns/call".format(pumped))
    println("kotlin ConnectionPump.handleBytes(ByteArray):     %.1f ns/call".format(pumpedArray))
    println("kotlin handleBytes(direct buffer) alone:         %.1f ns/call".format(handleOnly))
    println("kotlin drain alone:                              %.1f ns/call".format(drainOnly))
    println("kotlin state() (no arguments, an enum back):     %.1f ns/call".format(stateOnly))
    println("kotlin inFlight() (no arguments, a number back): %.1f ns/call".format(scalarOnly))
    // What every uniffi call is made of, measured apart: a JNA call with only numbers in and
    // out, the call-status structure each call allocates, and the handle clone (a call with a
    // status) that every method makes before its own call.
    val bareCall = rounds { IntegrityCheckingUniffiLib.ffi_deskwire_uniffi_uniffi_contract_version() }
    val statusAlloc = rounds { UniffiRustCallStatus() }
    val cloneFree = rounds {
        val handle = desk.uniffiCloneHandle()
        UniffiLib.uniffi_deskwire_uniffi_fn_free_desk(handle, UniffiRustCallStatus())
    }
    println("floor: JNA call, numbers only:                   %.1f ns/call".format(bareCall))
    println("floor: allocate a call status:                   %.1f ns/call".format(statusAlloc))
    println("floor: clone + free a handle (2 calls, 2 statuses): %.1f ns/call".format(cloneFree))
    pump.close()
    desk.close()
}
