/* report.h5 and report.mat (tools/report/hdf5.c): the records of a run as HDF5, with units and
 * metadata, and as a MATLAB v7.3 MAT-file. */
#ifndef DRTHS_REPORT_HDF5_H
#define DRTHS_REPORT_HDF5_H

#include "common/platform/csvread.h"
#include "common/platform/error.h"

typedef struct drths_report_hdf5 {
    const char *run_dir;           /* root attribute "run" */
    const char *ref_dir;           /* root attribute "reference", or NULL */
    const char *verdict;           /* root attribute "verdict" ("PASS", "FAIL"), or NULL */
    const char *summary_path;      /* summary.json whose scalars become root attributes */
    const drths_csv_table_t *run;  /* group /numerical */
    const drths_csv_table_t *ref;  /* group /reference, or NULL */
    const drths_csv_table_t *phys; /* group /physical, or NULL */
} drths_report_hdf5_t;

/* Writes path (replacing it). Returns 0 or a negative errno with err filled. init-only. */
int drths_report_write_hdf5(const char *path, const drths_report_hdf5_t *in, drths_error_t *err);

/* Writes path (replacing it) as a MATLAB v7.3 MAT-file (HDF5 with MATLAB's header) holding one
 * N-by-1 double variable per column: numerical_<column>, reference_<column>, physical_<column>
 * (any character not valid in a MATLAB name becomes '_'). Units and metadata stay in report.h5.
 * Returns 0 or a negative errno with err filled. init-only. */
int drths_report_write_mat(const char *path, const drths_report_hdf5_t *in, drths_error_t *err);

#endif
