#include "site-numerical/hybrid.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config/config.h"
#include "common/config/damperfile.h"
#include "common/config/setup.h"
#include "common/platform/rtclock.h"

enum { S_START = 0, S_FIRST_COMMAND, S_RUN, S_CLOSING, S_DONE };

#define CLOSE_COPIES 3
#define NS_PER_MS INT64_C(1000000)
/* The arrival-offset minimum is kept over two buckets of this length (so over 0.5 to 1 s). */
#define OFFSET_BUCKET_NS (500 * NS_PER_MS)

static const char *const extra_names[DRTHS_HYBRID_EXTRA_COLS + DRTHS_HYBRID_ADAPT_COLS] = {
    "fb_tick",           "fb_concealed",   "force_measured_N", "force_model_N",
    "force_used_N",      "rtt_ms",         "loop_delay_ticks", "smith_gain",
    "smith_alpha_scale", "smith_c0_scale", "smith_c1_scale",   "smith_gamma_beta_scale",
    "smith_n_scale",     "smith_err_rel",  "smith_fallback",   "smith_lead_n_start"};

/* The short arrival-offset minimum (the up-link's current fastest way) uses buckets this long. */
#define SHORT_BUCKET_NS (50 * NS_PER_MS)
/* The sliding round-trip window is made of this many sub-windows (its length is
 * rtt_window_ns): it slides in steps of an eighth of its length and holds between 7/8 and all
 * of it. A raise also looks at the RTT_RECENT_SUBS most recent sub-windows (1 to 2 s). Values
 * beyond RTT_MAX_NS are counted at the top (no L of 2 s is allowed anyway). */
#define RTT_SUBWINDOWS 8
#define RTT_RECENT_SUBS 2
#define RTT_MAX_NS (2000 * NS_PER_MS)
#define LATE_WINDOW_TICKS 2500
#define EPOCH_COPIES 3
#define EPOCH_REPEAT_NS (10 * NS_PER_MS)

/* The computed step k: the damper's displacement and velocity commanded for it and the damper
 * command sent with it. */
static void step_put(drths_hybrid_t *h, drths_hybrid_link_t *l, int64_t k, double x, double v,
                     double cmd)
{
    const size_t i = (size_t)k % DRTHS_HYBRID_STEP_RING;
    l->st_x[i] = x;
    l->st_v[i] = v;
    l->st_cmd[i] = cmd;
    h->newest_step = k;
}

/* The experiment's links: its sites when it has several and none was selected, else 1. */
static int links_of(const drths_experiment_t *exp)
{
    return exp->n_sites > 1 && !exp->site ? exp->n_sites : 1;
}

void drths_hybrid_params_default(drths_hybrid_params_t *p, const drths_experiment_t *exp)
{
    memset(p, 0, sizeof *p);
    p->L = exp->link.loop_delay_ticks > 0 ? (uint32_t)exp->link.loop_delay_ticks : 1;
    p->r = exp->link.redundancy;
    p->reorder_ticks = exp->numerical.reorder_ticks;
    p->smith = exp->numerical.smith;
    p->dt_ns = (int64_t)llround(1e9 / exp->rate_hz);
    p->peer_timeout_ns = 1000 * NS_PER_MS;
    p->start_timeout_ns = 2000 * NS_PER_MS;
    p->epoch_repeat_ns = 20 * NS_PER_MS;
    p->close_repeat_ns = 10 * NS_PER_MS;
    p->final_wait_ns = 1000 * NS_PER_MS;
    p->adapt_L = exp->link.loop_delay_ticks == 0;
    p->L_max = 0;
    p->lp.quantile = exp->link.quantile;
    p->lp.wake_margin_local_ns = 2 * p->dt_ns; /* as drths_numsite_probe chose the first L */
    p->lp.wake_margin_peer_ns = 2 * p->dt_ns;
    p->lp.safety_ticks = (uint32_t)exp->link.safety_margin_ticks;
    p->lp.fixed_L = (uint32_t)exp->link.loop_delay_ticks;
    p->ep.late_rate_threshold = 0.01;
    p->ep.min_window_ticks = 250;
    p->ep.min_rtt_samples = 200;
    p->ep.raise_step_ticks = 25;
    p->ep.lower_hysteresis_ns = 3000 * NS_PER_MS;
    p->ep.raise_deadband_ticks = (uint32_t)exp->link.safety_margin_ticks / 2;
    /* Lowering gives back slack that covers the machine's own hiccups too, so only a clear
     * drop (10 ms at 5 kHz, e.g. a route change) is worth a glide. */
    p->ep.lower_min_ticks = (uint32_t)(0.010 * exp->rate_hz);
    /* Each change pauses (raise) or speeds up (glide) the specimen: at most one every 2 s
     * unless commands are, or are about to be, late. */
    p->ep.min_change_interval_ns = 2000 * NS_PER_MS;
    /* A late-rate raise's extra margin outlives the lateness by 30 s (ten hysteresis times),
     * so a recurring cause is not answered by a lower/raise cycle every few seconds. */
    p->ep.late_hold_ns = 30000 * NS_PER_MS;
    p->decide_ticks = 50;
    p->glide_every = 20;
    /* A raise is urgent (commands are, or are about to be, late), so it may bend the time
     * rate by up to 50/s: at the default experiment's peak velocity (0.25 m/s) at most
     * 12.5 m/s² beyond the trajectory's own acceleration, and 25 ticks at 5 kHz are made up
     * in about 27 ms. Gentler bends cost a little more lateness, steeper ones tracking: the
     * compensation differentiates the command, and a bend's jerk (v D'''/dt², some 10^4 m/s³
     * at 200/s and 0.15 m/s) swung the drive. A delay step 40 -> 70 ms during strong motion
     * (6 seeds): largest drive change per tick 1.07 x the command's in every run at 50/s,
     * 1.22-1.64 at 100/s, 1.48-1.89 at 200/s; tracking RMS error 0.43-0.83 %, 0.47-0.85 %,
     * 1.48-2.08 %; displacement RMS error median 0.90 %, 0.92 %, 1.16 %. The step at 10 s
     * (3 seeds): 0.21-0.25 % at 50/s, 0.26-0.39 % at 200/s. A glide is not urgent: 5/s,
     * 1.25 m/s² at 0.25 m/s. */
    p->warp_raise_per_s = 50.0;
    p->warp_glide_per_s = 5.0;
    /* 8 s of round trips: at 5 kHz some 35 000 to 40 000 echoes, so a p99.9 rests on 35 to 40
     * samples above it (its standard error for Gaussian jitter is about 0.04 sigma, under a
     * tick for the rehearsal link); a step up shows in it within a decision of the first
     * slower echoes, a step down is forgotten 8 s later. */
    p->rtt_window_ns = 8000 * NS_PER_MS;
    p->n_links = links_of(exp);
    if (p->n_links > 1)
        p->adapt_L = 0; /* one L for all, the largest the links need (PROTOCOL.md section 12) */
    for (int i = 0; p->n_links > 1 && i < exp->n_dampers; i++) {
        int64_t w = (int64_t)drths_experiment_damper(exp, i)->physical.watchdog_ms * NS_PER_MS;
        if (w > 0 && (p->link_timeout_ns == 0 || w < p->link_timeout_ns))
            p->link_timeout_ns = w;
    }
}

int64_t drths_hybrid_feedback_wait_ns(uint32_t L, int64_t dt_ns, int64_t rtt_min_ns,
                                      int64_t rtt_q_ns, int reorder_ticks)
{
    int64_t budget = ((int64_t)L + 1) * dt_ns - (rtt_min_ns + rtt_q_ns) / 2;
    int64_t floor_ns = (int64_t)reorder_ticks * dt_ns;
    return budget > floor_ns ? budget : floor_ns;
}

void drths_hybrid_close(drths_hybrid_t *h)
{
    if (h->colnames) {
        for (int i = 0; i < h->ncols; i++)
            free(h->colnames[i]);
        free(h->colnames);
        h->colnames = NULL;
    }
    free(h->row);
    free(h->peak_x);
    free(h->sum_x2);
    free(h->peak_a);
    free(h->sum_a2);
    free(h->tm_tick);
    free(h->tm_step);
    h->row = h->peak_x = h->sum_x2 = h->peak_a = h->sum_a2 = NULL;
    h->tm_tick = h->tm_step = NULL;
    for (int i = 0; h->lk && i < h->n_links; i++) {
        drths_hybrid_link_t *l = &h->lk[i];
        free(l->concealed_tick);
        free(l->sent);
        free(l->sent_tick);
        drths_rtt_tracker_close(&l->rtt);
        drths_reorder_close(&l->rb);
        drths_smith_close(&l->smith);
    }
    free(h->lk);
    h->lk = NULL;
    drths_late_window_close(&h->late);
    drths_semiactive_close(&h->ctl);
    drths_rtt_window_close(&h->rttw);
    drths_numsub_close(&h->ns);
}

