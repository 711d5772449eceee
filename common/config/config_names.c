/* The enums of the experiment file: the spelling of each value in the file (one table per enum,
 * which the section tables' ENUM rows name and the drths_*_name functions read back), and what
 * some values stand for in numbers (a damper model's command range, an acceleration unit in
 * m/s2).
 */
#include "common/config/config_internal.h"

#include <stddef.h>

/* Standard gravity, m/s2: the unit g of a ground-motion record. */
#define G_M_S2 9.80665

const enum_name_t drths_cfg_structure_models[] = {
    {"shear-building", DRTHS_STRUCTURE_SHEAR_BUILDING},
    {"matrices", DRTHS_STRUCTURE_MATRICES},
    {NULL, 0}};
const enum_name_t drths_cfg_damping_kinds[] = {{"modal", DRTHS_DAMPING_MODAL},
                                               {"rayleigh", DRTHS_DAMPING_RAYLEIGH},
                                               {"matrix", DRTHS_DAMPING_MATRIX},
                                               {"none", DRTHS_DAMPING_NONE},
                                               {NULL, 0}};
const enum_name_t drths_cfg_integrator_kinds[] = {
    {"chen-ricles", DRTHS_INTEGRATOR_CHEN_RICLES},
    {"central-difference", DRTHS_INTEGRATOR_CENTRAL_DIFFERENCE},
    {NULL, 0}};
const enum_name_t drths_cfg_ground_kinds[] = {{"record", DRTHS_GROUND_MOTION_RECORD},
                                              {"white-noise", DRTHS_GROUND_MOTION_WHITE_NOISE},
                                              {NULL, 0}};
const enum_name_t drths_cfg_record_formats[] = {{"auto", DRTHS_RECORD_FORMAT_AUTO},
                                                {"at2", DRTHS_RECORD_FORMAT_AT2},
                                                {"two-column", DRTHS_RECORD_FORMAT_TWO_COLUMN},
                                                {"csv", DRTHS_RECORD_FORMAT_CSV},
                                                {NULL, 0}};
const enum_name_t drths_cfg_accel_units[] = {{"g", DRTHS_ACCEL_G},
                                             {"m/s2", DRTHS_ACCEL_M_S2},
                                             {"cm/s2", DRTHS_ACCEL_CM_S2},
                                             {"mm/s2", DRTHS_ACCEL_MM_S2},
                                             {NULL, 0}};
const enum_name_t drths_cfg_damper_models[] = {{"phillips2013-200kN", DRTHS_DAMPER_PHILLIPS2013},
                                               {"spencer1997-small", DRTHS_DAMPER_SPENCER1997},
                                               {"linear-spring", DRTHS_DAMPER_LINEAR_SPRING},
                                               {"none", DRTHS_DAMPER_NONE},
                                               {NULL, 0}};
const enum_name_t drths_cfg_control_modes[] = {{"passive-off", DRTHS_CONTROL_PASSIVE_OFF},
                                               {"passive-on", DRTHS_CONTROL_PASSIVE_ON},
                                               {"fixed", DRTHS_CONTROL_FIXED},
                                               {"clipped-optimal", DRTHS_CONTROL_CLIPPED_OPTIMAL},
                                               {NULL, 0}};
const enum_name_t drths_cfg_actuator_plants[] = {{"ideal", DRTHS_ACTUATOR_PLANT_IDEAL},
                                                 {"three-pole", DRTHS_ACTUATOR_PLANT_THREE_POLE},
                                                 {NULL, 0}};
const enum_name_t drths_cfg_compensations[] = {
    {"none", DRTHS_COMPENSATION_NONE},
    {"polynomial", DRTHS_COMPENSATION_POLYNOMIAL},
    {"feedforward", DRTHS_COMPENSATION_FEEDFORWARD},
    {"feedforward-average", DRTHS_COMPENSATION_FEEDFORWARD_AVERAGE},
    {"adaptive", DRTHS_COMPENSATION_ADAPTIVE},
    {NULL, 0}};
