/* drths-tracking: the actuator tracking benchmark of Phillips & Spencer 2013 (Table 2) on the
 * virtual plant, with plants that differ from the compensator's model.
 *
 * The virtual specimen (common/models/specimen.h: the 3-pole servo-hydraulic plant following the
 * 200-kN damper's effective current between the 0 A and 2.5 A models, the damper attached, the
 * default sensor noise and 16-bit converters, a one-tick I/O delay, 5000 Hz) is driven to
 * follow a band-limited white-noise displacement (0-5 Hz, RMS 2.78 mm; 0-15 Hz, RMS 0.595 mm)
 * with the damper at 0.0 A, 2.5 A and 2.5 A pulsed at 0.5 Hz, and each of the compensation
 * modes of common/models/compensation.h (designed on the paper's models). The plant is, by default,
 * each of five: the models themselves ("nominal"), their bandwidth x0.7 and x1.3, their gain
 * x0.8 and x1.2 (common/models/plant.h, drths_plant_model_scale); --experiment or the --plant-*
 * options run one plant instead. It prints the RMS error norm of the measured against the
 * desired displacement, 100 sqrt(sum (xm - xd)^2 / sum xd^2) % (the paper's eq 31), with the
 * noise floor (the same norm of the measured against the TRUE displacement: what sensor noise
 * and quantisation alone cost) beside it, the paper's best figure of the row and the goal, half
 * of Table 2's best of the band.
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

#include "common/config/config.h"
#include "common/config/setup.h"
#include "common/models/compensation.h"
#include "common/models/groundmotion.h"
#include "common/models/specimen.h"
#include "common/platform/cli.h"
#include "common/platform/error.h"

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

/* Half of Table 2's best figure in each band (0.942 % at 0-5 Hz, 3.45 % at 0-15 Hz). */
#define GOAL_5HZ_PCT (0.5 * 0.942)
#define GOAL_15HZ_PCT (0.5 * 3.45)

/* The paper's three modes (its feedforward on the average model), the feedforward scheduled on
 * the commanded damper current (the experiment file's `feedforward`) and the adaptive one
 * (`adaptive`, scheduled the same way). */
static const drths_compensation_t MODES[] = {
    DRTHS_COMPENSATION_NONE, DRTHS_COMPENSATION_POLYNOMIAL, DRTHS_COMPENSATION_FEEDFORWARD_AVERAGE,
    DRTHS_COMPENSATION_FEEDFORWARD, DRTHS_COMPENSATION_ADAPTIVE};
/* The experiment file's names of the modes. */
static const char *const MODE_NAMES[] = {"none", "polynomial", "feedforward-average", "feedforward",
                                         "adaptive"};
#define NMODES 5
#define MODE_FF 3
#define MODE_ADAPTIVE 4

/* A plant of the study: how it differs from the models (common/models/plant.h). */
typedef struct {
    char name[96];
    drths_plant_scale_t sc;
} plant_t;

static const plant_t STUDY[] = {
    {"nominal", {1.0, 1.0, 1.0, 1.0}},        {"bandwidth x0.7", {1.0, 0.7, 1.0, 1.0}},
    {"bandwidth x1.3", {1.0, 1.3, 1.0, 1.0}}, {"gain x0.8", {0.8, 1.0, 1.0, 1.0}},
    {"gain x1.2", {1.2, 1.0, 1.0, 1.0}},
};
#define NSTUDY ((int)(sizeof STUDY / sizeof STUDY[0]))

typedef struct {
    double rms_pct, rms_true_pct, floor_pct, ti_m2, peak_m;
    double theta[4];
    uint64_t ticks, extrapolated, clamped, fallbacks;
    /* The adaptive mode: ticks each factor sat at a bound, of observed ticks. */
    uint64_t at_bound[4], observed;
    /* Largest |u(k) - u(k-1)| and |r(k) - r(k-1)| over the run (drths-report's drive step
     * criterion: their ratio). */
    double drive_step_m, cmd_step_m;
} result_t;

