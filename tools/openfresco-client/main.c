/* drths-openfresco-client: an OpenSees-style analysis client for a drths actuator site started
 * with --openfresco, speaking the OpenFresco wire protocol (docs/openfresco.md; the codec is
 * site-physical/openfresco.h).
 *
 * It integrates the canonical three-storey shear building (floor masses 5.0e4 kg, storey
 * stiffnesses 73.955 / 100.51 / 85.74 MN/m, 2 % mass-proportional damping in the first mode)
 * under a ground-motion record with the explicit central-difference method, one analysis step
 * of --dt per trial, as OpenSees with an explicit integrator does in a hybrid test. The specimen
 * sits in the first storey: each step's trial displacement is the first-storey drift, and the
 * measured force the site returns acts between the ground and floor 1 in the next step. With
 * --dof N (2 or 3) a specimen sits in each of the first N storeys: the trial displacement vector
 * is the drifts of storeys 1..N, element i for the site's actuator channel i + 1, and each
 * measured force acts between the floors of its storey (as genericClient -dof 1 .. N).
 *
 * With --repeat-trials it speaks as OpenSees's genericClient element does with an explicit
 * integrator: its sizes, and per step the previous trial repeated with getForce, then the new
 * trial and commitState (two trials per step, the first a repeat); with --iterations K, as with
 * an implicit integrator: K + 1 new trials per step, each answered, before the commit.
 * --iterations K also goes with the ShadowSite and GenericTCP variants: K answered trials
 * converging on each step's target before it (ShadowSite then commits). With --send-time the
 * GenericTCP variant declares and sends the analysis time in its trials, as GenericTCP does
 * with the time mode of -ctrlModes on (the same time for every trial of a step); without it it
 * sends none (-ctrlModes 1 0 0 0 0). --first-target-delay S waits S seconds after the set-up
 * before the first trial, as GenericTCP does while its operator answers its prompts.
 *
 * Per step it measures the tracking error (measured minus target displacement) and the time
 * between consecutive answers; at the end it prints the tracking RMS error norm and the
 * protocol overhead: total wall time minus steps × --step-duration (the site's setting, which
 * this tool only uses for the arithmetic). With --verbose, one line per step. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/models/groundmotion.h"
#include "common/platform/cli.h"
#include "common/platform/error.h"
#include "common/platform/rtclock.h"
#include "common/platform/tcp.h"
#include "common/platform/stats.h"
#include "site-physical/openfresco.h"

#define PROG "drths-openfresco-client"
#define DS 256
#define MAX_STEPS 1000000000L
#define NF 3
#define MAXN NF /* --dof: at most one specimen per storey */

static uint8_t buf[8 * DS + 64];

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " --connect HOST:PORT --record FILE [--variant shadow|generic]\n"
            "                               [--steps N] [--dt S] [--scale F] [--step-duration S]\n"
            "                               [--repeat-trials] [--iterations K] [--send-time]\n"
            "                               [--first-target-delay S] [--dof N] [--verbose]\n"
            "Integrates the three-storey shear building under a ground-motion record as an\n"
            "OpenSees analysis does, with a drths-physical --openfresco site as the first storey,\n"
            "and prints the tracking error and the protocol overhead.\n"
            "\n"
            "  --connect HOST:PORT  the drths-physical --openfresco address\n"
            "  --record FILE        ground-motion record (PEER AT2 or columns, in g)\n"
            "  --variant V          shadow (expSite ShadowSite, default) or generic (GenericTCP)\n"
            "  --steps N            analysis steps, 1 to %ld (default: the whole record)\n"
            "  --dt S               analysis time step in seconds (default 0.01)\n"
            "  --scale F            record scale factor (default 1)\n"
            "  --step-duration S    the site's --step-duration, for the overhead (default 0.01)\n"
            "  --repeat-trials      speak as OpenSees's genericClient element (generic variant):\n"
            "                       each trial sent twice (the repeat with getForce), a commit\n"
            "                       per step; no tracking (genericClient measures force only)\n"
            "  --iterations K       K iterations per step (K + 1 new trials converging on the\n"
            "                       step's target, each answered), as an implicit integrator's\n"
            "                       Newton iterations (default 0)\n"
            "  --send-time          generic variant: declare and send the analysis time in the\n"
            "                       trials, the same for every trial of a step (as GenericTCP\n"
            "                       with -ctrlModes 1 0 0 0 1)\n"
            "  --first-target-delay S  wait S seconds after the set-up before the first trial\n"
            "                       (as GenericTCP while its operator answers its prompts)\n"
            "  --dof N              a specimen in each of the first N storeys (1 to 3, default 1):\n"
            "                       trial vectors of N drifts, one per actuator channel of the\n"
            "                       site (its physical.channels, in order)\n"
            "  --verbose            one line per step: the step, then per DOF target, measured,\n"
            "                       error and force (--repeat-trials: next target, current\n"
            "                       drift and its force), then the interval in ms; the values\n"
            "                       with 17 digits, so they read back exactly\n"
            "  -h, --help           print this help and exit\n"
            "  --version            print the version and exit\n"
            "\n",
            MAX_STEPS);
    drths_cli_print_exit_codes(f, "the site could not be reached, closed the connection early, or "
                                  "answered NaN (it ended the session: HOLD)");
}

