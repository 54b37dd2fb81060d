package dev.deskwire

import dev.deskwire.core.*
import java.nio.ByteBuffer

/**
 * Per-call cost from Kotlin of one relayed `PRIVMSG` line into a desk that is in its channel
 * with its remote, then everything it wants done: `handleBytes` (a direct buffer, borrowed)
 * then `drain`, the loop of `benches/handle_bytes.rs` through JNA and uniffi; beside it the
 * pieces, and what a bare uniffi call costs here. A warm loop timed in rounds (the first round
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
    val handleOnly = rounds { desk.handleBytes(1L, direct) }
    val drainOnly = rounds { desk.drain(1L) }
    val stateOnly = rounds { desk.state() }
    val scalarOnly = rounds { desk.inFlight() }
    println("kotlin handleBytes(direct buffer) + drain:       %.1f ns/call".format(drained))
    println("kotlin handleBytes(direct buffer) + pollOutput:  %.1f ns/call".format(polled))
    println("kotlin handleBytes(ByteArray) + drain:           %.1f ns/call".format(fromArray))
    println("kotlin handleBytes(direct buffer) alone:         %.1f ns/call".format(handleOnly))
    println("kotlin drain alone:                              %.1f ns/call".format(drainOnly))
    println("kotlin state() (no arguments, an enum back):     %.1f ns/call".format(stateOnly))
    println("kotlin inFlight() (no arguments, a number back): %.1f ns/call".format(scalarOnly))
    desk.close()
}
