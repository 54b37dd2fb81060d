/* A C host for deskwire's desk engine: plain sockets and poll(), one RemoteBash command.
 *
 *   c_host HOST PORT CHANNEL NICK REMOTE_NICK COMMAND
 *
 * Connects to the IRC server, lets dw_desk register, join CHANNEL and wait for REMOTE_NICK (a
 * `rexd --irc` serving RemoteBash there), runs COMMAND on it and writes the tool result to
 * stdout exactly as it came: the command's output, or the failure object
 * {"ok": false, "error", "message"} with exit status 1. Progress goes to stderr with -v.
 *
 * Build against an installed deskwire (ffi/install.sh):
 *   cc -std=c11 c_host.c $(pkg-config --cflags --libs deskwire) -o c_host
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
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <deskwire.h>

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

static void fail(const char *what, dw_status st, const dw_desk *desk) {
    fprintf(stderr, "c_host: %s: %s (%s)\n", what, dw_status_str(st),
            desk ? dw_desk_last_error(desk) : dw_last_error());
    exit(2);
}

int main(int argc, char **argv) {
    int a = 1;
    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        verbose = 1;
        a++;
    }
    if (argc - a != 6) {
        fprintf(stderr, "usage: c_host [-v] HOST PORT CHANNEL NICK REMOTE_NICK COMMAND\n");
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
    char config[1024], args[16500];
    snprintf(config, sizeof config, "{\"nick\":%s,\"channel\":%s,\"oa1\":{\"allowed_sender\":%s}}",
             quoted[1], quoted[0], quoted[2]);
    snprintf(args, sizeof args, "{\"command\":%s,\"timeout_sec\":60}", command_json);

    int fd = connect_tcp(host, port);
    if (fd < 0) {
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
            if (out.kind == DW_OUTPUT_TRANSMIT && write_all(fd, out.data, out.len) != 0) {
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
                    status = failed;
                    break;
                }
            }
        }
        if (status >= 0) {
            break;
        }
        /* 2. Wait for the socket or the deadline. */
        uint64_t now = now_ms();
        int wait = deadline > now ? (int)(deadline - now < 60000 ? deadline - now : 60000) : 0;
        struct pollfd pfd = {fd, POLLIN, 0};
        int ready = poll(&pfd, 1, wait);
        if (ready < 0 && errno != EINTR) {
            perror("c_host: poll");
            return 2;
        }
        /* 3. Feed what arrived, or the time. */
        if (ready > 0) {
            ssize_t n = read(fd, buf, sizeof buf);
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
            write_all(fd, out.data, out.len);
        }
    }
    close(fd);
    dw_desk_free(desk);
    return status;
}
