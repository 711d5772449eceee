/* drths-specimen: drives an MR-damper model (or the whole virtual specimen: servo-hydraulic
 * plant + damper) with a prescribed displacement history and writes the force history as CSV.
 * A lab uses it to compare a damper model with its characterisation tests (sinusoids at a fixed
 * current, as in the force-displacement loops of Phillips & Spencer 2013) before putting the
 * model into a Smith predictor or a rehearsal. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/models/damper.h"
#include "common/models/specimen.h"
#include "common/platform/cli.h"
#include "common/platform/error.h"

#define PROG "drths-specimen"
#define MAX_SAMPLES 100000000L
#define MAX_AMPLITUDE_M 1.0 /* beyond the stroke of any lab actuator */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [--model NAME] [--current A | --voltage V]\n"
            "                      (--sine AMP_M,FREQ_HZ [--cycles N] | --displacement-file FILE)\n"
            "                      [--rate HZ] [--plant] [--out FILE]\n"
            "Drives an MR-damper model with a prescribed displacement and writes the force\n"
            "history as CSV: time_s,disp_m,vel_m_s,force_N,command. The damper starts at rest\n"
            "at the first displacement, its current (voltage) dynamics settled at the given\n"
            "command; the command column is the effective current (A) or the filtered\n"
            "voltage (V).\n"
            "\n"
            "  --model NAME              phillips2013-200kN (default) or spencer1997-small\n"
            "  --current A               phillips2013-200kN current, 0 to 2.5 A (default 0)\n"
            "  --voltage V               spencer1997-small voltage, 0 to 2.25 V (default 0)\n"
            "  --sine AMP_M,FREQ_HZ      x(t) = AMP_M sin(2 pi FREQ_HZ t), velocity exact\n"
            "  --cycles N                number of sine cycles (default 3)\n"
            "  --displacement-file FILE  CSV rows time_s,disp_m, resampled at --rate (see below)\n"
            "  --rate HZ                 sample rate (default 5000)\n"
            "  --plant                   drive through the servo-hydraulic plant (see below)\n"
            "  --out FILE                output file (default stdout)\n"
            "  -h, --help                print this help and exit\n"
            "  --version                 print the version and exit\n"
            "\n"
            "--displacement-file skips an optional header line and '#' comments; the history is\n"
            "resampled by linear interpolation and the velocity is taken by central differences.\n"
            "--plant puts the identified 3-pole servo-hydraulic plant of the 200-kN damper's\n"
            "actuator (following the damper current) and a one-tick I/O delay in front of the\n"
            "damper, without sensor noise or quantisation; disp_m and vel_m_s are then the\n"
            "plant's output.\n"
            "\n");
    drths_cli_print_exit_codes(f, "the output could not be written");
}

/* Reads time_s,disp_m rows. Returns 0 or prints one line and returns 2. */
static int read_history(const char *path, double **t_out, double **x_out, long *n_out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, PROG ": --displacement-file: %s: %s\n", path, strerror(errno));
        return 2;
    }
    double *t = NULL, *x = NULL;
    long n = 0, cap = 0, lineno = 0, data_lines = 0;
    char line[4096];
    int rc = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '#' || *p == '\n' || *p == '\r' || *p == '\0')
            continue;
        data_lines++;
        char *end;
        double tv = strtod(p, &end);
        int ok = end != p;
        if (ok) {
            p = end;
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p == ',')
                p++;
            double xv = strtod(p, &end);
            ok = end != p && isfinite(tv) && isfinite(xv);
            if (ok) {
                p = end;
                while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
                    p++;
                ok = *p == '\0' || *p == ',';
            }
            if (ok) {
                if (n > 0 && !(tv > t[n - 1])) {
                    fprintf(stderr, PROG ": %s:%ld: time %g s is not after the previous %g s\n", path,
                            lineno, tv, t[n - 1]);
                    rc = 2;
                    break;
                }
                if (n == cap) {
                    cap = cap ? 2 * cap : 1024;
                    double *nt = realloc(t, (size_t)cap * sizeof *t);
                    if (nt)
                        t = nt;
                    double *nx = realloc(x, (size_t)cap * sizeof *x);
                    if (nx)
                        x = nx;
                    if (!nt || !nx) {
                        fprintf(stderr, PROG ": %s: out of memory\n", path);
                        rc = 2;
                        break;
                    }
                }
                t[n] = tv;
                x[n] = xv;
                n++;
                continue;
            }
        }
        if (data_lines == 1)
            continue; /* a header line */
        fprintf(stderr, PROG ": %s:%ld: expected time_s,disp_m (two numbers)\n", path, lineno);
        rc = 2;
        break;
    }
    fclose(f);
    if (rc == 0 && n < 2) {
        fprintf(stderr, PROG ": %s: needs at least two time_s,disp_m rows (got %ld)\n", path, n);
        rc = 2;
    }
    if (rc) {
        free(t);
        free(x);
        return rc;
    }
    *t_out = t;
    *x_out = x;
    *n_out = n;
    return 0;
}

