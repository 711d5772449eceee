/* drths-check: the pre-flight check of an experiment file, run before a test day (and by each
 * laboratory on its own copy). It loads the file as both sites do, runs the reference (the
 * structure with the damper model, no actuator, no network: site-numerical/reference.h) and
 * compares what the reference predicts the actuator must do with every limit of the actuator
 * site, and every limit with its converter's range. It also flags values that are valid but
 * unlikely to be meant (tonnes typed as kg, a scale that drives the reference past a limit),
 * and prints the shared text and its fingerprint, which two laboratories compare line by line.
 */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/config.h"
#include "common/config/damperfile.h"
#include "common/config/setup.h"
#include "common/platform/cli.h"
#include "common/platform/error.h"
#include "protocol/crypto.h"
#include "protocol/fingerprint.h"
#include "site-numerical/reference.h"

#define PROG "drths-check"

/* A reference peak above this share of its limit leaves too little margin for what the
 * reference does not model (the actuator's lag, its compensation's lead, sensor noise). */
#define MARGIN_SHARE 0.8
/* Plausible ranges of a building model tested in a laboratory. */
#define FREQ_LO_HZ 0.1
#define FREQ_HI_HZ 50.0
#define MASS_MIN_KG 1000.0
#define PGA_MAX_G 2.0

typedef struct {
    int warnings; /* WARNING and ERROR rows and implausible values: exit 1 */
    int refused;  /* a limit beyond its converter's range: exit 2 */
    int printed;  /* warning lines printed (the first is set off by a blank line) */
} tally_t;

/* "WARNING: ..." on stdout, in the report, counted. */
static void warn(tally_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(tally_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%sWARNING: ", t->printed++ ? "" : "\n");
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
    t->warnings++;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: " PROG " EXPERIMENT.yaml\n"
        "       " PROG " --shared-text EXPERIMENT.yaml\n"
        "Pre-flight check of an experiment file. Loads it as both sites do (fields that do\n"
        "not apply to its modes are listed as notes), runs the reference (the structure with\n"
        "the damper model, no actuator), and prints a table of the peak stroke, drive,\n"
        "velocity and force it predicts against each limit of the actuator site (value,\n"
        "limit, share of the limit, OK / WARNING / ERROR), each limit against its converter's\n"
        "range, warnings on values that are valid but unlikely to be meant (natural\n"
        "frequencies outside 0.1..50 Hz, then naming a floor mass under 1000 kg as the\n"
        "likely cause; a peak ground acceleration over 2 g; a ground_motion.scale that takes\n"
        "the reference past a limit), then the shared text and its fingerprint: the two\n"
        "laboratories compare them line by line (both sites refuse each other when the\n"
        "fingerprints differ).\n"
        "\n"
        "  --shared-text  print only the shared text (for diff with the other laboratory's)\n"
        "  -h, --help     print this help and exit\n"
        "  --version      print the version and exit\n"
        "\n"
        "Verdicts: OK below 80 %% of the limit; WARNING from 80 %% to 100 %% (too little margin\n"
        "for the actuator's lag and the compensation's lead); ERROR above it (the run would\n"
        "stop in HOLD). A limit beyond its converter's range (actuator.displacement_range_m,\n"
        "actuator.force_range_N) can never be measured and refuses the file (exit 2).\n"
        "\n");
    drths_cli_print_exit_codes(f, "warnings: a WARNING or ERROR row or an implausible value");
}

static const char *verdict(double share)
{
    return share > 1.0 ? "ERROR" : share >= MARGIN_SHARE ? "WARNING" : "OK";
}

/* One row of the reference table: a peak against its limit, in display units (scale, unit). */
static void limit_row(tally_t *t, const char *what, double value, double limit, const char *field,
                      double scale, const char *unit)
{
    double share = value / limit;
    const char *v = verdict(share);
    if (strcmp(v, "OK") != 0)
        t->warnings++;
    printf("  %-22s %11.4g %-4s %11.4g %-4s %6.0f %%  %-7s  %s\n", what, value * scale, unit,
           limit * scale, unit, 100.0 * share, v, field);
}

