/* drths-conform: the conformance suite of the drths wire protocol (protocol/PROTOCOL.md,
 * section "Conformance") for a second implementation of either site.
 *
 *   drths-conform --role numerical --peer HOST:PORT --experiment FILE [--key FILE]
 *   drths-conform --role physical --listen HOST:PORT --experiment FILE [--key FILE]
 *   drths-conform --role ROLE --experiment FILE --site NAME   (a file with sites)
 *
 * --role numerical: this tool is the numerical site against an actuator site listening at
 * --peer; --role physical: it is the actuator site, listening at --listen, for a numerical site
 * started with --peer pointing there. With a file that lists several actuator sites
 * (PROTOCOL.md section 12), --site NAME makes this tool that site's end of its link: in the
 * physical role it is the actuator site NAME (its listen address and key), one of several a
 * numerical site holds; in the numerical role it is link i of the numerical site to the actuator
 * site NAME (its address and key, link = i in HELLO). One line per check, a summary, exit 0 when
 * every check passed, 1 when one failed, 2 for bad usage.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/platform/cli.h"
#include "protocol/fingerprint.h"
#include "protocol/keyfile.h"
#include "tools/conform/conform.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s --role numerical --peer HOST:PORT --experiment FILE [--key FILE]\n"
            "       %s --role physical --listen HOST:PORT --experiment FILE [--key FILE]\n"
            "       %s --role numerical|physical --experiment FILE --site NAME [--key FILE]\n"
            "\n"
            "Checks a drths site (this implementation or another one) against the wire\n"
            "protocol, protocol/PROTOCOL.md (section Conformance lists every check).\n"
            "  --role numerical    act as the numerical site against the actuator site at --peer\n"
            "                      (drths-physical --listen): refused HELLOs, junk, wrong key,\n"
            "                      the handshake and key schedule, replays, pinning, then a short\n"
            "                      run and its STOP\n"
            "  --role physical     act as the actuator site at --listen for a numerical site\n"
            "                      (drths-numerical --peer pointing here): its HELLO, probes,\n"
            "                      start, COMMANDs and STOP\n"
            "  --experiment FILE   the experiment file both sites use (the HELLO's fields)\n"
            "  --site NAME         with a file that lists sites (several actuator sites): the\n"
            "                      site whose link this run checks, needed with such a file.\n"
            "                      Physical role: be actuator site NAME (--listen defaults to\n"
            "                      its listen address); numerical role: be the numerical site's\n"
            "                      link to it (--peer defaults to its address, HELLO's link is\n"
            "                      its index). The key defaults to the site's key_file\n"
            "  --key FILE          the pre-shared key (default: link.key_file of the experiment,\n"
            "                      or the site's with --site, else the public rehearsal key)\n"
            "  --ticks N           commanded ticks of the run (numerical role; default 1000)\n"
            "  --amplitude-mm A    peak of the commanded displacement (numerical role; default\n"
            "                      0.1 mm, at most 1 mm)\n"
            "  --timeout S         physical role: seconds to wait for the numerical site\n"
            "                      (default 30)\n"
            "  --mismatch          physical role: answer the HELLO with a HELLO_ACK whose\n"
            "                      fingerprint differs and check the numerical site's ABORT\n"
            "                      FINGERPRINT_MISMATCH instead of running\n"
            "  --help              print this help and exit\n"
            "  --version           print the version and exit\n"
            "\n"
            "Safety: in the numerical role the only motion commanded is one smooth bump of\n"
            "--amplitude-mm (0.1 mm by default) from the rest position and back, over --ticks\n"
            "ticks (0.2 s at 5 kHz), small enough to run in front of a real rig; the actuator\n"
            "site's own limits and watchdog stay in force.\n"
            "Output: one line per check, 'PASS|FAIL|SKIP name: what was checked, what was seen',\n"
            "then a summary.\n",
            CONFORM_PROG, CONFORM_PROG, CONFORM_PROG);
    drths_cli_print_exit_codes(f, "a check failed");
}

typedef struct args {
    const char *role, *peer, *listen, *experiment, *key, *site;
} args_t;

/* The options every run needs (the address is checked with the file, which may give it).
 * Returns -1 to go on, else the exit code. */
