/* The YAML line finder (config_internal.h drths_yamlline_find): the line of a key, found in the
 * file's text, so that an error about a field names the line a reader fixes. libcyaml reports
 * lines only for what it refuses itself; the loader's own checks run on converted values, long
 * after the parser is gone, and find the line here from the field's path.
 *
 * Only block-style YAML is followed (what experiment files use); where the search is not sure
 * (flow style, a key that is absent) it finds nothing and the message goes without a line.
 */
#include "common/config/config_internal.h"

#include <stdlib.h>
#include <string.h>

/* The text searched. */
typedef struct {
    const char *text;
    size_t len;
} ytext_t;

/* The indentation of the line from q to eol, counting a block sequence's "- " as indentation
 * (the first key of a sequence entry stands on the dash's line, or on the next line after a
 * dash alone); *q moves past it. *dash is 1 + the first dash's column, 0 without one. */
static int indent_of(const char *text, size_t *q, size_t eol, int *dash)
{
    int indent = 0;
    *dash = 0;
    for (;;) {
        while (*q < eol && text[*q] == ' ') {
            (*q)++;
            indent++;
        }
        if (*q < eol && text[*q] == '-' && (*q + 1 == eol || text[*q + 1] == ' ')) {
            if (!*dash)
                *dash = indent + 1; /* 1 + the dash's column */
            (*q)++;
            indent++;
            continue;
        }
        return indent;
    }
}

/* One line of the text from pos: where it ends and where its content starts (q), its
 * indentation and dash (as indent_of), the column that places it in the blocks (col: its first
 * dash's, else its indentation), whether it is blank or a comment, and the position of the next
 * line. */
typedef struct yline {
    size_t eol, q, next;
    int indent, dash, col, blank;
} yline_t;

static void read_line(const ytext_t *c, size_t pos, yline_t *l)
{
    l->eol = pos;
    while (l->eol < c->len && c->text[l->eol] != '\n')
        l->eol++;
    l->q = pos;
    l->indent = indent_of(c->text, &l->q, l->eol, &l->dash);
    l->col = l->dash ? l->dash - 1 : l->indent;
    l->blank = (l->q == l->eol && !l->dash) || (l->q < l->eol && c->text[l->q] == '#');
    l->next = l->eol < c->len ? l->eol + 1 : l->eol;
}

/* The path after the index ("[2]") p starts with. */
static const char *past_index(const char *p)
{
    while (*p && *p != ']')
        p++;
    return *p == ']' ? p + 1 : p;
}

int drths_yamlline_find(const char *text, size_t len, const char *path)
{
    const ytext_t doc = {text, len}, *c = &doc;
    if (!c->text || !path || !*path)
        return 0;
    size_t pos = 0; /* search from this byte */
    int line = 1;   /* line number at pos */
    int parent_indent = -1;
    const char *p = path;
    int found_line = 0;
    size_t entry_pos = (size_t)-1; /* the dash line of the sequence entry searched in */
    while (*p) {
        char key[128];
        size_t k = 0;
        while (*p && *p != '.' && *p != '[' && k + 1 < sizeof key)
            key[k++] = *p++;
        key[k] = '\0';
        if (k == 0)
            return 0;
        /* Scan lines from pos. */
        int hit = 0;
        for (yline_t l; !hit && pos < c->len; pos = l.next, line++) {
            read_line(c, pos, &l);
            if (!l.blank && pos != entry_pos && l.col <= parent_indent)
                return 0; /* left the parent's block */
            if (!l.blank && l.eol - l.q > k && memcmp(c->text + l.q, key, k) == 0) {
                size_t r = l.q + k;
                while (r < l.eol && c->text[r] == ' ')
                    r++;
                if (r < l.eol && c->text[r] == ':') {
                    hit = 1;
                    parent_indent = l.indent;
                    found_line = line;
                }
            }
        }
        if (!hit)
            return 0;
        /* An index of a block sequence: the entry's first line is its dash line, which the
         * next key is searched from (so it may stand on it). Flow style is not followed. */
        while (*p == '[') {
            long want = strtol(p + 1, NULL, 10);
            p = past_index(p);
            int dash_col = -1;
            long seen = -1;
            int found = 0;
            for (yline_t l; pos < c->len; pos = l.next, line++) {
                read_line(c, pos, &l);
                /* The entries' dashes may stand at the key's own column (YAML allows it), so
                 * only a dash left of it, or another line not deeper, ends the sequence. */
                if (!l.blank && (l.dash ? l.col < parent_indent : l.col <= parent_indent))
                    break;
                if (!l.blank && l.dash && (dash_col < 0 || l.col == dash_col)) {
                    dash_col = l.col;
                    if (++seen == want) {
                        found = 1;
                        found_line = line;
                        parent_indent = dash_col;
                        entry_pos = pos;
                        break; /* pos stays on the dash line */
                    }
                }
            }
            if (!found) {
                /* A flow sequence ([a, b]) or a short one: the key's line is the line of an
                 * element; a key inside an element is not searched for (it could be another
                 * element's). */
                while (*p == '[')
                    p = past_index(p);
                return *p ? 0 : found_line;
            }
        }
        if (*p == '.')
            p++;
    }
    return found_line;
}
