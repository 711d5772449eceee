/* drths-specimen: drives an MR-damper model (or the whole virtual specimen: servo-hydraulic
 * plant + damper) with a prescribed displacement history and writes the force history as CSV.
 * A lab uses it to compare a damper model with its characterisation tests (sinusoids at fixed
 * current, seed 004 Fig. 5) before putting the model into a Smith predictor or a rehearsal. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/damper.h"
#include "models/specimen.h"
#include "platform/error.h"

#define PROG "drths-specimen"
#define MAX_SAMPLES 100000000L

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: " PROG " [--model NAME] [--current A | --voltage V]\n"
            "                      (--sine AMP_M,FREQ_HZ [--cycles N] | --displacement-file FILE)\n"
            "                      [--rate HZ] [--plant] [--out FILE]\n"
            "\n"
            "Drives an MR-damper model with a prescribed displacement and writes the force history\n"
            "as CSV: time_s,disp_m,vel_m_s,force_N,command.\n"
            "\n"
            "  --model NAME              phillips2013-200kN (default; current-driven, 0 to 2.5 A)\n"
            "                            or spencer1997-small (voltage-driven, 0 to 2.25 V)\n"
            "  --current A               constant damper current (phillips2013-200kN), default 0\n"
            "  --voltage V               constant damper voltage (spencer1997-small), default 0\n"
            "  --sine AMP_M,FREQ_HZ      x(t) = AMP_M sin(2 pi FREQ_HZ t), velocity exact\n"
            "  --cycles N                number of sine cycles (default 3)\n"
            "  --displacement-file FILE  CSV rows time_s,disp_m (an optional header line and '#'\n"
            "                            comments are skipped); resampled at --rate by linear\n"
            "                            interpolation, velocity by central differences\n"
            "  --rate HZ                 sample rate (default 5000)\n"
            "  --plant                   drive through the 3-pole servo-hydraulic plant (seed 004\n"
            "                            models, following the damper current) with a one-tick\n"
            "                            I/O delay; no sensor noise or quantisation. disp_m and\n"
            "                            vel_m_s are then the plant's output\n"
            "  --out FILE                output file (default stdout)\n"
            "  --help                    this text\n"
            "\n"
            "The damper starts at rest at the first displacement, its current (voltage) dynamics\n"
            "settled at the given command; the command column is the effective current (A) or\n"
            "filtered voltage (V). Exit status: 0 ok, 1 output error, 2 bad options or input.\n");
}

/* One line on stderr for a bad option or input; exit status 2. */
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (try --help)\n");
    va_end(ap);
    return 2;
}

static int parse_num(const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    return end != s && *end == '\0' && errno == 0 && isfinite(*v) ? 0 : -1;
}

/* Reads time_s,disp_m rows. Returns 0 or prints one line and returns 2. */
static int read_history(const char *path, double **t_out, double **x_out, long *n_out)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, PROG ": --displacement-file %s: %s\n", path, strerror(errno));
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

