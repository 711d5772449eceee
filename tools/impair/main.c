/* drths-impair: a user-space UDP impairment relay with netem's vocabulary.
 *
 *   drths-impair --listen HOST:PORT --target HOST:PORT
 *                [--forward "NETEM OPTIONS"] [--backward "NETEM OPTIONS"] [--seed N]
 *                [--stats FILE] [--duration S] [--report-interval S]
 *                [--change AT_S:DIRECTION:"OPTIONS"]... [--source HOST:PORT]
 *                [--pool N] [--max-datagram BYTES] [--rt-priority N]
 *
 * The numerical site sends to the listen address. Each datagram is impaired by the "forward"
 * spec and sent to the target (the actuator site) from one socket, connected to the target (so
 * only the target's datagrams come back in). Datagrams from the target are impaired by the
 * "backward" spec and sent from the listen socket to the last client address seen (the sender of
 * the most recent datagram on the listen socket): one client at a time, as the two-site protocol
 * needs. Backward datagrams that arrive before any client has spoken are dropped and counted.
 *
 * Each direction's model is seeded from --seed: forward with N, backward with N + 1, so a run can
 * be replayed exactly (the decisions depend only on the seed, the spec and the arrival order).
 * --change replaces a direction's spec AT_S seconds after start, keeping the random stream
 * (like `tc qdisc change`); DIRECTION is forward, backward or both.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/platform/cli.h"
#include "relay.h"

#define PROG "drths-impair"
#define MAX_CHANGES 64
#define MAX_SECONDS 1e7 /* about 116 days */

static void usage(FILE *f)
{
    fputs("usage: " PROG " --listen HOST:PORT --target HOST:PORT\n"
          "                    [--forward \"NETEM OPTIONS\"] [--backward \"NETEM OPTIONS\"]\n"
          "                    [--seed N] [--stats FILE] [--duration S] [--report-interval S]\n"
          "                    [--change AT_S:forward|backward|both:\"OPTIONS\"]...\n"
          "                    [--source HOST:PORT] [--pool N] [--max-datagram BYTES]\n"
          "                    [--rt-priority N]\n"
          "A UDP relay that impairs each direction like netem. The client (numerical site)\n"
          "sends to --listen; datagrams go to --target (actuator site); the target's replies\n"
          "go back to the last client address seen. forward = client -> target,\n"
          "backward = target -> client.\n"
          "\n"
          "  --listen HOST:PORT       where the client sends\n"
          "  --target HOST:PORT       where the datagrams go\n"
          "  --forward \"OPTIONS\"      netem options for client -> target (default none)\n"
          "  --backward \"OPTIONS\"     netem options for target -> client (default none)\n"
          "  --seed N                 seeds: N forward, N + 1 backward (default: the clock)\n"
          "  --stats FILE             write the counters as JSON on exit\n"
          "  --duration S             stop after S seconds (default: at SIGINT or SIGTERM)\n"
          "  --report-interval S      print the counters every S seconds (default: on exit only)\n"
          "  --change AT_S:DIR:\"OPTS\" replace DIR's options AT_S seconds after start\n"
          "  --source HOST:PORT       send to the target from this address\n"
          "  --pool N                 datagrams held per direction, 16 to 4194304 (default 65536)\n"
          "  --max-datagram BYTES     largest datagram relayed, 64 to 65535 (default 2048)\n"
          "  --rt-priority N          SCHED_FIFO priority 1 to 99 of both threads (default none)\n"
          "  -h, --help               print this help and exit\n"
          "  --version                print the version and exit\n"
          "\n"
          "NETEM OPTIONS, e.g.\n"
          "  \"delay 40ms 5ms distribution normal loss 1% duplicate 0.1% reorder 1%\"\n"
          "  \"delay 40ms 5ms loss gemodel 1% 30% 100% 0% rate 10mbit\"\n"
          "Times need a unit (us, ms, s). Jitter reorders packets, as in netem. DIR is forward,\n"
          "backward or both. The same --seed, options and arrival order give the same decisions.\n"
          "\n",
          f);
    drths_cli_print_exit_codes(f, "a socket or the --stats file failed");
}

