/* Symbolisation of trace addresses (see hmt_symbols.h). */
#include "config.h"
#include "hmt_symbols.h"
#include "hmt_map.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#endif

/* libstdc++'s demangler (the tools link libstdc++ for it) */
extern char *__cxa_demangle(const char *mangled, char *out, size_t *len, int *status);

typedef struct {
  char *path;
  uint8_t build_id[64];
  size_t idlen;
  int state;  /* 0 not opened, 1 usable, -1 unusable */
#ifdef HAVE_LIBDW
  Dwfl *dwfl;
  Dwfl_Module *mod;
#endif
} modrec_t;

struct hmt_symtab {
  int method;
  modrec_t *mods;
  size_t nmods;
  hmt_map_t mod_index;  /* hash of path + build id -> index */
  hmt_map_t cache;      /* (module index, file address) -> symbol index */
  hmt_sym_t **chunks;   /* symbols in fixed chunks: a pointer handed out stays valid */
  size_t nsyms, nchunks;
  char **warnings;
  size_t nwarnings;
};

/* Callers keep the pointers hmt_sym_lookup returns while they look up more
 * frames, so the symbols never move: they live in chunks that are never
 * reallocated, only the small chunk index is. */
enum { SYM_CHUNK = 1024 };
static hmt_sym_t *sym_at(const struct hmt_symtab *s, size_t i) { return &s->chunks[i / SYM_CHUNK][i % SYM_CHUNK]; }

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 0x100000001b3ULL; }
  return h;
}

static void warn(hmt_symtab_t *s, const char *fmt, const char *a, const char *b) {
  char buf[1024];
  snprintf(buf, sizeof buf, fmt, a, b ? b : "");
  char **w = realloc(s->warnings, (s->nwarnings + 1) * sizeof *w);
  if (!w) return;
  s->warnings = w;
  if ((w[s->nwarnings] = strdup(buf))) s->nwarnings++;
}

hmt_symtab_t *hmt_sym_new(int method) {
  hmt_symtab_t *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  if (method == HMT_SYM_AUTO) {
#ifdef HAVE_LIBDW
    method = HMT_SYM_LIBDW;
#else
    method = HMT_SYM_ADDR2LINE;
#endif
  }
#ifndef HAVE_LIBDW
  if (method == HMT_SYM_LIBDW) method = HMT_SYM_ADDR2LINE;
#endif
  s->method = method;
  return s;
}

const char *hmt_sym_method(const hmt_symtab_t *s) {
  return s->method == HMT_SYM_LIBDW ? "libdw" : s->method == HMT_SYM_ADDR2LINE ? "addr2line" : "none";
}

void hmt_sym_free(hmt_symtab_t *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nmods; i++) {
#ifdef HAVE_LIBDW
    if (s->mods[i].dwfl) dwfl_end(s->mods[i].dwfl);
#endif
    free(s->mods[i].path);
  }
  free(s->mods);
  for (size_t i = 0; i < s->nsyms; i++) {
    hmt_sym_t *y = sym_at(s, i);
    for (int k = 0; k < y->ninl; k++) {
      free((char *)y->inl[k].function);
      free((char *)y->inl[k].file);
      free((char *)y->inl[k].decl_file);
    }
    free((void *)y->inl);
    free((char *)y->function);
    free((char *)y->file);
    free((char *)y->decl_file);
  }
  for (size_t i = 0; i < s->nchunks; i++) free(s->chunks[i]);
  free(s->chunks);
  for (size_t i = 0; i < s->nwarnings; i++) free(s->warnings[i]);
  free(s->warnings);
  hmt_map_free(&s->mod_index);
  hmt_map_free(&s->cache);
  free(s);
}

size_t hmt_sym_warnings(const hmt_symtab_t *s) { return s->nwarnings; }
const char *hmt_sym_warning(const hmt_symtab_t *s, size_t i) { return i < s->nwarnings ? s->warnings[i] : ""; }

