// A user's program: RemoteBash through `rexd --irc` (nick rexd in #desk, serving the nick desk)
// on the IRC server at 127.0.0.1:$DESKWIRE_IRC_PORT, with the deskwire JAR from dist/maven; it
// must print $DESKWIRE_EXPECT.
import dev.deskwire.DeskConnection
import dev.deskwire.connectionConfig
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.runBlocking
import kotlin.system.exitProcess
import kotlin.time.Duration.Companion.seconds

fun main() {
    val port = System.getenv("DESKWIRE_IRC_PORT")?.toInt() ?: error("DESKWIRE_IRC_PORT is not set")
    check(System.getProperty("jna.library.path") == null) { "jna.library.path is set" }
    val expect = System.getenv("DESKWIRE_EXPECT") ?: error("DESKWIRE_EXPECT is not set")
    val config = connectionConfig("desk", "#desk").let { it.copy(oa1 = it.oa1.copy(allowedSender = "rexd")) }
    val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)
    val answer = runBlocking {
        DeskConnection.connect("127.0.0.1", port, config, scope).use { desk ->
            desk.remoteBash("echo $expect", timeout = 30.seconds)
        }
    }
    scope.cancel()
    println("jvm: RemoteBash over IRC: ${answer.trim()}")
    exitProcess(if (answer.trim() == expect) 0 else 1)
}
