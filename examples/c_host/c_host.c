/* A C host for deskwire's desk engine: sockets and poll(), TLS with OpenSSL, one RemoteBash
 * command.
 *
 *   c_host [-v] [--tls] [--ca FILE] [--sasl USER --sasl-password-file FILE]
 *          HOST PORT CHANNEL NICK REMOTE_NICK COMMAND
 *
 * Connects to the IRC server, lets dw_desk register, join CHANNEL and wait for REMOTE_NICK (a
 * `rexd --irc` serving RemoteBash there), runs COMMAND on it and writes the tool result to
 * stdout exactly as it came: the command's output, or the failure object
 * {"ok": false, "error", "message"} with exit status 1. An answer exits as ssh would, with the
 * command's status (dw_remote_bash_ending: its exit code, 128 + a signal's number, 124 cut at
 * the timeout, 255 cut short); 2 is an error of the host's own. Progress goes to stderr with -v.
 *
 * The engine never touches the socket, so TLS is the host's: --tls wraps it with OpenSSL,
 * checking the certificate against the system's CAs (or --ca FILE) and HOST as its name. SASL is
 * the engine's: --sasl logs in with PLAIN (the password read from a file, never from the command
 * line), and a login that fails ends the connection, named.
 *
 * Build against an installed deskwire (ffi/install.sh) and OpenSSL:
 *   cc -std=c11 c_host.c $(pkg-config --cflags --libs deskwire openssl) -o c_host
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <deskwire.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

static int verbose = 0;

static uint64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int connect_tcp(const char *host, const char *port) {
    struct addrinfo hints = {0}, *res, *ai;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int err = getaddrinfo(host, port, &hints, &res);
    if (err != 0) {
        fprintf(stderr, "c_host: %s:%s: %s\n", host, port, gai_strerror(err));
        return -1;
    }
    int fd = -1;
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            break;
        }
        if (fd >= 0) {
            close(fd);
        }
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        fprintf(stderr, "c_host: cannot connect to %s:%s\n", host, port);
    }
    return fd;
}

/* The connection: the socket, with TLS over it when asked for. */
typedef struct {
    int fd;
    SSL *ssl;
} conn;

/* TLS over the connected `fd`, the certificate checked against `ca` (a PEM file) or the
 * system's CAs, and `host` as its name. Says why on failure: a bad certificate, a name that does
 * not match and a server that speaks plain text each read differently. */
static SSL *start_tls(int fd, const char *host, const char *ca) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL || (ca ? SSL_CTX_load_verify_locations(ctx, ca, NULL)
                           : SSL_CTX_set_default_verify_paths(ctx)) != 1) {
        fprintf(stderr, "c_host: TLS: cannot load the CAs%s%s\n", ca ? " from " : "", ca ? ca : "");
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL *ssl = SSL_new(ctx);
    SSL_CTX_free(ctx); /* the SSL holds its own reference */
    if (ssl == NULL || SSL_set1_host(ssl, host) != 1 || SSL_set_tlsext_host_name(ssl, host) != 1 ||
        SSL_set_fd(ssl, fd) != 1) {
        fprintf(stderr, "c_host: TLS: cannot set up the connection to %s\n", host);
        SSL_free(ssl);
        return NULL;
    }
    /* A plain-text server may say nothing to a TLS hello: bound the handshake. */
    struct timeval handshake = {10, 0}, forever = {0, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &handshake, sizeof handshake);
    errno = 0;
    if (SSL_connect(ssl) != 1) {
        long verify = SSL_get_verify_result(ssl);
        unsigned long err = ERR_get_error();
        int timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
        fprintf(stderr, "c_host: TLS with %s failed: %s\n", host,
                verify != X509_V_OK ? X509_verify_cert_error_string(verify)
                : err != 0         ? ERR_reason_error_string(err)
                : timed_out        ? "no answer to the TLS handshake within 10 s (a plain-text port?)"
                                   : "the server closed the connection");
        SSL_free(ssl);
        return NULL;
    }
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof forever);
    return ssl;
}

