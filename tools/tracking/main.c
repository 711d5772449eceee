/* drths-tracking: the actuator tracking benchmark of Phillips & Spencer 2013 (Table 2) on the
 * virtual plant.
 *
 * The virtual specimen (models/specimen.h: the 3-pole servo-hydraulic plant following the
 * 200-kN damper's effective current between the 0 A and 2.5 A models, the damper attached, the
 * default sensor noise and 16-bit converters, a one-tick I/O delay, 5000 Hz) is driven to
 * follow a band-limited white-noise displacement (0-5 Hz, RMS 2.78 mm; 0-15 Hz, RMS 0.595 mm)
 * with the damper at 0.0 A, 2.5 A and 2.5 A pulsed at 0.5 Hz, and each of the compensation
 * modes of models/compensation.h (designed on the average model, plus the feedforward scheduled
 * on the commanded damper current). It prints the RMS error norm of the measured against the
 * desired displacement, 100 sqrt(sum (xm - xd)^2 / sum xd^2) % (the paper's eq 31), beside the
 * paper's best figures and the project's goal (half of them).
 *
 * A lab uses it to see what the compensation does before the first test with the real
 * actuator, and to choose the lookahead the playout buffer must give it. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "models/compensation.h"
#include "models/groundmotion.h"
#include "models/specimen.h"
#include "platform/cli.h"
#include "platform/error.h"

#define PROG "drths-tracking"
#define RATE_HZ 5000.0
#define MAX_LOOKAHEAD 64
/* Half-cosine fade-in and fade-out of the desired displacement, so the actuator starts and ends
 * at rest: the generated noise is periodic, not tapered, and starts at a non-zero value. */
#define TAPER_S 1.0

/* One row of the paper's Table 2: a damper current case and a band. */
typedef struct {
    const char *current_name; /* "0.0 A", "2.5 A", "pulsed" */
    int pulsed;
    double current_A;
    double f_hi_hz;
    double rms_m;
    double paper_pct; /* the paper's best RMS error norm */
} case_t;

static const case_t CASES[] = {
    {"0.0 A", 0, 0.0, 5.0, 2.78e-3, 0.942},
    {"0.0 A", 0, 0.0, 15.0, 0.595e-3, 3.45},
    {"2.5 A", 0, 2.5, 5.0, 2.78e-3, 1.41},
    {"2.5 A", 0, 2.5, 15.0, 0.595e-3, 4.68},
    {"pulsed 0/2.5 A 0.5 Hz", 1, 2.5, 5.0, 2.78e-3, 1.09},
    {"pulsed 0/2.5 A 0.5 Hz", 1, 2.5, 15.0, 0.595e-3, 4.72},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

/* The paper's three modes (its feedforward on the average model), and the feedforward scheduled
 * on the commanded damper current (the experiment file's `feedforward`). */
static const drths_compensation_t MODES[] = {DRTHS_COMPENSATION_NONE, DRTHS_COMPENSATION_POLYNOMIAL,
                                            DRTHS_COMPENSATION_FEEDFORWARD_AVERAGE,
                                            DRTHS_COMPENSATION_FEEDFORWARD};
/* The experiment file's names of the modes. */
static const char *const MODE_NAMES[] = {"none", "polynomial", "feedforward-average", "feedforward"};
#define NMODES 4

typedef struct {
    double rms_pct, rms_true_pct, ti_m2, peak_m;
    uint64_t ticks, extrapolated;
} result_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [--duration S] [--seed N] [--lookahead-ticks K] [--poly-lead-ms MS]\n"
            "                      [--csv FILE]\n"
            "Table 2 of Phillips & Spencer 2013 on the virtual plant: the actuator follows\n"
            "band-limited white-noise displacements (0-5 Hz RMS 2.78 mm, 0-15 Hz RMS\n"
            "0.595 mm) with the 200-kN damper at 0.0 A, 2.5 A and 2.5 A pulsed at 0.5 Hz,\n"
            "with compensation none, polynomial, feedforward-average (the paper's) and\n"
            "feedforward (scheduled on the commanded damper current). Prints the RMS error\n"
            "norm 100 sqrt(sum (xm - xd)^2 / sum xd^2) in percent beside the paper's best\n"
            "figures and the goal (half of them).\n"
            "\n"
            "  --duration S         length of each desired displacement, 3 to 3600 s (default 60)\n"
            "  --seed N             white-noise seed (default 4; the 15 Hz band uses N + 1)\n"
            "  --lookahead-ticks K  future commands the compensator gets, 0 to %d (default 3)\n"
            "  --poly-lead-ms MS    lead of the polynomial mode, 0 to 1000 ms (default 9.05)\n"
            "  --csv FILE           one row per run (case, band, mode) with every indicator\n"
            "  -h, --help           print this help and exit\n"
            "  --version            print the version and exit\n"
            "\n"
            "The lookahead is the playout preview; with fewer ticks than it needs the\n"
            "compensator extrapolates. The default polynomial lead is 1/p + a/b of the average\n"
            "model plus half a tick. Plant: the paper's 3-pole models at 0 A and 2.5 A,\n"
            "interpolated by the damper's effective current; one-tick I/O delay; sensor noise\n"
            "2 um and a 16-bit converter over +/- 0.1 m; 5000 Hz. The compensators are\n"
            "designed on the average model. The desired displacement fades in and out over\n"
            "%g s.\n"
            "\n",
            MAX_LOOKAHEAD, TAPER_S);
    drths_cli_print_exit_codes(f, "a run failed or the --csv file could not be written");
}