static int check_args(const args_t *a)
{
    if (!a->role || !a->experiment)
        return drths_cli_usage_error(CONFORM_PROG, "--role and --experiment are needed (see "
                                                   "--help)");
    return -1;
}

static int parse(int argc, char **argv, conform_t *c, args_t *a)
{
    static const struct option opts[] = {{"role", required_argument, NULL, 'r'},
                                         {"peer", required_argument, NULL, 'p'},
                                         {"listen", required_argument, NULL, 'l'},
                                         {"experiment", required_argument, NULL, 'e'},
                                         {"key", required_argument, NULL, 'k'},
                                         {"site", required_argument, NULL, 's'},
                                         {"ticks", required_argument, NULL, 't'},
                                         {"amplitude-mm", required_argument, NULL, 'a'},
                                         {"timeout", required_argument, NULL, 'w'},
                                         {"mismatch", no_argument, NULL, 'm'},
                                         DRTHS_CLI_OPTIONS_COMMON,
                                         {0, 0, 0, 0}};
    static const char *const roles[] = {"numerical", "physical", NULL};
    int ch;
    double mm = 0.1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'r':
            if (drths_cli_choice(CONFORM_PROG, "--role", optarg, roles) < 0)
                return DRTHS_EXIT_USAGE;
            a->role = optarg;
            break;
        case 'p':
            a->peer = optarg;
            break;
        case 'l':
            a->listen = optarg;
            break;
        case 'e':
            a->experiment = optarg;
            break;
        case 'k':
            a->key = optarg;
            break;
        case 's':
            a->site = optarg;
            break;
        case 't':
            if (drths_cli_long(CONFORM_PROG, "--ticks", optarg, 10, 100000, &c->run_ticks))
                return DRTHS_EXIT_USAGE;
            break;
        case 'a':
            if (drths_cli_double(CONFORM_PROG, "--amplitude-mm", optarg, 0.001, 1.0, "mm", &mm))
                return DRTHS_EXIT_USAGE;
            break;
        case 'w':
            if (drths_cli_positive(CONFORM_PROG, "--timeout", optarg, "s", &c->timeout_s))
                return DRTHS_EXIT_USAGE;
            break;
        case 'm':
            c->mismatch = true;
            break;
        default:
            return drths_cli_other_option(CONFORM_PROG, ch, usage);
        }
    }
    if (optind < argc)
        return drths_cli_unexpected_argument(CONFORM_PROG, argv[optind]);
    c->amplitude_m = mm * 1e-3;
    return check_args(a);
}

/* A file with sites: --site NAME is this run's link (its index into *link, the file's entry
 * selected, as drths-physical --site does), and without it the file is refused naming its
 * sites, as drths-physical refuses it. Returns -1 to go on, else the exit code. */
static int choose_site(conform_t *c, const args_t *a, uint8_t *link)
{
    drths_error_t err = {{0}};
    *link = 0;
    if (!a->site && c->exp.n_sites == 0)
        return -1;
    if (!a->site) {
        char list[DRTHS_EXPERIMENT_MAX_SITES * (DRTHS_SITE_NAME_MAX + 2)] = "";
        for (int i = 0; i < c->exp.n_sites; i++) {
            if (i)
                strcat(list, ", ");
            strcat(list, c->exp.sites[i].name);
        }
        return drths_cli_usage_error(CONFORM_PROG,
                                     "%s lists %d sites (%s): say whose link this run checks "
                                     "with --site NAME",
                                     a->experiment, c->exp.n_sites, list);
    }
    int i = drths_experiment_find_site(&c->exp, a->site, &err);
    if (i < 0)
        return drths_cli_usage_error(CONFORM_PROG, "--site: %s", err.msg);
    /* The address is the site's before selection swaps its listen address into physical. */
    snprintf(c->site_address, sizeof c->site_address, "%s", c->exp.sites[i].address);
    if (drths_experiment_select_site(&c->exp, a->site, &err) != 0)
        return drths_cli_usage_error(CONFORM_PROG, "--site: %s", err.msg);
    if (c->exp.site->n_channels != 1)
        return drths_cli_usage_error(CONFORM_PROG,
                                     "%s:%d: sites[%d] (%s): %d channels: a numerical site "
                                     "drives one channel per site, and so does this suite",
                                     a->experiment, c->exp.site->line, i, a->site,
                                     c->exp.site->n_channels);
    c->link = i;
    *link = (uint8_t)i;
    return -1;
}

