/* A C program linked against a released libdeskwire (tests/dist/run.sh: the musl static library
 * and the aarch64 tarball): the library's version matches the header's, and a desk engine
 * starts and registers (its first output is the IRC NICK line). Prints "deskwire VERSION". */
#include <deskwire.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    if (strcmp(dw_version(), DW_VERSION_STRING) != 0) {
        fprintf(stderr, "library %s, header %s\n", dw_version(), DW_VERSION_STRING);
        return 1;
    }
    dw_desk *desk = NULL;
    const char *config = "{\"nick\": \"probe\", \"channel\": \"#desk\", \"oa1\": {\"allowed_sender\": \"rexd\"}}";
    if (dw_desk_new(config, 0, 42, &desk) != DW_STATUS_OK) {
        fprintf(stderr, "dw_desk_new: %s\n", dw_last_error());
        return 1;
    }
    dw_output out;
    if (dw_desk_poll_output(desk, 0, &out) != DW_STATUS_OK || out.kind != DW_OUTPUT_TRANSMIT ||
        out.len < 5 || memcmp(out.data, "NICK ", 5) != 0) {
        fprintf(stderr, "the desk's first output is not NICK\n");
        dw_desk_free(desk);
        return 1;
    }
    dw_desk_free(desk);
    printf("deskwire %s\n", dw_version());
    return 0;
}