/* The module record for a trace module (same file + build id = same record). */
static long module_index(hmt_symtab_t *s, const hmt_module_t *m) {
  uint64_t h = hash_bytes(m->path, strlen(m->path), 0xcbf29ce484222325ULL);
  h = hash_bytes(m->build_id, m->build_id_len, h);
  uint64_t k = h;
  for (;; k++) {  /* equal hashes of different files take the next keys */
    if (k == HMT_MAP_EMPTY) k = 0;
    uint64_t *v = hmt_map_get(&s->mod_index, k);
    if (!v) break;
    modrec_t *r = &s->mods[*v];
    if (strcmp(r->path, m->path) == 0 && r->idlen == m->build_id_len && memcmp(r->build_id, m->build_id, r->idlen) == 0)
      return (long)*v;
  }
  modrec_t *n = realloc(s->mods, (s->nmods + 1) * sizeof *n);
  if (!n) return -1;
  s->mods = n;
  modrec_t *r = &s->mods[s->nmods];
  memset(r, 0, sizeof *r);
  if (!(r->path = strdup(m->path))) return -1;
  memcpy(r->build_id, m->build_id, m->build_id_len);
  r->idlen = m->build_id_len;
  uint64_t *v = hmt_map_put(&s->mod_index, k, NULL);
  if (!v) return -1;
  *v = s->nmods;
  return (long)s->nmods++;
}

static char *demangle(const char *name) {
  if (!name) return NULL;
  /* symbol versions (memcpy@@GLIBC_2.14) are not part of the name */
  char plain[1024];
  size_t n = strcspn(name, "@");
  if (n >= sizeof plain) n = sizeof plain - 1;
  memcpy(plain, name, n);
  plain[n] = 0;
  int status = -1;
  char *d = (plain[0] == '_' && plain[1] == 'Z') ? __cxa_demangle(plain, NULL, NULL, &status) : NULL;
  return status == 0 && d ? d : strdup(plain);
}

static const char *base_name(const char *p) {
  const char *b = strrchr(p, '/');
  return b ? b + 1 : p;
}

#ifdef HAVE_LIBDW
static int open_module(hmt_symtab_t *s, modrec_t *r) {
  static char *debuginfo_path = NULL;
  static const Dwfl_Callbacks cb = {
      .find_elf = dwfl_build_id_find_elf,
      .find_debuginfo = dwfl_standard_find_debuginfo,
      .section_address = dwfl_offline_section_address,
      .debuginfo_path = &debuginfo_path,
  };
  if (r->path[0] != '/' || access(r->path, R_OK) != 0) {
    /* the vdso and objects gone since the run */
    if (r->path[0] == '/') warn(s, "%s: cannot read it (%s); its frames stay addresses", r->path, strerror(errno));
    return -1;
  }
  if (!(r->dwfl = dwfl_begin(&cb))) return -1;
  dwfl_report_begin(r->dwfl);
  r->mod = dwfl_report_elf(r->dwfl, base_name(r->path), r->path, -1, 0, false);
  dwfl_report_end(r->dwfl, NULL, NULL);
  if (!r->mod) {
    warn(s, "%s: not an ELF file libdw can read: %s", r->path, dwfl_errmsg(-1));
    return -1;
  }
  GElf_Addr bias;
  dwfl_module_getelf(r->mod, &bias);
  const unsigned char *bits;
  GElf_Addr vaddr;
  int n = dwfl_module_build_id(r->mod, &bits, &vaddr);
  if (r->idlen && (n != (int)r->idlen || memcmp(bits, r->build_id, r->idlen) != 0)) {
    warn(s, "%s: changed since the run (its build id differs); its frames stay addresses%s", r->path, NULL);
    return -1;
  }
  return 0;
}

/* The name of a subprogram or inlined instance: its linkage name
 * demangled when it has one (C++: qualified, as the symbol table has it),
 * else its DW_AT_name -- through the abstract origin for an inlined copy. */
static char *die_function(Dwarf_Die *d) {
  Dwarf_Attribute at;
  const char *link = dwarf_formstring(dwarf_attr_integrate(d, DW_AT_linkage_name, &at));
  if (!link) link = dwarf_formstring(dwarf_attr_integrate(d, DW_AT_MIPS_linkage_name, &at));
  if (link) return demangle(link);
  const char *name = dwarf_diename(d);
  return name ? strdup(name) : NULL;
}

