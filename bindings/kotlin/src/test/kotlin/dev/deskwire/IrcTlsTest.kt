package dev.deskwire

import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.SupervisorJob
import kotlinx.coroutines.cancel
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance
import java.nio.file.Files
import java.nio.file.Path
import java.security.KeyStore
import java.security.cert.CertificateFactory
import javax.net.ssl.SSLContext
import javax.net.ssl.SSLSocketFactory
import javax.net.ssl.TrustManagerFactory
import kotlin.test.assertContains
import kotlin.test.assertEquals
import kotlin.test.assertFailsWith

/**
 * A desk over TLS (JSSE) to ngircd's TLS port, with certificates made for this run: verified
 * with the server's CA, and each way it fails says which check, never a timeout.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class IrcTlsTest {
    private val certs: Path = Files.createTempDirectory("deskwire-tls")
    private val tlsPort = freePort()
    private val ngircd: Ngircd
    private val rexd: ChildProcess
    private val scope = CoroutineScope(SupervisorJob() + Dispatchers.Default)

    private fun openssl(vararg args: String) {
        val p = ProcessBuilder(listOf("openssl", *args)).directory(certs.toFile()).redirectErrorStream(true).start()
        val out = p.inputStream.readAllBytes().decodeToString()
        check(p.waitFor() == 0) { "openssl ${args.toList()}: $out" }
    }

    init {
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=deskwire test CA",
            "-keyout", "ca.key", "-out", "ca.pem")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "server.key",
            "-out", "server.csr")
        Files.writeString(certs.resolve("san.ext"), "subjectAltName=DNS:localhost\n")
        openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-out", "server.pem", "-extfile", "san.ext")
        openssl("genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt", "dh_param:ffdhe2048", "-out", "dh.pem")
        for (f in listOf("server.pem", "server.key", "dh.pem", "ca.pem")) certs.resolve(f).toFile().setReadable(true, false)
        ngircd = Ngircd(
            "[SSL]\nCertFile = ${certs.resolve("server.pem")}\nKeyFile = ${certs.resolve("server.key")}\n" +
                "DHFile = ${certs.resolve("dh.pem")}\nPorts = $tlsPort\n",
        )
        awaitPort(tlsPort)
        rexd = ChildProcess(
            listOf(
                cargoBinary("rexd").toString(), "--irc", "127.0.0.1:${ngircd.port}",
                "--allow-from", "desk", "--log-level", "info", "--unauthenticated",
            ),
        ).also { it.await(Regex("joined", RegexOption.IGNORE_CASE)) }
    }

    @AfterAll
    fun stop() {
        scope.cancel()
        rexd.close()
        ngircd.close()
        certs.toFile().deleteRecursively()
    }

    /** Sockets that trust this run's CA only. */
    private fun trusting(): SSLSocketFactory {
        val ca = certs.resolve("ca.pem").toFile().inputStream().use { CertificateFactory.getInstance("X.509").generateCertificate(it) }
        val store = KeyStore.getInstance(KeyStore.getDefaultType()).apply { load(null); setCertificateEntry("ca", ca) }
        val trust = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm()).apply { init(store) }
        return SSLContext.getInstance("TLS").apply { init(null, trust.trustManagers, null) }.socketFactory
    }

    @Test
    fun `a desk over TLS, and each way TLS fails`() = runBlocking {
        val desk = withTimeout(30_000) { DeskConnection.connect("localhost", tlsPort, scope = scope, tls = trusting()) }
        assertEquals("over tls\n", withTimeout(30_000) { desk.remoteBash("echo over tls") })
        desk.close()

        suspend fun refused(host: String, port: Int, tls: SSLSocketFactory?) = assertFailsWith<IrcConnectException> {
            withTimeout(30_000) { DeskConnection.connect(host, port, scope = scope, tls = tls) }
        }.message!!
        val untrusted = refused("localhost", tlsPort, SSLSocketFactory.getDefault() as SSLSocketFactory)
        assertContains(untrusted, "TLS with localhost:$tlsPort failed: its certificate is not signed by a CA this machine trusts")
        // The name it was dialled by, then the JDK's reason once.
        assertEquals(
            "TLS with 127.0.0.1:$tlsPort failed: its certificate is not valid for the name 127.0.0.1 " +
                "(No subject alternative names matching IP address 127.0.0.1 found)",
            refused("127.0.0.1", tlsPort, trusting()),
        )
        assertContains(refused("localhost", ngircd.port, trusting()), "a plain-text port? connect without tls")
        val closed = freePort()
        assertContains(refused("127.0.0.1", closed, null), "connect to 127.0.0.1:$closed failed: Connection refused")
    }
}