/* The largest fraction of the run any factor sat at a bound, and which factor (-1: none). */
static double at_bound_max(const result_t *r, int *which)
{
    double f = 0.0;
    *which = -1;
    for (int k = 0; k < 4 && r->observed > 0; k++) {
        const double v = (double)r->at_bound[k] / (double)r->observed;
        if (v > f) {
            f = v;
            *which = k;
        }
    }
    return f;
}

static double step_ratio(const result_t *r)
{
    return r->cmd_step_m > 0.0 ? r->drive_step_m / r->cmd_step_m : 0.0;
}

/* The command line. */
typedef struct options {
    double duration, poly_lead_s; /* poly_lead_s < 0: the compensator's default lead */
    long seed, lookahead; /* lookahead < 0: what the feedforward asks for */
    const char *csv_path;
    double window_s, bound;         /* the adaptive mode's window and bound (0: from range) */
    drths_comp_plant_range_t range; /* the adaptive mode's plant range; --draws draws from it */
    int one_plant;          /* --experiment or --plant-*: the one plant below, not the study */
    plant_t plant;
    long draws; /* --draws: this many plants drawn from range (0: none) */
} options_t;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: " PROG " [--duration S] [--seed N] [--lookahead-ticks K] [--poly-lead-ms MS]\n"
        "                      [--experiment FILE | --plant-gain G --plant-bandwidth F\n"
        "                       --plant-real-pole R --plant-complex-pole C | --draws N]\n"
        "                      [--adaptive-bound B] [--csv FILE]\n"
        "Table 2 of Phillips & Spencer 2013 on the virtual plant: the actuator follows\n"
        "band-limited white-noise displacements (0-5 Hz RMS 2.78 mm, 0-15 Hz RMS\n"
        "0.595 mm) with the 200-kN damper at 0.0 A, 2.5 A and 2.5 A pulsed at 0.5 Hz,\n"
        "with compensation none, polynomial, feedforward-average (the paper's),\n"
        "feedforward (scheduled on the commanded damper current) and adaptive (the\n"
        "scheduled feedforward with its coefficients identified online), each on a plant\n"
        "equal to the paper's models (nominal) and on plants that differ from them\n"
        "(bandwidth x0.7 and x1.3, gain x0.8 and x1.2). Prints the RMS error norm\n"
        "100 sqrt(sum (xm - xd)^2 / sum xd^2) in percent, the noise floor (the same norm\n"
        "of the measured against the true displacement), the paper's best figure of the\n"
        "row and the goal (half of Table 2's best in the band: 0.471 %% and 1.725 %%).\n"
        "\n"
        "  --duration S         length of each desired displacement, 3 to 3600 s (default 60)\n"
        "  --seed N             white-noise seed (default 4; the 15 Hz band uses N + 1)\n"
        "  --lookahead-ticks K  future commands the compensator gets, 0 to %d (default:\n"
        "                       what the feedforward asks for, 32)\n"
        "  --poly-lead-ms MS    lead of the polynomial mode, 0 to 1000 ms (default 9.05)\n"
        "  --experiment FILE    one plant: the experiment file's actuator.plant_scale, and\n"
        "                       its actuator.adaptive_window_s, adaptive_bound and\n"
        "                       adaptive_range\n"
        "  --draws N            N plants (1 to 1000) drawn at random from the adaptive\n"
        "                       mode's plant range (default gain 0.7-1.4, bandwidth, real\n"
        "                       pole and complex pair 0.5-2; log-uniform, each factor on\n"
        "                       its own), reproducible from --seed; with --experiment,\n"
        "                       from its actuator.adaptive_range\n"
        "  --adaptive-bound B   the adaptive mode's factors in [1/B, B] (1 to 100) instead\n"
        "                       of the bounds derived from its plant range (B = 4 was the\n"
        "                       default before issue 30)\n"
        "  --plant-gain G, --plant-bandwidth F, --plant-real-pole R,\n"
        "  --plant-complex-pole C\n"
        "                       one plant: these factors on the models (0.1 to 10, default 1;\n"
        "                       docs/experiment-file.md, actuator.plant_scale)\n"
        "  --csv FILE           one row per run (case, band, plant, mode) with every indicator\n"
        "  -h, --help           print this help and exit\n"
        "  --version            print the version and exit\n"
        "\n"
        "The lookahead is the playout preview; with fewer ticks than the feedforward asks\n"
        "for, its fit takes more past commands and extrapolates, at a lower degree (the\n"
        "ticks are counted). The default polynomial lead is 1/p + a/b of the average model\n"
        "plus half a tick. Plant: the paper's 3-pole models at 0 A and 2.5 A, interpolated\n"
        "by the damper's effective current; one-tick I/O delay; sensor noise 2 um and a\n"
        "16-bit converter over +/- 0.1 m; 5000 Hz. The compensators are designed on the\n"
        "average model. The desired displacement fades in and out over %g s.\n"
        "Beside the adaptive mode: \"at bound\", the largest fraction of the run one of\n"
        "its factors sat at a bound and which (t3:12.5%%: theta3, 12.5 %% of the ticks;\n"
        "-: none), and \"step\", its largest drive change in one tick over the command's\n"
        "(drths-report's drive criterion, at most 2).\n"
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