/* The file and line of the call an inlined instance stands for. */
static int call_site(Dwarf_Die *cu, Dwarf_Die *inl, char **file, int *line) {
  Dwarf_Attribute at;
  Dwarf_Word f = 0, l = 0;
  Dwarf_Files *files;
  size_t nfiles;
  if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &at), &f) != 0 ||
      dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &at), &l) != 0 || dwarf_getsrcfiles(cu, &files, &nfiles) != 0 ||
      f >= nfiles)
    return -1;
  const char *src = dwarf_filesrc(files, f, NULL, NULL);
  if (!src) return -1;
  *file = strdup(src);
  *line = (int)l;
  return 0;
}

/* Inlined code: one return address stands for several calls.  dwarf_getscopes
 * gives the scopes around the address innermost first; for code inlined it
 * follows the inlined function's abstract tree past the innermost instance,
 * so the concrete chain up to the real function comes from
 * dwarf_getscopes_die of that instance.  Each DW_TAG_inlined_subroutine becomes an entry of out->inl
 * (name, and the line in it: the line table's for the innermost, the call
 * of the next inner one for the others); the real function gets the line
 * of the outermost inlined call (std::vector's allocate inlined into
 * assemble() shows at the line of assemble that calls push_back) and the
 * file it is defined in. */
static void lookup_dwarf(Dwfl_Module *mod, GElf_Addr a, hmt_sym_t *out) {
  Dwarf_Addr bias = 0;
  Dwarf_Die *cu = dwfl_module_addrdie(mod, a, &bias);
  if (!cu) return;  /* no debug information covers it: no line, rather than a wrong one */
  Dwfl_Line *l = dwfl_module_getsrc(mod, a);
  char *src_file = NULL;
  int src_line = 0;
  if (l) {
    const char *src = dwfl_lineinfo(l, NULL, &src_line, NULL, NULL, NULL);
    if (src) src_file = strdup(src);
  }
  Dwarf_Die *scopes = NULL;
  int n = dwarf_getscopes(cu, a - bias, &scopes);
  /* the innermost inlined instance (lexical blocks may come first) */
  int i0 = 0;
  while (i0 < n && dwarf_tag(&scopes[i0]) != DW_TAG_inlined_subroutine && dwarf_tag(&scopes[i0]) != DW_TAG_subprogram) i0++;
  if (i0 < n && dwarf_tag(&scopes[i0]) == DW_TAG_inlined_subroutine) {
    Dwarf_Die *chain = NULL;
    int k = dwarf_getscopes_die(&scopes[i0], &chain);
    if (k > 0) { free(scopes); scopes = chain; n = k; }
    else free(chain);
  }
  int sub = -1, ninl = 0;
  for (int i = 0; i < n; i++) {
    int tag = dwarf_tag(&scopes[i]);
    if (tag == DW_TAG_subprogram) { sub = i; break; }
    if (tag == DW_TAG_inlined_subroutine) ninl++;
  }
  hmt_sym_t *inl = ninl ? calloc((size_t)ninl, sizeof *inl) : NULL;
  char *file = src_file;  /* the location in the innermost scope so far */
  int line = src_line, k = 0;
  for (int i = 0; i < n && (sub < 0 || i < sub); i++) {
    if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine) continue;
    if (inl) {
      hmt_sym_t *e = &inl[k++];
      e->function = die_function(&scopes[i]);
      if (!e->function) e->function = strdup("?");
      e->known = 1;
      e->inlined = 1;
      e->module = out->module;
      e->file = file; e->line = line;
      const char *d = dwarf_decl_file(&scopes[i]);
      if (d) e->decl_file = strdup(d);
    } else {
      free(file);
    }
    file = NULL; line = 0;
    call_site(cu, &scopes[i], &file, &line);
  }
  out->inl = inl;
  out->ninl = inl ? k : 0;
  if (sub < 0 && !out->ninl) {
    /* in no function of the unit: code between its functions that has no
     * debug information (_start), whose nearest line would be a lie */
    free(file);
    file = NULL; line = 0;
  }
  out->file = file; out->line = line;
  if (sub >= 0) {
    const char *d = dwarf_decl_file(&scopes[sub]);
    if (d) out->decl_file = strdup(d);
  }
  free(scopes);
}