const enum_name_t drths_cfg_hold_modes[] = {
    {"hold", DRTHS_HOLD_AT_POSITION}, {"ramp", DRTHS_HOLD_RAMP}, {NULL, 0}};
const enum_name_t drths_cfg_smith_modes[] = {{"off", DRTHS_SMITH_OFF},
                                             {"fixed", DRTHS_SMITH_FIXED},
                                             {"adaptive", DRTHS_SMITH_ADAPTIVE},
                                             {NULL, 0}};

const enum_name_t drths_cfg_daq_backends[] = {
    {"virtual", DRTHS_DAQ_BACKEND_VIRTUAL}, {"comedi", DRTHS_DAQ_BACKEND_COMEDI}, {NULL, 0}};
const enum_name_t drths_cfg_booleans[] = {{"false", 0}, {"true", 1}, {NULL, 0}};
const enum_name_t drths_cfg_daq_arefs[] = {{"ground", DRTHS_DAQ_AREF_GROUND},
                                           {"common", DRTHS_DAQ_AREF_COMMON},
                                           {"diff", DRTHS_DAQ_AREF_DIFF},
                                           {NULL, 0}};

static const char *enum_name(const enum_name_t *t, int v)
{
    for (; t->name; t++)
        if (t->value == v)
            return t->name;
    return "?";
}

const char *drths_structure_model_name(drths_structure_model_t v)
{
    return enum_name(drths_cfg_structure_models, (int)v);
}
const char *drths_damping_kind_name(drths_damping_kind_t v)
{
    return enum_name(drths_cfg_damping_kinds, (int)v);
}
const char *drths_integrator_kind_name(drths_integrator_kind_t v)
{
    return enum_name(drths_cfg_integrator_kinds, (int)v);
}
const char *drths_ground_motion_kind_name(drths_ground_motion_kind_t v)
{
    return enum_name(drths_cfg_ground_kinds, (int)v);
}
const char *drths_record_format_name(drths_record_format_t v)
{
    return enum_name(drths_cfg_record_formats, (int)v);
}
const char *drths_accel_units_name(drths_accel_units_t v)
{
    return enum_name(drths_cfg_accel_units, (int)v);
}
const char *drths_damper_model_name(drths_damper_model_t v)
{
    return enum_name(drths_cfg_damper_models, (int)v);
}
const char *drths_control_mode_name(drths_control_mode_t v)
{
    return enum_name(drths_cfg_control_modes, (int)v);
}
const char *drths_actuator_plant_name(drths_actuator_plant_t v)
{
    return enum_name(drths_cfg_actuator_plants, (int)v);
}
const char *drths_compensation_name(drths_compensation_t v)
{
    return enum_name(drths_cfg_compensations, (int)v);
}
const char *drths_hold_mode_name(drths_hold_mode_t v)
{
    return enum_name(drths_cfg_hold_modes, (int)v);
}
const char *drths_smith_mode_name(drths_smith_mode_t v)
{
    return enum_name(drths_cfg_smith_modes, (int)v);
}
const char *drths_daq_backend_name(drths_daq_backend_t v)
{
    return enum_name(drths_cfg_daq_backends, (int)v);
}
const char *drths_daq_aref_name(drths_daq_aref_t v)
{
    return enum_name(drths_cfg_daq_arefs, (int)v);
}

double drths_experiment_command_max(drths_damper_model_t model)
{
    switch (model) {
    case DRTHS_DAMPER_PHILLIPS2013:
        return 2.5;
    case DRTHS_DAMPER_SPENCER1997:
        return 2.25;
    default:
        return 0.0;
    }
}

double drths_accel_units_m_s2(drths_accel_units_t units)
{
    switch (units) {
    case DRTHS_ACCEL_G:
        return G_M_S2;
    case DRTHS_ACCEL_M_S2:
        return 1.0;
    case DRTHS_ACCEL_CM_S2:
        return 0.01;
    case DRTHS_ACCEL_MM_S2:
        return 0.001;
    }
    return 0.0;
}
