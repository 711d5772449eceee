/* The sites section of the experiment file (common/config/config_sites.c): the two-labs
 * example, each damper's view, an actuator site's own entry (--site), one fingerprint for every
 * site, a file without sites unchanged, and wrong sites named with file, line and field. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/config/config.h"
#include "protocol/fingerprint.h"
#include "text_file.h"

#define EXAMPLE "examples/two-labs.yaml"

static char *src_path(const char *rel)
{
    const char *top = getenv("DRTHS_SOURCE_DIR");
    if (!top)
        top = ".";
    size_t n = strlen(top) + strlen(rel) + 2;
    char *p = malloc(n);
    assert_non_null(p);
    snprintf(p, n, "%s/%s", top, rel);
    return p;
}

/* Loads text as the example would be at its path. */
static int load_text(drths_experiment_t *x, const char *text, drths_error_t *err)
{
    char *p = src_path(EXAMPLE);
    int r = drths_experiment_load_buffer(x, text, strlen(text), p, err);
    free(p);
    return r;
}

static void load_example(drths_experiment_t *x)
{
    char *p = src_path(EXAMPLE);
    drths_error_t err = {{0}};
    if (drths_experiment_load(x, p, &err) != 0)
        fail_msg("%s: %s", p, err.msg);
    free(p);
}

static void fingerprint(const drths_experiment_t *x, uint8_t fp[DRTHS_FINGERPRINT_BYTES])
{
    drths_error_t err = {{0}};
    if (drths_experiment_fingerprint(x, fp, &err) != 0)
        fail_msg("fingerprint: %s", err.msg);
}

/* The example: two sites, one damper each at floors 1 and 2, addresses and names. */
static void test_example(void **state)
{
    (void)state;
    drths_experiment_t x;
    load_example(&x);
    assert_int_equal(x.n_sites, 2);
    assert_int_equal(drths_experiment_n_dampers(&x), 2);
    assert_true(x.sites_line > 0);
    assert_string_equal(x.sites[0].name, "labA");
    assert_string_equal(x.sites[1].name, "labB");
    assert_string_equal(x.sites[0].address, "127.0.0.1:47001");
    assert_string_equal(x.sites[1].listen, "127.0.0.1:47002"); /* listen defaults to address */
    assert_null(x.sites[0].key_path);
    assert_int_equal(x.sites[1].first, 1);
    assert_int_equal(drths_experiment_damper(&x, 0)->specimen.floor, 1);
    assert_int_equal(drths_experiment_damper(&x, 1)->specimen.floor, 2);
    /* Each damper takes the top-level specimen as its default. */
    assert_int_equal(drths_experiment_damper(&x, 1)->specimen.damper.model,
                     x.specimen.damper.model);
    char name[80];
    drths_experiment_damper_name(&x, 1, name, sizeof name);
    assert_string_equal(name, "labB.d2");
    assert_null(x.site);
    /* A numerical site drives one link for now: refused with the file's line of sites. */
    drths_error_t err = {{0}};
    assert_int_equal(drths_experiment_check_network(&x, &err), -ENOTSUP);
    char want[64];
    snprintf(want, sizeof want, "two-labs.yaml:%d: sites:", x.sites_line);
    assert_non_null(strstr(err.msg, want));
    drths_experiment_close(&x);
    drths_experiment_close(&x); /* safe twice */
}