static int lookup_libdw(modrec_t *r, uint64_t faddr, hmt_sym_t *out) {
  GElf_Addr a = faddr;
  const char *name = dwfl_module_addrname(r->mod, a);
  if (name) { out->function = demangle(name); out->known = 1; }
  lookup_dwarf(r->mod, a, out);
  return 0;
}
#endif

/* addr2line for one address: run once per address (no libdw builds only;
 * slow, but the report symbolises only the stacks it prints). */
static int lookup_addr2line(modrec_t *r, uint64_t faddr, hmt_sym_t *out) {
  if (r->path[0] != '/' || access(r->path, R_OK) != 0) return -1;
  char cmd[8192];
  /* the path is quoted for the shell: refuse quotes in it */
  if (strchr(r->path, '\'')) return -1;
  snprintf(cmd, sizeof cmd, "addr2line -f -C -e '%s' 0x%llx 2>/dev/null", r->path, (unsigned long long)faddr);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  char fn[4096] = "", loc[4096] = "";
  if (fgets(fn, sizeof fn, p) && fgets(loc, sizeof loc, p)) {
    fn[strcspn(fn, "\n")] = 0;
    loc[strcspn(loc, "\n")] = 0;
    if (strcmp(fn, "??") != 0) { out->function = strdup(fn); out->known = 1; }
    char *colon = strrchr(loc, ':');
    if (colon && loc[0] != '?') {
      *colon = 0;
      out->file = strdup(loc);
      out->line = atoi(colon + 1);
    }
  }
  pclose(p);
  return 0;
}

const hmt_sym_t *hmt_sym_lookup(hmt_symtab_t *s, const hmt_reader_t *rd, uint64_t addr) {
  static hmt_sym_t unknown = {.function = "?", .module = "?"};
  const hmt_module_t *m = hmt_module_of(rd, addr);
  uint64_t pc = addr ? addr - 1 : 0;  /* return address: the call is just before */
  long mi = m ? module_index(s, m) : -1;
  uint64_t faddr = m ? pc - m->bias : pc;
  uint64_t key = ((uint64_t)(mi + 1) << 44) ^ faddr;
  if (key == HMT_MAP_EMPTY) key = 0;
  uint64_t *v = hmt_map_get(&s->cache, key);
  if (v) return sym_at(s, *v);
  if (s->nsyms == s->nchunks * SYM_CHUNK) {
    hmt_sym_t **c = realloc(s->chunks, (s->nchunks + 1) * sizeof *c);
    if (!c) return &unknown;
    s->chunks = c;
    if (!(c[s->nchunks] = malloc(SYM_CHUNK * sizeof **c))) return &unknown;
    s->nchunks++;
  }
  hmt_sym_t *out = sym_at(s, s->nsyms);
  memset(out, 0, sizeof *out);
  out->module = mi >= 0 ? s->mods[mi].path : "?";
  if (mi >= 0 && s->method != HMT_SYM_NONE) {
    modrec_t *r = &s->mods[mi];
    if (r->state == 0) {
#ifdef HAVE_LIBDW
      if (s->method == HMT_SYM_LIBDW) r->state = open_module(s, r) == 0 ? 1 : -1;
      else
#endif
        r->state = 1;
    }
    if (r->state == 1) {
#ifdef HAVE_LIBDW
      if (s->method == HMT_SYM_LIBDW) lookup_libdw(r, faddr, out);
      else
#endif
        lookup_addr2line(r, faddr, out);
    }
  }
  if (!out->function) {
    char buf[64];
    snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)(m ? faddr : addr));
    out->function = strdup(buf);
  }
  v = hmt_map_put(&s->cache, key, NULL);
  if (!v) return out;
  *v = s->nsyms++;
  return out;
}