/* The desired displacement with MAX_LOOKAHEAD + 4 zeros before and after, so that the windows
 * of the first and last ticks read the resting actuator. Returns a pointer to sample 0 of the
 * heap block *block, or NULL with a message in err. */
static double *make_desired(double dt, double duration, double f_hi, double rms, uint64_t seed,
                            long *n_out, double **block, drths_error_t *err)
{
    drths_record_t rec;
    if (drths_record_white_noise(&rec, dt, duration, 0.0, f_hi, rms, seed, err) < 0)
        return NULL;
    const long n = (long)rec.n, pad = MAX_LOOKAHEAD + 4;
    double *b = calloc((size_t)(n + 2 * pad), sizeof(double));
    if (!b) {
        drths_record_close(&rec);
        drths_error_set(err, -ENOMEM, "no memory for %ld samples", n);
        return NULL;
    }
    double *r = b + pad;
    const long nt = lround(TAPER_S / dt);
    double s2 = 0.0;
    for (long k = 0; k < n; k++) {
        double w = 1.0;
        if (k < nt)
            w = 0.5 - 0.5 * cos(M_PI * k / nt);
        else if (k > n - 1 - nt)
            w = 0.5 - 0.5 * cos(M_PI * (n - 1 - k) / nt);
        r[k] = rec.ag_m_s2[k] * w;
        s2 += r[k] * r[k];
    }
    /* The taper removes a little energy: scale back so the record has the paper's RMS. */
    const double g = rms / sqrt(s2 / n);
    for (long k = 0; k < n; k++)
        r[k] *= g;
    drths_record_close(&rec);
    *n_out = n;
    *block = b;
    return r;
}

/* Damper current command at tick k: constant, or a 0.5 Hz square wave, on (2.5 A) in the first
 * half of each 2 s period. */
static double current_at(const case_t *cs, long k, double dt)
{
    if (!cs->pulsed)
        return cs->current_A;
    return fmod(k * dt, 2.0) < 1.0 ? cs->current_A : 0.0;
}

/* One run. For FEEDFORWARD the inverse is scheduled on the damper current as the actuator site
 * does it: the COMMANDED current (what a lab knows) passed through the model of the damper's
 * current dynamics (models/compensation.h), not the plant's own internal current. */
