/* Structure model: shear building and full matrices, modes, modal and Rayleigh damping, and the
 * refusals a lab engineer can trigger with a typing error. Reference numbers come from the default
 * experiment (natural frequencies 2.88, 8.10, 12.34 Hz), Dyke et al. 1996 and an independent Jacobi
 * solver. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "common/models/structure.h"

static const double default_mass[3] = {5.0e4, 5.0e4, 5.0e4};
static const double default_k[3] = {7.3955e7, 1.00510e8, 8.5740e7};

static void assert_rel(double got, double want, double rel)
{
    if (!(fabs(got - want) <= rel * fabs(want))) {
        print_error("got %.12g, want %.12g (relative tolerance %g)\n", got, want, rel);
        fail();
    }
}

/* max |phi^T M phi - I| and max |K phi_j - w_j^2 M phi_j| / max|K| */
static void check_eigen(const drths_structure_t *s)
{
    int n = s->n;
    double kmax = 0.0;
    for (int i = 0; i < n * n; i++)
        kmax = fmax(kmax, fabs(s->K[i]));
    for (int p = 0; p < n; p++)
        for (int q = 0; q < n; q++) {
            double g = 0.0;
            for (int a = 0; a < n; a++)
                for (int b = 0; b < n; b++)
                    g += s->phi[a * n + p] * s->M[a * n + b] * s->phi[b * n + q];
            assert_true(fabs(g - (p == q ? 1.0 : 0.0)) < 1e-12);
        }
    for (int j = 0; j < n; j++) {
        double w2 = s->omega_rad_s[j] * s->omega_rad_s[j];
        for (int a = 0; a < n; a++) {
            double r = 0.0;
            for (int b = 0; b < n; b++)
                r += (s->K[a * n + b] - w2 * s->M[a * n + b]) * s->phi[b * n + j];
            /* phi is mass-normalised, so scale the residual by sqrt(mass). */
            assert_true(fabs(r) * sqrt(s->M[a * n + a]) < 1e-9 * kmax);
        }
        if (j)
            assert_true(s->omega_rad_s[j] > s->omega_rad_s[j - 1]);
    }
}

static void test_default_frequencies(void **state)
{
    (void)state;
    drths_structure_t s;
    drths_error_t err;
    assert_int_equal(drths_structure_init_shear(&s, 3, default_mass, default_k, &err), 0);
    /* Shear-building stiffness: K = [k1+k2 -k2 0; -k2 k2+k3 -k3; 0 -k3 k3]. */
    assert_true(s.K[0] == default_k[0] + default_k[1] && s.K[1] == -default_k[1]);
    assert_true(s.K[4] == default_k[1] + default_k[2] && s.K[8] == default_k[2] && s.K[2] == 0.0);
    assert_true(s.M[0] == 5.0e4 && s.M[1] == 0.0 && s.M[8] == 5.0e4);
    for (int i = 0; i < 9; i++)
        assert_true(s.C[i] == 0.0);
    assert_null(s.omega_rad_s);
    assert_int_equal(drths_structure_modes(&s, &err), 0);
    print_message("default experiment: %.4f %.4f %.4f Hz\n", s.freq_hz[0], s.freq_hz[1],
                  s.freq_hz[2]);
    assert_rel(s.freq_hz[0], 2.88, 1e-3);
    assert_rel(s.freq_hz[1], 8.10, 1e-3);
    assert_rel(s.freq_hz[2], 12.34, 1e-3);
    for (int j = 0; j < 3; j++) {
        assert_rel(s.omega_rad_s[j], 2.0 * M_PI * s.freq_hz[j], 1e-15);
        assert_true(s.zeta[j] == 0.0);
    }
    check_eigen(&s);
    /* First mode of a shear building: all floors in phase, roof largest, sign fixed positive. */
    assert_true(s.phi[0 * 3 + 0] > 0 && s.phi[1 * 3 + 0] > s.phi[0] && s.phi[2 * 3 + 0] > s.phi[3]);
    drths_structure_close(&s);
    drths_structure_close(&s); /* safe twice */
}