/* The hybrid's own columns per link when there are several: the link's site name, '.', and
 * these (the adaptive Smith predictor's after them). */
static const char *const link_names[] = {"fb_tick", "fb_concealed", "force_measured_N",
                                         "force_model_N", "rtt_ms"};
#define LINK_COLS 5

int drths_hybrid_columns_for(const drths_experiment_t *exp)
{
    const int adapt = exp->numerical.smith == DRTHS_SMITH_ADAPTIVE ? DRTHS_HYBRID_ADAPT_COLS : 0;
    const int links = links_of(exp);
    if (links > 1) /* drths_numsub's (3 + 3 n + 4 per damper), loop_delay_ticks, per link */
        return 3 + 3 * exp->n_dof + 4 * exp->n_dampers + 1 + links * (LINK_COLS + adapt);
    /* drths_numsub's columns (3 + 3 n + 4), then the hybrid's own. */
    return 3 + 3 * exp->n_dof + 4 + DRTHS_HYBRID_EXTRA_COLS + adapt;
}

int drths_hybrid_init(drths_hybrid_t *h, const drths_experiment_t *exp,
                      const drths_hybrid_params_t *p, drths_error_t *err)
{
    memset(h, 0, sizeof *h);
    if (p->L < 1)
        return drths_error_set(err, -EINVAL, "loop delay L: must be >= 1 tick (got %u)", p->L);
    if (p->r < 1 || p->r > DRTHS_WIRE_MAX_R)
        return drths_error_set(err, -EINVAL, "link.redundancy: must be 1..%d (got %d)",
                               DRTHS_WIRE_MAX_R, p->r);
    if (p->reorder_ticks < 1 || p->dt_ns <= 0)
        return drths_error_set(err, -EINVAL,
                               "numerical.reorder_ticks and the tick period must "
                               "be > 0");
    h->p = *p;
    if (h->p.wait_ns <= 0)
        h->p.wait_ns = (int64_t)p->reorder_ticks * p->dt_ns;
    h->wait0_ns = h->p.wait_ns;
    if (!h->p.adapt_L)
        h->p.L_max = p->L;
    else if (h->p.L_max == 0)
        h->p.L_max = 4 * p->L > p->L + 2500 ? 4 * p->L : p->L + 2500;
    if (h->p.L_max < p->L)
        return drths_error_set(err, -EINVAL, "largest L %u below the starting L %u", h->p.L_max,
                               p->L);
    if (h->p.adapt_L &&
        (h->p.decide_ticks < 1 || h->p.glide_every < 2 || h->p.rtt_window_ns < RTT_SUBWINDOWS ||
         !(h->p.warp_raise_per_s > 0.0) || !(h->p.warp_glide_per_s > 0.0)))
        return drths_error_set(err, -EINVAL,
                               "epoch decisions: decide_ticks >= 1, "
                               "glide_every >= 2, a round-trip window > 0 and "
                               "warp bounds > 0");
    size_t lmax = h->p.L_max;
    const int nl = p->n_links > 0 ? p->n_links : 1;
    if (nl > 1 && (nl != exp->n_sites || exp->site || exp->n_dampers != nl))
        return drths_error_set(err, -ENOTSUP,
                               "%s: sites: %d links need %d sites of one channel each (%d "
                               "sites, %d channels): a site with several channels is not "
                               "built yet",
                               exp->path, nl, nl, exp->n_sites, exp->n_dampers);
    if (nl > 1 && h->p.adapt_L)
        return drths_error_set(err, -EINVAL, "several links take one fixed L (adapt_L 0)");
    if (nl > 1 && exp->numerical.smith_model_path)
        return drths_error_set(err, -ENOTSUP,
                               "numerical.smith_model: one characterized model for %d dampers "
                               "in %d sites: leave it out (each damper's Smith predictor uses "
                               "its channel's nominal model)",
                               nl, nl);
    int rc = drths_numsub_init(&h->ns, exp, err);
    if (rc)
        return rc;
    /* The controller is designed on the numerical site's own model, as in the reference run. */
    if (nl == 1) {
        rc = drths_semiactive_init_experiment(&h->ctl, exp, &h->ns.st, err);
    } else {
        double cmax[DRTHS_NUMSUB_MAX_DAMPERS];
        for (int k = 0; k < nl; k++)
            cmax[k] = drths_experiment_command_max(
                drths_experiment_damper(exp, k)->specimen.damper.model);
        drths_semiactive_design_t d;
        rc = drths_semiactive_init_multi(&h->ctl, &h->ns.st, nl, h->ns.floors, h->ns.dt_s, cmax,
                                         exp->control.mode, exp->control.command,
                                         drths_semiactive_design_of(exp, &d), err);
    }
    if (rc) {
        drths_numsub_close(&h->ns);
        return rc;
    }
    h->lk = calloc((size_t)nl, sizeof *h->lk);
    if (!h->lk) {
        drths_semiactive_close(&h->ctl);
        drths_numsub_close(&h->ns);
        return drths_error_set(err, -ENOMEM, "out of memory for the hybrid loop's links");
    }
    h->n_links = nl;
    h->end_link = -1;
    h->rest_command = drths_semiactive_initial_command(&h->ctl);
    h->smith_model_sha256[0] = '\0';
    h->adaptive = p->smith == DRTHS_SMITH_ADAPTIVE;
    /* Feedback can run ahead of the consumer by the reorder wait plus whatever piled up in the
     * socket while the thread was not running; L ticks of slack cover a stall as long as the
     * loop delay, after which the actuator site is concealing commands anyway. */
    int64_t wait_max = h->p.wait_ns;
    for (int i = 1; i < nl; i++)
        if (p->link_wait_ns[i] > wait_max)
            wait_max = p->link_wait_ns[i];
    size_t depth = (size_t)(wait_max / p->dt_ns) + 2 * lmax + (size_t)p->r + 256;
    /* The COMMAND's samples reach back by the largest redundancy offset. */
    const size_t sent_cap = (size_t)drths_wire_offset(p->r - 1) + 1;
    int ok = 1;
    for (int i = 0; i < nl && !rc && ok; i++) {
        drths_hybrid_link_t *l = &h->lk[i];
        const drths_experiment_t *dx = nl == 1 ? exp : drths_experiment_damper(exp, i);
        l->damper = i;
        if (nl > 1)
            snprintf(l->name, sizeof l->name, "%s", exp->sites[i].name);
        else if (exp->site)
            snprintf(l->name, sizeof l->name, "%s", exp->site->name);
        l->command = h->rest_command;
        l->wait_ns = i == 0                   ? h->p.wait_ns
                     : p->link_wait_ns[i] > 0 ? p->link_wait_ns[i]
                                              : (int64_t)p->reorder_ticks * p->dt_ns;
        drths_damper_params_t nominal;
        drths_setup_damper_nominal(dx, &nominal);
        if (exp->numerical.smith_model_path) {
            /* The characterized damper (drths-physical --characterize) replaces the nominal
             * one: the fixed predictor uses it, the adaptive bank starts from it. */
            if (nominal.model != DRTHS_DAMPER_PHILLIPS2013) {
                drths_hybrid_close(h);
                return drths_error_set(err, -EINVAL,
                                       "numerical.smith_model: %s: a characterized model is "
                                       "phillips2013-200kN, the specimen's damper is %s",
                                       exp->numerical.smith_model,
                                       drths_damper_model_name(nominal.model));
            }
            const int substeps = nominal.substeps;
            rc = drths_damperfile_load(exp->numerical.smith_model_path, &nominal,
                                       h->smith_model_sha256, err);
            if (rc) {
                drths_hybrid_close(h);
                return drths_error_prefix(err, rc, "numerical.smith_model");
            }
            nominal.substeps = substeps;
        }
        /* A characterized damper: the adaptive predictor starts where the damper is and only
         * follows its drift, with one identifier. The bank's spread in n (x0.5, x1, x2) is for
         * a damper not known before the test; around a characterized n of 4 it would run a
         * member at n 8, whose substeps took the step to 145 us at the median and 309 at the
         * p99 (the 200 us period of 5 kHz: commands too late, HOLD; study cell n-x2-adaptive
         * with --characterize). */
        drths_smith_adapt_params_t ap;
        drths_smith_adapt_default(&ap);
        if (exp->numerical.smith_model_path)
            ap.members = 1;
        /* Room for the largest dead time an epoch may bring. */
        rc = drths_smith_init_ex(&l->smith, p->smith, &nominal, 1.0 / exp->rate_hz, lmax + 64, &ap,
                                 err);
        if (!rc)
            rc = drths_reorder_init(&l->rb, depth, sizeof(drths_fb_sample_t), 1, err);
        if (!rc)
            rc = drths_rtt_tracker_init(&l->rtt, 2 * lmax + 1024, 10000, 2 * DRTHS_NS_PER_S, err);
        if (rc)
            break;
        l->concealed_cap = depth;
        l->rb_depth = depth;
        l->concealed_tick = calloc(depth, sizeof(uint64_t));
        l->sent_cap = sent_cap;
        l->sent = calloc(sent_cap, sizeof *l->sent);
        l->sent_tick = calloc(sent_cap, sizeof *l->sent_tick);
        ok = l->concealed_tick && l->sent && l->sent_tick;
        if (l->sent_tick)
            for (size_t j = 0; j < sent_cap; j++)
                l->sent_tick[j] = UINT64_MAX;
    }
    if (!rc)
        rc = drths_late_window_init(&h->late, LATE_WINDOW_TICKS, err);
    if (!rc && h->p.adapt_L) {
        /* Bins of a quarter tick: the quantile is at most a quarter tick over the sample one. */
        int64_t bin = p->dt_ns / 4 > 0 ? p->dt_ns / 4 : 1;
        rc = drths_rtt_window_init(&h->rttw, bin, RTT_MAX_NS, h->p.rtt_window_ns / RTT_SUBWINDOWS,
                                   RTT_SUBWINDOWS, err);
    }
    if (rc) {
        drths_hybrid_close(h);
        return rc;
    }
    h->tm_cap = 2 * lmax + 4096;
    h->tm_tick = malloc(h->tm_cap * sizeof(int64_t));
    h->tm_step = malloc(h->tm_cap * sizeof(int64_t));
    if (h->tm_tick && h->tm_step)
        for (size_t i = 0; i < h->tm_cap; i++)
            h->tm_tick[i] = -1;
    int n = h->ns.n;
    const int adapt_cols = h->adaptive ? DRTHS_HYBRID_ADAPT_COLS : 0;
    h->ncols = nl == 1 ? h->ns.ncols + DRTHS_HYBRID_EXTRA_COLS + adapt_cols
                       : h->ns.ncols + 1 + nl * (LINK_COLS + adapt_cols);
    h->colnames = calloc((size_t)h->ncols, sizeof *h->colnames);
    h->row = calloc((size_t)h->ncols, sizeof(double));
    h->peak_x = calloc((size_t)n, sizeof(double));
    h->sum_x2 = calloc((size_t)n, sizeof(double));
    h->peak_a = calloc((size_t)n, sizeof(double));
    h->sum_a2 = calloc((size_t)n, sizeof(double));
    ok = ok && h->colnames && h->row && h->peak_x && h->sum_x2 && h->peak_a && h->sum_a2 &&
         h->tm_tick && h->tm_step;
    for (int i = 0; ok && i < h->ncols; i++) {
        char name[96];
        const int j = i - h->ns.ncols;
        if (j < 0)
            snprintf(name, sizeof name, "%s", h->ns.colnames[i]);
        else if (nl == 1)
            snprintf(name, sizeof name, "%s", extra_names[j]);
        else if (j == 0)
            snprintf(name, sizeof name, "loop_delay_ticks");
        else {
            const int per = LINK_COLS + adapt_cols, li = (j - 1) / per, c = (j - 1) % per;
            snprintf(name, sizeof name, "%s.%s", h->lk[li].name,
                     c < LINK_COLS ? link_names[c]
                                   : extra_names[DRTHS_HYBRID_EXTRA_COLS + c - LINK_COLS]);
        }
        h->colnames[i] = strdup(name);
        ok = h->colnames[i] != NULL;
    }
    if (!ok) {
        drths_hybrid_close(h);
        return drths_error_set(err, -ENOMEM, "out of memory for the hybrid loop");
    }
    drths_stability_params_t sp;
    drths_stability_params_from(&sp, exp);
    double rest_force[DRTHS_HYBRID_MAX_LINKS];
    for (int i = 0; i < nl; i++) {
        drths_hybrid_link_t *l = &h->lk[i];
        rc = drths_smith_reset(&l->smith, h->rest_command, p->L);
        if (rc) { /* cannot happen: the ring was sized from L */
            drths_hybrid_close(h);
            return drths_error_set(err, rc, "Smith history too short for L = %u", p->L);
        }
        rest_force[i] = drths_smith_model(&l->smith, 0);
        rc = drths_stability_init(&l->stab, &sp, &h->ns.st, h->ns.dt_s, err);
        if (rc) {
            drths_hybrid_close(h);
            return rc;
        }
        step_put(h, l, 0, 0.0, 0.0, h->rest_command);
    }
    if (nl == 1)
        drths_numsub_reset(&h->ns, rest_force[0]);
    else
        drths_numsub_reset_all(&h->ns, rest_force);
    h->L = h->glide_target = h->L_base = p->L;
    h->row_dead = p->L;
    h->epoch = 1;
    h->last_cmd_tick = p->L; /* ticks 1 .. L of epoch 1 are the rest position */
    /* A tick is paired with the nearest step while its rate is within the glide's. */
    h->warp_tol = h->p.glide_every >= 2 ? 1.0 / h->p.glide_every : 0.05;
    h->c.L_min_seen = h->c.L_max_seen = p->L;
    h->state = S_START;
    return 0;
}