static int run(const case_t *cs, drths_compensation_t mode, const double *r, long n,
               double dt, int lookahead, double poly_lead_s, result_t *res, drths_error_t *err)
{
    drths_specimen_params_t sp;
    drths_specimen_params_default(&sp, DRTHS_DAMPER_PHILLIPS2013);
    drths_specimen_t spec;
    int rc = drths_specimen_init(&spec, &sp, dt, err);
    if (rc < 0)
        return rc;
    drths_comp_t comp;
    rc = drths_comp_init(&comp, mode, &DRTHS_PLANT_AVERAGE, sp.io_delay_ticks, dt, err);
    if (rc == 0 && poly_lead_s >= 0.0 && mode == DRTHS_COMPENSATION_POLYNOMIAL)
        rc = drths_comp_set_poly_lead(&comp, poly_lead_s, err);
    if (rc == 0 && mode == DRTHS_COMPENSATION_FEEDFORWARD)
        rc = drths_comp_schedule(&comp, &DRTHS_PLANT_0A, &DRTHS_PLANT_2P5A, 2.5, err);
    if (rc == 0 && mode == DRTHS_COMPENSATION_FEEDFORWARD)
        rc = drths_comp_current_model(&comp, &sp.damper, err);
    if (rc < 0) {
        drths_specimen_close(&spec);
        return rc;
    }
    drths_specimen_reset(&spec, 0.0, current_at(cs, 0, dt));
    drths_tracking_t tr, tr_true;
    drths_tracking_init(&tr);
    drths_tracking_init(&tr_true);
    drths_comp_reset_command(&comp, current_at(cs, 0, dt));
    for (long k = 0; k < n; k++) {
        drths_comp_set_command(&comp, current_at(cs, k, dt));
        const double u = drths_comp_drive(&comp, &r[k - 3], &r[k + 1], lookahead);
        drths_specimen_meas_t m;
        drths_specimen_step(&spec, u, 0.0, current_at(cs, k, dt), &m);
        drths_tracking_add(&tr, r[k], m.disp_m);
        drths_tracking_add(&tr_true, r[k], m.true_disp_m);
    }
    res->rms_pct = drths_tracking_rms_pct(&tr);
    res->rms_true_pct = drths_tracking_rms_pct(&tr_true);
    res->ti_m2 = drths_tracking_ti(&tr);
    res->peak_m = drths_tracking_max_err(&tr);
    res->ticks = comp.ticks;
    res->extrapolated = comp.extrapolated_ticks;
    drths_comp_close(&comp);
    drths_specimen_close(&spec);
    return 0;
}

/* parse_options and the other steps of main() return GO_ON when main() should carry on, or the
 * exit code main() returns (0 after --help or --version). */
#define GO_ON (-1)

typedef struct options {
    double duration, poly_lead_s; /* poly_lead_s < 0: the compensator's default lead */
    long seed, lookahead;
    const char *csv_path;
} options_t;

/* The desired displacements of the two bands (0-5 Hz, 0-15 Hz), as make_desired returns them. */
typedef struct inputs {
    double *blocks[2], *desired[2];
    long nsamp[2];
} inputs_t;

/* The table's totals for the closing lines. */
typedef struct totals {
    int met, met_sched;
    uint64_t ff_extrap, ff_ticks;
} totals_t;

static int parse_options(int argc, char **argv, options_t *opt)
{
    enum { OPT_DURATION = 1, OPT_SEED, OPT_LOOKAHEAD, OPT_POLY_LEAD, OPT_CSV };
    static const struct option opts[] = {
        {"duration", required_argument, NULL, OPT_DURATION},
        {"seed", required_argument, NULL, OPT_SEED},
        {"lookahead-ticks", required_argument, NULL, OPT_LOOKAHEAD},
        {"poly-lead-ms", required_argument, NULL, OPT_POLY_LEAD},
        {"csv", required_argument, NULL, OPT_CSV},
        DRTHS_CLI_OPTIONS_COMMON,
        {NULL, 0, NULL, 0},
    };
    *opt = (options_t){.duration = 60.0, .poly_lead_s = -1.0, .seed = 4, .lookahead = 3};
    double lead_ms = 0.0;

    argv[0] = (char *)PROG; /* getopt names the program in its messages from argv[0] */
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_DURATION:
            if (drths_cli_double(PROG, "--duration", optarg, 3.0, 3600.0, "s", &opt->duration) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_SEED:
            if (drths_cli_long(PROG, "--seed", optarg, 0, 0x7fffffffL, &opt->seed) != 0)
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_LOOKAHEAD:
            if (drths_cli_long(PROG, "--lookahead-ticks", optarg, 0, MAX_LOOKAHEAD,
                               &opt->lookahead))
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_POLY_LEAD:
            if (drths_cli_double(PROG, "--poly-lead-ms", optarg, 0.0, 1000.0, "ms", &lead_ms))
                return DRTHS_EXIT_USAGE;
            opt->poly_lead_s = lead_ms * 1e-3;
            break;
        case OPT_CSV:
            opt->csv_path = optarg;
            break;
        default:
            return drths_cli_other_option(PROG, c, usage);
        }
    }
    if (optind < argc)
        return drths_cli_unexpected_argument(PROG, argv[optind]);
    return GO_ON;
}

