/* The options table (see options.h): parsing, defaults, printing.
 * Runs inside the allocator's initialisation, so it never allocates. */
#include "config.h"
/* Start-up code, run once a process: compiled for size, so that the code
 * every process runs fits one 64 KiB window with room (src/hot-text.ld;
 * these four files at -Os: 5.8 KiB less of it, docs/footprint.md). */
#pragma GCC optimize("Os")
#include "util/options.h"
#include "util/log.h"
#include "util/startdata.h"
#include "hpcmem.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

/* The names, defaults and choices, which every process reads at start
 * (util/startdata.h), as one object of char arrays; the help texts stay
 * string literals in .rodata. */
static const struct {
#define HPCMEM_OPT_TEXT_(id, type, def, min, max, choices, help) \
  char id##_name[sizeof #id], id##_def[sizeof def], id##_choices[sizeof choices];
  HPCMEM_OPTIONS(HPCMEM_OPT_TEXT_)
#undef HPCMEM_OPT_TEXT_
} opt_text HPCMEM_START_TEXT = {
#define HPCMEM_OPT_TEXT_(id, type, def, min, max, choices, help) #id, def, choices,
  HPCMEM_OPTIONS(HPCMEM_OPT_TEXT_)
#undef HPCMEM_OPT_TEXT_
};

const hpcmem_opt_desc_t _hpcmem_opt_desc[HPCMEM_OPT_COUNT_] = {
#define HPCMEM_OPT_DESC_(id, type, def, min, max, choices, help) \
  {opt_text.id##_name, HPCMEM_OT_##type, opt_text.id##_def, min, max, opt_text.id##_choices, help},
  HPCMEM_OPTIONS(HPCMEM_OPT_DESC_)
#undef HPCMEM_OPT_DESC_
};

long long _hpcmem_opt_values[HPCMEM_OPT_COUNT_];
char _hpcmem_opt_strings[HPCMEM_OPT_COUNT_][HPCMEM_OPT_STR_MAX];
const char *_hpcmem_opt_text[HPCMEM_OPT_COUNT_];

static const char *type_name(hpcmem_opt_type_t t) {
  static const char *names[] = {"bool", "int", "size", "enum", "string", "size (power of two)"};
  return names[t];
}

/* ASCII case-insensitive equality of n bytes.  Not strncasecmp: the options
 * are parsed in every process at start, and libc's case folding brings its
 * own code and locale tables into memory (two more 64 KiB windows of libc
 * resident; docs/footprint.md).  The C locale folds ASCII only anyway. */
static int ascii_ncase_eq(const char *a, const char *b, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];
    if ((unsigned)(x - 'A') < 26u) x |= 0x20;
    if ((unsigned)(y - 'A') < 26u) y |= 0x20;
    if (x != y) return 0;
  }
  return 1;
}

static int parse_bool(const char *s, long long *out) {
  static const char words[2][4][6] HPCMEM_START_TEXT = {{"0", "no", "off", "false"}, {"1", "yes", "on", "true"}};
  size_t n = strlen(s) + 1;             /* with the terminator: whole words only */
  if (n > sizeof words[0][0]) return -EINVAL;
  for (int v = 0; v < 2; v++)
    for (int i = 0; i < 4; i++)
      if (ascii_ncase_eq(s, words[v][i], n)) { *out = v; return 0; }
  return -EINVAL;
}

/* Decimal number with an optional K/M/G (binary) suffix when sized. */
static int parse_number(const char *s, int sized, long long *out) {
  const char *p = s;
  unsigned long long v = 0;
  if (*p < '0' || *p > '9') return -EINVAL;
  for (; *p >= '0' && *p <= '9'; p++) {
    if (v > (~0ULL >> 1) / 10) return -ERANGE;
    v = v * 10 + (unsigned)(*p - '0');
  }
  unsigned shift = 0;
  if (sized && *p) {
    switch (*p | 0x20) { case 'k': shift = 10; break; case 'm': shift = 20; break;
                         case 'g': shift = 30; break; default: return -EINVAL; }
    p++;
    if ((*p | 0x20) == 'i') p++;        /* KiB-style spellings: 4Ki, 4KiB */
    if ((*p | 0x20) == 'b') p++;
  }
  if (*p) return -EINVAL;
  if (shift && v > ((~0ULL >> 1) >> shift)) return -ERANGE;
  *out = (long long)(v << shift);
  return 0;
}