static int resolve(const char *text, bool passive, struct sockaddr_storage *out, socklen_t *len,
                   char *why, size_t whylen)
{
    char host[256];
    const char *colon;
    const char *port;
    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (!close || close[1] != ':') {
            snprintf(why, whylen, "'%s' is not [IPV6-ADDRESS]:PORT", text);
            return -1;
        }
        size_t n = (size_t)(close - text - 1);
        if (n >= sizeof host)
            n = sizeof host - 1;
        memcpy(host, text + 1, n);
        host[n] = '\0';
        port = close + 2;
    } else {
        colon = strrchr(text, ':');
        if (!colon || colon == text) {
            snprintf(why, whylen, "'%s' is not HOST:PORT", text);
            return -1;
        }
        size_t n = (size_t)(colon - text);
        if (n >= sizeof host)
            n = sizeof host - 1;
        memcpy(host, text, n);
        host[n] = '\0';
        port = colon + 1;
    }
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICSERV};
    if (passive)
        hints.ai_flags |= AI_PASSIVE;
    struct addrinfo *res = NULL;
    int r = getaddrinfo(host, port, &hints, &res);
    if (r != 0) {
        snprintf(why, whylen, "'%s': %s", text, gai_strerror(r));
        return -1;
    }
    memcpy(out, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static const char *addr_str(const struct sockaddr_storage *a, char *buf, size_t len)
{
    char h[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *s = (const void *)a;
        inet_ntop(AF_INET, &s->sin_addr, h, sizeof h);
        port = ntohs(s->sin_port);
        snprintf(buf, len, "%s:%d", h, port);
    } else if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const void *)a;
        inet_ntop(AF_INET6, &s->sin6_addr, h, sizeof h);
        port = ntohs(s->sin6_port);
        snprintf(buf, len, "[%s]:%d", h, port);
    } else {
        snprintf(buf, len, "?");
    }
    return buf;
}

static void tune_socket(int fd)
{
    int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
    /* Room for a burst at thousands of datagrams per second: 4 MiB each way (FORCE works as
     * root; otherwise the kernel caps at net.core.*mem_max, which is fine for light loads). */
    int sz = 4 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof sz) != 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) != 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
}

static uint64_t u64(const relay_counters_t *c, size_t off)
{
    return atomic_load_explicit((_Atomic uint64_t *)((char *)c + off), memory_order_relaxed);
}

#define C(d, f) u64(&(d)->c, offsetof(relay_counters_t, f))
#define I64(d, f) atomic_load_explicit(&(d)->c.f, memory_order_relaxed)

typedef struct view {
    double delay_min_ms, delay_mean_ms, delay_max_ms;
    double late_mean_us, late_p50_us, late_p99_us, late_max_us;
} view_t;

static view_t view_of(relay_dir_t *d)
{
    view_t v = {0};
    uint64_t n = C(d, delay_n);
    if (n) {
        v.delay_min_ms = (double)I64(d, delay_min_ns) / 1e6;
        v.delay_max_ms = (double)I64(d, delay_max_ns) / 1e6;
        v.delay_mean_ms = (double)I64(d, delay_sum_ns) / 1e6 / (double)n;
        v.late_mean_us = (double)I64(d, late_sum_ns) / 1e3 / (double)n;
        v.late_max_us = (double)I64(d, late_max_ns) / 1e3;
        v.late_p50_us = relay_dir_late_us_quantile(d, 0.5);
        v.late_p99_us = relay_dir_late_us_quantile(d, 0.99);
    }
    return v;
}

