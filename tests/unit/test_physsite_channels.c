/* The actuator site's several actuator channels (physical.channels, site-physical/physsite.h)
 * in virtual time: the two ideal linear springs of
 * examples/opensees/linear-springs-2dof-ideal.yaml, each channel's actuator fed one-channel
 * COMMANDs directly (as the OpenFresco source does), ticked by drths_physsite_tick as the RT
 * loop does. Checks that one channel's HOLD holds the channels after it in the same tick and
 * the ones before it from the next, that the recorder row carries every channel, that the
 * start-up lines and summary.json describe the first channel as the first channel sees the
 * experiment, that a HOLD coming after the first channel finished at the record's end is
 * still the site's in the end lines and summary.json, that a channel not started fails the
 * tick rather than counting as finished, and that the ticks allocate nothing. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/config/config.h"
#include "site-physical/physsite.h"
#include "site-physical/report.h"

#include "alloc_count.h"

/* The site's HOLD sentence, formatted from the cause as the main thread does. */
static const char *site_hold_text(const drths_physsite_t *ps)
{
    static char buf[DRTHS_WIRE_MAX_TEXT + 1];
    return drths_physsite_hold_text(ps, buf, sizeof buf);
}

typedef struct world {
    drths_experiment_t exp;
    drths_physsite_t ps;
    uint64_t tick;
} world_t;

static world_t *W;

static char *src_path(const char *rel)
{
    const char *srcdir = getenv("DRTHS_SOURCE_DIR");
    char *p = malloc(1024);
    snprintf(p, 1024, "%s/%s", srcdir ? srcdir : "..", rel);
    return p;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Starts channel i's actuator (EPOCH 1, L = 1 tick). */
static void start(int i)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_EPOCH;
    m.epoch = 1;
    m.u.epoch.new_epoch = 1;
    m.u.epoch.loop_delay_ticks = 1;
    assert_int_equal(drths_physsite_act(&W->ps, i)->lookahead, 0); /* compensation none */
    drths_actuator_receive(drths_physsite_act(&W->ps, i), &m, 0);
}

/* The example with `from` replaced by `to` (NULL: as it is), loaded and its site initialised,
 * no actuator started. */