/* One row of the converter table: a limit against its converter's full scale. A limit beyond the
 * range refuses the file; at the range, a measured limit can never trip (a saturated converter
 * reads its end value), while a command limit at the range is the usual choice. */
static void range_row(tally_t *t, const char *field, double limit, const char *range_field,
                      double range, int measured, double scale, const char *unit)
{
    double share = limit / range;
    const char *v = share > 1.0 ? "ERROR" : (measured && share >= 1.0) ? "WARNING" : "OK";
    if (share > 1.0)
        t->refused++;
    else if (strcmp(v, "OK") != 0)
        t->warnings++;
    printf("  %-38s %11.4g %-3s %6.0f %% of %-32s %s\n", field, limit * scale, unit, 100.0 * share,
           range_field, v);
}

static void converter_table(tally_t *t, const drths_experiment_t *x)
{
    const double dr = x->actuator.displacement_range_m, fr = x->actuator.force_range_N;
    printf("\nlimits against the converters' ranges (+/- full scale):\n");
    range_row(t, "physical.limit_displacement_m", x->physical.limit_displacement_m,
              "actuator.displacement_range_m", dr, 0, 1e3, "mm");
    range_row(t, "physical.limit_drive_m", x->physical.limit_drive_m,
              "actuator.displacement_range_m", dr, 0, 1e3, "mm");
    range_row(t, "physical.limit_measured_displacement_m",
              x->physical.limit_measured_displacement_m, "actuator.displacement_range_m", dr, 1,
              1e3, "mm");
    range_row(t, "physical.limit_force_N", x->physical.limit_force_N, "actuator.force_range_N", fr,
              1, 1e-3, "kN");
}

static void reference_table(tally_t *t, const drths_experiment_t *x,
                            const drths_reference_summary_t *s)
{
    const double stroke = s->peak_damper_disp_m;
    printf("\nreference (structure and damper model, no actuator): %ld steps, %.2f s simulated\n",
           s->steps, s->duration_s);
    printf("  %-22s %16s %16s %8s  %-7s  %s\n", "quantity", "reference peak", "limit", "share",
           "verdict", "limit field");
    limit_row(t, "stroke (command)", stroke, x->physical.limit_displacement_m,
              "physical.limit_displacement_m", 1e3, "mm");
    /* The drive is the command plus the compensation's lead, which the reference has not:
     * the stroke is its lower bound. */
    limit_row(t, "drive (at least)", stroke, x->physical.limit_drive_m, "physical.limit_drive_m",
              1e3, "mm");
    limit_row(t, "measured displacement", stroke, x->physical.limit_measured_displacement_m,
              "physical.limit_measured_displacement_m", 1e3, "mm");
    limit_row(t, "velocity", s->peak_damper_vel_m_s, x->physical.limit_velocity_m_s,
              "physical.limit_velocity_m_s", 1e3, "mm/s");
    limit_row(t, "drive vel. (at least)", s->peak_damper_vel_m_s,
              x->physical.limit_drive_velocity_m_s, "physical.limit_drive_velocity_m_s", 1e3,
              "mm/s");
    limit_row(t, "force", s->peak_force_N, x->physical.limit_force_N, "physical.limit_force_N",
              1e-3, "kN");
}

/* The smallest diagonal mass (the floor masses of a shear building) and its floor. */
static double lightest_floor(const drths_experiment_t *x, int *floor)
{
    double m = INFINITY;
    for (int i = 0; i < x->n_dof; i++)
        if (x->structure.mass_kg[i * x->n_dof + i] < m) {
            m = x->structure.mass_kg[i * x->n_dof + i];
            *floor = i + 1;
        }
    return m;
}