static void report_text(FILE *f, relay_dir_t *d, double elapsed, double cpu)
{
    view_t v = view_of(d);
    char spec[512];
    drths_impair_spec_format(&d->model.spec, spec, sizeof spec);
    fprintf(f, "drths-impair %s (%s) after %.1f s: spec \"%s\"\n", d->name,
            strcmp(d->name, "forward") == 0 ? "client -> target" : "target -> client", elapsed,
            spec);
    fprintf(f,
            "drths-impair %s: received=%" PRIu64 " forwarded=%" PRIu64 " dropped_random=%" PRIu64
            " dropped_ge=%" PRIu64 " dropped_overflow=%" PRIu64 " dropped_oversize=%" PRIu64
            " dropped_no_client=%" PRIu64 " send_errors=%" PRIu64 " duplicated=%" PRIu64
            " reordered=%" PRIu64 " sent_at_once=%" PRIu64 " corrupted=%" PRIu64
            " pending=%" PRIu64 " pending_max=%" PRIu64 " spec_changes=%" PRIu64
            " delay_ms_min=%.3f delay_ms_mean=%.3f delay_ms_max=%.3f late_us_mean=%.1f"
            " late_us_p50=%.1f late_us_p99=%.1f late_us_max=%.1f cpu_s=%.3f\n",
            d->name, C(d, received), C(d, forwarded), C(d, dropped_random), C(d, dropped_ge),
            C(d, dropped_overflow), C(d, dropped_oversize), C(d, dropped_no_client),
            C(d, send_errors), C(d, duplicated), C(d, reordered), C(d, sent_at_once),
            C(d, corrupted), C(d, pending), C(d, pending_max), C(d, spec_changes),
            v.delay_min_ms, v.delay_mean_ms, v.delay_max_ms, v.late_mean_us, v.late_p50_us,
            v.late_p99_us, v.late_max_us, cpu);
    if (C(d, reorder_untracked))
        fprintf(f, "drths-impair %s: reorder_untracked=%" PRIu64 "\n", d->name,
                C(d, reorder_untracked));
}

static void json_dir(FILE *f, relay_dir_t *d, double cpu)
{
    view_t v = view_of(d);
    char spec[512];
    drths_impair_spec_format(&d->model.spec, spec, sizeof spec);
    fprintf(f, "  \"%s\": {\n    \"spec\": \"%s\",\n", d->name, spec);
    const struct {
        const char *k;
        size_t off;
    } fields[] = {
        {"received", offsetof(relay_counters_t, received)},
        {"bytes_in", offsetof(relay_counters_t, bytes_in)},
        {"forwarded", offsetof(relay_counters_t, forwarded)},
        {"bytes_out", offsetof(relay_counters_t, bytes_out)},
        {"dropped_random", offsetof(relay_counters_t, dropped_random)},
        {"dropped_ge", offsetof(relay_counters_t, dropped_ge)},
        {"dropped_overflow", offsetof(relay_counters_t, dropped_overflow)},
        {"dropped_oversize", offsetof(relay_counters_t, dropped_oversize)},
        {"dropped_no_client", offsetof(relay_counters_t, dropped_no_client)},
        {"send_errors", offsetof(relay_counters_t, send_errors)},
        {"duplicated", offsetof(relay_counters_t, duplicated)},
        {"reordered", offsetof(relay_counters_t, reordered)},
        {"reorder_untracked", offsetof(relay_counters_t, reorder_untracked)},
        {"sent_at_once", offsetof(relay_counters_t, sent_at_once)},
        {"corrupted", offsetof(relay_counters_t, corrupted)},
        {"pending", offsetof(relay_counters_t, pending)},
        {"pending_max", offsetof(relay_counters_t, pending_max)},
        {"spec_changes", offsetof(relay_counters_t, spec_changes)},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        fprintf(f, "    \"%s\": %" PRIu64 ",\n", fields[i].k, u64(&d->c, fields[i].off));
    fprintf(f,
            "    \"delay_ms\": {\"min\": %.6f, \"mean\": %.6f, \"max\": %.6f},\n"
            "    \"late_us\": {\"mean\": %.3f, \"p50\": %.1f, \"p99\": %.1f, \"max\": %.3f},\n"
            "    \"cpu_s\": %.6f\n  }",
            v.delay_min_ms, v.delay_mean_ms, v.delay_max_ms, v.late_mean_us, v.late_p50_us,
            v.late_p99_us, v.late_max_us, cpu);
}

static double process_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static int write_json(const char *path, relay_dir_t *dirs, const double *cpu, double elapsed,
                      uint64_t seed, const char *listen_s, const char *target_s)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -errno;
    fprintf(f,
            "{\n  \"tool\": \"drths-impair\",\n  \"seed\": %" PRIu64 ",\n"
            "  \"listen\": \"%s\",\n  \"target\": \"%s\",\n  \"elapsed_s\": %.6f,\n"
            "  \"process_cpu_s\": %.6f,\n",
            seed, listen_s, target_s, elapsed, process_cpu_s());
    json_dir(f, &dirs[0], cpu[0]);
    fprintf(f, ",\n");
    json_dir(f, &dirs[1], cpu[1]);
    fprintf(f, "\n}\n");
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return -errno;
    return 0;
}