const char *drths_hybrid_end_name(drths_hybrid_end_t e)
{
    switch (e) {
    case DRTHS_HYBRID_RUNNING:
        return "running";
    case DRTHS_HYBRID_END_OF_RECORD:
        return "end of record";
    case DRTHS_HYBRID_PEER_ABORT:
        return "aborted by the actuator site";
    case DRTHS_HYBRID_PEER_LOST:
        return "peer lost";
    case DRTHS_HYBRID_NO_START:
        return "no feedback at start";
    case DRTHS_HYBRID_SIGNAL:
        return "stopped by signal";
    case DRTHS_HYBRID_STABILITY:
        return "stability HOLD";
    }
    return "unknown";
}

/* The STOP/ABORT text sent to the sites, cut to what the wire carries (DRTHS_WIRE_MAX_TEXT): a
 * site's name and a peer's text of up to that length may not both fit, and the cut is meant. */
__attribute__((format(printf, 2, 3))) static void set_close_text(drths_hybrid_t *h, const char *fmt,
                                                                 ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->close_text, sizeof h->close_text, fmt, ap);
    va_end(ap);
}

static void set_text(drths_hybrid_t *h, const char *text)
{
    size_t n = strlen(text);
    if (n >= sizeof h->end_text)
        n = sizeof h->end_text - 1;
    memcpy(h->end_text, text, n);
    h->end_text[n] = '\0';
    snprintf(h->close_text, sizeof h->close_text, "%.*s", (int)sizeof h->close_text - 1, text);
}

/* From now on the polls send `type` {reason, text} CLOSE_COPIES times to every link and then
 * finish. */
static void begin_close(drths_hybrid_t *h, int64_t now_ns, drths_msg_type_t type, int reason,
                        const char *text, drths_hybrid_end_t end)
{
    h->state = S_CLOSING;
    h->end = end;
    h->close_type = (int)type;
    h->close_reason = reason;
    h->close_sent = 0;
    h->close_start_ns = now_ns;
    h->next_send_ns = now_ns;
    set_text(h, text);
}

/* As begin_close for an end that link i caused (it was lost, or its feedback made the loop
 * unstable): with several links, the text the sites get names it. */
static void begin_link_close(drths_hybrid_t *h, int i, int64_t now_ns, drths_msg_type_t type,
                             int reason, const char *text, drths_hybrid_end_t end)
{
    begin_close(h, now_ns, type, reason, text, end);
    h->end_link = i;
    if (h->n_links > 1)
        set_close_text(h, "%s: %s", h->lk[i].name, text);
}

void drths_hybrid_request_stop(drths_hybrid_t *h, int reason, const char *text)
{
    if (h->state == S_DONE || h->state == S_CLOSING)
        return;
    /* The time is unknown here; the next poll sends at once because next_send_ns is 0. */
    begin_close(h, 0, DRTHS_MSG_ABORT, reason, text, DRTHS_HYBRID_SIGNAL);
    h->close_start_ns = INT64_MIN;
}