/* The amplitude and frequency of --sine AMP_M,FREQ_HZ. Returns 0, or -1 after one message. */
static int parse_sine(const char *text, double *amp, double *freq)
{
    const char *comma = strchr(text, ',');
    char a[64];
    size_t la = comma ? (size_t)(comma - text) : 0;
    if (!comma || la >= sizeof a) {
        fprintf(stderr, PROG ": --sine: '%s' is not AMP_M,FREQ_HZ\n", text);
        return -1;
    }
    memcpy(a, text, la);
    a[la] = '\0';
    if (drths_cli_double(PROG, "--sine AMP_M", a, 0.0, MAX_AMPLITUDE_M, "m", amp) != 0 ||
        drths_cli_positive(PROG, "--sine FREQ_HZ", comma + 1, "Hz", freq) != 0)
        return -1;
    return 0;
}

/* parse_options and the other steps of main() return GO_ON when main() should carry on, or the
 * exit code main() returns (0 after --help or --version). */
#define GO_ON (-1)

static const char *const model_names[] = {"phillips2013-200kN", "spencer1997-small", NULL};
static const drths_damper_model_t models[] = {DRTHS_DAMPER_PHILLIPS2013, DRTHS_DAMPER_SPENCER1997};

typedef struct options {
    int model_index;
    double amp, freq, cycles, rate;
    int have_sine, have_cycles, plant;
    const char *file, *out_path, *current_s, *voltage_s;
} options_t;

/* The displacement history, sampled at --rate: n samples from t0, each x[k] from --sine when x
 * is NULL, else from the resampled --displacement-file. */
typedef struct history {
    long n;
    double *x;
    double t0;
} history_t;

static int parse_options(int argc, char **argv, options_t *opt)
{
    enum {
        OPT_MODEL = 1,
        OPT_CURRENT,
        OPT_VOLTAGE,
        OPT_SINE,
        OPT_CYCLES,
        OPT_FILE,
        OPT_RATE,
        OPT_PLANT,
        OPT_OUT
    };
    static const struct option opts[] = {
        {"model", required_argument, NULL, OPT_MODEL},
        {"current", required_argument, NULL, OPT_CURRENT},
        {"voltage", required_argument, NULL, OPT_VOLTAGE},
        {"sine", required_argument, NULL, OPT_SINE},
        {"cycles", required_argument, NULL, OPT_CYCLES},
        {"displacement-file", required_argument, NULL, OPT_FILE},
        {"rate", required_argument, NULL, OPT_RATE},
        {"plant", no_argument, NULL, OPT_PLANT},
        {"out", required_argument, NULL, OPT_OUT},
        DRTHS_CLI_OPTIONS_COMMON,
        {NULL, 0, NULL, 0},
    };
    *opt = (options_t){.cycles = 3.0, .rate = 5000.0};

    argv[0] = (char *)PROG; /* getopt names the program in its messages from argv[0] */
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_MODEL:
            if ((opt->model_index = drths_cli_choice(PROG, "--model", optarg, model_names)) < 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_CURRENT: /* its range depends on --model: checked after all options */
            opt->current_s = optarg;
            break;
        case OPT_VOLTAGE:
            opt->voltage_s = optarg;
            break;
        case OPT_SINE:
            if (parse_sine(optarg, &opt->amp, &opt->freq) != 0)
                return DRTHS_EXIT_USAGE;
            opt->have_sine = 1;
            break;
        case OPT_CYCLES:
            if (drths_cli_positive(PROG, "--cycles", optarg, NULL, &opt->cycles) != 0)
                return DRTHS_EXIT_USAGE;
            opt->have_cycles = 1;
            break;
        case OPT_FILE:
            opt->file = optarg;
            break;
        case OPT_RATE:
            if (drths_cli_double(PROG, "--rate", optarg, 1.0, 1e6, "Hz", &opt->rate) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_PLANT:
            opt->plant = 1;
            break;
        case OPT_OUT:
            opt->out_path = optarg;
            break;
        default:
            return drths_cli_other_option(PROG, c, usage);
        }
    }
    if (optind < argc)
        return drths_cli_unexpected_argument(PROG, argv[optind]);
    if (opt->have_sine == (opt->file != NULL))
        return drths_cli_usage_error(
            PROG, "give exactly one of --sine AMP_M,FREQ_HZ and --displacement-file FILE");
    if (opt->have_cycles && !opt->have_sine)
        return drths_cli_usage_error(PROG, "--cycles applies to --sine only");
    return GO_ON;
}