static void load_world(const char *from, const char *to)
{
    W = calloc(1, sizeof *W);
    char *p = src_path("examples/opensees/linear-springs-2dof-ideal.yaml");
    char *text = slurp(p);
    /* These tests step the commands by millimetres in one tick to put the drives at known
     * places: limits that admit such steps (the envelope has its own tests). A HOLD within a
     * tick is a drive beyond limit_drive_m (0.05 m), a command the limits let through. */
    {
        const char *wide = "physical:\n  limit_velocity_m_s: 1000\n  limit_drive_velocity_m_s: 2000\n"
                           "  limit_drive_acceleration_m_s2: 1.0e9\n  limit_drive_m: 0.05\n";
        char *at = strstr(text, "physical:\n");
        assert_non_null(at);
        char *t = calloc(1, strlen(text) + strlen(wide) + 1);
        memcpy(t, text, (size_t)(at - text));
        strcat(t, wide);
        strcat(t, at + strlen("physical:\n"));
        free(text);
        text = t;
    }
    if (from) {
        char *at = strstr(text, from);
        assert_non_null(at);
        char *t = calloc(1, strlen(text) + strlen(to) + 1);
        memcpy(t, text, (size_t)(at - text));
        strcat(t, to);
        strcat(t, at + strlen(from));
        free(text);
        text = t;
    }
    drths_error_t err = {{0}};
    if (drths_experiment_load_buffer(&W->exp, text, strlen(text), p, &err) != 0)
        fail_msg("%s", err.msg);
    free(text);
    free(p);
    drths_physsite_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.exp = &W->exp;
    if (drths_physsite_init(&W->ps, &cfg, NULL, NULL, NULL, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(W->ps.n_channels, 2);
}

/* load_world, both actuators started. */
static void open_world(const char *from, const char *to)
{
    load_world(from, to);
    for (int i = 0; i < 2; i++)
        start(i);
}

static int close_world(void **state)
{
    (void)state;
    drths_physsite_close(&W->ps);
    drths_experiment_close(&W->exp);
    free(W);
    return 0;
}

/* Channel i's command for tick u (one tick ahead, as with L = 1). */
static void command(int i, uint64_t u, double disp_m)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_COMMAND;
    m.epoch = 1;
    m.tick = u;
    m.counter = u + 1;
    m.u.command.loop_delay_ticks = 1;
    m.u.command.n_channels = 1;
    m.u.command.r = 1;
    m.u.command.s[0][0].disp_m = disp_m;
    drths_actuator_receive(drths_physsite_act(&W->ps, i), &m, (int64_t)u);
}

/* The record's end announced to both channels: tick u is the last commanded. */
static void stop_at(uint64_t u)
{
    drths_msg_t m;
    memset(&m, 0, sizeof m);
    m.type = DRTHS_MSG_STOP;
    m.epoch = 1;
    m.tick = u;
    m.u.stop.reason = DRTHS_STOP_END_OF_RECORD;
    for (int i = 0; i < 2; i++)
        drths_actuator_receive(drths_physsite_act(&W->ps, i), &m, (int64_t)u);
}

/* One tick: both channels commanded d0, d1 for the next tick, then drths_physsite_tick. */
static int tick(double d0, double d1, int *finished)
{
    command(0, W->tick + 1, d0);
    command(1, W->tick + 1, d1);
    int rc = drths_physsite_tick(&W->ps, W->tick, 0, 0, finished);
    W->tick++;
    return rc;
}

static double cell(int channel, int col)
{
    return W->ps.row[channel * DRTHS_ACT_NCOLS + col];
}

/* A small step of both, so the drives stand at known places. */
static void run_to(double d0, double d1, int n)
{
    int finished = 0;
    for (int k = 0; k < n; k++) {
        assert_int_equal(tick(d0, d1, &finished), 0);
        assert_false(finished);
    }
    assert_false(drths_physsite_in_hold(&W->ps));
    assert_true(cell(0, DRTHS_ACT_COL_DRIVE) == d0 && cell(1, DRTHS_ACT_COL_DRIVE) == d1);
}

/* Reads a whole small file. */
static char *read_stream(FILE *f)
{
    fflush(f);
    rewind(f);
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    return buf;
}

/* summary.json of the site as it stands. */
static char *summary_text(void)
{
    char path[] = "/tmp/drths-physsite-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    drths_error_t err = {{0}};
    assert_int_equal(drths_physsite_write_summary(&W->ps, path, &err), 0);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char *out = read_stream(f);
    fclose(f);
    unlink(path);
    return out;
}

/* The first channel's command limit: the second channel, after it in the tick, enters HOLD
 * before its own tick and does not drive that tick's command. */
static void test_first_channel_holds_the_second_in_its_tick(void **state)
{
    (void)state;
    open_world(NULL, NULL);
    run_to(0.001, -0.002, 5);
    int finished = 0;
    assert_int_equal(tick(0.06, -0.003, &finished), 0); /* 0.06: beyond limit_drive_m */
    assert_int_equal(tick(0.0, 0.0, &finished), 0);    /* the tick they are for */
    assert_int_equal(W->ps.hold_channel, 0);
    assert_true(cell(0, DRTHS_ACT_COL_HOLD) == 1.0);
    assert_true(cell(1, DRTHS_ACT_COL_HOLD) == 1.0);
    assert_true(cell(1, DRTHS_ACT_COL_DRIVE) == -0.002); /* held where it stood */
    assert_non_null(
        strstr(site_hold_text(&W->ps),
               "channel 1 (x): drive envelope: drive 0.06 m exceeds limit_drive_m 0.05 m"));
    char ch2[DRTHS_WIRE_MAX_TEXT + 1];
    assert_string_equal(drths_physsite_channel_hold_text(&W->ps, 1, ch2, sizeof ch2),
                        site_hold_text(&W->ps));
    /* summary.json's "hold" is the site's sentence, as the exit reason is. */
    char *sum = summary_text();
    const char *hold = strstr(sum, "\"hold\": {"); /* the top level's, before "channels" */
    assert_non_null(hold);
    const char *reason = strstr(hold, "\"reason\": \"channel 1 (x): drive envelope: drive 0.06 m");
    assert_true(reason && reason < strchr(hold, '}'));
    free(sum);
}

/* The second channel's limit: the first, before it in the tick, has driven that tick and holds
 * from the next; the row carries both channels' columns. */
static void test_second_channel_holds_the_first_from_the_next_tick(void **state)
{
    (void)state;
    open_world(NULL, NULL);
    run_to(0.001, -0.002, 5);
    int finished = 0;
    assert_int_equal(tick(0.0015, 0.06, &finished), 0);
    assert_int_equal(tick(0.002, 0.0, &finished), 0); /* 0.0015 and 0.06 played */
    assert_int_equal(W->ps.hold_channel, 1);
    assert_true(cell(0, DRTHS_ACT_COL_HOLD) == 0.0 && cell(0, DRTHS_ACT_COL_DRIVE) == 0.0015);
    assert_true(cell(1, DRTHS_ACT_COL_HOLD) == 1.0);
    assert_true(cell(1, DRTHS_ACT_COL_TICK) == (double)(W->tick - 1));
    assert_int_equal(tick(0.0, 0.0, &finished), 0); /* 0.002 not played: held */
    assert_true(cell(0, DRTHS_ACT_COL_HOLD) == 1.0 && cell(0, DRTHS_ACT_COL_DRIVE) == 0.0015);
    assert_non_null(strstr(site_hold_text(&W->ps), "channel 2 (y): "));
    int n = 0;
    const char *const *cols = drths_physsite_columns(&W->ps, &n);
    assert_int_equal(n, 2 * DRTHS_ACT_NCOLS);
    assert_string_equal(cols[DRTHS_ACT_NCOLS + DRTHS_ACT_COL_HOLD],
                        "ch2_hold"); /* the second channel's copy of the column */
}

/* summary.json's top-level DAQ counts are the site's: a fault counted on the second channel
 * shows there, where a single-channel run shows its own. */
static void test_daq_counts_are_the_sites(void **state)
{
    (void)state;
    open_world(NULL, NULL);
    run_to(0.001, -0.002, 5);
    W->ps.act.c.daq_errors = 1;
    W->ps.extra[0].act.c.daq_errors = 2;
    drths_physsite_daq(&W->ps, 1)->n_clamped = 4;
    char *sum = summary_text();
    const char *daq = strstr(sum, "\"daq\": {"); /* the top level's, before "channels" */
    assert_non_null(daq);
    const char *end = strchr(daq, '}');
    const char *errors = strstr(daq, "\"errors\": 3");
    const char *clamped = strstr(daq, "\"clamped_writes\": 4");
    assert_true(errors && errors < end);
    assert_true(clamped && clamped < end);
    free(sum);
}

/* summary.json states each channel's drive envelope: the first channel's at the top level (as
 * the other first-channel members), each channel's own under "channels", with the first
 * refusal when there was one. */
static void test_summary_states_the_envelope(void **state)
{
    (void)state;
    open_world(NULL, NULL);
    run_to(0.001, -0.002, 5);
    drths_envelope_t *e1 = &drths_physsite_daq(&W->ps, 1)->env;
    e1->refused = 2;
    e1->first_refusal = (drths_envelope_violation_t){.bound = DRTHS_ENV_VELOCITY,
                                                     .drive_m = 0.01,
                                                     .value = 9.5,
                                                     .limit = 1.25,
                                                     .command_m = 0.001};
    char *sum = summary_text();
    const char *chs = strstr(sum, "\"channels\": [");
    assert_non_null(chs);
    const char *env = strstr(sum, "\"envelope\": {"); /* the top level's, before "channels" */
    assert_true(env && env < chs);
    const char *keys[] = {"\"set\": true",           "\"limits\": {",
                          "\"drive_m\": ",           "\"velocity_m_s\": ",
                          "\"acceleration_m_s2\": ", "\"offset_m\": ",
                          "\"max_velocity_m_s\": ",  "\"max_acceleration_m_s2\": ",
                          "\"max_offset_m\": ",      "\"margin\": ",
                          "\"margin_bound\": ",      "\"admitted\": ",
                          "\"refused\": 0"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const char *at = strstr(env, keys[k]);
        if (!at || at > chs)
            fail_msg("top-level envelope: no %s", keys[k]);
    }
    const char *none = strstr(env, "\"first_refusal\""); /* none for the first channel */
    assert_true(!none || none > chs);
    /* The second channel's: its refusal. */
    const char *y = strstr(chs, "\"name\": \"y\"");
    assert_non_null(y);
    const char *yenv = strstr(y, "\"envelope\": {");
    assert_non_null(yenv);
    assert_non_null(strstr(yenv, "\"refused\": 2"));
    const char *fr = strstr(yenv, "\"first_refusal\": {");
    assert_non_null(fr);
    assert_non_null(strstr(fr, "\"bound\": \"limit_drive_velocity_m_s\""));
    assert_non_null(strstr(fr, "\"value\": 9.5"));
    assert_non_null(strstr(fr, "\"limit\": 1.25"));
    /* The admitted drives of the first channel: one per tick. */
    const char *adm = strstr(env, "\"admitted\": ");
    assert_true(strtol(adm + strlen("\"admitted\": "), NULL, 10) > 0);
    free(sum);
}

/* The first channel's own limit and specimen are what the start-up lines and summary.json's
 * first-channel members say, not the top-level sections'. */
static void test_setup_lines_are_the_first_channels(void **state)
{
    (void)state;
    open_world("          stiffness_N_per_m: 1.0e7\n",
               "          stiffness_N_per_m: 1.0e7\n      limit_force_N: 123000\n"
               "      actuator:\n        plant: three-pole\n");
    FILE *f = tmpfile();
    assert_non_null(f);
    drths_physsite_print_setup(f, &W->ps);
    char *out = read_stream(f);
    fclose(f);
    assert_non_null(strstr(out, "  specimen: linear-spring damper, three-pole actuator"));
    assert_non_null(strstr(out, "measured 0.095 m, 123000 N; HOLD"));
    free(out);
    out = summary_text();
    const char *sp = strstr(out, "\"specimen\": {");
    assert_non_null(sp);
    const char *plant = strstr(sp, "\"plant\": \"three-pole\"");
    assert_true(plant && plant < strchr(sp, '}'));
    free(out);
}

/* The first channel finishes at the record's end; the second trips its limit on that very
 * tick and ramps on alone. The run is the site's HOLD: in the end lines and summary.json. */
static void test_hold_after_the_first_finished(void **state)
{
    (void)state;
    open_world(NULL, NULL);
    run_to(0.001, -0.002, 5);
    stop_at(W->tick + 1);
    int finished = 0;
    assert_int_equal(tick(0.001, 0.06, &finished), 0);
    assert_int_equal(tick(0.0, 0.0, &finished), 0); /* the last tick; channel 2 trips */
    assert_true(W->ps.act.finished && !W->ps.act.hold);
    assert_true(W->ps.extra[0].act.hold && !finished);
    assert_true(drths_physsite_in_hold(&W->ps));
    int k = 0;
    while (!finished && k++ < 100000)
        assert_int_equal(tick(0.0, 0.0, &finished), 0);
    assert_true(finished);
    assert_true(isnan(cell(0, DRTHS_ACT_COL_MEAS_FORCE))); /* finished before: NaN */
    FILE *f = tmpfile();
    drths_physsite_print_end(f, &W->ps, "dir");
    char *out = read_stream(f);
    fclose(f);
    assert_non_null(strstr(out, "  HOLD: channel 2 (y): drive envelope: drive 0.06 m"));
    free(out);
    assert_ptr_equal(drths_physsite_hold_act(&W->ps), &W->ps.extra[0].act);
}

/* A channel not started is not a finished one: the tick fails as with one channel (-EAGAIN),
 * whether another channel runs or none does. */
static void test_channel_not_started_fails_the_tick(void **state)
{
    (void)state;
    load_world(NULL, NULL);
    int finished = 1;
    assert_int_equal(drths_physsite_tick(&W->ps, 0, 0, 0, &finished), -EAGAIN);
    assert_false(finished);
    start(0);
    finished = 1;
    assert_int_equal(drths_physsite_tick(&W->ps, 0, 0, 0, &finished), -EAGAIN);
    assert_false(finished);
}

/* The RT side of several channels allocates nothing: ticks, a channel's HOLD given to the
 * other, the ramps, to the end. */
static void test_ticks_allocate_nothing(void **state)
{
    (void)state;
    open_world(NULL, NULL);
    run_to(0.001, -0.002, 5);
    if (!COUNT_ALLOCS) {
        skip(); /* a sanitizer's allocator: nothing to count */
        return;
    }
    int finished = 0;
    long before = atomic_load(&alloc_count);
    for (int k = 0; k < 20; k++)
        assert_int_equal(tick(0.001 + 1e-5 * k, -0.002, &finished), 0);
    assert_int_equal(tick(0.001, 0.06, &finished), 0);
    int n = 0;
    while (!finished && n++ < 100000)
        assert_int_equal(tick(0.0, 0.0, &finished), 0);
    long after = atomic_load(&alloc_count);
    assert_true(finished && W->ps.hold_channel == 1);
    assert_int_equal(after - before, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_first_channel_holds_the_second_in_its_tick, close_world),
        cmocka_unit_test_teardown(test_second_channel_holds_the_first_from_the_next_tick,
                                  close_world),
        cmocka_unit_test_teardown(test_daq_counts_are_the_sites, close_world),
        cmocka_unit_test_teardown(test_summary_states_the_envelope, close_world),
        cmocka_unit_test_teardown(test_setup_lines_are_the_first_channels, close_world),
        cmocka_unit_test_teardown(test_hold_after_the_first_finished, close_world),
        cmocka_unit_test_teardown(test_channel_not_started_fails_the_tick, close_world),
        cmocka_unit_test_teardown(test_ticks_allocate_nothing, close_world),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