static int was_concealed(drths_hybrid_link_t *l, uint64_t tick)
{
    uint64_t *slot = &l->concealed_tick[tick % l->concealed_cap];
    if (*slot != tick)
        return 0;
    *slot = 0;
    return 1;
}

static int64_t min64(int64_t a, int64_t b);

int64_t drths_hybrid_link_timeout_ns(const drths_hybrid_t *h)
{
    if (h->n_links > 1 && h->p.link_timeout_ns > 0 && h->p.link_timeout_ns < h->p.peer_timeout_ns)
        return h->p.link_timeout_ns;
    return h->p.peer_timeout_ns;
}

/* Every link has sent FEEDBACK: the run's steps can be paced by their arrivals. */
static int all_got_feedback(const drths_hybrid_t *h)
{
    for (int i = 0; i < h->n_links; i++)
        if (!h->lk[i].got_feedback)
            return 0;
    return 1;
}

static void on_feedback(drths_hybrid_t *h, drths_hybrid_link_t *l, const drths_msg_t *m,
                        int64_t rx_ns)
{
    const drths_msg_feedback_t *f = &m->u.feedback;
    h->c.fb_datagrams++;
    l->c.fb_datagrams++;
    int64_t rtt;
    if (f->echo_counter &&
        drths_rtt_tracker_echo(&l->rtt, f->echo_counter, (int64_t)f->echo_hold_ns, rx_ns, &rtt) ==
            0 &&
        h->p.adapt_L)
        drths_rtt_window_add(&h->rttw, rx_ns, rtt);
    /* The echo is the FEEDBACK that arrived last, not the one with the highest counter: with
     * jitter the slow datagrams arrive after faster, newer ones, and echoing only the newest
     * would leave them out and bias the round trip low (seen: p50 73 ms for a true 80 ms). */
    l->fb_last_counter = m->counter;
    l->fb_last_counter_rx_ns = rx_ns;
    int64_t off = rx_ns - (int64_t)m->tick * h->p.dt_ns;
    if (!l->got_feedback || rx_ns - l->off_short_bucket_ns >= SHORT_BUCKET_NS) {
        l->off_short_prev = l->got_feedback ? l->off_short_cur : off;
        l->off_short_cur = off;
        l->off_short_bucket_ns = rx_ns;
    } else if (off < l->off_short_cur) {
        l->off_short_cur = off;
    }
    if (!l->got_feedback) {
        l->off_cur = l->off_prev = off;
        l->off_bucket_ns = rx_ns;
        l->fb_newest_tick = m->tick;
        l->got_feedback = 1;
        h->got_feedback = all_got_feedback(h);
    } else if (rx_ns - l->off_bucket_ns >= OFFSET_BUCKET_NS) {
        l->off_prev = l->off_cur;
        l->off_cur = off;
        l->off_bucket_ns = rx_ns;
    } else if (off < l->off_cur) {
        l->off_cur = off;
    }
    if (m->tick > l->fb_newest_tick)
        l->fb_newest_tick = m->tick;
    if (f->s[0].flags & DRTHS_FB_CONCEALED) {
        h->c.phys_concealed++;
        l->c.phys_concealed++;
    }
    if (f->s[0].flags & DRTHS_FB_HOLD) {
        if (!h->c.phys_hold || m->tick < h->c.phys_hold_tick)
            h->c.phys_hold_tick = m->tick;
        if (!l->c.phys_hold || m->tick < l->c.phys_hold_tick)
            l->c.phys_hold_tick = m->tick;
        h->c.phys_hold++;
        l->c.phys_hold++;
    }
    const int n = drths_wire_samples_of(m->tick, f->r);
    for (int k = 0; k < n; k++) {
        /* Sample k is the measurement of tick t - offset(k): the HELLO's one offsets list serves
         * both directions (PROTOCOL.md section 8). */
        uint64_t tick = drths_wire_sample_tick(m->tick, k);
        if (tick < 1)
            break; /* tick 0 is the rest state, recorded at start */
        switch (drths_reorder_put(&l->rb, tick, &f->s[k])) {
        case DRTHS_REORDER_STORED:
            h->c.fb_samples_stored++;
            l->c.fb_samples_stored++;
            break;
        case DRTHS_REORDER_DUPLICATE:
            h->c.fb_duplicates++;
            l->c.fb_duplicates++;
            break;
        case DRTHS_REORDER_LATE:
            if (was_concealed(l, tick)) {
                h->c.fb_late++;
                l->c.fb_late++;
            } else {
                h->c.fb_duplicates++;
                l->c.fb_duplicates++;
            }
            break;
        case DRTHS_REORDER_TOO_FAR:
            h->c.fb_too_far++;
            l->c.fb_too_far++;
            break;
        }
    }
}

/* Link i's actuator site ended the run (its ABORT, or a STOP before the end). With one link the
 * run is over; with several the others are sent ABORT with the same reason, naming it. */
static void peer_ended(drths_hybrid_t *h, int i, const drths_msg_t *m, int64_t rx_ns)
{
    if (h->n_links == 1) {
        h->end = DRTHS_HYBRID_PEER_ABORT;
        h->end_reason = m->u.stop.reason;
        set_text(h, m->u.stop.text);
        h->end_link = 0;
        h->state = S_DONE;
        return;
    }
    char text[DRTHS_WIRE_MAX_TEXT + 1];
    snprintf(text, sizeof text, "%s", m->u.stop.text);
    begin_close(h, rx_ns, DRTHS_MSG_ABORT, m->u.stop.reason, text, DRTHS_HYBRID_PEER_ABORT);
    h->end_reason = m->u.stop.reason;
    h->end_link = i;
    h->lk[i].skip_close = 1;
    set_close_text(h, "%s stopped the test: %s: %s", h->lk[i].name,
                   drths_stop_reason_name(m->u.stop.reason), text);
}

void drths_hybrid_on_link_message(drths_hybrid_t *h, int i, const drths_msg_t *m, int64_t rx_ns)
{
    if (h->state == S_DONE || i < 0 || i >= h->n_links)
        return;
    drths_hybrid_link_t *l = &h->lk[i];
    l->last_rx_ns = rx_ns;
    switch (m->type) {
    case DRTHS_MSG_FEEDBACK:
        on_feedback(h, l, m, rx_ns);
        break;
    case DRTHS_MSG_ABORT:
        if (h->state == S_CLOSING && h->n_links > 1) {
            l->skip_close = 1; /* the run is ending already; this site has stopped */
            l->peer_stopped = 1;
            break;
        }
        peer_ended(h, i, m, rx_ns);
        break;
    case DRTHS_MSG_STOP:
        if (h->state == S_CLOSING && (h->close_type == DRTHS_MSG_STOP || h->n_links > 1))
            l->peer_stopped = 1;
        else
            peer_ended(h, i, m, rx_ns);
        break;
    case DRTHS_MSG_PROBE_ECHO: /* stragglers of the start-up probes */
    case DRTHS_MSG_HELLO_ACK:  /* answers to repeated HELLOs */
    case DRTHS_MSG_HEARTBEAT:
        break;
    default:
        h->c.unexpected++;
        l->c.unexpected++;
        break;
    }
}

void drths_hybrid_on_message(drths_hybrid_t *h, const drths_msg_t *m, int64_t rx_ns)
{
    drths_hybrid_on_link_message(h, 0, m, rx_ns);
}

int drths_hybrid_pending(const drths_hybrid_t *h)
{
    for (int i = 0; i < h->n_links; i++)
        if (h->lk[i].pending)
            return 1;
    return 0;
}

void drths_hybrid_link_sent(drths_hybrid_t *h, int link, uint64_t counter, int64_t sent_ns)
{
    if (link >= 0 && link < h->n_links)
        drths_rtt_tracker_sent(&h->lk[link].rtt, counter, sent_ns);
}

void drths_hybrid_sent(drths_hybrid_t *h, uint64_t counter, int64_t sent_ns)
{
    drths_hybrid_link_sent(h, 0, counter, sent_ns);
}

static void sent_put(drths_hybrid_link_t *l, uint64_t t, const drths_cmd_channel_t *v)
{
    l->sent[t % l->sent_cap] = *v;
    l->sent_tick[t % l->sent_cap] = t;
}

/* The command sent for tick t (the rest position for ticks <= L of epoch 1); -1 if it is no
 * longer (or not) in the ring. */
static int sent_get(const drths_hybrid_t *h, const drths_hybrid_link_t *l, uint64_t t,
                    drths_cmd_channel_t *v)
{
    if (t <= h->p.L) {
        *v = (drths_cmd_channel_t){0.0, 0.0, 0.0, h->rest_command};
        return 0;
    }
    if (l->sent_tick[t % l->sent_cap] != t)
        return -1;
    *v = l->sent[t % l->sent_cap];
    return 0;
}

