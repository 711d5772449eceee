/* drths-keygen: makes the pre-shared key file both sites load (protocol/PROTOCOL.md section 3).
 *
 *   drths-keygen [--force] [--hex] FILE   write 32 random bytes, mode 0600
 *   drths-keygen --id FILE                print the key id of an existing key file
 */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/platform/cli.h"
#include "common/platform/error.h"
#include "protocol/crypto.h"
#include "protocol/keyfile.h"

#define PROG "drths-keygen"

static void usage(FILE *f)
{
    fprintf(f, "usage: " PROG " [--force] [--hex] FILE\n"
               "       " PROG " --id FILE\n"
               "Writes a new 32-byte random pre-shared key to FILE with mode 0600. Copy the same\n"
               "file to the other site out of band (scp, USB stick) and give it to both sites\n"
               "with --key FILE. With --id, prints the key id (not the key) of an existing key\n"
               "file, so two labs can check by phone that they hold the same key.\n"
               "\n"
               "  --force      replace FILE if it exists (otherwise it is refused)\n"
               "  --hex        write 64 hex digits and a newline instead of raw bytes\n"
               "  --id         print the key id of FILE instead of writing a key\n"
               "  -h, --help   print this help and exit\n"
               "  --version    print the version and exit\n"
               "\n");
    drths_cli_print_exit_codes(f, "the key file could not be written");
}

int main(int argc, char **argv)
{
    enum { OPT_FORCE = 1, OPT_HEX, OPT_ID };
    static const struct option opts[] = {
        {"force", no_argument, NULL, OPT_FORCE}, {"hex", no_argument, NULL, OPT_HEX},
        {"id", no_argument, NULL, OPT_ID},       DRTHS_CLI_OPTIONS_COMMON, {NULL, 0, NULL, 0},
    };
    bool force = false, hex = false, id = false;
    argv[0] = (char *)PROG; /* getopt names the program in its messages from argv[0] */
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_FORCE:
            force = true;
            break;
        case OPT_HEX:
            hex = true;
            break;
        case OPT_ID:
            id = true;
            break;
        default:
            return drths_cli_other_option(PROG, c, usage);
        }
    }
    if (optind == argc)
        return drths_cli_usage_error(PROG, "no key FILE given (see --help)");
    if (optind + 1 < argc)
        return drths_cli_unexpected_argument(PROG, argv[optind + 1]);
    const char *path = argv[optind];
    if (drths_crypto_init() != 0)
        return drths_cli_error(PROG, "libsodium failed to initialise");
    drths_error_t err;
    uint8_t key[DRTHS_KEY_BYTES];
    char kid[17];
    if (id) {
        /* A key file that is missing, of the wrong size or readable by others is a wrong file. */
        if (drths_key_load(key, path, &err) != 0)
            return drths_cli_usage_error(PROG, "%s", err.msg);
        drths_key_id(key, kid);
        drths_crypto_wipe(key, sizeof key);
        printf("%s\n", kid);
        return DRTHS_EXIT_OK;
    }
    int rc = drths_key_generate(path, hex, force, key, &err);
    if (rc == -EEXIST) /* refused before anything was written */
        return drths_cli_usage_error(PROG, "%s", err.msg);
    if (rc != 0)
        return drths_cli_error(PROG, "%s", err.msg);
    drths_key_id(key, kid);
    drths_crypto_wipe(key, sizeof key);
    printf("wrote %s (mode 0600, %s); key id %s\n", path, hex ? "64 hex digits" : "32 bytes", kid);
    return DRTHS_EXIT_OK;
}