/* The specimen's parameters for --model and --plant, and the damper command from --current or
 * --voltage, whichever the model takes. */
static int setup_specimen(const options_t *opt, drths_specimen_params_t *sp, double *command)
{
    const drths_damper_model_t model = models[opt->model_index];
    const char *model_name = model_names[opt->model_index];
    drths_specimen_params_default(sp, model);
    sp->plant_enabled = opt->plant;
    sp->noise_disp_m = sp->noise_force_N = 0.0;
    sp->adc_bits = 0;
    sp->io_delay_ticks = opt->plant ? 1 : 0;
    const double cmax = drths_damper_command_max(&sp->damper);
    *command = 0.0;
    if (model == DRTHS_DAMPER_PHILLIPS2013) {
        if (opt->voltage_s)
            return drths_cli_usage_error(PROG,
                                         "--voltage applies to spencer1997-small; %s is "
                                         "current-driven, use --current",
                                         model_name);
        if (opt->current_s &&
            drths_cli_double(PROG, "--current", opt->current_s, 0.0, cmax, "A", command))
            return DRTHS_EXIT_USAGE;
    } else {
        if (opt->current_s)
            return drths_cli_usage_error(PROG,
                                         "--current applies to phillips2013-200kN; %s is "
                                         "voltage-driven, use --voltage",
                                         model_name);
        if (opt->voltage_s &&
            drths_cli_double(PROG, "--voltage", opt->voltage_s, 0.0, cmax, "V", command))
            return DRTHS_EXIT_USAGE;
    }
    return GO_ON;
}

/* --displacement-file resampled at --rate by linear interpolation. */
static int load_file_history(const options_t *opt, history_t *h)
{
    double *ft = NULL, *fx = NULL;
    long nf;
    int rc = read_history(opt->file, &ft, &fx, &nf);
    if (rc)
        return rc;
    const double t0 = ft[0];
    const double ns = (ft[nf - 1] - t0) * opt->rate;
    if (ns > MAX_SAMPLES) {
        free(ft);
        free(fx);
        return drths_cli_usage_error(PROG,
                                     "--displacement-file: %.3g samples at --rate is too "
                                     "many (limit %ld)",
                                     ns, MAX_SAMPLES);
    }
    const long n = (long)floor(ns * (1.0 + 1e-12)) + 1;
    if (n < 2) {
        free(ft);
        free(fx);
        return drths_cli_usage_error(
            PROG, "--displacement-file: the history is shorter than one sample at --rate");
    }
    double *xs = malloc((size_t)n * sizeof *xs);
    if (!xs) {
        free(ft);
        free(fx);
        return drths_cli_error(PROG, "out of memory");
    }
    const double dt = 1.0 / opt->rate;
    long j = 0;
    for (long k = 0; k < n; k++) {
        const double t = t0 + k * dt;
        while (j < nf - 2 && ft[j + 1] <= t)
            j++;
        double w = (t - ft[j]) / (ft[j + 1] - ft[j]);
        if (w > 1.0)
            w = 1.0;
        xs[k] = fx[j] + w * (fx[j + 1] - fx[j]);
    }
    free(ft);
    free(fx);
    *h = (history_t){.n = n, .x = xs, .t0 = t0};
    return GO_ON;
}