/* The COMMAND's samples: sample k for tick T - offset(k) (PROTOCOL.md section 8), as many as
 * exist with a tick >= first. */
static uint8_t fill_samples(drths_hybrid_t *h, const drths_hybrid_link_t *l, drths_msg_command_t *c,
                            uint64_t T, uint64_t first)
{
    const int n = drths_wire_samples_of(T, h->p.r);
    int k = 0;
    for (; k < n; k++) {
        const uint64_t t = drths_wire_sample_tick(T, k);
        if (t < first || sent_get(h, l, t, &c->s[k][0]) != 0)
            break;
    }
    return (uint8_t)k;
}

/* COMMAND for tick T to link l carrying the sample (disp, vel, damper command) of T and the
 * samples of earlier ticks (ticks <= L are the rest position: the actuator site applies rest
 * there). */
static void build_command(drths_hybrid_t *h, drths_hybrid_link_t *l, uint64_t T, double disp,
                          double vel, double damper, int64_t now_ns)
{
    double dt = (double)h->p.dt_ns * 1e-9;
    drths_cmd_channel_t curv, *cur = &curv;
    cur->disp_m = disp;
    cur->vel_m_s = vel;
    /* The ns-rounded period is what the ticker uses; the integrator's dt is 1/rate. At rates
     * whose period is not a whole ns the difference is below 1e-9 relative. */
    cur->acc_m_s2 = (vel - l->prev_vel) / dt;
    cur->damper_cmd = damper;
    sent_put(l, T, cur);
    l->prev_vel = vel;
    memset(&l->out, 0, sizeof l->out);
    l->out.type = DRTHS_MSG_COMMAND;
    l->out.epoch = h->epoch;
    l->out.tick = T;
    drths_msg_command_t *c = &l->out.u.command;
    c->loop_delay_ticks = h->L;
    c->n_channels = 1;
    c->r = fill_samples(h, l, c, T, 0);
    c->echo_counter = l->fb_last_counter;
    int64_t hold = l->fb_last_counter ? now_ns - l->fb_last_counter_rx_ns : 0;
    c->echo_hold_ns = hold > 0 ? (uint64_t)hold : 0;
    h->c.commands_sent++;
    l->c.commands_sent++;
}

static void tm_set(drths_hybrid_t *h, uint64_t tick, int64_t step)
{
    h->tm_tick[tick % h->tm_cap] = (int64_t)tick;
    h->tm_step[tick % h->tm_cap] = step;
}

/* The step nearest to the position tick n was commanded (*filler: the tick was slowed down by a
 * raise beyond warp_tol). Ticks never sent (the rest ticks of epoch 1) map to n - L, which is
 * <= 0 there: the rest force. */
static int64_t tm_get(const drths_hybrid_t *h, uint64_t tick, int *filler)
{
    *filler = 0;
    if (h->tm_tick[tick % h->tm_cap] != (int64_t)tick)
        return (int64_t)tick - (int64_t)h->L;
    int64_t k = h->tm_step[tick % h->tm_cap];
    if (k < 0) {
        *filler = 1;
        return -1 - k;
    }
    return k;
}

/* The step position of tick T, s(T) = T - L_base - sum of the warps' D(T), and its rate s'(T)
 * (steps per tick). Warps that have ended by T are folded into L_base: ticks are commanded in
 * order, so no later tick needs them. */
static double tick_position(drths_hybrid_t *h, uint64_t T, double *rate)
{
    const double t = (double)T;
    int j = 0;
    for (int i = 0; i < h->n_warps; i++) {
        if (t >= drths_warp_end(&h->warp[i]))
            h->L_base = (uint32_t)((int64_t)h->L_base + (int64_t)llround(h->warp[i].n));
        else
            h->warp[j++] = h->warp[i];
    }
    h->n_warps = j;
    double delay = (double)h->L_base, r = 1.0;
    for (int i = 0; i < h->n_warps; i++) {
        double dr;
        delay += drths_warp_delay(&h->warp[i], t, &dr);
        r -= dr;
    }
    *rate = r;
    return t - delay;
}

/* Marks every link's out buffer but link 0's to be sent by the next polls (kind 1, or 2 for a
 * COMMAND) and returns link 0's message: one action sends one message. */
static const drths_msg_t *send_all(drths_hybrid_t *h, int kind)
{
    for (int i = 1; i < h->n_links; i++)
        h->lk[i].pending = kind;
    return &h->lk[0].out;
}

/* A message still to be sent to a link (send_all): into the action. Returns nonzero if any. */
static int send_pending(drths_hybrid_t *h, drths_hybrid_action_t *a)
{
    for (int i = 0; i < h->n_links; i++) {
        drths_hybrid_link_t *l = &h->lk[i];
        if (!l->pending)
            continue;
        a->send = &l->out;
        a->link = i;
        a->is_command = l->pending == 2;
        l->pending = 0;
        return 1;
    }
    return 0;
}

/* Builds the COMMAND of the next tick if its step position has been computed (s(T) <= the
 * newest step): the trajectory at s(T), interpolated between the steps around it, with the
 * velocity scaled by the rate s'(T), for every link (link 0's in its out buffer, the others'
 * pending). The tick map gets the nearest step, flagged when the rate is off by more than
 * warp_tol. Returns nonzero when a COMMAND was built. */
static int command_next_tick(drths_hybrid_t *h, int64_t now_ns)
{
    const uint64_t T = h->last_cmd_tick + 1;
    double rate;
    const double s = tick_position(h, T, &rate);
    if (s > (double)h->newest_step + 1e-9)
        return 0;
    int64_t j = (int64_t)floor(s + 1e-9);
    double f = s - (double)j;
    const int exact = f <= 1e-9 || j >= h->newest_step;
    if (exact)
        f = 0.0;
    const size_t i0 = (size_t)j % DRTHS_HYBRID_STEP_RING;
    const size_t i1 = (size_t)(j + 1) % DRTHS_HYBRID_STEP_RING;
    const int64_t k = j + (f >= 0.5 ? 1 : 0);
    const int slowed = fabs(rate - 1.0) > h->warp_tol + 1e-9;
    tm_set(h, T, slowed ? -1 - k : k);
    if (slowed)
        h->c.fillers_sent++;
    for (int li = 0; li < h->n_links; li++) {
        drths_hybrid_link_t *l = &h->lk[li];
        double disp, vel;
        if (exact) {
            disp = l->st_x[i0];
            vel = l->st_v[i0];
        } else {
            disp = drths_warp_hermite(l->st_x[i0], l->st_v[i0], l->st_x[i1], l->st_v[i1],
                                      h->ns.dt_s, f, &vel);
        }
        build_command(h, l, T, disp, vel * rate, l->st_cmd[(size_t)k % DRTHS_HYBRID_STEP_RING],
                      now_ns);
    }
    send_all(h, 2);
    h->last_cmd_tick = T;
    h->L = (uint32_t)llround((double)T - s);
    if (h->L < h->c.L_min_seen)
        h->c.L_min_seen = h->L;
    if (h->L > h->c.L_max_seen)
        h->c.L_max_seen = h->L;
    return 1;
}

/* Predicts x(n+1), steps every link's Smith model with its damper's motion and builds the
 * COMMAND of the next tick if it is due: at a constant L tick n + 1 + L; during a warp none (a
 * glide ran past this step) or the first of several (a raise: the others are sent by the next
 * polls). Returns nonzero when a COMMAND was built. */
static int predict_and_command(drths_hybrid_t *h, int64_t now_ns)
{
    double d[DRTHS_NUMSUB_MAX_DAMPERS], v[DRTHS_NUMSUB_MAX_DAMPERS];
    if (h->n_links == 1)
        drths_numsub_predict(&h->ns, &d[0], &v[0]);
    else
        drths_numsub_predict_all(&h->ns, d, v);
    for (int i = 0; i < h->n_links; i++) {
        drths_hybrid_link_t *l = &h->lk[i];
        drths_smith_step(&l->smith, d[l->damper], v[l->damper], l->command);
        step_put(h, l, h->ns.step + 1, d[l->damper], v[l->damper], l->command);
    }
    if (command_next_tick(h, now_ns))
        return 1;
    h->c.glide_skips++;
    return 0;
}

/* The adaptive Smith predictor's columns of link l at x. */
static void fill_adaptive(const drths_hybrid_link_t *l, double *x)
{
    const drths_smith_t *sm = &l->smith;
    x[0] = drths_smith_gain(sm);
    for (int i = 0; i < DRTHS_SMITH_NPAR; i++)
        x[1 + i] = drths_smith_scale(sm, NULL, i);
    x[1 + DRTHS_SMITH_NPAR] = drths_smith_error_rel(sm, NULL);
    x[2 + DRTHS_SMITH_NPAR] = sm->st.fell_back;
    x[3 + DRTHS_SMITH_NPAR] = drths_smith_leader(sm)->n_start;
}

