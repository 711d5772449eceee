/* drths-report on a characterization folder (drths-physical --characterize): the fit table
 * (parameter, value, standard uncertainty, the virtual specimen's true value and the error when
 * known), the force error per test, and the measured-against-model hysteresis loops as PNG
 * plots (gnuplot): force against displacement and force against velocity, one panel per damper
 * command at the protocol's largest sinusoid. Reads fit_parameters.csv, tests.csv and fit.csv
 * (site-physical/charz_mode.h); writes report.txt and report_charz_fx.png,
 * report_charz_fv.png into out_dir. docs/report.md describes it. init-only. */
#ifndef DRTHS_REPORT_CHARZ_H
#define DRTHS_REPORT_CHARZ_H

/* 1 when dir is a characterization folder (it holds fit_parameters.csv). */
int drths_report_is_charz(const char *dir);

/* The report of the characterization in dir. gnuplot: the executable, NULL for no plots.
 * Returns the exit code: 0, 1 (an output not written, gnuplot failed), 2 (an input missing or
 * malformed). */
int drths_report_charz(const char *dir, const char *out_dir, const char *gnuplot);

#endif