static void test_modal_damping(void **state)
{
    (void)state;
    drths_structure_t s;
    drths_error_t err;
    assert_int_equal(drths_structure_init_shear(&s, 3, default_mass, default_k, &err), 0);
    const double z = 0.02;
    /* Modes are computed on demand. */
    assert_int_equal(drths_structure_set_modal_damping(&s, &z, 1, &err), 0);
    for (int j = 0; j < 3; j++)
        assert_true(fabs(s.zeta[j] - 0.02) < 1e-9);
    print_message("modal 2 %%: zeta %.12f %.12f %.12f\n", s.zeta[0], s.zeta[1], s.zeta[2]);
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            assert_true(s.C[a * 3 + b] == s.C[b * 3 + a]);
    /* Classical damping: phi^T C phi is diagonal. */
    for (int p = 0; p < 3; p++)
        for (int q = 0; q < 3; q++) {
            double g = 0.0;
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++)
                    g += s.phi[a * 3 + p] * s.C[a * 3 + b] * s.phi[b * 3 + q];
            double want = p == q ? 2.0 * 0.02 * s.omega_rad_s[p] : 0.0;
            assert_true(fabs(g - want) < 1e-9 * s.omega_rad_s[2]);
        }
    /* One ratio per mode. */
    const double zs[3] = {0.01, 0.02, 0.05};
    assert_int_equal(drths_structure_set_modal_damping(&s, zs, 3, &err), 0);
    for (int j = 0; j < 3; j++)
        assert_true(fabs(s.zeta[j] - zs[j]) < 1e-9);
    /* A percentage instead of a ratio, and a wrong count, are refused and leave C alone. */
    double c00 = s.C[0];
    const double pct = 2.0;
    assert_int_equal(drths_structure_set_modal_damping(&s, &pct, 1, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "2 % is 0.02"));
    assert_int_equal(drths_structure_set_modal_damping(&s, zs, 2, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "give 1 ratio or one per mode (3), got 2"));
    assert_true(s.C[0] == c00);
    drths_structure_close(&s);
}

static void test_rayleigh_damping(void **state)
{
    (void)state;
    drths_structure_t s;
    drths_error_t err;
    assert_int_equal(drths_structure_init_shear(&s, 3, default_mass, default_k, &err), 0);
    assert_int_equal(drths_structure_set_rayleigh_damping(&s, 1, 3, 0.02, 0.03, &err), 0);
    print_message("rayleigh (1: 2 %%, 3: 3 %%): zeta %.12f %.12f %.12f\n", s.zeta[0], s.zeta[1],
                  s.zeta[2]);
    assert_true(fabs(s.zeta[0] - 0.02) < 1e-12);
    assert_true(fabs(s.zeta[2] - 0.03) < 1e-12);
    /* Independent check of the middle mode: recover a0, a1 from C = a0 M + a1 K with the
     * off-diagonal entry (M is diagonal there) and the diagonal. */
    double a1 = s.C[1] / s.K[1];
    double a0 = (s.C[0] - a1 * s.K[0]) / s.M[0];
    double w2 = s.omega_rad_s[1];
    assert_rel(s.zeta[1], a0 / (2 * w2) + a1 * w2 / 2, 1e-9);
    assert_true(s.zeta[1] > 0.0 && s.zeta[1] < 0.03);
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            assert_true(s.C[a * 3 + b] == s.C[b * 3 + a]);

    /* Reversed order of the two modes gives the same matrix. */
    assert_int_equal(drths_structure_set_rayleigh_damping(&s, 3, 1, 0.03, 0.02, &err), 0);
    assert_true(fabs(s.zeta[0] - 0.02) < 1e-12 && fabs(s.zeta[2] - 0.03) < 1e-12);

    assert_int_equal(drths_structure_set_rayleigh_damping(&s, 2, 2, 0.02, 0.02, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "two different modes in 1..3"));
    assert_int_equal(drths_structure_set_rayleigh_damping(&s, 1, 4, 0.02, 0.02, &err), -EINVAL);
    /* 30 % at mode 1 and 1 % at mode 2 needs a1 < 0, which drives mode 3 below zero. */
    assert_int_equal(drths_structure_set_rayleigh_damping(&s, 1, 2, 0.30, 0.01, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "give mode 3"));
    assert_non_null(strstr(err.msg, "negative damping ratio"));

    /* Single degree of freedom: mass-proportional, exact ratio. */
    drths_structure_t one;
    const double m1 = 2.0e4, k1 = 2.0e4 * pow(2 * M_PI * 5.0, 2);
    assert_int_equal(drths_structure_init_shear(&one, 1, &m1, &k1, &err), 0);
    assert_int_equal(drths_structure_set_rayleigh_damping(&one, 1, 1, 0.02, 0.02, &err), 0);
    assert_rel(one.freq_hz[0], 5.0, 1e-12);
    assert_rel(one.zeta[0], 0.02, 1e-12);
    assert_rel(one.C[0], 2 * 0.02 * 2 * M_PI * 5.0 * m1, 1e-12);
    assert_int_equal(drths_structure_set_rayleigh_damping(&one, 1, 2, 0.02, 0.02, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "only mode 1"));
    drths_structure_close(&one);
    drths_structure_close(&s);
}

