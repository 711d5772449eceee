/* The command line of every drths program: one error style, range-checked numbers, one --help
 * layout and --version.
 *
 * Every message a program prints about its command line or its files has the form
 *     drths-physical: --cpu: '9x' is not an integer in 0..4095
 * (program name, then the option or field, then what is wrong with the value given), so a user
 * who mistypes an option reads what to change without opening --help. The parsers print that
 * message themselves and return -1; main() then returns DRTHS_EXIT_USAGE. They are for main()
 * only: library code never prints (it fills a drths_error_t instead).
 *
 * --help layout (GNU conventions), on stdout: "usage:" lines, a few lines saying what the program
 * does, a blank line, one line per option with its argument in capitals (-h, --help and
 * --version last), a blank line, any longer notes followed by a blank line, then
 * drths_cli_print_exit_codes. --version prints "PROGRAM (drths) VERSION" on stdout
 * (drths_cli_print_version) and exits 0. A program sets argv[0] to its name before
 * getopt_long, so that getopt's own messages (unknown option, missing value) name it as every
 * other message does rather than the path it was started by.
 *
 * All functions are init-only (they may print and allocate nothing else).
 */
#ifndef DRTHS_CLI_H
#define DRTHS_CLI_H

#include <stdio.h>

/* Exit codes of every program (documented in each --help by drths_cli_print_exit_codes). */
#define DRTHS_EXIT_OK 0
#define DRTHS_EXIT_FAILED 1 /* the run or the work failed (no peer, HOLD, I/O error, ...) */
#define DRTHS_EXIT_USAGE 2  /* a wrong option, argument or file, refused before anything ran */

/* The version of this build: CMake's project(VERSION), followed by the git description of the
 * source tree it was built from when there is one ("0.1.0 (git f1ff247-dirty)"). The same string
 * is in --version, in the software field of HELLO and in both sites' summary.json. */
const char *drths_version(void);

/* "PROGRAM (drths) VERSION\n" on stdout. */
void drths_cli_print_version(const char *prog);

/* The exit-code paragraph that ends every --help; `failed` says what exit 1 means for this
 * program (for example "the run failed (no peer, peer lost, abort, HOLD)"). */
void drths_cli_print_exit_codes(FILE *f, const char *failed);

/* "PROGRAM: " + the formatted message + "\n" on stderr. Returns DRTHS_EXIT_USAGE, so that
 * `return drths_cli_usage_error(...)` ends main() with the right code. */
int drths_cli_usage_error(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "PROGRAM: " + the formatted message + "\n" on stderr, for an error that is not the command
 * line's (a file that cannot be written, a peer that does not answer). Returns
 * DRTHS_EXIT_FAILED. */
int drths_cli_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "PROGRAM: warning: " + the formatted message + "\n" on stderr. */
void drths_cli_warning(const char *prog, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Parse text as a decimal integer in [lo, hi] into *out. On anything else (empty, trailing
 * characters, out of range) prints "PROGRAM: OPT: 'TEXT' is not an integer in LO..HI" and returns
 * -1; *out is left alone. */
int drths_cli_long(const char *prog, const char *opt, const char *text, long lo, long hi,
                   long *out);

/* Parse text as a finite number in [lo, hi] into *out; otherwise prints "PROGRAM: OPT: 'TEXT' is
 * not a number from LO to HI" (with UNIT after each bound when unit is not NULL) and returns -1. */
int drths_cli_double(const char *prog, const char *opt, const char *text, double lo, double hi,
                     const char *unit, double *out);

/* A finite number > 0 (seconds, rates, amplitudes); otherwise prints "PROGRAM: OPT: 'TEXT' is not
 * a positive number[ of UNIT]" and returns -1. */
int drths_cli_positive(const char *prog, const char *opt, const char *text, const char *unit,
                       double *out);

/* The index of text in the NULL-terminated list names; otherwise prints "PROGRAM: OPT: 'TEXT' is
 * not one of a, b, c" and returns -1. */
int drths_cli_choice(const char *prog, const char *opt, const char *text,
                     const char *const *names);

/* getopt_long code of --version (above every character and every program's own codes), and
 * the two long options every program has: put DRTHS_CLI_OPTIONS_COMMON before the terminating
 * zero entry of its struct option array. */
#define DRTHS_CLI_OPT_VERSION 0x7000
#define DRTHS_CLI_OPTIONS_COMMON                                                                   \
    {"help", no_argument, NULL, 'h'}, { "version", no_argument, NULL, DRTHS_CLI_OPT_VERSION }

/* The default branch of every program's option switch: -h / --help prints usage(stdout) and
 * returns DRTHS_EXIT_OK, --version prints the version and returns DRTHS_EXIT_OK, anything else
 * (an unknown option or a missing value, which getopt has printed) is drths_cli_bad_option. */
int drths_cli_other_option(const char *prog, int c, void (*usage)(FILE *));

/* What every program does with getopt_long's leftovers: an unknown option or a missing value
 * (getopt has printed it) gets "Try 'PROGRAM --help'."; a stray argument gets "PROGRAM:
 * unexpected argument 'X' (see --help)". Returns DRTHS_EXIT_USAGE. */
int drths_cli_bad_option(const char *prog);
int drths_cli_unexpected_argument(const char *prog, const char *arg);

#endif