/* One run. For FEEDFORWARD and ADAPTIVE the inverse is scheduled on the damper current as the
 * actuator site does it: the COMMANDED current (what a lab knows) passed through the model of
 * the damper's current dynamics (common/models/compensation.h), not the plant's own internal current.
 * The adaptive mode observes the drive written and the displacement read each tick, as the
 * actuator site does. */
static int run(const case_t *cs, drths_compensation_t mode, const plant_t *pl, const double *r,
               long n, double dt, const options_t *opt, result_t *res, drths_error_t *err)
{
    drths_specimen_params_t sp;
    drths_specimen_params_default(&sp, DRTHS_DAMPER_PHILLIPS2013);
    sp.plant_scale = pl->sc;
    drths_specimen_t spec;
    int rc = drths_specimen_init(&spec, &sp, dt, err);
    if (rc < 0)
        return rc;
    const int scheduled =
        mode == DRTHS_COMPENSATION_FEEDFORWARD || mode == DRTHS_COMPENSATION_ADAPTIVE;
    drths_comp_t comp;
    rc = drths_comp_init(&comp, mode, &DRTHS_PLANT_AVERAGE, sp.io_delay_ticks, dt, err);
    if (rc == 0 && opt->poly_lead_s >= 0.0 && mode == DRTHS_COMPENSATION_POLYNOMIAL)
        rc = drths_comp_set_poly_lead(&comp, opt->poly_lead_s, err);
    if (rc == 0 && mode == DRTHS_COMPENSATION_ADAPTIVE)
        rc = drths_comp_set_adaptive_range(&comp, &opt->range, err);
    if (rc == 0 && mode == DRTHS_COMPENSATION_ADAPTIVE)
        rc = drths_comp_set_adaptive(&comp, opt->window_s, opt->bound, err);
    if (rc == 0 && scheduled)
        rc = drths_comp_schedule(&comp, &DRTHS_PLANT_0A, &DRTHS_PLANT_2P5A, 2.5, err);
    if (rc == 0 && scheduled)
        rc = drths_comp_current_model(&comp, &sp.damper, err);
    if (rc < 0) {
        drths_specimen_close(&spec);
        return rc;
    }
    drths_specimen_reset(&spec, 0.0, current_at(cs, 0, dt));
    drths_tracking_t tr, tr_true, tr_floor;
    drths_tracking_init(&tr);
    drths_tracking_init(&tr_true);
    drths_tracking_init(&tr_floor);
    drths_comp_reset_command(&comp, current_at(cs, 0, dt));
    drths_comp_adapt_reset(&comp, 0.0);
    double u_prev = 0.0;
    res->drive_step_m = res->cmd_step_m = 0.0;
    for (long k = 0; k < n; k++) {
        drths_comp_set_command(&comp, current_at(cs, k, dt));
        const double u = drths_comp_drive(&comp, &r[k - 3], &r[k + 1], (int)opt->lookahead);
        if (k > 0) {
            res->drive_step_m = fmax(res->drive_step_m, fabs(u - u_prev));
            res->cmd_step_m = fmax(res->cmd_step_m, fabs(r[k] - r[k - 1]));
        }
        u_prev = u;
        drths_specimen_meas_t m;
        /* A converter at its end would be a HOLD in the actuator site; here the reading is
         * kept (the study's amplitudes are far from the ends). */
        (void)drths_specimen_step(&spec, u, 0.0, current_at(cs, k, dt), &m);
        drths_comp_observe(&comp, u, m.disp_m);
        drths_tracking_add(&tr, r[k], m.disp_m);
        drths_tracking_add(&tr_true, r[k], m.true_disp_m);
        /* The noise floor: the measured against the true displacement, on the desired's scale
         * (sum xd^2), so that it compares with eq 31. */
        tr_floor.sum_e2 += (m.disp_m - m.true_disp_m) * (m.disp_m - m.true_disp_m);
        tr_floor.sum_d2 += r[k] * r[k];
        tr_floor.n++;
    }
    res->rms_pct = drths_tracking_rms_pct(&tr);
    res->rms_true_pct = drths_tracking_rms_pct(&tr_true);
    res->floor_pct = drths_tracking_rms_pct(&tr_floor);
    res->ti_m2 = drths_tracking_ti(&tr);
    res->peak_m = drths_tracking_max_err(&tr);
    res->ticks = comp.ticks;
    res->extrapolated = comp.extrapolated_ticks;
    for (int k = 0; k < 4; k++)
        res->theta[k] = comp.theta[k];
    res->clamped = comp.ad.clamped;
    res->fallbacks = comp.ad.fallbacks;
    res->observed = comp.ad.observed;
    for (int k = 0; k < 4; k++)
        res->at_bound[k] = comp.ad.at_bound_ticks[k];
    drths_comp_close(&comp);
    drths_specimen_close(&spec);
    return 0;
}