/* 0 when all n bytes arrived, -1 on an error or a connection closed first. */
static int recv_all(int fd, uint8_t *b, size_t n)
{
    return drths_tcp_recv(fd, b, n, 0) == (ssize_t)n ? 0 : -1;
}

static int send_vec(int fd, const double *v, size_t nv)
{
    size_t n = drths_ofr_build_vector(v, nv, DS, buf, sizeof buf);
    return drths_tcp_send_all(fd, buf, n);
}

static int recv_vec(int fd, double *v)
{
    if (recv_all(fd, buf, 8 * DS) != 0)
        return -1;
    memcpy(v, buf, 8 * DS);
    return 0;
}

static int connect_to(const char *hostport)
{
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || (size_t)(colon - hostport) >= sizeof host)
        return -1;
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = '\0';
    struct addrinfo hints, *res;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
        return -1;
    int fd = socket(res->ai_family, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    return fd;
}

/* parse_options and the other steps of main() return GO_ON when main() should carry on, or the
 * exit code main() returns (0 after --help or --version). */
#define GO_ON (-1)

typedef struct options {
    const char *connect_s, *record;
    int shadow, verbose, repeat, send_time;
    long iterations;
    double first_delay; /* s before the first trial */
    long dof;   /* specimens, in storeys 1..dof */
    long steps; /* -1 until the record is loaded: then the whole record */
    double dt, scale, step_dur;
} options_t;

/* What the run measured, for the summary. gap[0..done) are the per-step intervals minus
 * --step-duration, sorted once the run is over. */
typedef struct result {
    double *gap;
    long done;
    double sum_e2, sum_t2, max_e, wall;
    double ch_e2[MAXN], ch_t2[MAXN]; /* per DOF */
} result_t;

