/* drths-bench-step: cost of one numerical step (integrator predict + MR damper + correct)
 * against model size, and whether each size holds a tick rate on the real-time thread.
 *
 * For each size N (shear building of N floors, 2 % modal damping, the 200-kN damper of
 * Phillips & Spencer 2013 at 2.5 A between the ground and floor 1) and each form of the
 * integrator:
 *   full        the n*n Chen-Ricles matrices (O(N^2) per step);
 *   modal       every mode, every DOF's x, v, a updated each step (O(N^2) too, smaller constant);
 *   modal-watch every mode, only the damper's DOF updated each step (O(N)); the full state is
 *               available on demand (drths_integrator_sync);
 * it measures the per-step cost in a tight loop (median and p99 of --steps steps), then runs the
 * step at --rate Hz on this thread with the RT settings (SCHED_FIFO, mlockall, affinity, DMA
 * latency; each reported) for --seconds and counts overruns: ticks whose step finished after
 * the next tick's deadline. A size holds the rate when at most 0.1 % of the ticks overran.
 *
 * Output: one line per figure, "key=value" fields, for tools/bench to tabulate:
 *   rt <the RT report line>
 *   cost n=N form=F median_us=.. p99_us=..
 *   hold n=N form=F rate_hz=.. ticks=.. overruns=.. fraction=.. [stopped=1]
 *   largest form=F rate_hz=.. n=N      (0: none of the sizes held)
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/models/damper.h"
#include "common/models/integrator.h"
#include "common/models/structure.h"
#include "common/platform/cli.h"
#include "common/platform/rt.h"
#include "common/platform/rtclock.h"
#include "common/platform/stats.h"

#define PROG "drths-bench-step"
#define MAX_SIZES 16
#define NFORMS 3

static const char *const form_names[NFORMS + 1] = {"full", "modal", "modal-watch", NULL};

typedef struct model {
    drths_structure_t st;
    drths_integrator_t it;
    drths_damper_t damper;
    double *x1, *v1, *f;
    long k;
} model_t;

static void usage(FILE *f, const drths_rt_options_t *defaults)
{
    fprintf(f,
            "usage: " PROG " [--sizes LIST] [--forms LIST] [--steps N] [--rate HZ] [--seconds S]\n"
            "                        [--priority P] [--cpu N]\n"
            "Per-step cost of the numerical substructure against model size, and the largest\n"
            "size that holds the rate on the real-time thread (at most 0.1 %% of the ticks\n"
            "overrun). One \"key=value\" line per figure, for tools/bench. A size is the\n"
            "number of storeys of a shear building, 1 to 20000; at most %d sizes.\n"
            "\n"
            "  --sizes LIST    sizes to measure, N1,N2,... (default 3,30,100,300,1000)\n"
            "  --forms LIST    full, modal and/or modal-watch (default all three)\n"
            "  --steps N       steps timed in a tight loop per size and form (default 2000)\n"
            "  --rate HZ       tick rate of the hold test (default 5000)\n"
            "  --seconds S     length of the hold test per size and form (default 2)\n"
            "  --priority P    SCHED_FIFO priority 1 to 99, 0 for none (default %d)\n"
            "  --cpu N         pin the thread to CPU N, -1 for none (default %d)\n"
            "  -h, --help      print this help and exit\n"
            "  --version       print the version and exit\n"
            "\n",
            MAX_SIZES, defaults->priority, defaults->cpu);
    drths_cli_print_exit_codes(f, "a model could not be set up");
}

/* --help: the usage with this machine's RT defaults. */
static void help(FILE *f)
{
    drths_rt_options_t d;
    drths_rt_options_default(&d);
    usage(f, &d);
}