static int write_all(int fd, const uint8_t *data, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static int conn_write(conn *c, const uint8_t *data, size_t len) {
    if (c->ssl == NULL) {
        return write_all(c->fd, data, len);
    }
    while (len > 0) {
        int n = SSL_write(c->ssl, data, len > INT32_MAX ? INT32_MAX : (int)len);
        if (n <= 0) {
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Bytes read into `buf`; 0 at the end of the stream, -1 on an error. The socket blocks, so a
 * TLS read waits for the rest of a record once poll() saw its start. */
static ssize_t conn_read(conn *c, uint8_t *buf, size_t cap) {
    if (c->ssl == NULL) {
        return read(c->fd, buf, cap);
    }
    int n = SSL_read(c->ssl, buf, cap > INT32_MAX ? INT32_MAX : (int)cap);
    if (n > 0) {
        return n;
    }
    return SSL_get_error(c->ssl, n) == SSL_ERROR_ZERO_RETURN ? 0 : -1;
}

/* The first line of the file at `path`, without its line end, into `out`; 0 on failure. */
static int read_secret(const char *path, char *out, size_t cap) {
    FILE *f = fopen(path, "r");
    if (f == NULL || fgets(out, (int)cap, f) == NULL) {
        if (f) {
            fclose(f);
        }
        return 0;
    }
    fclose(f);
    out[strcspn(out, "\r\n")] = 0;
    return out[0] != 0;
}

/* `text` as a JSON string (quotes included) into `out` (size `cap`); 0 if it does not fit. */
static size_t json_string(const char *text, char *out, size_t cap) {
    size_t n = 0;
    if (cap < 3) {
        return 0;
    }
    out[n++] = '"';
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        char esc[8];
        const char *piece = esc;
        if (*p == '"' || *p == '\\') {
            esc[0] = '\\', esc[1] = (char)*p, esc[2] = 0;
        } else if (*p < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", *p);
        } else {
            esc[0] = (char)*p, esc[1] = 0;
        }
        size_t len = strlen(piece);
        if (n + len + 2 > cap) {
            return 0;
        }
        memcpy(out + n, piece, len);
        n += len;
    }
    out[n++] = '"';
    out[n] = 0;
    return n;
}

/* An exit status from how the command ended: a byte, and never 0 for a command that failed. */
static int exit_status(dw_status st, dw_ending ending) {
    if (st != DW_STATUS_OK) return 1;
    int byte = ending.status & 0xFF;
    return byte == 0 && ending.status != 0 ? 1 : byte;
}

static void fail(const char *what, dw_status st, const dw_desk *desk) {
    fprintf(stderr, "c_host: %s: %s (%s)\n", what, dw_status_str(st),
            desk ? dw_desk_last_error(desk) : dw_last_error());
    exit(2);
}

int main(int argc, char **argv) {
    int a = 1, tls = 0;
    const char *ca = NULL, *sasl_user = NULL, *sasl_password_file = NULL;
    for (; a < argc && argv[a][0] == '-'; a++) {
        if (strcmp(argv[a], "-v") == 0) {
            verbose = 1;
        } else if (strcmp(argv[a], "--tls") == 0) {
            tls = 1;
        } else if (strcmp(argv[a], "--ca") == 0 && a + 1 < argc) {
            ca = argv[++a], tls = 1;
        } else if (strcmp(argv[a], "--sasl") == 0 && a + 1 < argc) {
            sasl_user = argv[++a];
        } else if (strcmp(argv[a], "--sasl-password-file") == 0 && a + 1 < argc) {
            sasl_password_file = argv[++a];
        } else {
            break;
        }
    }
    if (argc - a != 6 || (sasl_user != NULL) != (sasl_password_file != NULL)) {
        fprintf(stderr, "usage: c_host [-v] [--tls] [--ca FILE] [--sasl USER --sasl-password-file FILE]\n"
                        "              HOST PORT CHANNEL NICK REMOTE_NICK COMMAND\n");
        return 2;
    }
    const char *host = argv[a], *port = argv[a + 1], *channel = argv[a + 2], *nick = argv[a + 3],
               *remote = argv[a + 4], *command = argv[a + 5];

    char quoted[3][256];
    char command_json[16384];
    if (!json_string(channel, quoted[0], 256) || !json_string(nick, quoted[1], 256) ||
        !json_string(remote, quoted[2], 256) ||
        !json_string(command, command_json, sizeof command_json)) {
        fprintf(stderr, "c_host: an argument is too long\n");
        return 2;
    }
    /* A required SASL login, in the session's config: the engine does the AUTHENTICATE
     * exchange, and a refusal ends the connection with the server's words. */
    char session[1024] = "{}";
    if (sasl_user != NULL) {
        char password[256], user_json[256], password_json[512];
        if (!read_secret(sasl_password_file, password, sizeof password)) {
            fprintf(stderr, "c_host: cannot read a password from %s\n", sasl_password_file);
            return 2;
        }
        if (!json_string(sasl_user, user_json, sizeof user_json) ||
            !json_string(password, password_json, sizeof password_json)) {
            fprintf(stderr, "c_host: the SASL user or password is too long\n");
            return 2;
        }
        snprintf(session, sizeof session,
                 "{\"sasl\":{\"mechanism\":\"PLAIN\",\"username\":%s,\"password\":%s}}",
                 user_json, password_json);
    }
    char config[2048], args[16500];
    snprintf(config, sizeof config,
             "{\"nick\":%s,\"channel\":%s,\"session\":%s,\"oa1\":{\"allowed_sender\":%s}}",
             quoted[1], quoted[0], session, quoted[2]);
    snprintf(args, sizeof args, "{\"command\":%s,\"timeout_sec\":60}", command_json);

    conn c = {connect_tcp(host, port), NULL};
    if (c.fd < 0) {
        return 2;
    }
    if (tls && (c.ssl = start_tls(c.fd, host, ca)) == NULL) {
        close(c.fd);
        return 2;
    }
    /* Request ids follow the seed: it comes from the OS's entropy, so two desks started in the
     * same instant still make different ids. A fixed seed is for tests only. */
    uint64_t seed;
    if (getentropy(&seed, sizeof seed) != 0) {
        perror("c_host: getentropy");
        return 2;
    }
    dw_desk *desk = NULL;
    dw_status st = dw_desk_new(config, now_ms(), seed, &desk);
    if (st != DW_STATUS_OK) {
        fail("dw_desk_new", st, NULL);
    }
    /* Queued inside the desk until the channel is joined and the remote is there. */
    dw_str view;
    st = dw_desk_remote_bash(desk, now_ms(), args, &view);
    if (st != DW_STATUS_OK) {
        fail("dw_desk_remote_bash", st, desk);
    }
    char id[128];
    snprintf(id, sizeof id, "%.*s", (int)view.len, view.ptr);

    int status = -1;
    uint8_t buf[16384];
    while (status < 0) {
        /* 1. Drain the engine: write what it transmits, look at what it tells. */
        uint64_t deadline = 0;
        for (;;) {
            dw_output out;
            st = dw_desk_poll_output(desk, now_ms(), &out);
            if (st != DW_STATUS_OK) {
                fail("dw_desk_poll_output", st, desk);
            }
            if (out.kind == DW_OUTPUT_TIMEOUT) {
                deadline = out.deadline_ms;
                break;
            }
            if (out.kind == DW_OUTPUT_TRANSMIT && conn_write(&c, out.data, out.len) != 0) {
                perror("c_host: write");
                return 2;
            }
            if (out.kind == DW_OUTPUT_EVENT) {
                if (verbose) {
                    fprintf(stderr, "c_host: %.*s\n", (int)out.len, (const char *)out.data);
                }
                /* A failure's event starts {"failed"; read it before the next call with
                 * `desk`, which ends the event's lifetime. */
                int failed = out.len > 9 && memcmp(out.data, "{\"failed\"", 9) == 0;
                dw_str call, result;
                if (dw_desk_tool_result(desk, &call, &result) == DW_STATUS_OK &&
                    call.len == strlen(id) && memcmp(call.ptr, id, call.len) == 0) {
                    fwrite(result.ptr, 1, result.len, stdout);
                    dw_ending ending = {DW_ENDING_EXITED, 1};
                    status = failed ? 1
                                    : exit_status(dw_remote_bash_ending((const uint8_t *)result.ptr,
                                                                        result.len, &ending),
                                                  ending);
                    break;
                }
            }
        }
        if (status >= 0) {
            break;
        }
        /* 2. Wait for the socket or the deadline (TLS may hold decrypted bytes already). */
        uint64_t now = now_ms();
        int wait = deadline > now ? (int)(deadline - now < 60000 ? deadline - now : 60000) : 0;
        struct pollfd pfd = {c.fd, POLLIN, 0};
        int ready = c.ssl != NULL && SSL_pending(c.ssl) > 0 ? 1 : poll(&pfd, 1, wait);
        if (ready < 0 && errno != EINTR) {
            perror("c_host: poll");
            return 2;
        }
        /* 3. Feed what arrived, or the time. */
        if (ready > 0) {
            ssize_t n = conn_read(&c, buf, sizeof buf);
            if (n > 0) {
                st = dw_desk_handle_bytes(desk, now_ms(), buf, (size_t)n);
            } else {
                st = dw_desk_handle_eof(desk, now_ms());
            }
        } else {
            st = dw_desk_handle_timeout(desk, now_ms());
        }
        if (st != DW_STATUS_OK) {
            fail("dw_desk_handle_*", st, desk);
        }
    }

    /* Leave politely: QUIT goes out with the next drain. */
    dw_desk_quit(desk, now_ms(), "done");
    for (;;) {
        dw_output out;
        if (dw_desk_poll_output(desk, now_ms(), &out) != DW_STATUS_OK || out.kind == DW_OUTPUT_TIMEOUT) {
            break;
        }
        if (out.kind == DW_OUTPUT_TRANSMIT) {
            conn_write(&c, out.data, out.len);
        }
    }
    if (c.ssl != NULL) {
        SSL_shutdown(c.ssl);
        SSL_free(c.ssl);
    }
    close(c.fd);
    dw_desk_free(desk);
    return status;
}
