/* drths-physical --io-check (site-physical/iocheck_mode.h). */
#include "site-physical/iocheck_mode.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

#include "common/config/setup.h"
#include "common/platform/cli.h"
#include "common/platform/rtclock.h"
#include "site-physical/iocheck.h"

#define PROG "drths-physical"

static volatile sig_atomic_t io_interrupted;

static void io_on_signal(int sig)
{
    (void)sig;
    io_interrupted = 1;
}

/* The check's pace: tick k is due k periods after the first, slept for (a slow ramp needs no
 * real-time thread; a late tick only stretches the cycle). */
static int io_pace(void *ctx, long k)
{
    const int64_t *t0 = ctx;
    (void)drths_sleep_until_ns(t0[0] + k * t0[1]);
    return io_interrupted;
}

/* The check of one actuator channel (i; its view of the experiment): the DAQ opened as for a
 * run, the check, its report. Returns the exit code: 0 when every signal is OK (or only
 * notes), 1 otherwise. */
static int io_check_channel(const drths_experiment_t *exp, const char *file,
                            const drths_iocheck_options_t *opt, int i)
{
    const drths_experiment_t *e = drths_experiment_actuator(exp, i);
    drths_error_t err = {{0}};
    drths_specimen_params_t sp;
    drths_specimen_t spec;
    drths_daq_t daq = {0};
    char who[DRTHS_CHANNEL_NAME_MAX + 32] = "";
    if (exp->n_channels > 0)
        snprintf(who, sizeof who, "actuator channel %d (%s): ", i + 1,
                 drths_experiment_actuator_name(exp, i));
    drths_setup_specimen(e, &sp);
    if (drths_specimen_init(&spec, &sp, 1.0 / e->rate_hz, &err) != 0)
        return drths_cli_error(PROG, "%s: %svirtual specimen: %s", file, who, err.msg);
    if (drths_daq_open(e, &spec, NULL, &daq, &err) != 0) {
        drths_specimen_close(&spec);
        return drths_cli_error(PROG, "%s: %sdaq (backend %s): %s", file, who,
                               drths_daq_backend_name(e->daq.backend), err.msg);
    }
    /* The check's set-points pass the same drive envelope as a test's drives. */
    drths_envelope_limits_t lim;
    drths_daq_envelope_limits(e, &lim);
    if (drths_daq_set_envelope(&daq, &lim, e->rate_hz, &err) != 0) {
        drths_daq_close(&daq);
        drths_specimen_close(&spec);
        return drths_cli_error(PROG, "%s: %s%s", file, who, err.msg);
    }
    drths_iocheck_params_t p;
    drths_iocheck_params_default(e, &p);
    if (!isnan(opt->amplitude_m))
        p.amplitude_m = opt->amplitude_m;
    if (!isnan(opt->leg_s))
        p.leg_s = opt->leg_s;
    if (!isnan(opt->current))
        p.current = opt->current;
    int64_t clock[2] = {drths_now_ns(), (int64_t)llround(1e9 / e->rate_hz)};
    p.pace = io_pace;
    p.pace_ctx = clock;
    printf("drths-physical: %sI/O check of '%s' (backend %s), %g Hz: %s of +/-%.3g mm, %g s a "
           "leg, damper command 0%s\n",
           who, e->name, drths_daq_backend_name(e->daq.backend), e->rate_hz,
           p.current > 0 ? "two cycles" : "one cycle", p.amplitude_m * 1e3, p.leg_s,
           p.current > 0 ? " then the --io-current" : "");
    fflush(stdout);
    drths_iocheck_result_t res;
    int rc = drths_iocheck_run(&daq, &p, &res, &err);
    if (rc == 0)
        drths_iocheck_print(stdout, &p, &res);
    drths_daq_close(&daq);
    drths_specimen_close(&spec);
    if (rc != 0)
        return drths_cli_usage_error(PROG, "%s%s", who, err.msg);
    return res.overall <= DRTHS_IOCHECK_NOTE ? 0 : DRTHS_EXIT_FAILED;
}

int drths_iocheck_mode_run(const drths_experiment_t *exp, const char *file,
                           const drths_iocheck_options_t *opt)
{
    signal(SIGINT, io_on_signal);
    signal(SIGTERM, io_on_signal);
    int worst = 0;
    for (int i = 0; i < drths_experiment_n_actuators(exp) && !io_interrupted; i++) {
        int rc = io_check_channel(exp, file, opt, i);
        if (rc != 0 && rc != DRTHS_EXIT_FAILED)
            return rc;
        if (rc)
            worst = rc;
    }
    return worst;
}