/* The row of the current state: with one link as always; with several, numsub's columns of
 * every damper, loop_delay_ticks and each link's feedback columns (fb_tick < 0: concealed). */
static void fill_row(drths_hybrid_t *h, long fb_tick, int concealed, double measured, double used)
{
    double *row = h->row;
    if (h->n_links == 1) {
        const drths_hybrid_link_t *l = &h->lk[0];
        drths_numsub_row(&h->ns, used, l->command, row);
        double *x = row + h->ns.ncols;
        x[0] = (double)fb_tick;
        x[1] = concealed;
        x[2] = measured;
        x[3] = drths_smith_model(&l->smith, h->ns.step);
        x[4] = used;
        x[5] = l->rtt.run.count ? (double)l->rtt.last_rtt_ns * 1e-6 : NAN;
        x[6] = h->row_dead;
        if (h->adaptive)
            fill_adaptive(l, x + 7);
    } else {
        double f[DRTHS_HYBRID_MAX_LINKS], cmd[DRTHS_HYBRID_MAX_LINKS];
        for (int i = 0; i < h->n_links; i++) {
            f[i] = h->lk[i].used;
            cmd[i] = h->lk[i].command;
        }
        drths_numsub_row_all(&h->ns, f, cmd, row);
        double *x = row + h->ns.ncols;
        *x++ = h->row_dead;
        for (int i = 0; i < h->n_links; i++) {
            const drths_hybrid_link_t *l = &h->lk[i];
            const int got = fb_tick >= 0 && l->have_sample;
            x[0] = got ? (double)fb_tick : -1.0;
            x[1] = fb_tick >= 0 && !l->have_sample;
            x[2] = l->measured;
            x[3] = drths_smith_model(&l->smith, h->ns.step);
            x[4] = l->rtt.run.count ? (double)l->rtt.last_rtt_ns * 1e-6 : NAN;
            x += LINK_COLS;
            if (h->adaptive) {
                fill_adaptive(l, x);
                x += DRTHS_HYBRID_ADAPT_COLS;
            }
        }
    }
    int n = h->ns.n;
    const double *xs = row + 3, *as = row + 3 + 2 * n;
    for (int i = 0; i < n; i++) {
        h->peak_x[i] = fmax(h->peak_x[i], fabs(xs[i]));
        h->sum_x2[i] += xs[i] * xs[i];
        h->peak_a[i] = fmax(h->peak_a[i], fabs(as[i]));
        h->sum_a2[i] += as[i] * as[i];
    }
    for (int i = 0; i < h->n_links; i++)
        h->peak_force_N = fmax(h->peak_force_N, fabs(h->n_links == 1 ? used : h->lk[i].used));
    h->c.rows++;
}

static int64_t min64(int64_t a, int64_t b);

/* Announces epoch e+1 with L_to from eff_tick (three copies, the first at the next poll),
 * recomputes the feedback wait for it and restarts the late-rate evidence. The round-trip window
 * is left alone: it measures the link, which an epoch does not change. */
static void announce(drths_hybrid_t *h, uint32_t L_from, uint32_t L_to, uint64_t eff_tick,
                     uint64_t late_from_tick, drths_epoch_reason_t why, int64_t now_ns)
{
    h->epoch++;
    h->epoch_msg.new_epoch = h->epoch;
    h->epoch_msg.loop_delay_ticks = L_to;
    h->epoch_msg.effective_tick = eff_tick;
    h->epoch_copies = EPOCH_COPIES;
    h->epoch_next_ns = now_ns;
    h->epoch_eff_tick = late_from_tick;
    h->c.epoch_changes++;
    if (h->n_elog < DRTHS_HYBRID_MAX_EPOCH_LOG) {
        drths_hybrid_epoch_log_t *l = &h->elog[h->n_elog++];
        l->epoch = h->epoch;
        l->L_from = L_from;
        l->L_to = L_to;
        l->step = h->ns.step;
        l->effective_tick = eff_tick;
        l->time_s = (double)h->ns.step * h->ns.dt_s;
        l->reason = why;
    }
    /* The feedback wait for the new L, by the same rule as everywhere
     * (drths_hybrid_feedback_wait_ns): from the window's round trips when there are enough of
     * them, else from the probes' (epoch 1's wait moved by the change of L). decide() then
     * refines it from the last 1 to 2 s. Nothing here is derived from an earlier epoch's wait,
     * so nothing accumulates. */
    uint64_t nw = drths_rtt_window_count(&h->rttw);
    if (nw >= h->p.ep.min_rtt_samples && nw > 0) {
        h->lk[0].wait_ns = drths_hybrid_feedback_wait_ns(
            L_to, h->p.dt_ns, drths_rtt_window_min(&h->rttw),
            drths_rtt_window_quantile(&h->rttw, h->p.lp.quantile), h->p.reorder_ticks);
    } else {
        int64_t wait = h->wait0_ns + ((int64_t)L_to - (int64_t)h->p.L) * h->p.dt_ns;
        int64_t floor_ns = (int64_t)h->p.reorder_ticks * h->p.dt_ns;
        h->lk[0].wait_ns = wait > floor_ns ? wait : floor_ns;
    }
    /* A slower up-link moves every arrival later: the deadlines follow at once instead of
     * waiting up to 1 s for the long minimum to forget the faster past. This touches only the
     * arrival estimate, which the next 0.5 s bucket replaces; it never feeds the choice of L. */
    int64_t short_min = min64(h->lk[0].off_short_cur, h->lk[0].off_short_prev);
    if (short_min > min64(h->lk[0].off_cur, h->lk[0].off_prev)) {
        h->lk[0].off_cur = h->lk[0].off_prev = short_min;
        h->lk[0].off_bucket_ns = now_ns;
    }
    drths_late_window_reset(&h->late);
}

/* Starts the epoch that takes L to `next` by a warp from the last tick commanded (docs/design.md,
 * "Epochs: raise and glide"). A raise is urgent and starts at once, unless a raise is in
 * progress: two raises at once could stop the specimen and more, so it starts where that one
 * ends; a raise during a glide adds to it (the rates add up to more than 0). A lowering is not
 * urgent and starts where every warp in progress ends. With no room for another warp nothing
 * changes: the next decision asks again. */
static void change_L(drths_hybrid_t *h, uint32_t next, drths_epoch_reason_t why, int64_t now_ns)
{
    if (h->n_warps >= DRTHS_HYBRID_MAX_WARPS)
        return;
    const double n = (double)next - (double)h->glide_target;
    double t0 = (double)h->last_cmd_tick;
    for (int i = 0; i < h->n_warps; i++)
        if (n < 0.0 || h->warp[i].n > 0.0)
            t0 = fmax(t0, drths_warp_end(&h->warp[i]));
    const double dt = (double)h->p.dt_ns * 1e-9;
    drths_warp_t *w = &h->warp[h->n_warps++];
    if (n > 0.0)
        drths_warp_plan(w, t0, n, 1.0, h->p.warp_raise_per_s * dt);
    else
        drths_warp_plan(w, t0, n, 1.0 / h->p.glide_every, h->p.warp_glide_per_s * dt);
    const uint32_t from = h->glide_target;
    h->glide_target = next;
    if (next > h->c.L_max_seen)
        h->c.L_max_seen = next;
    double end = t0;
    for (int i = 0; i < h->n_warps; i++)
        end = fmax(end, drths_warp_end(&h->warp[i]));
    const uint64_t eff = (uint64_t)ceil(end);
    /* A raise's lateness counts from the first tick at the new L (the ticks slowed down before
     * it had less lead, which the raise is there to mend); a glide's from its first tick. */
    announce(h, from, next, eff, n > 0.0 ? eff : h->last_cmd_tick + 1, why, now_ns);
}

/* One epoch decision (docs/design.md, "Delay estimator") after step n. Its inputs are
 * measurements only (the sliding window and the late window): nothing a previous decision chose
 * is fed back, so L follows the round trip both ways. */
