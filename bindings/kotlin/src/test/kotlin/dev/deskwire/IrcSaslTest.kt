package dev.deskwire

import dev.deskwire.core.*
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import java.nio.file.Paths
import java.security.KeyStore
import java.security.cert.CertificateFactory
import java.util.concurrent.TimeUnit
import javax.net.ssl.SSLContext
import javax.net.ssl.SSLSocketFactory
import javax.net.ssl.TrustManagerFactory
import kotlin.test.assertContains
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith

/**
 * A desk logging in with SASL over TLS (JSSE), against InspIRCd 3 linked to Atheme services
 * (`services-irc` from tests/integration, with the account `bob`), rexd --irc answering on the
 * same server: the connect line a user writes, and what a wrong password raises.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class IrcSaslTest {
    private val services = ChildProcess(listOf(cargoBinary("services-irc").toString()))
    private val info = services.await(Regex("^\\{.*\\}$"), seconds = 60).value
    private fun field(name: String): String =
        Regex("\"$name\": \"?([^\",}]*)\"?").find(info)?.groupValues?.get(1) ?: error("no $name in $info")
    private val port = field("port").toInt()
    private val tlsPort = field("tls_port").toInt()
    private val rexd = ChildProcess(
        listOf(
            cargoBinary("rexd").toString(), "--irc", "127.0.0.1:$port",
            "--allow-from", "desk", "--log-level", "info", "--unauthenticated",
        ),
    ).also { it.await(Regex("joined", RegexOption.IGNORE_CASE)) }
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    @AfterAll
    fun stop() {
        scope.cancel()
        rexd.close()
        // services-irc stops InspIRCd and Atheme when its stdin closes.
        services.process.outputStream.close()
        services.process.waitFor(30, TimeUnit.SECONDS)
        services.close()
    }

    /** Sockets that trust this run's CA only. */
    private fun trusting(): SSLSocketFactory {
        val ca = Paths.get(field("ca")).toFile().inputStream().use { CertificateFactory.getInstance("X.509").generateCertificate(it) }
        val store = KeyStore.getInstance(KeyStore.getDefaultType()).apply { load(null); setCertificateEntry("ca", ca) }
        val trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm()).apply { init(store) }
        return SSLContext.getInstance("TLS").apply { init(null, trust.trustManagers, null) }.socketFactory
    }

    private fun withLogin(password: String): ConnectionConfig {
        val config = DeskConnection.defaultConfig()
        val login = SaslConfig(SaslMechanism.PLAIN, field("account"), password, required = true)
        return config.copy(session = config.session.copy(sasl = login))
    }

    @Test
    fun `PLAIN over TLS logs in and the remote answers`() = runBlocking {
        val desk = withTimeout(30_000) {
            DeskConnection.connect("localhost", tlsPort, withLogin(field("password")), scope, tls = trusting())
        }
        desk.use {
            assertEquals("sasl from the jvm\n", withTimeout(30_000) { it.remoteBash("echo sasl from the jvm") })
        }
    }

    @Test
    fun `a wrong password fails the connect with the server's words`() = runBlocking {
        val failure = assertFailsWith<Oa1ConnectException> {
            withTimeout(30_000) { DeskConnection.connect("localhost", tlsPort, withLogin("wrong"), scope, tls = trusting()) }
        }
        assertContains(failure.message ?: "", "SASL login failed: 904 SASL authentication failed")
    }
}
