/* The per-site link table of a numerical run of several links (PROTOCOL.md section 12): one row
 * per actuator site, from the numerical record's per-link columns and the run's summary.json.
 *
 * A numerical site holding several links records each link's columns as "<site>.<name>"
 * (docs/experiment-file.md, "sites"); for each site with a "<site>.fb_concealed" column this
 * module takes, over the rows of numerical.csv:
 *     round trip      statistics of "<site>.rtt_ms" (one sample per step, NaN rows left out)
 *     concealed       steps whose feedback from that site was concealed by its damper's Smith
 *                     predictor, their share and the longest run of them
 * and from summary.json's `links` array, matched by `site`: the L that link's probes needed
 * (`L_needed`) and its feedback wait (`feedback_wait_ms`); the run's one L is the top-level `L`
 * (the largest L_needed, PROTOCOL.md section 12). A record of one link (plain "fb_concealed")
 * has no site rows.
 *
 * Everything here is init-only (offline, after a run): the statistics allocate. Nothing keeps
 * a pointer into the table or the text after returning.
 */
#ifndef DRTHS_SITELINKS_H
#define DRTHS_SITELINKS_H

#include <stddef.h>
#include <stdio.h>

#include "common/platform/csvread.h"
#include "common/platform/error.h"
#include "common/platform/json.h"
#include "common/platform/metrics.h"

/* The most sites a table holds: the experiment file's DRTHS_EXPERIMENT_MAX_SITES. */
#define DRTHS_SITELINKS_MAX 8
/* A site's name with its NUL: the experiment file's DRTHS_SITE_NAME_MAX. */
#define DRTHS_SITELINKS_NAME_MAX 32

/* One site's link. */
typedef struct drths_site_link {
    char site[DRTHS_SITELINKS_NAME_MAX];
    long steps;                     /* rows of numerical.csv */
    drths_stats_t rtt_ms;           /* "<site>.rtt_ms" over the steps that have one */
    long fb_concealed;              /* steps whose feedback from this site was concealed */
    double fb_concealed_frac;       /* of steps; NaN without steps */
    long max_consecutive_concealed; /* longest run of concealed steps */
    int has_rtt;                    /* the record has "<site>.rtt_ms" */
    int L_needed;                   /* summary.json links[].L_needed; -1 when unknown */
    double feedback_wait_ms;        /* summary.json links[].feedback_wait_ms; NaN if unknown */
} drths_site_link_t;

/* Every site's link, in the record's column order (the file's site order). */
typedef struct drths_site_links {
    int n;            /* sites found; 0 for a record of one link */
    int L;            /* the run's L (summary.json's top-level L); -1 when unknown */
    int summary_read; /* summary.json was given and had a links array */
    drths_site_link_t s[DRTHS_SITELINKS_MAX];
} drths_site_links_t;

/* Fills out from num's "<site>.fb_concealed" and "<site>.rtt_ms" columns (n = 0 when it has
 * none), leaving the summary's figures unknown. 0, or -EINVAL (more than DRTHS_SITELINKS_MAX
 * sites, a site name too long) or -ENOMEM with err set. init-only. */
int drths_site_links_compute(const drths_csv_table_t *num, drths_site_links_t *out,
                             drths_error_t *err);

/* Adds the figures of a summary.json text (len bytes, need not be NUL-terminated): the
 * top-level L and each links[] entry's L_needed and feedback_wait_ms, matched to out's rows
 * by site. A text without a links array changes nothing but summary_read (0). A links entry
 * naming a site the record does not have is -EINVAL with err naming it (the summary is of
 * another run). init-only. */
int drths_site_links_read_summary(drths_site_links_t *out, const char *text, size_t len,
                                  const char *path, drths_error_t *err);

/* The table, one row per site, under the heading "Links (one per site)"; nothing when n is 0.
 * init-only. */
void drths_site_links_print(FILE *f, const drths_site_links_t *s);

/* "links": [...] into the open object of j; nothing when n is 0. init-only. */
void drths_site_links_json(drths_json_t *j, const drths_site_links_t *s);

#endif