static int model_init(model_t *m, int n, int form, double dt)
{
    memset(m, 0, sizeof *m);
    double *mass = malloc((size_t)n * sizeof(double)), *k = malloc((size_t)n * sizeof(double));
    if (!mass || !k)
        return -ENOMEM;
    /* Storey stiffness falls linearly to half at the roof; the first mode stays a few Hz. */
    for (int i = 0; i < n; i++) {
        mass[i] = 5.0e4;
        k[i] = 1.0e8 * (double)n / 3.0 * (1.0 - 0.5 * i / n);
    }
    drths_error_t err;
    int rc = drths_structure_init_shear(&m->st, n, mass, k, &err);
    free(mass), free(k);
    const double z = 0.02;
    if (!rc)
        rc = drths_structure_set_modal_damping(&m->st, &z, 1, &err);
    drths_integrator_options_t o = {form == 0 ? DRTHS_INTEGRATOR_FORM_FULL
                                              : DRTHS_INTEGRATOR_FORM_MODAL,
                                    0};
    if (!rc)
        rc = drths_integrator_init_opts(&m->it, &m->st, DRTHS_INTEGRATOR_CHEN_RICLES, dt, &o, &err);
    if (!rc && form == 2) {
        const int dof0 = 0;
        rc = drths_integrator_watch(&m->it, &dof0, 1);
    }
    drths_damper_params_t dp;
    drths_damper_params_preset(&dp, DRTHS_DAMPER_PHILLIPS2013);
    if (!rc)
        rc = drths_damper_init(&m->damper, &dp, dt, &err);
    if (rc) {
        fprintf(stderr, PROG ": %d DOF: %s\n", n, err.msg);
        return rc;
    }
    m->x1 = calloc((size_t)n, sizeof(double));
    m->v1 = calloc((size_t)n, sizeof(double));
    m->f = calloc((size_t)n, sizeof(double));
    if (!m->x1 || !m->v1 || !m->f)
        return -ENOMEM;
    drths_damper_reset(&m->damper, 0.0, 2.5);
    drths_integrator_reset(&m->it, NULL, NULL, 0.0, NULL);
    return 0;
}

/* One step: x(k+1) to the damper, its force back into equilibrium. El Centro-like shaking. */
static void model_step(model_t *m)
{
    drths_integrator_predict(&m->it, m->x1, m->v1);
    m->f[0] = drths_damper_step(&m->damper, m->x1[0], m->v1[0], 2.5);
    m->k++;
    double t = (double)m->k * m->it.dt;
    drths_integrator_correct(&m->it, 3.0 * sin(2 * M_PI * 1.5 * t) * sin(0.3 * t), m->f);
}

static void model_close(model_t *m)
{
    free(m->x1), free(m->v1), free(m->f);
    drths_damper_close(&m->damper);
    drths_integrator_close(&m->it);
    drths_structure_close(&m->st);
}

/* Splits a comma-separated option value into at most max items of at most 31 characters each.
 * Returns the number of items, or -1 after a message naming the option. */
static int split_list(const char *opt, const char *text, char items[][32], int max)
{
    int n = 0;
    for (const char *p = text;; p++) {
        size_t len = strcspn(p, ",");
        if (n == max || len >= 32) {
            fprintf(stderr, PROG ": %s: '%s' is not a list of at most %d items\n", opt, text, max);
            return -1;
        }
        memcpy(items[n], p, len);
        items[n++][len] = '\0';
        p += len;
        if (!*p)
            return n;
    }
}

/* parse_options and the other steps of main() return GO_ON when main() should carry on, or the
 * exit code main() returns (0 after --help or --version). */
#define GO_ON (-1)

typedef struct options {
    int sizes[MAX_SIZES], nsizes;
    int forms[NFORMS]; /* 1 for each form to measure, indexed like form_names */
    long steps;
    double rate, seconds;
    drths_rt_options_t rto;
} options_t;

