#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <errno.h>
/* A relay that moves its stdin (a pipe) to its stdout with splice(2), inside the kernel, as
 * rexd does with a command's output: rex_vs_ssh.sh's "ssh+2splice" contender puts one on each
 * side of ssh, to time what a relay process costs when it copies nothing. Falls back to
 * read/write when stdout takes no splice (a terminal). */
int main(void) {
    for (;;) {
        ssize_t n = splice(0, NULL, 1, NULL, 1 << 20, SPLICE_F_MOVE);
        if (n == 0) return 0;
        if (n < 0) {
            if (errno == EINTR) continue;
            if (errno == EINVAL) break;
            perror("splice"); return 1;
        }
    }
    static char buf[1 << 16];
    for (;;) {
        ssize_t n = read(0, buf, sizeof buf);
        if (n <= 0) return n < 0;
        for (ssize_t off = 0; off < n;) { ssize_t w = write(1, buf + off, n - off); if (w < 0) return 1; off += w; }
    }
}