/* Cyclic Jacobi eigenvalues of a symmetric 3x3 matrix (independent of LAPACK). */
static void jacobi3(double A[3][3], double eig[3])
{
    for (int sweep = 0; sweep < 50; sweep++) {
        double off = fabs(A[0][1]) + fabs(A[0][2]) + fabs(A[1][2]);
        if (off < 1e-14 * (fabs(A[0][0]) + fabs(A[1][1]) + fabs(A[2][2])))
            break;
        for (int p = 0; p < 2; p++)
            for (int q = p + 1; q < 3; q++) {
                if (A[p][q] == 0.0)
                    continue;
                double theta = (A[q][q] - A[p][p]) / (2.0 * A[p][q]);
                double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1.0));
                double c = 1.0 / sqrt(t * t + 1.0), sn = t * c;
                for (int k = 0; k < 3; k++) { /* A <- A J */
                    double akp = A[k][p], akq = A[k][q];
                    A[k][p] = c * akp - sn * akq;
                    A[k][q] = sn * akp + c * akq;
                }
                for (int k = 0; k < 3; k++) { /* A <- J^T A */
                    double apk = A[p][k], aqk = A[q][k];
                    A[p][k] = c * apk - sn * aqk;
                    A[q][k] = sn * apk + c * aqk;
                }
            }
    }
    for (int i = 0; i < 3; i++)
        eig[i] = A[i][i];
    for (int i = 0; i < 3; i++) /* sort ascending */
        for (int j = i + 1; j < 3; j++)
            if (eig[j] < eig[i]) {
                double t = eig[i];
                eig[i] = eig[j];
                eig[j] = t;
            }
}