static void decide(drths_hybrid_t *h, int64_t now_ns)
{
    drths_rtt_window_t *w = &h->rttw;
    drths_rtt_window_advance(w, now_ns);
    drths_epoch_input_t in = {0};
    in.now_ns = now_ns;
    in.current_L = h->glide_target;
    in.window_ticks = h->late.filled;
    in.window_late = h->late.late_count;
    in.rtt_samples = drths_rtt_window_count(w);
    in.rtt_q_ns = drths_rtt_window_quantile(w, h->p.lp.quantile);
    in.rtt_recent_q_ns = drths_rtt_window_recent_quantile(w, RTT_RECENT_SUBS, h->p.lp.quantile,
                                                          &in.rtt_recent_samples);
    drths_epoch_reason_t why;
    uint32_t next = drths_epoch_decide(&h->p.ep, &h->p.lp, h->p.dt_ns, &h->est, &in, &why);
    if (next > h->p.L_max)
        next = h->p.L_max;
    if (why != DRTHS_EPOCH_KEEP && next != h->glide_target)
        change_L(h, next, why, now_ns);
    /* The feedback wait (drths_hybrid_feedback_wait_ns) for the L being reached, from the round
     * trips of the last 1 to 2 s: their minimum and quantile follow a route change within 2 s,
     * where the whole window's minimum would keep the old route for 8 s and make the loop wait
     * too long after a step up. Only the wait follows this short view; L does not. */
    if (in.rtt_recent_samples >= h->p.ep.min_rtt_samples && in.rtt_recent_samples > 0)
        h->lk[0].wait_ns = drths_hybrid_feedback_wait_ns(
            h->glide_target, h->p.dt_ns, drths_rtt_window_recent_min(w, RTT_RECENT_SUBS),
            in.rtt_recent_q_ns, h->p.reorder_ticks);
}

/* The stability detector of every link sees the state after the step, its damper's
 * displacement and the force the step used for it (the energy of its interface); when the loop
 * adds energy there, the run ends with ABORT {HOLD, what it saw}, which puts every actuator
 * site into HOLD. Returns nonzero when it did. */
static int check_stability(drths_hybrid_t *h, int64_t now_ns)
{
    double d[DRTHS_NUMSUB_MAX_DAMPERS], vd[DRTHS_NUMSUB_MAX_DAMPERS];
    if (h->n_links == 1)
        drths_numsub_damper_state(&h->ns, &d[0], &vd[0]);
    else
        drths_numsub_damper_state_all(&h->ns, d, vd);
    for (int i = 0; i < h->n_links; i++) {
        drths_hybrid_link_t *l = &h->lk[i];
        if (!drths_stability_step(&l->stab, h->ns.it.x, h->ns.it.v, d[l->damper], l->used))
            continue;
        begin_link_close(h, i, now_ns, DRTHS_MSG_ABORT, DRTHS_STOP_HOLD, l->stab.text,
                         DRTHS_HYBRID_STABILITY);
        return 1;
    }
    return 0;
}

/* Link l's force for step n from its feedback sample (have_sample) or concealed by its model.
 * Sets l->measured and l->used. */
static void resolve_force(drths_hybrid_t *h, drths_hybrid_link_t *l, int64_t n)
{
    const drths_fb_sample_t *s = l->have_sample ? &l->sample : NULL;
    int filler;
    l->measured = NAN;
    /* The step the specimen got at tick n: the one sent for tick n, or, when the actuator site
     * played a late command behind its tick (delayed playback; the sample names the command's
     * tick), the one sent for that tick. */
    uint64_t cmd_tick = (uint64_t)n;
    if (s && s->cmd_tick >= 0 && s->cmd_tick < n && n - s->cmd_tick < (int64_t)h->tm_cap / 2)
        cmd_tick = (uint64_t)s->cmd_tick;
    int64_t k = tm_get(h, cmd_tick, &filler);
    if (l == &h->lk[0])
        h->row_dead = (double)(n - k);
    /* The actuator site guessed tick n's command (extrapolated or braking, flagged CONCEALED and
     * naming tick n itself): the specimen did not get any step, so its force is no measurement
     * of one. */
    const int guessed = s && (s->flags & DRTHS_FB_CONCEALED) && s->cmd_tick == n;
    /* A sample that names a command tick so far behind (a late command the actuator site played
     * after a burst of loss) that the model no longer holds its step, or whose force is not a
     * number, cannot be paired: the model conceals it (else the integrator would take a NaN). */
    const int unpaired = s && (isnan(s->ch[0].force_n) || isnan(drths_smith_model(&l->smith, k)));
    if (s && !filler && !guessed && !unpaired) {
        l->measured = s->ch[0].force_n;
        l->used = drths_smith_force_at(&l->smith, n, k, l->measured);
        l->consecutive = 0;
        if ((uint64_t)n >= h->epoch_eff_tick && l == &h->lk[0])
            drths_late_window_add(&h->late, (s->flags & DRTHS_FB_CONCEALED) != 0);
    } else if (s) {
        /* The specimen was slowed down at tick n (a raise of L), or followed the actuator
         * site's guess: its force is not comparable with the model's, so the model conceals
         * it, keeping the last correction. A guess still counts for the late rate. */
        l->measured = s->ch[0].force_n;
        l->used = drths_smith_conceal(&l->smith, n);
        l->consecutive = 0;
        if (filler) {
            h->c.transition++;
            l->c.transition++;
        } else if ((uint64_t)n >= h->epoch_eff_tick && l == &h->lk[0]) {
            drths_late_window_add(&h->late, 1);
        }
    } else {
        l->used = drths_smith_conceal(&l->smith, n);
        l->concealed_tick[(uint64_t)n % l->concealed_cap] = (uint64_t)n;
        h->c.concealed++;
        l->c.concealed++;
        if (++l->consecutive > l->c.max_consecutive_concealed)
            l->c.max_consecutive_concealed = l->consecutive;
        if (l->consecutive > h->c.max_consecutive_concealed)
            h->c.max_consecutive_concealed = l->consecutive;
    }
}

/* Step n with every link's feedback resolved (a sample in l->sample, or concealed). */
static drths_hybrid_poll_result_t do_step(drths_hybrid_t *h, int64_t now_ns,
                                          drths_hybrid_action_t *a)
{
    int64_t n = h->ns.step + 1;
    for (int i = 0; i < h->n_links; i++)
        resolve_force(h, &h->lk[i], n);
    const drths_hybrid_link_t *l0 = &h->lk[0];
    if (h->n_links == 1) {
        drths_numsub_correct(&h->ns, l0->used);
    } else {
        double f[DRTHS_HYBRID_MAX_LINKS];
        for (int i = 0; i < h->n_links; i++)
            f[i] = h->lk[i].used;
        drths_numsub_correct_all(&h->ns, f);
    }
    int any_sample = 0;
    for (int i = 0; i < h->n_links; i++)
        any_sample |= h->lk[i].have_sample;
    fill_row(h, (h->n_links == 1 ? l0->have_sample : 1) ? (long)n : -1,
             h->n_links == 1 ? !l0->have_sample : !any_sample, l0->measured, l0->used);
    for (int i = 0; i < h->n_links; i++)
        h->lk[i].resolved = h->lk[i].have_sample = 0;
    a->row = h->row;
    if (check_stability(h, now_ns))
        return DRTHS_HYBRID_ACT;
    if (h->ns.step + 1 >= h->ns.steps) {
        begin_close(h, now_ns, DRTHS_MSG_STOP, DRTHS_STOP_END_OF_RECORD, "end of record",
                    DRTHS_HYBRID_END_OF_RECORD);
        return DRTHS_HYBRID_ACT;
    }
    /* The command for step n+1 from the state and the force used at step n (semiactive.h). */
    if (h->n_links == 1) {
        h->lk[0].command = drths_semiactive_command(&h->ctl, h->ns.it.x, h->ns.it.v, l0->used);
    } else {
        double f[DRTHS_HYBRID_MAX_LINKS], cmd[DRTHS_NUMSUB_MAX_DAMPERS];
        for (int i = 0; i < h->n_links; i++)
            f[i] = h->lk[i].used;
        drths_semiactive_command_all(&h->ctl, h->ns.it.x, h->ns.it.v, f, cmd);
        for (int i = 0; i < h->n_links; i++)
            h->lk[i].command = cmd[h->lk[i].damper];
    }
    if (h->p.adapt_L && n % h->p.decide_ticks == 0)
        decide(h, now_ns);
    if (predict_and_command(h, now_ns)) {
        a->send = &h->lk[0].out;
        a->link = 0;
        a->is_command = 1;
    }
    return DRTHS_HYBRID_ACT;
}

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

