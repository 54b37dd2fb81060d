package dev.deskwire;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import dev.deskwire.core.ConnectionState;
import kotlin.text.Regex;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Many desks on one connection as a Java caller uses them: futures for connecting, waiting for
 * a desk and its calls, plain methods for adding desks and sending text, and the binding's typed
 * exceptions for an unknown channel and text starting with "OA1 ".
 */
class JavaMultiDeskTest {
    private static Ngircd ngircd;

    @BeforeAll
    static void start() {
        ngircd = new Ngircd("");
    }

    @AfterAll
    static void stop() {
        ngircd.close();
    }

    @Test
    void twoDesksOnOneConnectionFromJava() throws Exception {
        List<String> command = List.of(
            RepoKt.cargoBinary("rexd").toString(), "--irc", "127.0.0.1:" + ngircd.getPort(),
            "--allow-from", "npcs", "--log-level", "info", "--unauthenticated",
            "--channel", "#java-1", "--channel", "#java-2");
        try (ChildProcess rexd = new ChildProcess(command)) {
            rexd.await(new Regex("joined"), 20);
            try (MultiDeskConnection desks = MultiDeskConnection.connectAsync("127.0.0.1", ngircd.getPort(), "npcs")
                    .get(20, TimeUnit.SECONDS)) {
                assertEquals(ConnectionState.READY, desks.getState().getValue());
                desks.addDesk("#java-1", "rexd");
                desks.addDesk("#java-2", "rexd");
                desks.awaitReadyAsync("#java-1").get(30, TimeUnit.SECONDS);
                desks.awaitReadyAsync("#java-2").get(30, TimeUnit.SECONDS);
                CompletableFuture<String> one = desks.remoteBashAsync("#java-1", "echo one");
                CompletableFuture<String> two = desks.remoteBashAsync("#java-2", "echo two", Duration.ofSeconds(20));
                assertEquals("one\n", one.get(30, TimeUnit.SECONDS));
                assertEquals("two\n", two.get(30, TimeUnit.SECONDS));
                assertEquals(1, desks.sendText("#java-1", "hello from java"));

                DeskwireException.InvalidInput reserved = assertThrows(DeskwireException.InvalidInput.class,
                    () -> desks.sendText("#java-1", "OA1 REQ abc 1 0 ls"));
                assertEquals(ErrorKind.RESERVED_PREFIX, reserved.getKind());
                DeskwireException.Misuse unknown = assertThrows(DeskwireException.Misuse.class,
                    () -> desks.sendText("#nope", "hi", true));
                assertEquals(ErrorKind.UNKNOWN_CHANNEL, unknown.getKind());
                ExecutionException failed = assertThrows(ExecutionException.class,
                    () -> desks.requestAsync("#nope", "ls").get(20, TimeUnit.SECONDS));
                assertEquals(ErrorKind.UNKNOWN_CHANNEL,
                    assertInstanceOf(DeskwireException.Misuse.class, failed.getCause()).getKind());
            }
        }
    }
}