static int parse_options(int argc, char **argv, options_t *opt)
{
    enum {
        OPT_SIZES = 1,
        OPT_STEPS,
        OPT_RATE,
        OPT_SECONDS,
        OPT_PRIORITY,
        OPT_CPU,
        OPT_FORMS
    };
    static const struct option opts[] = {
        {"sizes", required_argument, NULL, OPT_SIZES},
        {"steps", required_argument, NULL, OPT_STEPS},
        {"rate", required_argument, NULL, OPT_RATE},
        {"seconds", required_argument, NULL, OPT_SECONDS},
        {"priority", required_argument, NULL, OPT_PRIORITY},
        {"cpu", required_argument, NULL, OPT_CPU},
        {"forms", required_argument, NULL, OPT_FORMS},
        DRTHS_CLI_OPTIONS_COMMON,
        {NULL, 0, NULL, 0},
    };
    *opt = (options_t){.sizes = {3, 30, 100, 300, 1000},
                       .nsizes = 5,
                       .forms = {1, 1, 1},
                       .steps = 2000,
                       .rate = 5000.0,
                       .seconds = 2.0};
    long v;
    char items[MAX_SIZES][32];
    drths_rt_options_default(&opt->rto);
    argv[0] = (char *)PROG; /* getopt names the program in its messages from argv[0] */
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_SIZES:
            if ((opt->nsizes = split_list("--sizes", optarg, items, MAX_SIZES)) < 0)
                return DRTHS_EXIT_USAGE;
            for (int i = 0; i < opt->nsizes; i++) {
                if (drths_cli_long(PROG, "--sizes", items[i], 1, 20000, &v) != 0)
                    return DRTHS_EXIT_USAGE;
                opt->sizes[i] = (int)v;
            }
            break;
        case OPT_FORMS: {
            int n = split_list("--forms", optarg, items, MAX_SIZES);
            if (n < 0)
                return DRTHS_EXIT_USAGE;
            memset(opt->forms, 0, sizeof opt->forms);
            for (int i = 0; i < n; i++) {
                int f = drths_cli_choice(PROG, "--forms", items[i], form_names);
                if (f < 0)
                    return DRTHS_EXIT_USAGE;
                opt->forms[f] = 1;
            }
            break;
        }
        case OPT_STEPS:
            if (drths_cli_long(PROG, "--steps", optarg, 10, 100000000, &opt->steps) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_RATE:
            if (drths_cli_double(PROG, "--rate", optarg, 1.0, 1e6, "Hz", &opt->rate) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_SECONDS:
            if (drths_cli_double(PROG, "--seconds", optarg, 0.001, 3600.0, "s", &opt->seconds) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_PRIORITY:
            if (drths_cli_long(PROG, "--priority", optarg, 0, 99, &v) != 0)
                return DRTHS_EXIT_USAGE;
            opt->rto.priority = (int)v;
            break;
        case OPT_CPU:
            if (drths_cli_long(PROG, "--cpu", optarg, -1, 4095, &v) != 0)
                return DRTHS_EXIT_USAGE;
            opt->rto.cpu = (int)v;
            break;
        default:
            return drths_cli_other_option(PROG, c, help);
        }
    }
    if (optind < argc)
        return drths_cli_unexpected_argument(PROG, argv[optind]);
    return GO_ON;
}

/* The RT settings on this thread, one "rt" line per item. */
static int apply_rt(const options_t *opt, drths_rt_report_t *rep)
{
    int rc = drths_rt_apply_thread(&opt->rto, rep);
    for (int i = 0; i < DRTHS_RT_NITEMS; i++) {
        char line[256];
        drths_rt_report_line(rep, i, line, sizeof line);
        printf("rt %s\n", line);
    }
    if (rc) {
        /* Only an invalid request fails here (a priority or CPU this machine does not have): the
         * options are wrong, not the run. */
        drths_rt_report_close(rep);
        return drths_cli_usage_error(PROG, "--priority/--cpu: refused (see the rt lines)");
    }
    return GO_ON;
}

/* The "cost" line: --steps steps timed in a tight loop, t holding one time per step. */
static void measure_cost(model_t *m, int64_t *t, long steps, int size, int form)
{
    for (long k = 0; k < steps / 10; k++) /* warm the caches */
        model_step(m);
    for (long k = 0; k < steps; k++) {
        int64_t t0 = drths_now_ns();
        model_step(m);
        t[k] = drths_now_ns() - t0;
    }
    drths_sort_i64(t, (size_t)steps);
    printf("cost n=%d form=%s median_us=%.3f p99_us=%.3f\n", size, form_names[form],
           (double)t[steps / 2] * 1e-3, (double)t[drths_quantile_rank((size_t)steps, 0.99)] * 1e-3);
    fflush(stdout);
}

/* Hold test: tick at the rate; overrun = the step ends after the next deadline. Prints the
 * "hold" line and returns 1 when the size held the rate. */
static int hold_test(model_t *m, const options_t *opt, int size, int form)
{
    const double rate = opt->rate;
    int64_t dt_ns = (int64_t)llround(1e9 / rate);
    long ticks = (long)llround(opt->seconds * rate), allowed = ticks / 1000, over = 0, done = 0;
    drths_ticker_t tk;
    drths_ticker_init(&tk, dt_ns, drths_now_ns() + 2 * dt_ns, dt_ns / 2, NULL, NULL, NULL);
    int stopped = 0;
    for (done = 0; done < ticks; done++) {
        uint64_t tick;
        while (drths_ticker_wait(&tk, &tick) != 0)
            ;
        model_step(m);
        if (drths_now_ns() > tk.deadline_ns + dt_ns && ++over > allowed) {
            stopped = 1; /* it fails already; do not fall seconds behind */
            done++;
            break;
        }
    }
    double frac = (double)over / (double)(stopped ? ticks : done);
    printf("hold n=%d form=%s rate_hz=%g ticks=%ld overruns=%ld fraction=%.6f%s\n", size,
           form_names[form], rate, done, over, frac, stopped ? " stopped=1" : "");
    fflush(stdout);
    return !stopped && over <= allowed;
}

/* Every size in every form asked for; largest[f] becomes the largest size that held the rate in
 * form f. Returns the exit code. */
static int run(const options_t *opt, int64_t *t, int *largest)
{
    const double dt = 1.0 / opt->rate;
    int status = DRTHS_EXIT_OK;
    for (int si = 0; si < opt->nsizes; si++) {
        const int size = opt->sizes[si];
        for (int f = 0; f < NFORMS; f++) {
            if (!opt->forms[f])
                continue;
            model_t m;
            if (model_init(&m, size, f, dt)) {
                model_close(&m);
                status = DRTHS_EXIT_FAILED;
                continue;
            }
            measure_cost(&m, t, opt->steps, size, f);
            if (hold_test(&m, opt, size, f) && size > largest[f])
                largest[f] = size;
            model_close(&m);
        }
    }
    return status;
}

static void print_summary(const options_t *opt, const int *largest)
{
    for (int f = 0; f < NFORMS; f++)
        if (opt->forms[f])
            printf("largest form=%s rate_hz=%g n=%d\n", form_names[f], opt->rate, largest[f]);
}

int main(int argc, char **argv)
{
    options_t opt;
    drths_rt_report_t rep;
    int rc = parse_options(argc, argv, &opt);
    if (rc == GO_ON)
        rc = apply_rt(&opt, &rep);
    if (rc != GO_ON)
        return rc;
    int64_t *t = malloc((size_t)opt.steps * sizeof(int64_t));
    if (!t) {
        drths_rt_report_close(&rep);
        return drths_cli_error(PROG, "no memory for %ld steps", opt.steps);
    }
    int largest[NFORMS] = {0};
    int status = run(&opt, t, largest);
    print_summary(&opt, largest);
    free(t);
    drths_rt_report_close(&rep);
    return status;
}
