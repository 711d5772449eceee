/* The run folder (docs/design.md#records-and-reports): one folder per run holding the CSV records,
 * a copy of the experiment file and summary.json.
 * init-only: called before a run starts and after it ends, never from the RT thread.
 */
#ifndef DRTHS_RUNFOLDER_H
#define DRTHS_RUNFOLDER_H

#include <stddef.h>

#include "platform/error.h"

/* Creates the run folder and copies the experiment file into it as experiment.yaml.
 * If dir is given it is used as is (created with parents if missing; files in it are replaced);
 * otherwise the folder is base/<YYYYmmdd-HHMMSS>-<label>. The chosen path goes to out. */
int drths_runfolder_create(char *out, size_t cap, const char *dir, const char *base,
                           const char *label, const char *experiment_path, drths_error_t *err);

/* mkdir -p. */
int drths_mkdirs(const char *path, drths_error_t *err);

/* Joins folder and file name into out; -ENAMETOOLONG if it does not fit. */
int drths_path_join(char *out, size_t cap, const char *dir, const char *name);

#endif