static drths_hybrid_poll_result_t poll_closing(drths_hybrid_t *h, int64_t now_ns,
                                               drths_hybrid_action_t *a)
{
    if (h->close_start_ns == INT64_MIN)
        h->close_start_ns = now_ns;
    if (send_pending(h, a))
        return DRTHS_HYBRID_ACT;
    if (h->close_sent < CLOSE_COPIES) {
        if (now_ns >= h->next_send_ns) {
            for (int i = 0; i < h->n_links; i++) {
                drths_hybrid_link_t *l = &h->lk[i];
                drths_msg_t *o = &l->out;
                memset(o, 0, sizeof *o);
                o->type = (drths_msg_type_t)h->close_type;
                o->epoch = h->epoch;
                o->tick = h->last_cmd_tick;
                o->u.stop.reason = (uint8_t)h->close_reason;
                size_t len = strlen(h->close_text);
                if (len > DRTHS_WIRE_MAX_TEXT)
                    len = DRTHS_WIRE_MAX_TEXT;
                memcpy(o->u.stop.text, h->close_text, len);
                l->pending = l->skip_close ? 0 : 1;
            }
            h->close_sent++;
            h->c.closes_sent++;
            h->next_send_ns = now_ns + h->p.close_repeat_ns;
            if (send_pending(h, a))
                return DRTHS_HYBRID_ACT;
        }
        if (h->close_sent < CLOSE_COPIES) {
            a->wake_ns = h->next_send_ns;
            return DRTHS_HYBRID_WAIT;
        }
    }
    if (h->close_type == DRTHS_MSG_ABORT) {
        h->state = S_DONE;
        return DRTHS_HYBRID_DONE;
    }
    int final_seen = 1, stopped = 1;
    for (int i = 0; i < h->n_links; i++) {
        const drths_hybrid_link_t *l = &h->lk[i];
        final_seen &= h->got_feedback && l->fb_newest_tick >= h->last_cmd_tick;
        stopped &= l->peer_stopped;
    }
    if (final_seen || stopped || now_ns - h->close_start_ns >= h->p.final_wait_ns) {
        h->state = S_DONE;
        return DRTHS_HYBRID_DONE;
    }
    a->wake_ns = h->close_start_ns + h->p.final_wait_ns;
    return DRTHS_HYBRID_WAIT;
}

/* Every link's out buffer as an EPOCH with header epoch and tick (EPOCH 1 of the start, or a
 * copy of the latest epoch change), counted as sent; link 0's is returned, the others are
 * pending. */
static const drths_msg_t *send_epoch(drths_hybrid_t *h, uint32_t epoch, uint64_t tick,
                                     const drths_msg_epoch_t *e)
{
    for (int i = 0; i < h->n_links; i++) {
        drths_msg_t *o = &h->lk[i].out;
        memset(o, 0, sizeof *o);
        o->type = DRTHS_MSG_EPOCH;
        o->epoch = epoch;
        o->tick = tick;
        o->u.epoch = *e;
    }
    h->c.epochs_sent++;
    return send_all(h, 1);
}

/* The first link that has sent no FEEDBACK yet (0 if all have). */
static int first_silent(const drths_hybrid_t *h)
{
    for (int i = 0; i < h->n_links; i++)
        if (!h->lk[i].got_feedback)
            return i;
    return 0;
}

drths_hybrid_poll_result_t drths_hybrid_poll(drths_hybrid_t *h, int64_t now_ns,
                                             drths_hybrid_action_t *a)
{
    a->send = NULL;
    a->link = 0;
    a->is_command = 0;
    a->row = NULL;
    a->wake_ns = INT64_MAX;
    switch (h->state) {
    case S_START:
        h->start_ns = now_ns;
        for (int i = 0; i < h->n_links; i++) {
            drths_hybrid_link_t *l = &h->lk[i];
            l->last_rx_ns = now_ns;
            l->used = drths_smith_model(&l->smith, 0);
            l->measured = NAN;
        }
        h->next_send_ns = now_ns + h->p.epoch_repeat_ns;
        a->send = send_epoch(h, 0, 0, &(drths_msg_epoch_t){1, h->p.L, 0});
        fill_row(h, -1, 0, NAN, drths_smith_model(&h->lk[0].smith, 0));
        a->row = h->row;
        h->state = S_FIRST_COMMAND;
        return DRTHS_HYBRID_ACT;
    case S_FIRST_COMMAND:
        if (send_pending(h, a))
            return DRTHS_HYBRID_ACT;
        if (h->ns.steps <= 1) {
            h->last_cmd_tick = h->p.L;
            begin_close(h, now_ns, DRTHS_MSG_STOP, DRTHS_STOP_END_OF_RECORD, "end of record",
                        DRTHS_HYBRID_END_OF_RECORD);
            return drths_hybrid_poll(h, now_ns, a);
        }
        predict_and_command(h, now_ns);
        a->send = &h->lk[0].out;
        a->is_command = 1;
        h->state = S_RUN;
        return DRTHS_HYBRID_ACT;
    case S_CLOSING:
        return poll_closing(h, now_ns, a);
    case S_DONE:
        return DRTHS_HYBRID_DONE;
    default:
        break;
    }

    /* S_RUN */
    if (send_pending(h, a))
        return DRTHS_HYBRID_ACT;
    if (!h->got_feedback) {
        if (now_ns - h->start_ns >= h->p.start_timeout_ns) {
            const int i = first_silent(h);
            begin_link_close(h, i, now_ns, DRTHS_MSG_ABORT, DRTHS_STOP_PEER_LOST,
                             "no feedback from the actuator site after the start",
                             DRTHS_HYBRID_NO_START);
            return poll_closing(h, now_ns, a);
        }
        if (now_ns >= h->next_send_ns) {
            /* EPOCH 1 again: the first may have been lost. The message is rebuilt because the
             * out buffer has since held a COMMAND. */
            a->send = send_epoch(h, 0, 0, &(drths_msg_epoch_t){1, h->p.L, 0});
            h->next_send_ns = now_ns + h->p.epoch_repeat_ns;
            return DRTHS_HYBRID_ACT;
        }
        a->wake_ns = min64(h->next_send_ns, h->start_ns + h->p.start_timeout_ns);
        return DRTHS_HYBRID_WAIT;
    }
    if (h->epoch_copies > 0 && now_ns >= h->epoch_next_ns) {
        a->send = send_epoch(h, h->epoch, h->last_cmd_tick, &h->epoch_msg);
        h->epoch_copies--;
        h->epoch_next_ns = now_ns + EPOCH_REPEAT_NS;
        return DRTHS_HYBRID_ACT;
    }
    /* Ticks whose positions the newest step reached (the rest of a raise's slowed ticks). */
    if (command_next_tick(h, now_ns)) {
        a->send = &h->lk[0].out;
        a->is_command = 1;
        return DRTHS_HYBRID_ACT;
    }
    int64_t peer_deadline = INT64_MAX;
    const int64_t lost_ns = drths_hybrid_link_timeout_ns(h);
    for (int i = 0; i < h->n_links; i++) {
        drths_hybrid_link_t *l = &h->lk[i];
        if (now_ns - l->last_rx_ns >= lost_ns) {
            begin_link_close(h, i, now_ns, DRTHS_MSG_ABORT, DRTHS_STOP_PEER_LOST,
                             "no datagram from the actuator site for too long",
                             DRTHS_HYBRID_PEER_LOST);
            return poll_closing(h, now_ns, a);
        }
        peer_deadline = min64(peer_deadline, l->last_rx_ns + lost_ns);
    }
    /* Step n waits for every link's feedback of tick n, each until its own deadline. */
    uint64_t n = (uint64_t)h->ns.step + 1, tick;
    int64_t wake = peer_deadline;
    int all = 1;
    for (int i = 0; i < h->n_links; i++) {
        drths_hybrid_link_t *l = &h->lk[i];
        if (l->resolved)
            continue;
        if (drths_reorder_take_next(&l->rb, &tick, &l->sample) == 0) {
            l->resolved = l->have_sample = 1;
            continue;
        }
        int64_t min_off = min64(l->off_cur, l->off_prev);
        int64_t deadline = min_off + (int64_t)n * h->p.dt_ns + l->wait_ns;
        /* Besides the deadline, step n is given up when the feedback that ran ahead of it would
         * no longer fit in the reorder buffer. */
        if (now_ns >= deadline || l->fb_newest_tick + (uint64_t)h->p.r + 1 >= n + l->rb_depth) {
            drths_reorder_skip_next(&l->rb, &tick);
            l->resolved = 1;
            l->have_sample = 0;
            continue;
        }
        all = 0;
        wake = min64(wake, deadline);
    }
    if (all)
        return do_step(h, now_ns, a);
    a->wake_ns = wake;
    if (h->epoch_copies > 0)
        a->wake_ns = min64(a->wake_ns, h->epoch_next_ns);
    return DRTHS_HYBRID_WAIT;
}
