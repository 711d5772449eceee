/* drths-keygen: makes the pre-shared key file both sites load (PROTOCOL.md section 3).
 *
 *   drths-keygen [--force] [--hex] FILE   write 32 random bytes, mode 0600
 *   drths-keygen --id FILE                print the key id of an existing key file
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "platform/error.h"
#include "protocol/crypto.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: drths-keygen [--force] [--hex] FILE\n"
            "       drths-keygen --id FILE\n"
            "\n"
            "Writes a new 32-byte random pre-shared key to FILE with mode 0600 (raw bytes, or\n"
            "64 hex digits and a newline with --hex). Copy the same file to the other site\n"
            "out of band (scp, USB stick) and pass it to both sites with --key FILE.\n"
            "Refuses to overwrite FILE unless --force is given.\n"
            "--id prints the key id (not the key) so two labs can check by phone that they\n"
            "hold the same key.\n");
}

int main(int argc, char **argv)
{
    bool force = false, hex = false, id = false;
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--force") == 0)
            force = true;
        else if (strcmp(argv[i], "--hex") == 0)
            hex = true;
        else if (strcmp(argv[i], "--id") == 0)
            id = true;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            fprintf(stderr, "drths-keygen: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (path) {
            fprintf(stderr, "drths-keygen: one FILE only (got %s and %s)\n", path, argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    if (drths_crypto_init() != 0) {
        fprintf(stderr, "drths-keygen: libsodium failed to initialise\n");
        return 1;
    }
    drths_error_t err;
    uint8_t key[DRTHS_KEY_BYTES];
    char kid[17];
    if (id) {
        if (drths_key_load(key, path, &err) != 0) {
            fprintf(stderr, "drths-keygen: %s\n", err.msg);
            return 1;
        }
        drths_key_id(key, kid);
        drths_crypto_wipe(key, sizeof key);
        printf("%s\n", kid);
        return 0;
    }
    if (drths_key_generate(path, hex, force, key, &err) != 0) {
        fprintf(stderr, "drths-keygen: %s\n", err.msg);
        return 1;
    }
    drths_key_id(key, kid);
    drths_crypto_wipe(key, sizeof key);
    printf("wrote %s (mode 0600, %s); key id %s\n", path, hex ? "64 hex digits" : "32 bytes", kid);
    return 0;
}