/* What the header reports of the compensators: the lookahead the feedforward needs and the
 * polynomial lead in ms. */
static int probe_compensation(const options_t *opt, double dt, int *ff_need, double *lead_ms)
{
    drths_error_t err;
    drths_error_clear(&err);
    drths_comp_t probe;
    if (drths_comp_init(&probe, DRTHS_COMPENSATION_FEEDFORWARD, &DRTHS_PLANT_AVERAGE, 1, dt, &err) <
        0)
        return drths_cli_error(PROG, "%s", err.msg);
    *ff_need = drths_comp_lookahead_needed(&probe);
    drths_comp_init(&probe, DRTHS_COMPENSATION_POLYNOMIAL, &DRTHS_PLANT_AVERAGE, 1, dt, &err);
    if (opt->poly_lead_s >= 0.0)
        drths_comp_set_poly_lead(&probe, opt->poly_lead_s, &err);
    *lead_ms = probe.poly_lead_ticks * dt * 1e3;
    return GO_ON;
}

/* --csv, opened with its header line (*csv stays NULL without --csv). */
static int open_csv(const options_t *opt, FILE **csv)
{
    *csv = NULL;
    if (!opt->csv_path)
        return GO_ON;
    *csv = fopen(opt->csv_path, "w");
    if (!*csv)
        return drths_cli_error(PROG, "--csv: %s: %s", opt->csv_path, strerror(errno));
    fprintf(*csv, "current_case,band_hz,desired_rms_m,mode,lookahead_ticks,rms_error_pct,"
                  "rms_error_true_pct,tracking_indicator_m2,peak_error_m,extrapolated_ticks,"
                  "ticks,paper_best_pct,goal_pct\n");
    return GO_ON;
}

/* Header: what was run, so a table pasted into a lab notebook is self-describing. */
static void print_header(const options_t *opt, int ff_need, double lead_ms)
{
    printf("drths-tracking: Phillips & Spencer 2013, Table 2, on the virtual plant\n");
    printf("  %g Hz, %g s per run (%g s fade in/out), seed %ld (0-5 Hz) and %ld (0-15 Hz)\n",
           RATE_HZ, opt->duration, TAPER_S, opt->seed, opt->seed + 1);
    printf("  plant: the paper's 3-pole models at 0 A and 2.5 A, interpolated by the damper's\n"
           "  effective current; 200-kN damper attached; I/O delay 1 tick; sensor noise 2 um, "
           "16-bit over\n"
           "  +/- 0.1 m. \"ff average\": feedforward on the average model (the paper's method,\n"
           "  `feedforward-average`); \"feedforward\": the inverse scheduled on the COMMANDED "
           "damper\n"
           "  current passed through the damper's current-dynamics model (`feedforward`, beyond\n"
           "  the paper; it does not read the plant's internal current).\n");
    printf("  lookahead %ld ticks (feedforward needs %d%s); polynomial lead %.3f ms\n",
           opt->lookahead, ff_need, opt->lookahead < ff_need ? ", the rest extrapolated" : "",
           lead_ms);
    printf("  RMS error norm of measured vs desired displacement, %%\n\n");
    printf("%-22s %-8s %7s %8s %11s %11s %12s %11s %7s\n", "damper current", "band", "RMS mm",
           "none", "polynomial", "ff average", "feedforward", "paper best", "goal");
}

