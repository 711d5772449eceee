/* drths_setup_structure (common/config/setup.h), apart from the rest of setup.c: it pulls in the
 * structure and LAPACK, which the actuator site does not need (CMakeLists.txt, --as-needed). */
#include "common/config/setup.h"

int drths_setup_structure(const drths_experiment_t *exp, drths_structure_t *s,
                          drths_error_t *err)
{
    int n = exp->n_dof;
    int rc;
    if (exp->structure.model == DRTHS_STRUCTURE_SHEAR_BUILDING)
        rc = drths_structure_init_shear(s, n, exp->structure.floor_mass_kg,
                                        exp->structure.storey_stiffness_N_per_m, err);
    else
        rc = drths_structure_init_matrices(s, n, exp->structure.mass_kg,
                                           exp->structure.damping_N_s_per_m,
                                           exp->structure.stiffness_N_per_m, err);
    if (rc)
        return drths_error_prefix(err, rc, "structure");
    rc = drths_structure_modes(s, err);
    const __typeof__(exp->structure.damping) *d = &exp->structure.damping;
    if (!rc && d->kind == DRTHS_DAMPING_MODAL)
        rc = drths_structure_set_modal_damping(s, d->ratio, d->n_ratio, err);
    else if (!rc && d->kind == DRTHS_DAMPING_RAYLEIGH)
        rc = drths_structure_set_rayleigh_damping(s, d->modes[0], d->modes[1], d->ratio[0],
                                                  d->ratio[d->n_ratio > 1 ? 1 : 0], err);
    if (rc) {
        drths_structure_close(s);
        return drths_error_prefix(err, rc, "structure");
    }
    return 0;
}