/* A file without sites: one damper, the experiment itself, and no site to select. */
static void test_one_site_file(void **state)
{
    (void)state;
    char *p = src_path("examples/three-story-elcentro.yaml");
    drths_experiment_t x;
    drths_error_t err = {{0}};
    if (drths_experiment_load(&x, p, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(x.n_sites, 0);
    assert_int_equal(drths_experiment_n_dampers(&x), 1);
    assert_ptr_equal(drths_experiment_damper(&x, 0), &x);
    assert_int_equal(drths_experiment_check_network(&x, &err), 0);
    assert_int_equal(drths_experiment_select_site(&x, "labA", &err), -EINVAL);
    assert_non_null(strstr(err.msg, "--site labA: the file has no sites section"));
    drths_experiment_close(&x);
    free(p);
}

/* --site: the actuator site's experiment is its channel's, its listen address and key the
 * site's, and the fingerprint that of every other site. */
static void test_select_site(void **state)
{
    (void)state;
    drths_experiment_t num, labb;
    load_example(&num);
    char *text = slurp(num.path);
    /* Lab B's own key file, and its channel's own damper substeps. */
    char *t1 = replaced(text, "    address: \"127.0.0.1:47002\"\n    key_file: null",
                       "    address: \"127.0.0.1:47002\"\n    listen: \"0.0.0.0:47002\"\n"
                       "    key_file: keys/labB.key");
    char *t2 = replaced(t1, "        floor: 2 ",
                       "        specimen:\n          damper:\n"
                       "            model: phillips2013-200kN\n"
                       "            substeps: 7\n        floor: 2 ");
    drths_experiment_close(&num);
    drths_error_t err = {{0}};
    if (load_text(&num, t2, &err) != 0)
        fail_msg("%s", err.msg);
    if (load_text(&labb, t2, &err) != 0)
        fail_msg("%s", err.msg);
    uint8_t fp_num[DRTHS_FINGERPRINT_BYTES], fp_b[DRTHS_FINGERPRINT_BYTES];
    fingerprint(&num, fp_num);
    assert_int_equal(drths_experiment_select_site(&labb, "labB", &err), 0);
    assert_ptr_equal(labb.site, &labb.sites[1]);
    assert_int_equal(labb.specimen.floor, 2);
    assert_int_equal(labb.specimen.damper.substeps, 7);
    assert_int_equal(labb.n_channels, 0); /* one channel: a one-channel actuator site */
    assert_string_equal(labb.physical.listen, "0.0.0.0:47002");
    assert_non_null(labb.link.key_path);
    assert_non_null(strstr(labb.link.key_path, "/examples/keys/labB.key"));
    assert_int_equal(drths_experiment_check_network(&labb, &err), 0);
    fingerprint(&labb, fp_b);
    assert_memory_equal(fp_num, fp_b, sizeof fp_b);
    /* Unknown site: the file, the line of sites and the names it lists. */
    assert_int_equal(drths_experiment_select_site(&num, "labC", &err), -ENOENT);
    char want[128];
    snprintf(want, sizeof want,
             "two-labs.yaml:%d: sites: no site named \"labC\" (the file lists "
             "labA, labB)",
             num.sites_line);
    assert_non_null(strstr(err.msg, want));
    drths_experiment_close(&num);
    drths_experiment_close(&labb); /* the swapped strings are freed once each */
    free(t2);
    free(t1);
    free(text);
}

/* One fingerprint: what every site must agree on changes it (a floor, a site's specimen, the
 * sites' names), what is each lab's own does not (addresses, key files). */
static void test_fingerprint(void **state)
{
    (void)state;
    drths_experiment_t x;
    load_example(&x);
    char *text = slurp(x.path);
    uint8_t base[DRTHS_FINGERPRINT_BYTES];
    fingerprint(&x, base);
    drths_experiment_close(&x);
    static const struct {
        const char *from, *to;
        int same;
    } cases[] = {
        {"        floor: 2 ", "        floor: 3 ", 0},
        {"  - name: labB", "  - name: labC", 0},
        {"      - name: d2", "      - name: d2b", 0},
        {"\"127.0.0.1:47002\"", "\"127.0.0.1:47012\"", 1},
        {"    key_file: null                   # this", "    key_file: a.key  # this", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = replaced(text, cases[i].from, cases[i].to);
        drths_error_t err = {{0}};
        if (load_text(&x, t, &err) != 0)
            fail_msg("case %zu: %s", i, err.msg);
        uint8_t fp[DRTHS_FINGERPRINT_BYTES];
        fingerprint(&x, fp);
        if ((memcmp(fp, base, sizeof fp) == 0) != cases[i].same)
            fail_msg("case %zu (%s -> %s): the fingerprint %s", i, cases[i].from, cases[i].to,
                     cases[i].same ? "changed" : "did not change");
        drths_experiment_close(&x);
        free(t);
    }
    /* The shared text names each damper's block by site and channel. */
    load_example(&x);
    char *shared = NULL;
    drths_error_t err = {{0}};
    assert_int_equal(drths_experiment_shared_text(&x, &shared, NULL, &err), 0);
    assert_non_null(strstr(shared, "sites.labA.d1.specimen.floor=1\n"));
    assert_non_null(strstr(shared, "sites.labB.d2.specimen.floor=2\n"));
    assert_null(strstr(shared, "\nspecimen.floor="));
    free(shared);
    drths_experiment_close(&x);
    free(text);
}

/* Wrong sites, each one replacement in the example: the message must carry want (line, field
 * path and reason). The lines are those of examples/two-labs.yaml. */
static void test_errors(void **state)
{
    (void)state;
    char *p = src_path(EXAMPLE);
    char *text = slurp(p);
    free(p);
    /* The line of each key the cases name, found in the text rather than written out. */
    int line_b_floor = 0, line_b_name = 0, line_b_ch = 0, line_b_addr = 0, n = 1;
    for (const char *q = text; *q; q++) {
        if (strncmp(q, "        floor: 2", 16) == 0)
            line_b_floor = n;
        if (strncmp(q, "  - name: labB", 14) == 0)
            line_b_name = n;
        if (strncmp(q, "      - name: d2", 16) == 0)
            line_b_ch = n;
        if (strncmp(q, "    address: \"127.0.0.1:47002\"", 30) == 0)
            line_b_addr = n;
        if (*q == '\n')
            n++;
    }
    assert_true(line_b_floor > 0 && line_b_name > 0 && line_b_ch > 0 && line_b_addr > 0);
    char w[8][200];
    snprintf(w[0], sizeof w[0], ":%d: sites[1].channels[0].floor: must be in 1..3 (got 4)",
             line_b_floor);
    snprintf(w[1], sizeof w[1], ":%d: sites[1].name: \"labA\" is also sites[0]'s name",
             line_b_name);
    snprintf(w[2], sizeof w[2],
             ":%d: sites[1].channels[0].name: \"d1\" is also the name of a channel of site labA",
             line_b_ch);
    snprintf(w[3], sizeof w[3],
             ":%d: sites[1].address: \"127.0.0.1:47001\" is also the address of site labA",
             line_b_addr);
    snprintf(w[4], sizeof w[4], ":%d: sites[1].address: port must be in 1..65535", line_b_addr);
    const struct {
        const char *from, *to, *want;
    } cases[] = {
        {"        floor: 2 ", "        floor: 4 ", w[0]},
        {"  - name: labB", "  - name: labA", w[1]},
        {"      - name: d2", "      - name: d1", w[2]},
        {"\"127.0.0.1:47002\"", "\"127.0.0.1:47001\"", w[3]},
        {"\"127.0.0.1:47002\"", "\"127.0.0.1:99999\"", w[4]},
        {"        floor: 2 ", "        floor: 0 ", "sites[1].channels[0].floor: must be in 1..3"},
        {"        floor: 2 ", "        flor: 2 ", "unknown"},
        {"      - name: d2\n        floor: 2 ",
         "      - name: d2\n        specimen:\n          floor: 2\n        floor: 2 ",
         "sites[1].channels[0].specimen.floor: not allowed in a site's channel"},
        {"      - name: d2\n        floor: 2 ", "      - name: d2\n        limit_force_N: 1 ",
         "sites[1].channels[0].floor: missing"},
        {"    address: \"127.0.0.1:47002\"\n", "", "sites[1].address: missing"},
        {"  - name: labB", "  - name: \"lab B\"", "sites[1].name: only letters, digits"},
        {"  - name: labB", "  - name: numerical",
         "sites[1].name: \"numerical\" is the numerical site's name in the monitor"},
        {"  feedforward_max_jerk_m_s3: 3.0e4 ",
         "  channels:\n    - name: a\n    - name: b\n  feedforward_max_jerk_m_s3: 3.0e4 ",
         "sites: not allowed with physical.channels"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *t = replaced(text, cases[i].from, cases[i].to);
        drths_experiment_t x;
        drths_error_t err = {{0}};
        int r = load_text(&x, t, &err);
        if (r == 0 || !strstr(err.msg, cases[i].want))
            fail_msg("case %zu: got %d \"%s\", expected an error with \"%s\"", i, r, err.msg,
                     cases[i].want);
        assert_true(strstr(err.msg, "two-labs.yaml") != NULL);
        free(t);
    }
    /* A channel's floor is for sites only. */
    char *q = src_path("examples/opensees/linear-springs-2dof-ideal.yaml");
    char *two = slurp(q);
    char *t = replaced(two, "    - name: y\n", "    - name: y\n      floor: 1\n");
    drths_experiment_t x;
    drths_error_t err = {{0}};
    assert_int_equal(drths_experiment_load_buffer(&x, t, strlen(t), q, &err), -EINVAL);
    assert_non_null(
        strstr(err.msg, "physical.channels[1].floor: not allowed in physical.channels"));
    free(t);
    free(two);
    free(q);
    free(text);
}

/* The three-site example: lab A, B and C, one damper each at floors 1, 2 and 3, each its own
 * address, and every damper the top-level specimen. */
static void test_three_labs(void **state)
{
    (void)state;
    char *p = src_path("examples/three-labs.yaml");
    drths_experiment_t x;
    drths_error_t err = {{0}};
    if (drths_experiment_load(&x, p, &err) != 0)
        fail_msg("%s: %s", p, err.msg);
    assert_int_equal(x.n_sites, 3);
    assert_int_equal(drths_experiment_n_dampers(&x), 3);
    static const char *const names[] = {"labA", "labB", "labC"};
    for (int i = 0; i < 3; i++) {
        assert_string_equal(x.sites[i].name, names[i]);
        assert_int_equal(x.sites[i].n_channels, 1);
        assert_int_equal(x.sites[i].first, i);
        assert_int_equal(drths_experiment_damper(&x, i)->specimen.floor, i + 1);
        assert_int_equal(drths_experiment_damper(&x, i)->specimen.damper.model,
                         x.specimen.damper.model);
    }
    assert_string_equal(x.sites[2].address, "127.0.0.1:47003");
    drths_experiment_close(&x);
    free(p);
}

/* The line (from 1) where needle first starts a line of text, 0 if it never does. */
static int line_of(const char *text, const char *needle)
{
    int n = 1;
    for (const char *q = text; *q; q++) {
        if ((q == text || q[-1] == '\n') && strncmp(q, needle, strlen(needle)) == 0)
            return n;
        n += *q == '\n';
    }
    return 0;
}

/* The example with its sites section replaced by n sites of channels channels each, at floors
 * 1, 2, 3, 1, ... in turn. */
static char *with_sites(const char *text, int n, int channels)
{
    const char *s = strstr(text, "\nsites:");
    assert_non_null(s);
    size_t head = (size_t)(s - text) + 1, cap = head + 64 + (size_t)(n * (96 + channels * 48));
    char *t = malloc(cap);
    assert_non_null(t);
    int w = snprintf(t, cap, "%.*ssites:\n", (int)head, text);
    for (int i = 0, k = 0; i < n; i++) {
        w += snprintf(t + w, cap - (size_t)w,
                      "  - name: lab%d\n    address: \"127.0.0.1:%d\"\n    channels:\n", i,
                      47001 + i);
        for (int j = 0; j < channels; j++, k++)
            w += snprintf(t + w, cap - (size_t)w, "      - name: d%d\n        floor: %d\n", k,
                          k % 3 + 1);
    }
    assert_true((size_t)w < cap);
    return t;
}

/* What the numerical site refused only when it built its loop, after the handshakes and the
 * probes (its controller's design, each damper's Smith predictor), is refused when the file is
 * loaded, with the file, the line and the field: seven clipped-optimal dampers on three
 * degrees of freedom (at most two per degree of freedom), a damper without a command under
 * clipped-optimal, a damper the adaptive Smith predictor cannot identify, more dampers than
 * the structure takes. Six dampers on three floors still load. */
static void test_numerical_refusals(void **state)
{
    (void)state;
    char *p = src_path(EXAMPLE);
    char *text = slurp(p);
    free(p);
    char *six = with_sites(text, 6, 1), *seven = with_sites(text, 7, 1);
    char *many = with_sites(text, 3, 6);
    char *spring = replaced(text, "        floor: 2 ",
                            "        specimen:\n          damper:\n"
                            "            model: linear-spring\n"
                            "            stiffness_N_per_m: 1.0e6\n        floor: 2 ");
    char *passive = replaced(spring, "  mode: clipped-optimal ", "  mode: passive-on ");
    char *adaptive = replaced(passive, "  smith: fixed", "  smith: adaptive");
    int sites_line = line_of(seven, "sites:"), model_line = line_of(spring, "            model:");
    assert_true(sites_line > 0 && model_line > 0);
    char w[4][200];
    snprintf(w[0], sizeof w[0],
             "two-labs.yaml:%d: sites: 7 dampers on 3 degrees of freedom: control.mode "
             "clipped-optimal designs for at most 6 (two per degree of freedom)",
             sites_line);
    snprintf(w[1], sizeof w[1],
             "two-labs.yaml:%d: sites[1].channels[0].specimen.damper.model: linear-spring takes "
             "no command, and control.mode clipped-optimal commands every damper",
             model_line);
    snprintf(w[2], sizeof w[2],
             "two-labs.yaml:%d: sites[1].channels[0].specimen.damper.model: linear-spring: "
             "numerical.smith adaptive identifies a Bouc-Wen damper",
             model_line);
    snprintf(w[3], sizeof w[3],
             "two-labs.yaml:%d: sites: 18 channels in all: the structure takes at most 16 "
             "dampers",
             sites_line);
    const struct {
        const char *text, *want;
    } cases[] = {{seven, w[0]}, {spring, w[1]}, {adaptive, w[2]}, {many, w[3]}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        drths_experiment_t x;
        drths_error_t err = {{0}};
        int r = load_text(&x, cases[i].text, &err);
        if (r != -EINVAL || !strstr(err.msg, cases[i].want))
            fail_msg("case %zu: got %d \"%s\", expected an error with \"%s\"", i, r, err.msg,
                     cases[i].want);
    }
    /* Allowed: six dampers on three floors, a spring under passive-on with the fixed Smith
     * predictor. */
    const char *ok[] = {six, passive};
    for (size_t i = 0; i < 2; i++) {
        drths_experiment_t x;
        drths_error_t err = {{0}};
        if (load_text(&x, ok[i], &err) != 0)
            fail_msg("allowed case %zu: %s", i, err.msg);
        drths_experiment_close(&x);
    }
    free(adaptive);
    free(passive);
    free(spring);
    free(many);
    free(seven);
    free(six);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example),
        cmocka_unit_test(test_one_site_file),
        cmocka_unit_test(test_select_site),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_three_labs),
        cmocka_unit_test(test_numerical_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