/* The desired displacement of each band; on failure, closes csv and returns the exit code. */
static int make_inputs(const options_t *opt, double dt, FILE *csv, inputs_t *in)
{
    drths_error_t err;
    drths_error_clear(&err);
    const uint64_t useed = (uint64_t)opt->seed;
    const double bands[2] = {5.0, 15.0}, rmss[2] = {2.78e-3, 0.595e-3};
    *in = (inputs_t){0};
    for (int b = 0; b < 2; b++) {
        in->desired[b] = make_desired(dt, opt->duration, bands[b], rmss[b], useed + (uint64_t)b,
                                      &in->nsamp[b], &in->blocks[b], &err);
        if (!in->desired[b]) {
            free(in->blocks[0]);
            if (csv)
                fclose(csv);
            return drths_cli_error(PROG, "white noise 0-%g Hz: %s", bands[b], err.msg);
        }
    }
    return GO_ON;
}

/* One row of the table: every mode on one case, printed and appended to csv. */
static int run_case(const case_t *cs, const options_t *opt, double dt, const inputs_t *in,
                    FILE *csv, totals_t *tot)
{
    drths_error_t err;
    drths_error_clear(&err);
    const int b = cs->f_hi_hz > 10.0 ? 1 : 0;
    result_t res[NMODES];
    for (int m = 0; m < NMODES; m++) {
        if (run(cs, MODES[m], in->desired[b], in->nsamp[b], dt, (int)opt->lookahead,
                opt->poly_lead_s, &res[m], &err) < 0)
            return drths_cli_error(PROG, "%s", err.msg);
    }
    tot->ff_extrap += res[2].extrapolated;
    tot->ff_ticks += res[2].ticks;
    const double goal = 0.5 * cs->paper_pct;
    tot->met += res[2].rms_pct <= goal;
    tot->met_sched += res[3].rms_pct <= goal;
    char band[32];
    snprintf(band, sizeof band, "0-%.0f Hz", cs->f_hi_hz);
    printf("%-22s %-8s %7.3f %8.3f %11.3f %11.3f %12.3f %11.3f %7.3f\n", cs->current_name, band,
           cs->rms_m * 1e3, res[0].rms_pct, res[1].rms_pct, res[2].rms_pct, res[3].rms_pct,
           cs->paper_pct, goal);
    fflush(stdout);
    for (int m = 0; csv && m < NMODES; m++)
        fprintf(csv, "%s,0-%g,%.6g,%s,%ld,%.6g,%.6g,%.6g,%.6g,%" PRIu64 ",%" PRIu64 ",%g,%g\n",
                cs->current_name, cs->f_hi_hz, cs->rms_m, MODE_NAMES[m], opt->lookahead,
                res[m].rms_pct, res[m].rms_true_pct, res[m].ti_m2, res[m].peak_m,
                res[m].extrapolated, res[m].ticks, cs->paper_pct, goal);
    return 0;
}

static void print_summary(const totals_t *tot)
{
    printf("\nat or below the goal: feedforward %d of %d rows, ff average %d of %d; the\n"
           "feedforward extrapolated %" PRIu64 " of %" PRIu64
           " ticks (lookahead short of what it needs)\n",
           tot->met_sched, NCASES, tot->met, NCASES, tot->ff_extrap, tot->ff_ticks);
}

int main(int argc, char **argv)
{
    const double dt = 1.0 / RATE_HZ;
    options_t opt;
    int ff_need = 0;
    double lead_ms = 0.0;
    FILE *csv = NULL;
    inputs_t in;
    int rc = parse_options(argc, argv, &opt);
    if (rc == GO_ON)
        rc = probe_compensation(&opt, dt, &ff_need, &lead_ms);
    if (rc == GO_ON)
        rc = open_csv(&opt, &csv);
    if (rc != GO_ON)
        return rc;
    print_header(&opt, ff_need, lead_ms);
    if ((rc = make_inputs(&opt, dt, csv, &in)) != GO_ON)
        return rc;

    int status = 0;
    totals_t tot = {0};
    for (int i = 0; i < NCASES && status == 0; i++)
        status = run_case(&CASES[i], &opt, dt, &in, csv, &tot);
    if (status == 0)
        print_summary(&tot);
    free(in.blocks[0]);
    free(in.blocks[1]);
    if (csv && fclose(csv) != 0 && status == 0)
        status = drths_cli_error(PROG, "--csv: %s: %s", opt.csv_path, strerror(errno));
    return status;
}