static void plausibility(tally_t *t, const drths_experiment_t *x,
                         const drths_reference_summary_t *s, double pga_m_s2)
{
    const char *mass_field = x->structure.model == DRTHS_STRUCTURE_SHEAR_BUILDING
                                 ? "structure.floor_mass_kg"
                                 : "structure.mass_kg (diagonal)";
    int floor = 1, bad_freq = 0;
    double m = lightest_floor(x, &floor);
    for (int i = 0; i < s->n; i++)
        if (s->freq_hz[i] < FREQ_LO_HZ || s->freq_hz[i] > FREQ_HI_HZ) {
            bad_freq = 1;
            warn(t,
                 "structure: mode %d at %.4g Hz is outside %g..%g Hz: check %s and the "
                 "stiffness units (kg, N/m)",
                 i + 1, s->freq_hz[i], FREQ_LO_HZ, FREQ_HI_HZ, mass_field);
        }
    /* A light floor is a small laboratory model when its frequencies are plausible (the Dyke
     * et al. model weighs 98.3 kg a floor), and tonnes typed as kg when they are not. */
    if (m < MASS_MIN_KG && bad_freq)
        warn(t, "%s: floor %d weighs %g kg, under a tonne: are the masses in kg (not tonnes)?",
             mass_field, floor, m);
    else if (m < MASS_MIN_KG)
        printf("note: %s: floor %d weighs %g kg, under a tonne, with plausible frequencies (a "
               "small laboratory model)\n",
               mass_field, floor, m);
    if (pga_m_s2 > PGA_MAX_G * DRTHS_G_M_S2)
        warn(t,
             "ground_motion: peak ground acceleration %.3g g (ground_motion.scale = %g) is over "
             "%g g",
             pga_m_s2 / DRTHS_G_M_S2, x->ground_motion.scale, PGA_MAX_G);
    const double limits[] = {x->physical.limit_displacement_m, x->physical.limit_velocity_m_s,
                             x->physical.limit_force_N};
    const double peaks[] = {s->peak_damper_disp_m, s->peak_damper_vel_m_s, s->peak_force_N};
    const char *const names[] = {"physical.limit_displacement_m", "physical.limit_velocity_m_s",
                                 "physical.limit_force_N"};
    const char *const units[] = {"m", "m/s", "N"};
    for (int i = 0; i < 3; i++)
        if (x->ground_motion.kind == DRTHS_GROUND_MOTION_RECORD && x->ground_motion.scale != 1.0 &&
            peaks[i] > limits[i])
            warn(t,
                 "ground_motion.scale = %g takes the reference to %.4g %s, beyond %s = %g: is "
                 "the scale meant?",
                 x->ground_motion.scale, peaks[i], units[i], names[i], limits[i]);
}

static void print_notes(const drths_experiment_t *x)
{
    for (const char *l = x->notes; l && *l;) {
        const char *nl = strchr(l, '\n');
        int len = nl ? (int)(nl - l) : (int)strlen(l);
        printf("note: %.*s\n", len, l);
        l += len + (nl ? 1 : 0);
    }
}

static void print_structure(const drths_experiment_t *x, const drths_reference_summary_t *s,
                            double pga_m_s2)
{
    printf("structure: %d floor%s, natural frequencies", x->n_dof, x->n_dof == 1 ? "" : "s");
    for (int i = 0; i < s->n && i < 6; i++)
        printf(" %.3g", s->freq_hz[i]);
    printf("%s Hz\n", s->n > 6 ? " ..." : "");
    printf("ground motion: %s, peak %.3g m/s2 (%.3g g)",
           drths_ground_motion_kind_name(x->ground_motion.kind), pga_m_s2, pga_m_s2 / DRTHS_G_M_S2);
    if (x->ground_motion.kind == DRTHS_GROUND_MOTION_RECORD)
        printf(", %s x %g", x->ground_motion.file, x->ground_motion.scale);
    printf("\ncontrol: %s; damper %s at floor %d\n", drths_control_mode_name(x->control.mode),
           drths_damper_model_name(x->specimen.damper.model), x->specimen.floor);
}