/* The prescribed history, sampled at the rate. */
static int make_history(const options_t *opt, history_t *h)
{
    *h = (history_t){0};
    if (!opt->have_sine)
        return load_file_history(opt, h);
    const double ns = opt->cycles * opt->rate / opt->freq;
    if (ns > MAX_SAMPLES)
        return drths_cli_usage_error(PROG,
                                     "--sine/--cycles/--rate: %.3g samples is too many "
                                     "(limit %ld)",
                                     ns, MAX_SAMPLES);
    h->n = lround(ns) + 1;
    return GO_ON;
}

/* Drives the specimen through the history, one CSV row per sample. */
static void write_rows(FILE *out, drths_specimen_t *s, const options_t *opt, const history_t *h,
                       double command)
{
    const double rate = opt->rate, dt = 1.0 / rate, amp = opt->amp;
    const double w = 2.0 * M_PI * opt->freq;
    const double *fx = h->x;
    const long n = h->n;
    fprintf(out, "time_s,disp_m,vel_m_s,force_N,command\n");
    for (long k = 0; k < n; k++) {
        double x, v;
        if (opt->have_sine) {
            x = amp * sin(w * k * dt);
            v = amp * w * cos(w * k * dt);
        } else {
            x = fx[k];
            if (k == 0)
                v = (fx[1] - fx[0]) * rate;
            else if (k == n - 1)
                v = (fx[k] - fx[k - 1]) * rate;
            else
                v = (fx[k + 1] - fx[k - 1]) * 0.5 * rate;
        }
        drths_specimen_meas_t m;
        if (k == 0) {
            drths_specimen_reset(s, x, command);
            m.true_disp_m = x;
            m.true_vel_m_s = opt->plant ? 0.0 : v;
            m.true_force_N = drths_damper_force(&s->damper);
            m.current = drths_damper_command_effective(&s->damper);
        } else {
            drths_specimen_step(s, x, v, command, &m);
        }
        fprintf(out, "%.9g,%.9g,%.9g,%.9g,%.9g\n", h->t0 + k * dt, m.true_disp_m, m.true_vel_m_s,
                m.true_force_N, m.current);
    }
}

/* Runs the specimen over the history into --out; returns the exit code. */
static int run(const options_t *opt, const drths_specimen_params_t *sp, double command,
               const history_t *h)
{
    drths_error_t err;
    drths_specimen_t s;
    int rc = drths_specimen_init(&s, sp, 1.0 / opt->rate, &err);
    if (rc < 0)
        return drths_cli_error(PROG, "%s", err.msg);

    FILE *out = stdout;
    if (opt->out_path && !(out = fopen(opt->out_path, "w"))) {
        int e = errno;
        drths_specimen_close(&s);
        return drths_cli_error(PROG, "--out: %s: %s", opt->out_path, strerror(e));
    }
    write_rows(out, &s, opt, h, command);
    drths_specimen_close(&s);
    int bad = ferror(out);
    if (out != stdout)
        bad |= fclose(out) != 0;
    else
        bad |= fflush(out) != 0;
    if (bad)
        return drths_cli_error(PROG, "writing %s failed", opt->out_path ? opt->out_path : "stdout");
    return DRTHS_EXIT_OK;
}

int main(int argc, char **argv)
{
    options_t opt;
    drths_specimen_params_t sp;
    double command;
    history_t h;
    int rc = parse_options(argc, argv, &opt);
    if (rc == GO_ON)
        rc = setup_specimen(&opt, &sp, &command);
    if (rc == GO_ON)
        rc = make_history(&opt, &h);
    if (rc != GO_ON)
        return rc;
    rc = run(&opt, &sp, command, &h);
    free(h.x);
    return rc;
}