/* parse_options and the other steps of main() return GO_ON when main() should carry on, or the
 * exit code main() returns (0 after --help or --version). */
#define GO_ON (-1)

/* The desired displacements of the two bands (0-5 Hz, 0-15 Hz), as make_desired returns them. */
typedef struct inputs {
    double *blocks[2], *desired[2];
    long nsamp[2];
} inputs_t;

/* The table's totals for the closing lines: cells at or below the goal, of how many, for the
 * scheduled feedforward and the adaptive mode on the nominal and on the other plants, and the
 * adaptive mode's worst cell on a plant that is not the nominal one. */
typedef struct totals {
    int met[2][2], cells[2];
    double worst_ratio;
    char worst[1024];
    double max_at_bound, max_step_ratio; /* the adaptive mode's, over the rows */
    uint64_t ff_extrap, ff_ticks;
} totals_t;

static int plant_option(const char *name, const char *arg, double *v)
{
    return drths_cli_double(PROG, name, arg, 0.1, 10.0, "", v) != 0 ? DRTHS_EXIT_USAGE : GO_ON;
}

/* --experiment: the plant and the adaptive settings of an experiment file. */
static int load_experiment(const char *path, options_t *opt)
{
    drths_experiment_t exp;
    drths_error_t err;
    drths_error_clear(&err);
    if (drths_experiment_load(&exp, path, &err) < 0) {
        fprintf(stderr, PROG ": %s\n", err.msg);
        return DRTHS_EXIT_CONFIG;
    }
    opt->plant.sc = (drths_plant_scale_t){
        exp.actuator.plant_scale.gain, exp.actuator.plant_scale.bandwidth,
        exp.actuator.plant_scale.real_pole, exp.actuator.plant_scale.complex_pole};
    opt->window_s = exp.actuator.adaptive_window_s;
    opt->bound = exp.actuator.adaptive_bound;
    drths_setup_adaptive_range(&exp, &opt->range);
    drths_experiment_close(&exp);
    return GO_ON;
}