int main(int argc, char **argv)
{
    enum { OPT_MODEL = 1, OPT_CURRENT, OPT_VOLTAGE, OPT_SINE, OPT_CYCLES, OPT_FILE, OPT_RATE,
           OPT_PLANT, OPT_OUT, OPT_HELP };
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
        {"help", no_argument, NULL, OPT_HELP},
        {NULL, 0, NULL, 0},
    };
    drths_damper_model_t model = DRTHS_DAMPER_PHILLIPS2013;
    const char *model_name = "phillips2013-200kN";
    double current = NAN, voltage = NAN, amp = 0.0, freq = 0.0, cycles = 3.0, rate = 5000.0;
    int have_sine = 0, have_cycles = 0, plant = 0;
    const char *file = NULL, *out_path = NULL;

    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        switch (c) {
        case OPT_MODEL:
            if (strcmp(optarg, "phillips2013-200kN") == 0)
                model = DRTHS_DAMPER_PHILLIPS2013;
            else if (strcmp(optarg, "spencer1997-small") == 0)
                model = DRTHS_DAMPER_SPENCER1997;
            else
                return fail("--model: unknown model '%s'; use phillips2013-200kN or spencer1997-small",
                            optarg);
            model_name = optarg;
            break;
        case OPT_CURRENT:
            if (parse_num(optarg, &current) < 0)
                return fail("--current: expected a number of amperes (got '%s')", optarg);
            break;
        case OPT_VOLTAGE:
            if (parse_num(optarg, &voltage) < 0)
                return fail("--voltage: expected a number of volts (got '%s')", optarg);
            break;
        case OPT_SINE: {
            const char *comma = strchr(optarg, ',');
            char a[128];
            size_t la = comma ? (size_t)(comma - optarg) : 0;
            if (!comma || la >= sizeof a)
                return fail("--sine: expected AMP_M,FREQ_HZ (got '%s')", optarg);
            memcpy(a, optarg, la);
            a[la] = '\0';
            if (parse_num(a, &amp) < 0 || parse_num(comma + 1, &freq) < 0 || !(amp >= 0.0) ||
                !(freq > 0.0))
                return fail("--sine: expected AMP_M,FREQ_HZ with AMP_M >= 0 and FREQ_HZ > 0 "
                            "(got '%s')",
                            optarg);
            have_sine = 1;
            break;
        }
        case OPT_CYCLES:
            if (parse_num(optarg, &cycles) < 0 || !(cycles > 0.0))
                return fail("--cycles: expected a number > 0 (got '%s')", optarg);
            have_cycles = 1;
            break;
        case OPT_FILE:
            file = optarg;
            break;
        case OPT_RATE:
            if (parse_num(optarg, &rate) < 0 || !(rate > 0.0) || rate > 1e6)
                return fail("--rate: expected a rate in Hz, > 0 and <= 1e6 (got '%s')", optarg);
            break;
        case OPT_PLANT:
            plant = 1;
            break;
        case OPT_OUT:
            out_path = optarg;
            break;
        case OPT_HELP:
            usage(stdout);
            return 0;
        case ':':
            return fail("%s: needs a value", argv[optind - 1]);
        default:
            return fail("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return fail("unexpected argument '%s'", argv[optind]);
    if (have_sine == (file != NULL))
        return fail("give exactly one of --sine AMP_M,FREQ_HZ and --displacement-file FILE");
    if (have_cycles && !have_sine)
        return fail("--cycles applies to --sine only");

    drths_specimen_params_t sp;
    drths_specimen_params_default(&sp, model);
    sp.plant_enabled = plant;
    sp.noise_disp_m = sp.noise_force_N = 0.0;
    sp.adc_bits = 0;
    sp.io_delay_ticks = plant ? 1 : 0;
    const double cmax = drths_damper_command_max(&sp.damper);
    double command = 0.0;
    if (model == DRTHS_DAMPER_PHILLIPS2013) {
        if (!isnan(voltage))
            return fail("--voltage applies to spencer1997-small; %s is current-driven, use --current",
                        model_name);
        if (!isnan(current))
            command = current;
    } else {
        if (!isnan(current))
            return fail("--current applies to phillips2013-200kN; %s is voltage-driven, use --voltage",
                        model_name);
        if (!isnan(voltage))
            command = voltage;
    }
    if (command < 0.0 || command > cmax) {
        const int amps = model == DRTHS_DAMPER_PHILLIPS2013;
        return fail("%s: %g is outside 0 to %g %s for %s", amps ? "--current" : "--voltage", command,
                    cmax, amps ? "A" : "V", model_name);
    }

    /* The prescribed history, sampled at the rate. */
    const double dt = 1.0 / rate;
    long n = 0;
    double *ft = NULL, *fx = NULL, t0 = 0.0;
    if (have_sine) {
        const double ns = cycles * rate / freq;
        if (ns > MAX_SAMPLES)
            return fail("--sine/--cycles/--rate: %.3g samples is too many (limit %ld)", ns, MAX_SAMPLES);
        n = lround(ns) + 1;
    } else {
        long nf;
        int rc = read_history(file, &ft, &fx, &nf);
        if (rc)
            return rc;
        t0 = ft[0];
        const double ns = (ft[nf - 1] - t0) * rate;
        if (ns > MAX_SAMPLES) {
            free(ft);
            free(fx);
            return fail("--displacement-file: %.3g samples at --rate is too many (limit %ld)", ns,
                        MAX_SAMPLES);
        }
        n = (long)floor(ns * (1.0 + 1e-12)) + 1;
        if (n < 2) {
            free(ft);
            free(fx);
            return fail("--displacement-file: the history is shorter than one sample at --rate");
        }
        /* Resample in place of the file arrays. */
        double *xs = malloc((size_t)n * sizeof *xs);
        if (!xs) {
            free(ft);
            free(fx);
            fprintf(stderr, PROG ": out of memory\n");
            return 1;
        }
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
        fx = xs;
    }

    drths_error_t err;
    drths_specimen_t s;
    int rc = drths_specimen_init(&s, &sp, dt, &err);
    if (rc < 0) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        free(fx);
        return 2;
    }

    FILE *out = stdout;
    if (out_path && !(out = fopen(out_path, "w"))) {
        fprintf(stderr, PROG ": --out %s: %s\n", out_path, strerror(errno));
        drths_specimen_close(&s);
        free(fx);
        return 2;
    }

    const double w = 2.0 * M_PI * freq;
    fprintf(out, "time_s,disp_m,vel_m_s,force_N,command\n");
    for (long k = 0; k < n; k++) {
        double x, v;
        if (have_sine) {
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
            drths_specimen_reset(&s, x, command);
            m.true_disp_m = x;
            m.true_vel_m_s = plant ? 0.0 : v;
            m.true_force_N = drths_damper_force(&s.damper);
            m.current = drths_damper_command_effective(&s.damper);
        } else {
            drths_specimen_step(&s, x, v, command, &m);
        }
        fprintf(out, "%.9g,%.9g,%.9g,%.9g,%.9g\n", t0 + k * dt, m.true_disp_m, m.true_vel_m_s,
                m.true_force_N, m.current);
    }
    drths_specimen_close(&s);
    free(fx);
    int bad = ferror(out);
    if (out != stdout)
        bad |= fclose(out) != 0;
    else
        bad |= fflush(out) != 0;
    if (bad) {
        fprintf(stderr, PROG ": writing %s failed\n", out_path ? out_path : "stdout");
        return 1;
    }
    return 0;
}