/* parse_options and the other steps of main() return GO_ON when main() should carry on, or the
 * exit code main() returns (0 after --help or --version). */
#define GO_ON (-1)

static const char *const dir_name[2] = {"forward", "backward"};

/* The command line as given, before the specs and the --change arguments are parsed. */
typedef struct options {
    const char *listen_s, *target_s, *source_s, *stats_path;
    const char *spec_text[2]; /* --forward, --backward */
    uint64_t seed;
    bool seed_given;
    double duration, report_every;
    long pool, max_dgram, rt_prio;
    const char *change_args[MAX_CHANGES];
    size_t n_change_args;
} options_t;

/* What the options mean: each direction's spec and scheduled changes, and the seed. */
typedef struct plan {
    drths_impair_spec_t specs[2];
    relay_change_t changes[2][MAX_CHANGES];
    size_t n_changes[2];
    uint64_t seed;
} plan_t;

/* The two sockets: lfd bound to --listen (bound address lb), tfd connected to the target ta
 * from the address tb. */
typedef struct sockets {
    int lfd, tfd;
    struct sockaddr_storage lb, ta, tb;
} sockets_t;

static int parse_options(int argc, char **argv, options_t *opt)
{
    *opt = (options_t){.spec_text = {"", ""}, .pool = 65536, .max_dgram = 2048};
    static const struct option opts[] = {{"listen", required_argument, 0, 'l'},
                                         {"target", required_argument, 0, 't'},
                                         {"source", required_argument, 0, 'S'},
                                         {"forward", required_argument, 0, 'f'},
                                         {"backward", required_argument, 0, 'b'},
                                         {"seed", required_argument, 0, 's'},
                                         {"stats", required_argument, 0, 'j'},
                                         {"duration", required_argument, 0, 'd'},
                                         {"report-interval", required_argument, 0, 'r'},
                                         {"change", required_argument, 0, 'c'},
                                         {"pool", required_argument, 0, 'p'},
                                         {"max-datagram", required_argument, 0, 'm'},
                                         {"rt-priority", required_argument, 0, 'P'},
                                         DRTHS_CLI_OPTIONS_COMMON,
                                         {0, 0, 0, 0}};
    argv[0] = (char *)PROG; /* getopt names the program in its messages from argv[0] */
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        long v;
        switch (o) {
        case 'l':
            opt->listen_s = optarg;
            break;
        case 't':
            opt->target_s = optarg;
            break;
        case 'S':
            opt->source_s = optarg;
            break;
        case 'f':
            opt->spec_text[0] = optarg;
            break;
        case 'b':
            opt->spec_text[1] = optarg;
            break;
        case 's':
            if (drths_cli_long(PROG, "--seed", optarg, 0, LONG_MAX, &v) != 0)
                return DRTHS_EXIT_USAGE;
            opt->seed = (uint64_t)v;
            opt->seed_given = true;
            break;
        case 'j':
            opt->stats_path = optarg;
            break;
        case 'd':
            if (drths_cli_double(PROG, "--duration", optarg, 0.0, MAX_SECONDS, "s", &opt->duration))
                return DRTHS_EXIT_USAGE;
            break;
        case 'r':
            if (drths_cli_double(PROG, "--report-interval", optarg, 0.0, MAX_SECONDS, "s",
                                 &opt->report_every))
                return DRTHS_EXIT_USAGE;
            break;
        case 'c':
            if (opt->n_change_args == MAX_CHANGES)
                return drths_cli_usage_error(PROG, "--change: at most %d of them", MAX_CHANGES);
            opt->change_args[opt->n_change_args++] = optarg;
            break;
        case 'p':
            if (drths_cli_long(PROG, "--pool", optarg, 16, 1L << 22, &opt->pool) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case 'm':
            if (drths_cli_long(PROG, "--max-datagram", optarg, 64, 65535, &opt->max_dgram) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case 'P':
            if (drths_cli_long(PROG, "--rt-priority", optarg, 1, 99, &opt->rt_prio) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        default:
            return drths_cli_other_option(PROG, o, usage);
        }
    }
    if (optind < argc)
        return drths_cli_unexpected_argument(PROG, argv[optind]);
    if (!opt->listen_s || !opt->target_s)
        return drths_cli_usage_error(PROG, "--listen and --target are required (see --help)");
    return GO_ON;
}

/* One --change AT_S:DIRECTION:OPTIONS, appended to the changes of the directions it names. */
static int parse_change(const char *a, plan_t *plan)
{
    drths_error_t err;
    const char *colon = strchr(a, ':');
    char at_s[32];
    size_t al = colon ? (size_t)(colon - a) : 0;
    if (!colon || al >= sizeof at_s)
        return drths_cli_usage_error(PROG,
                                     "--change: '%s' is not AT_S:DIRECTION:OPTIONS, e.g. "
                                     "30:forward:\"delay 70ms 5ms\"",
                                     a);
    memcpy(at_s, a, al);
    at_s[al] = '\0';
    double at;
    if (drths_cli_double(PROG, "--change AT_S", at_s, 0.0, MAX_SECONDS, "s", &at) != 0)
        return DRTHS_EXIT_USAGE;
    const char *dir = colon + 1;
    colon = strchr(dir, ':');
    size_t dl = colon ? (size_t)(colon - dir) : 0;
    bool f = dl == 7 && !strncmp(dir, "forward", 7);
    bool b = dl == 8 && !strncmp(dir, "backward", 8);
    bool both = dl == 4 && !strncmp(dir, "both", 4);
    if (!colon || !(f || b || both))
        return drths_cli_usage_error(PROG,
                                     "--change: '%s': the direction is not forward, "
                                     "backward or both",
                                     a);
    drths_impair_spec_t s;
    if (drths_impair_spec_parse(&s, colon + 1, &err) != 0)
        return drths_cli_usage_error(PROG, "--change: '%s': %s", a, err.msg);
    for (int k = 0; k < 2; k++) {
        if (!(both || (k == 0 && f) || (k == 1 && b)))
            continue;
        relay_change_t *c = &plan->changes[k][plan->n_changes[k]++];
        c->at_ns = (int64_t)(at * 1e9);
        c->spec = s;
        snprintf(c->text, sizeof c->text, "%s", colon + 1);
    }
    return GO_ON;
}

/* The specs and the changes, checked before anything is opened, and the seed. */
static int make_plan(const options_t *opt, plan_t *plan)
{
    drths_error_t err;
    for (int k = 0; k < 2; k++) {
        if (drths_impair_spec_parse(&plan->specs[k], opt->spec_text[k], &err) != 0)
            return drths_cli_usage_error(PROG, "--%s: '%s': %s", dir_name[k], opt->spec_text[k],
                                         err.msg);
    }
    for (size_t i = 0; i < opt->n_change_args; i++) {
        int r = parse_change(opt->change_args[i], plan);
        if (r != GO_ON)
            return r;
    }
    for (int k = 0; k < 2; k++) { /* stable sort by time: later options win at equal times */
        relay_change_t *ch = plan->changes[k];
        for (size_t i = 1; i < plan->n_changes[k]; i++)
            for (size_t j = i; j > 0 && ch[j - 1].at_ns > ch[j].at_ns; j--) {
                relay_change_t t = ch[j];
                ch[j] = ch[j - 1];
                ch[j - 1] = t;
            }
    }
    plan->seed = opt->seed;
    if (!opt->seed_given) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        plan->seed =
            (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
        /* printed at start-up; --seed must take it back to replay the run */
        plan->seed &= (uint64_t)LONG_MAX;
    }
    return GO_ON;
}

static int open_sockets(const options_t *opt, sockets_t *sk)
{
    struct sockaddr_storage la, sa;
    socklen_t ll, tl, sl = 0;
    char why[512];
    if (resolve(opt->listen_s, true, &la, &ll, why, sizeof why) != 0)
        return drths_cli_usage_error(PROG, "--listen: %s", why);
    if (resolve(opt->target_s, false, &sk->ta, &tl, why, sizeof why) != 0)
        return drths_cli_usage_error(PROG, "--target: %s", why);
    if (opt->source_s && resolve(opt->source_s, true, &sa, &sl, why, sizeof why) != 0)
        return drths_cli_usage_error(PROG, "--source: %s", why);
    if (opt->source_s && sa.ss_family != sk->ta.ss_family)
        return drths_cli_usage_error(PROG, "--source and --target must be of the same family");
    sk->lfd = socket(la.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sk->tfd = socket(sk->ta.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (sk->lfd < 0 || sk->tfd < 0)
        return drths_cli_error(PROG, "socket: %s", strerror(errno));
    if (bind(sk->lfd, (struct sockaddr *)&la, ll) != 0)
        return drths_cli_error(PROG, "cannot listen on %s: %s", opt->listen_s, strerror(errno));
    if (opt->source_s && bind(sk->tfd, (struct sockaddr *)&sa, sl) != 0)
        return drths_cli_error(PROG, "cannot bind --source %s: %s", opt->source_s, strerror(errno));
    if (connect(sk->tfd, (struct sockaddr *)&sk->ta, tl) != 0)
        return drths_cli_error(PROG, "cannot connect to target %s: %s", opt->target_s,
                               strerror(errno));
    tune_socket(sk->lfd);
    tune_socket(sk->tfd);
    socklen_t lbl = sizeof sk->lb, tbl = sizeof sk->tb;
    getsockname(sk->lfd, (struct sockaddr *)&sk->lb, &lbl);
    getsockname(sk->tfd, (struct sockaddr *)&sk->tb, &tbl);
    return GO_ON;
}

/* forward reads the listen socket and writes to the target; backward the other way round. The
 * directions keep pointers to peer and to the plan's changes while they run. */
static int setup_dirs(relay_dir_t *dirs, relay_peer_t *peer, const options_t *opt, plan_t *plan,
                      const sockets_t *sk)
{
    for (int k = 0; k < 2; k++) {
        int r = relay_dir_init(&dirs[k], dir_name[k], (uint32_t)opt->pool, (size_t)opt->max_dgram);
        if (r == 0)
            r = drths_impair_init(&dirs[k].model, &plan->specs[k], plan->seed + (uint64_t)k);
        if (r != 0)
            return drths_cli_error(PROG, "cannot set up the %s direction: %s", dir_name[k],
                                   strerror(-r));
        dirs[k].peer = peer;
        dirs[k].changes = plan->changes[k];
        dirs[k].n_changes = plan->n_changes[k];
        dirs[k].limit_default = (uint32_t)opt->pool;
        dirs[k].rt_priority = (int)opt->rt_prio;
    }
    dirs[0].in_fd = sk->lfd;
    dirs[0].out_fd = sk->tfd;
    dirs[0].out_connected = true;
    dirs[0].record_peer = true;
    dirs[1].in_fd = sk->tfd;
    dirs[1].out_fd = sk->lfd;
    return GO_ON;
}

/* The start-up lines; lbuf and tbuf receive the listen and target addresses for --stats. */
static void print_banner(const plan_t *plan, const sockets_t *sk, char *lbuf, char *tbuf,
                         size_t buflen)
{
    char sbuf[80], fspec[512], bspec[512];
    addr_str(&sk->lb, lbuf, buflen);
    addr_str(&sk->ta, tbuf, buflen);
    addr_str(&sk->tb, sbuf, sizeof sbuf);
    drths_impair_spec_format(&plan->specs[0], fspec, sizeof fspec);
    drths_impair_spec_format(&plan->specs[1], bspec, sizeof bspec);
    printf("drths-impair: listening on %s, forwarding to %s from %s, seed %" PRIu64 "\n", lbuf,
           tbuf, sbuf, plan->seed);
    printf("drths-impair: forward \"%s\"; backward \"%s\"\n", fspec, bspec);
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < plan->n_changes[k]; i++)
            printf("drths-impair: at %.3f s, %s becomes \"%s\"\n",
                   (double)plan->changes[k][i].at_ns / 1e9, dir_name[k], plan->changes[k][i].text);
}

static int start_dirs(relay_dir_t *dirs, int64_t t0)
{
    for (int k = 0; k < 2; k++) {
        int r = relay_dir_start(&dirs[k], t0);
        if (r != 0) {
            fprintf(stderr, PROG ": cannot start the %s thread: %s\n", dir_name[k], strerror(-r));
            relay_dir_stop(&dirs[0]);
            return 1;
        }
        if (dirs[k].rt_refused) {
            drths_cli_warning(PROG,
                              "SCHED_FIFO refused for the %s thread; running at normal "
                              "priority",
                              dir_name[k]);
        }
    }
    return GO_ON;
}

/* Waits for the end of --duration, a signal in sigs or a thread's error, printing the counters
 * every --report-interval; returns why it stopped. */
static const char *run(relay_dir_t *dirs, const options_t *opt, int64_t t0, const sigset_t *sigs)
{
    double report_every = opt->report_every;
    int64_t end_ns = opt->duration > 0 ? t0 + (int64_t)(opt->duration * 1e9) : INT64_MAX;
    int64_t next_report = report_every > 0 ? t0 + (int64_t)(report_every * 1e9) : INT64_MAX;
    for (;;) {
        int64_t now = relay_now_ns();
        if (dirs[0].thread_error || dirs[1].thread_error)
            return "socket error";
        if (now >= end_ns)
            return "duration reached";
        if (now >= next_report) {
            double el = (double)(now - t0) / 1e9;
            for (int k = 0; k < 2; k++)
                report_text(stdout, &dirs[k], el, relay_dir_cpu_s(&dirs[k]));
            next_report += (int64_t)(report_every * 1e9);
            continue;
        }
        int64_t wait = end_ns < next_report ? end_ns - now : next_report - now;
        if (wait > 1000000000)
            wait = 1000000000; /* also notices thread errors within a second */
        struct timespec to = {.tv_sec = wait / 1000000000, .tv_nsec = wait % 1000000000};
        int s = sigtimedwait(sigs, NULL, &to);
        if (s == SIGINT || s == SIGTERM)
            return s == SIGINT ? "SIGINT" : "SIGTERM";
    }
}

/* Stops both directions; cpu receives each one's CPU time. Returns the seconds since t0. */
static double stop_dirs(relay_dir_t *dirs, double *cpu, int64_t t0)
{
    for (int k = 0; k < 2; k++)
        cpu[k] = relay_dir_cpu_s(&dirs[k]);
    for (int k = 0; k < 2; k++)
        relay_dir_stop(&dirs[k]);
    return (double)(relay_now_ns() - t0) / 1e9;
}

/* The final counters, any thread's error and --stats; returns the exit code. */
static int print_summary(relay_dir_t *dirs, const options_t *opt, uint64_t seed, const double *cpu,
                         double elapsed, const char *why_stop, const char *lbuf, const char *tbuf)
{
    printf("drths-impair: stopping (%s)\n", why_stop);
    for (int k = 0; k < 2; k++)
        report_text(stdout, &dirs[k], elapsed, cpu[k]);
    printf("drths-impair: process_cpu_s=%.3f elapsed_s=%.3f\n", process_cpu_s(), elapsed);
    int rc = 0;
    for (int k = 0; k < 2; k++) {
        if (dirs[k].thread_error) {
            fprintf(stderr, PROG ": the %s thread stopped: %s\n", dir_name[k],
                    strerror(-dirs[k].thread_error));
            rc = 1;
        }
    }
    if (opt->stats_path) {
        int r = write_json(opt->stats_path, dirs, cpu, elapsed, seed, lbuf, tbuf);
        if (r != 0) {
            fprintf(stderr, PROG ": cannot write --stats %s: %s\n", opt->stats_path, strerror(-r));
            rc = 1;
        }
    }
    return rc;
}

int main(int argc, char **argv)
{
    /* Static: the relay threads hold pointers into them until the end. */
    static options_t opt;
    static plan_t plan;
    static relay_dir_t dirs[2];
    static relay_peer_t peer = RELAY_PEER_INIT;
    sockets_t sk;

    int r = parse_options(argc, argv, &opt);
    if (r != GO_ON)
        return r;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((r = make_plan(&opt, &plan)) != GO_ON || (r = open_sockets(&opt, &sk)) != GO_ON ||
        (r = setup_dirs(dirs, &peer, &opt, &plan, &sk)) != GO_ON)
        return r;

    /* Signals go to the main thread only: block them before the threads are created. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);

    char lbuf[80], tbuf[80];
    print_banner(&plan, &sk, lbuf, tbuf, sizeof lbuf);
    int64_t t0 = relay_now_ns();
    if ((r = start_dirs(dirs, t0)) != GO_ON)
        return r;
    const char *why_stop = run(dirs, &opt, t0, &sigs);
    double cpu[2];
    double elapsed = stop_dirs(dirs, cpu, t0);
    int rc = print_summary(dirs, &opt, plan.seed, cpu, elapsed, why_stop, lbuf, tbuf);
    for (int k = 0; k < 2; k++)
        relay_dir_close(&dirs[k]);
    close(sk.lfd);
    close(sk.tfd);
    return rc;
}