static int parse_options(int argc, char **argv, options_t *opt)
{
    enum {
        OPT_DURATION = 1,
        OPT_SEED,
        OPT_LOOKAHEAD,
        OPT_POLY_LEAD,
        OPT_CSV,
        OPT_EXPERIMENT,
        OPT_GAIN,
        OPT_BANDWIDTH,
        OPT_REAL,
        OPT_COMPLEX,
        OPT_DRAWS,
        OPT_BOUND
    };
    static const struct option opts[] = {
        {"duration", required_argument, NULL, OPT_DURATION},
        {"seed", required_argument, NULL, OPT_SEED},
        {"lookahead-ticks", required_argument, NULL, OPT_LOOKAHEAD},
        {"poly-lead-ms", required_argument, NULL, OPT_POLY_LEAD},
        {"csv", required_argument, NULL, OPT_CSV},
        {"experiment", required_argument, NULL, OPT_EXPERIMENT},
        {"plant-gain", required_argument, NULL, OPT_GAIN},
        {"plant-bandwidth", required_argument, NULL, OPT_BANDWIDTH},
        {"plant-real-pole", required_argument, NULL, OPT_REAL},
        {"plant-complex-pole", required_argument, NULL, OPT_COMPLEX},
        {"draws", required_argument, NULL, OPT_DRAWS},
        {"adaptive-bound", required_argument, NULL, OPT_BOUND},
        DRTHS_CLI_OPTIONS_COMMON,
        {NULL, 0, NULL, 0},
    };
    *opt = (options_t){.duration = 60.0,
                       .poly_lead_s = -1.0,
                       .seed = 4,
                       .lookahead = -1,
                       .window_s = DRTHS_COMP_ADAPT_WINDOW_S,
                       .bound = 0.0,
                       .range = DRTHS_COMP_PLANT_RANGE_DEFAULT,
                       .plant = {"", {1.0, 1.0, 1.0, 1.0}}};
    double lead_ms = 0.0;
    const char *experiment = NULL;
    int factors = 0, rc;
    double bound = -1.0;

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
        case OPT_DRAWS:
            if (drths_cli_long(PROG, "--draws", optarg, 1, 1000, &opt->draws))
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_BOUND:
            if (drths_cli_double(PROG, "--adaptive-bound", optarg, 1.0, 100.0, "", &bound))
                return DRTHS_EXIT_USAGE;
            break;
        case OPT_EXPERIMENT:
            experiment = optarg;
            break;
        case OPT_GAIN:
        case OPT_BANDWIDTH:
        case OPT_REAL:
        case OPT_COMPLEX: {
            static const char *const names[] = {"--plant-gain", "--plant-bandwidth",
                                                "--plant-real-pole", "--plant-complex-pole"};
            double *v[] = {&opt->plant.sc.gain, &opt->plant.sc.bandwidth, &opt->plant.sc.real_pole,
                           &opt->plant.sc.complex_pole};
            if ((rc = plant_option(names[c - OPT_GAIN], optarg, v[c - OPT_GAIN])) != GO_ON)
                return rc;
            factors = 1;
            break;
        }
        default:
            return drths_cli_other_option(PROG, c, usage);
        }
    }
    if (optind < argc)
        return drths_cli_unexpected_argument(PROG, argv[optind]);
    if (experiment && factors)
        return drths_cli_usage_error(PROG, "--experiment and the --plant-* options exclude each "
                                           "other (the file gives the plant)");
    if (opt->draws && factors)
        return drths_cli_usage_error(PROG, "--draws and the --plant-* options exclude each "
                                           "other (the draws give the plants)");
    if (experiment && (rc = load_experiment(experiment, opt)) != GO_ON)
        return rc;
    if (bound > 0.0)
        opt->bound = bound;
    if (opt->draws) {
        opt->one_plant = 0;
        return GO_ON;
    }
    if (experiment || factors) {
        opt->one_plant = 1;
        snprintf(opt->plant.name, sizeof opt->plant.name, "g%g f%g r%g c%g", opt->plant.sc.gain,
                 opt->plant.sc.bandwidth, opt->plant.sc.real_pole, opt->plant.sc.complex_pole);
    }
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
                  "ticks,paper_best_pct,goal_pct,plant,plant_gain,plant_bandwidth,"
                  "plant_real_pole,plant_complex_pole,noise_floor_pct,theta0,theta1,theta2,"
                  "theta3,adaptive_clamped,adaptive_fallbacks,observed_ticks,at_bound_ticks0,"
                  "at_bound_ticks1,at_bound_ticks2,at_bound_ticks3,max_drive_step_m,"
                  "max_command_step_m,drive_step_ratio\n");
    return GO_ON;
}

