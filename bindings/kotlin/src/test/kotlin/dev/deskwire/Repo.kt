package dev.deskwire

import dev.deskwire.core.*
import java.nio.file.Path
import java.nio.file.Paths
import java.util.concurrent.LinkedBlockingQueue
import java.util.concurrent.TimeUnit

/** The repository root (Surefire passes it; `mvn` run from bindings/kotlin works too). */
val repo: Path = Paths.get(System.getProperty("deskwire.repo") ?: System.getenv("DESKWIRE_REPO") ?: "../..")
    .toAbsolutePath().normalize()

/** A binary cargo built next to the library. */
fun cargoBinary(name: String): Path {
    val dir = System.getProperty("jna.library.path")?.let { Paths.get(it) } ?: repo.resolve("target/debug")
    val path = dir.resolve(name)
    check(path.toFile().canExecute()) { "$path is missing: cargo build --bin $name first" }
    return path
}

/**
 * A real child process whose standard output lines are collected, so a test can wait for the
 * line it expects. Stopped (SIGTERM, then SIGKILL) and reaped by [close].
 */
class ChildProcess(command: List<String>) : AutoCloseable {
    val process: Process = ProcessBuilder(command).redirectErrorStream(true).start()
    private val lines = LinkedBlockingQueue<String>()
    val seen = java.util.Collections.synchronizedList(mutableListOf<String>())
    private val reader = Thread {
        try {
            process.inputStream.bufferedReader().useLines { all -> all.forEach { lines.add(it); seen.add(it) } }
        } catch (_: java.io.IOException) {
            // The process was stopped and its pipe closed: nothing more to read.
        }
    }.apply { isDaemon = true; start() }

    /** Waits (at most [seconds]) for an output line matching [pattern]; its match. */
    fun await(pattern: Regex, seconds: Long = 20): MatchResult {
        val end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds)
        while (true) {
            val left = end - System.nanoTime()
            check(left > 0) { "no line matching $pattern within $seconds s; output so far:\n${seen.joinToString("\n")}" }
            val line = lines.poll(left, TimeUnit.NANOSECONDS) ?: continue
            pattern.find(line)?.let { return it }
        }
    }

    /** Writes one line to its standard input. */
    fun send(line: String) {
        process.outputStream.write((line + "\n").toByteArray())
        process.outputStream.flush()
    }

    override fun close() {
        process.destroy()
        if (!process.waitFor(5, TimeUnit.SECONDS)) {
            process.destroyForcibly()
            process.waitFor()
        }
        reader.join(5_000)
    }
}
