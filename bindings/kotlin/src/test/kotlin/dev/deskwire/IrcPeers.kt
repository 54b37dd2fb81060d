package dev.deskwire

import dev.deskwire.core.*
import java.net.ServerSocket
import java.net.Socket
import java.nio.file.Files
import java.nio.file.Path
import java.nio.file.Paths

/** A free loopback port (bound and released; the daemon takes it next). */
fun freePort(): Int = ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress()).use { it.localPort }

/** Waits until something accepts on 127.0.0.1:[port]. */
fun awaitPort(port: Int, seconds: Long = 10) {
    val end = System.nanoTime() + seconds * 1_000_000_000
    while (true) {
        try {
            Socket("127.0.0.1", port).close()
            return
        } catch (e: java.io.IOException) {
            check(System.nanoTime() < end) { "nothing listens on 127.0.0.1:$port after $seconds s" }
            Thread.sleep(20)
        }
    }
}

/**
 * A private ngircd on a free loopback port, with the default flood protection users have;
 * [sections] are more of its configuration (e.g. a `[Channel]` with `Modes = i`).
 */
class Ngircd(sections: String = "") : AutoCloseable {
    val port = freePort()
    private val dir: Path = Files.createTempDirectory("deskwire-ngircd")
    private var process: ChildProcess
    private val command: List<String>

    init {
        val includes = Files.createDirectory(dir.resolve("conf.d"))
        val conf = dir.resolve("ngircd.conf")
        Files.writeString(
            conf,
            """
            [Global]
            Name = irc.deskwire.test
            Info = deskwire test server
            AdminInfo1 = deskwire
            AdminInfo2 = tests
            AdminEMail = tests@deskwire.invalid
            Listen = 127.0.0.1
            Ports = $port
            [Limits]
            MaxConnectionsIP = 0
            PingTimeout = 120
            PongTimeout = 60
            [Options]
            PAM = no
            Ident = no
            DNS = no
            IncludeDir = $includes
            """.trimIndent() + "\n" + sections,
        )
        val binary = listOf("/usr/sbin/ngircd", "/usr/bin/ngircd").firstOrNull { Paths.get(it).toFile().canExecute() }
            ?: "ngircd"
        command = listOf(binary, "-n", "-f", conf.toString())
        process = ChildProcess(command)
        awaitPort(port)
    }

    /** Freezes the server (SIGSTOP): its connections stay open and nothing answers. */
    fun pause() = signal("STOP")

    /** Lets a paused server go on (SIGCONT). */
    fun resume() = signal("CONT")

    private fun signal(name: String) {
        val kill = ProcessBuilder("kill", "-$name", process.process.pid().toString()).start()
        check(kill.waitFor() == 0) { "kill -$name failed" }
    }

    /** Stops the server (every connection drops) and starts it again on the same port. */
    fun restart() {
        process.close()
        process = ChildProcess(command)
        awaitPort(port)
    }

    override fun close() {
        process.close()
        dir.toFile().deleteRecursively()
    }
}