static int parse_enum(const char *choices, const char *s, long long *out) {
  long long idx = 0;
  size_t n = strlen(s);
  for (const char *c = choices; *c; idx++) {
    const char *end = strchr(c, '|');
    size_t len = end ? (size_t)(end - c) : strlen(c);
    if (len == n && ascii_ncase_eq(c, s, n)) { *out = idx; return 0; }
    if (!end) break;
    c = end + 1;
  }
  return -EINVAL;
}

int _hpcmem_option_parse(int id, const char *text, long long *out) {
  if (id < 0 || id >= HPCMEM_OPT_COUNT_ || !text || !out) return -EINVAL;
  const hpcmem_opt_desc_t *d = &_hpcmem_opt_desc[id];
  int rc;
  switch (d->type) {
  case HPCMEM_OT_BOOL: return parse_bool(text, out);
  case HPCMEM_OT_ENUM: return parse_enum(d->choices, text, out);
  case HPCMEM_OT_STRING: *out = 0; return strlen(text) < HPCMEM_OPT_STR_MAX ? 0 : -ERANGE;
  default: break;
  }
  rc = parse_number(text, d->type != HPCMEM_OT_INT, out);
  if (rc) return rc;
  if (*out < d->min || *out > d->max) return -ERANGE;
  if (d->type == HPCMEM_OT_POW2 && (*out & (*out - 1))) return -ERANGE;
  return 0;
}

/* "accepted: ..." part of a warning: names the range or the choices. */
static void describe_range(const hpcmem_opt_desc_t *d, char *buf, size_t len) {
  switch (d->type) {
  case HPCMEM_OT_BOOL: snprintf(buf, len, "0/1, yes/no, on/off, true/false"); break;
  case HPCMEM_OT_ENUM: snprintf(buf, len, "one of %s", d->choices); break;
  case HPCMEM_OT_STRING: snprintf(buf, len, "at most %d characters", HPCMEM_OPT_STR_MAX - 1); break;
  case HPCMEM_OT_INT: snprintf(buf, len, "an integer from %lld to %lld", d->min, d->max); break;
  default:
    snprintf(buf, len, "%s from %lld to %lld bytes (K/M/G suffixes allowed)",
             d->type == HPCMEM_OT_POW2 ? "a power of two" : "a size", d->min, d->max);
  }
}

/* A default's text is the table's own; a value from the environment is
 * copied (the environment may change).  Copying every default wrote 7 KiB
 * of .bss (two pages) in every process. */
static void set_value(int id, const char *text, long long v, int copy) {
  _hpcmem_opt_values[id] = v;
  if (!copy) {
    _hpcmem_opt_text[id] = text;
    return;
  }
  _hpcmem_opt_text[id] = _hpcmem_opt_strings[id];
  size_t n = strlen(text);
  if (n >= HPCMEM_OPT_STR_MAX) n = HPCMEM_OPT_STR_MAX - 1;
  memcpy(_hpcmem_opt_strings[id], text, n);
  _hpcmem_opt_strings[id][n] = 0;
}