/* Experiment, key, HELLO fields and sockets. Returns -1 to go on, else the exit code. */
static int set_up(conform_t *c, const args_t *a)
{
    drths_error_t err;
    bool num = strcmp(a->role, "numerical") == 0;
    if (drths_experiment_load(&c->exp, a->experiment, &err) != 0)
        return drths_cli_usage_error(CONFORM_PROG, "%s", err.msg);
    uint8_t link = 0;
    int rc = choose_site(c, a, &link);
    if (rc >= 0)
        return rc;
    if (!a->site && (num ? !a->peer : !a->listen))
        return drths_cli_usage_error(CONFORM_PROG, "--role %s needs %s HOST:PORT", a->role,
                                     num ? "--peer" : "--listen");
    const char *key = a->key ? a->key : c->exp.link.key_path;
    if (drths_crypto_init() != 0)
        return drths_cli_error(CONFORM_PROG, "libsodium failed to initialise");
    if (key && drths_key_load(c->psk, key, &err) != 0)
        return drths_cli_usage_error(CONFORM_PROG, "--key: %s", err.msg);
    if (!key)
        drths_key_rehearsal(c->psk);
    if (drths_hello_init(&c->hello, &c->exp, num ? DRTHS_ROLE_NUMERICAL : DRTHS_ROLE_PHYSICAL, link,
                         &err) != 0)
        return drths_cli_error(CONFORM_PROG, "%s", err.msg);
    const char *addr = num ? (a->peer ? a->peer : c->site_address)
                           : (a->listen ? a->listen : c->exp.physical.listen);
    if (drths_addr_parse(&c->peer, addr, num ? "--peer" : "--listen", &err) != 0)
        return drths_cli_usage_error(CONFORM_PROG, "%s", err.msg);
    drths_addr_format(&c->peer, c->peer_text, sizeof c->peer_text);
    if (drths_udp_open(&c->udp, num ? NULL : &c->peer, &c->peer, &err) != 0 ||
        (num && drths_udp_open(&c->udp2, NULL, &c->peer, &err) != 0))
        return drths_cli_error(CONFORM_PROG, "%s", err.msg);
    c->msg = calloc(1, sizeof *c->msg);
    if (!c->msg)
        return drths_cli_error(CONFORM_PROG, "out of memory");
    return -1;
}

int main(int argc, char **argv)
{
    static conform_t c;
    args_t a = {0};
    c.link = -1;
    c.udp.fd = c.udp2.fd = -1;
    c.run_ticks = 1000;
    c.timeout_s = 30;
    argv[0] = (char *)CONFORM_PROG; /* getopt names the program in its messages from argv[0] */
    int rc = parse(argc, argv, &c, &a);
    if (rc < 0)
        rc = set_up(&c, &a);
    if (rc >= 0) {
        drths_experiment_close(&c.exp);
        return rc;
    }
    char id[17];
    drths_key_id(c.psk, id);
    char site[DRTHS_SITE_NAME_MAX + 32] = "";
    if (c.exp.site)
        snprintf(site, sizeof site, ", site %s, link %d", c.exp.site->name, c.link);
    printf("drths-conform %s: %s role against %s (experiment %s%s, key id %s)\n", drths_version(),
           a.role, c.peer_text, a.experiment, site, id);
    if (strcmp(a.role, "numerical") == 0)
        conform_run_numerical(&c);
    else
        conform_run_physical(&c);
    printf("summary: %d passed, %d failed, %d skipped\n", c.pass, c.fail, c.skip);
    if (c.udp.fd >= 0)
        drths_udp_close(&c.udp);
    if (c.udp2.fd >= 0)
        drths_udp_close(&c.udp2);
    free(c.msg);
    drths_experiment_close(&c.exp);
    return c.fail ? DRTHS_EXIT_FAILED : DRTHS_EXIT_OK;
}