static void test_dyke_matrices(void **state)
{
    (void)state;
    const double m = 98.3;
    const double M[9] = {m, 0, 0, 0, m, 0, 0, 0, m};
    const double K[9] = {12.0e5, -6.84e5, 0, -6.84e5, 13.7e5, -6.84e5, 0, -6.84e5, 6.84e5};
    const double C[9] = {175, -50, 0, -50, 100, -50, 0, -50, 50};
    drths_structure_t s;
    drths_error_t err;
    assert_int_equal(drths_structure_init_matrices(&s, 3, M, C, K, &err), 0);
    assert_int_equal(drths_structure_modes(&s, &err), 0);
    check_eigen(&s);

    /* M = m I, so w^2 are the eigenvalues of K / m. */
    double A[3][3], eig[3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            A[i][j] = K[i * 3 + j] / m;
    jacobi3(A, eig);
    print_message("Dyke 1996: dsygv %.6f %.6f %.6f Hz, Jacobi %.6f %.6f %.6f Hz, "
                  "zeta %.4f %.4f %.4f\n",
                  s.freq_hz[0], s.freq_hz[1], s.freq_hz[2], sqrt(eig[0]) / (2 * M_PI),
                  sqrt(eig[1]) / (2 * M_PI), sqrt(eig[2]) / (2 * M_PI), s.zeta[0], s.zeta[1],
                  s.zeta[2]);
    for (int j = 0; j < 3; j++)
        assert_rel(s.omega_rad_s[j], sqrt(eig[j]), 1e-10);
    /* Regression values of these matrices (from the Jacobi solver above, 6 digits). */
    assert_rel(s.freq_hz[0], 5.456591, 1e-6);
    assert_rel(s.freq_hz[1], 15.810796, 1e-6);
    assert_rel(s.freq_hz[2], 23.637824, 1e-6);
    /* zeta from the given C: its diagonal modal terms, computed independently here. */
    for (int j = 0; j < 3; j++) {
        double q = 0.0;
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                q += s.phi[a * 3 + j] * C[a * 3 + b] * s.phi[b * 3 + j];
        assert_rel(s.zeta[j], q / (2 * s.omega_rad_s[j]), 1e-12);
        assert_true(s.zeta[j] > 0.0 && s.zeta[j] < 0.2);
    }
    drths_structure_close(&s);

    /* C may be NULL: undamped. */
    assert_int_equal(drths_structure_init_matrices(&s, 3, M, NULL, K, &err), 0);
    assert_int_equal(drths_structure_modes(&s, &err), 0);
    for (int j = 0; j < 3; j++)
        assert_true(s.zeta[j] == 0.0);
    drths_structure_close(&s);
}

static void test_refusals(void **state)
{
    (void)state;
    drths_structure_t s;
    drths_error_t err;
    const double k_bad[3] = {7.3955e7, 0.0, 8.5740e7};
    assert_int_equal(drths_structure_init_shear(&s, 3, default_mass, k_bad, &err), -EINVAL);
    assert_string_equal(err.msg, "structure.storey_stiffness_N_per_m[1]: must be > 0 and finite "
                                 "(got 0)");
    drths_structure_close(&s); /* nothing to clean up, still safe */
    const double m_bad[3] = {5e4, -1, 5e4};
    assert_int_equal(drths_structure_init_shear(&s, 3, m_bad, default_k, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "structure.floor_mass_kg[1]"));
    assert_int_equal(drths_structure_init_shear(&s, 0, m_bad, default_k, &err), -EINVAL);

    /* A structure that is not attached to the ground: a mechanism. */
    const double M[4] = {1, 0, 0, 1};
    const double Kfree[4] = {1e4, -1e4, -1e4, 1e4};
    assert_int_equal(drths_structure_init_matrices(&s, 2, M, NULL, Kfree, &err), 0);
    assert_int_equal(drths_structure_modes(&s, &err), -EINVAL);
    print_message("mechanism: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "structure.K: not positive definite"));
    assert_non_null(strstr(err.msg, "mechanism"));
    assert_null(s.omega_rad_s);
    const double z = 0.02;
    assert_int_equal(drths_structure_set_modal_damping(&s, &z, 1, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "mechanism"));
    drths_structure_close(&s);

    /* A DOF without mass. */
    const double Mzero[4] = {1, 0, 0, 0};
    const double K[4] = {2e4, -1e4, -1e4, 1e4};
    assert_int_equal(drths_structure_init_matrices(&s, 2, Mzero, NULL, K, &err), 0);
    assert_int_equal(drths_structure_modes(&s, &err), -EINVAL);
    print_message("massless: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "structure.M: not positive definite (its leading 2x2"));
    drths_structure_close(&s);

    /* A typing error that breaks symmetry, and a NaN. */
    const double Kasym[4] = {2e4, -1e4, -1.1e4, 1e4};
    assert_int_equal(drths_structure_init_matrices(&s, 2, M, NULL, Kasym, &err), -EINVAL);
    assert_string_equal(err.msg, "structure.K: must be symmetric, but [0][1] = -10000 and [1][0] "
                                 "= -11000");
    const double Cnan[4] = {1, 0, 0, NAN};
    assert_int_equal(drths_structure_init_matrices(&s, 2, M, Cnan, K, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "structure.C[1][1]: must be finite"));
    drths_structure_close(&s);

    /* Rounding-level asymmetry is tolerated and removed. */
    const double Kround[4] = {2e4, -1e4, -1e4 * (1 + 1e-12), 1e4};
    assert_int_equal(drths_structure_init_matrices(&s, 2, M, NULL, Kround, &err), 0);
    assert_true(s.K[1] == s.K[2]);
    drths_structure_close(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_frequencies),
        cmocka_unit_test(test_modal_damping),
        cmocka_unit_test(test_rayleigh_damping),
        cmocka_unit_test(test_dyke_matrices),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