/* Header: what was run, so a table pasted into a lab notebook is self-describing. */
static void print_header(const options_t *opt, int ff_need, double lead_ms)
{
    printf("drths-tracking: Phillips & Spencer 2013, Table 2, on the virtual plant\n");
    printf("  %g Hz, %g s per run (%g s fade in/out), seed %ld (0-5 Hz) and %ld (0-15 Hz)\n",
           RATE_HZ, opt->duration, TAPER_S, opt->seed, opt->seed + 1);
    printf("  plant: the paper's 3-pole models at 0 A and 2.5 A, interpolated by the damper's\n"
           "  effective current, times the plant's factors (gain g, bandwidth f, real pole r,\n"
           "  complex pair c); 200-kN damper attached; I/O delay 1 tick; sensor noise 2 um,\n"
           "  16-bit over +/- 0.1 m. Every compensator is designed on the paper's models.\n"
           "  \"ff average\": feedforward on the average model (the paper's method,\n"
           "  `feedforward-average`); \"feedforward\": the inverse scheduled on the COMMANDED\n"
           "  damper current (`feedforward`); \"adaptive\": that inverse with its four\n"
           "  coefficients identified online (`adaptive`, window %g s).\n",
           opt->window_s);
    if (opt->bound > 0.0) {
        printf("  adaptive factors bounded to [1/%g, %g] (--adaptive-bound)\n", opt->bound,
               opt->bound);
    } else {
        printf("  adaptive factors bounded from the plant range gain %g-%g, bandwidth %g-%g,\n"
               "  real pole %g-%g, complex pair %g-%g (margin x%g):\n ",
               opt->range.lo[0], opt->range.hi[0], opt->range.lo[1], opt->range.hi[1],
               opt->range.lo[2], opt->range.hi[2], opt->range.lo[3], opt->range.hi[3],
               DRTHS_COMP_ADAPT_MARGIN);
        drths_comp_t probe;
        drths_error_t err;
        drths_error_clear(&err);
        if (drths_comp_init(&probe, DRTHS_COMPENSATION_ADAPTIVE, &DRTHS_PLANT_AVERAGE, 1,
                            1.0 / RATE_HZ, &err) == 0 &&
            drths_comp_set_adaptive_range(&probe, &opt->range, &err) == 0 &&
            drths_comp_schedule(&probe, &DRTHS_PLANT_0A, &DRTHS_PLANT_2P5A, 2.5, &err) == 0) {
            for (int k = 0; k < 4; k++)
                printf("%s theta%d %.3g-%.3g", k ? "," : "", k, probe.ad.lo[k], probe.ad.hi[k]);
        }
        printf("\n");
    }
    printf("  lookahead %ld ticks (feedforward needs %d%s); polynomial lead %.3f ms\n",
           opt->lookahead, ff_need, opt->lookahead < ff_need ? ", the rest extrapolated" : "",
           lead_ms);
    printf(
        "  RMS error norm of measured vs desired displacement (eq 31), %%; \"floor\": the\n"
        "  same norm of the measured vs the true displacement (sensor noise, quantisation);\n"
        "  \"paper\": Table 2's best of the row; \"goal\": half of Table 2's best of the band\n");
}

