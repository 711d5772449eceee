/* The libcyaml schema and the field_t rows of every section, generated from the section tables
 * of config_sections.h, and the two schemas the loader starts from: the whole file and the
 * acceptance section alone.
 */
#include "common/config/config_sections.h"

#include <stddef.h>

/* The libcyaml schema: every key optional (OPT). */
#define SCHEMA_FIELD(s, kind, key, dest, def, lo, hi, names)                                       \
    SCHEMA_##kind(struct raw_##s, key, names)
#define SCHEMA_SCALAR(T, key) CYAML_FIELD_STRING_PTR(#key, OPT, T, key, 0, CYAML_UNLIMITED),
#define SCHEMA_ENUM(T, key, names) SCHEMA_SCALAR(T, key)
#define SCHEMA_INT(T, key, names) SCHEMA_SCALAR(T, key)
#define SCHEMA_U64(T, key, names) SCHEMA_SCALAR(T, key)
#define SCHEMA_REAL(T, key, names) SCHEMA_SCALAR(T, key)
#define SCHEMA_REAL_GT0(T, key, names) SCHEMA_SCALAR(T, key)
#define SCHEMA_REAL_GE0(T, key, names) SCHEMA_SCALAR(T, key)
#define SCHEMA_REAL_IN(T, key, names) SCHEMA_SCALAR(T, key)
#define SCHEMA_TEXT(T, key, names) SCHEMA_SCALAR(T, key)
/* "key: null" (or ~, or nothing) loads as NULL: no file. */
#define SCHEMA_OPTPATH(T, key, names)                                                              \
    CYAML_FIELD_STRING_PTR(#key, CYAML_FLAG_POINTER_NULL_STR | CYAML_FLAG_OPTIONAL, T, key, 0,     \
                           CYAML_UNLIMITED),
#define SCHEMA_LIST(T, key, names)                                                                 \
    CYAML_FIELD_SEQUENCE(#key, OPT, T, key, &drths_cfg_string_entry, 0, CYAML_UNLIMITED),
#define SCHEMA_MATRIX(T, key, names)                                                               \
    CYAML_FIELD_SEQUENCE(#key, OPT, T, key, &ignore_entry, 0, CYAML_UNLIMITED),
#define SCHEMA_MAP(T, key, names) CYAML_FIELD_MAPPING_PTR(#key, OPT, T, key, names##_fields),
#define SCHEMA_SEQ(T, key, names)                                                                  \
    CYAML_FIELD_SEQUENCE(#key, OPT, T, key, &names##_entry, 0, CYAML_UNLIMITED),

/* The field_t array. */
#define SPEC_FIELD(s, kind, key, dest, def, lo, hi, names)                                         \
    SPEC_##kind(s, key, dest, def, lo, hi, names)
#define SPEC_VALUE(s, K, key, dest, def, lo, hi, text, names)                                      \
    {#key, K, offsetof(struct raw_##s, key), offsetof(s##_out_t, dest), def, lo, hi, text, names},
#define SPEC_BY_HAND(s, K, key) {#key, K, offsetof(struct raw_##s, key), 0, 0, 0, 0, NULL, NULL},
/* An ENUM row's `names` is the table drths_cfg_<names> of config_names.c. */
#define SPEC_ENUM(s, key, dest, def, lo, hi, names)                                                \
    SPEC_VALUE(s, K_ENUM, key, dest, def, 0, 0, NULL, drths_cfg_##names)
#define SPEC_INT(s, key, dest, def, lo, hi, names)                                                 \
    SPEC_VALUE(s, K_INT, key, dest, def, lo, hi, NULL, NULL)
#define SPEC_U64(s, key, dest, def, lo, hi, names)                                                 \
    SPEC_VALUE(s, K_U64, key, dest, def, 0, 0, NULL, NULL)
#define SPEC_REAL(s, key, dest, def, lo, hi, names)                                                \
    SPEC_VALUE(s, K_REAL, key, dest, def, 0, 0, NULL, NULL)
#define SPEC_REAL_GT0(s, key, dest, def, lo, hi, names)                                            \
    SPEC_VALUE(s, K_REAL_GT0, key, dest, def, 0, 0, NULL, NULL)
#define SPEC_REAL_GE0(s, key, dest, def, lo, hi, names)                                            \
    SPEC_VALUE(s, K_REAL_GE0, key, dest, def, 0, 0, NULL, NULL)
#define SPEC_REAL_IN(s, key, dest, def, lo, hi, names)                                             \
    SPEC_VALUE(s, K_REAL_IN, key, dest, def, lo, hi, NULL, NULL)
#define SPEC_TEXT(s, key, dest, def, lo, hi, names)                                                \
    SPEC_VALUE(s, K_TEXT, key, dest, 0, 0, 0, def, NULL)
#define SPEC_OPTPATH(s, key, dest, def, lo, hi, names) SPEC_BY_HAND(s, K_OPTPATH, key)
#define SPEC_LIST(s, key, dest, def, lo, hi, names) SPEC_BY_HAND(s, K_LIST, key)
#define SPEC_MATRIX(s, key, dest, def, lo, hi, names) SPEC_BY_HAND(s, K_MATRIX, key)
#define SPEC_MAP(s, key, dest, def, lo, hi, names) SPEC_BY_HAND(s, K_MAP, key)
#define SPEC_SEQ(s, key, dest, def, lo, hi, names) SPEC_BY_HAND(s, K_SEQ, key)

/* Everything of a section that is data, from its table: <s>_fields (its schema), <s>_entry (the
 * schema of one entry of a list of them, for a SEQ row), drths_cfg_<s>_spec and
 * drths_cfg_<s>_prefix. */
#define DEFINE_SECTION(s, FIELDS, out_type, prefix)                                                \
    const char drths_cfg_##s##_prefix[] = prefix;                                                  \
    static const cyaml_schema_field_t s##_fields[] = {FIELDS(SCHEMA_FIELD, s) CYAML_FIELD_END};    \
    static const cyaml_schema_value_t s##_entry __attribute__((unused)) = {                        \
        CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct raw_##s, s##_fields),                       \
    };                                                                                             \
    const field_t drths_cfg_##s##_spec[] = {FIELDS(SPEC_FIELD, s)};

const cyaml_schema_value_t drths_cfg_string_entry = {
    CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED),
};
static const cyaml_schema_value_t ignore_entry = {
    .type = CYAML_IGNORE,
    .flags = CYAML_FLAG_DEFAULT,
    .data_size = 0,
};

SECTIONS(DEFINE_SECTION)

const cyaml_schema_value_t drths_cfg_top_schema = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct raw_top, top_fields),
};

const cyaml_schema_value_t drths_cfg_acceptance_top_schema = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct raw_acceptance_top, acceptance_top_fields),
};