static int parse_options(int argc, char **argv, options_t *opt)
{
    enum {
        OPT_CONNECT = 1,
        OPT_RECORD,
        OPT_VARIANT,
        OPT_STEPS,
        OPT_DT,
        OPT_SCALE,
        OPT_STEP_DURATION,
        OPT_VERBOSE,
        OPT_REPEAT,
        OPT_ITERATIONS,
        OPT_DOF,
        OPT_SEND_TIME,
        OPT_FIRST_DELAY
    };
    static const struct option opts[] = {
        {"connect", required_argument, NULL, OPT_CONNECT},
        {"record", required_argument, NULL, OPT_RECORD},
        {"variant", required_argument, NULL, OPT_VARIANT},
        {"steps", required_argument, NULL, OPT_STEPS},
        {"dt", required_argument, NULL, OPT_DT},
        {"scale", required_argument, NULL, OPT_SCALE},
        {"step-duration", required_argument, NULL, OPT_STEP_DURATION},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"repeat-trials", no_argument, NULL, OPT_REPEAT},
        {"iterations", required_argument, NULL, OPT_ITERATIONS},
        {"dof", required_argument, NULL, OPT_DOF},
        {"send-time", no_argument, NULL, OPT_SEND_TIME},
        {"first-target-delay", required_argument, NULL, OPT_FIRST_DELAY},
        DRTHS_CLI_OPTIONS_COMMON,
        {NULL, 0, NULL, 0},
    };
    static const char *const variants[] = {"shadow", "generic", NULL};
    *opt =
        (options_t){.shadow = 1, .steps = -1, .dt = 0.01, .scale = 1.0, .step_dur = 0.01, .dof = 1};
    argv[0] = (char *)PROG; /* getopt names the program in its messages from argv[0] */
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_CONNECT:
            opt->connect_s = optarg;
            break;
        case OPT_RECORD:
            opt->record = optarg;
            break;
        case OPT_VARIANT: {
            int i = drths_cli_choice(PROG, "--variant", optarg, variants);
            if (i < 0)
                return DRTHS_EXIT_USAGE;
            opt->shadow = i == 0;
            break;
        }
        case OPT_STEPS:
            if (drths_cli_long(PROG, "--steps", optarg, 1, MAX_STEPS, &opt->steps) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_DT:
            if (drths_cli_positive(PROG, "--dt", optarg, "seconds", &opt->dt) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_SCALE:
            if (drths_cli_positive(PROG, "--scale", optarg, NULL, &opt->scale) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_STEP_DURATION:
            if (drths_cli_positive(PROG, "--step-duration", optarg, "seconds", &opt->step_dur) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_VERBOSE:
            opt->verbose = 1;
            break;
        case OPT_REPEAT:
            opt->repeat = 1;
            break;
        case OPT_ITERATIONS:
            if (drths_cli_long(PROG, "--iterations", optarg, 0, 100, &opt->iterations) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_DOF:
            if (drths_cli_long(PROG, "--dof", optarg, 1, MAXN, &opt->dof) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_SEND_TIME:
            opt->send_time = 1;
            break;
        case OPT_FIRST_DELAY:
            if (drths_cli_positive(PROG, "--first-target-delay", optarg, "seconds",
                                   &opt->first_delay) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        default:
            return drths_cli_other_option(PROG, c, usage);
        }
    }
    if (optind < argc)
        return drths_cli_unexpected_argument(PROG, argv[optind]);
    if (!opt->connect_s || !opt->record)
        return drths_cli_usage_error(PROG, "--connect and --record are required (see --help)");
    if (opt->repeat && opt->shadow)
        return drths_cli_usage_error(PROG, "--repeat-trials goes with --variant generic");
    if (opt->send_time && (opt->shadow || opt->repeat))
        return drths_cli_usage_error(PROG, "--send-time goes with --variant generic without "
                                           "--repeat-trials (the others send the time anyway)");
    return GO_ON;
}

/* The record, scaled and resampled at --dt; --steps is cut to its length. */
static int load_record(options_t *opt, drths_record_t *rec)
{
    drths_error_t err;
    drths_gm_options_t o;
    drths_gm_options_default(&o);
    o.scale = opt->scale;
    if (drths_record_load(rec, opt->record, &o, &err) != 0 ||
        drths_record_resample(rec, rec, opt->dt, 0.0, &err) != 0) {
        return drths_cli_usage_error(PROG, "--record: %s", err.msg);
    }
    if (opt->steps < 0 || (size_t)opt->steps > rec->n)
        opt->steps = (long)rec->n;
    return GO_ON;
}

/* The opening exchange of the variant: ShadowSite's hello, open and setup, or GenericTCP's ID. */
static int handshake(int fd, int shadow, int repeat, int send_time, int ndof)
{
    double v[DS];
    if (shadow) {
        int32_t one = 1, back = 0;
        const double open[3] = {1.0, 1.0, 2.8};
        const double setup[2] = {2.0, DS};
        const int32_t sizes[10] = {ndof, 0, 0, 0, 1, ndof, 0, 0, ndof, 1};
        if (drths_tcp_send_all(fd, (uint8_t *)&one, 4) || recv_all(fd, (uint8_t *)&back, 4) ||
            back != 1 || send_vec(fd, open, 3) || recv_vec(fd, v) || v[2] != 2.8)
            return drths_cli_error(PROG, "ShadowSite handshake failed");
        size_t n = drths_ofr_build_vector(setup, 2, DS, buf, sizeof buf);
        n += drths_ofr_build_ids(sizes, 10, buf + n, sizeof buf - n);
        if (drths_tcp_send_all(fd, buf, n))
            return drths_cli_error(PROG, "setup failed");
    } else if (repeat) {
        /* genericClient's sizes: trial disp, vel, accel and time; force measured. */
        const int32_t id[11] = {ndof, ndof, ndof, 0, 1, 0, 0, 0, ndof, 0, DS};
        size_t n = drths_ofr_build_ids(id, 11, buf, sizeof buf);
        if (drths_tcp_send_all(fd, buf, n))
            return drths_cli_error(PROG, "ID failed");
    } else {
        const int32_t id[11] = {ndof, 0, 0, 0, send_time, ndof, 0, 0, ndof, 0, DS};
        size_t n = drths_ofr_build_ids(id, 11, buf, sizeof buf);
        if (drths_tcp_send_all(fd, buf, n))
            return drths_cli_error(PROG, "ID failed");
    }
    return GO_ON;
}

/* The structure: diagonal M, tridiagonal K, C = a0·M (2 % in the first mode, 2.88 Hz). */
static const double mass[NF] = {5.0e4, 5.0e4, 5.0e4};
static const double storey_k[NF] = {7.3955e7, 1.00510e8, 8.5740e7};

/* One central-difference step: xnext from x, xprev, the ground acceleration ag and the measured
 * specimen forces: fspec[i] (i < n) is the specimen's in storey i + 1, acting on floor i + 1
 * (against its drift) and on the floor below it (with it). */
static void central_difference(const double *x, const double *xprev, double *xnext, double ag,
                               const double *fspec, int n, double dt)
{
    const double a0 = 2.0 * 0.02 * 2.0 * M_PI * 2.88;
    /* Central difference: (M/dt^2 + C/2dt) x+ = p - K x - r + (2M/dt^2) x - (M/dt^2 - C/2dt)
     * x-. */
    for (int i = 0; i < NF; i++) {
        double kx = storey_k[i] * (x[i] - (i ? x[i - 1] : 0.0));
        if (i + 1 < NF)
            kx -= storey_k[i + 1] * (x[i + 1] - x[i]);
        double p = -mass[i] * ag - kx - (i < n ? fspec[i] : 0.0) + (i + 1 < n ? fspec[i + 1] : 0.0);
        double lhs = mass[i] / (dt * dt) + a0 * mass[i] / (2.0 * dt);
        xnext[i] = (p + 2.0 * mass[i] / (dt * dt) * x[i] -
                    (mass[i] / (dt * dt) - a0 * mass[i] / (2.0 * dt)) * xprev[i]) /
                   lhs;
    }
}

/* The drifts of storeys 1..n: the trial displacement vector. */
static void drifts(const double *x, int n, double *d)
{
    for (int i = 0; i < n; i++)
        d[i] = x[i] - (i ? x[i - 1] : 0.0);
}

/* Whether all n values are finite: a site that has ended the session (HOLD) answers every
 * request with NaN until the client sends DIE. */
static int all_finite(const double *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return 0;
    return 1;
}

/* What a step's exchange ended with. */
enum { EXCHANGE_OK = 0, EXCHANGE_CLOSED = -1, EXCHANGE_NAN = -2 };

static void say_why(int rc, long step)
{
    if (rc == EXCHANGE_NAN)
        fprintf(stderr,
                PROG ": the site answered NaN at step %ld: it ended the session (HOLD); "
                     "ending with DIE\n",
                step);
    else
        fprintf(stderr, PROG ": the site closed the connection at step %ld\n", step);
}

/* A trial [3, d[0..n), t] (t only when the client declared a time: ShadowSite, GenericTCP with
 * --send-time) and a getDaqResponse, whose answer (v) holds the n measured displacements, then
 * the n forces. Returns EXCHANGE_OK, _CLOSED or _NAN. */
static int trial_daq(int fd, const double *d, int n, int with_time, double t, double *v)
{
    double trial[2 + MAXN] = {3.0};
    memcpy(trial + 1, d, (size_t)n * sizeof *d);
    trial[1 + n] = t;
    const double daq[1] = {6.0};
    if (send_vec(fd, trial, 1 + (size_t)n + (with_time ? 1 : 0)) || send_vec(fd, daq, 1) ||
        recv_vec(fd, v))
        return EXCHANGE_CLOSED;
    return all_finite(v, 2 * n) ? EXCHANGE_OK : EXCHANGE_NAN;
}

/* The analysis: one trial per step (after --iterations answered trials converging on it) until
 * --steps or until the site stops answering, then the closing message. */
static int run(int fd, const options_t *opt, const drths_record_t *rec, result_t *res)
{
    const double dt = opt->dt;
    const int shadow = opt->shadow, n = (int)opt->dof;
    double v[DS];
    double x[NF] = {0}, xprev[NF] = {0}, xnext[NF];
    double fspec[MAXN] = {0};
    *res = (result_t){0};
    double *gap = res->gap = malloc((size_t)opt->steps * sizeof *gap);
    if (!gap)
        return drths_cli_error(PROG, "no memory for %ld steps", opt->steps);
    const int with_time = shadow || opt->send_time;
    if (opt->first_delay > 0.0)
        drths_sleep_until_ns(drths_now_ns() + (int64_t)(opt->first_delay * 1e9));
    int64_t t0 = drths_now_ns(), tprev = t0;
    long done = 0;
    for (long k = 0; k < opt->steps; k++) {
        central_difference(x, xprev, xnext, rec->ag_m_s2[k], fspec, n, dt);
        double target[MAXN], d[MAXN], di[MAXN], t = (double)(k + 1) * dt;
        drifts(xnext, n, target);
        drifts(x, n, d);
        int rc = EXCHANGE_OK;
        /* Iterates d_i = target + (d - target) (-1/2)^i, i = K .. 1, then the target itself. */
        for (long i = opt->iterations; i >= 1 && rc == EXCHANGE_OK; i--) {
            for (int c = 0; c < n; c++)
                di[c] = target[c] + (d[c] - target[c]) * pow(-0.5, (double)i);
            rc = trial_daq(fd, di, n, with_time, t, v);
        }
        if (rc == EXCHANGE_OK)
            rc = trial_daq(fd, target, n, with_time, t, v);
        if (rc != EXCHANGE_OK) {
            say_why(rc, k + 1);
            break;
        }
        int64_t now = drths_now_ns();
        gap[done] = (double)(now - tprev) * 1e-9 - opt->step_dur;
        tprev = now;
        if (shadow) {
            const double commit[2] = {5.0, (double)(k + 1) * dt};
            send_vec(fd, commit, 2);
        }
        if (opt->verbose)
            printf("%ld", k + 1);
        for (int i = 0; i < n; i++) {
            double meas = v[i], force = v[n + i];
            double e = meas - target[i];
            res->sum_e2 += e * e;
            res->sum_t2 += target[i] * target[i];
            res->ch_e2[i] += e * e;
            res->ch_t2[i] += target[i] * target[i];
            if (fabs(e) > res->max_e)
                res->max_e = fabs(e);
            if (opt->verbose)
                printf(" %.17g %.17g %.3e %.17g", target[i], meas, e, force);
            fspec[i] = force;
        }
        if (opt->verbose)
            printf(" %.3f\n", gap[done] * 1e3);
        memcpy(xprev, x, sizeof x);
        memcpy(x, xnext, sizeof x);
        done++;
    }
    res->wall = (double)(drths_now_ns() - t0) * 1e-9;
    res->done = done;
    const double die[2] = {99.0, 1.0};
    send_vec(fd, die, 2);
    if (shadow)
        (void)recv_vec(fd, v);
    return GO_ON;
}

/* A genericClient trial [3, d(n), v(n), a(n), t] (v and a are not used by the site) and a
 * getForce, whose answer holds the n forces. Returns EXCHANGE_OK, _CLOSED or _NAN. */
static int trial_force(int fd, const double *d, int n, double t, double *force)
{
    double trial[2 + 3 * MAXN] = {3.0};
    memcpy(trial + 1, d, (size_t)n * sizeof *d);
    trial[1 + 3 * n] = t;
    const double get_force[1] = {10.0};
    double v[DS];
    if (send_vec(fd, trial, 2 + 3 * (size_t)n) || send_vec(fd, get_force, 1) || recv_vec(fd, v))
        return EXCHANGE_CLOSED;
    memcpy(force, v, (size_t)n * sizeof *force);
    return all_finite(v, n) ? EXCHANGE_OK : EXCHANGE_NAN;
}

/* The analysis as genericClient sends it: per step the repeat of the current displacement with
 * getForce (the force for this step), the new trial (after --iterations answered trials
 * converging on it, as Newton iterations do) and commitState. */
static int run_repeat(int fd, const options_t *opt, const drths_record_t *rec, result_t *res)
{
    const double dt = opt->dt;
    const int n = (int)opt->dof;
    double x[NF] = {0}, xprev[NF] = {0}, xnext[NF];
    *res = (result_t){0};
    double *gap = res->gap = malloc((size_t)opt->steps * sizeof *gap);
    if (!gap)
        return drths_cli_error(PROG, "no memory for %ld steps", opt->steps);
    int64_t t0 = drths_now_ns(), tprev = t0;
    long done = 0;
    int rc = EXCHANGE_OK;
    for (long k = 0; k < opt->steps; k++) {
        double t = (double)(k + 1) * dt, fspec[MAXN], f[MAXN], d[MAXN], dn[MAXN], di[MAXN];
        drifts(x, n, d);
        if ((rc = trial_force(fd, d, n, t, fspec)) != EXCHANGE_OK)
            break;
        central_difference(x, xprev, xnext, rec->ag_m_s2[k], fspec, n, dt);
        drifts(xnext, n, dn);
        /* Iterates d_i = dnext + (d - dnext) (-1/2)^i, i = K .. 1, then dnext itself. */
        for (long i = opt->iterations; i >= 1 && rc == EXCHANGE_OK; i--) {
            for (int c = 0; c < n; c++)
                di[c] = dn[c] + (d[c] - dn[c]) * pow(-0.5, (double)i);
            rc = trial_force(fd, di, n, t, f);
        }
        if (rc != EXCHANGE_OK)
            break;
        double trial[2 + 3 * MAXN] = {3.0};
        memcpy(trial + 1, dn, (size_t)n * sizeof *dn);
        trial[1 + 3 * n] = t;
        const double commit[1] = {5.0};
        if (send_vec(fd, trial, 2 + 3 * (size_t)n) || send_vec(fd, commit, 1)) {
            rc = EXCHANGE_CLOSED;
            break;
        }
        int64_t now = drths_now_ns();
        gap[done] = (double)(now - tprev) * 1e-9 - opt->step_dur;
        tprev = now;
        if (opt->verbose) {
            printf("%ld", k + 1);
            for (int c = 0; c < n; c++)
                printf(" %.17g %.17g %.17g", dn[c], d[c], fspec[c]);
            printf(" %.3f\n", gap[done] * 1e3);
        }
        memcpy(xprev, x, sizeof x);
        memcpy(x, xnext, sizeof x);
        done++;
    }
    if (done < opt->steps)
        say_why(rc, done + 1);
    res->wall = (double)(drths_now_ns() - t0) * 1e-9;
    res->done = done;
    const double die[2] = {99.0, 1.0};
    send_vec(fd, die, 2);
    return GO_ON;
}

static void print_summary(const options_t *opt, result_t *res)
{
    const long done = res->done;
    const double wall = res->wall, step_dur = opt->step_dur, *gap = res->gap;
    drths_sort_double(res->gap, (size_t)done);
    printf(PROG ": %ld steps (%s), wall %.4f s, configured %.4f s, protocol overhead %.4f s "
                "(%.1f us/step)\n",
           done,
           opt->shadow   ? "ShadowSite"
           : opt->repeat ? "genericClient"
                         : "GenericTCP",
           wall, (double)done * step_dur, wall - (double)done * step_dur,
           done ? (wall - done * step_dur) / done * 1e6 : 0.0);
    if (done)
        printf("  per-step interval minus step duration: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
               gap[done / 2] * 1e3, gap[drths_quantile_rank((size_t)done, 0.99)] * 1e3,
               gap[done - 1] * 1e3);
    if (opt->repeat)
        return; /* genericClient measures force only */
    printf("  tracking at the step ends: RMS error %.3f %% of the RMS target, peak %.4f mm, "
           "RMS target %.4f mm\n",
           res->sum_t2 > 0 ? 100.0 * sqrt(res->sum_e2 / res->sum_t2) : NAN, res->max_e * 1e3,
           done ? sqrt(res->sum_t2 / done) * 1e3 : 0.0);
    for (int i = 0; opt->dof > 1 && i < opt->dof; i++)
        printf("  DOF %d (storey %d): RMS error %.3f %% of the RMS target\n", i + 1, i + 1,
               res->ch_t2[i] > 0 ? 100.0 * sqrt(res->ch_e2[i] / res->ch_t2[i]) : NAN);
}

int main(int argc, char **argv)
{
    options_t opt;
    drths_record_t rec;
    result_t res;
    int rc = parse_options(argc, argv, &opt);
    if (rc == GO_ON)
        rc = load_record(&opt, &rec);
    if (rc != GO_ON)
        return rc;

    int fd = connect_to(opt.connect_s);
    if (fd < 0) {
        drths_record_close(&rec);
        return drths_cli_error(PROG, "cannot connect to %s", opt.connect_s);
    }
    if ((rc = handshake(fd, opt.shadow, opt.repeat, opt.send_time, (int)opt.dof)) != GO_ON ||
        (rc = (opt.repeat ? run_repeat : run)(fd, &opt, &rec, &res)) != GO_ON)
        return rc;
    close(fd);
    print_summary(&opt, &res);
    free(res.gap);
    drths_record_close(&rec);
    return res.done == opt.steps ? DRTHS_EXIT_OK : DRTHS_EXIT_FAILED;
}
