package dev.deskwire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import dev.deskwire.core.ConnectionState;
import kotlin.text.Regex;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The binding as a Java caller uses it (issue 39, part 6): no suspend call, no Kotlin default
 * argument and no mangled name is needed. connectAsync and remoteBashAsync are futures, the
 * secret is Oa1Auth.withSecret(secret), and failures are the binding's typed exceptions.
 */
class JavaApiTest {
    private static Ngircd ngircd;

    @BeforeAll
    static void start() {
        ngircd = new Ngircd("");
    }

    @AfterAll
    static void stop() {
        ngircd.close();
    }

    private static ChildProcess rexd(String... extra) {
        List<String> command = new java.util.ArrayList<>(List.of(
            RepoKt.cargoBinary("rexd").toString(), "--irc", "127.0.0.1:" + ngircd.getPort(),
            "--allow-from", "desk", "--log-level", "info"));
        command.addAll(List.of(extra));
        ChildProcess rexd = new ChildProcess(command);
        rexd.await(new Regex("joined"), 20);
        return rexd;
    }

    @Test
    void connectAsyncAndRemoteBashAsyncWithASecret() throws Exception {
        Path dir = Files.createTempDirectory("deskwire-java");
        Path file = dir.resolve("secret");
        Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
        Files.writeString(file, "java secret\n");
        try (ChildProcess rexd = rexd("--secret-file", file.toString())) {
            ConnectionConfig base = DeskConnection.defaultConfig();
            Oa1AuthConfig auth = Oa1Auth.withSecret("java secret");
            ConnectionConfig config = DeskwireAuth.withSecret(base, "java secret");
            assertEquals(auth.getMaxSkewMs(), config.getOa1().getAuth().getMaxSkewMs());
            try (DeskConnection desk = DeskConnection.connectAsync("127.0.0.1", ngircd.getPort(), config).get(20, TimeUnit.SECONDS)) {
                assertEquals(ConnectionState.READY, desk.getState().getValue());
                assertEquals("from java\n", desk.remoteBashAsync("echo from java").get(20, TimeUnit.SECONDS));
                assertEquals("timed\n", desk.remoteBashAsync("echo timed", Duration.ofSeconds(20)).get(20, TimeUnit.SECONDS));
                desk.close();
                assertEquals(ConnectionState.CLOSED, desk.getState().getValue());
                DeskwireException.Misuse misuse = assertThrows(DeskwireException.Misuse.class, desk::members);
                assertEquals(ErrorKind.CLOSED, misuse.getKind());
                ExecutionException after = assertThrows(ExecutionException.class,
                    () -> desk.remoteBashAsync("echo late").get(20, TimeUnit.SECONDS));
                assertEquals(ErrorKind.CLOSED, assertInstanceOf(DeskwireException.Misuse.class, after.getCause()).getKind());
            }
        } finally {
            Files.deleteIfExists(file);
            Files.deleteIfExists(dir);
        }
    }

    @Test
    void aRefusedPortIsAnIrcConnectExceptionNamingHostAndPort() {
        int nowhere = IrcPeersKt.freePort();
        ExecutionException e = assertThrows(ExecutionException.class,
            () -> DeskConnection.connectAsync("127.0.0.1", nowhere).get(20, TimeUnit.SECONDS));
        IrcConnectException refused = assertInstanceOf(IrcConnectException.class, e.getCause());
        assertTrue(refused.getMessage().startsWith("connect to 127.0.0.1:" + nowhere + " failed: "), refused.getMessage());
    }
}