/* The shared text and its fingerprint; only the text with --shared-text. */
static int shared_text(const drths_experiment_t *x, int only)
{
    drths_error_t err = {{0}};
    char *text = NULL;
    size_t len = 0;
    uint8_t fp[DRTHS_FINGERPRINT_BYTES];
    if (drths_experiment_shared_text(x, &text, &len, &err) != 0 ||
        drths_experiment_fingerprint(x, fp, &err) != 0) {
        free(text);
        return drths_cli_error(PROG, "%s", err.msg);
    }
    if (only) {
        fwrite(text, 1, len, stdout);
        free(text);
        return DRTHS_EXIT_OK;
    }
    char hex[65];
    drths_experiment_fingerprint_hex(fp, hex);
    printf("\nshared text (the other laboratory's `" PROG " --shared-text` must print the same "
           "lines):\n%s",
           text);
    printf("fingerprint: %s\n", hex);
    free(text);
    return DRTHS_EXIT_OK;
}

/* The peak ground acceleration as the numerical site will apply it (after units and scale). */
static int ground_peak(const drths_experiment_t *x, double *pga)
{
    drths_record_t rec;
    drths_error_t err = {{0}};
    if (drths_setup_ground_motion(x, &rec, &err) != 0)
        return drths_cli_usage_error(PROG, "%s: %s", x->path, err.msg);
    *pga = fabs(drths_record_peak(&rec, NULL));
    drths_record_close(&rec);
    return 0;
}

static int check(const drths_experiment_t *x)
{
    double pga = 0;
    int rc = ground_peak(x, &pga);
    if (rc)
        return rc;
    drths_reference_summary_t s;
    drths_error_t err = {{0}};
    if (x->numerical.smith_model_path) {
        drths_damper_params_t model;
        char sha[65];
        if (drths_damperfile_load(x->numerical.smith_model_path, &model, sha, &err) != 0)
            return drths_cli_usage_error(PROG, "numerical.smith_model: %s", err.msg);
        printf(PROG ": numerical.smith_model %s (sha256 %s): loads\n", x->numerical.smith_model,
               sha);
    }
    if (drths_reference_run(x, NULL, &s, NULL, NULL, &err) != 0)
        return drths_cli_error(PROG, "reference run: %s", err.msg);
    tally_t t = {0, 0, 0};
    printf(PROG ": %s (%s)\n", x->name, x->path);
    print_notes(x);
    print_structure(x, &s, pga);
    reference_table(&t, x, &s);
    converter_table(&t, x);
    plausibility(&t, x, &s, pga);
    drths_reference_summary_close(&s);
    if ((rc = shared_text(x, 0)))
        return rc;
    if (t.refused) {
        printf("result: REFUSED: %d limit%s beyond the converter's range (fix the file)\n",
               t.refused, t.refused == 1 ? "" : "s");
        return DRTHS_EXIT_USAGE;
    }
    if (t.warnings) {
        printf("result: %d warning%s (read them before the test)\n", t.warnings,
               t.warnings == 1 ? "" : "s");
        return DRTHS_EXIT_FAILED;
    }
    printf("result: OK\n");
    return DRTHS_EXIT_OK;
}

int main(int argc, char **argv)
{
    enum { OPT_SHARED = 1 };
    static const struct option opts[] = {
        {"shared-text", no_argument, NULL, OPT_SHARED},
        DRTHS_CLI_OPTIONS_COMMON,
        {NULL, 0, NULL, 0},
    };
    int only_text = 0;
    argv[0] = (char *)PROG; /* getopt names the program in its messages from argv[0] */
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (c == OPT_SHARED)
            only_text = 1;
        else
            return drths_cli_other_option(PROG, c, usage);
    }
    if (optind == argc)
        return drths_cli_usage_error(PROG, "no EXPERIMENT.yaml given (see --help)");
    if (optind + 1 < argc)
        return drths_cli_unexpected_argument(PROG, argv[optind + 1]);
    if (drths_crypto_init() != 0)
        return drths_cli_error(PROG, "libsodium failed to initialise");
    drths_experiment_t x;
    drths_error_t err = {{0}};
    if (drths_experiment_load(&x, argv[optind], &err) != 0)
        return drths_cli_usage_error(PROG, "%s", err.msg);
    int rc = only_text ? shared_text(&x, 1) : check(&x);
    drths_experiment_close(&x);
    return rc;
}
