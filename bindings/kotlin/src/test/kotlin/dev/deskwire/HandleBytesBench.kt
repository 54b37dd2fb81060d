package dev.deskwire

import dev.deskwire.core.*

/**
 * Per-call cost of `Desk.handleBytes` with one relayed `PRIVMSG` line from Kotlin, then
 * `pollOutput` until `Timeout`: the loop of `benches/handle_bytes.rs`, through JNA and uniffi.
 * A warm loop timed in rounds; prints the median ns per call. Not a test (speed is never
 * asserted); run it with
 *
 * ```sh
 * cargo build --release -p deskwire-uniffi
 * mvn -q -f bindings/kotlin/pom.xml test-compile exec:java -Dexec.classpathScope=test \
 *     -Dexec.mainClass=dev.deskwire.HandleBytesBenchKt -Djna.library.path=target/release
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
    val config = connectionConfig(nick = "desk", channel = "#desk", peer = "deskbot")
    val desk = Desk(config, 0L, 1L)
    desk.handleBytes(0L, welcome)
    while (desk.pollOutput(0L) !is ConnectionOutput.Timeout) {}
    check(desk.state() == ConnectionState.READY)

    val both = rounds {
        desk.handleBytes(1L, line)
        while (desk.pollOutput(1L) !is ConnectionOutput.Timeout) {}
    }
    val handleOnly = rounds { desk.handleBytes(1L, line) }
    val pollOnly = rounds { desk.pollOutput(1L) }
    val stateOnly = rounds { desk.state() }
    val scalarOnly = rounds { desk.inFlight() }
    println("kotlin handleBytes + pollOutput: %.1f ns/call".format(both))
    println("kotlin handleBytes alone:        %.1f ns/call".format(handleOnly))
    println("kotlin pollOutput alone:         %.1f ns/call".format(pollOnly))
    println("kotlin state() (no arguments, an enum back):  %.1f ns/call".format(stateOnly))
    println("kotlin inFlight() (no arguments, a number back): %.1f ns/call".format(scalarOnly))
    desk.close()
}