static void print_columns(void)
{
    printf("\n");
    printf("%-22s %-8s %-23s %8s %10s %10s %11s %9s %7s %7s %7s %10s %5s\n", "damper current",
           "band", "plant", "none", "polynomial", "ff average", "feedforward", "adaptive", "floor",
           "paper", "goal", "at bound", "step");
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

/* splitmix64 (Steele, Lea & Flood 2014): the draws' generator, the same on every machine. */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* --draws: opt->draws plants, each factor log-uniform over opt->range, from --seed; listed. */
static void draw_plants(const options_t *opt, plant_t *out)
{
    uint64_t st = (uint64_t)opt->seed ^ 0x3030303030303030ULL; /* a stream of its own */
    printf("  %ld plants drawn (seed %ld), log-uniform over the adaptive mode's range:\n",
           opt->draws, opt->seed);
    for (long i = 0; i < opt->draws; i++) {
        double v[4];
        for (int k = 0; k < 4; k++) {
            const double u = (double)(splitmix64(&st) >> 11) * 0x1.0p-53;
            /* Two decimals, so the name given is the plant run (--plant-* reproduces it). */
            v[k] = round(100.0 * opt->range.lo[k] * pow(opt->range.hi[k] / opt->range.lo[k], u)) /
                   100.0;
        }
        out[i].sc = (drths_plant_scale_t){v[0], v[1], v[2], v[3]};
        snprintf(out[i].name, sizeof out[i].name, "g%.2f f%.2f r%.2f c%.2f", v[0], v[1], v[2],
                 v[3]);
        printf("    draw %-3ld %s\n", i + 1, out[i].name);
    }
}

static int is_nominal(const plant_t *pl)
{
    return pl->sc.gain == 1.0 && pl->sc.bandwidth == 1.0 && pl->sc.real_pole == 1.0 &&
           pl->sc.complex_pole == 1.0;
}

/* One row of the table: every mode on one case and one plant, printed and appended to csv. */
static int run_case(const case_t *cs, const plant_t *pl, const options_t *opt, double dt,
                    const inputs_t *in, FILE *csv, totals_t *tot)
{
    drths_error_t err;
    drths_error_clear(&err);
    const int b = cs->f_hi_hz > 10.0 ? 1 : 0;
    result_t res[NMODES];
    for (int m = 0; m < NMODES; m++) {
        if (run(cs, MODES[m], pl, in->desired[b], in->nsamp[b], dt, opt, &res[m], &err) < 0)
            return drths_cli_error(PROG, "%s", err.msg);
    }
    tot->ff_extrap += res[MODE_FF].extrapolated;
    tot->ff_ticks += res[MODE_FF].ticks;
    const double goal = b ? GOAL_15HZ_PCT : GOAL_5HZ_PCT;
    const int other = !is_nominal(pl);
    tot->cells[other]++;
    tot->met[other][0] += res[MODE_FF].rms_pct <= goal;
    tot->met[other][1] += res[MODE_ADAPTIVE].rms_pct <= goal;
    char band[32];
    snprintf(band, sizeof band, "0-%.0f Hz", cs->f_hi_hz);
    if (other && !(res[MODE_ADAPTIVE].rms_pct / goal <= tot->worst_ratio)) {
        tot->worst_ratio = res[MODE_ADAPTIVE].rms_pct / goal;
        snprintf(tot->worst, sizeof tot->worst, "%.3f %% (goal %.3f %%): %s, %s, %s",
                 res[MODE_ADAPTIVE].rms_pct, goal, cs->current_name, band, pl->name);
    }
    const result_t *ra = &res[MODE_ADAPTIVE];
    int which;
    const double fb = at_bound_max(ra, &which);
    char bnd[24];
    /* One word, so the columns after it stay countable from the end. */
    if (which < 0)
        snprintf(bnd, sizeof bnd, "-");
    else
        snprintf(bnd, sizeof bnd, "t%d:%.1f%%", which, 100.0 * fb);
    if (fb > tot->max_at_bound)
        tot->max_at_bound = fb;
    if (step_ratio(ra) > tot->max_step_ratio)
        tot->max_step_ratio = step_ratio(ra);
    printf("%-22s %-8s %-23s %8.3f %10.3f %10.3f %11.3f %9.3f %7.3f %7.3f %7.3f %10s %5.2f\n",
           cs->current_name, band, pl->name, res[0].rms_pct, res[1].rms_pct, res[2].rms_pct,
           res[3].rms_pct, res[4].rms_pct, ra->floor_pct, cs->paper_pct, goal, bnd, step_ratio(ra));
    fflush(stdout);
    for (int m = 0; csv && m < NMODES; m++)
        fprintf(csv,
                "%s,0-%g,%.6g,%s,%ld,%.6g,%.6g,%.6g,%.6g,%" PRIu64 ",%" PRIu64 ",%g,%g,%s,%g,%g,"
                "%g,%g,%.6g,%.6g,%.6g,%.6g,%.6g,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.6g,%.6g,%.6g\n",
                cs->current_name, cs->f_hi_hz, cs->rms_m, MODE_NAMES[m], opt->lookahead,
                res[m].rms_pct, res[m].rms_true_pct, res[m].ti_m2, res[m].peak_m,
                res[m].extrapolated, res[m].ticks, cs->paper_pct, goal, pl->name, pl->sc.gain,
                pl->sc.bandwidth, pl->sc.real_pole, pl->sc.complex_pole, res[m].floor_pct,
                res[m].theta[0], res[m].theta[1], res[m].theta[2], res[m].theta[3], res[m].clamped,
                res[m].fallbacks, res[m].observed, res[m].at_bound[0], res[m].at_bound[1],
                res[m].at_bound[2], res[m].at_bound[3], res[m].drive_step_m, res[m].cmd_step_m,
                step_ratio(&res[m]));
    return 0;
}

static void print_summary(const totals_t *tot)
{
    printf("\nat or below the goal: nominal plant: feedforward %d of %d rows, adaptive %d of %d",
           tot->met[0][0], tot->cells[0], tot->met[0][1], tot->cells[0]);
    printf("\n                      other plants:  feedforward %d of %d rows, adaptive %d of %d\n",
           tot->met[1][0], tot->cells[1], tot->met[1][1], tot->cells[1]);
    if (tot->cells[1])
        printf("worst adaptive row on another plant: %s\n", tot->worst);
    printf("the feedforward extrapolated %" PRIu64 " of %" PRIu64
           " ticks (lookahead short of what it needs)\n",
           tot->ff_extrap, tot->ff_ticks);
    printf("adaptive: longest time a factor sat at a bound %.1f %% of a run; largest drive step "
           "/ command step %.2f (criterion 2)\n",
           100.0 * tot->max_at_bound, tot->max_step_ratio);
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
    if (rc == GO_ON && opt.lookahead < 0)
        opt.lookahead = ff_need;
    if (rc == GO_ON)
        rc = open_csv(&opt, &csv);
    if (rc != GO_ON)
        return rc;
    plant_t *drawn = NULL;
    if (opt.draws) {
        drawn = calloc((size_t)opt.draws, sizeof *drawn);
        if (!drawn) {
            if (csv)
                fclose(csv);
            return drths_cli_error(PROG, "no memory for %ld draws", opt.draws);
        }
    }
    print_header(&opt, ff_need, lead_ms);
    if (drawn)
        draw_plants(&opt, drawn);
    print_columns();
    if ((rc = make_inputs(&opt, dt, csv, &in)) != GO_ON) {
        free(drawn);
        return rc;
    }

    int status = 0;
    totals_t tot = {0};
    const plant_t *plants = opt.one_plant ? &opt.plant : STUDY;
    int nplants = opt.one_plant ? 1 : NSTUDY;
    if (drawn) {
        plants = drawn;
        nplants = (int)opt.draws;
    }
    for (int i = 0; i < NCASES && status == 0; i++)
        for (int p = 0; p < nplants && status == 0; p++)
            status = run_case(&CASES[i], &plants[p], &opt, dt, &in, csv, &tot);
    if (status == 0)
        print_summary(&tot);
    free(drawn);
    free(in.blocks[0]);
    free(in.blocks[1]);
    if (csv && fclose(csv) != 0 && status == 0)
        status = drths_cli_error(PROG, "--csv: %s: %s", opt.csv_path, strerror(errno));
    return status;
}
