/* The run folder (docs/design.md#records-and-reports): one folder per run holding the records,
 * a copy of the experiment file and of its ground motion record, and summary.json with the run's
 * provenance.
 * init-only: called before a run starts and after it ends, never from the RT thread.
 */
#ifndef DRTHS_RUNFOLDER_H
#define DRTHS_RUNFOLDER_H

#include <stddef.h>

#include "common/platform/error.h"
#include "common/platform/json.h"

/* Creates the run folder and copies the experiment file into it as experiment.yaml.
 * If dir is given it is used as is (created with parents if missing), unless it holds an
 * earlier run (drths_runfolder_check_unused: -EEXIST); otherwise the folder is
 * base/<YYYYmmdd-HHMMSS>-<label>. The chosen path goes to out. */
int drths_runfolder_create(char *out, size_t cap, const char *dir, const char *base,
                           const char *label, const char *experiment_path, drths_error_t *err);

/* Where a run came from, written in every run folder (the "provenance" member of both sites'
 * summary.json, provenance.json beside a reference run's summary): enough to tell, from the
 * folder alone, which software on which machine ran what, when, with which key and how. */
typedef struct drths_provenance {
    char started_utc[32];     /* "2026-01-31T12:00:00Z" */
    char host[256];           /* gethostname */
    char version[160];        /* drths_version() */
    char commit[64];          /* the git commit in the version ("-dirty": local changes), or "" */
    char key_id[17];          /* drths_key_id of the link key, "" when none */
    char fingerprint[65];     /* the experiment's fingerprint (hex) */
    char command_line[4096];  /* argv, shell-quoted where needed */
    char real_time[600];      /* the real-time measures obtained, one line */
    char experiment_file[1024]; /* as given on the command line */
    char record_file[1024];   /* the ground motion record's copy, relative to the folder */
    char record_source[1024]; /* where it was copied from */
} drths_provenance_t;

/* Fills the start time (now, UTC), host, version and commit, and the command line; the caller
 * adds the rest. init-only. */
void drths_provenance_init(drths_provenance_t *p, int argc, char *const *argv);

/* The "provenance" object (key NULL inside an array). init-only. */
void drths_provenance_json(drths_json_t *j, const char *key, const drths_provenance_t *p);

/* Writes dir/provenance.json ({"provenance": {...}}). Returns 0 or a negative errno. */
int drths_provenance_write(const char *dir, const drths_provenance_t *p, drths_error_t *err);

/* Copies the ground motion record at record_path into the run folder dir, at the path the
 * experiment file names it by (as_written) when that is relative and stays inside the folder,
 * so the folder's experiment.yaml finds it; else as records/<file name> (the copy of the
 * experiment file then still names the original). rel gets the copy's path relative to dir.
 * Returns 0 or a negative errno. */
int drths_runfolder_copy_record(const char *dir, const char *record_path, const char *as_written,
                                char *rel, size_t cap, drths_error_t *err);

/* -EEXIST with a sentence naming the file when dir holds a file a run writes (summary.json,
 * provenance.json, a site's .bin or .csv, a report, the reserve file of a run killed before
 * its end): a new run there could leave an earlier run's summary beside its own records (a run
 * killed with -9 writes none), so a folder is used once. Other files (the experiment and its
 * record, notes) do not count. 0 otherwise. */
int drths_runfolder_check_unused(const char *dir, drths_error_t *err);

/* mkdir -p. */
int drths_mkdirs(const char *path, drths_error_t *err);

/* Joins folder and file name into out; -ENAMETOOLONG if it does not fit. */
int drths_path_join(char *out, size_t cap, const char *dir, const char *name);

/* drths_json_file_open for the file name in the run folder dir; path (cap bytes) receives its
 * path, for drths_json_file_close. 0, -ENAMETOOLONG or -errno (err says which). */
int drths_runfolder_json_open(drths_json_t *j, const char *dir, const char *name, char *path,
                              size_t cap, drths_error_t *err);

#endif