void _hpcmem_options_load(char *const *env) {
  for (int id = 0; id < HPCMEM_OPT_COUNT_; id++) {
    long long v = 0;
    _hpcmem_option_parse(id, _hpcmem_opt_desc[id].def, &v);
    set_value(id, _hpcmem_opt_desc[id].def, v, 0);
  }
  for (char *const *e = env; e && *e; e++) {
    if (strncmp(*e, HPCMEM_START_STR("HPCMEM_"), 7) != 0) continue;
    const char *name = *e + 7, *eq = strchr(name, '=');
    if (!eq) continue;
    size_t nlen = (size_t)(eq - name);
    int id = -1;
    for (int i = 0; i < HPCMEM_OPT_COUNT_; i++)
      if (strlen(_hpcmem_opt_desc[i].name) == nlen && strncmp(_hpcmem_opt_desc[i].name, name, nlen) == 0) id = i;
    if (id < 0) {
      _hpcmem_warn("unknown variable HPCMEM_%.*s is ignored (see docs/environment.md)", (int)nlen, name);
      continue;
    }
    long long v;
    const hpcmem_opt_desc_t *d = &_hpcmem_opt_desc[id];
    if (_hpcmem_option_parse(id, eq + 1, &v) == 0) { set_value(id, eq + 1, v, 1); continue; }
    char range[160];
    describe_range(d, range, sizeof range);
    _hpcmem_warn("HPCMEM_%s='%.64s' is not valid (accepted: %s); using the default %s",
                 d->name, eq + 1, range, d->def[0] ? d->def : "(empty)");
  }
}

void _hpcmem_options_init(void) {
  static int done;
  if (done) return;
  done = 1;
  _hpcmem_options_load(environ);
  if (_hpcmem_opt(VERBOSE)) hpcmem_options_print(stderr, 0);
}

int _hpcmem_option_format(int id, char *buf, size_t len) {
  if (id < 0 || id >= HPCMEM_OPT_COUNT_ || !buf || len == 0) return -EINVAL;
  const hpcmem_opt_desc_t *d = &_hpcmem_opt_desc[id];
  int n;
  if (d->type == HPCMEM_OT_STRING) n = snprintf(buf, len, "%s", _hpcmem_opt_text[id] ? _hpcmem_opt_text[id] : "");
  else if (d->type == HPCMEM_OT_ENUM) {
    const char *c = d->choices;
    for (long long i = 0; i < _hpcmem_opt_values[id]; i++) c = strchr(c, '|') + 1;
    const char *end = strchr(c, '|');
    n = snprintf(buf, len, "%.*s", end ? (int)(end - c) : (int)strlen(c), c);
  } else n = snprintf(buf, len, "%lld", _hpcmem_opt_values[id]);
  return (size_t)n < len ? 0 : -ERANGE;
}

int hpcmem_option(const char *name, char *buf, size_t len) {
  if (!name || !buf || len == 0) return -EINVAL;
  _hpcmem_options_init();
  if (strncmp(name, "HPCMEM_", 7) == 0) name += 7;
  for (int id = 0; id < HPCMEM_OPT_COUNT_; id++)
    if (strcmp(_hpcmem_opt_desc[id].name, name) == 0) return _hpcmem_option_format(id, buf, len);
  return -ENOENT;
}

/* Written with the stack-formatting logger so that it is safe during
 * initialisation; `out` only selects the file descriptor. */
int hpcmem_options_print(FILE *out, int markdown) {
  if (!out) return -EINVAL;
  int fd = fileno(out);
  char line[768], range[160], val[HPCMEM_OPT_STR_MAX];
  if (markdown) {
    static const char head[] = "| variable | type | default | accepted | meaning |\n|---|---|---|---|---|\n";
    fflush(out);
    _hpcmem_write_all(fd, head, sizeof head - 1);
  }
  for (int id = 0; id < HPCMEM_OPT_COUNT_; id++) {
    const hpcmem_opt_desc_t *d = &_hpcmem_opt_desc[id];
    int n;
    if (markdown) {
      describe_range(d, range, sizeof range);
      n = snprintf(line, sizeof line, "| `HPCMEM_%s` | %s | `%s` | %s | %s |\n", d->name,
                   type_name(d->type), d->def, range, d->help);
    } else {
      _hpcmem_option_format(id, val, sizeof val);
      n = snprintf(line, sizeof line, "libhpcmem: HPCMEM_%s=%s\n", d->name, val);
    }
    _hpcmem_write_all(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  }
  return 0;
}
